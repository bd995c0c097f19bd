//! Allocations per request through the proxy, counted, not timed: a passthrough GET and
//! a transcoded GET of a 7 KB pod, over one keep-alive connection, against the pinned
//! counts below. The proxy runs in this process (`process::server::run` on a thread of
//! its own) under a counting allocator; the client and the static upstream run on
//! threads that are not counted and allocate nothing per request anyway, so what is
//! counted is the proxy's own work (pingora included) plus the background services'
//! (the readiness probe, DNS refresh, the reloader: a few allocations a second, spread
//! over thousands of requests). A change that allocates more per request fails here;
//! one that allocates less lowers the pins (`CBORGATE_SHOW_ALLOCS=1` prints them).

#[path = "../bench/gen.rs"]
#[allow(dead_code)]
mod gen;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's allocations are not the proxy's (the client, the upstream).
    static NOT_COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    NOT_COUNTED.try_with(|c| !c.get()).unwrap_or(true)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counted() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if counted() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The pins: allocations per request, measured on this commit's code. No log
/// subscriber is installed here, so the request line's own cost is not in them (the log
/// writer has its own measurement in `bench/`). Lower them when a change allocates less.
const PASSTHROUGH_GET: f64 = 93.0;
const TRANSCODED_GET: f64 = 97.0;
/// How far over its pin a measurement may be: the background services' share.
const SLACK: f64 = 3.0;

const REQUESTS: u64 = 2_000;

fn pod() -> Vec<u8> {
    let mut rng = gen::Rng::new(7);
    let mut w = gen::W::new();
    gen::pod(&mut w, &mut rng, 1, true);
    w.out
}

/// A keep-alive HTTP/1.1 upstream answering every request with the pod, on threads
/// that are not counted.
fn upstream(body: Vec<u8>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    std::thread::spawn(move || {
        NOT_COUNTED.with(|c| c.set(true));
        for conn in listener.incoming().flatten() {
            let response = response.clone();
            std::thread::spawn(move || {
                NOT_COUNTED.with(|c| c.set(true));
                serve(conn, &response);
            });
        }
    });
    addr
}

/// Answer each request head on `conn` (no bodies: GETs only) with `response`.
fn serve(mut conn: TcpStream, response: &[u8]) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut have = 0;
    loop {
        while let Some(end) = find(&buf[..have], b"\r\n\r\n") {
            buf.copy_within(end + 4..have, 0);
            have -= end + 4;
            if conn.write_all(response).is_err() {
                return;
            }
        }
        match conn.read(&mut buf[have..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => have += n,
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Read one response (Content-Length or chunked) into `buf`, allocation-free; the
/// status code.
fn response(conn: &mut TcpStream, buf: &mut [u8]) -> u16 {
    let mut have = 0;
    let head_end = loop {
        if let Some(end) = find(&buf[..have], b"\r\n\r\n") {
            break end + 4;
        }
        let n = conn.read(&mut buf[have..]).unwrap();
        assert!(n > 0, "the proxy closed the connection");
        have += n;
    };
    let head = std::str::from_utf8(&buf[..head_end]).unwrap();
    let status: u16 = head[9..12].parse().unwrap();
    let lower = |name: &str| {
        head.lines()
            .find(|l| l.len() > name.len() && l[..name.len()].eq_ignore_ascii_case(name))
            .map(|l| l[name.len()..].trim().to_string())
    };
    let mut at = head_end;
    if let Some(len) = lower("content-length:") {
        let len: usize = len.parse().unwrap();
        while have < head_end + len {
            have += conn.read(&mut buf[have..]).unwrap();
        }
        // Nothing else is in flight on this connection.
        return status;
    }
    // Chunked: read chunk sizes and skip the data until the zero chunk.
    loop {
        let line_end = loop {
            if let Some(e) = find(&buf[at..have], b"\r\n") {
                break at + e;
            }
            have += conn.read(&mut buf[have..]).unwrap();
        };
        let size_text = std::str::from_utf8(&buf[at..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        let data_end = line_end + 2 + size + 2;
        while have < data_end {
            have += conn.read(&mut buf[have..]).unwrap();
        }
        if size == 0 {
            return status;
        }
        // Keep the buffer small: move what follows to the start.
        buf.copy_within(data_end..have, 0);
        have -= data_end;
        at = 0;
    }
}

/// Allocations per request for `requests` GETs with `accept`, after a warm-up.
fn per_request(proxy: SocketAddr, accept: &str) -> f64 {
    let request = format!(
        "GET /api/v1/namespaces/demo/pods/p HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\nUser-Agent: cborgate-test\r\n\r\n"
    );
    let mut buf = vec![0u8; 256 * 1024];
    let mut conn = TcpStream::connect(proxy).unwrap();
    conn.set_nodelay(true).unwrap();
    for _ in 0..200 {
        conn.write_all(request.as_bytes()).unwrap();
        assert_eq!(response(&mut conn, &mut buf), 200);
    }
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..REQUESTS {
        conn.write_all(request.as_bytes()).unwrap();
        assert_eq!(response(&mut conn, &mut buf), 200);
    }
    (ALLOCS.load(Ordering::Relaxed) - before) as f64 / REQUESTS as f64
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn allocations_per_request_stay_pinned() {
    NOT_COUNTED.with(|c| c.set(true));
    let upstream = upstream(pod());
    let mut config = cborgate::config::Config::default();
    let (listen, admin) = (free_port(), free_port());
    config.server.listen = format!("127.0.0.1:{listen}");
    config.server.admin = format!("127.0.0.1:{admin}");
    config.server.threads = 1;
    config.upstream.url = format!("http://{upstream}");
    config.upstream.mode = cborgate::config::UpstreamMode::Legacy;
    let built = cborgate::process::server::build(config.check(None).unwrap(), None).unwrap();
    let no_log = cborgate::ops::logs::Flush::none();
    std::thread::spawn(move || cborgate::process::server::run(built, no_log));
    let proxy: SocketAddr = format!("127.0.0.1:{listen}").parse().unwrap();
    let t = Instant::now();
    while TcpStream::connect(proxy).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the proxy never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let passthrough = per_request(proxy, "application/json");
    let transcoded = per_request(proxy, "application/cbor");
    if std::env::var_os("CBORGATE_SHOW_ALLOCS").is_some() {
        println!("allocations per request: passthrough GET {passthrough:.1}, transcoded GET {transcoded:.1}");
    }
    assert!(
        passthrough <= PASSTHROUGH_GET + SLACK,
        "a passthrough GET allocates {passthrough:.1} times, pinned at {PASSTHROUGH_GET}"
    );
    assert!(
        transcoded <= TRANSCODED_GET + SLACK,
        "a transcoded GET allocates {transcoded:.1} times, pinned at {TRANSCODED_GET}"
    );
}
