//! The load generator: keep-alive HTTP/1.1 connections on loopback, each sending one
//! request after another for a fixed time and recording every latency; a watch reader;
//! idle watches held open.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// The HTTP/1.1 client the test suites use too (one client, not one per harness).
use cborgate_standin::client::{request_bytes, AsyncConn as Conn};

/// One request, sent again and again.
pub struct Request {
    pub method: &'static str,
    pub path: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Vec<u8>>,
    pub expect_status: u16,
    pub expect_content_type: &'static str,
}

impl Request {
    fn bytes(&self) -> Vec<u8> {
        let mut headers = vec![("Host", "load")];
        headers.extend(self.headers.iter().map(|(k, v)| (*k, v.as_str())));
        request_bytes(self.method, &self.path, &headers, self.body.as_deref())
    }
}

fn bad(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

/// What one timed run measured.
#[derive(Default, Clone)]
pub struct Run {
    pub requests: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
    /// Sorted latencies.
    pub latencies: Vec<Duration>,
    pub body_bytes: u64,
    /// TLS connections whose handshake resumed a session (the TLS scenarios).
    pub resumed: u64,
}

impl Run {
    /// The connections' runs as one (the elapsed time is the caller's), latencies sorted.
    pub fn merge(runs: Vec<Run>) -> Run {
        let mut total = Run::default();
        for r in runs {
            total.requests += r.requests;
            total.errors += r.errors;
            total.body_bytes += r.body_bytes;
            total.resumed += r.resumed;
            total.latencies.extend(r.latencies);
            if total.first_error.is_none() {
                total.first_error = r.first_error;
            }
        }
        total.latencies.sort();
        total
    }

    pub fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
    pub fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[i]
    }
}

/// `conns` connections send `req` back to back for `time`. `done` counts requests, for
/// the progress bar. Each connection also stops by itself once `time` is over, so a
/// caller that gives up on this future leaves no connection looping behind it.
pub async fn load(
    addr: SocketAddr,
    req: Arc<Request>,
    conns: usize,
    time: Duration,
    rate: Option<f64>,
    done: Arc<AtomicU64>,
) -> Run {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    // Paced: connection k sends its i-th request at `started + (k + i × conns) / rate`,
    // or at once when it is behind, so every contestant gets the same requests at the
    // same times while it keeps up.
    let interval = rate.map(|r| Duration::from_secs_f64(conns as f64 / r));
    let mut tasks = Vec::new();
    for k in 0..conns {
        let (req, stop, done) = (req.clone(), stop.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut run = Run::default();
            let bytes = req.bytes();
            let mut body = Vec::new();
            let mut conn: Option<Conn> = None;
            // When the next request is due, and the time between two.
            let mut pace = interval.map(|i| {
                let first = tokio::time::Instant::from_std(started) + i * k as u32 / conns as u32;
                (first, i)
            });
            while !stop.load(Ordering::Relaxed) && started.elapsed() < time {
                if let Some((due, i)) = pace.as_mut() {
                    tokio::time::sleep_until(*due).await;
                    *due += *i;
                }
                let t = Instant::now();
                let result = async {
                    if conn.is_none() {
                        conn = Some(Conn::connect(addr).await?);
                    }
                    let c = conn.as_mut().unwrap();
                    c.write(&bytes).await?;
                    let head = c.head().await?;
                    c.body_into(&head, req.method, &mut body).await?;
                    if head.status != req.expect_status {
                        return Err(bad(format!("status {}", head.status)));
                    }
                    let content_type = head.header("content-type").unwrap_or_default();
                    if content_type != req.expect_content_type {
                        return Err(bad(format!("Content-Type {content_type}")));
                    }
                    Ok(())
                }
                .await;
                match result {
                    Ok(()) => {
                        run.requests += 1;
                        run.body_bytes += body.len() as u64;
                        run.latencies.push(t.elapsed());
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        run.errors += 1;
                        run.first_error.get_or_insert(e.to_string());
                        conn = None;
                    }
                }
            }
            run
        }));
    }
    tokio::time::sleep(time).await;
    stop.store(true, Ordering::Relaxed);
    let mut runs = Vec::with_capacity(tasks.len());
    for t in tasks {
        runs.push(t.await.expect("load task"));
    }
    let mut total = Run::merge(runs);
    total.elapsed = started.elapsed();
    total
}

/// A new connection with a pod watch request sent on it (`query` after `watch=1`).
async fn send_watch(addr: SocketAddr, query: &str, accept: &str) -> std::io::Result<Conn> {
    let mut c = Conn::connect(addr).await?;
    c.send(
        "GET",
        &format!("/api/v1/namespaces/load/pods?watch=1{query}"),
        &[("Host", "load"), ("Accept", accept)],
        None,
    )
    .await?;
    Ok(c)
}

/// One whole watch: the body's bytes and how long it took from the request to the end.
pub async fn watch(addr: SocketAddr, accept: &str) -> std::io::Result<(Vec<u8>, Duration)> {
    let t = Instant::now();
    let mut c = send_watch(addr, "", accept).await?;
    let head = c.head().await?;
    if head.status != 200 {
        return Err(bad(format!("watch status {}", head.status)));
    }
    let mut body = Vec::with_capacity(100 << 20);
    c.body_into(&head, "GET", &mut body).await?;
    Ok((body, t.elapsed()))
}

/// Open `n` watches that stay idle, and return them once every head has arrived.
pub async fn idle_watches(addr: SocketAddr, n: usize, accept: &str) -> std::io::Result<Vec<Conn>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(send_watch(addr, "&idle=1", accept).await?);
    }
    for c in &mut out {
        let head = c.head().await?;
        if head.status != 200 {
            return Err(bad(format!("idle watch status {}", head.status)));
        }
    }
    Ok(out)
}
