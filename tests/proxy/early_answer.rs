//! An HTTP/2 upstream that answers before it has the request body (docs/wire.md §5a).
//!
//! kube-apiserver 1.36.2 answers a CBOR body it does not take with 415 as soon as it has
//! the request head, without reading the body; Go's HTTP/2 server then, the response
//! complete, resets the stream with `NO_ERROR` (RFC 9113 §8.1), since the body is still
//! open. A body cborgate read whole goes upstream only after the head, once the stream is
//! open; when the answer and the reset come first, pingora's write of the body fails
//! ("cannot reserve capacity") and takes the answer with it: the client got a 503 where
//! `auto` mode owed it the JSON replay.
//!
//! The upstream here is a small TLS server that speaks HTTP/2 and HTTP/1.1 (ALPN). Over
//! HTTP/2 it gives each stream a send window of [`WINDOW`] bytes, less than any body the
//! tests send, and refunds it only for a body it reads: the answer to a body it does not
//! read (a CBOR one) always comes before the body could be sent whole, which a busy
//! cborgate meets by chance (its task scheduled late, or the connection's window spent by
//! other streams). A CBOR body gets 415 unread, then the reset h2's server sends, as Go's
//! does, after a complete response while the request body is open; a JSON body is read
//! and created (201). Over HTTP/1.1 it reads every body, then answers the same.
//! `?fail=reset-unread` resets the stream (`INTERNAL_ERROR`) before any answer without
//! reading the body (HTTP/1.1: closes the connection unanswered); `?fail=reset-read`
//! reads the body, then resets the stream before any answer.

use crate::support::bodies::cbor;
use crate::support::harness::Harness;
use crate::support::http::Conn;
use crate::support::http2;
use crate::support::pki::Ca;
use crate::upstream::{answer_h1, answer_h2, read_h1, Tls};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The send window the upstream gives each HTTP/2 stream: smaller than any body here.
const WINDOW: u32 = 16;

const UNSUPPORTED: &[u8] = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf","reason":"UnsupportedMediaType","code":415}"#;

/// The POSTs the upstream was sent, per protocol and body format.
#[derive(Default)]
struct Seen {
    h2_cbor: AtomicUsize,
    h2_json: AtomicUsize,
    h1_cbor: AtomicUsize,
    h1_json: AtomicUsize,
    /// Streams reset (or HTTP/1.1 connections closed) before any answer, as asked.
    failed: AtomicUsize,
}

impl Seen {
    fn count(&self, c: fn(&Seen) -> &AtomicUsize) -> usize {
        c(self).load(Ordering::SeqCst)
    }
}

/// How the upstream fails a request before answering it (`fail=` in the query).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fail {
    No,
    ResetUnread,
    ResetRead,
}

fn fail_of(query: Option<&str>) -> Fail {
    match query.unwrap_or("") {
        q if q.contains("fail=reset-unread") => Fail::ResetUnread,
        q if q.contains("fail=reset-read") => Fail::ResetRead,
        _ => Fail::No,
    }
}

fn is_cbor(content_type: Option<&[u8]>) -> bool {
    content_type.is_some_and(|v| String::from_utf8_lossy(v).contains("cbor"))
}

/// The answer to a request whose body was read: 415 to CBOR, the JSON body created
/// (201) to a POST, `ok` to anything else (the readiness probe's `GET /readyz`).
fn answer(method: &str, cbor: bool, body: Vec<u8>) -> (u16, Vec<u8>) {
    match (method, cbor) {
        (_, true) => (415, UNSUPPORTED.to_vec()),
        ("POST", false) => (201, body),
        _ => (200, b"ok".to_vec()),
    }
}

async fn serve_h2(tls: Tls, seen: Arc<Seen>) {
    let Ok(mut conn) = h2::server::Builder::new()
        .initial_window_size(WINDOW)
        .handshake::<_, bytes::Bytes>(tls)
        .await
    else {
        return;
    };
    while let Some(Ok((req, mut respond))) = conn.accept().await {
        let seen = seen.clone();
        tokio::spawn(async move {
            let method = req.method().as_str().to_string();
            let cbor = is_cbor(req.headers().get("content-type").map(|v| v.as_bytes()));
            let fail = fail_of(req.uri().query());
            if method == "POST" {
                let counter = if cbor { &seen.h2_cbor } else { &seen.h2_json };
                counter.fetch_add(1, Ordering::SeqCst);
            }
            let mut recv = req.into_body();
            if fail == Fail::ResetUnread {
                seen.failed.fetch_add(1, Ordering::SeqCst);
                respond.send_reset(h2::Reason::INTERNAL_ERROR);
                return;
            }
            // kube-apiserver reads no body it cannot decode; every other one it reads,
            // refunding the window as it goes.
            let mut body = Vec::new();
            if !cbor || fail == Fail::ResetRead {
                while let Some(Ok(chunk)) = recv.data().await {
                    let _ = recv.flow_control().release_capacity(chunk.len());
                    body.extend_from_slice(&chunk);
                }
            }
            if fail == Fail::ResetRead {
                seen.failed.fetch_add(1, Ordering::SeqCst);
                respond.send_reset(h2::Reason::INTERNAL_ERROR);
                return;
            }
            let (status, body) = answer(&method, cbor, body);
            answer_h2(&mut respond, status, body);
            // Both handles dropped here with the response complete and the request body
            // still open (the CBOR one): h2's server resets the stream with `NO_ERROR`
            // once the response is out (`maybe_cancel`), as Go's does.
        });
    }
}

async fn serve_h1(tls: Tls, seen: Arc<Seen>) {
    let mut io = tokio::io::BufReader::new(tls);
    while let Some(req) = read_h1(&mut io).await {
        let cbor = is_cbor(req.header("content-type").map(str::as_bytes));
        if req.method == "POST" {
            let counter = if cbor { &seen.h1_cbor } else { &seen.h1_json };
            counter.fetch_add(1, Ordering::SeqCst);
        }
        if fail_of(req.target.split_once('?').map(|(_, q)| q)) != Fail::No {
            seen.failed.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let (status, body) = answer(&req.method, cbor, req.body);
        if !answer_h1(io.get_mut(), status, &body).await {
            return;
        }
    }
}

/// A CBOR POST straight to the upstream over HTTP/2, its body never sent: the answer's
/// status and body, and how the upstream then ended the stream (kube-apiserver 1.36.2:
/// 415 and `NO_ERROR`).
fn direct_cbor_post(
    rt: &tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
    ca: &Ca,
) -> (u16, Option<h2::Reason>) {
    rt.block_on(async move {
        let client = http2::connect(addr, "localhost", [ca.der()]).await;
        let mut client = client.ready().await.unwrap();
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("https://localhost:{}{PATH}", addr.port()))
            .header("content-type", "application/cbor")
            .header("content-length", "100")
            .body(())
            .unwrap();
        let (resp, mut send) = client.send_request(req, false).unwrap();
        let resp = resp.await.unwrap();
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        while let Some(Ok(_)) = body.data().await {}
        let reset = std::future::poll_fn(|cx| send.poll_reset(cx)).await.ok();
        (status, reset)
    })
}

const PATH: &str = "/api/v1/namespaces/demo/configmaps";

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

/// cborgate in `auto` mode in front of the upstream, for token clients (shared HTTP/2
/// upstream connections).
struct Setup {
    h: Harness,
    seen: Arc<Seen>,
    rt: tokio::runtime::Runtime,
    ca: Ca,
    upstream: std::net::SocketAddr,
}

fn start(tag: &str) -> Setup {
    let up = crate::upstream::start(tag, "early-answer-upstream", serve_h2, serve_h1);
    Setup {
        h: up.cborgate("auto"),
        seen: up.seen,
        rt: up.rt,
        ca: up.ca,
        upstream: up.addr,
    }
}

/// A client of cborgate whose token requests' HTTP/2 connection upstream is open, and
/// the upstream's SETTINGS (its [`WINDOW`]) taken: a stream opened before them would
/// have the default window of 65535 bytes, and its body would go whole.
fn client(h: &Harness) -> Conn {
    let mut c = Conn::connect(h.proxy);
    let r = c.request(
        "GET",
        PATH,
        &[
            ("Authorization", "Bearer good"),
            ("Accept", "application/json"),
        ],
        None,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    c
}

fn post_cbor(c: &mut Conn, query: &str, name: &str) -> crate::support::http::Resp {
    c.request(
        "POST",
        &format!("{PATH}{query}"),
        &[
            ("Authorization", "Bearer good"),
            ("Content-Type", "application/cbor"),
            ("Accept", "application/json"),
        ],
        Some(&cbor(&configmap(name))),
    )
}

/// The upstream's 415 and `NO_ERROR` reset came before cborgate could send the CBOR body:
/// the request is still replayed as JSON, and the client gets the upstream's 201.
#[test]
fn a_415_that_ends_the_stream_before_the_body_is_still_replayed_as_json() {
    let Setup {
        h,
        seen,
        rt,
        ca,
        upstream,
    } = start("early-415");
    // The upstream ends the stream as kube-apiserver 1.36.2 does.
    assert_eq!(
        direct_cbor_post(&rt, upstream, &ca),
        (415, Some(h2::Reason::NO_ERROR))
    );
    let direct = seen.count(|s| &s.h2_cbor);
    let mut c = client(&h);
    let r = post_cbor(&mut c, "", "early-1");
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let got: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(got["metadata"]["name"], "early-1");
    // The CBOR body met the 415 over HTTP/2, then again over HTTP/1.1, where it was sent
    // whole; the JSON replay followed it there.
    assert_eq!(seen.count(|s| &s.h2_cbor) - direct, 1);
    assert_eq!(seen.count(|s| &s.h1_cbor), 1);
    assert_eq!(seen.count(|s| &s.h1_json), 1);
    assert_eq!(seen.count(|s| &s.h2_json), 0);
    h.wait_metric("cborgate_requests_total", &[("code", "201")], 1.0);
    assert_eq!(h.metric("cborgate_fallbacks_total", &[]), 1.0);
    assert_eq!(
        h.metric(
            "cborgate_upstream_retries_total",
            &[("reason", "ended_before_body")]
        ),
        1.0
    );
    assert_eq!(h.metric("cborgate_requests_total", &[("code", "503")]), 0.0);
    // What the 415 taught holds: the next body goes as JSON, over HTTP/2.
    let r = post_cbor(&mut c, "", "early-2");
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(seen.count(|s| &s.h2_json), 1);
    assert_eq!(seen.count(|s| &s.h2_cbor) - direct, 1);
    assert_eq!(h.metric("cborgate_fallbacks_total", &[]), 1.0);
}

/// A stream the upstream resets before any answer, once it has read the body, fails as
/// it always did: a 503, nothing sent again, nothing replayed or learned.
#[test]
fn a_reset_before_any_answer_after_the_body_is_a_503() {
    let Setup {
        h, seen, rt: _rt, ..
    } = start("early-reset-read");
    let mut c = client(&h);
    let r = post_cbor(&mut c, "?fail=reset-read", "reset-read");
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(seen.count(|s| &s.h2_cbor), 1);
    assert_eq!(seen.count(|s| &s.failed), 1);
    assert_eq!(seen.count(|s| &s.h1_cbor) + seen.count(|s| &s.h1_json), 0);
    h.wait_metric("cborgate_requests_total", &[("code", "503")], 1.0);
    assert_eq!(h.metric("cborgate_fallbacks_total", &[]), 0.0);
    assert_eq!(h.metric("cborgate_upstream_retries_total", &[]), 0.0);
}

/// A stream the upstream resets before any answer and before it had the body: pingora
/// reports the reset through whichever of its two halves sees it first, reading the
/// answer (the 503 of before) or writing the body (the upstream cannot have acted on a
/// body it never had: sent again once, as it is, over HTTP/1.1, where it fails too). Either
/// way the reset is no 415: nothing is replayed as JSON or learned, and the client gets a
/// 503.
#[test]
fn a_reset_before_any_answer_and_before_the_body_is_never_replayed() {
    let Setup {
        h, seen, rt: _rt, ..
    } = start("early-reset-unread");
    let mut c = client(&h);
    let r = post_cbor(&mut c, "?fail=reset-unread", "reset-unread");
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    h.wait_metric("cborgate_requests_total", &[("code", "503")], 1.0);
    assert_eq!(seen.count(|s| &s.h2_cbor), 1);
    let resent = seen.count(|s| &s.h1_cbor);
    assert!(resent <= 1, "sent again {resent} times");
    assert_eq!(seen.count(|s| &s.failed), 1 + resent);
    assert_eq!(
        h.metric(
            "cborgate_upstream_retries_total",
            &[("reason", "ended_before_body")]
        ),
        resent as f64
    );
    assert_eq!(
        h.metric("cborgate_upstream_retries_total", &[]),
        resent as f64
    );
    assert_eq!(seen.count(|s| &s.h2_json) + seen.count(|s| &s.h1_json), 0);
    assert_eq!(h.metric("cborgate_fallbacks_total", &[]), 0.0);
    // Nothing learned: the next CBOR body goes as CBOR first again and meets the 415 (on
    // a new connection: cborgate closes one after a failed attempt).
    let r = post_cbor(&mut client(&h), "", "after-reset");
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(h.metric("cborgate_fallbacks_total", &[]), 1.0);
}
