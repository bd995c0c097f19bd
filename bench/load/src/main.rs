//! The end-to-end load harness. One command:
//!
//! ```sh
//! bench/load.sh
//! ```
//!
//! builds the release `cborgate` and this harness, then the harness starts a static-body upstream on loopback, then for each
//! scenario starts a fresh `cborgate serve --mode legacy` and drives it with the same
//! requests as a JSON client (passthrough: nothing transcoded) and as a CBOR client
//! (transcoding), taking turns, several rounds each. It reports requests/s, p50/p99,
//! proxy CPU per request (from `/proc/PID/stat`) and the proxy's peak RSS, and rewrites
//! `bench/RESULTS.md` and `bench/results.png`. Options: `--seconds N` per timed run
//! (default 4), `--rounds N` (default 3), `--quick` (1 s, 1 round), `--out DIR`,
//! `--cborgate PATH` (the binary under test; `bench/load.sh` passes it).

#[path = "../../gen.rs"]
#[allow(dead_code)]
mod gen;

mod client;
mod h2idle;
mod report;
mod upstream;

use client::{Request, Run};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Clock ticks per second in `/proc/PID/stat` (`getconf CLK_TCK`; 100 on Linux).
const CLK_TCK: f64 = 100.0;

/// A running `cborgate serve`.
struct Proxy {
    child: Child,
    addr: SocketAddr,
}

impl Proxy {
    fn start(exe: &Path, upstream: SocketAddr) -> Proxy {
        Proxy::start_with(exe, &format!("http://{upstream}"), "legacy", &[])
    }

    /// `cborgate serve` in `mode` before `upstream` (a URL), with `extra` flags.
    fn start_with(exe: &Path, upstream: &str, mode: &str, extra: &[String]) -> Proxy {
        let addr = free_port();
        let admin = free_port();
        let child = Command::new(exe)
            .args([
                "serve",
                "--listen",
                &addr.to_string(),
                "--admin",
                &admin.to_string(),
                "--upstream",
                upstream,
                "--mode",
                mode,
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cborgate");
        let t = Instant::now();
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "cborgate did not start"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Proxy { child, addr }
    }

    /// User and system CPU time and minor page faults so far.
    fn usage(&self) -> Usage {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the parenthesised command name: minflt is the 8th, utime the 12th,
        // stime the 13th.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let n = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        Usage {
            user: Duration::from_secs_f64(n(11) / CLK_TCK),
            sys: Duration::from_secs_f64(n(12) / CLK_TCK),
            faults: n(7) as u64,
        }
    }

    fn status_kib(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// What the proxy process has used so far (`/proc/PID/stat`).
#[derive(Clone, Copy, Default, Debug)]
pub struct Usage {
    pub user: Duration,
    pub sys: Duration,
    /// Minor page faults: fresh pages the kernel handed out (and zeroed).
    pub faults: u64,
}

impl Usage {
    /// What was used between `earlier` and `self`, per one of `n` requests.
    fn per(self, earlier: Usage, n: u64) -> PerRequest {
        let n = n.max(1);
        PerRequest {
            user: self.user.saturating_sub(earlier.user) / n as u32,
            sys: self.sys.saturating_sub(earlier.sys) / n as u32,
            faults: self.faults.saturating_sub(earlier.faults) as f64 / n as f64,
        }
    }
}

/// Proxy cost per request (or per watch event).
#[derive(Clone, Copy, Default, Debug)]
pub struct PerRequest {
    pub user: Duration,
    pub sys: Duration,
    pub faults: f64,
}

impl PerRequest {
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }
}

/// The configuration a run measures.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Config {
    /// A JSON client: cborgate passes everything through.
    Passthrough,
    /// A CBOR client: cborgate transcodes.
    Transcoding,
}

impl Config {
    pub fn name(self) -> &'static str {
        match self {
            Config::Passthrough => "passthrough",
            Config::Transcoding => "transcoding",
        }
    }
}

/// One measured (scenario, configuration) pair, best of the rounds.
#[derive(Clone)]
pub struct Measured {
    pub scenario: &'static str,
    pub config: Config,
    pub run: Run,
    /// Proxy CPU and page faults per request (or per event, for the watch).
    pub per_request: PerRequest,
    pub peak_rss_kib: u64,
    /// For the watch: events per second.
    pub events_per_second: Option<f64>,
}

/// A progress bar on stderr: the fraction of the planned time done.
struct Progress {
    started: Instant,
    planned: Duration,
}

impl Progress {
    fn show(&self, what: &str) {
        let frac = (self.started.elapsed().as_secs_f64() / self.planned.as_secs_f64()).min(1.0);
        let width = 30;
        let filled = (frac * width as f64) as usize;
        eprint!(
            "\r[{}{}] {:3.0}% {:<46}",
            "#".repeat(filled),
            "-".repeat(width - filled),
            frac * 100.0,
            what
        );
        let _ = std::io::stderr().flush();
    }
}

struct Options {
    seconds: f64,
    rounds: usize,
    out: PathBuf,
    cborgate: PathBuf,
    /// Run only the scenarios whose name contains this (for profiling); no report.
    only: Option<String>,
}

fn options() -> Options {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut o = Options {
        seconds: 4.0,
        rounds: 3,
        out: root.clone(),
        cborgate: root.join("../target/release/cborgate"),
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => {
                o.seconds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--seconds N")
            }
            "--rounds" => {
                o.rounds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--rounds N")
            }
            "--quick" => {
                o.seconds = 1.0;
                o.rounds = 1;
            }
            "--out" => o.out = PathBuf::from(args.next().expect("--out DIR")),
            "--only" => o.only = Some(args.next().expect("--only SCENARIO")),
            "--cborgate" => o.cborgate = PathBuf::from(args.next().expect("--cborgate PATH")),
            _ => {
                eprintln!("usage: cborgate-load [--seconds N] [--rounds N] [--quick] [--out DIR] [--cborgate PATH] [--only SCENARIO]");
                std::process::exit(2);
            }
        }
    }
    o
}

/// The pod closest to 7,000 bytes among the generator's first 64.
fn seven_kb_pod() -> Vec<u8> {
    let mut best: Option<Vec<u8>> = None;
    for i in 0..64 {
        let mut rng = gen::Rng::new(0x7000 + i);
        let mut w = gen::W::new();
        gen::pod(&mut w, &mut rng, i, true);
        let d = |b: &Vec<u8>| (b.len() as i64 - 7000).abs();
        if best.as_ref().is_none_or(|b| d(&w.out) < d(b)) {
            best = Some(w.out);
        }
    }
    best.unwrap()
}

fn main() {
    let o = options();
    let exe = o.cborgate.clone();
    assert!(
        exe.exists(),
        "{} does not exist: run bench/load.sh, which builds it",
        exe.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let pod = seven_kb_pod();
    let list = gen::pod_list(700);
    let events: Vec<Vec<u8>> = gen::watch_stream(10_000)
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    let event_bytes: usize = events.iter().map(Vec::len).sum();
    let post_cbor = cborgate::codec::json_to_cbor(&pod, Default::default()).expect("pod to CBOR");
    let bodies = Arc::new(upstream::Bodies {
        pod: pod.clone(),
        list: list.clone(),
        events,
    });
    let upstream = rt.block_on(upstream::start(bodies));

    let get = |config: Config| Request {
        method: "GET",
        path: "/api/v1/namespaces/load/pods/pod-0".into(),
        headers: vec![("Accept", accept(config).into())],
        body: None,
        expect_status: 200,
        expect_content_type: content_type(config),
    };
    let list_req = |config: Config| Request {
        path: "/api/v1/namespaces/load/pods".into(),
        ..get(config)
    };
    // As client-go sends it: the transcoded LIST is then gzipped (Go's `BestSpeed`, as
    // kube-apiserver), so this row shows what compression costs next to `LIST 700 pods`.
    let list_gzip = |config: Config| {
        let mut r = list_req(config);
        r.headers.push(("Accept-Encoding", "gzip".into()));
        r
    };
    let post = |config: Config| Request {
        method: "POST",
        path: "/api/v1/namespaces/load/pods".into(),
        headers: vec![
            ("Accept", accept(config).into()),
            ("Content-Type", content_type(config).into()),
        ],
        body: Some(match config {
            Config::Passthrough => pod.clone(),
            Config::Transcoding => post_cbor.clone(),
        }),
        expect_status: 201,
        expect_content_type: content_type(config),
    };
    type MakeRequest<'a> = Box<dyn Fn(Config) -> Request + 'a>;
    let wanted = |name: &str| o.only.as_ref().is_none_or(|w| name.contains(w.as_str()));
    let mut scenarios: Vec<(&'static str, usize, MakeRequest)> = vec![
        ("GET pod (7 KB)", 4, Box::new(get)),
        ("LIST 700 pods", 2, Box::new(list_req)),
        ("LIST 700 pods, gzip", 2, Box::new(list_gzip)),
        ("POST pod", 4, Box::new(post)),
    ];
    scenarios.retain(|(name, _, _)| wanted(name));
    let configs = [Config::Passthrough, Config::Transcoding];
    let per_run = Duration::from_secs_f64(o.seconds);
    let watch_rounds = if wanted("watch") {
        o.rounds.max(1) * 2
    } else {
        0
    };
    let planned = per_run * (scenarios.len() * configs.len() * o.rounds) as u32
        + Duration::from_secs(2 * watch_rounds as u64 + 15);
    let progress = Progress {
        started: Instant::now(),
        planned,
    };
    let mut results: Vec<Measured> = Vec::new();
    let mut errors = Vec::new();

    for (name, conns, make) in &scenarios {
        let mut best: Vec<Option<Measured>> = vec![None, None];
        for round in 0..o.rounds {
            for (ci, &config) in configs.iter().enumerate() {
                progress.show(&format!(
                    "{name}, {} ({}/{})",
                    config.name(),
                    round + 1,
                    o.rounds
                ));
                let proxy = Proxy::start(&exe, upstream);
                let req = Arc::new(make(config));
                // Warm up: connections, buffers.
                rt.block_on(client::load(
                    proxy.addr,
                    req.clone(),
                    *conns,
                    Duration::from_millis(300),
                    Arc::new(AtomicU64::new(0)),
                ));
                let use0 = proxy.usage();
                let done = Arc::new(AtomicU64::new(0));
                let run = {
                    let fut = client::load(proxy.addr, req, *conns, per_run, done.clone());
                    rt.block_on(async {
                        let h = tokio::spawn(fut);
                        while !h.is_finished() {
                            progress.show(&format!(
                                "{name}, {} ({}/{}) {} req",
                                config.name(),
                                round + 1,
                                o.rounds,
                                done.load(Ordering::Relaxed)
                            ));
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        h.await.unwrap()
                    })
                };
                let used = proxy.usage();
                if run.errors > 0 {
                    errors.push(format!(
                        "{name} {}: {} errors, first: {}",
                        config.name(),
                        run.errors,
                        run.first_error.clone().unwrap_or_default()
                    ));
                }
                let m = Measured {
                    scenario: name,
                    config,
                    per_request: used.per(use0, run.requests),
                    peak_rss_kib: proxy.status_kib("VmHWM:"),
                    run,
                    events_per_second: None,
                };
                let better = best[ci]
                    .as_ref()
                    .is_none_or(|b| m.run.per_second() > b.run.per_second());
                if better {
                    best[ci] = Some(m);
                }
            }
        }
        results.extend(best.into_iter().flatten());
    }

    // The watch: 10,000 events of about 8 KB, one watch at a time.
    let mut best_watch: Vec<Option<Measured>> = vec![None, None];
    for round in 0..watch_rounds {
        for (ci, &config) in configs.iter().enumerate() {
            progress.show(&format!(
                "watch 10,000 events, {} ({}/{watch_rounds})",
                config.name(),
                round + 1
            ));
            let proxy = Proxy::start(&exe, upstream);
            let use0 = proxy.usage();
            let (body, took) = rt
                .block_on(client::watch(proxy.addr, accept(config)))
                .expect("watch");
            let used = proxy.usage();
            let events = count_events(&body, config);
            if events != 10_000 {
                errors.push(format!(
                    "watch {}: {events} events, want 10000",
                    config.name()
                ));
            }
            let run = Run {
                requests: events,
                elapsed: took,
                body_bytes: body.len() as u64,
                ..Run::default()
            };
            let m = Measured {
                scenario: "watch, 10,000 events",
                config,
                per_request: used.per(use0, events),
                peak_rss_kib: proxy.status_kib("VmHWM:"),
                events_per_second: Some(events as f64 / took.as_secs_f64()),
                run,
            };
            if best_watch[ci]
                .as_ref()
                .is_none_or(|b| m.events_per_second > b.events_per_second)
            {
                best_watch[ci] = Some(m);
            }
        }
    }
    results.extend(best_watch.into_iter().flatten());

    // Idle watches: RSS per watch, 1,000 of them, after 100 to warm up.
    let mut idle = Vec::new();
    for config in configs.into_iter().filter(|_| wanted("idle")) {
        progress.show(&format!("1,000 idle watches, {}", config.name()));
        let proxy = Proxy::start(&exe, upstream);
        let warm = rt
            .block_on(client::idle_watches(proxy.addr, 100, accept(config)))
            .expect("idle watches");
        std::thread::sleep(Duration::from_millis(300));
        let before = proxy.status_kib("VmRSS:");
        let held = rt
            .block_on(client::idle_watches(proxy.addr, 1000, accept(config)))
            .expect("idle watches");
        std::thread::sleep(Duration::from_millis(500));
        let after = proxy.status_kib("VmRSS:");
        idle.push((config, after.saturating_sub(before) as f64 / 1000.0));
        drop(held);
        drop(warm);
    }
    // Idle watches over HTTP/2, as client-go holds them: streams of a few client
    // connections (250 each, as kube-apiserver allows), and an HTTP/2 upstream.
    let idle_h2 = wanted("idle").then(|| {
        progress.show("1,000 idle watches over HTTP/2");
        let pki = h2idle::Pki::make();
        let b = Proxy::start_with(
            &exe,
            &format!("http://{upstream}"),
            "native",
            &pki.serving(),
        );
        let mut flags = pki.serving();
        flags.extend(["--upstream-ca".to_string(), pki.path("ca.pem")]);
        let url = format!("https://localhost:{}", b.addr.port());
        let a = Proxy::start_with(&exe, &url, "legacy", &flags);
        let open = |n: usize| {
            rt.block_on(async {
                let mut held = Vec::new();
                for _ in 0..n.div_ceil(250) {
                    let n = n.min(250);
                    held.push(
                        h2idle::idle_watches(a.addr, &pki.ca, n, accept(Config::Transcoding))
                            .await
                            .expect("idle watches over HTTP/2"),
                    );
                }
                held
            })
        };
        let warm = open(100);
        std::thread::sleep(Duration::from_millis(300));
        let before = a.status_kib("VmRSS:");
        let held = open(1000);
        std::thread::sleep(Duration::from_millis(500));
        let after = a.status_kib("VmRSS:");
        let upstream_connections =
            cborgate_standin::client::connections_to(a.child.id(), b.addr.port());
        drop((held, warm));
        report::IdleH2 {
            kib_per_watch: after.saturating_sub(before) as f64 / 1000.0,
            upstream_connections,
            watches: 1100,
        }
    });
    progress.show("done");
    eprintln!();

    if let Some(only) = &o.only {
        for m in &results {
            println!(
                "{} {}: {:.0}/s, p50 {:?}, p99 {:?}, proxy CPU {:?} per request",
                m.scenario,
                m.config.name(),
                m.events_per_second.unwrap_or_else(|| m.run.per_second()),
                m.run.percentile(0.5),
                m.run.percentile(0.99),
                m.per_request.cpu()
            );
        }
        for (config, kib) in &idle {
            println!(
                "1,000 idle watches over HTTP/1.1, {}: {kib:.1} KiB each",
                config.name()
            );
        }
        if let Some(h2) = &idle_h2 {
            println!(
                "1,000 idle watches over HTTP/2: {:.1} KiB each, {} upstream connections for {}",
                h2.kib_per_watch, h2.upstream_connections, h2.watches
            );
        }
        eprintln!("--only {only}: no report written");
        return;
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty();
    let report = report::Report {
        date: utc_now(),
        commit: if dirty {
            format!("{commit} (with uncommitted changes)")
        } else {
            commit
        },
        seconds: o.seconds,
        rounds: o.rounds,
        pod_bytes: pod.len(),
        list_bytes: list.len(),
        event_bytes: event_bytes / 10_000,
        results,
        idle,
        idle_h2,
        list_codec_time: codec_time(&list),
        errors,
    };
    std::fs::create_dir_all(&o.out).expect("create the output directory");
    let md = o.out.join("RESULTS.md");
    let png = o.out.join("results.png");
    std::fs::write(&md, report.markdown()).expect("write RESULTS.md");
    report.chart(&png).expect("write the chart");
    print!("{}", report.summary());
    println!("wrote {} and {}", md.display(), png.display());
    if !report.errors.is_empty() {
        std::process::exit(1);
    }
}

/// The codec's own time for `json` (JSON → CBOR, the proxy's response settings), best
/// of five in this process: what `cargo bench --bench codec` measures for the same body.
fn codec_time(json: &[u8]) -> Duration {
    use cborgate::codec::{JsonToCbor, JsonToCborOptions};
    let mut out = Vec::with_capacity(json.len());
    (0..5)
        .map(|_| {
            let mut t = JsonToCbor::new(JsonToCborOptions {
                dedupe_keys: false,
                ..Default::default()
            });
            out.clear();
            let started = Instant::now();
            t.feed(json, &mut out).expect("the LIST body transcodes");
            t.finish(&mut out).expect("the LIST body transcodes");
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn accept(config: Config) -> &'static str {
    content_type(config)
}

fn content_type(config: Config) -> &'static str {
    match config {
        Config::Passthrough => "application/json",
        Config::Transcoding => "application/cbor",
    }
}

fn count_events(body: &[u8], config: Config) -> u64 {
    match config {
        Config::Passthrough => body.iter().filter(|&&b| b == b'\n').count() as u64,
        Config::Transcoding => {
            use cborgate::codec::{CborToJson, CborToJsonOptions};
            let mut dec = CborToJson::new(CborToJsonOptions {
                sequence: true,
                dedupe_keys: false,
                ..Default::default()
            });
            let mut out = Vec::new();
            for piece in body.chunks(1 << 20) {
                if dec.feed(piece, &mut out).is_err() {
                    return 0;
                }
                out.clear();
            }
            if dec.finish(&mut out).is_err() {
                return 0;
            }
            dec.documents()
        }
    }
}

fn git(args: &[&str]) -> String {
    Command::new("git")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// `YYYY-MM-DD HH:MM UTC`, with the codec's own calendar code.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut out = Vec::new();
    cborgate::codec::format_unix_time(secs, &mut out);
    // RFC 3339 `2026-11-21T16:00:00Z` → `2026-11-21 16:00 UTC`
    let s = String::from_utf8_lossy(&out).into_owned();
    match (s.get(0..10), s.get(11..16)) {
        (Some(d), Some(t)) => format!("{d} {t} UTC"),
        _ => s,
    }
}
