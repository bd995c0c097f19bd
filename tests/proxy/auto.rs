//! `auto` mode against the legacy (JSON-only) stand-in: CBOR bodies go up as
//! CBOR first; the upstream's 415 is replayed as JSON, so no client ever sees
//! it; what was learned holds per (verb, group, resource) for the TTL.

use crate::support::bodies::{cbor, decode};
use crate::support::harness::{config_file, Harness};
use crate::support::http::Conn;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Upstream requests that carried a CBOR body, by (method, resource).
fn cbor_bodies_upstream(h: &Harness) -> BTreeMap<(String, String), usize> {
    let mut m = BTreeMap::new();
    for r in h.standin().requests() {
        let ct = r.header("content-type").unwrap_or("");
        if ct.contains("cbor") {
            let resource = r
                .path
                .split('?')
                .next()
                .unwrap()
                .split('/')
                .nth(if r.path.starts_with("/api/") { 5 } else { 6 })
                .unwrap_or("")
                .to_string();
            *m.entry((r.method.clone(), resource)).or_insert(0) += 1;
        }
    }
    m
}

fn scenario(c: &mut Conn, base: &str, make: &dyn Fn(&str) -> Value, name: &str) {
    let hdr = |ct: &'static str| {
        vec![
            ("Accept", "application/json;q=0.9,application/cbor;q=1"),
            ("Content-Type", ct),
        ]
    };
    let r = c.request(
        "POST",
        base,
        &hdr("application/cbor"),
        Some(&cbor(&make(name))),
    );
    assert_eq!(
        r.status,
        201,
        "create {name}: {}",
        String::from_utf8_lossy(&r.body)
    );
    let mut obj = decode(&r);
    obj["metadata"]["labels"] = json!({"x": "y"});
    let item = format!("{base}/{name}");
    let r = c.request("PUT", &item, &hdr("application/cbor"), Some(&cbor(&obj)));
    assert_eq!(
        r.status,
        200,
        "update {name}: {}",
        String::from_utf8_lossy(&r.body)
    );
    let mut apply = cbor(&make(name));
    apply.drain(..3);
    let r = c.request(
        "PATCH",
        &format!("{item}?fieldManager=auto"),
        &hdr("application/apply-patch+cbor"),
        Some(&apply),
    );
    assert_eq!(
        r.status,
        200,
        "apply {name}: {}",
        String::from_utf8_lossy(&r.body)
    );
    decode(&r);
    let r = c.request("GET", &item, &[("Accept", "application/cbor")], None);
    assert_eq!(r.status, 200);
    decode(&r);
}

#[test]
fn auto_against_legacy_replays_each_415_once_per_key() {
    let conf = config_file("[upstream]\ncapability_ttl_seconds = 3\n");
    let h = Harness::start("auto", &["--config", &conf]);
    let mut c = Conn::connect(h.proxy);
    let cm = |n: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": {"k": "v"}});
    let gadget = |n: &str| json!({"apiVersion": "corpus.example.com/v1", "kind": "Gadget", "metadata": {"name": n}, "spec": {"size": 1}});
    for i in 0..3 {
        scenario(
            &mut c,
            "/api/v1/namespaces/demo/configmaps",
            &cm,
            &format!("auto-cm-{i}"),
        );
        scenario(
            &mut c,
            "/apis/corpus.example.com/v1/namespaces/demo/gadgets",
            &gadget,
            &format!("auto-g-{i}"),
        );
    }
    // Exactly one CBOR attempt (and so one 415) per (verb, group, resource).
    let tried = cbor_bodies_upstream(&h);
    assert_eq!(tried.len(), 6, "{tried:?}");
    assert!(tried.values().all(|&n| n == 1), "{tried:?}");
    let replays: usize = tried.values().sum();
    assert_eq!(h.metric("cborgate_fallbacks_total", &[]), replays as f64);
    assert_eq!(
        h.metric(
            "cborgate_unsupported_media_type_total",
            &[("origin", "upstream")]
        ),
        replays as f64
    );
    // No client saw a 415.
    assert_eq!(h.metric("cborgate_requests_total", &[("code", "415")]), 0.0);
    // What was learned is visible, with timestamps.
    let caps = crate::support::http::once(h.admin, "GET", "/debug/capabilities", &[], None);
    assert_eq!(caps.status, 200);
    let v: Value = serde_json::from_slice(&caps.body).unwrap();
    let entries = v["entries"].as_array().unwrap();
    assert!(entries.iter().any(|e| e["verb"] == "POST"
        && e["group"] == ""
        && e["resource"] == "configmaps"
        && e["upstream"] == "json"));
    assert!(entries.iter().any(|e| e["verb"] == "APPLY"
        && e["group"] == "corpus.example.com"
        && e["resource"] == "gadgets"));
    assert!(entries[0]["learnedAt"].as_str().unwrap().ends_with('Z'));
    // After the TTL (the expiry itself is unit-tested on an injected clock in
    // outbound::capabilities), the entry is gone from /debug/capabilities, and cborgate
    // probes with CBOR again: one more 415, still invisible.
    crate::support::harness::eventually(10, "the learned entry expires", || {
        let caps = crate::support::http::once(h.admin, "GET", "/debug/capabilities", &[], None);
        !String::from_utf8_lossy(&caps.body).contains(r#""resource":"configmaps""#)
    });
    let r = c.request(
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        &[
            ("Content-Type", "application/cbor"),
            ("Accept", "application/cbor"),
        ],
        Some(&cbor(&cm("after-ttl"))),
    );
    assert_eq!(r.status, 201);
    assert_eq!(
        cbor_bodies_upstream(&h)[&("POST".to_string(), "configmaps".to_string())],
        2
    );
    assert_eq!(
        h.metric("cborgate_fallbacks_total", &[]),
        replays as f64 + 1.0
    );
}

#[test]
fn auto_asks_for_cbor_first_and_transcodes_json_answers() {
    let h = Harness::start("auto", &[]);
    let r = crate::support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Accept", "application/cbor")],
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(decode(&r)["metadata"]["name"], "demo-config");
    let up = h.standin().requests().last().unwrap().clone();
    assert_eq!(
        up.header("accept"),
        Some("application/cbor, application/json;q=0.9")
    );
    // Large bodies are never sent as CBOR first (they could not be replayed).
    let mut big =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {}});
    big["data"]["blob"] = json!("x".repeat(100_000));
    let r = crate::support::http::once(
        h.proxy,
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        &[
            ("Content-Type", "application/cbor"),
            ("Accept", "application/cbor"),
        ],
        Some(&cbor(&big)),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        h.standin()
            .requests()
            .last()
            .unwrap()
            .header("content-type"),
        Some("application/json")
    );
}

/// Against a CBOR-enabled upstream, once `auto` has seen a key answered in CBOR it
/// keeps the client's `Accept-Encoding`, and the upstream's own gzip of a large CBOR
/// LIST passes through untouched.
#[test]
fn auto_keeps_a_cbor_upstreams_gzip() {
    use cborgate_standin::{CborMode, StandInOptions};
    use std::io::Read;
    let opts = StandInOptions {
        cbor: CborMode::On,
        ..Default::default()
    };
    let h = Harness::start_with("auto", &[], opts);
    h.standin().emit_configmaps("gz", 1500);
    let list = "/api/v1/namespaces/gz/configmaps";
    let headers = [("Accept", "application/cbor"), ("Accept-Encoding", "gzip")];
    // The first answer teaches auto that the upstream speaks CBOR for LIST configmaps;
    // the JSON it might have had to transcode was asked for uncompressed.
    let first = crate::support::http::once(h.proxy, "GET", list, &headers, None);
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-encoding"), None);
    let up = h.standin().requests().last().unwrap().clone();
    assert_eq!(up.header("accept-encoding"), None);
    // The second keeps Accept-Encoding, and the upstream's gzip comes through.
    let second = crate::support::http::once(h.proxy, "GET", list, &headers, None);
    assert_eq!(second.status, 200);
    let up = h.standin().requests().last().unwrap().clone();
    assert_eq!(up.header("accept-encoding"), Some("gzip"));
    assert_eq!(second.header("content-type"), Some("application/cbor"));
    assert_eq!(second.header("content-encoding"), Some("gzip"));
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&second.body[..])
        .read_to_end(&mut plain)
        .unwrap();
    let v = |b: &[u8]| -> Value {
        let json = cborgate::codec::cbor_to_json(b, cborgate::codec::CborToJsonOptions::default());
        serde_json::from_slice(&json.unwrap()).unwrap()
    };
    assert_eq!(v(&plain)["items"], v(&first.body)["items"]);
}
