//! Property tests: random JSON round-trips through CBOR; cutting the input
//! into random pieces (down to single bytes) never changes the output; random
//! bytes never panic either direction.

use crate::support::bodies::same;
use cborgate::codec::{
    cbor_to_json, json_to_cbor, Breadth, BreadthScanner, CborToJson, CborToJsonOptions, JsonToCbor,
    JsonToCborOptions, Scan, StringMode,
};
use proptest::prelude::*;
use serde_json::Value;

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop_oneof![
            Just(0.5f64),
            Just(1e21),
            Just(1e-7),
            Just(-0.0),
            Just(65504.0),
            Just(100000.0)
        ]
        .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[a-z\\\\\"\u{0}-\u{1f}é☃🎉]{0,12}".prop_map(Value::String),
        // Long plain runs with at most one byte that stops the scanner, so
        // that the vector loops (16 and 32 bytes a step) run and stop
        // anywhere.
        "[a-z]{0,70}[\\\\\"\u{1}é]?[a-z]{0,70}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{0,6}|\\PC{0,4}", inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn cuts(len: usize, seeds: &[usize]) -> Vec<usize> {
    let mut c: Vec<usize> = seeds.iter().map(|s| s % (len + 1)).collect();
    c.push(0);
    c.push(len);
    c.sort();
    c.dedup();
    c
}

fn j2c_chunked(input: &[u8], cuts: &[usize], opts: JsonToCborOptions) -> Result<Vec<u8>, String> {
    j2c_chunked_at(input, cuts, opts, Scan::detect())
}

/// [`j2c_chunked`] with the string scanner at `level`.
fn j2c_chunked_at(
    input: &[u8],
    cuts: &[usize],
    opts: JsonToCborOptions,
    level: Scan,
) -> Result<Vec<u8>, String> {
    let mut t = JsonToCbor::new(opts);
    t.set_scan(level);
    let mut out = Vec::new();
    for w in cuts.windows(2) {
        t.feed(&input[w[0]..w[1]], &mut out)
            .map_err(|e| e.to_string())?;
    }
    t.finish(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

fn c2j_chunked(input: &[u8], cuts: &[usize], opts: CborToJsonOptions) -> Result<Vec<u8>, String> {
    let mut t = CborToJson::new(opts);
    let mut out = Vec::new();
    for w in cuts.windows(2) {
        t.feed(&input[w[0]..w[1]], &mut out)
            .map_err(|e| e.to_string())?;
    }
    t.finish(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// JSON without floats, with strings (plain, escaped, non-ASCII) and
/// containers on both sides of 23 items and strings on both sides of 23
/// bytes, where every head is one byte or longer.
fn arb_int_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0u64..300).prop_map(Value::from),
        "[a-z]{0,30}".prop_map(Value::String),
        "[a-z\\\\\"\n\u{0}é☃🎉]{20,28}".prop_map(Value::String),
        "[a-z]{250,260}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 300, 30, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..30).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,8}", inner, 0..30)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The definite-length CBOR of `v`, as a CBOR-enabled apiserver writes it:
/// shortest heads, strings as byte strings, keys in the JSON's order.
fn definite_cbor(v: &Value, e: &mut minicbor::Encoder<&mut Vec<u8>>) {
    match v {
        Value::Null => e.null(),
        Value::Bool(b) => e.bool(*b),
        Value::Number(n) => e.i64(n.as_i64().expect("integers only")),
        Value::String(s) => e.bytes(s.as_bytes()),
        Value::Array(a) => {
            e.array(a.len() as u64).unwrap();
            for x in a {
                definite_cbor(x, e);
            }
            Ok(e)
        }
        Value::Object(m) => {
            e.map(m.len() as u64).unwrap();
            for (k, x) in m {
                e.bytes(k.as_bytes()).unwrap();
                definite_cbor(x, e);
            }
            Ok(e)
        }
    }
    .unwrap();
}

/// JSON text whose objects repeat keys often (keys from a three-letter
/// alphabet), with arrays and objects both under and over 23 items.
fn arb_dup_json() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(|n| n.to_string()),
        "[a-z]{0,30}".prop_map(|s| format!("{s:?}")),
        Just("null".to_string()),
    ];
    leaf.prop_recursive(5, 400, 30, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..30).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(("[abc]{1,2}", inner), 0..30).prop_map(|v| {
                let pairs: Vec<String> = v.iter().map(|(k, x)| format!("{k:?}:{x}")).collect();
                format!("{{{}}}", pairs.join(","))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn json_round_trips_through_cbor(v in arb_json(), text in any::<bool>()) {
        let json = serde_json::to_vec(&v).unwrap();
        let opts = JsonToCborOptions {
            strings: if text { StringMode::Text } else { StringMode::Bytes },
            ..Default::default()
        };
        let cbor = json_to_cbor(&json, opts).unwrap();
        let back = cbor_to_json(&cbor, CborToJsonOptions::default()).unwrap();
        let parsed: Value = serde_json::from_slice(&back).unwrap();
        prop_assert!(same(&parsed, &v), "{} -> {}", v, String::from_utf8_lossy(&back));
    }

    #[test]
    fn below_the_window_every_head_is_the_servers(
        v in arb_int_json(),
        seeds in prop::collection::vec(any::<usize>(), 0..40),
        pretty in any::<bool>(),
    ) {
        // Container and string heads are written over one-byte placeholders
        // or, when longer, put in when the document goes out: either way the
        // bytes must be the definite-length encoding, however the input is cut.
        let json = if pretty { serde_json::to_vec_pretty(&v).unwrap() } else { serde_json::to_vec(&v).unwrap() };
        let mut want = vec![0xd9, 0xd9, 0xf7];
        definite_cbor(&v, &mut minicbor::Encoder::new(&mut want));
        let opts = JsonToCborOptions::default();
        let whole = j2c_chunked(&json, &[0, json.len()], opts).unwrap();
        prop_assert_eq!(&whole, &want);
        let pieces = j2c_chunked(&json, &cuts(json.len(), &seeds), opts).unwrap();
        prop_assert_eq!(&pieces, &want);
    }

    #[test]
    fn duplicate_keys_the_last_one_wins(
        json in arb_dup_json(),
        window in prop_oneof![Just(cborgate::codec::DEFAULT_WINDOW), 8usize..512],
        seeds in prop::collection::vec(any::<usize>(), 0..20),
    ) {
        // serde_json keeps the last value of a repeated key, as Go does.
        let want: Value = serde_json::from_str(&json).unwrap();
        let opts = JsonToCborOptions { window, ..Default::default() };
        let whole = j2c_chunked(json.as_bytes(), &[0, json.len()], opts);
        let pieces = j2c_chunked(json.as_bytes(), &cuts(json.len(), &seeds), opts);
        prop_assert_eq!(&pieces, &whole);
        match whole {
            Ok(cbor) => {
                // Decoding with duplicate detection on: none are left.
                let back = cbor_to_json(&cbor, CborToJsonOptions::default()).unwrap();
                let got: Value = serde_json::from_slice(&back).unwrap();
                prop_assert!(same(&got, &want), "{} -> {}", json, String::from_utf8_lossy(&back));
            }
            // Only once an earlier pair has been streamed out (past the window).
            Err(e) => prop_assert!(
                e.contains("duplicate") && window < cborgate::codec::DEFAULT_WINDOW,
                "{}: {}", json, e
            ),
        }
    }

    #[test]
    fn chunking_never_changes_output(
        v in arb_json(),
        seeds in prop::collection::vec(any::<usize>(), 0..40),
        window in prop_oneof![Just(cborgate::codec::DEFAULT_WINDOW), 8usize..256],
        pretty in any::<bool>(),
    ) {
        let json = if pretty { serde_json::to_vec_pretty(&v).unwrap() } else { serde_json::to_vec(&v).unwrap() };
        let opts = JsonToCborOptions { window, ..Default::default() };
        let whole = j2c_chunked(&json, &[0, json.len()], opts).unwrap();
        let pieces = j2c_chunked(&json, &cuts(json.len(), &seeds), opts).unwrap();
        prop_assert_eq!(&pieces, &whole);
        let bytes: Vec<usize> = (0..=json.len()).collect();
        prop_assert_eq!(&j2c_chunked(&json, &bytes, opts).unwrap(), &whole);
        // Every scanner level, the portable one included, whole and in
        // pieces.
        for level in Scan::available() {
            prop_assert_eq!(&j2c_chunked_at(&json, &[0, json.len()], opts, level).unwrap(), &whole);
            prop_assert_eq!(&j2c_chunked_at(&json, &cuts(json.len(), &seeds), opts, level).unwrap(), &whole);
        }

        let c_opts = CborToJsonOptions::default();
        let jwhole = c2j_chunked(&whole, &[0, whole.len()], c_opts).unwrap();
        let jpieces = c2j_chunked(&whole, &cuts(whole.len(), &seeds), c_opts).unwrap();
        prop_assert_eq!(&jpieces, &jwhole);
        let bytes: Vec<usize> = (0..=whole.len()).collect();
        prop_assert_eq!(&c2j_chunked(&whole, &bytes, c_opts).unwrap(), &jwhole);
    }

    /// A ConfigMap (or a list of them) with random `binaryData`: with the kind's schema
    /// any cut gives the same CBOR, and that CBOR, sent back as a request body, gives the
    /// same JSON value (tag 22 and the bytes, or the text where it stayed text).
    #[test]
    fn byte_fields_chunk_and_round_trip(
        values in prop::collection::btree_map("[a-z]{1,6}", prop::collection::vec(any::<u8>(), 0..80), 0..5),
        other in arb_json(),
        list in any::<bool>(),
        seeds in prop::collection::vec(any::<usize>(), 0..20),
        window in prop_oneof![Just(cborgate::codec::DEFAULT_WINDOW), 8usize..256],
    ) {
        use cborgate::negotiate::byte_fields::{typed_body, typed_response};
        use cborgate_standin::base64_std;
        let route = match cborgate::negotiate::Route::classify("/api/v1/namespaces/a/configmaps") {
            cborgate::negotiate::Route::Resource(r) => r,
            other => panic!("{other:?}"),
        };
        let binary: serde_json::Map<String, Value> =
            values.iter().map(|(k, v)| (k.clone(), Value::String(base64_std(v)))).collect();
        let object = serde_json::json!({"kind": "ConfigMap", "data": {"x": other}, "binaryData": binary});
        let v = if list {
            serde_json::json!({"kind": "ConfigMapList", "items": [object.clone(), object]})
        } else {
            object
        };
        let json = serde_json::to_vec(&v).unwrap();
        let schema = typed_response(&route);
        let opts = JsonToCborOptions { window, schema, dedupe_keys: false, ..Default::default() };
        let whole = j2c_chunked(&json, &[0, json.len()], opts).unwrap();
        prop_assert_eq!(&j2c_chunked(&json, &cuts(json.len(), &seeds), opts).unwrap(), &whole);
        let bytes: Vec<usize> = (0..=json.len()).collect();
        prop_assert_eq!(&j2c_chunked(&json, &bytes, opts).unwrap(), &whole);
        if !list {
            let c_opts = CborToJsonOptions { schema: typed_body(&route), ..Default::default() };
            let back = c2j_chunked(&whole, &cuts(whole.len(), &seeds), c_opts).unwrap();
            // (Only the bytes: other numbers may change as docs/wire.md §2 says.)
            let back: Value = serde_json::from_slice(&back).unwrap();
            prop_assert_eq!(&back["binaryData"], &v["binaryData"]);
        }
    }

    #[test]
    fn watch_streams_chunk_and_round_trip(
        events in prop::collection::vec(arb_json(), 0..6),
        seeds in prop::collection::vec(any::<usize>(), 0..30),
    ) {
        let mut stream = Vec::new();
        for (n, e) in events.iter().enumerate() {
            let ev = serde_json::json!({"type": if n % 2 == 0 { "ADDED" } else { "BOOKMARK" }, "object": e});
            stream.extend(serde_json::to_vec(&ev).unwrap());
            stream.push(b'\n');
        }
        let opts = JsonToCborOptions { watch: true, ..Default::default() };
        let whole = j2c_chunked(&stream, &[0, stream.len()], opts).unwrap();
        prop_assert_eq!(&j2c_chunked(&stream, &cuts(stream.len(), &seeds), opts).unwrap(), &whole);
        let portable = j2c_chunked_at(&stream, &cuts(stream.len(), &seeds), opts, Scan::Portable);
        prop_assert_eq!(&portable.unwrap(), &whole);
        let seq = CborToJsonOptions { sequence: true, ..Default::default() };
        let back = c2j_chunked(&whole, &cuts(whole.len(), &seeds), seq).unwrap();
        prop_assert_eq!(back.iter().filter(|&&b| b == b'\n').count(), events.len());
        for (line, e) in back.split(|&b| b == b'\n').zip(&events) {
            let v: Value = serde_json::from_slice(line).unwrap();
            prop_assert!(same(&v["object"], e));
        }
    }

    #[test]
    fn random_bytes_never_panic(
        data in prop::collection::vec(any::<u8>(), 0..512),
        seeds in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let c = cuts(data.len(), &seeds);
        for sequence in [false, true] {
            let _ = c2j_chunked(&data, &c, CborToJsonOptions { sequence, ..Default::default() });
        }
        for watch in [false, true] {
            let opts = JsonToCborOptions { watch, window: 64, ..Default::default() };
            let got = j2c_chunked(&data, &c, opts);
            // Garbage too: every scanner level gives the same output or error.
            for level in Scan::available() {
                prop_assert_eq!(&j2c_chunked_at(&data, &c, opts, level), &got);
            }
        }
        let _ = cborgate::codec::diag::diagnose(&data, cborgate::codec::diag::BytesAs::TextWhereValid, 100);
    }

    #[test]
    fn cbor_shaped_garbage_never_panics(
        data in prop::collection::vec(prop_oneof![
            Just(0x9fu8), Just(0xbf), Just(0xff), Just(0x5f), Just(0x7f), Just(0xd9), Just(0xd9), Just(0xf7),
            Just(0xc0), Just(0xc1), Just(0xd5), Just(0xd6), Just(0xd7), Just(0x41), Just(0x61), Just(0xa1),
            Just(0x81), Just(0x18), Just(0xf9), Just(0xfb), any::<u8>()], 0..256),
    ) {
        let _ = cbor_to_json(&data, CborToJsonOptions::default());
        let _ = cbor_to_json(&data, CborToJsonOptions { sequence: true, ..Default::default() });
    }
}

/// The `json_to_cbor` fuzz target's checks (fuzz/fuzz_targets/json_to_cbor.rs)
/// as a bounded, seeded run, for machines without cargo-fuzz: the recorded
/// corpus's JSON (cut to 16 KiB, as the fuzz README's `-max_len`), mutated
/// with the bytes that stop the string scanner (`"`, `\`, control bytes,
/// non-ASCII, broken UTF-8) and structural ones, under random options and
/// random cuts. Each case gives the same outcome — output, or error reason —
/// at every scanner level, whole and in pieces. Iterations:
/// `CBORGATE_SCAN_FUZZ_ITERS` (default 400).
#[test]
fn scanner_levels_agree_on_mutated_corpus() {
    let iters: u64 = std::env::var("CBORGATE_SCAN_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let mut seeds = Vec::new();
    let dir = crate::support::data().join("corpus/objects");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path().join("b.json");
        if let Ok(mut b) = std::fs::read(&p) {
            b.truncate(16 * 1024);
            seeds.push(b);
        }
    }
    assert!(seeds.len() >= 5, "the recorded corpus");
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n.max(1)
    };
    const BYTES: [u8; 16] = [
        b'"', b'\\', 0x00, 0x1f, b'\n', 0x80, 0xc3, 0xe2, 0xff, b'{', b'}', b'[', b']', b',', b':',
        b'u',
    ];
    let levels = Scan::available();
    for _ in 0..iters {
        let mut json = seeds[rnd(seeds.len() as u64) as usize].clone();
        for _ in 0..rnd(4) {
            let at = rnd(json.len() as u64 + 1) as usize;
            let b = BYTES[rnd(BYTES.len() as u64) as usize];
            match rnd(3) {
                0 if at < json.len() => json[at] = b,
                1 => json.insert(at, b),
                _ => json.truncate(at.max(1)),
            }
        }
        let opts = JsonToCborOptions {
            watch: rnd(4) == 0,
            window: [cborgate::codec::DEFAULT_WINDOW, 0, 1, 16, 100][rnd(5) as usize],
            dedupe_keys: rnd(2) == 0,
            strings: if rnd(2) == 0 {
                StringMode::Bytes
            } else {
                StringMode::Text
            },
            ..JsonToCborOptions::default()
        };
        let seeds_: Vec<usize> = (0..rnd(12)).map(|_| rnd(u64::MAX) as usize).collect();
        let cut = cuts(json.len(), &seeds_);
        let reference = j2c_chunked_at(&json, &[0, json.len()], opts, Scan::Portable);
        for &level in &levels {
            let whole = j2c_chunked_at(&json, &[0, json.len()], opts, level);
            let pieces = j2c_chunked_at(&json, &cut, opts, level);
            match (&reference, &whole, &pieces) {
                (Ok(r), Ok(w), Ok(p)) => {
                    assert!(r == w && w == p, "{level:?}: output differs");
                }
                (Err(r), Err(w), Err(p)) => {
                    // Fed whole, the same error at the same offset; in
                    // pieces the same reason (the fuzz target's check).
                    assert_eq!(r, w, "{level:?}");
                    let reason = |e: &String| {
                        e.rsplit_once(" at byte offset ")
                            .map(|(r, _)| r.to_string())
                    };
                    assert_eq!(reason(w), reason(p), "{level:?}");
                }
                other => panic!("{level:?}: outcomes differ: {other:?}"),
            }
        }
    }
}

/// The widest array (elements) or object (pairs) of a document: the breadth
/// scanner's oracle, from the tree.
fn widest(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.iter().map(widest).fold(a.len(), usize::max),
        Value::Object(m) => m.values().map(widest).fold(m.len(), usize::max),
        _ => 0,
    }
}

/// The breadth scanner's verdict and offset, fed in pieces cut at `cuts`.
fn breadth_chunked(input: &[u8], cuts: &[usize], limit: u64, depth: usize) -> (Breadth, u64) {
    let mut s = BreadthScanner::new(limit, depth);
    for w in cuts.windows(2) {
        s.feed(&input[w[0]..w[1]]);
    }
    (s.verdict(), s.offset())
}

proptest! {
    #[test]
    fn breadth_matches_the_tree_and_never_depends_on_the_cuts(
        v in arb_json(),
        seeds in prop::collection::vec(any::<usize>(), 0..40),
        limit in 0u64..9,
        pretty in any::<bool>(),
    ) {
        let json = if pretty { serde_json::to_vec_pretty(&v).unwrap() } else { serde_json::to_vec(&v).unwrap() };
        let whole = breadth_chunked(&json, &[0, json.len()], limit, 64);
        let want = if widest(&v) as u64 > limit { Breadth::Over } else { Breadth::Within };
        prop_assert_eq!(whole.0, want);
        prop_assert_eq!(breadth_chunked(&json, &cuts(json.len(), &seeds), limit, 64), whole);
        let bytes: Vec<usize> = (0..=json.len()).collect();
        prop_assert_eq!(breadth_chunked(&json, &bytes, limit, 64), whole);
    }

    #[test]
    fn breadth_of_any_bytes_never_depends_on_the_cuts(
        input in prop::collection::vec(prop_oneof![
            Just(b'['), Just(b']'), Just(b'{'), Just(b'}'), Just(b','), Just(b'"'),
            Just(b'\\'), Just(b':'), Just(b' '), Just(b'1'), any::<u8>(),
        ], 0..200),
        seeds in prop::collection::vec(any::<usize>(), 0..40),
        limit in 0u64..5,
        depth in 1usize..6,
    ) {
        let whole = breadth_chunked(&input, &[0, input.len()], limit, depth);
        prop_assert_eq!(breadth_chunked(&input, &cuts(input.len(), &seeds), limit, depth), whole);
    }
}
