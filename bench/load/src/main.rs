//! The end-to-end load harness. One command:
//!
//! ```sh
//! bench/load.sh
//! ```
//!
//! builds the release `cborgate` and this harness, then the harness starts a static-body
//! upstream on loopback and, for each scenario, takes turns between its contestants:
//! haproxy and nginx passing through (the anchors, when installed: `procs.rs`), pingora's
//! own proxy with empty callbacks (`pingora-floor`, the floor under cborgate), and a
//! fresh `cborgate serve --mode legacy` driven by a JSON client (passthrough: nothing
//! transcoded) and by a CBOR client (transcoding). Every turn gets the same load
//! generator (one thread, keep-alive connections) and the same upstream; the rounds go
//! round-robin over the contestants, and each figure is the median over the rounds with
//! its range. It reports requests/s, p50/p99, proxy CPU per request (from `/proc/PID/stat`,
//! the process and its children), futex calls per request (`perf stat` attached for the
//! turn; `n/a` without perf), context switches per request (every thread's, from
//! `/proc/PID/task/*/status`), page faults and peak RSS, checks the targets, and
//! rewrites `bench/RESULTS.md` and `bench/results.png`. The TLS scenarios (`tls.rs`): a
//! new TLS connection per GET to haproxy, pingora's floor and cborgate serving an
//! RSA-2048 certificate, without and with session resumption offered; their costs are
//! per connection. Options: `--seconds N` per turn (default 5), `--rounds N` (default
//! 3), `--quick` (1 s, 1 round), `--smoke` (a fraction of a second per turn, small
//! watches, 20 TLS connections: for the harness's own test), `--no-anchors`, `--out
//! DIR`, `--only SCENARIO` (print, write nothing; `--only TLS` runs both TLS
//! scenarios), `--tls-connections N` (default 200), `--cborgate PATH` (the binary under
//! test; `bench/load.sh` passes it), `--rate N` (the keep-alive scenarios' load paced to N
//! requests per second in all, the same for every contestant, instead of as fast as each
//! answers: CPU per request at one offered load, which is what an operator pays).

#[path = "../../gen.rs"]
#[allow(dead_code)]
mod gen;

mod client;
mod h2idle;
mod pki;
mod procs;
mod report;
mod tls;
mod upstream;

use client::{Request, Run};
use procs::{Kind, PerRequest, Proc, Usage};
use std::cell::RefCell;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a cborgate client speaks.
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

/// Who serves a turn: an anchor passing JSON through, or cborgate with a JSON or a CBOR
/// client.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Contestant {
    Anchor(Kind),
    Cborgate(Config),
}

pub const HAPROXY: Contestant = Contestant::Anchor(Kind::Haproxy);
pub const NGINX: Contestant = Contestant::Anchor(Kind::Nginx);
pub const PINGORA: Contestant = Contestant::Anchor(Kind::Pingora);
pub const PASSTHROUGH: Contestant = Contestant::Cborgate(Config::Passthrough);
pub const TRANSCODED: Contestant = Contestant::Cborgate(Config::Transcoding);

impl Contestant {
    pub fn name(self) -> &'static str {
        match self {
            HAPROXY => "haproxy, passthrough",
            NGINX => "nginx, passthrough",
            PINGORA => "pingora, empty callbacks",
            PASSTHROUGH => "cborgate, JSON passthrough",
            TRANSCODED => "cborgate, CBOR transcoded",
            Contestant::Anchor(Kind::Cborgate) => "cborgate",
        }
    }

    /// For the chart's axis (under the legend's full names).
    pub fn short(self) -> &'static str {
        match self {
            HAPROXY => "haproxy",
            NGINX => "nginx",
            PINGORA => "pingora",
            PASSTHROUGH => "JSON",
            TRANSCODED => "CBOR",
            Contestant::Anchor(Kind::Cborgate) => "cborgate",
        }
    }

    /// What its client speaks (the anchors only pass JSON through).
    pub fn config(self) -> Config {
        match self {
            Contestant::Anchor(_) => Config::Passthrough,
            Contestant::Cborgate(c) => c,
        }
    }
}

/// What a scenario's costs are counted per.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Per {
    Request,
    /// The watch: rates are events/s, costs per event.
    Event,
    /// The TLS scenarios: rates are connections/s, costs per connection (its handshake
    /// and its one GET).
    Connection,
}

impl Per {
    pub fn noun(self) -> &'static str {
        match self {
            Per::Request => "request",
            Per::Event => "event",
            Per::Connection => "connection",
        }
    }

    pub fn rate_unit(self) -> &'static str {
        match self {
            Per::Request => "requests/s",
            Per::Event => "events/s",
            Per::Connection => "connections/s",
        }
    }
}

/// One turn's figures.
#[derive(Clone, Copy, Default, Debug)]
pub struct Sample {
    /// Requests per second (the watch: events per second; TLS: connections per second).
    pub rate: f64,
    /// Proxy CPU, page faults, context switches and futex calls per request (the watch:
    /// per event; TLS: per connection).
    pub per_request: PerRequest,
    pub p50: Duration,
    pub p99: Duration,
    pub peak_rss_kib: u64,
    pub errors: u64,
    /// TLS: the share of connections whose handshake resumed a session.
    pub resumed: f64,
}

/// One (scenario, contestant) pair: a sample per round.
#[derive(Clone)]
pub struct Measured {
    pub scenario: &'static str,
    pub contestant: Contestant,
    pub samples: Vec<Sample>,
    pub per: Per,
}

impl Measured {
    /// A row with no sample yet.
    pub fn new(scenario: &'static str, contestant: Contestant, per: Per) -> Measured {
        Measured {
            scenario,
            contestant,
            samples: Vec::new(),
            per,
        }
    }

    /// The median over the rounds of `f`.
    pub fn median(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        median(self.samples.iter().map(f).collect())
    }

    /// The lowest and highest over the rounds of `f`.
    pub fn range(&self, f: impl Fn(&Sample) -> f64) -> (f64, f64) {
        self.samples
            .iter()
            .map(f)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            })
    }

    pub fn rate(&self) -> f64 {
        self.median(|s| s.rate)
    }

    /// Median proxy CPU per request, µs.
    pub fn cpu_us(&self) -> f64 {
        self.median(cpu_us)
    }

    /// Median futex calls per request (NaN when not counted).
    pub fn futexes(&self) -> f64 {
        self.median(|s| s.per_request.futexes)
    }

    /// Median context switches per request.
    pub fn switches(&self) -> f64 {
        self.median(|s| s.per_request.switches())
    }

    pub fn errors(&self) -> u64 {
        self.samples.iter().map(|s| s.errors).sum()
    }
}

/// The median of `v` (the mean of the middle two for an even count; NaN when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if !n.is_multiple_of(2) => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Proxy CPU per request of one sample, µs.
pub fn cpu_us(s: &Sample) -> f64 {
    s.per_request.cpu().as_secs_f64() * 1e6
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
            "\r[{}{}] {:3.0}% {:<56}",
            "#".repeat(filled),
            "-".repeat(width - filled),
            frac * 100.0,
            what
        );
        let _ = std::io::stderr().flush();
    }

    /// A line of its own, above the bar.
    fn say(&self, line: &str) {
        eprintln!("\r{line:<100}");
    }
}

struct Options {
    seconds: f64,
    rounds: usize,
    out: PathBuf,
    cborgate: PathBuf,
    /// Run only the scenarios whose name contains this (for profiling); no report.
    only: Option<String>,
    /// Run neither haproxy nor nginx, as if neither were installed.
    no_anchors: bool,
    /// Let the proxies share CPUs with the harness (the split is the default).
    shared_cores: bool,
    /// Events in the watch (10,000; fewer for `--smoke`).
    watch_events: usize,
    /// Idle watches held open (1,000, after 100 to warm up; fewer for `--smoke`).
    idle_watches: usize,
    /// Repetitions of the in-process codec timings (best kept).
    codec_reps: usize,
    /// New TLS connections per turn of the TLS scenarios (200; fewer for `--smoke`).
    tls_connections: usize,
    /// `--rate N`: the load paced to N requests per second in all.
    rate: Option<f64>,
}

fn options() -> Options {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // `bench/`, not `bench/load/..`, in what the run prints.
    let root = root.canonicalize().unwrap_or(root);
    let mut o = Options {
        seconds: 5.0,
        rounds: 3,
        out: root.clone(),
        cborgate: root.join("../target/release/cborgate"),
        only: None,
        no_anchors: false,
        shared_cores: false,
        watch_events: 10_000,
        idle_watches: 1000,
        codec_reps: 10,
        tls_connections: TLS_CONNECTIONS,
        rate: None,
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
            "--smoke" => {
                o.seconds = 0.2;
                o.rounds = 1;
                o.watch_events = 300;
                o.idle_watches = 20;
                o.codec_reps = 1;
                o.tls_connections = 20;
            }
            "--tls-connections" => {
                o.tls_connections = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--tls-connections N")
            }
            "--rate" => {
                o.rate = Some(
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .filter(|r: &f64| r.is_finite() && *r > 0.0)
                        .expect("--rate REQUESTS_PER_SECOND (above 0)"),
                )
            }
            "--no-anchors" => o.no_anchors = true,
            "--shared-cores" => o.shared_cores = true,
            "--out" => o.out = PathBuf::from(args.next().expect("--out DIR")),
            "--only" => o.only = Some(args.next().expect("--only SCENARIO")),
            "--cborgate" => o.cborgate = PathBuf::from(args.next().expect("--cborgate PATH")),
            _ => {
                eprintln!(
                    "usage: cborgate-load [--seconds N] [--rounds N] [--quick] [--smoke] \
                     [--no-anchors] [--shared-cores] [--out DIR] [--cborgate PATH] [--only SCENARIO] \
                     [--tls-connections N] [--rate REQUESTS_PER_SECOND]"
                );
                std::process::exit(2);
            }
        }
    }
    o.rounds = o.rounds.max(1);
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

/// The scenarios' names, as the report looks them up.
pub const GET_POD: &str = "GET pod (7 KB)";
pub const POST_POD: &str = "POST pod";
/// Where the POST goes: its route picks the request body's field schema.
const POST_PATH: &str = "/api/v1/namespaces/load/pods";
pub const LIST: &str = "LIST 700 pods";
pub const LIST_GZIP: &str = "LIST 700 pods, gzip";
pub const WATCH: &str = "watch";
/// The TLS scenarios (`--only TLS` runs all three): a new connection per GET, with an
/// RSA-2048 serving key (as kubeadm makes it), without and with session resumption
/// offered, and with an ECDSA P-256 serving key (kubeadm's `encryptionAlgorithm:
/// ECDSA-P256`).
pub const TLS_NEW: &str = "TLS new connections, full handshake";
pub const TLS_RESUMED: &str = "TLS new connections, resumption offered";
pub const TLS_ECDSA: &str = "TLS new connections, full handshake, ECDSA P-256 key";

/// New TLS connections per turn, and before it to warm up (and, with resumption, to
/// fill the client's session cache); how many the client makes at a time.
const TLS_CONNECTIONS: usize = 200;
pub const TLS_WARM: usize = 20;
pub const TLS_PARALLEL: usize = 4;

/// Connections of the load generator for small requests (as `wrk -c16`) and for the
/// 5.8 MB LIST (where more would only queue).
const SMALL_CONNS: usize = 16;
const LIST_CONNS: usize = 4;

/// A scenario: the request each contestant's client sends, over `conns` connections,
/// and who takes turns.
struct Scenario<'a> {
    name: &'static str,
    conns: usize,
    make: Box<dyn Fn(Config) -> Request + 'a>,
    contestants: Vec<Contestant>,
}

/// What every turn shares.
struct Bench {
    exe: PathBuf,
    upstream: SocketAddr,
    /// The load generator's one thread (a current-thread runtime: every connection's
    /// task runs on the thread that drives it).
    client: tokio::runtime::Runtime,
    anchors: Vec<(Kind, PathBuf)>,
    /// Where the measured proxies run.
    cpus: procs::Cpus,
    per_run: Duration,
    /// Requests per second in all, paced (`--rate`); none: as fast as each proxy answers.
    rate: Option<f64>,
    /// Whether `perf` counts futex calls here (checked once at the start).
    perf: bool,
    /// What went wrong counting futex calls in a turn (each said once).
    perf_problems: RefCell<Vec<String>>,
}

/// The counters around a piece of work: the proxy's `/proc` usage before and after,
/// and its futex calls meanwhile (`None`: not counted).
struct Metered {
    before: Usage,
    after: Usage,
    futexes: Option<u64>,
}

impl Metered {
    fn per(&self, n: u64) -> PerRequest {
        self.after.per(self.before, n, self.futexes)
    }
}

impl Bench {
    fn cborgate(&self) -> Proc {
        Proc::cborgate(
            &self.exe,
            &format!("http://{}", self.upstream),
            "legacy",
            &[],
            self.cpus,
        )
    }

    /// A fresh proxy for `c`, serving TLS with `tls`'s certificate when given.
    fn start(&self, c: Contestant, tls: Option<&pki::Pki>) -> Result<Proc, String> {
        match c {
            Contestant::Cborgate(_) => Ok(Proc::cborgate(
                &self.exe,
                &format!("http://{}", self.upstream),
                "legacy",
                &tls.map_or(Vec::new(), pki::Pki::serving),
                self.cpus,
            )),
            Contestant::Anchor(kind) => {
                let exe = self
                    .anchors
                    .iter()
                    .find(|(k, _)| *k == kind)
                    .map(|(_, e)| e)
                    .ok_or("not installed")?;
                Proc::anchor(kind, exe, self.upstream, tls, self.cpus)
            }
        }
    }

    /// Run `work` with `proxy`'s counters around it. perf attaches (disabled) first, then
    /// is enabled just before the `/proc` counters are read, and disabled just after
    /// they are read again, so both cover the same stretch; perf's own start is outside.
    fn metered<T>(&self, proxy: &Proc, work: impl FnOnce() -> T) -> (T, Metered) {
        let problem = |e: String| {
            let mut p = self.perf_problems.borrow_mut();
            if !p.contains(&e) {
                p.push(e);
            }
        };
        let mut futexes = if self.perf {
            proxy
                .count_futexes()
                .and_then(|mut f| f.enable().map(|()| f))
                .map_err(problem)
                .ok()
        } else {
            None
        };
        let before = proxy.usage();
        let out = work();
        let after = proxy.usage();
        let futexes = futexes.take().and_then(|f| f.stop().map_err(problem).ok());
        (
            out,
            Metered {
                before,
                after,
                futexes,
            },
        )
    }

    /// One turn of the TLS scenarios on a fresh proxy serving `pki`'s certificate:
    /// `TLS_WARM` connections to warm up, then `n` new connections, each one GET of the
    /// pod, with or without a session cache (`resume`).
    fn tls_turn(&self, c: Contestant, pki: &pki::Pki, resume: bool, n: usize) -> Outcome {
        let proxy = self.start(c, Some(pki))?;
        let cfg = tls::client(&pki.ca, resume)?;
        let path = "/api/v1/namespaces/load/pods/pod-0";
        let warm = tls::connections(proxy.addr, &cfg, path, TLS_WARM, TLS_PARALLEL);
        if warm.requests == 0 {
            return Err(format!(
                "no TLS connection succeeded: {}",
                warm.first_error.unwrap_or_default()
            ));
        }
        let (run, m) = self.metered(&proxy, || {
            tls::connections(proxy.addr, &cfg, path, n, TLS_PARALLEL)
        });
        Ok((sample(&run, m.per(run.requests), &proxy), run.first_error))
    }

    /// One timed turn on a fresh proxy: a 300 ms warm-up (connections, buffers), then
    /// `per_run` of load, bounded (the turn gives up 30 s after its time). The sample and,
    /// when requests failed, the first error.
    fn turn(
        &self,
        c: Contestant,
        req: Arc<Request>,
        conns: usize,
        progress: &dyn Fn(u64),
    ) -> Outcome {
        let proxy = self.start(c, None)?;
        let warm = client::load(
            proxy.addr,
            req.clone(),
            conns,
            Duration::from_millis(300),
            self.rate,
            Arc::new(AtomicU64::new(0)),
        );
        self.client
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), warm).await })
            .map_err(|_| "the warm-up did not finish within 30 s".to_string())?;
        let done = Arc::new(AtomicU64::new(0));
        let load = client::load(
            proxy.addr,
            req,
            conns,
            self.per_run,
            self.rate,
            done.clone(),
        );
        let deadline = Instant::now() + self.per_run + Duration::from_secs(30);
        let (run, m) = self.metered(&proxy, || {
            self.client.block_on(async {
                let h = tokio::spawn(load);
                while !h.is_finished() {
                    if Instant::now() > deadline {
                        h.abort();
                        return None;
                    }
                    progress(done.load(Ordering::Relaxed));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                h.await.ok()
            })
        });
        let run = run.ok_or("the turn did not finish within 30 s of its time")?;
        Ok((sample(&run, m.per(run.requests), &proxy), run.first_error))
    }
}

/// A turn's figures from the client's run and the proxy's counters.
fn sample(run: &Run, per_request: PerRequest, proxy: &Proc) -> Sample {
    Sample {
        rate: run.per_second(),
        per_request,
        p50: run.percentile(0.5),
        p99: run.percentile(0.99),
        peak_rss_kib: proxy.status_kib("VmHWM:"),
        errors: run.errors,
        resumed: run.resumed as f64 / run.requests.max(1) as f64,
    }
}

/// Where a turn's outcome goes.
struct Book<'a> {
    errors: &'a mut Vec<String>,
    skipped: &'a mut Vec<String>,
    /// Anchors that failed to start: not run again.
    failed: &'a mut Vec<Contestant>,
    progress: &'a Progress,
}

/// A turn's outcome: its sample and the first failed request's error, or why it has none.
type Outcome = Result<(Sample, Option<String>), String>;

impl Book<'_> {
    /// `rounds` rounds over `measured`'s contestants, round-robin, each turn by
    /// `turn(contestant, round)`, leaving out the anchors that could not start.
    fn rounds(
        &mut self,
        measured: &mut [Measured],
        rounds: usize,
        mut turn: impl FnMut(Contestant, usize) -> Outcome,
    ) {
        for round in 0..rounds {
            for m in measured.iter_mut() {
                if !self.failed.contains(&m.contestant) {
                    let outcome = turn(m.contestant, round);
                    self.record(outcome, m);
                }
            }
        }
    }

    /// Keep a turn's sample in `m` (noting its failed requests), or note why there is
    /// none: an anchor that could not start is left out from then on.
    fn record(&mut self, outcome: Outcome, m: &mut Measured) {
        let c = m.contestant;
        match outcome {
            Ok((sample, first_error)) => {
                if let Some(e) = first_error {
                    self.errors.push(format!(
                        "{} {}: {} errors, first: {e}",
                        m.scenario,
                        c.name(),
                        sample.errors
                    ));
                }
                m.samples.push(sample);
            }
            Err(e) if matches!(c, Contestant::Anchor(_)) => {
                let line = format!("anchor {} skipped from then on: {e}", c.short());
                self.progress.say(&line);
                self.skipped.push(line);
                self.failed.push(c);
            }
            Err(e) => self
                .errors
                .push(format!("{} {}: {e}", m.scenario, c.name())),
        }
    }
}

/// The load average from `/proc/loadavg` (1, 5 and 15 minutes).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let o = options();
    let exe = o.cborgate.clone();
    assert!(
        exe.exists(),
        "{} does not exist: run bench/load.sh, which builds it",
        exe.display()
    );
    // Before any thread starts: every thread of the harness inherits its CPU.
    let (cpus, placement) = if o.shared_cores {
        (
            procs::Cpus::shared(),
            "proxies and harness on shared CPUs (--shared-cores)".to_string(),
        )
    } else {
        procs::Cpus::split().unwrap_or_else(|why| (procs::Cpus::shared(), why))
    };
    eprintln!("placement: {placement}");
    let load_before = loadavg();
    // The upstream, the watches and the idle watches run here; the timed load runs on
    // `Bench::client`'s one thread.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let pod = seven_kb_pod();
    let list = gen::pod_list(700);
    let events: Vec<Vec<u8>> = gen::watch_stream(o.watch_events)
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

    // The anchors: what is installed, and one line for each that is not run.
    let mut anchors = Vec::new();
    let mut anchor_versions = Vec::new();
    let mut skipped = Vec::new();
    for kind in [Kind::Haproxy, Kind::Nginx, Kind::Pingora] {
        let why = if o.no_anchors {
            Some("--no-anchors".to_string())
        } else if let Some(path) = procs::find(kind) {
            anchor_versions.push(format!(
                "{} ({})",
                procs::version(kind, &path),
                path.display()
            ));
            anchors.push((kind, path));
            None
        } else if kind == Kind::Pingora {
            Some("pingora-floor is not beside this harness (bench/load.sh builds both)".into())
        } else {
            Some(
                "not installed (neither on PATH nor in /usr/sbin; bench/load.sh installs it \
                 from Debian packages when it runs as root or with passwordless sudo)"
                    .to_string(),
            )
        };
        if let Some(why) = why {
            let line = format!("anchor {} skipped: {why}", kind.name());
            eprintln!("{line}");
            skipped.push(line);
        }
    }

    // Futex calls: counted by perf, or "n/a" with one line saying why.
    let perf = match procs::futexes_countable() {
        Ok(()) => true,
        Err(why) => {
            let line = format!("futex calls not counted (n/a): {why}");
            eprintln!("{line}");
            skipped.push(line);
            false
        }
    };

    let bench = Bench {
        exe: exe.clone(),
        upstream,
        client: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        anchors,
        cpus,
        per_run: Duration::from_secs_f64(o.seconds),
        rate: o.rate,
        perf,
        perf_problems: RefCell::new(Vec::new()),
    };

    let get = |config: Config| Request {
        method: "GET",
        path: "/api/v1/namespaces/load/pods/pod-0".into(),
        headers: vec![("Accept", accept(config).into())],
        body: None,
        expect_status: 200,
        expect_content_type: content_type(config),
    };
    let list_req = move |config: Config| Request {
        path: "/api/v1/namespaces/load/pods".into(),
        ..get(config)
    };
    // As client-go sends it: the transcoded LIST is then gzipped (Go's `BestSpeed`, as
    // kube-apiserver), so this row shows what compression costs next to `LIST 700 pods`.
    let list_gzip = move |config: Config| {
        let mut r = list_req(config);
        r.headers.push(("Accept-Encoding", "gzip".into()));
        r
    };
    let post = |config: Config| Request {
        method: "POST",
        path: POST_PATH.into(),
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
    let wanted = |name: &str| o.only.as_ref().is_none_or(|w| name.contains(w.as_str()));
    let all = vec![HAPROXY, NGINX, PINGORA, PASSTHROUGH, TRANSCODED];
    let cborgate_only = vec![PASSTHROUGH, TRANSCODED];
    let mut scenarios = vec![
        Scenario {
            name: GET_POD,
            conns: SMALL_CONNS,
            make: Box::new(get),
            contestants: all.clone(),
        },
        Scenario {
            name: POST_POD,
            conns: SMALL_CONNS,
            make: Box::new(post),
            contestants: cborgate_only.clone(),
        },
        Scenario {
            name: LIST,
            conns: LIST_CONNS,
            make: Box::new(list_req),
            contestants: all,
        },
        Scenario {
            name: LIST_GZIP,
            conns: LIST_CONNS,
            make: Box::new(list_gzip),
            contestants: cborgate_only,
        },
    ];
    scenarios.retain(|s| wanted(s.name));
    for s in &mut scenarios {
        s.contestants.retain(|c| match c {
            Contestant::Anchor(k) => bench.anchors.iter().any(|(a, _)| a == k),
            Contestant::Cborgate(_) => true,
        });
    }
    let watch_rounds = if wanted(WATCH) { o.rounds * 2 } else { 0 };
    // The TLS scenarios: haproxy, pingora's floor and cborgate passing JSON through, each
    // serving an RSA-2048 certificate (made here; no openssl, no RSA scenarios) or an
    // ECDSA P-256 one.
    use pki::KeyKind::{EcdsaP256, Rsa2048};
    let tls_scenarios: Vec<(&'static str, bool, pki::KeyKind)> = [
        (TLS_NEW, false, Rsa2048),
        (TLS_RESUMED, true, Rsa2048),
        (TLS_ECDSA, false, EcdsaP256),
    ]
    .into_iter()
    .filter(|(name, _, _)| wanted(name))
    .collect();
    let mut pkis: Vec<(pki::KeyKind, pki::Pki)> = Vec::new();
    for kind in [Rsa2048, EcdsaP256] {
        if !tls_scenarios.iter().any(|s| s.2 == kind) {
            continue;
        }
        match pki::Pki::make_with(kind) {
            Ok(p) => pkis.push((kind, p)),
            Err(e) => {
                let line = format!("TLS scenarios with {kind:?} keys skipped: {e}");
                eprintln!("{line}");
                skipped.push(line);
            }
        }
    }
    let tls_pki = |kind: pki::KeyKind| pkis.iter().find(|(k, _)| *k == kind).map(|(_, p)| p);
    let tls_scenarios: Vec<(&'static str, bool, &pki::Pki)> = tls_scenarios
        .into_iter()
        .filter_map(|(name, resume, kind)| Some((name, resume, tls_pki(kind)?)))
        .collect();
    let tls_contestants: Vec<Contestant> = [HAPROXY, PINGORA, PASSTHROUGH]
        .into_iter()
        .filter(|c| match c {
            Contestant::Anchor(k) => bench.anchors.iter().any(|(a, _)| a == k),
            Contestant::Cborgate(_) => true,
        })
        .collect();
    let tls_turns = tls_scenarios.len() * tls_contestants.len() * o.rounds;
    let turns: usize = scenarios.iter().map(|s| s.contestants.len()).sum::<usize>() * o.rounds;
    let planned = (bench.per_run + Duration::from_millis(600)) * turns as u32
        + Duration::from_secs(2 * watch_rounds as u64 + 15)
        + Duration::from_millis(1500) * tls_turns as u32;
    let progress = Progress {
        started: Instant::now(),
        planned,
    };
    let mut results: Vec<Measured> = Vec::new();
    let mut errors = Vec::new();
    // Anchors that failed to start: not run again.
    let mut failed: Vec<Contestant> = Vec::new();

    let codec_bodies = CodecBodies {
        pod: &pod,
        list: &list,
        post_cbor: &post_cbor,
        reps: o.codec_reps,
    };
    // (scenario, seconds): the codec's own time after each of its transcoded turns.
    let mut codec_after_turns: Vec<(&str, f64)> = Vec::new();
    let mut book = Book {
        errors: &mut errors,
        skipped: &mut skipped,
        failed: &mut failed,
        progress: &progress,
    };
    for sc in &scenarios {
        let mut measured: Vec<Measured> = sc
            .contestants
            .iter()
            .map(|&c| Measured::new(sc.name, c, Per::Request))
            .collect();
        book.rounds(&mut measured, o.rounds, |c, round| {
            let what = format!("{}, {} ({}/{})", sc.name, c.name(), round + 1, o.rounds);
            progress.show(&what);
            let req = Arc::new((sc.make)(c.config()));
            let shown = |n: u64| progress.show(&format!("{what} {n} req"));
            let outcome = bench.turn(c, req, sc.conns, &shown);
            if c == TRANSCODED {
                // The codec's own time right after the turn it is compared with, on
                // the CPU the proxy had: this host's speed swings up to 2× within
                // minutes (the LIST's codec time was 5.3 and 9.5 ms a few minutes
                // apart, nothing else running), so a time taken once at the end, or on
                // the harness's busy CPU, need not match the turns' state.
                progress.show(&format!("{what}: the codec's own time"));
                if let Some(t) = bench.cpus.run_on(|| codec_bodies.time(sc.name)) {
                    codec_after_turns.push((sc.name, t.as_secs_f64()));
                }
            }
            outcome
        });
        results.extend(measured.into_iter().filter(|m| !m.samples.is_empty()));
    }

    // The TLS scenarios: a new connection per GET, round-robin over the contestants.
    for &(name, resume, pki) in &tls_scenarios {
        let mut measured: Vec<Measured> = tls_contestants
            .iter()
            .map(|&c| Measured::new(name, c, Per::Connection))
            .collect();
        book.rounds(&mut measured, o.rounds, |c, round| {
            let what = format!("{name}, {} ({}/{})", c.name(), round + 1, o.rounds);
            progress.show(&what);
            bench.tls_turn(c, pki, resume, o.tls_connections)
        });
        results.extend(measured.into_iter().filter(|m| !m.samples.is_empty()));
    }

    // The watch: one at a time, its events as fast as the proxy passes them.
    let mut watches: Vec<Measured> = [PASSTHROUGH, TRANSCODED]
        .into_iter()
        .map(|c| Measured::new(WATCH, c, Per::Event))
        .collect();
    for round in 0..watch_rounds {
        for m in &mut watches {
            let config = m.contestant.config();
            progress.show(&format!(
                "watch, {} events, {} ({}/{watch_rounds})",
                o.watch_events,
                config.name(),
                round + 1
            ));
            let proxy = bench.cborgate();
            let (got, used) = bench.metered(&proxy, || {
                rt.block_on(async {
                    let watch = client::watch(proxy.addr, accept(config));
                    tokio::time::timeout(Duration::from_secs(120), watch).await
                })
            });
            let (body, took) = match got {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    errors.push(format!("watch {}: {e}", config.name()));
                    continue;
                }
                Err(_) => {
                    errors.push(format!("watch {}: not done within 120 s", config.name()));
                    continue;
                }
            };
            let events = count_events(&body, config);
            if events != o.watch_events as u64 {
                errors.push(format!(
                    "watch {}: {events} events, want {}",
                    config.name(),
                    o.watch_events
                ));
            }
            m.samples.push(Sample {
                rate: events as f64 / took.as_secs_f64(),
                per_request: used.per(events),
                peak_rss_kib: proxy.status_kib("VmHWM:"),
                ..Sample::default()
            });
        }
    }
    results.extend(watches.into_iter().filter(|m| !m.samples.is_empty()));

    // Idle watches: RSS per watch, after a tenth as many to warm up.
    let n_idle = o.idle_watches;
    let n_warm = (n_idle / 10).max(1);
    let mut idle = Vec::new();
    for config in [Config::Passthrough, Config::Transcoding]
        .into_iter()
        .filter(|_| wanted("idle"))
    {
        progress.show(&format!("{n_idle} idle watches, {}", config.name()));
        let proxy = bench.cborgate();
        let warm = rt
            .block_on(client::idle_watches(proxy.addr, n_warm, accept(config)))
            .expect("idle watches");
        std::thread::sleep(Duration::from_millis(300));
        let before = proxy.status_kib("VmRSS:");
        let held = rt
            .block_on(client::idle_watches(proxy.addr, n_idle, accept(config)))
            .expect("idle watches");
        std::thread::sleep(Duration::from_millis(500));
        let after = proxy.status_kib("VmRSS:");
        idle.push((config, after.saturating_sub(before) as f64 / n_idle as f64));
        drop(held);
        drop(warm);
    }
    // Idle watches over HTTP/2, as client-go holds them: streams of a few client
    // connections (250 each, as kube-apiserver allows), and an HTTP/2 upstream.
    let idle_h2 = wanted("idle").then(|| {
        progress.show(&format!("{n_idle} idle watches over HTTP/2"));
        let pki = pki::Pki::make();
        let b = Proc::cborgate(
            &exe,
            &format!("http://{upstream}"),
            "native",
            &pki.serving(),
            procs::Cpus::shared(),
        );
        let mut flags = pki.serving();
        flags.extend(["--upstream-ca".to_string(), pki.path("ca.pem")]);
        let url = format!("https://localhost:{}", b.addr.port());
        let a = Proc::cborgate(&exe, &url, "legacy", &flags, procs::Cpus::shared());
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
        let warm = open(n_warm);
        std::thread::sleep(Duration::from_millis(300));
        let before = a.status_kib("VmRSS:");
        let held = open(n_idle);
        std::thread::sleep(Duration::from_millis(500));
        let after = a.status_kib("VmRSS:");
        let upstream_connections = cborgate_standin::client::connections_to(a.pid(), b.addr.port());
        drop((held, warm));
        report::IdleH2 {
            kib_per_watch: after.saturating_sub(before) as f64 / n_idle as f64,
            upstream_connections,
            watches: n_idle + n_warm,
        }
    });
    progress.show("the codec's own time, in this process");
    // The median over the rounds; a body whose scenario did not run (`--only`) is timed now.
    let codec_time = |scenario: &str| {
        let after: Vec<f64> = codec_after_turns
            .iter()
            .filter(|(s, _)| *s == scenario)
            .map(|&(_, t)| t)
            .collect();
        if after.is_empty() {
            codec_bodies.time(scenario).expect("a body of its own")
        } else {
            Duration::from_secs_f64(median(after))
        }
    };
    let codec = report::CodecTimes {
        get: codec_time(GET_POD),
        post: codec_time(POST_POD),
        list: codec_time(LIST),
        reps: o.codec_reps,
    };
    progress.show("done");
    eprintln!();

    // Futex counting that failed in some turn (those turns show n/a).
    for e in bench.perf_problems.borrow().iter() {
        let line = format!("futex calls not counted in some turns (n/a there): {e}");
        eprintln!("{line}");
        skipped.push(line);
    }
    if let Some(only) = &o.only {
        for m in &results {
            let (lo, hi) = m.range(cpu_us);
            println!(
                "{} {}: {:.0} {}, p50 {:?}, proxy CPU {:.1} µs per {} (range {lo:.1}–{hi:.1}), \
                 {} futex calls, {:.2} context switches{}",
                m.scenario,
                m.contestant.name(),
                m.rate(),
                m.per.rate_unit(),
                Duration::from_secs_f64(m.median(|s| s.p50.as_secs_f64())),
                m.cpu_us(),
                m.per.noun(),
                report::count(m.futexes()),
                m.switches(),
                report::resumed(m),
            );
        }
        for (config, kib) in &idle {
            println!(
                "{n_idle} idle watches over HTTP/1.1, {}: {kib:.1} KiB each",
                config.name()
            );
        }
        if let Some(h2) = &idle_h2 {
            println!(
                "{n_idle} idle watches over HTTP/2: {:.1} KiB each, {} upstream connections for {}",
                h2.kib_per_watch, h2.upstream_connections, h2.watches
            );
        }
        println!(
            "the codec's own time: pod J→C {:.1} µs, POST C→J + J→C {:.1} µs, LIST J→C {:.0} µs",
            report::us(codec.get),
            report::us(codec.post),
            report::us(codec.list),
        );
        eprintln!("--only {only}: no report written");
        return;
    }
    let commit = git(&["rev-parse", "--short", "HEAD"]);
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
        small_conns: SMALL_CONNS,
        list_conns: LIST_CONNS,
        load: (load_before, loadavg()),
        pod_bytes: pod.len(),
        list_bytes: list.len(),
        event_bytes: event_bytes / o.watch_events.max(1),
        watch_events: o.watch_events,
        idle_watches: n_idle,
        tls_connections: o.tls_connections,
        anchors: anchor_versions,
        placement,
        skipped,
        results,
        idle,
        idle_h2,
        codec,
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

/// The fastest of `reps` calls of `f`.
fn best_of(reps: usize, mut f: impl FnMut()) -> Duration {
    (0..reps.max(1))
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// The bodies whose codec time the targets use, and how many repetitions to take the
/// best of (the LIST's; the pod's are a hundred times as many).
struct CodecBodies<'a> {
    pod: &'a [u8],
    list: &'a [u8],
    post_cbor: &'a [u8],
    reps: usize,
}

impl CodecBodies<'_> {
    /// The codec's own time for the body `scenario` carries (`None`: it has none of its
    /// own among the targets').
    fn time(&self, scenario: &str) -> Option<Duration> {
        let pod_reps = self.reps * 100;
        match scenario {
            GET_POD => Some(j2c_time(self.pod, pod_reps)),
            POST_POD => {
                Some(c2j_time(self.post_cbor, POST_PATH, pod_reps) + j2c_time(self.pod, pod_reps))
            }
            LIST => Some(j2c_time(self.list, self.reps)),
            _ => None,
        }
    }
}

/// The codec's own time for `json` (JSON → CBOR with the proxy's response settings, one
/// transcoder reset between bodies as the proxy's pool does), best of `reps` in this
/// process: what `cargo bench --bench codec` measures for the same body.
fn j2c_time(json: &[u8], reps: usize) -> Duration {
    use cborgate::codec::{JsonToCbor, JsonToCborOptions};
    let mut t = JsonToCbor::new(JsonToCborOptions {
        dedupe_keys: false,
        ..Default::default()
    });
    let mut out = Vec::with_capacity(json.len());
    best_of(reps, || {
        t.reset();
        out.clear();
        t.feed(json, &mut out).expect("the body transcodes");
        t.finish(&mut out).expect("the body transcodes");
    })
}

/// The codec's own time for a CBOR request body to `path` (CBOR → JSON with duplicate
/// detection, as request bodies need, the length known, the route's field schema, as the
/// proxy reads it), best of `reps`.
fn c2j_time(cbor: &[u8], path: &str, reps: usize) -> Duration {
    use cborgate::codec::{CborToJson, CborToJsonOptions};
    let cborgate::negotiate::Route::Resource(route) = cborgate::negotiate::Route::classify(path)
    else {
        panic!("{path} is not a resource")
    };
    let mut t = CborToJson::new(CborToJsonOptions {
        input_len: Some(cbor.len() as u64),
        schema: cborgate::negotiate::byte_fields::typed_body(&route),
        ..Default::default()
    });
    let mut out = Vec::with_capacity(cbor.len() * 2);
    best_of(reps, || {
        t.reset();
        out.clear();
        t.feed(cbor, &mut out).expect("the body transcodes");
        t.finish(&mut out).expect("the body transcodes");
    })
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
