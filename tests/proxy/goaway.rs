//! Shared HTTP/2 upstream connections and the GOAWAY kube-apiserver sends after a request
//! it serves as anonymous or refuses with 401 (docs/wire.md §5a): an anonymous client must
//! not make the token clients' requests fail, and a request the upstream refused
//! unprocessed is sent again, whatever its method.
//!
//! The upstream here is a small TLS server that speaks HTTP/2 and HTTP/1.1 (ALPN) and
//! behaves as kube-apiserver 1.36.2 does towards such requests: over HTTP/2, once it has
//! taken a request with no bearer token, or with the token it rejects (`Bearer wrong`),
//! the connection is going away: it answers that request, refuses every stream it
//! receives after it (`REFUSED_STREAM`: not processed), and sends its GOAWAY a moment
//! later. Over HTTP/1.1 it keeps every connection alive, as kube-apiserver does.

use crate::support::harness::Harness;
use crate::support::http::Conn;
use crate::support::pki::{provider, Ca};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// How long an HTTP/2 connection refuses streams before its GOAWAY goes out, once it is
/// going away: long enough that the token clients' requests meet it.
const GOING_AWAY: Duration = Duration::from_millis(100);

/// What the upstream saw.
#[derive(Default)]
struct Seen {
    /// `GET /version` without credentials, over HTTP/2 and over HTTP/1.1 (the readiness
    /// probe's `GET /readyz` is not counted).
    anonymous_h2: AtomicUsize,
    anonymous_h1: AtomicUsize,
    /// POSTs with a good token that it answered, over HTTP/2 and HTTP/1.1.
    posts_h2: AtomicUsize,
    posts_h1: AtomicUsize,
    /// Streams refused unprocessed, and GOAWAYs sent.
    refused: AtomicUsize,
    goaways: AtomicUsize,
}

/// How the upstream authenticates a request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Who {
    Token,
    Anonymous,
    Rejected,
}

fn who(authorization: Option<&[u8]>) -> Who {
    match authorization {
        None => Who::Anonymous,
        Some(b"Bearer wrong") => Who::Rejected,
        Some(_) => Who::Token,
    }
}

/// The answer to one request: status, JSON body. A POST gets its body back.
fn answer(method: &str, who: Who, body: Vec<u8>) -> (u16, Vec<u8>) {
    match who {
        Who::Rejected => (
            401,
            br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#.to_vec(),
        ),
        _ if method == "POST" => (201, body),
        _ => (200, br#"{"major":"1","minor":"36","gitVersion":"v1.36.2"}"#.to_vec()),
    }
}

/// Start the upstream on loopback; its address and what it sees.
fn upstream(rt: &tokio::runtime::Runtime, ca: &Ca) -> (std::net::SocketAddr, Arc<Seen>) {
    let leaf = ca.server("goaway-upstream");
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

type Tls = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

async fn serve_h2(tls: Tls, seen: Arc<Seen>) {
    let Ok(mut conn) = h2::server::handshake(tls).await else {
        return;
    };
    let mut going_away: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    let mut gone = false;
    loop {
        let shutdown = async {
            match going_away.as_mut() {
                Some(t) => t.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            next = conn.accept() => {
                let Some(Ok((req, mut respond))) = next else {
                    // Gone away and done. Go's server keeps the socket open for its
                    // `goAwayTimeout` (1 s) before it closes it, so that the client reads
                    // the last GOAWAY before the close; closing at once, with the client's
                    // late streams unread, would reset the connection and lose it.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    return;
                };
                if going_away.is_some() || gone {
                    seen.refused.fetch_add(1, Ordering::SeqCst);
                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                    continue;
                }
                let w = who(req.headers().get("authorization").map(|v| v.as_bytes()));
                if w != Who::Token {
                    going_away = Some(Box::pin(tokio::time::sleep(GOING_AWAY)));
                }
                let seen = seen.clone();
                tokio::spawn(async move {
                    let method = req.method().as_str().to_string();
                    let version = req.uri().path() == "/version";
                    let mut recv = req.into_body();
                    let mut body = Vec::new();
                    while let Some(Ok(chunk)) = recv.data().await {
                        let _ = recv.flow_control().release_capacity(chunk.len());
                        body.extend_from_slice(&chunk);
                    }
                    match (w, method.as_str()) {
                        (Who::Anonymous, "GET") if version => seen.anonymous_h2.fetch_add(1, Ordering::SeqCst),
                        (Who::Token, "POST") => seen.posts_h2.fetch_add(1, Ordering::SeqCst),
                        _ => 0,
                    };
                    let (status, body) = answer(&method, w, body);
                    let resp = http::Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .header("content-length", body.len())
                        .body(())
                        .unwrap();
                    if let Ok(mut send) = respond.send_response(resp, false) {
                        let _ = send.send_data(body.into(), true);
                    }
                });
            }
            _ = shutdown => {
                going_away = None;
                gone = true;
                seen.goaways.fetch_add(1, Ordering::SeqCst);
                conn.graceful_shutdown();
            }
        }
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
        let version = words.next() == Some("/version");
        let (mut len, mut auth, mut close) = (0usize, None::<Vec<u8>>, false);
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
                "authorization" => auth = Some(value.as_bytes().to_vec()),
                "connection" => close = value.eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
        let mut body = vec![0; len];
        if io.read_exact(&mut body).await.is_err() {
            return;
        }
        let w = who(auth.as_deref());
        match (w, method.as_str()) {
            (Who::Anonymous, "GET") if version => seen.anonymous_h1.fetch_add(1, Ordering::SeqCst),
            (Who::Token, "POST") => seen.posts_h1.fetch_add(1, Ordering::SeqCst),
            _ => 0,
        };
        let (status, body) = answer(&method, w, body);
        let head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let out = io.get_mut();
        if out.write_all(head.as_bytes()).await.is_err()
            || out.write_all(&body).await.is_err()
            || out.flush().await.is_err()
            || close
        {
            return;
        }
    }
}

/// What the clients got.
struct Outcome {
    /// Status of each token POST.
    posts: Vec<u16>,
    /// Requests of the other client, its statuses, and how often its keep-alive
    /// connection to cborgate was closed under it.
    other: usize,
    other_statuses: Vec<u16>,
    other_closed: usize,
}

/// 120 token POSTs from 8 clients on keep-alive connections while another client loops
/// `GET /version` on one keep-alive connection with `authorization` (or none), all
/// through cborgate in front of the upstream over HTTP/2.
fn run(
    tag: &str,
    authorization: Option<&'static str>,
) -> (Outcome, Arc<Seen>, Harness, tokio::runtime::Runtime) {
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
        "legacy",
        &["--upstream-ca", &ca.path],
    );
    let proxy = h.proxy;
    let stop = Arc::new(AtomicBool::new(false));
    let loop_stop = stop.clone();
    let other = std::thread::spawn(move || {
        let mut headers = vec![("Accept", "application/json")];
        if let Some(a) = authorization {
            headers.push(("Authorization", a));
        }
        let (mut n, mut statuses, mut closed) = (0, Vec::new(), 0);
        let mut c = Conn::connect(proxy);
        while !loop_stop.load(Ordering::SeqCst) {
            c.send("GET", "/version", &headers, None);
            match c.try_response("GET") {
                Ok(r) => {
                    n += 1;
                    statuses.push(r.status);
                    if r.closes() {
                        closed += 1;
                        c = Conn::connect(proxy);
                    }
                }
                Err(_) => {
                    closed += 1;
                    c = Conn::connect(proxy);
                }
            }
        }
        (n, statuses, closed)
    });
    let clients: Vec<_> = (0..8)
        .map(|k| {
            std::thread::spawn(move || {
                let mut c = Conn::connect(proxy);
                let mut got = Vec::new();
                for i in 0..15 {
                    let body = format!(
                        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{k}-{i}"}}}}"#
                    );
                    let r = c.request(
                        "POST",
                        "/api/v1/namespaces/default/configmaps",
                        &[
                            ("Authorization", "Bearer good"),
                            ("Content-Type", "application/json"),
                            ("Accept", "application/json"),
                        ],
                        Some(body.as_bytes()),
                    );
                    got.push(r.status);
                    if r.closes() {
                        c = Conn::connect(proxy);
                    }
                }
                got
            })
        })
        .collect();
    let posts: Vec<u16> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    stop.store(true, Ordering::SeqCst);
    let (other, other_statuses, other_closed) = other.join().unwrap();
    (
        Outcome {
            posts,
            other,
            other_statuses,
            other_closed,
        },
        seen,
        h,
        rt,
    )
}

fn failed(posts: &[u16]) -> usize {
    posts.iter().filter(|&&s| s != 201).count()
}

/// An anonymous client beside token clients: its requests go upstream over HTTP/1.1 on
/// connections of their own, so no token POST fails, and its own keep-alive connection
/// to cborgate stays open.
#[test]
fn an_anonymous_client_does_not_knock_token_requests_off_shared_http2_connections() {
    let (out, seen, h, _upstream) = run("goaway-anonymous", None);
    assert_eq!(out.posts.len(), 120);
    assert_eq!(
        failed(&out.posts),
        0,
        "token POSTs that failed: {:?}",
        out.posts
    );
    assert!(out.other > 0, "the anonymous client made no request");
    assert!(
        out.other_statuses.iter().all(|&s| s == 200),
        "anonymous answers: {:?}",
        out.other_statuses
    );
    assert_eq!(
        out.other_closed, 0,
        "the anonymous client's connection to cborgate was closed under it"
    );
    let n = |c: &AtomicUsize| c.load(Ordering::SeqCst);
    assert_eq!(n(&seen.anonymous_h2), 0, "anonymous requests over HTTP/2");
    assert_eq!(n(&seen.anonymous_h1), out.other);
    assert_eq!(n(&seen.posts_h2), 120, "token POSTs share HTTP/2");
    assert_eq!(n(&seen.refused), 0);
    assert_eq!(h.metric("cborgate_upstream_retries_total", &[]), 0.0);
}

/// A client whose token the upstream rejects (401, then GOAWAY) shares the token
/// clients' HTTP/2 connections: the requests it gets refused are sent again, POSTs
/// included, and none fails.
#[test]
fn requests_refused_by_a_goaway_are_sent_again_whatever_their_method() {
    let (out, seen, h, _upstream) = run("goaway-rejected", Some("Bearer wrong"));
    assert_eq!(
        failed(&out.posts),
        0,
        "token POSTs that failed: {:?}",
        out.posts
    );
    assert!(
        out.other_statuses.iter().all(|&s| s == 401),
        "answers to the rejected token: {:?}",
        out.other_statuses
    );
    assert_eq!(out.other_closed, 0);
    let n = |c: &AtomicUsize| c.load(Ordering::SeqCst);
    assert!(n(&seen.goaways) > 0, "the upstream sent no GOAWAY");
    assert!(
        n(&seen.refused) > 0,
        "no request met a connection going away"
    );
    // Every POST was answered once, over HTTP/2 or (sent again) over HTTP/1.1.
    assert_eq!(n(&seen.posts_h2) + n(&seen.posts_h1), 120);
    assert!(h.metric("cborgate_upstream_retries_total", &[("reason", "refused")]) >= 1.0);
}
