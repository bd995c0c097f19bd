//! Client connections: the request head deadline, the limit on
//! client connections at a 1,024-descriptor limit (the admin listener still answers),
//! pipelined requests answered in order, and requests still arriving when SIGTERM comes.

use crate::support::bodies::{cbor, decode};
use crate::support::harness::{
    config_file, eventually, fake_upstream_seeing, poll, wait_exit, Harness,
};
use crate::support::http::{once, request_bytes, Conn};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const CM: &str = "/api/v1/namespaces/demo/configmaps/demo-config";
const CMS: &str = "/api/v1/namespaces/demo/configmaps";

/// 500 clients send a head one byte every 500 ms: each pause is far below the read
/// timeout (60 s), but the whole head is not complete within
/// `server.request_head_timeout_seconds` (2 s), and every one of them is closed then,
/// counted in `cborgate_request_head_timeouts_total`. Other clients are served, and on a
/// kept-alive connection the deadline starts with the next head's first byte, not with
/// the previous answer.
#[test]
fn heads_that_trickle_in_are_closed_at_the_head_deadline() {
    let conf = config_file("[server]\nrequest_head_timeout_seconds = 2\n");
    let h = Harness::start("legacy", &["--config", &conf]);
    let proxy = h.proxy;
    let clients = 500;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let closed_after: Vec<Option<Duration>> = rt.block_on(async move {
        let mut tasks = Vec::new();
        for _ in 0..clients {
            tasks.push(tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let t = Instant::now();
                let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
                let head =
                    b"GET /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: slow\r\nX-Slow: ";
                let mut buf = [0u8; 64];
                for b in head.iter().chain(std::iter::repeat(&b'a')) {
                    if s.write_all(&[*b]).await.is_err() {
                        return Some(t.elapsed());
                    }
                    // A byte every 500 ms is the behaviour under test; the read is how
                    // the close is seen meanwhile.
                    match tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => return Some(t.elapsed()),
                        Ok(Ok(_)) => return None,
                        Err(_) => {}
                    }
                    if t.elapsed() > Duration::from_secs(15) {
                        return None;
                    }
                }
                None
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    let total = started.elapsed();
    let mut times: Vec<Duration> = closed_after.iter().flatten().copied().collect();
    times.sort();
    assert_eq!(times.len(), clients, "every trickling client was closed");
    println!(
        "{clients} trickling heads closed after {:?} .. {:?} (all within {total:?})",
        times[0],
        times[clients - 1]
    );
    assert!(times[0] >= Duration::from_millis(1500), "{:?}", times[0]);
    assert!(
        times[clients - 1] < Duration::from_secs(6),
        "{:?}",
        times[clients - 1]
    );
    h.wait_metric("cborgate_request_head_timeouts_total", &[], clients as f64);

    // A kept-alive connection idle for longer than the deadline still gets its answer.
    let mut c = Conn::connect(h.proxy);
    assert_eq!(c.request("GET", CM, &[], None).status, 200);
    // The idle wait is the behaviour under test.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(c.request("GET", CM, &[], None).status, 200);
}

/// The proxy at a 1,024-descriptor limit (soft and hard), with 1,124 idle attackers: the
/// connection limit derived from it (384) keeps descriptors free, so the admin
/// listener's `/healthz` answers, the connections over the limit are closed at once
/// (counted), and a normal client gets an answer or a fast refusal, never a hang.
#[test]
fn at_a_1024_descriptor_limit_idle_attackers_leave_admin_and_clients_an_answer() {
    let upstream = fake_upstream_seeing(|_, w| {
        let body = br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}"#;
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let _ = w.write_all(body);
    });
    let h = Harness::proxy_under(
        &["prlimit", "--nofile=1024:1024", "--"],
        &format!("http://{upstream}"),
        "legacy",
        &[],
    );
    assert_eq!(h.metric("cborgate_connections_limit", &[]), 384.0);
    let mut attackers = Vec::new();
    for _ in 0..1124 {
        if let Ok(s) = TcpStream::connect(h.proxy) {
            attackers.push(s);
        }
    }
    eventually(10, "the limit reached and the rest refused", || {
        h.metric("cborgate_connections_open", &[]) == 384.0
            && h.metric("cborgate_connections_refused_total", &[]) >= 1124.0 - 384.0
    });
    let fds = std::fs::read_dir(format!("/proc/{}/fd", h.child.id()))
        .unwrap()
        .count();
    let t = Instant::now();
    let health = once(h.admin, "GET", "/healthz", &[], None);
    assert_eq!(health.status, 200);
    let admin_took = t.elapsed();
    // A normal client: an answer, or a close at once.
    let t = Instant::now();
    let mut c = TcpStream::connect(h.proxy).unwrap();
    c.write_all(&request_bytes("GET", CM, &[], None)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 12];
    let answered = match c.read(&mut buf) {
        Ok(12) => Some(String::from_utf8_lossy(&buf).into_owned()),
        Ok(_) | Err(_) => None,
    };
    let client_took = t.elapsed();
    println!(
        "1124 idle attackers at nofile 1024: {fds} descriptors open, /healthz in {admin_took:?}, \
         a normal client {} in {client_took:?}",
        answered.as_deref().unwrap_or("refused")
    );
    assert!(fds < 1024 - 100, "{fds} descriptors open");
    assert!(admin_took < Duration::from_secs(1), "{admin_took:?}");
    assert!(client_took < Duration::from_secs(1), "{client_took:?}");
    if let Some(a) = answered {
        assert_eq!(a, "HTTP/1.1 200");
    }
    // Once the attackers go, clients are served again.
    drop(attackers);
    let served = poll(Duration::from_secs(10), || {
        let mut c = Conn::connect(h.proxy);
        c.try_response_to("GET", CM)
            .ok()
            .filter(|r| r.status == 200)
    });
    assert!(served.is_some(), "served after the attack");
}

trait RequestTo {
    fn try_response_to(
        &mut self,
        method: &str,
        path: &str,
    ) -> std::io::Result<crate::support::http::Resp>;
}

impl RequestTo for Conn {
    fn try_response_to(
        &mut self,
        method: &str,
        path: &str,
    ) -> std::io::Result<crate::support::http::Resp> {
        self.write(&request_bytes(method, path, &[], None));
        self.try_response(method)
    }
}

/// Three requests written in one go on one connection get three answers, in order,
/// on the same connection: GETs of three different things, and three CBOR POSTs.
#[test]
fn pipelined_requests_get_their_answers_in_order() {
    let h = Harness::start("legacy", &[]);
    let cbor_accept = [("Accept", "application/cbor")];
    let mut c = Conn::connect(h.proxy);
    let mut all = Vec::new();
    for path in [CM, CMS, "/api/v1/namespaces/demo/pods"] {
        all.extend(request_bytes("GET", path, &cbor_accept, None));
    }
    c.write(&all);
    let kinds: Vec<String> = (0..3)
        .map(|_| {
            let r = c.try_response("GET").expect("an answer");
            assert_eq!(r.status, 200);
            assert!(!r.closes(), "keep-alive kept");
            decode(&r)["kind"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(kinds, ["ConfigMap", "ConfigMapList", "PodList"]);

    let mut all = Vec::new();
    for name in ["piped-1", "piped-2", "piped-3"] {
        let body = cbor(&json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": name}, "data": {"n": name}
        }));
        all.extend(request_bytes(
            "POST",
            CMS,
            &[
                ("Content-Type", "application/cbor"),
                ("Accept", "application/cbor"),
            ],
            Some(&body),
        ));
    }
    c.write(&all);
    let names: Vec<String> = (0..3)
        .map(|_| {
            let r = c.try_response("POST").expect("an answer");
            assert_eq!(r.status, 201, "{}", r.text());
            decode(&r)["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["piped-1", "piped-2", "piped-3"]);
    // And the connection still serves.
    assert_eq!(c.request("GET", CM, &[], None).status, 200);
}

pub fn sigterm(h: &Harness) {
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &h.child.id().to_string()])
        .status()
        .unwrap()
        .success());
}

/// Wait until the proxy has stopped accepting (SIGTERM is being handled).
fn wait_not_accepting(proxy: SocketAddr) {
    eventually(10, "the listener stopped", || {
        TcpStream::connect(proxy).is_err()
    });
}

/// Whether the proxy has accepted the connection `client` opened to its port and read
/// all that was sent on it so far: the proxy's end is in `/proc/net/tcp` (or `tcp6`)
/// with an inode (a connection still in the listen backlog has none) and an empty
/// receive queue.
fn read_by_proxy(proxy: SocketAddr, client: SocketAddr) -> bool {
    let port = |addr: &str| {
        addr.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
    };
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .any(|table| {
            table.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 9
                    && port(f[1]) == Some(proxy.port())
                    && port(f[2]) == Some(client.port())
                    && f[4].rsplit(':').next() == Some("00000000")
                    && f[9] != "0"
            })
        })
}

/// A request head split across SIGTERM is served, and its answer says
/// `Connection: close`; the process then exits 0.
#[test]
fn a_request_head_split_across_sigterm_is_served_with_connection_close() {
    let mut h = Harness::start("legacy", &[]);
    let mut c = Conn::connect(h.proxy);
    let req = request_bytes("GET", CM, &[], None);
    let (first, rest) = req.split_at(20);
    c.write(first);
    // The head has begun to arrive only once the proxy has accepted the connection and
    // read its start; one still in the listen backlog at SIGTERM is closed with the
    // listener, as any server's is (this test once raced that).
    eventually(10, "the proxy read the head's start", || {
        read_by_proxy(h.proxy, c.local_addr())
    });
    sigterm(&h);
    wait_not_accepting(h.proxy);
    c.write(rest);
    let r = c.try_response("GET").expect("an answer, not EOF");
    assert_eq!(r.status, 200);
    assert!(r.closes(), "Connection: close");
    assert_eq!(wait_exit(&mut h.child, Duration::from_secs(10)), Some(0));
}

/// A request sent after SIGTERM on a connection that was idle then is served, with
/// `Connection: close`, while the process is still draining another request.
#[test]
fn a_request_on_a_connection_idle_at_sigterm_is_served_with_connection_close() {
    let (release, held) = mpsc::channel::<()>();
    let held = Arc::new(Mutex::new(held));
    let arrived = Arc::new(AtomicBool::new(false));
    let seen = arrived.clone();
    let upstream = fake_upstream_seeing(move |line, w| {
        if line.contains("/hold") {
            seen.store(true, Ordering::Release);
            // Held until the test lets it go: a request in flight during the drain.
            let _ = held.lock().unwrap().recv_timeout(Duration::from_secs(20));
        }
        let body = br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}"#;
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let _ = w.write_all(body);
    });
    let mut h = Harness::proxy_to(&format!("http://{upstream}"), "legacy", &[]);
    let mut idle = Conn::connect(h.proxy);
    let r = idle.request("GET", CM, &[], None);
    assert_eq!(r.status, 200);
    assert!(!r.closes());
    let mut busy = Conn::connect(h.proxy);
    busy.write(&request_bytes(
        "GET",
        "/api/v1/namespaces/demo/configmaps/hold",
        &[],
        None,
    ));
    eventually(5, "the held request in flight", || {
        arrived.load(Ordering::Acquire)
    });
    sigterm(&h);
    wait_not_accepting(h.proxy);
    let r = idle.try_response_to("GET", CM).expect("an answer, not EOF");
    assert_eq!(r.status, 200);
    assert!(r.closes(), "Connection: close");
    release.send(()).unwrap();
    let r = busy.try_response("GET").expect("the held request's answer");
    assert_eq!(r.status, 200);
    assert_eq!(wait_exit(&mut h.child, Duration::from_secs(10)), Some(0));
}
