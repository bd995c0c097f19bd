//! SIGTERM with watches open: each ends cleanly, as kube-apiserver ends its watches
//! when it shuts down (client-go then re-establishes them at once), the terminating
//! chunk on HTTP/1.1 and `END_STREAM` on HTTP/2, never a cut connection (curl's exit
//! 18); each watch leaves its request line; the process exits 0.

use crate::connections::sigterm;
use crate::support::harness::{eventually, poll_async, wait_exit, Harness};
use crate::support::http::once;
use crate::support::http::{request_bytes, Conn};
use crate::tls::{h2_connect, path, pki};
use cborgate_standin::StandInOptions;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::sync::mpsc::Receiver;
use std::time::Duration;

const WATCH: &str = "/api/v1/namespaces/demo/configmaps?watch=1&allowWatchBookmarks=false";

/// cborgate (legacy mode, JSON logs at info) in front of the stand-in, its stderr
/// read line by line on a thread.
fn start(extra: &[&str]) -> (Harness, Receiver<String>) {
    let mut args = vec!["--log-format", "json"];
    args.extend_from_slice(extra);
    let env = [("RUST_LOG", "info")];
    let mut h = Harness::start_env("legacy", &args, StandInOptions::default(), &env, true);
    let stderr = h.child.stderr.take().expect("stderr is captured");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (h, rx)
}

/// A CBOR watch on a new HTTP/1.1 connection, and its response head.
fn http1_watch(h: &Harness) -> (Conn, crate::support::http::Head) {
    let mut c = Conn::connect(h.proxy);
    c.write(&request_bytes(
        "GET",
        WATCH,
        &[("Accept", "application/cbor")],
        None,
    ));
    let head = c.head();
    (c, head)
}

/// Read a chunked watch to its terminating chunk (failing the test if it ends without
/// one); the bytes of events read.
fn read_to_the_terminating_chunk(c: &mut Conn) -> usize {
    let mut bytes = 0;
    loop {
        match c.try_chunk() {
            Ok(Some(chunk)) => bytes += chunk.len(),
            Ok(None) => return bytes,
            Err(e) => panic!("the watch ended without its terminating chunk: {e}"),
        }
    }
}

/// After the process has exited: its request lines for the watch path.
fn watch_lines(lines: Receiver<String>) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .filter(|l| l["message"] == "request" && l["path"] == "/api/v1/namespaces/demo/configmaps")
        .collect()
}

/// The request line of a watch the drain ended: 200, no error, ended by shutdown.
fn assert_ended_by_shutdown(lines: &[Value]) {
    assert_eq!(lines.len(), 1, "one request line for the watch: {lines:?}");
    let l = &lines[0];
    assert_eq!(l["status"], 200, "{l}");
    assert_eq!(l["ended"], "shutdown", "{l}");
    assert!(l.get("error").is_none_or(Value::is_null), "{l}");
}

#[test]
fn sigterm_ends_an_http1_watch_with_the_terminating_chunk_and_logs_it() {
    let (mut h, lines) = start(&[]);
    let (mut c, head) = http1_watch(&h);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("application/cbor-seq"));
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    sigterm(&h);
    // The initial events, then the terminating chunk: a clean end.
    let bytes = read_to_the_terminating_chunk(&mut c);
    assert!(bytes > 0, "the initial events arrived first");
    assert!(c.is_closed(), "then the connection closes");
    assert_eq!(wait_exit(&mut h.child, Duration::from_secs(10)), Some(0));
    assert_ended_by_shutdown(&watch_lines(lines));
}

#[test]
fn sigterm_ends_an_http2_watch_with_end_stream_and_logs_it() {
    let p = pki("drain");
    let (cert, key) = (path(&p.dir, "server.pem"), path(&p.dir, "server.key"));
    let (mut h, lines) = start(&["--tls-cert", &cert, "--tls-key", &key]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (bytes, code) = rt.block_on(async {
        let mut client = h2_connect(h.proxy, &p.ca_der).await;
        let req = http::Request::builder()
            .method("GET")
            .uri(format!("https://localhost{WATCH}"))
            .header("accept", "application/cbor")
            .body(())
            .unwrap();
        let (resp, _) = client.send_request(req, true).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "application/cbor-seq");
        sigterm(&h);
        let mut body = resp.into_body();
        let mut bytes = 0;
        // `None` only after END_STREAM; a reset is an `Err`.
        let read = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(chunk) = body.data().await {
                let chunk = chunk.unwrap_or_else(|e| panic!("the watch was reset: {e}"));
                let _ = body.flow_control().release_capacity(chunk.len());
                bytes += chunk.len();
            }
        })
        .await;
        assert!(read.is_ok(), "the watch ended within 10 s");
        // The client's connection task keeps running (it answers the server's GOAWAY
        // ping, as any HTTP/2 client does) until the process has exited: the drain
        // waits for HTTP/2 connections to close.
        let child = &mut h.child;
        let mut code = None;
        let exited = poll_async(Duration::from_secs(10), || {
            code = child.try_wait().ok().flatten().map(|s| s.code());
            code.is_some()
        })
        .await;
        assert!(exited, "cborgate exited within 10 s of the watch's end");
        (bytes, code.flatten())
    });
    assert!(bytes > 0, "the initial events arrived first");
    assert_eq!(code, Some(0));
    assert_ended_by_shutdown(&watch_lines(lines));
}

/// A second SIGTERM during the shutdown delay skips the rest of it: the drain begins at
/// once (a 600 s delay, so only the second signal can end it within the test's 10 s),
/// the open watch still ends cleanly, and the process exits 0.
#[test]
fn a_second_sigterm_skips_the_rest_of_the_shutdown_delay() {
    let (mut h, lines) = start(&["--shutdown-delay-seconds", "600"]);
    let (mut c, head) = http1_watch(&h);
    assert_eq!(head.status, 200);
    sigterm(&h);
    // The delay has begun: /readyz fails, and requests are still served.
    eventually(10, "/readyz fails after the first SIGTERM", || {
        once(h.admin, "GET", "/readyz", &[], None).status == 503
    });
    let r = once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps",
        &[],
        None,
    );
    assert_eq!(r.status, 200, "still serving during the delay");
    sigterm(&h);
    read_to_the_terminating_chunk(&mut c);
    assert_eq!(wait_exit(&mut h.child, Duration::from_secs(10)), Some(0));
    let lines: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .collect();
    assert!(
        lines.iter().any(|l| l["message"].as_str().is_some_and(
            |m| m.starts_with("a second signal: the rest of the shutdown delay is skipped")
        ) && l["signal"] == "SIGTERM"),
        "{lines:?}"
    );
    let watch: Vec<Value> = lines
        .into_iter()
        .filter(|l| {
            l["message"] == "request"
                && l["path"] == "/api/v1/namespaces/demo/configmaps"
                && l["ended"] == "shutdown"
        })
        .collect();
    assert_ended_by_shutdown(&watch);
}
