//! End to end, `legacy` mode: the stand-in JSON-only apiserver behind the real
//! `cborgate` binary, driven by a strict HTTP/1.1 client. Each test asserts
//! both what the client got and what the upstream received. One test (or
//! group) per row of docs/wire.md §1 and §4.

use crate::support::bodies::{cbor, decode, decode_seq};
use crate::support::harness::{config_file, eventually, Harness};
use crate::support::http::{once, Conn, Resp};
use serde_json::{json, Value};
use std::io::Write;

const CBOR: &str = "application/cbor";

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v", "n": "1"}})
}

const CMS: &str = "/api/v1/namespaces/demo/configmaps";

#[test]
fn row_post_cbor_body_goes_upstream_as_json() {
    let h = Harness::start("legacy", &[]);
    let body = cbor(&cm("posted"));
    let r = once(
        h.proxy,
        "POST",
        CMS,
        &[("Content-Type", "application/cbor"), ("Accept", CBOR)],
        Some(&body),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.content_type(), CBOR);
    assert!(r.chunked, "transcoded responses are chunked on HTTP/1.1");
    assert!(r.header("content-length").is_none());
    let v = decode(&r);
    assert_eq!(v["metadata"]["name"], "posted");
    assert_eq!(v["data"]["k"], "v");
    let up = h.standin().requests();
    let last = up.last().unwrap();
    assert_eq!(last.method, "POST");
    assert_eq!(last.header("content-type"), Some("application/json"));
    assert_eq!(last.header("accept"), Some("application/json"));
    let sent: Value = serde_json::from_slice(&last.body).unwrap();
    assert_eq!(sent, cm("posted"));
}

#[test]
fn row_put_and_delete_with_cbor_bodies() {
    let h = Harness::start("legacy", &[]);
    let r = once(
        h.proxy,
        "POST",
        CMS,
        &[("Content-Type", "application/cbor"), ("Accept", CBOR)],
        Some(&cbor(&cm("upd"))),
    );
    assert_eq!(r.status, 201);
    let mut obj = decode(&r);
    obj["data"]["k"] = json!("changed");
    let r = once(
        h.proxy,
        "PUT",
        &format!("{CMS}/upd"),
        &[
            ("Content-Type", "application/cbor; charset=ignored"),
            ("Accept", CBOR),
        ],
        Some(&cbor(&obj)),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(decode(&r)["data"]["k"], "changed");
    let put = h.standin().requests().last().unwrap().clone();
    assert_eq!(put.header("content-type"), Some("application/json"));
    assert_eq!(
        serde_json::from_slice::<Value>(&put.body).unwrap()["data"]["k"],
        "changed"
    );
    // DELETE with DeleteOptions in CBOR.
    let opts =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"});
    let r = once(
        h.proxy,
        "DELETE",
        &format!("{CMS}/upd"),
        &[("Content-Type", CBOR), ("Accept", CBOR)],
        Some(&cbor(&opts)),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let del = h.standin().requests().last().unwrap().clone();
    assert_eq!(del.method, "DELETE");
    assert_eq!(serde_json::from_slice::<Value>(&del.body).unwrap(), opts);
    assert_eq!(decode(&r)["status"], "Success");
    // Gone upstream.
    let r = once(h.upstream, "GET", &format!("{CMS}/upd"), &[], None);
    assert_eq!(r.status, 404);
}

#[test]
fn row_apply_patch_cbor_with_and_without_the_tag() {
    let h = Harness::start("legacy", &[]);
    for (name, tagged) in [("applied-tagged", true), ("applied-bare", false)] {
        let mut body = cbor(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}),
        );
        if !tagged {
            body.drain(..3); // client-go sends apply bodies without 55799
        }
        let r = once(
            h.proxy,
            "PATCH",
            &format!("{CMS}/{name}?fieldManager=test"),
            &[
                ("Content-Type", "application/apply-patch+cbor"),
                ("Accept", CBOR),
            ],
            Some(&body),
        );
        assert!(
            r.status == 200 || r.status == 201,
            "{}: {} {}",
            name,
            r.status,
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(decode(&r)["data"]["a"], "1");
        let up = h.standin().requests().last().unwrap().clone();
        assert_eq!(
            up.header("content-type"),
            Some("application/apply-patch+yaml")
        );
        let sent: Value = serde_json::from_slice(&up.body).expect("JSON text (valid YAML)");
        assert_eq!(sent["metadata"]["name"], name);
    }
}

#[test]
fn row_other_cbor_patch_types_get_415_from_cborgate() {
    let h = Harness::start("legacy", &[]);
    let body = cbor(&json!({"data": {"x": "y"}}));
    let before = h.metric(
        "cborgate_unsupported_media_type_total",
        &[("origin", "proxy")],
    );
    h.standin().clear_requests();
    for ct in [
        "application/strategic-merge-patch+cbor",
        "application/merge-patch+cbor",
        "application/json-patch+cbor",
        "application/cbor",
    ] {
        let r = once(
            h.proxy,
            "PATCH",
            &format!("{CMS}/demo-config"),
            &[("Content-Type", ct), ("Accept", "application/json")],
            Some(&body),
        );
        assert_eq!(r.status, 415, "{ct}");
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["reason"], "UnsupportedMediaType");
        assert_eq!(v["code"], 415);
    }
    // A CBOR client gets the router's Status in JSON, indented, byte for byte what a
    // CBOR-enabled kube-apiserver 1.36.2 sends (native-1.36 `patch-merge-cbor`).
    let recorded =
        std::fs::read(crate::support::data().join("corpus/native-1.36/patch-merge-cbor.body"))
            .unwrap();
    for ct in ["application/merge-patch+cbor", "application/cbor"] {
        let r = once(
            h.proxy,
            "PATCH",
            &format!("{CMS}/demo-config"),
            &[("Content-Type", ct), ("Accept", CBOR)],
            Some(&body),
        );
        assert_eq!(r.status, 415);
        assert_eq!(r.content_type(), "application/json");
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            String::from_utf8_lossy(&recorded),
            "{ct}"
        );
    }
    assert!(
        h.standin().requests().is_empty(),
        "the upstream must not see these"
    );
    let after = h.metric(
        "cborgate_unsupported_media_type_total",
        &[("origin", "proxy")],
    );
    assert_eq!(after - before, 6.0);
}

#[test]
fn row_json_patch_types_and_other_bodies_pass_through_byte_for_byte() {
    let h = Harness::start("legacy", &[]);
    for (ct, body) in [
        (
            "application/merge-patch+json",
            br#"{"data":{"m":"1"}}"#.to_vec(),
        ),
        (
            "application/strategic-merge-patch+json",
            br#"{"data":{"s":"2"}}"#.to_vec(),
        ),
        (
            "application/json-patch+json",
            br#"[{"op":"add","path":"/data/j","value":"3"}]"#.to_vec(),
        ),
    ] {
        let r = once(
            h.proxy,
            "PATCH",
            &format!("{CMS}/demo-config"),
            &[("Content-Type", ct), ("Accept", "application/json")],
            Some(&body),
        );
        assert_eq!(r.status, 200, "{ct}: {}", String::from_utf8_lossy(&r.body));
        let up = h.standin().requests().last().unwrap().clone();
        assert_eq!(up.header("content-type"), Some(ct));
        assert_eq!(up.body, body);
        assert_eq!(r.content_type(), "application/json");
    }
    // merge-patch+json with a CBOR response.
    let r = once(
        h.proxy,
        "PATCH",
        &format!("{CMS}/demo-config"),
        &[
            ("Content-Type", "application/merge-patch+json"),
            ("Accept", CBOR),
        ],
        Some(br#"{"data":{"z":"9"}}"#),
    );
    assert_eq!(r.status, 200);
    assert_eq!(decode(&r)["data"]["z"], "9");
}

#[test]
fn row_accept_cbor_rewrites_upstream_accept_and_transcodes() {
    let h = Harness::start("legacy", &[]);
    for accept in [
        "application/cbor",
        "application/json;q=0.9,application/cbor;q=1",
        "application/cbor, */*",
        "application/cbor, application/json;q=0.9",
    ] {
        let r = once(
            h.proxy,
            "GET",
            &format!("{CMS}/demo-config"),
            &[("Accept", accept)],
            None,
        );
        assert_eq!(r.status, 200, "{accept}");
        assert_eq!(r.content_type(), CBOR, "{accept}: no parameters");
        let direct = once(
            h.upstream,
            "GET",
            &format!("{CMS}/demo-config"),
            &[("Accept", "application/json")],
            None,
        );
        assert_eq!(
            decode(&r),
            serde_json::from_slice::<Value>(&direct.body).unwrap()
        );
        let up = h.standin().requests();
        let up = &up[up.len() - 2];
        assert_eq!(up.header("accept"), Some("application/json"), "{accept}");
    }
    // Byte strings, as the real server writes them.
    let r = once(
        h.proxy,
        "GET",
        &format!("{CMS}/demo-config"),
        &[("Accept", CBOR)],
        None,
    );
    assert_eq!(r.body[3] >> 5, 5, "a map");
    assert_eq!(r.body[4] >> 5, 2, "keys are byte strings");
}

#[test]
fn row_json_yaml_protobuf_and_wildcards_pass_through() {
    let h = Harness::start("legacy", &[]);
    for accept in [
        "application/json",
        "*/*",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
        "application/json;q=1,application/cbor;q=0.5",
    ] {
        let r = once(
            h.proxy,
            "GET",
            &format!("{CMS}/demo-config"),
            &[("Accept", accept)],
            None,
        );
        assert_eq!(r.status, 200);
        assert_ne!(r.content_type(), CBOR, "{accept}");
        let up = h.standin().requests().last().unwrap().clone();
        assert_eq!(
            up.header("accept"),
            Some(accept),
            "upstream Accept untouched"
        );
    }
    let r = once(h.proxy, "GET", &format!("{CMS}/demo-config"), &[], None);
    assert_eq!(r.content_type(), "application/json");
    assert_eq!(
        h.standin().requests().last().unwrap().header("accept"),
        None
    );
}

#[test]
fn row_watch_becomes_a_cbor_sequence() {
    let h = Harness::start("legacy", &[]);
    for path in [
        format!("{CMS}?watch=1&timeoutSeconds=1"),
        format!("{CMS}?watch=true&timeoutSeconds=1"),
        "/api/v1/watch/namespaces/demo/configmaps?timeoutSeconds=1".to_string(),
    ] {
        let r = once(h.proxy, "GET", &path, &[("Accept", CBOR)], None);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.content_type(), "application/cbor-seq", "{path}");
        let events = decode_seq(&r.body);
        assert!(events.len() >= 2, "{path}: {events:?}");
        for e in &events {
            assert_eq!(e["type"], "ADDED");
            assert_eq!(e["object"]["kind"], "ConfigMap");
        }
        // Tag 55799 twice per event.
        let mut at = 0;
        let mut n = 0;
        while at + 3 <= r.body.len() {
            if r.body[at..at + 3] == [0xd9, 0xd9, 0xf7] {
                n += 1;
            }
            at += 1;
        }
        assert!(n >= events.len() * 2);
    }
}

#[test]
fn row_table_is_refused_in_cbor_and_falls_back_to_json() {
    let h = Harness::start("legacy", &[]);
    h.standin().clear_requests();
    let r = once(
        h.proxy,
        "GET",
        CMS,
        &[("Accept", "application/cbor;as=Table;g=meta.k8s.io;v=v1")],
        None,
    );
    assert_eq!(r.status, 406);
    let recorded =
        std::fs::read(crate::support::data().join("corpus/exchanges/b-table-cbor.body")).unwrap();
    assert_eq!(r.body, recorded, "the CBOR-enabled apiserver's exact 406");
    assert!(h.standin().requests().is_empty());
    let r = once(h.proxy, "GET", CMS, &[("Accept", "application/cbor;as=Table;g=meta.k8s.io;v=v1, application/json;as=Table;g=meta.k8s.io;v=v1;q=0.9")], None);
    assert_eq!(r.status, 200);
    assert!(r.content_type().starts_with("application/json"));
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["kind"], "Table");
    // cbor-seq is not a type a real server offers either.
    let r = once(
        h.proxy,
        "GET",
        &format!("{CMS}?watch=1"),
        &[("Accept", "application/cbor-seq")],
        None,
    );
    assert_eq!(r.status, 406);
    assert!(h.metric("cborgate_not_acceptable_total", &[("origin", "proxy")]) >= 2.0);
}

#[test]
fn row_partial_object_metadata_in_cbor() {
    let h = Harness::start("legacy", &[]);
    let r = once(
        h.proxy,
        "GET",
        &format!("{CMS}/demo-config"),
        &[(
            "Accept",
            "application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )],
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type(), CBOR);
    let v = decode(&r);
    assert_eq!(v["kind"], "PartialObjectMetadata");
    let up = h.standin().requests().last().unwrap().clone();
    assert_eq!(
        up.header("accept"),
        Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    );
    let r = once(
        h.proxy,
        "GET",
        CMS,
        &[(
            "Accept",
            "application/cbor;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )],
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(decode(&r)["kind"], "PartialObjectMetadataList");
}

#[test]
fn row_discovery() {
    let h = Harness::start("legacy", &[]);
    // Group-version resource lists are never CBOR (client-go 1.36 cannot decode CBOR
    // discovery): a CBOR-only client gets the 406 a CBOR-enabled server gives a CRD
    // group's discovery, byte for byte (native-1.36 `disc-apis-cr-v1`), and a client that
    // also takes JSON gets JSON, which the upstream is asked for by name.
    let recorded =
        std::fs::read(crate::support::data().join("corpus/native-1.36/disc-apis-cr-v1.body"))
            .unwrap();
    for path in ["/api/v1", "/apis/corpus.example.com/v1"] {
        h.standin().clear_requests();
        let r = once(h.proxy, "GET", path, &[("Accept", CBOR)], None);
        assert_eq!(r.status, 406, "{path}");
        assert_eq!(r.content_type(), "application/json");
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            String::from_utf8_lossy(&recorded),
            "{path}"
        );
        assert!(h.standin().requests().is_empty(), "answered by cborgate");
        for accept in [
            "application/cbor, */*",
            "application/json;q=0.9,application/cbor;q=1",
        ] {
            let r = once(h.proxy, "GET", path, &[("Accept", accept)], None);
            assert_eq!(
                (r.status, r.content_type()),
                (200, "application/json"),
                "{path} {accept}"
            );
            let v: Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(v["kind"], "APIResourceList", "{path}");
            let up = h.standin().requests().last().unwrap().clone();
            assert_eq!(
                up.header("accept"),
                Some("application/json"),
                "{path} {accept}"
            );
        }
    }
    // The rest has no CBOR in 1.36: the upstream's own 406 passes through.
    for path in ["/api", "/apis", "/version", "/apis/corpus.example.com"] {
        let direct = once(h.upstream, "GET", path, &[("Accept", CBOR)], None);
        let r = once(h.proxy, "GET", path, &[("Accept", CBOR)], None);
        assert_eq!(r.status, 406, "{path}");
        assert_eq!(r.body, direct.body, "{path}");
        let r = once(
            h.proxy,
            "GET",
            path,
            &[("Accept", "application/json")],
            None,
        );
        assert_eq!(r.status, 200, "{path}");
    }
    assert!(h.metric("cborgate_not_acceptable_total", &[("origin", "upstream")]) >= 4.0);
}

#[test]
fn upstream_error_status_bodies_are_transcoded() {
    let h = Harness::start("legacy", &[]);
    let r = once(
        h.proxy,
        "GET",
        &format!("{CMS}/does-not-exist"),
        &[("Accept", CBOR)],
        None,
    );
    assert_eq!(r.status, 404);
    let v = decode(&r);
    assert_eq!(v["reason"], "NotFound");
    assert_eq!(v["code"], 404);
    let body = cbor(&cm("dup"));
    assert_eq!(
        once(
            h.proxy,
            "POST",
            CMS,
            &[("Content-Type", CBOR), ("Accept", CBOR)],
            Some(&body)
        )
        .status,
        201
    );
    let r = once(
        h.proxy,
        "POST",
        CMS,
        &[("Content-Type", CBOR), ("Accept", CBOR)],
        Some(&body),
    );
    assert_eq!(r.status, 409);
    assert_eq!(decode(&r)["reason"], "AlreadyExists");
}

#[test]
fn status_400_for_malformed_cbor_and_413_for_big_bodies() {
    let h = Harness::start("legacy", &[]);
    h.standin().clear_requests();
    for bad in [
        &b"\xa1\x61"[..],
        b"\xff",
        b"\xa2\x61a\x01\x61a\x02",
        b"\x81\xf7",
        b"\xf9\x7e\x00",
        b"\x01\x02",
    ] {
        let r = once(
            h.proxy,
            "POST",
            CMS,
            &[("Content-Type", CBOR), ("Accept", CBOR)],
            Some(bad),
        );
        assert_eq!(r.status, 400, "{bad:?}");
        let v = decode(&r);
        assert_eq!(v["reason"], "BadRequest");
        assert_eq!(v["code"], 400);
        let r = once(
            h.proxy,
            "POST",
            CMS,
            &[("Content-Type", CBOR), ("Accept", "application/json")],
            Some(bad),
        );
        assert_eq!(r.status, 400);
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["kind"], "Status");
    }
    // Nothing created upstream.
    assert!(h.standin().requests().iter().all(|r| r.method != "POST"
        || r.body.is_empty()
        || serde_json::from_slice::<Value>(&r.body).is_err()));
    // Over the 3 MiB limit, declared up front.
    let big = vec![0x40u8; 4 << 20];
    let r = once(
        h.proxy,
        "POST",
        CMS,
        &[("Content-Type", CBOR), ("Accept", CBOR)],
        Some(&big),
    );
    assert_eq!(r.status, 413);
    assert_eq!(decode(&r)["reason"], "RequestEntityTooLarge");
    assert!(
        h.metric(
            "cborgate_transcode_errors_total",
            &[("direction", "request")]
        ) >= 6.0
    );
}

#[test]
fn status_503_when_the_upstream_is_unreachable() {
    let port = crate::support::harness::free_port();
    let h = Harness::proxy_to(&format!("http://{port}"), "legacy", &[]);
    let r = once(h.proxy, "GET", CMS, &[("Accept", CBOR)], None);
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(decode(&r)["reason"], "ServiceUnavailable");
    let r = once(h.proxy, "GET", CMS, &[("Accept", "application/json")], None);
    assert_eq!(r.status, 503);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["code"], 503);
    // The cause in words, never pingora's error name (ConnectRefused).
    assert_eq!(
        v["message"],
        "the upstream apiserver is unavailable: it refused the connection"
    );
    let ready = once(h.admin, "GET", "/readyz", &[], None);
    assert_eq!(ready.status, 503);
    assert_eq!(once(h.admin, "GET", "/healthz", &[], None).status, 200);
}

#[test]
fn status_504_when_the_upstream_sends_no_headers_in_time() {
    // An upstream that accepts and never answers.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    let conf = config_file("[upstream]\nresponse_header_timeout_seconds = 1\n");
    let h = Harness::proxy_to(&format!("http://{addr}"), "legacy", &["--config", &conf]);
    let t = std::time::Instant::now();
    let r = once(
        h.proxy,
        "GET",
        &format!("{CMS}/x"),
        &[("Accept", CBOR)],
        None,
    );
    assert_eq!(r.status, 504);
    assert_eq!(decode(&r)["reason"], "Timeout");
    assert!(t.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn a_hundred_transcoded_gets_on_one_connection() {
    let h = Harness::start("legacy", &[]);
    let mut c = Conn::connect(h.proxy);
    // A transcoded answer's flushes are held back until its terminating chunk is
    // written; an answer whose end did not let them go would not arrive at all, and
    // one let go late would show in the time. Here a hundred take well under a
    // second; 10 s leaves room for a loaded machine.
    let started = std::time::Instant::now();
    for i in 0..100 {
        let path = if i % 2 == 0 {
            format!("{CMS}/demo-config")
        } else {
            CMS.to_string()
        };
        let r = c.request("GET", &path, &[("Accept", CBOR)], None);
        assert_eq!(r.status, 200, "request {i}");
        assert!(r.chunked);
        decode(&r);
        assert_ne!(r.header("connection"), Some("close"), "request {i}");
    }
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(10),
        "100 transcoded answers took {took:?}: their ends were held back"
    );
    // Also after a local error reply and after a 400 with a body.
    let r = c.request("GET", CMS, &[("Accept", "application/cbor-seq")], None);
    assert_eq!(r.status, 406);
    let r = c.request("GET", CMS, &[("Accept", CBOR)], None);
    assert_eq!(r.status, 200);
}

#[test]
fn passthrough_is_byte_identical_to_direct_traffic() {
    let h = Harness::start("legacy", &[]);
    // Headers that differ between any two direct requests.
    let varying = ["date", "audit-id"];
    let hop = [
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    ];
    type Case<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, Option<Vec<u8>>);
    let cases: Vec<Case> = vec![
        (
            "GET",
            format!("{CMS}/demo-config"),
            vec![("Accept", "application/json")],
            None,
        ),
        (
            "GET",
            CMS.to_string(),
            vec![("Accept", "application/json")],
            None,
        ),
        (
            "GET",
            format!("{CMS}/demo-config"),
            vec![("Accept", "application/yaml")],
            None,
        ),
        (
            "GET",
            format!("{CMS}/demo-config"),
            vec![("Accept", "application/vnd.kubernetes.protobuf")],
            None,
        ),
        (
            "GET",
            CMS.to_string(),
            vec![("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")],
            None,
        ),
        (
            "GET",
            format!("{CMS}/missing"),
            vec![("Accept", "application/json")],
            None,
        ),
        ("GET", "/version".into(), vec![], None),
        ("GET", "/openapi/v3".into(), vec![("Accept", CBOR)], None),
        (
            "GET",
            format!("{CMS}/demo-config"),
            vec![("Accept", "application/json"), ("Accept-Encoding", "gzip")],
            None,
        ),
    ];
    for (method, path, headers, body) in cases {
        let direct = once(h.upstream, method, &path, &headers, body.as_deref());
        let via = once(h.proxy, method, &path, &headers, body.as_deref());
        assert_eq!(via.status, direct.status, "{path} {headers:?}");
        assert_eq!(via.body, direct.body, "{path} {headers:?}");
        let keep = |r: &Resp| {
            let mut v: Vec<(String, String)> = r
                .headers
                .iter()
                .filter(|(k, _)| {
                    let k = k.to_ascii_lowercase();
                    !varying.contains(&k.as_str()) && !hop.contains(&k.as_str())
                })
                .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                .collect();
            v.sort();
            v
        };
        assert_eq!(keep(&via), keep(&direct), "{path} {headers:?}");
    }
    // A protobuf request body passes untouched too.
    let mut pb = b"k8s\x00".to_vec();
    pb.extend_from_slice(cm("proto").to_string().as_bytes());
    let r = once(
        h.proxy,
        "POST",
        CMS,
        &[
            ("Content-Type", "application/vnd.kubernetes.protobuf"),
            ("Accept", "application/json"),
        ],
        Some(&pb),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(h.standin().requests().last().unwrap().body, pb);
}

#[test]
fn metrics_families_exist_and_move() {
    let h = Harness::start("legacy", &[]);
    let text = h.metrics();
    for family in cborgate::metrics::FAMILIES {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family} missing at start-up"
        );
    }
    // The standard process families, with the proxy's own values.
    if cfg!(target_os = "linux") {
        for family in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{family} "))),
                "{family} has no sample"
            );
        }
    }
    let r = once(
        h.proxy,
        "PATCH",
        &format!("{CMS}/demo-config"),
        &[("Content-Type", "application/strategic-merge-patch+cbor")],
        Some(b"\xa0"),
    );
    assert_eq!(r.status, 415);
    h.wait_metric(
        "cborgate_unsupported_media_type_total",
        &[("origin", "proxy")],
        1.0,
    );
    once(
        h.proxy,
        "GET",
        &format!("{CMS}/demo-config"),
        &[("Accept", CBOR)],
        None,
    );
    h.wait_metric(
        "cborgate_requests_total",
        &[
            ("verb", "GET"),
            ("code", "200"),
            ("response_format", "cbor"),
        ],
        1.0,
    );
    h.wait_metric(
        "cborgate_codec_duration_seconds_count",
        &[("direction", "response"), ("from", "json"), ("to", "cbor")],
        1.0,
    );
    assert!(
        h.metric(
            "cborgate_codec_bytes_total",
            &[("direction", "response"), ("format", "cbor")]
        ) > 100.0
    );
    once(h.proxy, "GET", CMS, &[("Accept", CBOR)], None);
    h.wait_metric("cborgate_requests_total", &[("verb", "LIST")], 1.0);
    once(
        h.proxy,
        "GET",
        &format!("{CMS}?watch=1&timeoutSeconds=1"),
        &[("Accept", CBOR)],
        None,
    );
    h.wait_metric("cborgate_requests_total", &[("verb", "WATCH")], 1.0);
    assert!(h.metric("cborgate_watch_events_total", &[("format", "cbor")]) >= 2.0);
    h.wait_metric("cborgate_watch_streams_active", &[], 0.0);
    once(
        h.proxy,
        "POST",
        CMS,
        &[("Content-Type", CBOR)],
        Some(b"\xff"),
    );
    h.wait_metric(
        "cborgate_transcode_errors_total",
        &[("direction", "request"), ("reason", "syntax")],
        1.0,
    );
    h.wait_metric(
        "cborgate_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    // Nothing identifying in labels.
    assert!(!h.metrics().contains("demo-config"));
    assert!(!h.metrics().contains("namespace=\""));
}

#[test]
fn readyz_turns_503_within_seconds_of_the_upstream_dying() {
    let mut h = Harness::start("legacy", &[]);
    let ready = |h: &Harness| once(h.admin, "GET", "/readyz", &[], None).status;
    eventually(10, "/readyz 200", || ready(&h) == 200);
    // The upstream goes away; no client request is made.
    drop(h.standin.take());
    eventually(10, "/readyz 503 after the upstream died", || {
        ready(&h) == 503
    });
    assert_eq!(once(h.admin, "GET", "/healthz", &[], None).status, 200);
    // The body, for an operator: the address once, what happened, nothing of pingora's
    // error chain (no `context:`, `cause:`, `sni` on a plain-HTTP upstream).
    let body = |h: &Harness| once(h.admin, "GET", "/readyz", &[], None).text();
    let want = format!("the upstream at {} refused the connection\n", h.upstream);
    eventually(10, "the refused connection in /readyz", || body(&h) == want);
}

/// While ready, the probe looks every 5 s; a request that finds the upstream gone makes
/// it look at once (no sooner than 2 s after the last probe), so `/readyz` follows what
/// requests see well before the next turn.
#[test]
fn a_request_that_finds_the_upstream_gone_makes_the_probe_look_at_once() {
    let mut h = Harness::start("legacy", &[]);
    let ready = |h: &Harness| once(h.admin, "GET", "/readyz", &[], None).status;
    eventually(10, "/readyz 200", || ready(&h) == 200);
    // Right after a probe (the stand-in counts it), so that the next turn is 5 s away.
    let before = h.standin().requests_seen();
    eventually(10, "a probe", || h.standin().requests_seen() > before);
    let t = std::time::Instant::now();
    drop(h.standin.take());
    let r = once(h.proxy, "GET", "/api/v1/namespaces", &[], None);
    assert_eq!(r.status, 503, "{}", r.text());
    // The doubted probe comes 2 s after the last one; the next turn would come at 5 s
    // (seen here up to one poll interval after it began). Within 4 s of that probe only
    // the doubt can have turned `/readyz`, with 2 s to spare for a loaded machine.
    let within = std::time::Duration::from_secs(4).saturating_sub(t.elapsed());
    let seen = crate::support::harness::poll(within, || (ready(&h) == 503).then_some(()));
    assert!(
        seen.is_some(),
        "/readyz still 200 {:?} after the last probe, though a request found the upstream gone",
        t.elapsed()
    );
}

// ---- Fidelity to a CBOR-enabled kube-apiserver 1.36.2 (tests/data/corpus/native-1.36) ----

fn recorded(case: &str) -> String {
    let path = crate::support::data().join(format!("corpus/native-1.36/{case}.body"));
    String::from_utf8(std::fs::read(path).unwrap()).unwrap()
}

/// The router's 406 when `Accept` matches none of the route's types: its exact text, with
/// `details: {}`, compact where the error negotiates JSON and indented where nothing does.
#[test]
fn the_routers_406_is_the_cbor_enabled_servers() {
    let h = Harness::start("legacy", &[]);
    h.standin().clear_requests();
    for (accept, case) in [
        ("application/*", "accept-app-star"),
        ("application/cbor-seq", "accept-cbor-seq"),
    ] {
        let r = once(
            h.proxy,
            "GET",
            &format!("{CMS}/demo-config"),
            &[("Accept", accept)],
            None,
        );
        assert_eq!(
            (r.status, r.content_type()),
            (406, "application/json"),
            "{accept}"
        );
        assert_eq!(String::from_utf8_lossy(&r.body), recorded(case), "{accept}");
    }
    assert!(h.standin().requests().is_empty(), "answered by cborgate");
    // A collection's route also lists the stream types.
    let r = once(h.proxy, "GET", CMS, &[("Accept", "text/plain")], None);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 406);
    assert_eq!(
        v["message"],
        "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, \
         application/vnd.kubernetes.protobuf, application/cbor, application/json;stream=watch, \
         application/vnd.kubernetes.protobuf;stream=watch, application/cbor-seq"
    );
    assert_eq!(v["details"], json!({}));
    // A Table the handler cannot give in CBOR: the other text (native-1.36 `table-cbor-only`).
    let r = once(
        h.proxy,
        "GET",
        CMS,
        &[("Accept", "application/cbor;as=Table;g=meta.k8s.io;v=v1")],
        None,
    );
    assert_eq!(r.status, 406);
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        recorded("table-cbor-only")
    );
}

/// Subresources that answer no API object (`log`, `exec`, …) pass through whatever the
/// `Accept` (native-1.36 `pod-log` is served); a legacy upstream is asked for JSON where
/// its router would refuse CBOR.
#[test]
fn pod_logs_with_a_cbor_accept_are_served() {
    let upstream = crate::support::harness::fake_upstream(|w| {
        let _ = w.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n",
        );
    });
    let h = Harness::proxy_to(&format!("http://{upstream}"), "legacy", &[]);
    let r = once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/pods/p1/log",
        &[("Accept", CBOR)],
        None,
    );
    assert_eq!(
        (r.status, r.content_type(), r.body.as_slice()),
        (200, "text/plain", &b"hello\n"[..])
    );
}

/// Errors a CBOR-enabled server writes in JSON from its filters and router (401, 403, 405,
/// and a watch's or a list's 404 for an unknown resource) reach a CBOR client as the upstream wrote them
/// (native-1.36 `unauth`, `impersonate`, `options`, `watch-missing-resource`); a handler's
/// 404 is still transcoded (`get-missing`).
#[test]
fn filter_and_router_errors_stay_json() {
    let status_of = |code: u16| -> &'static str {
        match code {
            401 => {
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
            }
            403 => {
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden","reason":"Forbidden","code":403}"#
            }
            405 => {
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","details":{},"code":405}"#
            }
            _ => {
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}"#
            }
        }
    };
    for (code, path) in [
        (401, format!("{CMS}/demo-config")),
        (403, format!("{CMS}/demo-config")),
        (405, format!("{CMS}/demo-config")),
        (
            404,
            "/api/v1/namespaces/demo/nosuchthings?watch=1".to_string(),
        ),
        // A list never 404s in its handler (a namespace that does not exist lists empty):
        // only the router's 404 for an unknown resource.
        (404, "/api/v1/namespaces/demo/nosuchthings".to_string()),
        (404, format!("{CMS}/nope")),
    ] {
        let body = status_of(code);
        let upstream = crate::support::harness::fake_upstream(move |w| {
            let _ = write!(w, "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        });
        let h = Harness::proxy_to(&format!("http://{upstream}"), "legacy", &[]);
        let r = once(h.proxy, "GET", &path, &[("Accept", CBOR)], None);
        assert_eq!(r.status, code, "{path}");
        let handler_404 = path.ends_with("/nope");
        if handler_404 {
            assert_eq!(r.content_type(), CBOR, "{path}");
            assert_eq!(decode(&r)["reason"], "NotFound");
        } else {
            assert_eq!(r.content_type(), "application/json", "{code} {path}");
            assert_eq!(r.body, body.as_bytes(), "{code} {path}");
            h.wait_metric(
                "cborgate_requests_total",
                &[("code", &code.to_string()), ("response_format", "json")],
                1.0,
            );
        }
    }
}

/// A byte string in a `[]byte` field is stored as its bytes when tagged 21–23, and an
/// untagged one as the bytes of the base64 text it holds, as the CBOR-enabled server
/// (kube-apiserver 1.36.2) stores them; a string field keeps the tag's text form; a text
/// string, or an untagged byte string that is not base64 text, in a `[]byte` field is a 400
/// (the latter in the real server's words), and nothing is created. Checked through
/// cborgate (legacy) and through it (native) to the stand-in's CBOR-enabled mode.
#[test]
fn byte_fields_are_stored_as_their_bytes() {
    let (legacy, native) = legacy_and_native();
    // {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": N},
    //  "binaryData": {"b": VALUE}, "data": {"s": 23(h'0001')}}
    let body = |name: &str, value: &[u8]| {
        let mut b =
            b"\xd9\xd9\xf7\xa5\x6aapiVersion\x62v1\x64kind\x69ConfigMap\x68metadata\xa1\x64name"
                .to_vec();
        b.push(0x60 + name.len() as u8);
        b.extend(name.as_bytes());
        b.extend(b"\x6abinaryData\xa1\x61b");
        b.extend(value);
        b.extend(b"\x64data\xa1\x61s\xd7\x42\x00\x01");
        b
    };
    let bytes = b"\x44\x00\x01\xff\xfe";
    let cases: [(&str, Vec<u8>); 3] = [
        ("tag23", [&b"\xd7"[..], bytes].concat()),
        ("tag21", [&b"\xd5"[..], bytes].concat()),
        ("untagged", b"\x48AAH//g==".to_vec()),
    ];
    for h in [&legacy, &native] {
        for (name, value) in &cases {
            let r = once(
                h.proxy,
                "POST",
                CMS,
                &[("Content-Type", CBOR), ("Accept", "application/json")],
                Some(&body(name, value)),
            );
            assert_eq!(
                r.status,
                201,
                "{name}: {}",
                String::from_utf8_lossy(&r.body)
            );
            let v = get_json(h.proxy, &format!("{CMS}/{name}"));
            assert_eq!(v["binaryData"]["b"], "AAH//g==", "{name}: 00 01 ff fe");
            assert_eq!(
                v["data"]["s"], "0001",
                "{name}: a string field keeps the hex text"
            );
        }
        let r = once(
            h.proxy,
            "POST",
            CMS,
            &[("Content-Type", CBOR), ("Accept", CBOR)],
            Some(&body("text", b"\x68AAH//g==")),
        );
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(decode(&r)["reason"], "BadRequest");
        let r = once(
            h.proxy,
            "GET",
            &format!("{CMS}/text"),
            &[("Accept", "application/json")],
            None,
        );
        assert_eq!(r.status, 404, "nothing created");
        // Raw bytes untagged are not base64 text: the real server's 400, word for word.
        let r = once(
            h.proxy,
            "POST",
            CMS,
            &[("Content-Type", CBOR), ("Accept", CBOR)],
            Some(&body("raw", b"\x45hello")),
        );
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(
            decode(&r)["message"],
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: cbor: failed to \
             decode base64 from byte string: illegal base64 data at input byte 4"
        );
        assert_eq!(decode(&r)["reason"], "BadRequest");
    }
    // What the legacy upstream read: base64 of the bytes.
    let posted: Vec<Value> = legacy
        .standin()
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .filter_map(|r| serde_json::from_slice(&r.body).ok())
        .collect();
    assert_eq!(posted.len(), 3, "the text case never went upstream as JSON");
    for v in posted {
        assert_eq!(v["binaryData"], json!({"b": "AAH//g=="}));
        assert_eq!(v["data"], json!({"s": "0001"}));
    }
}

/// A generic CBOR client (one that decodes into a generic value and writes it back, as
/// Python's cbor2 does) GETs a ConfigMap and a Secret and PUTs them back unchanged: the
/// `[]byte` fields keep their bytes, through cborgate (legacy) as on the CBOR-enabled
/// server (native). Such a client writes back the items it read, so the body is the GET's.
/// Both write the fields as tag 22 and the bytes (docs/wire.md §2).
#[test]
fn a_generic_cbor_client_round_trip_keeps_byte_fields() {
    let (legacy, native) = legacy_and_native();
    let secrets = "/api/v1/namespaces/demo/secrets";
    let objects = [
        (
            CMS,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rt"},
                   "binaryData": {"b": "AAEC//4=", "e": ""}, "data": {"t": "text"}}),
            "binaryData",
        ),
        (
            secrets,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rt"},
                   "data": {"a": "AAEC//4=", "p": "cGxhaW4="}, "type": "Opaque"}),
            "data",
        ),
    ];
    for h in [&legacy, &native] {
        for (path, object, field) in &objects {
            let r = once(
                h.proxy,
                "POST",
                path,
                &[("Content-Type", "application/json")],
                Some(object.to_string().as_bytes()),
            );
            assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
            let one = format!("{path}/rt");
            // Read as the CBOR-enabled server writes `[]byte` fields: tag 22 and the bytes,
            // in the object, in a list and in a watch event.
            let tagged = b"\xd6\x45\x00\x01\x02\xff\xfe";
            let has = |body: &[u8]| body.windows(tagged.len()).any(|w| w == tagged);
            let watch = format!("{path}?watch=true&timeoutSeconds=1");
            for (what, at, accept) in [
                ("object", &one, CBOR),
                ("list", &path.to_string(), CBOR),
                ("watch", &watch, "application/cbor-seq, application/cbor"),
            ] {
                let r = once(h.proxy, "GET", at, &[("Accept", accept)], None);
                assert_eq!(r.status, 200, "{what}");
                assert!(has(&r.body), "{path} {what}: {:02x?}", r.body);
            }
            for round in 0..2 {
                let got = once(h.proxy, "GET", &one, &[("Accept", CBOR)], None);
                assert_eq!(got.status, 200);
                let put = once(
                    h.proxy,
                    "PUT",
                    &one,
                    &[("Content-Type", CBOR), ("Accept", CBOR)],
                    Some(&got.body),
                );
                let why = String::from_utf8_lossy(&put.body);
                assert_eq!(put.status, 200, "{path} round {round}: {why}");
                let v = get_json(h.proxy, &one);
                assert_eq!(v[field], object[field], "{path} round {round}");
            }
        }
    }
}

/// The object at `path`, read as JSON.
fn get_json(proxy: std::net::SocketAddr, path: &str) -> Value {
    let r = once(proxy, "GET", path, &[("Accept", "application/json")], None);
    assert_eq!(r.status, 200, "{path}");
    serde_json::from_slice(&r.body).unwrap()
}

/// 401 (a bad token) and 403 (authorization, after impersonation) come
/// from the apiserver's filters as JSON, CBOR-enabled or not; through cborgate they reach
/// a CBOR client as JSON: the CBOR-enabled server's exact bytes in native mode, its value
/// in legacy mode.
#[test]
fn filter_errors_reach_a_cbor_client_as_recorded() {
    let (legacy, native) = legacy_and_native();
    for h in [&legacy, &native] {
        for (case, path, header) in [
            ("unauth", "cm-a", ("Authorization", "Bearer wrong")),
            ("impersonate", "cm-b", ("Impersonate-User", "bob")),
        ] {
            let r = once(
                h.proxy,
                "GET",
                &format!("/api/v1/namespaces/wire/configmaps/{path}"),
                &[("Accept", CBOR), header],
                None,
            );
            assert_eq!(r.content_type(), "application/json", "{case}");
            if std::ptr::eq(h, &native) {
                assert_eq!(String::from_utf8_lossy(&r.body), recorded(case), "{case}");
            } else {
                // The legacy upstream was asked for JSON, so it writes its Status compact
                // rather than indented: the same value.
                let want: Value = serde_json::from_str(&recorded(case)).unwrap();
                assert_eq!(
                    serde_json::from_slice::<Value>(&r.body).unwrap(),
                    want,
                    "{case}"
                );
            }
        }
    }
}

/// cborgate in legacy mode before the JSON-only stand-in, and in native mode before the
/// CBOR-enabled one: what a client sees through each should match.
fn legacy_and_native() -> (Harness, Harness) {
    use cborgate_standin::{CborMode, StandInOptions};
    let native = StandInOptions {
        cbor: CborMode::On,
        ..StandInOptions::default()
    };
    (
        Harness::start("legacy", &[]),
        Harness::start_with("native", &[], native),
    )
}
