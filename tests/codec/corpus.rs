//! Acceptance: every recorded object with `b.json` and `b.cbor` round-trips
//! through the codec exactly as a CBOR-enabled kube-apiserver wrote it.

use crate::support::*;
use cborgate::codec::{
    cbor_to_json, json_to_cbor, CborToJsonOptions, JsonToCbor, JsonToCborOptions, Scan, StringMode,
};

fn cases() -> Vec<(String, bool)> {
    let dir = data().join("corpus/objects");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if !(p.join("b.json").exists() && p.join("b.cbor").exists()) {
            continue;
        }
        // Table cases recorded a 406 instead of CBOR: nothing to compare.
        let cbor = std::fs::read(p.join("b.cbor")).unwrap();
        if cbor.first() == Some(&b'{') {
            continue;
        }
        out.push((name.clone(), name.starts_with("watch")));
    }
    out.sort();
    assert!(
        out.len() >= 10,
        "expected the recorded corpus, found {out:?}"
    );
    out
}

fn read(case: &str, file: &str) -> Vec<u8> {
    std::fs::read(data().join("corpus/objects").join(case).join(file)).unwrap()
}

#[test]
fn json_to_cbor_matches_the_real_server() {
    for (case, watch) in cases() {
        let json = read(&case, "b.json");
        let opts = JsonToCborOptions {
            watch,
            ..Default::default()
        };
        let ours = json_to_cbor(&json, opts).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(
            &ours[..3],
            &[0xd9, 0xd9, 0xf7],
            "{case}: self-described tag"
        );
        for theirs in ["b.cbor", "b.cbor.2"] {
            let path = data().join("corpus/objects").join(&case).join(theirs);
            if !path.exists() {
                continue;
            }
            let theirs_bytes = std::fs::read(path).unwrap();
            assert_eq!(
                cbor_canon(&ours, true),
                cbor_canon(&theirs_bytes, true),
                "{case}/{theirs}: differs beyond map order and tag 22"
            );
            // Same length: map order aside, the only difference is tag 22
            // (2 bytes of tag + raw bytes vs base64 text).
            if !theirs_bytes.windows(1).any(|w| w[0] == 0xd6) {
                assert_eq!(ours.len(), theirs_bytes.len(), "{case}: size differs");
            }
        }
    }
}

/// With the kind's `[]byte` fields (docs/wire.md §2), the CBOR is the real server's, tag 22
/// and all: the same items map order aside, the same length. A ConfigMap and a Secret GET,
/// a ConfigMap LIST and a ConfigMap watch, each recorded from a CBOR-enabled kube-apiserver
/// 1.36.2. Any cut of the input, and every scanner level, gives the same bytes; so does a
/// small window, where strings longer than the window stay text.
#[test]
fn byte_fields_are_written_as_the_real_server_writes_them() {
    use cborgate::negotiate::byte_fields::typed_response;
    use cborgate::negotiate::Route;
    let schema = |path: &str| match Route::classify(path) {
        Route::Resource(r) => typed_response(&r),
        other => panic!("{other:?}"),
    };
    let cms = schema("/api/v1/namespaces/corpus/configmaps");
    let secrets = schema("/api/v1/namespaces/corpus/secrets");
    for (case, schema, watch, tags) in [
        ("configmap", cms, false, 2),
        ("secret", secrets, false, 3),
        ("configmaplist-bytes", cms, false, 4),
        ("watch-configmaps-bytes", cms, true, 4),
    ] {
        let json = read(case, "b.json");
        let opts = JsonToCborOptions {
            watch,
            schema,
            ..Default::default()
        };
        let ours = json_to_cbor(&json, opts).unwrap_or_else(|e| panic!("{case}: {e}"));
        let tagged = ours.iter().filter(|&&b| b == 0xd6).count();
        assert!(
            tagged >= tags,
            "{case}: {tagged} tag 22 bytes, want {tags} at least"
        );
        for theirs in ["b.cbor", "b.cbor.2"] {
            let theirs = read(case, theirs);
            assert_eq!(
                cbor_canon(&ours, false),
                cbor_canon(&theirs, false),
                "{case}: differs beyond map order"
            );
            assert_eq!(ours.len(), theirs.len(), "{case}: size differs");
        }
        for window in [cborgate::codec::DEFAULT_WINDOW, 300, 40, 7] {
            let opts = JsonToCborOptions { window, ..opts };
            let reference = j2c_at(&json, opts, Scan::Portable, json.len());
            for level in Scan::available() {
                for piece in [json.len(), 61, 17, 1] {
                    assert_eq!(
                        j2c_at(&json, opts, level, piece),
                        reference,
                        "{case}: {level:?}, pieces of {piece}, window {window}"
                    );
                }
            }
        }
    }
}

/// JSON → CBOR at a given scanner level, fed in pieces of `piece` bytes
/// (the output, or the error's text).
fn j2c_at(
    json: &[u8],
    opts: JsonToCborOptions,
    level: Scan,
    piece: usize,
) -> Result<Vec<u8>, String> {
    let mut t = JsonToCbor::new(opts);
    t.set_scan(level);
    assert_eq!(
        t.scan(),
        level,
        "the CPU runs every level `Scan::available` lists"
    );
    let mut out = Vec::new();
    for p in json.chunks(piece.max(1)) {
        t.feed(p, &mut out).map_err(|e| e.to_string())?;
    }
    t.finish(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Differential: every scanner level this CPU has (the portable
/// word-at-a-time one, SSE2, AVX2) gives the same CBOR as the portable level
/// fed whole, on every recorded object, whole and cut into pieces, with the
/// default window and small ones (string chunks and indefinite lengths), in
/// both string modes.
#[test]
fn every_scanner_level_gives_the_same_cbor() {
    let levels = Scan::available();
    assert_eq!(levels[0], Scan::Portable);
    assert_eq!(*levels.last().unwrap(), Scan::detect());
    for (case, watch) in cases() {
        let json = read(&case, "b.json");
        for window in [cborgate::codec::DEFAULT_WINDOW, 40, 7] {
            for strings in [StringMode::Bytes, StringMode::Text] {
                let opts = JsonToCborOptions {
                    watch,
                    window,
                    strings,
                    ..Default::default()
                };
                let reference = j2c_at(&json, opts, Scan::Portable, json.len());
                for &level in &levels {
                    for piece in [json.len(), 4096, 61, 17, 1] {
                        assert_eq!(
                            j2c_at(&json, opts, level, piece),
                            reference,
                            "{case}: {level:?}, pieces of {piece}, window {window}, {strings:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn json_to_cbor_is_definite_below_the_window() {
    for (case, watch) in cases() {
        let json = read(&case, "b.json");
        let ours = json_to_cbor(
            &json,
            JsonToCborOptions {
                watch,
                ..Default::default()
            },
        )
        .unwrap();
        let diag = cborgate::codec::diag::diagnose(&ours, cborgate::codec::diag::BytesAs::Hex, 100)
            .unwrap();
        assert!(
            !diag.contains("_ "),
            "{case}: indefinite length below the window"
        );
    }
}

#[test]
fn cbor_to_json_gives_the_json_value_with_identical_numbers() {
    for (case, watch) in cases() {
        let want = json_canon(&read(&case, "b.json"));
        for file in ["b.cbor", "b.cbor.2"] {
            let path = data().join("corpus/objects").join(&case).join(file);
            if !path.exists() {
                continue;
            }
            let cbor = std::fs::read(path).unwrap();
            let ours = cbor_to_json(
                &cbor,
                CborToJsonOptions {
                    sequence: watch,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("{case}/{file}: {e}"));
            assert_eq!(json_canon(&ours), want, "{case}/{file}");
            if watch {
                assert!(ours.ends_with(b"\n"));
                assert_eq!(
                    ours.iter().filter(|&&b| b == b'\n').count(),
                    want.len(),
                    "one line per event"
                );
            }
        }
    }
}

#[test]
fn watch_events_carry_the_tag_twice() {
    let json = read("watch-initial-events", "b.json");
    let ours = json_to_cbor(
        &json,
        JsonToCborOptions {
            watch: true,
            ..Default::default()
        },
    )
    .unwrap();
    let items = cbor_canon(&ours, false);
    assert_eq!(items.len(), json_canon(&json).len());
    for item in items {
        assert_eq!(&item[..3], &[0xd9, 0xd9, 0xf7]);
        let tags = item.windows(3).filter(|w| w == &[0xd9, 0xd9, 0xf7]).count();
        assert_eq!(tags, 2, "55799 on the event and on its object");
    }
}

#[test]
fn text_strings_mode_uses_major_type_3() {
    let json = read("configmap", "b.json");
    let ours = json_to_cbor(
        &json,
        JsonToCborOptions {
            strings: StringMode::Text,
            ..Default::default()
        },
    )
    .unwrap();
    let diag =
        cborgate::codec::diag::diagnose(&ours, cborgate::codec::diag::BytesAs::Hex, 100).unwrap();
    assert!(diag.contains("\"kind\": \"ConfigMap\""), "{diag}");
    assert!(!diag.contains("h'"));
    // And it decodes back to the same value.
    let back = cbor_to_json(&ours, CborToJsonOptions::default()).unwrap();
    assert_eq!(json_canon(&back), json_canon(&json));
}
