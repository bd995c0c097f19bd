//! Clients that decode CBOR with client-go 1.32–1.35's limits (docs/wire.md §2b): an
//! answer with an array or map of more than 1,024 reaches them as the upstream's JSON,
//! byte for byte, when they accept JSON; everything else is as before. Through the real
//! binary, `legacy` mode, the stand-in behind it (and, for the 200 MB list, a static
//! upstream of the test's own, with the proxy's memory measured from /proc).

use crate::support::bodies::decode;
use crate::support::harness::{fake_upstream_seeing, rss_kib, Harness};
use crate::support::http::{once, Conn, Resp};
use serde_json::{json, Value};
use std::io::Write;

const OLD: &str = "kube-controller-manager/v1.35.2 (linux/amd64) kubernetes/abc";
const NEW: &str = "kube-controller-manager/v1.36.0 (linux/amd64) kubernetes/abc";
const BOTH: &str = "application/cbor, application/json";
const CBOR: &str = "application/cbor";

fn get(h: &Harness, path: &str, user_agent: &str, accept: &str) -> Resp {
    once(
        h.proxy,
        "GET",
        path,
        &[("User-Agent", user_agent), ("Accept", accept)],
        None,
    )
}

/// The upstream's own JSON answer, asked for as cborgate asks for it.
fn upstream_json(h: &Harness, path: &str) -> Vec<u8> {
    let r = once(
        h.upstream,
        "GET",
        path,
        &[("Accept", "application/json")],
        None,
    );
    assert_eq!(r.status, 200);
    r.body
}

fn protected(h: &Harness, reason: &str) -> f64 {
    h.metric(
        "cborgate_cbor_protected_total",
        &[("client", "kube-controller-manager"), ("reason", reason)],
    )
}

fn items(v: &Value) -> usize {
    v["items"].as_array().map_or(0, Vec::len)
}

#[test]
fn a_list_of_1500_reaches_an_old_client_as_the_upstreams_json() {
    let h = Harness::start("legacy", &[]);
    h.standin().emit_configmaps("wide", 1500);
    let path = "/api/v1/namespaces/wide/configmaps";
    assert_eq!(protected(&h, "over_limit"), 0.0);

    let r = get(&h, path, OLD, BOTH);
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type(), "application/json");
    assert_eq!(
        r.body,
        upstream_json(&h, path),
        "the JSON as the upstream sent it"
    );
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(items(&v), 1500);
    assert_eq!(protected(&h, "over_limit"), 1.0);

    // A client with the new limits, and a CBOR-only client: CBOR as before.
    for (ua, accept) in [(NEW, BOTH), (OLD, CBOR)] {
        let r = get(&h, path, ua, accept);
        assert_eq!(r.status, 200);
        assert_eq!(items(&decode(&r)), 1500, "{ua} {accept}");
    }
    assert_eq!(protected(&h, "over_limit"), 1.0);
}

#[test]
fn a_list_of_1000_is_cbor_to_every_client() {
    let h = Harness::start("legacy", &[]);
    h.standin().emit_configmaps("narrow", 1000);
    let path = "/api/v1/namespaces/narrow/configmaps";
    for (ua, accept) in [(OLD, BOTH), (NEW, BOTH), (OLD, CBOR), ("curl/8.5.0", BOTH)] {
        let r = get(&h, path, ua, accept);
        assert_eq!(r.status, 200);
        assert_eq!(items(&decode(&r)), 1000, "{ua} {accept}");
    }
    for reason in ["over_limit", "undecided"] {
        assert_eq!(protected(&h, reason), 0.0);
    }
}

#[test]
fn an_object_with_a_map_of_1500_keys_gets_the_same_treatment() {
    let h = Harness::start("legacy", &[]);
    let data: serde_json::Map<String, Value> = (0..1500)
        .map(|i| (format!("key-{i:05}"), json!("v")))
        .collect();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big"}, "data": data});
    let made = once(
        h.upstream,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", "application/json")],
        Some(&serde_json::to_vec(&cm).unwrap()),
    );
    assert_eq!(made.status, 201, "{}", made.text());
    let path = "/api/v1/namespaces/default/configmaps/big";

    let r = get(&h, path, OLD, BOTH);
    assert_eq!(r.content_type(), "application/json");
    assert_eq!(r.body, upstream_json(&h, path));
    assert_eq!(protected(&h, "over_limit"), 1.0);
    for (ua, accept) in [(NEW, BOTH), (OLD, CBOR)] {
        let v = decode(&get(&h, path, ua, accept));
        assert_eq!(v["data"].as_object().unwrap().len(), 1500, "{ua} {accept}");
    }
    // The operator's patterns, and the switch for every client.
    let h = Harness::start("legacy", &["--cbor-protection-user-agents=my-operator/*"]);
    h.standin().emit_configmaps("wide", 1100);
    let path = "/api/v1/namespaces/wide/configmaps";
    let ua = "my-operator/v0.0.0-master+$Format:%H$ (linux/amd64) kubernetes/$Format";
    assert_eq!(get(&h, path, ua, BOTH).content_type(), "application/json");
    assert_eq!(get(&h, path, NEW, BOTH).content_type(), CBOR);
    let other = |h: &Harness| {
        h.metric(
            "cborgate_cbor_protected_total",
            &[("client", "other"), ("reason", "over_limit")],
        )
    };
    assert_eq!(other(&h), 1.0);
    let h = Harness::start("legacy", &["--cbor-protection-all-clients"]);
    h.standin().emit_configmaps("wide", 1100);
    assert_eq!(get(&h, path, NEW, BOTH).content_type(), "application/json");
    let off = Harness::start("legacy", &["--cbor-protection-enabled=false"]);
    off.standin().emit_configmaps("wide", 1100);
    assert_eq!(get(&off, path, OLD, BOTH).content_type(), CBOR);
}

#[test]
fn a_watch_to_an_old_client_that_accepts_json_is_json() {
    let h = Harness::start("legacy", &[]);
    let mut c = Conn::connect(h.proxy);
    c.send(
        "GET",
        "/api/v1/namespaces/demo/configmaps?watch=true&timeoutSeconds=1",
        &[
            ("User-Agent", OLD),
            ("Accept", "application/cbor, application/json"),
        ],
        None,
    );
    let head = c.head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("application/json"));
    assert_eq!(protected(&h, "undecided"), 1.0);
}

#[test]
fn an_old_client_over_http2_gets_json_for_a_wide_list() {
    let (p, h) = crate::tls::tls_legacy("protect");
    h.standin().emit_configmaps("wide", 1500);
    let path = "/api/v1/namespaces/wide/configmaps";
    let want = upstream_json(&h, path);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for (ua, ct) in [(OLD, "application/json"), (NEW, CBOR)] {
            let mut client = crate::tls::h2_connect(h.proxy, &p.ca_der).await;
            let req = http::Request::builder()
                .uri(format!("https://localhost{path}"))
                .header("accept", BOTH)
                .header("user-agent", ua)
                .body(())
                .unwrap();
            let (resp, _) = client.send_request(req, true).unwrap();
            let resp = resp.await.unwrap();
            assert_eq!(resp.status(), 200);
            assert_eq!(resp.headers()["content-type"], ct);
            let data = crate::tls::h2_body(resp.into_body()).await;
            if ct == "application/json" {
                assert_eq!(data, want);
            }
        }
    });
}

/// The 200 MB list: each item carries a 64 KiB string, so nothing is wider than the
/// limit within the 1 MiB hold: undecided, JSON, streamed.
const ITEM_STRING: usize = 64 * 1024;
const ITEMS: usize = 200 * 1024 * 1024 / ITEM_STRING;

fn write_big_list(w: &mut std::net::TcpStream) -> std::io::Result<()> {
    let head = "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":[";
    let filler = "x".repeat(ITEM_STRING);
    w.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    let chunk = |w: &mut std::net::TcpStream, s: &str| {
        write!(w, "{:x}\r\n", s.len())?;
        w.write_all(s.as_bytes())?;
        w.write_all(b"\r\n")
    };
    chunk(w, head)?;
    for i in 0..ITEMS {
        let sep = if i == 0 { "" } else { "," };
        chunk(w, &format!("{sep}{{\"data\":{{\"k\":\"{filler}\"}}}}"))?;
    }
    chunk(w, "]}")?;
    w.write_all(b"0\r\n\r\n")
}

fn big_list_len() -> u64 {
    let head = "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":[";
    let item = "{\"data\":{\"k\":\"\"}}".len() + ITEM_STRING;
    (head.len() + ITEMS * item + (ITEMS - 1) + 2) as u64
}

#[test]
fn a_200_mb_list_to_an_old_client_keeps_the_proxys_memory_bounded() {
    let upstream = fake_upstream_seeing(|line, w| {
        if line.contains("/readyz") {
            let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        } else {
            let _ = write_big_list(w);
        }
    });
    let h = Harness::proxy_to(&format!("http://{upstream}"), "legacy", &[]);
    let pid = h.child.id();
    let before = rss_kib(pid, "VmRSS:");
    let mut c = Conn::connect(h.proxy);
    c.send(
        "GET",
        "/api/v1/configmaps",
        &[("User-Agent", OLD), ("Accept", BOTH)],
        None,
    );
    let head = c.head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("application/json"));
    let mut got = 0u64;
    while let Some(piece) = c.chunk() {
        got += piece.len() as u64;
    }
    assert_eq!(got, big_list_len(), "the whole list arrived");
    let peak = rss_kib(pid, "VmHWM:");
    let growth_mib = peak.saturating_sub(before) / 1024;
    eprintln!("proxy RSS: {before} KiB before, peak {peak} KiB (+{growth_mib} MiB)");
    assert!(growth_mib < 64, "the proxy grew by {growth_mib} MiB");
    assert_eq!(
        h.metric(
            "cborgate_cbor_protected_total",
            &[
                ("client", "kube-controller-manager"),
                ("reason", "undecided")
            ]
        ),
        1.0
    );
}

#[test]
fn a_held_request_whose_upstream_is_down_gets_a_status() {
    let nobody = crate::support::harness::free_port();
    let h = Harness::proxy_to(&format!("http://{nobody}"), "legacy", &[]);
    let r = get(&h, "/api/v1/configmaps", OLD, BOTH);
    assert_eq!(r.status, 503, "{}", r.text());
    let status = decode(&r);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 503);
    // Counted when the request ends, just after its answer went out.
    h.wait_metric(
        "cborgate_requests_total",
        &[("code", "503"), ("verb", "LIST")],
        1.0,
    );
}

#[test]
fn a_held_answer_made_cbor_is_gzipped_as_any_other() {
    let h = Harness::start("legacy", &[]);
    h.standin().emit_configmaps("narrow", 1000);
    let r = once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/narrow/configmaps",
        &[
            ("User-Agent", OLD),
            ("Accept", BOTH),
            ("Accept-Encoding", "gzip"),
        ],
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type(), CBOR);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let v = crate::streams::cbor_value(&crate::streams::gunzip(&r.body));
    assert_eq!(items(&v), 1000);
}

/// A pooled upstream connection that the upstream closes as the next request arrives
/// (as an apiserver closing an idle keep-alive connection does) costs a held request
/// nothing: it is sent again on a new connection, and counted.
#[test]
fn a_held_request_on_a_closed_pooled_connection_is_sent_again() {
    use std::io::{BufRead, BufReader};
    const LIST: &str = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[]}"#;
    let upstream = fake_upstream_seeing(|line, w| {
        if line.contains("/readyz") {
            let _ =
                w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            return;
        }
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{LIST}",
            LIST.len()
        );
        // The next request on this connection: read its head, then close unanswered.
        let mut r = BufReader::new(w.try_clone().unwrap());
        let mut l = String::new();
        while r.read_line(&mut l).unwrap_or(0) > 0 && l != "\r\n" {
            l.clear();
        }
    });
    let h = Harness::proxy_to(&format!("http://{upstream}"), "legacy", &[]);
    for _ in 0..2 {
        let r = get(&h, "/api/v1/configmaps", OLD, BOTH);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(items(&decode(&r)), 0);
    }
    assert_eq!(
        h.metric(
            "cborgate_upstream_retries_total",
            &[("reason", "connection")]
        ),
        1.0
    );
}
