//! Garbage: heads that must never panic, and the invariants every plan keeps.

use super::*;

fn check_invariants(h: &RequestHead<'_>) {
    for mode in [
        UpstreamMode::Legacy,
        UpstreamMode::Native,
        UpstreamMode::Auto,
        UpstreamMode::Upgrade,
    ] {
        let p = plan(h, mode);
        assert!(Verb::ALL.iter().any(|v| *v == p.verb.label()), "{h:?}");
        if let Some(reply) = &p.reply {
            assert!(matches!(reply.code, 406 | 415), "{h:?}");
            assert!(matches!(reply.format, Format::Json | Format::Cbor));
            assert_eq!(
                (p.body, p.response, p.upstream_accept.as_deref()),
                (BodyAction::PassThrough, PASS, None)
            );
        }
        // An `Accept` goes upstream rewritten when the answer is transcoded, or to keep
        // CBOR away from discovery and connect subresources.
        let untransformed = matches!(&p.route, Route::GroupVersionDiscovery { .. })
            || matches!(&p.route, Route::Resource(r) if r.is_connect());
        if !untransformed {
            assert_eq!(p.upstream_accept.is_some(), p.response != PASS, "{h:?}");
        }
        // auto's `Accept` is the legacy one, or the legacy one made CBOR-first.
        let legacy = plan(h, UpstreamMode::Legacy).upstream_accept;
        if mode == UpstreamMode::Auto && p.upstream_accept != legacy {
            let json = legacy.clone().expect("auto rewrites only an Accept it has");
            let cbor = json.replacen(JSON, CBOR, 1);
            assert_eq!(
                p.upstream_accept.as_deref(),
                Some(format!("{cbor}, {json};q=0.9").as_str())
            );
        }
        let checked = if mode == UpstreamMode::Auto {
            &legacy
        } else {
            &p.upstream_accept
        };
        if let Some(accept) = checked {
            let target = match p.response {
                ResponseAction::CborToJson { .. } => CBOR,
                _ => JSON,
            };
            assert!(
                accept.starts_with(target) && !accept.contains(','),
                "{accept:?}"
            );
            assert!(
                accept
                    .bytes()
                    .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f)),
                "{accept:?}"
            );
            assert!(accept.len() <= h.accept.map_or(0, str::len) + CBOR.len());
        }
        if mode == UpstreamMode::Native {
            assert_eq!(
                (p.reply.as_ref(), p.body, p.response),
                (None, BodyAction::PassThrough, PASS)
            );
        }
        if h.upgrade {
            assert_eq!(
                (p.verb.label(), p.reply.as_ref(), p.body, p.response),
                ("CONNECT", None, BodyAction::PassThrough, PASS)
            );
        }
    }
}

#[test]
fn garbage_headers_never_panic() {
    let long_accept = "application/cbor;".repeat(5_000);
    let many = ",;=/*".repeat(5_000);
    let nasty = [
        "",
        " ",
        ",",
        ";",
        "=",
        "/",
        "*",
        "*/",
        "/*",
        ";;;",
        ",,,",
        "=;=,=",
        "a/b;=;==;===",
        "application/cbor;q=",
        "application/cbor;q=nan",
        "application/cbor;q=-inf, */*;q=inf",
        "application/cbor;as=;g=;v=",
        "application/cbor;stream=watch;stream=",
        "\u{0}\u{1}\u{7f}",
        "appl\u{e9}cation/cbor",
        "application/cbor;x=\"a,b\"",
        "\r\napplication/cbor",
        "application/cbor\tq=1",
        long_accept.as_str(),
        many.as_str(),
    ];
    let paths = [
        "",
        "/",
        "//",
        "/api/",
        "/api/v1/%",
        "/api/v1/%zz",
        "/apis/%2F/v1/x",
        "/api/v1/namespaces//x",
        "/\u{0}",
        "*",
        "/api/v1/watch/",
    ];
    for accept in nasty {
        for path in paths
            .iter()
            .chain([CM, CM_ONE, "/api/v1", "/apis/apps/v1"].iter())
        {
            for (method, ct) in [
                ("GET", None),
                ("PATCH", Some(accept)),
                ("POST", Some(accept)),
                ("\u{0}", Some(";")),
            ] {
                let query = Some(accept);
                check_invariants(&RequestHead {
                    method,
                    path,
                    query,
                    accept: Some(accept),
                    content_type: ct,
                    upgrade: false,
                    declared_len: None,
                    accept_encoding: None,
                    compress_responses: false,
                });
                check_invariants(&RequestHead {
                    method,
                    path,
                    query,
                    accept: Some(accept),
                    content_type: ct,
                    upgrade: true,
                    declared_len: Some(10),
                    accept_encoding: None,
                    compress_responses: false,
                });
            }
        }
    }
}

#[test]
fn random_heads_never_panic() {
    const ALPHABET: &[u8] = b"application/cborjsyamlvnd.kubernetes.protobuf+-*/;,= q0.1965eE%&?watchpretty\"\t\\api/v1namespaces";
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    let mut next = move || crate::negotiate::media::xorshift_next(&mut state);
    for round in 0..3_000_u64 {
        let mut field = |len: u64| -> String {
            let bytes: Vec<u8> = (0..next() % len)
                .map(|_| {
                    let r = next();
                    if r % 5 == 0 {
                        (r >> 8) as u8
                    } else {
                        ALPHABET[(r >> 8) as usize % ALPHABET.len()]
                    }
                })
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let accept = field(120);
        let path = format!("/{}", field(60));
        let query = field(40);
        let content_type = field(40);
        let method = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "x"][(round % 7) as usize];
        check_invariants(&RequestHead {
            method,
            path: &path,
            query: Some(&query),
            accept: Some(&accept),
            content_type: Some(&content_type),
            upgrade: round % 11 == 0,
            declared_len: (round % 3 != 0).then_some(round * 37),
            accept_encoding: None,
            compress_responses: false,
        });
        check_invariants(&RequestHead {
            method,
            path: if round % 2 == 0 { CM } else { "/api/v1" },
            query: None,
            accept: Some(&accept),
            content_type: Some(&content_type),
            upgrade: false,
            declared_len: Some(round * 41),
            accept_encoding: None,
            compress_responses: false,
        });
    }
}
