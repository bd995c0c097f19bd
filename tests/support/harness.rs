//! Starts the stand-in apiserver in-process and the real `cborgate` binary in
//! front of it on loopback, and tears both down on drop.
#![allow(dead_code)]

use cborgate_standin::{StandIn, StandInOptions};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Harness {
    pub rt: tokio::runtime::Runtime,
    pub standin: Option<StandIn>,
    pub upstream: SocketAddr,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    pub child: Child,
}

/// A loopback port nobody listens on, never the same twice in this test
/// process (tests run in parallel; two harnesses sharing a port would talk
/// to each other's proxies).
pub fn free_port() -> SocketAddr {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&addr.port()) {
            given.push(addr.port());
            return addr;
        }
    }
}

/// How often the tests look again at a condition they wait for.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Poll `f` until it gives a value; `None` once `within` has passed. The one
/// place the tests wait: for a condition, never for a fixed time.
pub fn poll<T>(within: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The stand-in apiserver on a loopback port, on a runtime of its own (one worker), for
/// tests that start `cborgate` with flags of their own.
pub fn loopback_standin() -> (tokio::runtime::Runtime, StandIn) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let standin = rt
        .block_on(StandIn::start(
            "127.0.0.1:0".parse().unwrap(),
            StandInOptions::default(),
        ))
        .unwrap();
    (rt, standin)
}

/// Poll `cond` until it holds; fail naming `what` after `secs` seconds.
pub fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    assert!(
        poll(Duration::from_secs(secs), || cond().then_some(())).is_some(),
        "not within {secs} s: {what}"
    );
}

/// [`poll`] inside a tokio runtime, without blocking its thread: true once `cond`
/// holds, false if `within` passes first.
pub async fn poll_async(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    true
}

/// [`eventually`] inside a tokio runtime, without blocking its thread.
pub async fn eventually_async(secs: u64, what: &str, cond: impl FnMut() -> bool) {
    assert!(
        poll_async(Duration::from_secs(secs), cond).await,
        "not within {secs} s: {what}"
    );
}

/// Wait (up to 20 s) until `addr` accepts connections; fail if `child` exits first.
pub fn wait_for(addr: SocketAddr, child: &mut Child) {
    eventually(20, &format!("cborgate listening on {addr}"), || {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("cborgate exited early: {status}");
        }
        TcpStream::connect(addr).is_ok()
    });
}

/// The exit code of `child` once it exits; `None` if it is still running after `within`.
pub fn wait_exit(child: &mut Child, within: Duration) -> Option<i32> {
    poll(within, || child.try_wait().ok().flatten()).and_then(|s| s.code())
}

/// A new config file holding `body`, in a directory of this test process; its path.
/// Never the same file twice, so tests running at once cannot rewrite each other's.
pub fn config_file(body: &str) -> String {
    static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("cborgate-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{n}.toml"));
    std::fs::write(&path, body).unwrap();
    path.to_string_lossy().into_owned()
}

/// A `/proc/PID/status` field in KiB (`VmRSS:`, `VmHWM:`).
pub fn rss_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

impl Harness {
    /// Stand-in + `cborgate serve --mode MODE` with extra flags.
    pub fn start(mode: &str, extra: &[&str]) -> Harness {
        Self::start_with(mode, extra, StandInOptions::default())
    }

    pub fn start_with(mode: &str, extra: &[&str], opts: StandInOptions) -> Harness {
        Self::start_env(mode, extra, opts, &[], false)
    }

    /// Stand-in + `cborgate serve`, with extra environment variables and, if
    /// `capture`, stderr piped to `child.stderr` (the logs).
    pub fn start_env(
        mode: &str,
        extra: &[&str],
        opts: StandInOptions,
        env: &[(&str, &str)],
        capture: bool,
    ) -> Harness {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let standin = rt
            .block_on(StandIn::start("127.0.0.1:0".parse().unwrap(), opts))
            .unwrap();
        let upstream = standin.addr();
        let mut h = Self::spawn(&format!("http://{upstream}"), mode, extra, rt, env, capture);
        h.standin = Some(standin);
        h.upstream = upstream;
        h
    }

    /// `cborgate serve` in front of any upstream URL (a fake upstream, or none).
    pub fn proxy_to(url: &str, mode: &str, extra: &[&str]) -> Harness {
        Self::proxy_under(&[], url, mode, extra)
    }

    /// [`Harness::proxy_to`], with extra environment variables and, if `capture`, stderr
    /// piped to `child.stderr` (the logs).
    pub fn proxy_to_env(
        url: &str,
        mode: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        capture: bool,
    ) -> Harness {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        Self::spawn_with(None, &[], url, mode, extra, rt, env, capture)
    }

    /// [`Harness::proxy_to`], with the binary started by a wrapper command that execs
    /// it (`prlimit --nofile=1024:1024 --`), so the child's pid is still cborgate's.
    pub fn proxy_under(wrapper: &[&str], url: &str, mode: &str, extra: &[&str]) -> Harness {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (program, mut before) = match wrapper.split_first() {
            Some((program, rest)) => (Some(*program), rest.to_vec()),
            None => (None, Vec::new()),
        };
        if program.is_some() {
            before.push(env!("CARGO_BIN_EXE_cborgate"));
        }
        Self::spawn_with(program, &before, url, mode, extra, rt, &[], false)
    }

    fn spawn(
        url: &str,
        mode: &str,
        extra: &[&str],
        rt: tokio::runtime::Runtime,
        env: &[(&str, &str)],
        capture: bool,
    ) -> Harness {
        Self::spawn_with(None, &[], url, mode, extra, rt, env, capture)
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn_with(
        program: Option<&str>,
        before: &[&str],
        url: &str,
        mode: &str,
        extra: &[&str],
        rt: tokio::runtime::Runtime,
        env: &[(&str, &str)],
        capture: bool,
    ) -> Harness {
        let proxy = free_port();
        let admin = free_port();
        let mut args: Vec<String> = before.iter().map(|s| s.to_string()).collect();
        args.extend([
            "serve".to_string(),
            "--listen".into(),
            proxy.to_string(),
            "--admin".into(),
            admin.to_string(),
            "--upstream".into(),
            url.to_string(),
            "--mode".into(),
            mode.into(),
        ]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child = Command::new(program.unwrap_or(env!("CARGO_BIN_EXE_cborgate")))
            .args(&args)
            .env(
                "RUST_LOG",
                std::env::var("CBORGATE_TEST_LOG").unwrap_or("warn".into()),
            )
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stderr(if capture {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .expect("start cborgate");
        wait_for(proxy, &mut child);
        wait_for(admin, &mut child);
        // Listening, and it is ours: a child that lost its port to another process
        // exits early. Not a wait for a condition (there is none to poll: the check is
        // that nothing happens), a grace window for that exit to show.
        std::thread::sleep(Duration::from_millis(50));
        if let Ok(Some(status)) = child.try_wait() {
            panic!("cborgate exited after start-up: {status}");
        }
        Harness {
            rt,
            standin: None,
            upstream: "127.0.0.1:0".parse().unwrap(),
            proxy,
            admin,
            child,
        }
    }

    pub fn standin(&self) -> &StandIn {
        self.standin.as_ref().expect("a stand-in")
    }

    /// The Prometheus text from the admin listener.
    pub fn metrics(&self) -> String {
        let r = super::http::once(self.admin, "GET", "/metrics", &[], None);
        assert_eq!(r.status, 200);
        String::from_utf8(r.body).unwrap()
    }

    /// Wait (up to 5 s) until `metric(name, filter)` equals `want`: requests
    /// are counted when they end, which may be just after the client has
    /// read the last byte.
    pub fn wait_metric(&self, name: &str, filter: &[(&str, &str)], want: f64) {
        let mut got = f64::NAN;
        let seen = poll(Duration::from_secs(5), || {
            got = self.metric(name, filter);
            (got == want).then_some(())
        });
        assert!(seen.is_some(), "{name}{filter:?}: {got}, want {want}");
    }

    /// Sum of the samples of `name` whose labels contain every `filter` pair.
    pub fn metric(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        metric_sum(&self.metrics(), name, filter)
    }
}

/// Sum of the samples of `name` in Prometheus text whose labels contain every
/// `filter` pair.
pub fn metric_sum(text: &str, name: &str, filter: &[(&str, &str)]) -> f64 {
    samples(text, name)
        .filter(|(labels, _)| {
            filter
                .iter()
                .all(|(k, v)| labels.split(',').any(|kv| kv == format!("{k}=\"{v}\"")))
        })
        .map(|(_, v)| v)
        .sum()
}

/// Every sample of `name` in Prometheus text: its label text (without braces) and
/// value.
pub fn samples<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(move |line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, labels) = match series.split_once('{') {
                Some((m, l)) => (m, l.trim_end_matches('}')),
                None => (series, ""),
            };
            (metric == name).then(|| (labels, value.parse::<f64>().unwrap_or(0.0)))
        })
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A hand-written upstream on loopback for fault and load tests: for every
/// connection it reads one request head, then lets `respond` write whatever
/// it likes (or nothing) on the stream. Returns its address.
pub fn fake_upstream(respond: impl Fn(&mut TcpStream) + Send + Sync + 'static) -> SocketAddr {
    fake_upstream_seeing(move |_, w| respond(w))
}

/// [`fake_upstream`], giving `respond` the request line too (`GET /path HTTP/1.1`):
/// for a test that counts what reached the upstream (the proxy's `/readyz` probes
/// arrive there as well).
pub fn fake_upstream_seeing(
    respond: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static,
) -> SocketAddr {
    use std::io::BufRead;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let respond = std::sync::Arc::new(respond);
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let respond = respond.clone();
            std::thread::spawn(move || {
                let mut r = std::io::BufReader::new(s.try_clone().unwrap());
                let mut first = String::new();
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    if first.is_empty() {
                        first = line.trim_end().to_string();
                    }
                }
                let mut w = s;
                respond(&first, &mut w);
            });
        }
    });
    addr
}
