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
use crate::upstream::{answer_h1, answer_h2, read_h1, Tls};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
                    answer_h2(&mut respond, status, body);
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
    while let Some(req) = read_h1(&mut io).await {
        let w = who(req.header("authorization").map(str::as_bytes));
        let version = req.target == "/version";
        match (w, req.method.as_str()) {
            (Who::Anonymous, "GET") if version => seen.anonymous_h1.fetch_add(1, Ordering::SeqCst),
            (Who::Token, "POST") => seen.posts_h1.fetch_add(1, Ordering::SeqCst),
            _ => 0,
        };
        let close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let (status, body) = answer(&req.method, w, req.body);
        if !answer_h1(io.get_mut(), status, &body).await || close {
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
    let up = crate::upstream::start(tag, "goaway-upstream", serve_h2, serve_h1);
    let h = up.cborgate("legacy");
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
        up.seen,
        h,
        up.rt,
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
