//! Codec throughput and allocation benchmark (issue acceptance item 6).
//!
//! ```text
//! cargo bench --bench codec                 # full run (about a minute)
//! cargo bench --bench codec -- --quick      # one short run per path
//! cargo bench --bench codec -- --dump DIR   # also write the generated inputs
//! cargo bench --bench codec -- podlist-100  # only this scenario
//! cargo bench --bench codec -- --iters 5    # each path exactly 5 times, untimed
//! cargo bench --bench codec -- --dump DIR podlist-8700   # any podlist-N, alone
//! codec-* --validate-file FILE              # read FILE, validate it with serde_json, exit
//!                                           # (bench/whole.py's anchor process)
//! cargo bench --bench codec -- --only j2c,c2j   # only these paths (for profiling):
//!                             # j2c j2c-dd c2j-dd c2j validate naive j2c-gz oneshot
//! ```
//!
//! Inputs are generated (deterministically, see `gen.rs`): pod lists of 1, 100
//! and 10,000 pods and a 10,000-event pod watch stream. On each input, in the
//! same run, it measures:
//!
//! - `J→C`: JSON → CBOR with the codec, response-path options
//!   (`dedupe_keys: false`, default window; watch mode for the stream);
//! - `J→C dd`: the same with duplicate-key detection on (request-path setting);
//! - `C→J dd`: CBOR → JSON with the codec, default options (duplicate
//!   detection on, as request bodies need; `input_len` known; sequence mode
//!   for the stream); the input is the codec's own CBOR of the same document
//!   and throughput counts JSON bytes;
//! - `C→J`: the same with duplicate detection off (a Go upstream's CBOR);
//! - `validate`: `serde_json::from_slice::<IgnoredAny>` (per event for the
//!   stream): the cost of merely checking the JSON;
//! - `naive`: `serde_json::from_slice::<Value>` and a recursive minicbor
//!   encoder (strings as byte strings, tag 55799 like the codec);
//! - `J→C+gz`: `J→C`, then the proxy's gzip stage (`cborgate::proxy::body::Gzip`,
//!   `GZIP_LEVEL`, a fresh encoder per body as per response) over the CBOR: the cost of
//!   compressing a large answer for a client that takes gzip, next to the transcode
//!   alone. Not for the watch stream (watches are never compressed); the one-shot
//!   table gives the gzipped size.
//!
//! Throughput is input JSON bytes per second (MB = 10^6 bytes): the best of
//! 150 runs of at least 10 ms each, the paths taking turns (see
//! [`measure_all`]; `--rounds N` and `--min-ms M` change both). The codec
//! runs with one transcoder and one output buffer reused across documents
//! (`reset()`), as a server would; a counting global allocator reports
//! allocations per document after warm-up, for the reused transcoders and for
//! the one-shot helpers.
//!
//! Without arguments (as `cargo test --all-targets` runs it) it is only a
//! smoke test: every path once on small inputs.

mod gen;
mod stats;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cborgate::codec::{
    cbor_to_json, json_to_cbor, CborToJson, CborToJsonOptions, JsonToCbor, JsonToCborOptions, Scan,
};
use cborgate::proxy::body::Gzip;
use minicbor::Encoder;
use serde_json::Value;
use stats::median;

// ------------------------------------------------------------ allocations

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        System.realloc(p, l, n)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations (alloc + realloc) per call of `f` (no warm-up: for the
/// one-shot helpers, which start from nothing each time).
fn allocs_per_call(iters: u64, mut f: impl FnMut()) -> f64 {
    let before = ALLOCS.load(Relaxed);
    for _ in 0..iters {
        f();
    }
    (ALLOCS.load(Relaxed) - before) as f64 / iters as f64
}

// ------------------------------------------------------------ timing

struct Cfg {
    /// The string scanner level of the J→C paths (`--scan`; the CPU's best
    /// by default).
    scan: Scan,
    runs: usize,
    min_time: Duration,
    /// `--iters N`: run each measured path exactly N times, untimed (for
    /// profilers such as callgrind).
    iters: Option<u64>,
}

#[derive(Clone)]
struct Measured {
    /// Best throughput, MB/s of the input.
    rate: f64,
    /// Allocations per call in the last run (after warm-up).
    allocs: f64,
    /// Throughput in each round of [`measure_all`] (NaN where the path did
    /// not run), for ratios between paths within a round.
    rounds: Vec<f64>,
}

/// One timed run: repeat `f` for at least `min_time` (once at least).
/// Returns (MB/s of `bytes`, allocations per call).
#[inline(never)] // a symbol for profilers (`--toggle-collect=codec::timed_run*`)
fn timed_run(min_time: Duration, bytes: usize, f: &mut dyn FnMut()) -> (f64, f64) {
    let a0 = ALLOCS.load(Relaxed);
    let start = Instant::now();
    let mut iters = 0u64;
    let mut el;
    loop {
        f();
        iters += 1;
        el = start.elapsed();
        if el >= min_time {
            break;
        }
    }
    let allocs = (ALLOCS.load(Relaxed) - a0) as f64 / iters as f64;
    (bytes as f64 * iters as f64 / el.as_secs_f64() / 1e6, allocs)
}

/// Measure several paths on the same input of `bytes` bytes. After one
/// warm-up call each, the paths take turns: `cfg.runs` rounds, each giving
/// every path one timed run of at least `cfg.min_time`; a path's result is
/// its best run (the machine is shared: interleaving gives every path the
/// same chances at quiet moments; many short runs rather than a few long ones,
/// because a run's figure is an average over everything else the machine does
/// meanwhile). A path whose single call takes longer than `min_time` counts
/// its warm-up call towards its best run and gets, in the first rounds, as
/// many single calls as fit in [`LONG_PATH_BUDGET`] (at least
/// [`LONG_PATH_MIN_RUNS`]), to keep the whole benchmark short. The paths
/// take their turns in the order of `fs` ([`RUN_ORDER`]).
/// `--iters N` replaces all this by N untimed calls.
fn measure_all(cfg: &Cfg, bytes: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<Measured> {
    let mut res = vec![
        Measured {
            rate: 0.0,
            allocs: f64::NAN,
            rounds: Vec::new(),
        };
        fs.len()
    ];
    if let Some(n) = cfg.iters {
        for (f, r) in fs.iter_mut().zip(&mut res) {
            let (rate, allocs) = timed_run(Duration::ZERO, bytes * n as usize, &mut || {
                for _ in 0..n {
                    f();
                }
            });
            *r = Measured {
                rate,
                allocs: allocs / n as f64,
                rounds: vec![rate],
            };
        }
        return res;
    }
    let mut runs = vec![cfg.runs; fs.len()];
    for ((f, r), runs) in fs.iter_mut().zip(&mut res).zip(&mut runs) {
        let (rate, _) = timed_run(Duration::ZERO, bytes, f); // warm-up
        let call = bytes as f64 / rate / 1e6;
        if call >= cfg.min_time.as_secs_f64() {
            r.rate = rate;
            // As many single calls as fit in LONG_PATH_BUDGET, at least
            // LONG_PATH_MIN_RUNS (fewer only if fewer rounds were asked for).
            let fit = (LONG_PATH_BUDGET.as_secs_f64() / call) as usize;
            *runs = fit.clamp(LONG_PATH_MIN_RUNS.min(cfg.runs), cfg.runs.max(1));
        }
    }
    for round in 0..cfg.runs {
        for ((f, r), &runs) in fs.iter_mut().zip(&mut res).zip(&runs) {
            if round < runs.max(1) {
                let (rate, allocs) = timed_run(cfg.min_time, bytes, f);
                r.rate = r.rate.max(rate);
                r.allocs = allocs;
                r.rounds.push(rate);
            } else {
                r.rounds.push(f64::NAN);
            }
        }
    }
    res
}

/// Time for the runs of a path whose single call outlasts `min_time`.
const LONG_PATH_BUDGET: Duration = Duration::from_secs(3);
/// Timed runs of such a path at the least, budget or not: `naive` takes
/// about two seconds on 84 MB, and its ratios are medians over the rounds in
/// which it ran (one round, before 2026-11-22).
const LONG_PATH_MIN_RUNS: usize = 5;

// ------------------------------------------------------------ the paths

fn j2c_opts(watch: bool, dedupe: bool) -> JsonToCborOptions {
    JsonToCborOptions {
        watch,
        dedupe_keys: dedupe,
        ..Default::default()
    }
}

fn c2j_opts(sequence: bool, len: usize) -> CborToJsonOptions {
    CborToJsonOptions {
        sequence,
        input_len: Some(len as u64),
        ..Default::default()
    }
}

/// One document through a reused transcoder into a reused buffer.
fn run_j2c(t: &mut JsonToCbor, json: &[u8], out: &mut Vec<u8>) {
    t.reset();
    out.clear();
    t.feed(json, out).expect("json→cbor");
    t.finish(out).expect("json→cbor finish");
    black_box(out.len());
}

/// `J→C`, then the CBOR through a fresh gzip stage; returns the gzipped size.
fn run_j2c_gz(t: &mut JsonToCbor, json: &[u8], out: &mut Vec<u8>) -> usize {
    run_j2c(t, json, out);
    let gz = Gzip::with_buffers(&Arc::default())
        .chunk(out, true)
        .expect("gzip");
    black_box(gz.len())
}

fn run_c2j(t: &mut CborToJson, cbor: &[u8], out: &mut Vec<u8>) {
    t.reset();
    out.clear();
    t.feed(cbor, out).expect("cbor→json");
    t.finish(out).expect("cbor→json finish");
    black_box(out.len());
}

fn validate(json: &[u8], watch: bool) {
    if watch {
        for ev in serde_json::Deserializer::from_slice(json).into_iter::<serde::de::IgnoredAny>() {
            black_box(ev.expect("valid JSON"));
        }
    } else {
        black_box(serde_json::from_slice::<serde::de::IgnoredAny>(json).expect("valid JSON"));
    }
}

type Enc<'a> = Encoder<&'a mut Vec<u8>>;

/// The obvious implementation: a `serde_json::Value` tree, written with minicbor.
fn encode_value(e: &mut Enc<'_>, v: &Value) {
    match v {
        Value::Null => {
            e.null().unwrap();
        }
        Value::Bool(b) => {
            e.bool(*b).unwrap();
        }
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                e.i64(i).unwrap();
            } else if let Some(u) = n.as_u64() {
                e.u64(u).unwrap();
            } else {
                e.f64(n.as_f64().unwrap_or(0.0)).unwrap();
            }
        }
        Value::String(s) => {
            e.bytes(s.as_bytes()).unwrap();
        }
        Value::Array(a) => {
            e.array(a.len() as u64).unwrap();
            for x in a {
                encode_value(e, x);
            }
        }
        Value::Object(m) => {
            e.map(m.len() as u64).unwrap();
            for (k, x) in m {
                e.bytes(k.as_bytes()).unwrap();
                encode_value(e, x);
            }
        }
    }
}

const SELF_DESCRIBED: minicbor::data::Tag = minicbor::data::Tag::new(55799);

fn naive(json: &[u8], watch: bool, out: &mut Vec<u8>) {
    out.clear();
    if watch {
        for ev in serde_json::Deserializer::from_slice(json).into_iter::<Value>() {
            let ev = ev.expect("valid JSON");
            let mut e = Encoder::new(&mut *out);
            e.tag(SELF_DESCRIBED).unwrap();
            let m = ev.as_object().expect("event object");
            e.map(m.len() as u64).unwrap();
            for (k, x) in m {
                e.bytes(k.as_bytes()).unwrap();
                if k == "object" {
                    e.tag(SELF_DESCRIBED).unwrap();
                }
                encode_value(&mut e, x);
            }
        }
    } else {
        let v: Value = serde_json::from_slice(json).expect("valid JSON");
        let mut e = Encoder::new(&mut *out);
        e.tag(SELF_DESCRIBED).unwrap();
        encode_value(&mut e, &v);
    }
    black_box(out.len());
}

// ------------------------------------------------------------ scenarios

struct Scenario {
    name: String,
    json: Vec<u8>,
    watch: bool,
    docs: u64,
}

/// The order in which the paths take their turns in a round, as indexes
/// into [`PATHS`]: `validate` between `J→C` and `C→J dd`, so that the runs
/// each of the two main ratios pairs are next to each other in time
/// (J→C, validate, C→J dd, C→J, J→C dd, naive, J→C+gz).
const RUN_ORDER: [usize; 7] = [0, 4, 2, 3, 1, 5, 6];

/// The measured paths, in table order: (name for `--only`, column title).
const PATHS: [(&str, &str); 7] = [
    ("j2c", "J→C"),
    ("j2c-dd", "J→C dd"),
    ("c2j-dd", "C→J dd"),
    ("c2j", "C→J"),
    ("validate", "validate"),
    ("naive", "naive"),
    ("j2c-gz", "J→C+gz"),
];

fn path_index(path: &str) -> usize {
    PATHS.iter().position(|p| p.0 == path).unwrap()
}

struct Row {
    name: String,
    mb: f64,
    cbor_mb: f64,
    /// Per path of [`PATHS`]: MB/s and allocations per document.
    m: [Measured; 7],
    /// The CBOR gzipped by the proxy's stage (NaN for a watch: never compressed).
    gz_mb: f64,
    oneshot_j2c: f64,
    oneshot_c2j: f64,
}

impl Row {
    fn allocs(&self, path: &str) -> f64 {
        self.m[path_index(path)].allocs
    }
    /// `a`'s throughput over `b`'s: the median over the rounds in which both
    /// ran of the ratio within the round (NaN if none).
    fn ratio(&self, a: &str, b: &str) -> f64 {
        let (ra, rb) = (&self.m[path_index(a)].rounds, &self.m[path_index(b)].rounds);
        let mut q: Vec<f64> = ra
            .iter()
            .zip(rb)
            .map(|(x, y)| x / y)
            .filter(|r| r.is_finite())
            .collect();
        median(&mut q)
    }
}

fn same_value(a: &[u8], b: &[u8], watch: bool) -> bool {
    if watch {
        let va: Vec<Value> = serde_json::Deserializer::from_slice(a)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        let vb: Vec<Value> = serde_json::Deserializer::from_slice(b)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        va == vb
    } else {
        serde_json::from_slice::<Value>(a).unwrap() == serde_json::from_slice::<Value>(b).unwrap()
    }
}

/// Which paths to measure (`--only j2c,c2j,...`; all by default).
struct Paths(Vec<String>);

impl Paths {
    fn on(&self, p: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|x| x == p)
    }
}

fn run_scenario(cfg: &Cfg, paths: &Paths, s: &Scenario) -> Row {
    let json = &s.json[..];
    let n = json.len();
    let watch = s.watch;

    let mut out = Vec::new();
    let mut j2c = JsonToCbor::new(j2c_opts(watch, false));
    let mut j2c_dd = JsonToCbor::new(j2c_opts(watch, true));
    j2c.set_scan(cfg.scan);
    j2c_dd.set_scan(cfg.scan);

    // The codec's own CBOR, and sanity checks: dedupe on/off agree, the
    // one-shot helper agrees, and the round trip gives back the same value.
    run_j2c(&mut j2c, json, &mut out);
    let cbor = out.clone();
    assert_eq!(j2c.documents(), s.docs, "{}: document count", s.name);
    run_j2c(&mut j2c_dd, json, &mut out);
    assert!(out == cbor, "{}: dedupe changes the output", s.name);
    let mut c2j = CborToJson::new(c2j_opts(watch, cbor.len()));
    run_c2j(&mut c2j, &cbor, &mut out);
    assert_eq!(c2j.documents(), s.docs);
    if n < 10_000_000 {
        assert!(same_value(json, &out, watch), "{}: round trip", s.name);
    }
    let back = out.clone();
    run_j2c(&mut j2c, &back, &mut out);
    assert!(
        out == cbor,
        "{}: JSON → CBOR → JSON → CBOR is not stable",
        s.name
    );

    let mut c2j_nd = CborToJson::new(CborToJsonOptions {
        dedupe_keys: false,
        ..c2j_opts(watch, cbor.len())
    });
    let docs = s.docs as f64;
    let (mut o1, mut o2, mut o3, mut o4, mut o5, mut o6) = (
        out.clone(),
        out.clone(),
        out.clone(),
        out.clone(),
        out.clone(),
        out.clone(),
    );
    let mut j2c_gz = JsonToCbor::new(j2c_opts(watch, false));
    j2c_gz.set_scan(cfg.scan);
    let gz_mb = if watch {
        f64::NAN
    } else {
        run_j2c_gz(&mut j2c_gz, json, &mut o6) as f64 / 1e6
    };
    let mut f_j2c = || run_j2c(&mut j2c, json, &mut o1);
    let mut f_j2c_dd = || run_j2c(&mut j2c_dd, json, &mut o2);
    let mut f_c2j_dd = || run_c2j(&mut c2j, &cbor, &mut o3);
    let mut f_c2j = || run_c2j(&mut c2j_nd, &cbor, &mut o4);
    let mut f_validate = || validate(json, watch);
    let mut f_naive = || naive(json, watch, &mut o5);
    let mut f_j2c_gz = || {
        run_j2c_gz(&mut j2c_gz, json, &mut o6);
    };
    let mut all: [Option<&mut dyn FnMut()>; 7] = [
        Some(&mut f_j2c),
        Some(&mut f_j2c_dd),
        Some(&mut f_c2j_dd),
        Some(&mut f_c2j),
        Some(&mut f_validate),
        Some(&mut f_naive),
        (!watch).then_some(&mut f_j2c_gz as &mut dyn FnMut()),
    ];
    let mut chosen = Vec::new();
    let mut which = Vec::new();
    for k in RUN_ORDER {
        if paths.on(PATHS[k].0) {
            if let Some(f) = all[k].take() {
                chosen.push(f);
                which.push(k);
            }
        }
    }
    let got = measure_all(cfg, n, &mut chosen);
    let mut m: [Measured; 7] = std::array::from_fn(|_| Measured {
        rate: f64::NAN,
        allocs: f64::NAN,
        rounds: Vec::new(),
    });
    for (k, r) in which.into_iter().zip(got) {
        m[k] = Measured {
            allocs: r.allocs / docs,
            ..r
        };
    }

    // Fresh transcoder and output buffer per body (the `json_to_cbor` /
    // `cbor_to_json` helpers): per body, not per event.
    let (mut o_j2c, mut o_c2j) = (f64::NAN, f64::NAN);
    if paths.on("oneshot") {
        o_j2c = allocs_per_call(1, || {
            black_box(json_to_cbor(json, j2c_opts(watch, false)).unwrap());
        });
        o_c2j = allocs_per_call(1, || {
            black_box(cbor_to_json(&cbor, c2j_opts(watch, cbor.len())).unwrap());
        });
    }

    Row {
        name: s.name.clone(),
        mb: n as f64 / 1e6,
        cbor_mb: cbor.len() as f64 / 1e6,
        m,
        gz_mb,
        oneshot_j2c: o_j2c,
        oneshot_c2j: o_c2j,
    }
}

fn fmt_allocs(a: f64) -> String {
    if a == a.round() {
        format!("{a:.0}")
    } else if a < 10.0 {
        format!("{a:.2}")
    } else {
        format!("{a:.0}")
    }
}

fn print_tables(rows: &[Row]) {
    println!();
    println!(
        "MB/s of JSON (10^6 bytes per second), best of the runs. `dd`: duplicate-key \
         detection on. Ratios: codec / `validate` and codec / `naive`, each the median \
         over the rounds of the ratio within a round. Allocations \
         per document (watch: per event) after warm-up, in the order J→C · J→C dd · \
         C→J dd · C→J."
    );
    println!();
    let mut head = String::from("| scenario | input MB");
    for (_, title) in PATHS {
        head += &format!(" | {title}");
    }
    head += " | J→C / validate | C→J dd / validate | C→J / validate | J→C / naive | C→J dd / naive | J→C+gz / J→C | allocs/doc (codec) | allocs/doc (naive) |";
    println!("{head}");
    println!(
        "|---|---:{}|---:|---:|---:|---:|---:|---:|:---:|---:|",
        "|---:".repeat(PATHS.len())
    );
    for r in rows {
        let mut line = format!("| {} | {:.3}", r.name, r.mb);
        for k in 0..PATHS.len() {
            line += &format!(" | {:.0}", r.m[k].rate);
        }
        line += &format!(
            " | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} · {} · {} · {} | {} |",
            r.ratio("j2c", "validate"),
            r.ratio("c2j-dd", "validate"),
            r.ratio("c2j", "validate"),
            r.ratio("j2c", "naive"),
            r.ratio("c2j-dd", "naive"),
            r.ratio("j2c-gz", "j2c"),
            fmt_allocs(r.allocs("j2c")),
            fmt_allocs(r.allocs("j2c-dd")),
            fmt_allocs(r.allocs("c2j-dd")),
            fmt_allocs(r.allocs("c2j")),
            fmt_allocs(r.allocs("naive")),
        );
        println!("{line}");
    }
    println!();
    // The codec targets (bench/README.md, "Targets"), each at its lowest over the scenarios of this run.
    let lowest = |a: &str, b: &str| {
        rows.iter()
            .map(|r| (r.ratio(a, b), r.name.as_str()))
            .filter(|(x, _)| !x.is_nan())
            .min_by(|x, y| x.0.total_cmp(&y.0))
    };
    for (a, b, goal) in [
        ("j2c", "validate", 0.8),
        ("c2j-dd", "validate", 0.8),
        ("c2j", "validate", 0.8),
        ("j2c", "naive", 10.0),
        ("c2j-dd", "naive", 10.0),
    ] {
        if let Some((x, name)) = lowest(a, b) {
            let verdict = if x >= goal { "met" } else { "NOT met" };
            println!("target {a} / {b} >= {goal}: lowest {x:.2} ({name}): {verdict}");
        }
    }
    println!();
    println!(
        "One-shot helpers (a fresh transcoder and output `Vec` per body), allocations per body:"
    );
    println!();
    println!("| scenario | CBOR MB | gzipped MB | `json_to_cbor` | `cbor_to_json` |");
    println!("|---|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {:.3} | {:.3} | {} | {} |",
            r.name,
            r.cbor_mb,
            r.gz_mb,
            fmt_allocs(r.oneshot_j2c),
            fmt_allocs(r.oneshot_c2j)
        );
    }
}

fn main() {
    let mut cfg = Cfg {
        runs: 150,
        min_time: Duration::from_millis(10),
        iters: None,
        scan: Scan::detect(),
    };
    let mut filter: Option<String> = None;
    let mut paths = Paths(Vec::new());
    let mut dump: Option<std::path::PathBuf> = None;
    let raw: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test --benches` / `--all-targets` runs this binary with no
    // arguments (and unoptimised): then only a smoke test, every path once
    // on small inputs, so the test suite stays fast.
    let smoke = raw.is_empty();
    if smoke {
        cfg.iters = Some(1);
    }
    let mut args = raw.into_iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {} // passed by `cargo bench`
            "--validate-file" => {
                // bench/whole.py's anchor: a whole process that reads a file and
                // validates it with serde_json, nothing else.
                let path = args.next().unwrap_or_default();
                let data = std::fs::read(&path).unwrap_or_else(|e| {
                    eprintln!("--validate-file {path}: {e}");
                    std::process::exit(2);
                });
                if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&data) {
                    eprintln!("--validate-file {path}: {e}");
                    std::process::exit(1);
                }
                return;
            }
            "--quick" => {
                cfg.runs = 1;
                cfg.min_time = Duration::from_millis(200);
            }
            "--iters" => cfg.iters = args.next().and_then(|n| n.parse().ok()),
            "--rounds" => {
                if let Some(n) = args.next().and_then(|n| n.parse().ok()) {
                    cfg.runs = n;
                }
            }
            "--min-ms" => {
                if let Some(ms) = args.next().and_then(|n| n.parse().ok()) {
                    cfg.min_time = Duration::from_millis(ms);
                }
            }
            "--dump" => dump = args.next().map(Into::into),
            "--scan" => {
                cfg.scan = match args.next().as_deref() {
                    Some("portable") => Scan::Portable,
                    Some("sse2") => Scan::Sse2,
                    Some("avx2") => Scan::Avx2,
                    other => {
                        eprintln!("--scan: portable, sse2 or avx2, not {other:?}");
                        std::process::exit(2);
                    }
                }
            }
            "--only" => {
                let list = args.next().unwrap_or_default();
                paths = Paths(list.split(',').map(str::to_string).collect());
            }
            s if !s.starts_with('-') => filter = Some(s.to_string()),
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2);
            }
        }
    }

    let t0 = Instant::now();
    let (pods, events): (&[usize], usize) = if smoke {
        (&[1, 3], 100)
    } else {
        (&[1, 100, 10_000], 10_000)
    };
    let mut scenarios = Vec::new();
    // `podlist-N` for any N: that list alone (bench/whole.py generates its input so).
    let asked = filter
        .as_deref()
        .and_then(|f| f.strip_prefix("podlist-"))
        .and_then(|n| n.parse::<usize>().ok());
    let asked = asked.filter(|n| !pods.contains(n));
    for &n in asked.as_slice().iter().chain(pods) {
        let name = format!("podlist-{n}");
        if filter.as_deref().is_some_and(|f| f != name) {
            continue;
        }
        scenarios.push(Scenario {
            name,
            json: gen::pod_list(n),
            watch: false,
            docs: 1,
        });
    }
    let name = format!("watch-{events}");
    if filter.as_deref().is_none_or(|f| f == name) {
        scenarios.push(Scenario {
            name,
            json: gen::watch_stream(events),
            watch: true,
            docs: events as u64,
        });
    }
    if let Some(dir) = &dump {
        std::fs::create_dir_all(dir).unwrap();
        for s in &scenarios {
            std::fs::write(dir.join(format!("{}.json", s.name)), &s.json).unwrap();
        }
    }
    if smoke {
        eprintln!(
            "smoke test (no arguments): every path once; `cargo bench --bench codec` measures"
        );
    } else {
        eprintln!(
            "generated {} inputs in {:.1?}; {} round(s) of >= {:?} per path; J→C string scanner {:?}",
            scenarios.len(),
            t0.elapsed(),
            cfg.runs,
            cfg.min_time,
            cfg.scan.min(Scan::detect())
        );
    }

    let mut rows = Vec::new();
    for s in &scenarios {
        let t = Instant::now();
        let row = run_scenario(&cfg, &paths, s);
        eprintln!("{}: done in {:.1?}", s.name, t.elapsed());
        rows.push(row);
    }
    print_tables(&rows);
    eprintln!("total {:.1?}", t0.elapsed());
}
