//! The request log (docs/surface.md "Logs"): one line per request at info level with method,
//! path, status, request and response formats, upstream time and codec time; flat JSON
//! with `--log-format json`; plain text without colour escapes when stderr is not a
//! terminal (a container's log file). And client noise (failed TLS handshakes, probes,
//! hang-ups) is counted in `cborgate_client_errors_total`, not logged as an error.

use crate::support::harness::Harness;
use crate::support::http::once;
use cborgate_standin::StandInOptions;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

const CM: &str = "/api/v1/namespaces/demo/configmaps/demo-config";

/// cborgate's stderr, line by line as it is written (read on a thread).
struct Lines {
    rx: Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn of(h: &mut Harness) -> Lines {
        let stderr = h.child.stderr.take().expect("stderr is captured");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits (up to 20 s) until `done` holds for the lines read so far.
    fn wait(&mut self, what: &str, done: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {what} in:\n{}", self.seen.join("\n"))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("cborgate exited before {what}:\n{}", self.seen.join("\n"))
                }
            }
        }
    }

    /// Every line, after stopping the process.
    fn all(mut self, h: &mut Harness) -> Vec<String> {
        let _ = h.child.kill();
        let _ = h.child.wait();
        self.seen.extend(self.rx.iter());
        self.seen
    }
}

/// Start cborgate with info logs captured, make one CBOR GET and one JSON GET, wait
/// until two lines are request lines (written when a request ends, which may be just
/// after the client has its response), stop it and return every line it wrote.
fn logs_of(extra: &[&str], is_request: fn(&str) -> bool) -> Vec<String> {
    let env = [("RUST_LOG", "info")];
    let mut h = Harness::start_env("legacy", extra, StandInOptions::default(), &env, true);
    let mut lines = Lines::of(&mut h);
    let r = once(h.proxy, "GET", CM, &[("Accept", "application/cbor")], None);
    assert_eq!(r.status, 200);
    let r = once(h.proxy, "GET", CM, &[("Accept", "application/json")], None);
    assert_eq!(r.status, 200);
    lines.wait("two request lines", |seen| {
        seen.iter().filter(|l| is_request(l)).count() == 2
    });
    lines.all(&mut h)
}

#[test]
fn json_logs_have_one_line_per_request_with_the_promised_fields() {
    let text = logs_of(&["--log-format", "json"], |l| {
        l.contains(r#""message":"request""#)
    })
    .join("\n");
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    // Flat: the event's fields at the top level, beside timestamp, level and target;
    // none of the `log.*` fields (build paths) of lines bridged from pingora's `log`.
    for l in &lines {
        for key in l.as_object().unwrap().keys() {
            assert!(
                !key.starts_with("log.") && key != "fields" && key != "spans",
                "{key} in {l}"
            );
        }
        assert!(l["timestamp"].is_string() && l["target"].is_string(), "{l}");
    }
    assert!(
        lines.iter().any(|l| l["target"] == "pingora_core::server"),
        "pingora's own lines pass:\n{text}"
    );
    let requests: Vec<&Value> = lines.iter().filter(|v| v["message"] == "request").collect();
    assert_eq!(requests.len(), 2, "one line per request:\n{text}");
    for (r, fmt) in requests.iter().zip(["cbor", "json"]) {
        assert_eq!(r["level"], "INFO", "{r}");
        assert_eq!(r["target"], "cborgate::proxy", "{r}");
        let f = r;
        assert_eq!(f["method"], "GET", "{r}");
        assert_eq!(f["path"], CM, "{r}");
        assert_eq!(f["status"], 200, "{r}");
        assert_eq!(f["request_format"], "none", "{r}");
        assert_eq!(f["response_format"], fmt, "{r}");
        for t in ["upstream_ms", "codec_ms", "total_ms"] {
            let ms = f[t].as_f64().unwrap_or_else(|| panic!("{t} missing: {r}"));
            assert!((0.0..60_000.0).contains(&ms), "{t} = {ms}: {r}");
        }
        assert!(f["upstream_ms"].as_f64() > Some(0.0), "{r}");
    }
    // Transcoding a response to CBOR takes codec time; passing JSON through takes none.
    assert!(requests[0]["codec_ms"].as_f64() > Some(0.0));
    assert_eq!(requests[1]["codec_ms"].as_f64(), Some(0.0));
}

#[test]
fn text_logs_to_a_pipe_carry_no_colour_escapes() {
    let text = logs_of(&[], |l| l.contains(" request ")).join("\n");
    assert!(!text.contains("log."), "no log.* fields:\n{text}");
    let requests: Vec<&str> = text.lines().filter(|l| l.contains(" request ")).collect();
    assert_eq!(requests.len(), 2, "one line per request:\n{text}");
    assert!(requests[0].contains("INFO"), "{text}");
    assert!(requests[0].contains("method=GET"), "{text}");
    assert!(requests[0].contains(&format!("path={CM}")), "{text}");
    assert!(requests[0].contains("status=200"), "{text}");
    assert!(requests[0].contains("response_format=\"cbor\""), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "escape codes in logs written to a pipe:\n{text:?}"
    );
}

#[test]
fn client_noise_is_counted_and_logged_only_at_debug_level() {
    let dir = std::env::temp_dir().join(format!("cborgate-logs-noise-{}", std::process::id()));
    let (cert, key) = crate::support::pki::self_signed(&dir, "server", "localhost");
    let tls = ["--tls-cert", cert.as_str(), "--tls-key", key.as_str()];
    let env = [("RUST_LOG", "info,cborgate::client=debug")];
    let mut h = Harness::start_env("legacy", &tls, StandInOptions::default(), &env, true);
    let mut lines = Lines::of(&mut h);

    // Plain HTTP to the TLS port: the handshake fails and the server closes.
    let mut plain = TcpStream::connect(h.proxy).unwrap();
    let plain_peer = plain.local_addr().unwrap().to_string();
    plain
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    plain
        .write_all(b"GET /api HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let _ = plain.read_to_end(&mut Vec::new());
    // A probe: connect and close.
    let probe = TcpStream::connect(h.proxy).unwrap();
    let probe_peer = probe.local_addr().unwrap().to_string();
    drop(probe);
    // A client that hangs up on the admin listener halfway through its request head.
    let mut admin = TcpStream::connect(h.admin).unwrap();
    admin
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    drop(admin);

    // Each is one debug line naming the client (written before it is counted).
    lines.wait("a debug line for each client", |seen| {
        [&plain_peer, &probe_peer].iter().all(|peer| {
            seen.iter().any(|l| {
                l.contains("DEBUG cborgate::client:")
                    && l.contains("kind=tls_handshake")
                    && l.contains(&format!("peer={peer}"))
            })
        }) && seen.iter().any(|l| l.contains("kind=disconnect"))
    });
    // Counted just after the line is written: poll.
    let counted = |kind: &str| h.metric("cborgate_client_errors_total", &[("kind", kind)]);
    let seen = crate::support::harness::poll(Duration::from_secs(20), || {
        (counted("tls_handshake") >= 2.0 && counted("disconnect") >= 1.0).then_some(())
    });
    assert!(seen.is_some(), "not counted:\n{}", h.metrics());
    let all = lines.all(&mut h);
    let text = all.join("\n");
    assert!(
        !all.iter().any(|l| l.contains(" ERROR ")),
        "client noise logged as an error:\n{text}"
    );
    assert!(!text.contains("Downstream handshake"), "{text}");
}

/// The JSON request lines among `seen`.
fn request_lines(seen: &[String]) -> Vec<Value> {
    seen.iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "request")
        .collect()
}

/// The request line names the client and, when cborgate answered with an error
/// itself, why (with the codec's byte offset for a bad body) and in which format;
/// a success carries no `error` field; an upload the client abandoned is a 499.
#[test]
fn request_lines_name_the_client_the_reason_and_the_format_answered() {
    let env = [("RUST_LOG", "info")];
    let json = ["--log-format", "json"];
    let mut h = Harness::start_env("legacy", &json, StandInOptions::default(), &env, true);
    let mut lines = Lines::of(&mut h);
    let ua = [
        ("Accept", "application/cbor"),
        ("User-Agent", "logtest/1.0"),
    ];
    assert_eq!(once(h.proxy, "GET", CM, &ua, None).status, 200);
    // A truncated CBOR map: 400, answered in CBOR.
    let bad = once(
        h.proxy,
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        &[
            ("Content-Type", "application/cbor"),
            ("Accept", "application/cbor"),
        ],
        Some(&[0xa2, 0x61, b'k']),
    );
    assert_eq!(bad.status, 400);
    // An upload abandoned halfway: nothing can be answered.
    let mut c = TcpStream::connect(h.proxy).unwrap();
    c.write_all(b"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\nContent-Length: 1000\r\n\r\n\xa1")
        .unwrap();
    drop(c);
    lines.wait("three request lines", |seen| request_lines(seen).len() == 3);
    let r = request_lines(&lines.seen);
    let ok = r.iter().find(|v| v["status"] == 200).unwrap();
    assert_eq!(ok["user_agent"], "logtest/1.0", "{ok}");
    assert!(
        ok["client"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{ok}"
    );
    assert!(
        ok.get("error").is_none() && ok.get("reason").is_none(),
        "{ok}"
    );
    let bad = r.iter().find(|v| v["status"] == 400).unwrap();
    assert_eq!(bad["response_format"], "cbor", "{bad}");
    let reason = bad["reason"].as_str().unwrap();
    // The map's second key is announced but never arrives: found at byte offset 1.
    assert!(
        reason.contains("not valid CBOR") && reason.contains("byte offset 1"),
        "{bad}"
    );
    assert!(bad.get("error").is_none(), "the reason says it all: {bad}");
    let gone = r
        .iter()
        .find(|v| v["method"] == "POST" && v["status"] != 400)
        .unwrap();
    assert_eq!(gone["status"], 499, "{gone}");
    // Every millisecond field is rounded to the microsecond: no float noise.
    for v in &r {
        for t in ["upstream_ms", "codec_ms", "total_ms"] {
            let text = v[t].to_string();
            let decimals = text.split_once('.').map_or(0, |(_, d)| d.len());
            assert!(decimals <= 3, "{t} = {text}");
        }
    }
    lines.all(&mut h);
}

/// Normal operation writes nothing above INFO: auto mode's 415 replay is how it
/// learns (counted, not warned about), a client hanging up mid-upload is the
/// client's business, and a bad body is answered with a Status.
#[test]
fn normal_client_behaviour_logs_nothing_above_info() {
    let env = [("RUST_LOG", "info")];
    let mut h = Harness::start_env("auto", &[], StandInOptions::default(), &env, true);
    let mut lines = Lines::of(&mut h);
    // The stand-in has CBOR off: the CBOR body gets a 415 upstream and is replayed as JSON.
    let body = [
        0xa3, 0x64, b'k', b'i', b'n', b'd', 0x69, b'C', b'o', b'n', b'f', b'i', b'g', b'M', b'a',
        b'p', 0x6a, b'a', b'p', b'i', b'V', b'e', b'r', b's', b'i', b'o', b'n', 0x62, b'v', b'1',
        0x68, b'm', b'e', b't', b'a', b'd', b'a', b't', b'a', 0xa1, 0x64, b'n', b'a', b'm', b'e',
        0x66, b'q', b'u', b'i', b'e', b't', b'1',
    ];
    let r = once(
        h.proxy,
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        &[
            ("Content-Type", "application/cbor"),
            ("Accept", "application/json"),
        ],
        Some(&body),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    // Hang-ups: mid-head, and mid-body.
    let mut c = TcpStream::connect(h.proxy).unwrap();
    c.write_all(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    drop(c);
    let mut c = TcpStream::connect(h.proxy).unwrap();
    c.write_all(b"PUT /api/v1/namespaces/demo/configmaps/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    drop(c);
    h.wait_metric("cborgate_fallbacks_total", &[], 1.0);
    lines.wait("the POST and the abandoned PUT logged", |seen| {
        seen.iter().filter(|l| l.contains(" request ")).count() >= 2
    });
    let all = lines.all(&mut h);
    let loud: Vec<&String> = all
        .iter()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    assert!(loud.is_empty(), "{loud:#?}");
}

/// An upstream failure is logged as one, never as 499 (the client that went away): one
/// that closes before answering is a 503 with its reason in native mode too, where the
/// client's connection is ended instead of answered; one that dies in the middle of the
/// body keeps the 200 that went out, and the line says the upstream cut it short.
#[test]
fn upstream_failures_are_logged_as_upstream_failures_not_499() {
    let up = crate::support::harness::fake_upstream_seeing(|line, w| {
        if line.starts_with("GET /api/v1/namespaces/demo/configmaps ") {
            let part = br#"{"kind":"ConfigMapList","items":[{"#;
            let _ = write!(
                w,
                "HTTP/1.1 200 OK\r\nContent-Type: application/cbor\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
                part.len()
            );
            let _ = w.write_all(part);
            let _ = w.write_all(b"\r\n");
            let _ = w.flush();
            // The fault under test: the head and part of the body have gone out, and
            // the upstream dies a moment later (not synchronisation; the client waits
            // on its socket).
            std::thread::sleep(Duration::from_millis(100));
        }
        // Anything else: the connection closes before an answer.
    });
    let env = [("RUST_LOG", "info")];
    let json = ["--log-format", "json"];
    let mut h = Harness::proxy_to_env(&format!("http://{up}"), "native", &json, &env, true);
    let mut lines = Lines::of(&mut h);
    let accept = [("Accept", "application/cbor")];
    let mut c = crate::support::http::Conn::connect(h.proxy);
    c.send("GET", CM, &accept, None);
    crate::support::harness::eventually(5, "no answer, only a close", || c.is_closed());
    let mut c = crate::support::http::Conn::connect(h.proxy);
    c.send("GET", "/api/v1/namespaces/demo/configmaps", &accept, None);
    let head = c
        .try_head()
        .expect("the head went out before the upstream died");
    assert_eq!(head.status, 200);
    assert!(!c.try_body(&head, "GET").is_ok_and(|(_, chunked)| chunked));
    lines.wait("two request lines", |seen| request_lines(seen).len() == 2);
    let r = request_lines(&lines.seen);
    let reset = r.iter().find(|v| v["path"] == CM).unwrap();
    assert_eq!(reset["status"], 503, "{reset}");
    assert_eq!(reset["error"], "upstream: connection closed", "{reset}");
    let reason = reset["reason"].as_str().unwrap();
    assert!(
        reason.contains("before answering") && reason.contains("ended without an answer"),
        "{reset}"
    );
    let cut = r.iter().find(|v| v["path"] != CM).unwrap();
    assert_eq!(cut["status"], 200, "{cut}");
    let reason = cut["reason"].as_str().unwrap();
    assert!(
        reason.contains("ended its response before the end"),
        "{cut}"
    );
    h.wait_metric("cborgate_requests_total", &[("code", "503")], 1.0);
    assert_eq!(h.metric("cborgate_requests_total", &[("code", "499")]), 0.0);
}

/// stderr that nobody reads (a log collector that stalls) holds no request back: the
/// lines that do not fit in `log.queue_lines` are dropped and counted in
/// `cborgate_log_lines_dropped_total`, the others are written once stderr is read again,
/// and the lines logged just before a SIGTERM exit are written too.
#[test]
fn a_stalled_stderr_holds_no_request_back_and_dropped_lines_are_counted() {
    // A pipe holds 64 KiB and the writer thread's buffer as much again: a few hundred
    // lines, fewer than these.
    const N: usize = 1000;
    // Without pingora's info lines, whose bursts at start-up and SIGTERM would not fit
    // in this queue of 8 lines: the lines dropped are request lines only.
    let env = [("RUST_LOG", "info,pingora=warn")];
    let extra = ["--log-format", "json", "--log-queue-lines", "8"];
    let mut h = Harness::start_env("legacy", &extra, StandInOptions::default(), &env, true);
    // Nobody reads stderr yet. Each request is answered all the same.
    let mut c = crate::support::http::Conn::connect(h.proxy);
    for _ in 0..N {
        let r = c.request("GET", CM, &[("Accept", "application/json")], None);
        assert_eq!(r.status, 200);
    }
    drop(c);
    h.wait_metric("cborgate_requests_total", &[], N as f64);
    let dropped = |h: &Harness| h.metric("cborgate_log_lines_dropped_total", &[]) as usize;
    assert!(dropped(&h) > 0, "no line dropped while stderr was not read");
    // Now stderr is read: each request's line is either written or counted as dropped.
    let mut lines = Lines::of(&mut h);
    lines.wait("every request line written or counted", |seen| {
        request_lines(seen).len() + dropped(&h) >= N
    });
    let (written, dropped) = (request_lines(&lines.seen).len(), dropped(&h));
    assert_eq!(written + dropped, N, "{written} written, {dropped} dropped");
    assert!(written > 8, "the lines queued were written: {written}");
    // The line the drain logs just before the process exits is written.
    crate::connections::sigterm(&h);
    lines.wait("the drain's last line", |seen| {
        seen.iter().any(|l| l.contains("drained; exiting"))
    });
    let code = crate::support::harness::wait_exit(&mut h.child, Duration::from_secs(10));
    assert_eq!(code, Some(0));
}
