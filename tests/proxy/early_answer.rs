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
use crate::support::pki::{provider, Ca};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

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

type Tls = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// Start the upstream on loopback; its address and what it sees.
fn upstream(rt: &tokio::runtime::Runtime, ca: &Ca) -> (std::net::SocketAddr, Arc<Seen>) {
    let leaf = ca.server("early-answer-upstream");
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der], leaf.key)
        .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let seen = Arc::new(Seen::default());
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let s = seen.clone();
    rt.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, seen) = (acceptor.clone(), s.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                    serve_h2(tls, seen).await;
                } else {
                    serve_h1(tls, seen).await;
                }
            });
        }
    });
    (addr, seen)
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
            let resp = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .header("content-length", body.len())
                .body(())
                .unwrap();
            if let Ok(mut send) = respond.send_response(resp, false) {
                let _ = send.send_data(body.into(), true);
            }
            // Both handles dropped here with the response complete and the request body
            // still open (the CBOR one): h2's server resets the stream with `NO_ERROR`
            // once the response is out (`maybe_cancel`), as Go's does.
        });
    }
}

async fn serve_h1(tls: Tls, seen: Arc<Seen>) {
    let mut io = tokio::io::BufReader::new(tls);
    loop {
        let mut line = String::new();
        if io.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut words = line.split_whitespace();
        let method = words.next().unwrap_or_default().to_string();
        let target = words.next().unwrap_or_default().to_string();
        let (mut len, mut content_type) = (0usize, None::<Vec<u8>>);
        loop {
            let mut h = String::new();
            if io.read_line(&mut h).await.unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap_or((h, ""));
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => len = value.parse().unwrap_or(0),
                "content-type" => content_type = Some(value.as_bytes().to_vec()),
                _ => {}
            }
        }
        let mut body = vec![0; len];
        if io.read_exact(&mut body).await.is_err() {
            return;
        }
        let cbor = is_cbor(content_type.as_deref());
        if method == "POST" {
            let counter = if cbor { &seen.h1_cbor } else { &seen.h1_json };
            counter.fetch_add(1, Ordering::SeqCst);
        }
        if fail_of(target.split_once('?').map(|(_, q)| q)) != Fail::No {
            seen.failed.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let (status, body) = answer(&method, cbor, body);
        let head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let out = io.get_mut();
        if out.write_all(head.as_bytes()).await.is_err()
            || out.write_all(&body).await.is_err()
            || out.flush().await.is_err()
        {
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
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    rt.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(name, tcp)
            .await
            .unwrap();
        let (client, conn) = h2::client::handshake(tls).await.unwrap();
        tokio::spawn(conn);
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
    let dir = std::env::temp_dir().join(format!("cborgate-{tag}-{}", std::process::id()));
    let ca = Ca::new(&dir, "ca");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (addr, seen) = upstream(&rt, &ca);
    let h = Harness::proxy_to(
        &format!("https://127.0.0.1:{}", addr.port()),
        "auto",
        &["--upstream-ca", &ca.path],
    );
    Setup {
        h,
        seen,
        rt,
        ca,
        upstream: addr,
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
