//! The proxy's own limits (README "Limits"): request head size (431), short requests in
//! flight and long-running requests open (429 with `Retry-After`), each answered with a
//! Kubernetes `Status` in the client's format, and each released when the request ends.

use crate::support::harness::{config_file, eventually, fake_upstream_seeing, Harness};
use crate::support::http::{once, Conn};
use cborgate::codec::{cbor_to_json, CborToJsonOptions};
use serde_json::Value;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CM: &str = "/api/v1/namespaces/demo/configmaps/demo-config";
const CMS: &str = "/api/v1/namespaces/demo/configmaps";

/// A short GET that is admitted: a request sent the moment the previous
/// response ended can still find that request's slot taken (it is given back
/// when the exchange is logged, just after the last byte goes out), so a 429
/// is retried for up to two seconds. A slot that is never given back still
/// fails the caller's assertion. The proxy keeps it that way on purpose: the
/// SIGTERM drain exits once the count reaches zero, so a slot given back
/// before the last byte could cut that response short.
fn once_admitted(proxy: std::net::SocketAddr) -> u16 {
    crate::support::harness::poll(Duration::from_secs(2), || {
        let s = once(proxy, "GET", CM, &[], None).status;
        (s != 429).then_some(s)
    })
    .unwrap_or(429)
}

fn status_of(body: &[u8], content_type: &str) -> Value {
    let json = if content_type == "application/cbor" {
        cbor_to_json(body, CborToJsonOptions::default()).unwrap()
    } else {
        assert_eq!(content_type, "application/json");
        body.to_vec()
    };
    let v: Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["status"], "Failure");
    v
}

#[test]
fn a_request_head_over_max_header_bytes_gets_a_431_status() {
    let conf = config_file("[server]\nmax_header_bytes = 8192\n");
    let h = Harness::start("legacy", &["--config", &conf]);
    let big = "x".repeat(9000);
    let small = "x".repeat(6000);

    let r = once(h.proxy, "GET", CM, &[("X-Pad", &big)], None);
    assert_eq!(r.status, 431);
    let v = status_of(&r.body, r.content_type());
    assert_eq!(v["code"], 431);
    assert_eq!(v["reason"], "RequestHeaderFieldsTooLarge");
    assert!(v["message"].as_str().unwrap().contains("8192"), "{v}");

    // A CBOR client gets the Status in CBOR.
    let r = once(
        h.proxy,
        "GET",
        CM,
        &[("X-Pad", &big), ("Accept", "application/cbor")],
        None,
    );
    assert_eq!(r.status, 431);
    assert_eq!(r.content_type(), "application/cbor");
    assert_eq!(status_of(&r.body, "application/cbor")["code"], 431);

    // Under the limit: served; nothing over it reached the upstream.
    let r = once(h.proxy, "GET", CM, &[("X-Pad", &small)], None);
    assert_eq!(r.status, 200);
    let reached = h
        .standin()
        .requests()
        .iter()
        .filter(|q| q.path == CM)
        .count();
    assert_eq!(reached, 1);
    h.wait_metric("cborgate_requests_total", &[("code", "431")], 2.0);
}

#[test]
fn a_max_header_bytes_over_pingoras_own_limit_is_a_configuration_error() {
    let conf = config_file("[server]\nmax_header_bytes = 2000000\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cborgate"))
        .args(["serve", "--config", &conf])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server.max_header_bytes"), "{err}");
}

/// An upstream that answers every request after `delay`, and a count of the API
/// requests that have reached it (the proxy's `/readyz` probes are not counted).
fn slow_upstream(delay: Duration) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let arrived = Arc::new(AtomicUsize::new(0));
    let seen = arrived.clone();
    let addr = fake_upstream_seeing(move |line, w| {
        if line.starts_with("GET /api/") {
            seen.fetch_add(1, Ordering::AcqRel);
        }
        // The delay is the behaviour under test (requests that hold their slot), not
        // synchronisation.
        std::thread::sleep(delay);
        let body = br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"slow"}}"#;
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let _ = w.write_all(body);
    });
    (addr, arrived)
}

#[test]
fn short_requests_over_max_requests_inflight_get_429_with_retry_after() {
    let (slow, arrived) = slow_upstream(Duration::from_millis(1500));
    let conf = config_file("[server]\nmax_requests_inflight = 2\n");
    let h = Harness::proxy_to(&format!("http://{slow}"), "legacy", &["--config", &conf]);
    let proxy = h.proxy;
    let busy: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                once(proxy, "GET", CM, &[("Accept", "application/cbor")], None).status
            })
        })
        .collect();
    // Both in flight: they have reached the upstream (the admin counts requests only
    // when they end).
    eventually(5, "both requests at the upstream", || {
        arrived.load(Ordering::Acquire) >= 2
    });
    let t = Instant::now();
    let r = once(proxy, "GET", CM, &[("Accept", "application/cbor")], None);
    assert!(t.elapsed() < Duration::from_millis(700), "429 is immediate");
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    let v = status_of(&r.body, r.content_type());
    assert_eq!(v["reason"], "TooManyRequests");
    assert_eq!(v["code"], 429);
    for b in busy {
        assert_eq!(b.join().unwrap(), 200);
    }
    // The slots are given back when the requests end.
    let r = once(proxy, "GET", CM, &[], None);
    assert_eq!(r.status, 200);
    h.wait_metric("cborgate_requests_total", &[("code", "429")], 1.0);
}

#[test]
fn long_running_requests_have_their_own_limit() {
    let conf = config_file("[server]\nmax_requests_inflight = 1\nmax_long_running_requests = 2\n");
    let h = Harness::start("legacy", &["--config", &conf]);
    let watch = |h: &Harness| {
        let mut c = Conn::connect(h.proxy);
        c.send(
            "GET",
            &format!("{CMS}?watch=1&timeoutSeconds=60"),
            &[("Accept", "application/cbor")],
            None,
        );
        let head = c.head();
        (c, head.status, head)
    };
    let (w1, s1, _) = watch(&h);
    let (_w2, s2, _) = watch(&h);
    assert_eq!((s1, s2), (200, 200));
    // Two watches open, with a short-request limit of 1: short requests still pass.
    for _ in 0..3 {
        assert_eq!(once_admitted(h.proxy), 200);
    }
    // A third watch is refused.
    let (_c, s3, head) = watch(&h);
    assert_eq!(s3, 429);
    assert_eq!(head.header("retry-after"), Some("1"));
    // Ending one watch frees its slot.
    drop(w1);
    eventually(5, "the slot given back", || watch(&h).1 == 200);
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_idle_timeout_seconds() {
    let conf = config_file("[server]\nidle_timeout_seconds = 1\n");
    let h = Harness::start("legacy", &["--config", &conf]);
    let mut c = Conn::connect(h.proxy);
    let r = c.request("GET", CM, &[("Accept", "application/cbor")], None);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("keep-alive"));
    // Still open well inside the timeout: a second request on it works. The pause is
    // the behaviour under test (idle, but for less than the timeout), not synchronisation.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.request("GET", CM, &[], None).status, 200);
    let idle = Instant::now();
    eventually(5, "the idle connection closed", || c.is_closed());
    // Closed by the idle timeout (1 s), not at once: `is_closed` looks for 200 ms at a time.
    assert!(
        idle.elapsed() >= Duration::from_millis(800),
        "closed after only {:?}",
        idle.elapsed()
    );
}

#[test]
fn a_client_that_stalls_in_its_request_head_is_disconnected_after_request_read_timeout_seconds() {
    let conf = config_file("[server]\nrequest_read_timeout_seconds = 1\n");
    let h = Harness::start("legacy", &["--config", &conf]);
    let mut s = std::net::TcpStream::connect(h.proxy).unwrap();
    s.write_all(b"GET /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nX-Sl")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    let mut buf = [0u8; 64];
    let n = std::io::Read::read(&mut s, &mut buf).unwrap_or(0);
    assert_eq!(n, 0, "no answer to a half-sent head, only a close");
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(4),
        "closed after {took:?}"
    );
    // Other clients are served meanwhile and afterwards.
    assert_eq!(once(h.proxy, "GET", CM, &[], None).status, 200);
}

/// The same timeout bounds each pause in a request body (pingora's session read
/// timeout, set per session by src/inbound/accept.rs): the request is abandoned, and its
/// connection closed, about a second after the body stops coming (not pingora's 60 s).
#[test]
fn a_client_that_stalls_in_its_request_body_is_cut_off_after_request_read_timeout_seconds() {
    let conf = config_file("[server]\nrequest_read_timeout_seconds = 1\n");
    let h = Harness::start("legacy", &["--config", &conf]);
    let mut s = std::net::TcpStream::connect(h.proxy).unwrap();
    s.write_all(
        format!(
            "POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: 100\r\n\r\n{{\"kind\":"
        )
        .as_bytes(),
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    let mut got = Vec::new();
    let _ = std::io::Read::read_to_end(&mut s, &mut got);
    let took = t.elapsed();
    // Whatever is said first (pingora's body read fails with ReadTimedout, which
    // the proxy answers as a timeout), the request is not carried out.
    assert!(!got.starts_with(b"HTTP/1.1 2"), "{got:?}");
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(4),
        "closed after {took:?}"
    );
    assert_eq!(once(h.proxy, "GET", CM, &[], None).status, 200);
}

/// Write a whole request (head and body) before reading a byte of the answer, as
/// Python's `http.client` and client-go over HTTP/1.1 do, in 16 KiB writes; then read the
/// answer to the connection's end. A reset or a broken pipe, on a write or on the
/// read, fails.
fn write_all_then_read(proxy: std::net::SocketAddr, request: &[u8]) -> (String, Vec<u8>) {
    let mut s = std::net::TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    for (i, piece) in request.chunks(16 << 10).enumerate() {
        s.write_all(piece)
            .unwrap_or_else(|e| panic!("writing the request, piece {i}: {e}"));
    }
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut s, &mut got)
        .unwrap_or_else(|e| panic!("reading the answer after {} bytes: {e}", got.len()));
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(&got)));
    let head = String::from_utf8(got[..end].to_vec()).unwrap();
    (head, got[end + 4..].to_vec())
}

/// The head of a CBOR POST whose body is framed by `framing` (a header line).
fn cbor_post_head(framing: &str) -> String {
    format!(
        "POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n\
         Accept: application/cbor\r\n{framing}\r\n\r\n"
    )
}

/// The 413 as kube-apiserver writes it, with `Connection: close`.
fn assert_413(head: &str, body: &[u8]) {
    assert!(head.starts_with("HTTP/1.1 413 "), "{head}");
    let headers: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let get = |n: &str| crate::support::http::header(&headers, n).unwrap_or_default();
    assert_eq!(get("connection"), "close", "{head}");
    assert_eq!(get("content-length"), body.len().to_string(), "{head}");
    let v = status_of(body, get("content-type"));
    assert_eq!(v["code"], 413);
    assert_eq!(v["reason"], "RequestEntityTooLarge");
    assert_eq!(v["message"], "Request entity too large: limit is 3145728");
}

/// A CBOR body over `codec.max_request_body_bytes`, declared up front, is refused
/// before it is read; cborgate then reads and discards it (bounded) before closing,
/// so a client that writes it all before reading gets the 413 every time, never a
/// reset (the CBOR-enabled kube-apiserver behaves the same way).
#[test]
fn a_client_that_writes_its_whole_oversized_body_before_reading_gets_the_413() {
    let h = Harness::start("legacy", &[]);
    let body = vec![0x40u8; (3 << 20) + 1];
    let mut request = cbor_post_head(&format!("Content-Length: {}", body.len())).into_bytes();
    request.extend_from_slice(&body);
    for _ in 0..20 {
        let (head, body) = write_all_then_read(h.proxy, &request);
        assert_413(&head, &body);
    }
    assert!(h.standin().requests().iter().all(|r| r.method != "POST"));
    h.wait_metric("cborgate_requests_total", &[("code", "413")], 20.0);
}

/// The same for a chunked body (no declared length) that grows past 64 KiB: a body
/// cborgate reads whole before it goes upstream can be sent on only from pingora's
/// 64 KiB retry buffer, so it is refused (411) when it crosses that, the rest read and
/// discarded before the connection closes.
#[test]
fn a_chunked_body_over_64_kib_gets_a_411_not_a_reset() {
    let h = Harness::start("legacy", &[]);
    // {"a": "xxx…"}: one valid CBOR text string of 4 MiB, sent in 64 KiB chunks.
    let len: u32 = 4 << 20;
    let mut cbor = vec![0xa1, 0x61, b'a', 0x7a];
    cbor.extend_from_slice(&len.to_be_bytes());
    cbor.resize(cbor.len() + len as usize, b'x');
    let mut request = cbor_post_head("Transfer-Encoding: chunked").into_bytes();
    for piece in cbor.chunks(64 << 10) {
        request.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        request.extend_from_slice(piece);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    for _ in 0..5 {
        let (head, body) = write_all_then_read(h.proxy, &request);
        assert!(head.starts_with("HTTP/1.1 411 "), "{head}");
        assert!(
            head.to_ascii_lowercase().contains("connection: close"),
            "{head}"
        );
        let v = status_of(&body, "application/cbor");
        assert_eq!(v["code"], 411);
    }
    assert!(h.standin().requests().iter().all(|r| r.method != "POST"));
}

/// The lingering close is bounded in time (a client that declares a large body and
/// then sends nothing more gets the 413 at once, and the connection closes about two
/// seconds later) and in bytes (the limit and 1 MiB: a client that keeps writing is
/// cut off).
#[test]
fn a_lingering_close_is_bounded_in_time_and_bytes() {
    let h = Harness::start("legacy", &[]);
    let head = cbor_post_head(&format!("Content-Length: {}", 100 << 20));
    let t = Instant::now();
    let (head, body) = write_all_then_read(h.proxy, head.as_bytes());
    assert_413(&head, &body);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(4), "closed after {took:?}");

    let mut s = std::net::TcpStream::connect(h.proxy).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = cbor_post_head(&format!("Content-Length: {}", 1u64 << 30));
    s.write_all(head.as_bytes()).unwrap();
    let piece = vec![0x40u8; 64 << 10];
    let mut written = 0u64;
    while s.write_all(&piece).is_ok() {
        written += piece.len() as u64;
        assert!(written < 64 << 20, "still reading after {written} bytes");
    }
}

/// Over HTTP/1.1, pingora's parser has 256 header slots where kube-apiserver counts only
/// bytes: a head with more lines gets a 431 `Status` naming the limit (JSON, or CBOR as
/// `Accept` asks), never pingora's bare 400; fewer pass, `Impersonate-*` lines untouched
/// and in order.
#[test]
fn more_than_256_header_lines_get_a_431_status_and_fewer_pass_in_order() {
    let h = Harness::start("legacy", &[]);
    let groups: Vec<String> = (0..300).map(|i| format!("group-{i:03}")).collect();
    let headers = |n: usize, accept: &'static str| {
        let mut v: Vec<(&str, &str)> = vec![("Accept", accept), ("Impersonate-User", "jane")];
        v.extend(
            groups[..n]
                .iter()
                .map(|g| ("Impersonate-Group", g.as_str())),
        );
        v
    };

    let r = once(h.proxy, "GET", CM, &headers(300, "application/json"), None);
    assert_eq!(r.status, 431);
    let v = status_of(&r.body, r.content_type());
    assert_eq!(v["reason"], "RequestHeaderFieldsTooLarge");
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("256") && message.contains("HTTP/2"), "{v}");
    let r = once(h.proxy, "GET", CM, &headers(300, "application/cbor"), None);
    assert_eq!(r.status, 431);
    assert_eq!(status_of(&r.body, r.content_type())["code"], 431);
    assert_eq!(r.content_type(), "application/cbor");
    assert!(h.standin().requests().iter().all(|q| q.path != CM));

    // (The stand-in refuses an anonymous impersonator, 403, as the apiserver would.)
    let r = once(h.proxy, "GET", CM, &headers(200, "application/json"), None);
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    let seen = h.standin().requests();
    let q = seen
        .iter()
        .find(|q| q.path == CM)
        .expect("reached the upstream");
    let upstream: Vec<(&str, &str)> = q
        .headers
        .iter()
        .filter(|(k, _)| k.to_ascii_lowercase().starts_with("impersonate-"))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let sent = &headers(200, "application/json")[1..];
    assert_eq!(upstream.len(), sent.len());
    for ((k, v), (sk, sv)) in upstream.iter().zip(sent) {
        assert!(
            k.eq_ignore_ascii_case(sk) && v == sv,
            "{k}: {v} for {sk}: {sv}"
        );
    }
}
