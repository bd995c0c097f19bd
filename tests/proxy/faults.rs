//! Faults: an upstream that dies in the middle of a body or a watch, or sends
//! malformed JSON, makes the client's response end abnormally (no
//! terminating chunk), never a well-formed but shortened stream.

use crate::support::harness::{config_file, fake_upstream, Harness};
use crate::support::http::Conn;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

/// An upstream that sends a 200 JSON head and `body`, then drops the connection.
fn dying_upstream(content_type: &'static str, body: &'static [u8]) -> SocketAddr {
    fake_upstream(move |w| {
        let _ = write!(w, "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n", body.len());
        let _ = w.write_all(body);
        let _ = w.write_all(b"\r\n");
        let _ = w.flush();
        // The fault under test: the body so far has gone out and the upstream then
        // dies a moment later (not synchronisation; the client waits on the socket).
        std::thread::sleep(Duration::from_millis(100));
        // Dropped here: no terminating chunk.
    })
}

/// Read a response; true only if a complete chunked body arrived. A connection
/// closed before or inside the response is an abnormal end.
fn ends_cleanly(c: &mut Conn) -> bool {
    let Ok(head) = c.try_head() else {
        return false;
    };
    assert_eq!(head.status, 200);
    c.try_body(&head, "GET").is_ok_and(|(_, chunked)| chunked)
}

#[test]
fn upstream_dying_mid_watch_ends_the_client_stream_abnormally() {
    let up = dying_upstream("application/json", b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}}\n{\"type\":\"ADDED\",\"obj");
    let h = Harness::proxy_to(&format!("http://{up}"), "legacy", &[]);
    let mut c = Conn::connect(h.proxy);
    c.send(
        "GET",
        "/api/v1/namespaces/x/configmaps?watch=1",
        &[("Accept", "application/cbor")],
        None,
    );
    assert!(!ends_cleanly(&mut c), "a cut watch must not look complete");
}

#[test]
fn upstream_dying_mid_body_ends_the_client_response_abnormally() {
    let up = dying_upstream(
        "application/json",
        b"{\"kind\":\"ConfigMapList\",\"items\":[{\"metadata\":{\"name\":\"a\"}},",
    );
    let h = Harness::proxy_to(&format!("http://{up}"), "legacy", &[]);
    let mut c = Conn::connect(h.proxy);
    c.send(
        "GET",
        "/api/v1/namespaces/x/configmaps",
        &[("Accept", "application/cbor")],
        None,
    );
    assert!(!ends_cleanly(&mut c));
}

#[test]
fn malformed_upstream_json_never_reaches_the_client_as_complete_cbor() {
    let up = dying_upstream("application/json", b"{\"kind\": nope}");
    let h = Harness::proxy_to(&format!("http://{up}"), "legacy", &[]);
    let mut c = Conn::connect(h.proxy);
    c.send(
        "GET",
        "/api/v1/namespaces/x/configmaps/y",
        &[("Accept", "application/cbor")],
        None,
    );
    assert!(!ends_cleanly(&mut c));
    assert!(
        h.metric(
            "cborgate_transcode_errors_total",
            &[("direction", "response"), ("reason", "syntax")]
        ) >= 1.0
    );
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn a_client_hanging_up_on_a_watch_closes_the_upstream_and_frees_its_fds() {
    let h = Harness::start("legacy", &[]);
    let pid = h.child.id();
    // Warm up (lazily opened descriptors), then measure.
    crate::support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps",
        &[("Accept", "application/cbor")],
        None,
    );
    h.wait_metric("cborgate_requests_total", &[], 1.0);
    let before = fd_count(pid);
    let mut watches = Vec::new();
    for _ in 0..20 {
        let mut c = Conn::connect(h.proxy);
        c.send(
            "GET",
            "/api/v1/namespaces/demo/configmaps?watch=1&timeoutSeconds=600",
            &[("Accept", "application/cbor")],
            None,
        );
        assert_eq!(c.head().status, 200);
        watches.push(c);
    }
    h.wait_metric("cborgate_watch_streams_active", &[], 20.0);
    let during = fd_count(pid);
    assert!(during >= before + 30, "20 watches hold a client and an upstream socket each (one pooled connection may be reused): {before} -> {during}");
    assert_eq!(h.metric("cborgate_watch_streams_active", &[]), 20.0);
    drop(watches);
    // The stand-in sends a bookmark every second: the proxy notices the
    // hang-up on its next write at the latest and closes the upstream.
    let mut now = 0;
    let released = crate::support::harness::poll(Duration::from_secs(10), || {
        now = fd_count(pid);
        (now <= before && h.metric("cborgate_watch_streams_active", &[]) == 0.0).then_some(())
    });
    assert!(
        released.is_some(),
        "descriptors not released: {before} -> {now}"
    );
}

#[test]
fn watches_are_never_timed_out_waiting_for_headers() {
    // An upstream that answers after 2.5 s; the header timeout is 1 s.
    let addr = fake_upstream(|w| {
        // The slowness is the behaviour under test, not synchronisation.
        std::thread::sleep(Duration::from_millis(2500));
        let ev = b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"late\"}}}\n";
        let _ = write!(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n", ev.len());
        let _ = w.write_all(ev);
        let _ = w.write_all(b"\r\n0\r\n\r\n");
    });
    let conf = config_file("[upstream]\nresponse_header_timeout_seconds = 1\n");
    let h = Harness::proxy_to(&format!("http://{addr}"), "legacy", &["--config", &conf]);
    let mut c = Conn::connect(h.proxy);
    c.send(
        "GET",
        "/api/v1/namespaces/x/configmaps?watch=1",
        &[("Accept", "application/cbor")],
        None,
    );
    assert!(
        ends_cleanly(&mut c),
        "the slow watch must be served, not 504"
    );
    // A short request to the same slow upstream does get the 504.
    let r = crate::support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/x/configmaps/y",
        &[("Accept", "application/cbor")],
        None,
    );
    assert_eq!(r.status, 504);
}

/// The upstream's name does not resolve: every request is a 503 Status with
/// Retry-After (never a panic, an empty reply or a leaked admission slot), and
/// service resumes on its own once the name resolves. cborgate runs in a mount
/// namespace of its own whose `/etc/hosts` the test rewrites (`unshare`, as
/// root, as CI runs).
#[test]
fn an_unresolvable_upstream_is_a_503_until_it_resolves() {
    use crate::support::harness::{eventually, free_port, wait_for};
    use crate::support::http::once;
    let (_rt, standin) = crate::support::harness::loopback_standin();
    let dir = std::env::temp_dir().join(format!("cborgate-dns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost\n").unwrap();
    let conf = dir.join("c.toml");
    let limit = 2;
    std::fs::write(
        &conf,
        format!("[server]\nmax_requests_inflight = {limit}\n"),
    )
    .unwrap();
    let name = "cborgate-upstream.test";
    let (proxy, admin) = (free_port(), free_port());
    let mut child = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$0" /etc/hosts && exec "$@""#)
        .arg(&hosts)
        .arg(env!("CARGO_BIN_EXE_cborgate"))
        .args([
            "serve",
            "--mode",
            "legacy",
            "--config",
            conf.to_str().unwrap(),
        ])
        .args([
            "--listen",
            &proxy.to_string(),
            "--admin",
            &admin.to_string(),
        ])
        .args([
            "--upstream",
            &format!("http://{name}:{}", standin.addr().port()),
        ])
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("unshare runs");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Exits at once (and fails here) where a mount namespace cannot be made: run as root.
    wait_for(proxy, &mut child);
    let child = Kill(child);
    const CM: &str = "/api/v1/namespaces/demo/configmaps/demo-config";
    let accept = [("Accept", "application/json")];
    for _ in 0..limit * 5 {
        let r = once(proxy, "GET", CM, &accept, None);
        assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.header("retry-after"), Some("1"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["reason"], "ServiceUnavailable");
        assert!(v["message"].as_str().unwrap().contains(name), "{v}");
    }
    assert_eq!(once(admin, "GET", "/readyz", &[], None).status, 503);
    assert_eq!(once(admin, "GET", "/healthz", &[], None).status, 200);
    // The name resolves now.
    std::fs::write(&hosts, format!("127.0.0.1 localhost\n127.0.0.1 {name}\n")).unwrap();
    eventually(10, "service resumed", || {
        once(proxy, "GET", CM, &accept, None).status == 200
    });
    // More requests than the admission limit, one after another: no slot leaked.
    for _ in 0..limit * 5 {
        assert_eq!(once(proxy, "GET", CM, &accept, None).status, 200);
    }
    eventually(10, "/readyz 200", || {
        once(admin, "GET", "/readyz", &[], None).status == 200
    });
    let metrics = String::from_utf8(once(admin, "GET", "/metrics", &[], None).body).unwrap();
    let failures = metrics
        .lines()
        .find_map(|l| l.strip_prefix("cborgate_upstream_resolve_failures_total "))
        .and_then(|v| v.parse::<f64>().ok());
    assert!(failures >= Some(1.0), "{failures:?}");
    drop(child);
}
