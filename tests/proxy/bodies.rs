//! Request bodies read whole before anything goes upstream: a refused body
//! never reaches the upstream, the transcoded body is held to the upstream's limit, a
//! slow upload is not the upstream's fault, the connection keeps its word after every
//! answer cborgate gives itself; and the upstream's side: watch events before a
//! malformed one are delivered, an empty JSON answer is not made into an empty CBOR one,
//! a repeated `Content-Length` goes upstream once.

use crate::support::bodies::cbor;
use crate::support::harness::{config_file, Harness};
use crate::support::http::{once, Conn, Resp};
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CM: &str = "/api/v1/namespaces/demo/configmaps/demo-config";
const CMS: &str = "/api/v1/namespaces/demo/configmaps";
const CBOR: [(&str, &str); 2] = [
    ("Content-Type", "application/cbor"),
    ("Accept", "application/cbor"),
];

/// One request as an upstream saw it: its head lines and its body.
#[derive(Clone, Debug)]
struct Seen {
    head: Vec<String>,
    body: Vec<u8>,
}

/// A keep-alive upstream that records every request but the readiness probe's (head
/// lines, and the body read by `Content-Length` or chunked), and answers each with
/// `answer(request line)`: whole response bytes.
fn recording_upstream(
    answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static,
) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (log, answer) = (seen.clone(), Arc::new(answer));
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let (log, answer) = (log.clone(), answer.clone());
            std::thread::spawn(move || serve_recorded(s, &log, &*answer));
        }
    });
    (addr, seen)
}

fn serve_recorded(s: TcpStream, log: &Mutex<Vec<Seen>>, answer: &dyn Fn(&str) -> Vec<u8>) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end().to_string();
            if line.is_empty() {
                break;
            }
            head.push(line);
        }
        let value = |name: &str| {
            head.iter()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_string())
        };
        let mut body = Vec::new();
        if value("transfer-encoding").is_some() {
            loop {
                let mut size = String::new();
                r.read_line(&mut size).unwrap();
                let n = usize::from_str_radix(size.trim(), 16).unwrap();
                let mut piece = vec![0; n + 2];
                r.read_exact(&mut piece).unwrap();
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&piece[..n]);
            }
        } else if let Some(n) = value("content-length") {
            body.resize(n.parse().unwrap(), 0);
            r.read_exact(&mut body).unwrap();
        }
        let request_line = head[0].clone();
        if !request_line.contains("/readyz") {
            log.lock().unwrap().push(Seen { head, body });
        }
        if w.write_all(&answer(&request_line)).is_err() {
            return;
        }
    }
}

/// A JSON answer with `Content-Length`.
fn json_answer(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn created(_: &str) -> Vec<u8> {
    json_answer(
        "201 Created",
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}"#,
    )
}

fn posts(seen: &Mutex<Vec<Seen>>) -> Vec<Seen> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|s| s.head[0].starts_with("POST"))
        .cloned()
        .collect()
}

/// A CBOR array of `n` × `1(0)` (`c1 00`): each 2 bytes become a 22-byte JSON string.
fn tagged_times(n: u32) -> Vec<u8> {
    let mut b = vec![0x9a];
    b.extend_from_slice(&n.to_be_bytes());
    for _ in 0..n {
        b.extend_from_slice(&[0xc1, 0x00]);
    }
    b
}

/// A chunked request body of `body`, in 16 KiB chunks.
fn chunked(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in body.chunks(16 << 10) {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// Items 1 and 2: a body cborgate refuses (400 bad CBOR, 413 JSON over
/// `upstream.max_request_body_bytes`, 411 unframed over 64 KiB) is answered with
/// nothing sent upstream: no request head, no body. A good body goes upstream with its
/// exact `Content-Length`, chunked or not as the client sent it.
#[test]
fn a_refused_body_never_reaches_the_upstream() {
    let (up, seen) = recording_upstream(created);
    let conf = config_file("[upstream]\nmax_request_body_bytes = 1000\n");
    let h = Harness::proxy_to(&format!("http://{up}"), "legacy", &["--config", &conf]);
    let bad = once(h.proxy, "POST", CMS, &CBOR, Some(&[0xa1, 0x61]));
    assert_eq!(bad.status, 400, "{}", bad.text());
    // 100 × 1(0): 505 bytes of CBOR, 2,301 of JSON.
    let big = once(h.proxy, "POST", CMS, &CBOR, Some(&tagged_times(100)));
    assert_eq!(big.status, 413);
    let v = crate::support::bodies::decode(&big);
    assert_eq!(v["message"], "Request entity too large: limit is 1000");
    // Chunked (no declared length) and over 64 KiB.
    let mut long = vec![0x5a];
    long.extend_from_slice(&(70_000u32).to_be_bytes());
    long.resize(long.len() + 70_000, b'x');
    let mut req = format!(
        "POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n\
         Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    req.extend_from_slice(&chunked(&long));
    // (Through a proxy with the default limits, where the JSON is not over them first.)
    let plain = Harness::proxy_to(&format!("http://{up}"), "legacy", &[]);
    let mut c = Conn::connect(plain.proxy);
    c.write(&req);
    let unframed = c.try_response("POST").unwrap();
    assert_eq!(unframed.status, 411, "{}", unframed.text());
    assert!(posts(&seen).is_empty(), "{:?}", posts(&seen));

    // Good bodies do go up, with their exact length, one framing header.
    let good = cbor(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g"}}));
    assert_eq!(once(h.proxy, "POST", CMS, &CBOR, Some(&good)).status, 201);
    let mut c = Conn::connect(h.proxy);
    let mut req = format!(
        "POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n\
         Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    req.extend_from_slice(&chunked(&good));
    c.write(&req);
    assert_eq!(c.try_response("POST").unwrap().status, 201);
    let got = posts(&seen);
    assert_eq!(got.len(), 2);
    for s in &got {
        let framing: Vec<&String> = s
            .head
            .iter()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                l.starts_with("content-length:") || l.starts_with("transfer-encoding:")
            })
            .collect();
        assert_eq!(
            framing,
            [&format!("Content-Length: {}", s.body.len())],
            "{:?}",
            s.head
        );
        let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
        assert_eq!(v["metadata"]["name"], "g");
    }
}

/// Item 3: the upstream's header timeout starts once the request has been sent, not
/// while the client uploads. A CBOR body trickled over about three seconds, with a
/// one-second `upstream.response_header_timeout_seconds`, gets its 201 (it got a 504
/// when the body streamed upstream as it came). The full-size case (3 MiB at 40 KB/s
/// against the default 60 s) is the same path, 75 s long.
#[test]
fn a_slow_upload_is_not_timed_out_as_the_upstreams_silence() {
    let conf = config_file("[upstream]\nresponse_header_timeout_seconds = 1\n");
    let h = Harness::start("legacy", &["--config", &conf]);
    let body = cbor(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "slow-upload"},
        "data": {"a": "x".repeat(120_000)},
    }));
    let mut s = TcpStream::connect(h.proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n\
         Accept: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    // 40 KB/s: 4,000 bytes every 100 ms (the client's own pace, not a wait).
    let started = Instant::now();
    for piece in body.chunks(4_000) {
        s.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(started.elapsed() > Duration::from_secs(2));
    let mut c = BufReader::new(s);
    let mut status = String::new();
    c.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 201"), "{status}");
    let stored = once(h.proxy, "GET", &format!("{CMS}/slow-upload"), &[], None);
    assert_eq!(stored.status, 200);
    assert_eq!(stored.json()["data"]["a"].as_str().unwrap().len(), 120_000);
}

/// A CBOR watch of the ConfigMaps, its head read (a 200).
fn cbor_watch(proxy: SocketAddr) -> Conn {
    let mut c = Conn::connect(proxy);
    let path = format!("{CMS}?watch=1&timeoutSeconds=60");
    c.send("GET", &path, &[("Accept", "application/cbor")], None);
    assert_eq!(c.head().status, 200);
    c
}

/// After `first`, the connection either serves a second request (a GET) or the first
/// answer said `Connection: close` and the connection is closed.
fn keeps_its_word(c: &mut Conn, first: &Resp, what: &str) {
    if first.closes() {
        // Closed at once, or after a lingering close (at most 2 s).
        assert_eq!(
            c.raw_read(&mut [0u8; 1]),
            0,
            "{what}: said close, still open"
        );
        return;
    }
    c.send("GET", CM, &[("Accept", "application/json")], None);
    let second = c
        .try_response("GET")
        .unwrap_or_else(|e| panic!("{what}: promised keep-alive, then {e}"));
    assert!(second.status > 0, "{what}");
}

/// Item 4 (acceptance 3): after every status cborgate answers itself (431, 429 for
/// admission and for the body budget, 413, 415, 406, 400), the same connection
/// serves a second request, or the first answer said `Connection: close`.
#[test]
fn every_local_answer_keeps_its_word_about_the_connection() {
    let conf = config_file(
        "[server]\nmax_header_bytes = 4096\nmax_long_running_requests = 1\n\
         max_buffered_body_bytes = 4096\n",
    );
    let h = Harness::start("legacy", &["--config", &conf]);
    let watch = cbor_watch(h.proxy);
    let long_header = "x".repeat(5000);
    let bad = [0xa1u8, 0x61];
    let over_budget = tagged_times(1000);
    let patch = cbor(&json!({"data": {"x": "y"}}));
    let declared_huge = format!("{}", 4 << 20);
    type Case<'a> = (
        u16,
        &'a str,
        String,
        Vec<(&'a str, &'a str)>,
        Option<&'a [u8]>,
    );
    let cases: Vec<Case> = vec![
        (431, "GET", CM.into(), vec![("X-Long", &long_header)], None),
        (
            429,
            "GET",
            format!("{CMS}?watch=1"),
            vec![("Accept", "application/cbor")],
            None,
        ),
        (429, "POST", CMS.into(), CBOR.to_vec(), Some(&over_budget)),
        (
            415,
            "PATCH",
            CM.into(),
            vec![("Content-Type", "application/merge-patch+cbor")],
            Some(&patch),
        ),
        (
            406,
            "GET",
            CMS.into(),
            vec![("Accept", "application/cbor;as=Table;g=meta.k8s.io;v=v1")],
            None,
        ),
        (400, "POST", CMS.into(), CBOR.to_vec(), Some(&bad)),
    ];
    for (want, method, path, headers, body) in cases {
        let mut c = Conn::connect(h.proxy);
        let first = c.request(method, &path, &headers, body);
        assert_eq!(first.status, want, "{method} {path}: {}", first.text());
        keeps_its_word(&mut c, &first, &format!("{want} {method}"));
    }
    // 413 declared up front: the body is not read, so the answer says close.
    let mut c = Conn::connect(h.proxy);
    let mut headers = CBOR.to_vec();
    headers.push(("Content-Length", &declared_huge));
    c.send("POST", CMS, &headers, None);
    let first = c.try_response("POST").unwrap();
    assert_eq!(first.status, 413);
    assert!(first.closes());
    keeps_its_word(&mut c, &first, "413");
    drop(watch);
}

/// The same for the failures on the way to the upstream: 503 (the upstream closed
/// before answering) and 504 (it said nothing in time). pingora closes the client
/// connection after a failed attempt, so the answer says `Connection: close`.
#[test]
fn upstream_failures_say_connection_close() {
    let closes = crate::support::harness::fake_upstream_seeing(|line, s| {
        if line.contains("/readyz") {
            let _ = s.write_all(&json_answer("200 OK", "{}"));
        }
    });
    let h = Harness::proxy_to(&format!("http://{closes}"), "legacy", &[]);
    for body in [None, Some(&cbor(&json!({"metadata": {"name": "a"}}))[..])] {
        let mut c = Conn::connect(h.proxy);
        let method = if body.is_some() { "POST" } else { "GET" };
        let first = c.request(method, CMS, &CBOR, body);
        assert_eq!(first.status, 503, "{}", first.text());
        keeps_its_word(&mut c, &first, "503");
    }
    let (tx, rx) = std::sync::mpsc::channel::<TcpStream>();
    let tx = Mutex::new(tx);
    let silent = crate::support::harness::fake_upstream_seeing(move |line, s| {
        if line.contains("/readyz") {
            let _ = s.write_all(&json_answer("200 OK", "{}"));
        } else {
            // Keep the connection open, say nothing.
            let _ = tx.lock().unwrap().send(s.try_clone().unwrap());
        }
    });
    let conf = config_file("[upstream]\nresponse_header_timeout_seconds = 1\n");
    let h = Harness::proxy_to(&format!("http://{silent}"), "legacy", &["--config", &conf]);
    let mut c = Conn::connect(h.proxy);
    let first = c.request("GET", CMS, &CBOR, None);
    assert_eq!(first.status, 504, "{}", first.text());
    keeps_its_word(&mut c, &first, "504");
    drop(rx);
}

/// Item 9: watch events that arrive in the same upstream read as a malformed one, and
/// before it, reach the client; then the stream ends abnormally (no end chunk), as
/// `cborgate transcode --watch` writes them before it fails.
#[test]
fn watch_events_before_a_malformed_one_in_the_same_read_are_delivered() {
    // The upstream sends event 1 alone, waits until the client has it, then sends
    // event 2 and a malformed event in one write.
    let (got_first, first_seen) = std::sync::mpsc::channel::<()>();
    let first_seen = Mutex::new(first_seen);
    let up = crate::support::harness::fake_upstream_seeing(move |line, s| {
        if line.contains("/readyz") {
            let _ = s.write_all(&json_answer("200 OK", "{}"));
            return;
        }
        let event = |n: u32| {
            format!(
                r#"{{"type":"ADDED","object":{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"e{n}","resourceVersion":"{n}"}}}}}}"#
            ) + "\n"
        };
        let chunk = |data: &str| format!("{:x}\r\n{data}\r\n", data.len());
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        let _ = s.write_all(format!("{head}{}", chunk(&event(1))).as_bytes());
        let _ = first_seen
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(20));
        let rest = format!("{}{{\"type\":\"ADDED\",\"object\":{{]]\n", event(2));
        let _ = s.write_all(chunk(&rest).as_bytes());
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let h = Harness::proxy_to(&format!("http://{up}"), "legacy", &[]);
    let mut c = cbor_watch(h.proxy);
    let mut got = c.chunk().unwrap();
    assert_eq!(crate::support::bodies::decode_seq(&got).len(), 1);
    got_first.send(()).unwrap();
    let end = loop {
        match c.try_chunk() {
            Ok(Some(piece)) => got.extend(piece),
            Ok(None) => break "a clean end",
            Err(_) => break "an abnormal end",
        }
    };
    assert_eq!(end, "an abnormal end");
    let events = crate::support::bodies::decode_seq(&got);
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["e1", "e2"]);
}

/// Item 10: an upstream `200` JSON answer with `Content-Length: 0` reaches a CBOR
/// client as the upstream sent it (`application/json`, empty), never as a complete,
/// empty `application/cbor` body.
#[test]
fn an_empty_json_answer_is_not_made_an_empty_cbor_answer() {
    let (up, _) = recording_upstream(|line| {
        if line.contains("/readyz") {
            json_answer("200 OK", "{}")
        } else {
            json_answer("200 OK", "")
        }
    });
    let h = Harness::proxy_to(&format!("http://{up}"), "legacy", &[]);
    let r = once(h.proxy, "GET", CM, &[("Accept", "application/cbor")], None);
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type(), "application/json");
    assert_eq!(r.header("content-length"), Some("0"));
    assert!(r.body.is_empty());
}

/// Item 11: a request that repeats one `Content-Length` reaches the upstream with it
/// once, whether its body passes through (JSON) or is transcoded (CBOR).
#[test]
fn a_repeated_content_length_goes_upstream_once() {
    let (up, seen) = recording_upstream(created);
    let h = Harness::proxy_to(&format!("http://{up}"), "legacy", &[]);
    let json_body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"}}"#.to_vec();
    let cbor_body =
        cbor(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
    for (ct, body) in [
        ("application/json", &json_body),
        ("application/cbor", &cbor_body),
    ] {
        let mut c = Conn::connect(h.proxy);
        let mut req = format!(
            "POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Type: {ct}\r\nAccept: application/json\r\n\
             Content-Length: {n}\r\nContent-Length: {n}\r\n\r\n",
            n = body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        c.write(&req);
        let r = c.try_response("POST").unwrap();
        assert_eq!(r.status, 201, "{ct}: {}", r.text());
    }
    let got = posts(&seen);
    assert_eq!(got.len(), 2);
    for s in got {
        let lengths = s
            .head
            .iter()
            .filter(|l| l.to_ascii_lowercase().starts_with("content-length:"))
            .count();
        assert_eq!(lengths, 1, "{:?}", s.head);
        serde_json::from_slice::<serde_json::Value>(&s.body).unwrap();
    }
}
