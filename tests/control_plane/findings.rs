//! What real traffic found that no stand-in could, each pinned against the real
//! apiserver (the anonymous requests that end HTTP/2 connections: `goaway.rs`):
//! - a generic CBOR client's GET-then-PUT keeps `[]byte` fields (ConfigMap
//!   `binaryData`, Secret `data`) byte for byte, as it does against a CBOR-enabled
//!   apiserver;
//! - a gzip-compressed CBOR list is about the size the CBOR-enabled apiserver sends;
//! - an upstream that resets is not counted as a client that went away (499);
//! - a CBOR body is answered (415) from the request head before it has come, and the
//!   stream is then reset with `NO_ERROR` (why a body cborgate sends after the head can
//!   meet an ended stream: docs/wire.md §5a).

use crate::cbor::{self, Item};
use crate::cbor_client::{cbor_request, ACCEPT};
use crate::cluster::{metric_sum, Gate};
use crate::controllers::{create, namespace};
use crate::http::Client;
use crate::procs::free_port;
use crate::Suite;
use serde_json::json;

pub const CASES: [crate::Case; 4] = [
    (
        "generic_cbor_round_trip_keeps_byte_fields",
        byte_fields_round_trip,
    ),
    ("gzip_list_within_5_percent_of_native", gzip_size),
    ("upstream_reset_is_not_counted_as_499", upstream_reset),
    (
        "cbor_body_answered_before_it_arrives_then_reset_no_error",
        early_answer,
    ),
];

/// The bytes a ConfigMap's `binaryData` and a Secret's `data` hold.
const BYTES: [u8; 5] = [0x00, 0x01, 0x02, 0xff, 0xfe];
const BASE64: &str = "AAEC//4=";

/// A generic CBOR client GETs a ConfigMap (`binaryData`) and a Secret (`data`)
/// through cborgate and PUTs back exactly what it decoded: the stored bytes do not
/// change. What cborgate sends for those fields is what the CBOR-enabled apiserver
/// sends for the same object.
fn byte_fields_round_trip(s: &mut Suite) {
    let ns = "cp-bytes";
    s.api_cbor();
    let native = s.api_cbor.as_ref().unwrap().admin(&s.pki);
    let legacy = s.direct.clone();
    for c in [&legacy, &native] {
        namespace(c, ns);
        create(
            c,
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bin"},"binaryData":{"blob":BASE64}}),
        );
        create(
            c,
            &format!("/api/v1/namespaces/{ns}/secrets"),
            &json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"bin"},"data":{"blob":BASE64}}),
        );
    }
    for (path, field) in [
        (
            format!("/api/v1/namespaces/{ns}/configmaps/bin"),
            "binaryData",
        ),
        (format!("/api/v1/namespaces/{ns}/secrets/bin"), "data"),
    ] {
        let (st, got) = cbor_request(&s.through, "GET", &path, None, None);
        assert_eq!(st, 200);
        let (st, want) = cbor_request(&native, "GET", &path, None, None);
        assert_eq!(st, 200);
        let ours = got.get(field).and_then(|f| f.get("blob")).cloned();
        let theirs = want.get(field).and_then(|f| f.get("blob")).cloned();
        assert_eq!(
            ours, theirs,
            "{field}.blob: cborgate (left) and the CBOR-enabled apiserver (right)"
        );
        assert_eq!(
            theirs,
            Some(Item::Tag(22, Box::new(Item::Bytes(BYTES.to_vec())))),
            "what the CBOR-enabled apiserver sends"
        );
        let (st, put) = cbor_request(
            &s.through,
            "PUT",
            &path,
            Some("application/cbor"),
            Some(&cbor::encode(&got)),
        );
        assert_eq!(st, 200, "PUT back: {put:?}");
        let stored = s.direct.get_json(&path);
        assert_eq!(
            stored[field]["blob"], BASE64,
            "{path}: the stored bytes changed"
        );
    }
}

/// The same 320 ConfigMaps of about 1 KB in both apiservers; the LIST in CBOR with
/// gzip, through cborgate from the CBOR-off one and directly from the CBOR-enabled
/// one: within 5 % in size.
fn gzip_size(s: &mut Suite) {
    let ns = "cp-gzip";
    s.api_cbor();
    let native = s.api_cbor.as_ref().unwrap().admin(&s.pki);
    for c in [&s.direct, &native] {
        namespace(c, ns);
        for i in 0..320 {
            let data: serde_json::Map<String, serde_json::Value> = (0..8)
                .map(|k| {
                    (
                        format!("key-{k}"),
                        json!(format!("value {i} {k} {}", "abcdefghij".repeat(11))),
                    )
                })
                .collect();
            create(
                c,
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":format!("cm-{i:03}"),"labels":{"app":"gzip"}},"data":data}),
            );
        }
    }
    let list = |c: &Client| {
        let r = c.request(
            "GET",
            &format!("/api/v1/namespaces/{ns}/configmaps?labelSelector=app%3Dgzip"),
            &[("Accept", "application/cbor"), ("Accept-Encoding", "gzip")],
            None,
        );
        assert_eq!(r.status, 200);
        assert_eq!(
            r.header("content-encoding"),
            Some("gzip"),
            "{:?}",
            r.headers
        );
        r.body.len()
    };
    let (ours, theirs) = (list(&s.through), list(&native));
    eprintln!("gzip CBOR list of 320 ConfigMaps: cborgate {ours} B, CBOR-enabled apiserver {theirs} B ({:.3} ×)", ours as f64 / theirs as f64);
    assert!(
        ours as f64 <= theirs as f64 * 1.05,
        "cborgate {ours} B against {theirs} B"
    );
}

/// Through cborgate (`native`, HTTP/2 upstream): a stream the apiserver resets,
/// and a watch whose apiserver dies under it; neither is counted or logged as a
/// client that went away.
fn upstream_reset(s: &mut Suite) {
    let upstream = s.api_cbor().addr.clone();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut gate = Gate::start(
        &s.dir,
        "cborgate-reset",
        &s.pki,
        &upstream,
        "native",
        &listen,
        &[],
    );
    let c = gate.client(&s.pki, &s.pki.admin);
    // kube-apiserver 1.36 with CBOR on resets the stream of `GET /api/v1` when CBOR
    // is acceptable (tests/data/corpus/native-1.36: `disc-api-v1`, empty body).
    let r = c.try_request("GET", "/api/v1", &[("Accept", "application/cbor")], None);
    eprintln!(
        "GET /api/v1 in CBOR through native mode: {:?}",
        r.as_ref().map(|r| r.status)
    );
    let mut w = c.conn();
    c.send(
        &mut w,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=120",
        &[("Accept", ACCEPT)],
        None,
    );
    assert_eq!(w.head().status, 200);
    let api = s.api_cbor.as_mut().unwrap();
    api.svc.proc.as_ref().unwrap().signal(libc::SIGKILL);
    let mut end = Ok(Some(Vec::new()));
    while let Ok(Some(_)) = end {
        end = w.try_chunk();
    }
    crate::procs::eventually(10, "the watch counted", || {
        metric_sum(
            &gate.metrics(),
            "cborgate_requests_total",
            &[("verb", "WATCH")],
        ) >= 1.0
    });
    // The request log is written in batches (ops::logs): the watch's line may
    // follow its metric by a flush interval.
    let logged = |l: &str| l.contains("verb=\"WATCH\"") || l.contains("path=/api/v1 ");
    crate::procs::eventually(10, "both requests logged", || {
        gate.svc.log_text().lines().filter(|l| logged(l)).count() >= 2
    });
    let m = gate.metrics();
    let log = gate.svc.log_text();
    gate.svc.stop();
    api.svc.restart();
    let pki = &s.pki;
    s.api_cbor.as_mut().unwrap().wait_ready(pki);
    let client_gone = metric_sum(&m, "cborgate_requests_total", &[("code", "499")]);
    let lines: Vec<&str> = log.lines().filter(|l| logged(l)).collect();
    eprintln!(
        "the reset stream and the watch whose upstream died:\n{}",
        lines.join("\n")
    );
    assert_eq!(lines.len(), 2, "both requests logged");
    assert_eq!(client_gone, 0.0, "an upstream reset counted as 499");
    assert!(
        lines.iter().all(|l| !l.contains("status=499")),
        "logged as 499: {lines:?}"
    );
}

/// Straight to the CBOR-off apiserver over HTTP/2, with the admin token: a POST that says
/// it has a CBOR body and never sends it gets the 415 whole, then the stream is reset with
/// `NO_ERROR` (Go's HTTP/2 server, a complete response while the request body is open;
/// RFC 9113 §8.1), after which the body can no longer be sent. This is what
/// tests/proxy/early_answer.rs's upstream does to cborgate.
fn early_answer(s: &mut Suite) {
    let roots = crate::http::rustls_pemfile_certs(&s.pki.ca.path);
    let (addr, token) = (s.api.addr.clone(), s.pki.admin_token.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, body, reset, late_write) = rt.block_on(async move {
        let host = addr.rsplit_once(':').unwrap().0;
        let client = crate::support::http2::connect(addr.as_str(), host, roots).await;
        let mut client = client.ready().await.unwrap();
        let req = http::Request::builder()
            .method("POST")
            .uri(format!(
                "https://{addr}/api/v1/namespaces/default/configmaps"
            ))
            .header("content-type", "application/cbor")
            .header("accept", "application/json")
            .header("authorization", format!("Bearer {token}"))
            .header("content-length", "100")
            .body(())
            .unwrap();
        let (resp, mut send) = client.send_request(req, false).unwrap();
        let limit = std::time::Duration::from_secs(30);
        let resp = tokio::time::timeout(limit, resp).await.unwrap().unwrap();
        let status = resp.status().as_u16();
        let mut recv = resp.into_body();
        let mut body = Vec::new();
        while let Some(piece) = recv.data().await {
            let piece = piece.expect("the answer is whole");
            let _ = recv.flow_control().release_capacity(piece.len());
            body.extend_from_slice(&piece);
        }
        let reset = tokio::time::timeout(limit, std::future::poll_fn(|cx| send.poll_reset(cx)))
            .await
            .expect("the stream is reset")
            .unwrap();
        let late_write = send.send_data(bytes::Bytes::from(vec![0xa0; 100]), true);
        (status, body, reset, late_write.is_ok())
    });
    assert_eq!(status, 415, "{}", String::from_utf8_lossy(&body));
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["reason"], "UnsupportedMediaType", "{v}");
    assert_eq!(reset, h2::Reason::NO_ERROR);
    assert!(!late_write, "the body could still be sent after the reset");
}
