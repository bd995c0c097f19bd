//! What a run wrote: `bench/RESULTS.md` (the measurements of every contestant, median and
//! range over the rounds, and each target checked within the run) and
//! `bench/results.png` (proxy CPU per request and requests/s, haproxy and nginx next to
//! cborgate, with the goals drawn).

use crate::{
    cpu_us, Config, Contestant, Measured, Per, Sample, GET_POD, HAPROXY, LIST, NGINX, PASSTHROUGH,
    PINGORA, POST_POD, TLS_ECDSA, TLS_NEW, TLS_RESUMED, TRANSCODED, WATCH,
};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

pub struct Report {
    pub date: String,
    pub commit: String,
    pub seconds: f64,
    pub rounds: usize,
    /// The load generator's connections for GET and POST, and for the LIST.
    pub small_conns: usize,
    pub list_conns: usize,
    /// The load average (1, 5, 15 minutes) at the start and at the end of the run.
    pub load: (String, String),
    pub pod_bytes: usize,
    pub list_bytes: usize,
    pub event_bytes: usize,
    pub watch_events: usize,
    pub idle_watches: usize,
    /// New TLS connections per turn of the TLS scenarios.
    pub tls_connections: usize,
    /// The anchors run: version and path.
    pub anchors: Vec<String>,
    /// Which CPUs the proxies and the harness ran on.
    pub placement: String,
    /// One line for each anchor not run, and why.
    pub skipped: Vec<String>,
    pub results: Vec<Measured>,
    /// RSS per idle watch, KiB.
    pub idle: Vec<(Config, f64)>,
    /// Idle transcoded watches over HTTP/2, to an HTTP/2 upstream.
    pub idle_h2: Option<IdleH2>,
    pub codec: CodecTimes,
    pub errors: Vec<String>,
}

/// The codec's own time for each body, measured in the harness's process (release
/// build, best of several).
pub struct CodecTimes {
    /// The 7 KB pod, JSON → CBOR (the transcoded GET's response).
    pub get: Duration,
    /// The pod, CBOR → JSON (the request body) plus JSON → CBOR (the 201's body).
    pub post: Duration,
    /// The 700-pod LIST, JSON → CBOR.
    pub list: Duration,
    /// Repetitions for the LIST (the pod: a hundred times as many).
    pub reps: usize,
}

/// What idle transcoded watches over HTTP/2 cost (after a tenth as many to warm up).
pub struct IdleH2 {
    pub kib_per_watch: f64,
    /// cborgate's connections to its HTTP/2 upstream with every watch open.
    pub upstream_connections: usize,
    /// Watches open then.
    pub watches: usize,
}

/// One target: what is measured, the measured value, the goal, and whether "more" is better.
pub struct Target {
    pub what: String,
    pub measured: f64,
    pub goal: f64,
    pub higher_is_better: bool,
    pub unit: &'static str,
    /// The figures it was computed from.
    pub detail: String,
}

impl Target {
    /// `PASS`, `FAIL`, or `SKIP` when a figure it needs was not measured (an anchor not
    /// installed, a scenario left out).
    pub fn status(&self) -> &'static str {
        if !self.measured.is_finite() || !self.goal.is_finite() {
            "SKIP"
        } else if (self.higher_is_better && self.measured >= self.goal)
            || (!self.higher_is_better && self.measured <= self.goal)
        {
            "PASS"
        } else {
            "FAIL"
        }
    }

    fn value(&self, v: f64) -> String {
        if !v.is_finite() {
            "–".into()
        } else if self.unit == "×" {
            format!("{v:.2}×")
        } else if self.unit == "calls" {
            format!("{v:.2} {}", self.unit)
        } else {
            format!("{v:.1} {}", self.unit)
        }
    }

    fn measured_text(&self) -> String {
        self.value(self.measured)
    }

    fn goal_text(&self) -> String {
        let cmp = if self.higher_is_better { "≥" } else { "≤" };
        format!("{cmp} {}", self.value(self.goal))
    }
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A count per request (futex calls, context switches): two decimals, `n/a` when not
/// counted.
pub fn count(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "n/a".into()
    }
}

/// For the TLS scenarios: `, N% resumed` (the handshakes that resumed a session);
/// nothing for the others.
pub fn resumed(m: &Measured) -> String {
    if m.per == Per::Connection {
        format!(", {:.0}% resumed", 100.0 * m.median(|s| s.resumed))
    } else {
        String::new()
    }
}

/// Futex calls per request of one sample (NaN when not counted).
fn futexes(s: &Sample) -> f64 {
    s.per_request.futexes
}

fn target(what: String, measured: f64, goal: f64, higher: bool, unit: &'static str) -> Target {
    Target {
        what,
        measured,
        goal,
        higher_is_better: higher,
        unit,
        detail: String::new(),
    }
}

impl Report {
    fn get(&self, scenario: &str, c: Contestant) -> Option<&Measured> {
        self.results
            .iter()
            .find(|m| m.scenario == scenario && m.contestant == c)
    }

    /// The median of `f` for (scenario, contestant), NaN when not measured.
    fn med(&self, scenario: &str, c: Contestant, f: impl Fn(&Sample) -> f64) -> f64 {
        self.get(scenario, c).map_or(f64::NAN, |m| m.median(f))
    }

    fn cpu(&self, scenario: &str, c: Contestant) -> f64 {
        self.med(scenario, c, cpu_us)
    }

    fn rate(&self, scenario: &str, c: Contestant) -> f64 {
        self.med(scenario, c, |s| s.rate)
    }

    /// The per-request-cost acceptance: cborgate next to haproxy, and what transcoding
    /// adds, each from medians within this run.
    pub fn acceptance(&self) -> Vec<Target> {
        let (h, n) = (self.cpu(GET_POD, HAPROXY), self.cpu(GET_POD, NGINX));
        let floor = self.get(GET_POD, PINGORA).map_or(String::new(), |m| {
            format!(", pingora with empty callbacks {:.1} µs", m.median(cpu_us))
        });
        let (p, t) = (
            self.cpu(GET_POD, PASSTHROUGH),
            self.cpu(GET_POD, TRANSCODED),
        );
        let (pp, pt) = (
            self.cpu(POST_POD, PASSTHROUGH),
            self.cpu(POST_POD, TRANSCODED),
        );
        let (lh, lt) = (self.cpu(LIST, HAPROXY), self.cpu(LIST, TRANSCODED));
        let list_codec = us(self.codec.list);
        let (wp, wt) = (self.rate(WATCH, PASSTHROUGH), self.rate(WATCH, TRANSCODED));
        let floor_cpu = self.cpu(GET_POD, PINGORA);
        let (ff, fp) = (
            self.med(GET_POD, PINGORA, futexes),
            self.med(GET_POD, PASSTHROUGH, futexes),
        );
        let futex_detail = [HAPROXY, NGINX, PINGORA, PASSTHROUGH, TRANSCODED]
            .into_iter()
            .filter_map(|c| {
                let m = self.get(GET_POD, c)?;
                Some(format!("{} {}", c.short(), count(m.futexes())))
            })
            .collect::<Vec<_>>()
            .join(", ");
        let (th, tf, tp) = (
            self.cpu(TLS_NEW, HAPROXY),
            self.cpu(TLS_NEW, PINGORA),
            self.cpu(TLS_NEW, PASSTHROUGH),
        );
        let (rh, rp) = (
            self.cpu(TLS_RESUMED, HAPROXY),
            self.cpu(TLS_RESUMED, PASSTHROUGH),
        );
        let (eh, ep) = (
            self.cpu(TLS_ECDSA, HAPROXY),
            self.cpu(TLS_ECDSA, PASSTHROUGH),
        );
        let mut out = vec![
            Target {
                detail: format!(
                    "cborgate {p:.1} µs, haproxy {h:.1} µs, nginx {n:.1} µs{floor} per request"
                ),
                ..target(
                    "7 KB GET: cborgate JSON passthrough CPU / haproxy's".into(),
                    p / h,
                    1.5,
                    false,
                    "×",
                )
            },
            Target {
                detail: format!("cborgate {p:.1} µs, pingora-floor {floor_cpu:.1} µs per request"),
                ..target(
                    "7 KB GET: cborgate JSON passthrough CPU / pingora's floor".into(),
                    p / floor_cpu,
                    1.15,
                    false,
                    "×",
                )
            },
            Target {
                detail: format!("futex calls per request: {futex_detail}"),
                ..target(
                    "7 KB GET: cborgate JSON passthrough futex calls (goal: floor's + 0.1)".into(),
                    fp,
                    ff + 0.1,
                    false,
                    "calls",
                )
            },
            Target {
                detail: format!(
                    "cborgate {tp:.0} µs, haproxy {th:.0} µs, pingora-floor {tf:.0} µs per \
                     connection; resumed: cborgate {rp:.0} µs, haproxy {rh:.0} µs; with an \
                     ECDSA P-256 key: cborgate {ep:.0} µs, haproxy {eh:.0} µs"
                ),
                ..target(
                    "new TLS connection (RSA-2048) + GET: cborgate CPU / haproxy's".into(),
                    tp / th,
                    1.3,
                    false,
                    "×",
                )
            },
            Target {
                detail: format!(
                    "{t:.1} − {p:.1} µs; the codec alone: {:.1} µs",
                    us(self.codec.get)
                ),
                ..target(
                    "7 KB GET: CBOR transcoded − JSON passthrough CPU (goal: 1.5 × the codec's)"
                        .into(),
                    t - p,
                    1.5 * us(self.codec.get),
                    false,
                    "µs",
                )
            },
            Target {
                detail: format!(
                    "{pt:.1} − {pp:.1} µs; the codec alone (C→J request + J→C response): {:.1} µs",
                    us(self.codec.post)
                ),
                ..target(
                    "pod POST: CBOR transcoded − JSON passthrough CPU".into(),
                    pt - pp,
                    20.0,
                    false,
                    "µs",
                )
            },
            Target {
                detail: format!("goal = haproxy {lh:.0} µs + 1.2 × the codec's {list_codec:.0} µs"),
                ..target(
                    "LIST 700 pods: cborgate CBOR transcoded CPU".into(),
                    lt,
                    lh + 1.2 * list_codec,
                    false,
                    "µs",
                )
            },
            Target {
                detail: format!("{wt:.0} / {wp:.0} events/s"),
                ..target(
                    format!(
                        "watch, {} events: transcoded / passthrough events/s",
                        thousands(self.watch_events)
                    ),
                    wt / wp,
                    0.85,
                    true,
                    "×",
                )
            },
        ];
        for t in &mut out {
            t.detail = t.detail.replace("NaN µs", "not run");
        }
        out
    }

    /// The earlier targets: transcoding against passthrough within cborgate, page faults
    /// and idle-watch memory.
    pub fn targets(&self) -> Vec<Target> {
        let ratio = |s: &str, f: &dyn Fn(&Sample) -> f64| {
            self.med(s, TRANSCODED, f) / self.med(s, PASSTHROUGH, f)
        };
        let rps = |s: &Sample| s.rate;
        let faults = |s: &Sample| s.per_request.faults;
        let extra_faults =
            |s: &str| self.med(s, TRANSCODED, faults) - self.med(s, PASSTHROUGH, faults);
        let idle = self
            .idle
            .iter()
            .find(|(c, _)| *c == Config::Transcoding)
            .map_or(f64::NAN, |(_, k)| *k);
        let list_allowance = self.cpu(LIST, PASSTHROUGH) + 1.2 * us(self.codec.list);
        let n = self.idle_watches;
        vec![
            target(
                "GET 7 KB: transcoding / passthrough requests/s".into(),
                ratio(GET_POD, &rps),
                0.9,
                true,
                "×",
            ),
            target(
                "GET 7 KB: transcoding / passthrough proxy CPU per request".into(),
                ratio(GET_POD, &cpu_us),
                1.15,
                false,
                "×",
            ),
            target(
                "LIST 700 pods: transcoding / passthrough requests/s".into(),
                ratio(LIST, &rps),
                0.7,
                true,
                "×",
            ),
            target(
                "LIST 700 pods: transcoding CPU / (passthrough CPU + 1.2 × codec time)".into(),
                self.cpu(LIST, TRANSCODED) / list_allowance,
                1.0,
                false,
                "×",
            ),
            target(
                "GET 7 KB: page faults per request, transcoding − passthrough".into(),
                extra_faults(GET_POD),
                8.0,
                false,
                "faults",
            ),
            target(
                "LIST 700 pods: page faults per request, transcoding − passthrough".into(),
                extra_faults(LIST),
                8.0,
                false,
                "faults",
            ),
            target(
                "watch: page faults per event, transcoding − passthrough".into(),
                extra_faults(WATCH),
                8.0,
                false,
                "faults",
            ),
            target(
                format!("{n} idle transcoded watches (HTTP/1.1): proxy RSS per watch"),
                idle,
                32.0,
                false,
                "KiB",
            ),
            target(
                format!("{n} idle transcoded watches (HTTP/2 both sides): proxy RSS per watch"),
                self.idle_h2.as_ref().map_or(f64::NAN, |h| h.kib_per_watch),
                12.0,
                false,
                "KiB",
            ),
            target(
                "HTTP/2 watches per upstream connection".into(),
                self.idle_h2.as_ref().map_or(f64::NAN, |h| {
                    h.watches as f64 / h.upstream_connections.max(1) as f64
                }),
                100.0,
                true,
                "watches",
            ),
        ]
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# End-to-end results\n");
        let _ = writeln!(
            s,
            "Written by `bench/load.sh` (see `bench/README.md`); do not edit by hand.\n\n\
             - **Run:** {}, commit `{}`\n\
             - **Machine:** {}; load average (1, 5, 15 min) {} at the start, {} at the end\n\
             - **Method:** every contestant in front of the same static-body upstream, \
             driven by the same load generator (one thread; {} keep-alive connections for \
             GET and POST, {} for the LIST), {:.1} s per turn after a 0.3 s warm-up, a fresh \
             proxy process per turn; turns round-robin over the contestants, rounds: {}. \
             Figures are the median over the rounds, with the range. Proxy CPU per request is \
             the proxy's utime + stime (`/proc/PID/stat`: the whole process, all threads; \
             for nginx, master and workers summed) over the turn, divided by the requests \
             completed. The watch: one at a time, 2 × rounds turns each. TLS: {} new \
             connections per turn (after {} to warm up), {} at a time, each one GET of the \
             pod, to a listener serving an RSA-2048 certificate (as kubeadm makes them); the \
             client is rustls (ring, TLS 1.3, X25519), without resumption, then with a session \
             cache shared by the turn's connections; the upstream is plain HTTP as elsewhere. \
             Client, upstream and proxy share the machine; placement: {}.\n\
             - **Anchors:** {}\n\
             - **Bodies:** pod {} bytes of JSON, list {} bytes (700 pods), watch events {} \
             bytes each on average.\n\
             - **The codec's own time** (this process, right after each transcoded turn, best \
             of {} for the LIST, {} for the pod, median over the rounds): pod J→C {:.1} µs; pod C→J + J→C (the POST) {:.1} µs; LIST J→C {:.0} µs.\n",
            self.date,
            self.commit,
            machine(),
            self.load.0,
            self.load.1,
            self.small_conns,
            self.list_conns,
            self.seconds,
            self.rounds,
            self.tls_connections,
            crate::TLS_WARM,
            crate::TLS_PARALLEL,
            self.placement,
            if self.anchors.is_empty() {
                "none run".to_string()
            } else {
                self.anchors.join("; ")
            },
            self.pod_bytes,
            self.list_bytes,
            self.event_bytes,
            self.codec.reps,
            self.codec.reps * 100,
            us(self.codec.get),
            us(self.codec.post),
            us(self.codec.list),
        );
        for line in &self.skipped {
            let _ = writeln!(s, "- **Skipped:** {line}");
        }
        let _ = writeln!(s, "\n## Per-request cost against haproxy and nginx\n");
        target_table(&mut s, &self.acceptance());
        let _ = writeln!(
            s,
            "\n## Measurements\n\nPer request, except where a row says per event (the watch) \
             or per connection (TLS: its handshake and its one GET). Futex calls: `perf stat -e \
             {}` attached to the proxy for the turn (n/a without perf); context switches: \
             voluntary + involuntary, every thread's (`/proc/PID/task/*/status`).\n\n\
             | scenario | contestant | requests/s | proxy CPU µs per request | user + sys µs \
             | futex calls per request | context switches per request (vol + invol) | p50 ms \
             | p99 ms | page faults per request | peak RSS MiB | errors |\n\
             |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            crate::procs::FUTEX_EVENT
        );
        for m in &self.results {
            let (rlo, rhi) = m.range(|x| x.rate);
            let (clo, chi) = m.range(cpu_us);
            let ms = |f: fn(&Sample) -> Duration| {
                if m.per == Per::Event {
                    "–".to_string()
                } else {
                    format!("{:.2}", m.median(|x| f(x).as_secs_f64() * 1e3))
                }
            };
            let scenario = match m.per {
                Per::Event => format!("watch, {} events", thousands(self.watch_events)),
                Per::Connection => format!("{}{}", m.scenario, resumed(m)),
                Per::Request => m.scenario.to_string(),
            };
            let (rate_unit, per) = match m.per {
                Per::Request => ("", ""),
                Per::Event => (" events/s", " per event"),
                Per::Connection => (" connections/s", " per connection"),
            };
            let _ = writeln!(
                s,
                "| {scenario} | {} | {:.0} ({rlo:.0}–{rhi:.0}){rate_unit} | {:.1} \
                 ({clo:.1}–{chi:.1}){per} | {:.1} + {:.1} | {} | {} ({} + {}) | {} | {} | {:.1} \
                 | {:.1} | {} |",
                m.contestant.name(),
                m.rate(),
                m.cpu_us(),
                m.median(|x| us(x.per_request.user)),
                m.median(|x| us(x.per_request.sys)),
                count(m.futexes()),
                count(m.switches()),
                count(m.median(|x| x.per_request.voluntary)),
                count(m.median(|x| x.per_request.involuntary)),
                ms(|x| x.p50),
                ms(|x| x.p99),
                m.median(|x| x.per_request.faults),
                m.median(|x| x.peak_rss_kib as f64) / 1024.0,
                m.errors()
            );
        }
        let _ = writeln!(
            s,
            "\n## Other targets (cborgate transcoding against passthrough)\n"
        );
        target_table(&mut s, &self.targets());
        let _ = writeln!(s, "\n| idle watches | proxy RSS per watch |\n|---|---:|");
        for (c, k) in &self.idle {
            let _ = writeln!(
                s,
                "| {} over HTTP/1.1, {} | {k:.1} KiB |",
                self.idle_watches,
                c.name()
            );
        }
        if let Some(h) = &self.idle_h2 {
            let _ = writeln!(
                s,
                "| {} over HTTP/2 (250 per client connection), transcoding, to an HTTP/2 \
                 upstream | {:.1} KiB ({} upstream connections for {} watches) |",
                self.idle_watches, h.kib_per_watch, h.upstream_connections, h.watches
            );
        }
        if !self.errors.is_empty() {
            let _ = writeln!(s, "\n## Errors\n");
            for e in &self.errors {
                let _ = writeln!(s, "- {e}");
            }
        }
        let _ = writeln!(
            s,
            "\n![proxy CPU per request and requests/s, haproxy and nginx next to cborgate](results.png)"
        );
        s
    }

    /// What the run prints: the figures, then every target as PASS, FAIL or SKIP.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for m in &self.results {
            let (lo, hi) = m.range(cpu_us);
            let _ = writeln!(
                s,
                "{:<22} {:<28} {:>9.0} {:<13} {:>8.1} µs CPU per {} ({lo:.1}–{hi:.1}), \
                 {} futex calls, {} context switches{}",
                if m.per == Per::Event {
                    "watch"
                } else {
                    m.scenario
                },
                m.contestant.name(),
                m.rate(),
                m.per.rate_unit(),
                m.cpu_us(),
                m.per.noun(),
                count(m.futexes()),
                count(m.switches()),
                resumed(m),
            );
        }
        for line in &self.skipped {
            let _ = writeln!(s, "{line}");
        }
        for t in self.acceptance().iter().chain(&self.targets()) {
            let _ = writeln!(
                s,
                "{} {:<70} {:>10} (goal {}){}",
                t.status(),
                t.what,
                t.measured_text(),
                t.goal_text(),
                if t.detail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", t.detail)
                }
            );
        }
        s
    }

    /// Six panels: proxy CPU per request for the GET, the POST and the LIST, requests/s
    /// for the GET and the LIST, events/s for the watch; one bar per contestant (the
    /// median, with the range as a whisker), the goals as black ticks.
    pub fn chart(&self, path: &Path) -> Result<(), String> {
        let _ = register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
        let e = |e: &dyn std::fmt::Debug| format!("{e:?}");
        let root = BitMapBackend::new(path, (1500, 900)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let (head, body) = root.split_vertically(70);
        head.draw_text(
            &format!(
                "cborgate against haproxy and nginx: {}, commit {} (median of {} round(s), whiskers: range)",
                self.date, self.commit, self.rounds
            ),
            &("sans-serif", 21).into_font().color(&BLACK),
            (16, 10),
        )
        .map_err(|x| e(&x))?;
        let mut x = 16;
        for c in [HAPROXY, NGINX, PINGORA, PASSTHROUGH, TRANSCODED] {
            head.draw(&Rectangle::new([(x, 44), (x + 14, 58)], colour(c).filled()))
                .map_err(|x| e(&x))?;
            head.draw_text(
                c.name(),
                &("sans-serif", 15).into_font().color(&BLACK),
                (x + 20, 43),
            )
            .map_err(|x| e(&x))?;
            x += 40 + 8 * c.name().len() as i32;
        }
        head.draw(&PathElement::new(
            vec![(x, 51), (x + 18, 51)],
            BLACK.stroke_width(3),
        ))
        .map_err(|x| e(&x))?;
        head.draw_text(
            "goal",
            &("sans-serif", 15).into_font().color(&BLACK),
            (x + 24, 43),
        )
        .map_err(|x| e(&x))?;

        let five = [HAPROXY, NGINX, PINGORA, PASSTHROUGH, TRANSCODED];
        let two = [PASSTHROUGH, TRANSCODED];
        let cpu = |m: &Sample| cpu_us(m);
        let rps = |m: &Sample| m.rate;
        let p = self.cpu(GET_POD, PASSTHROUGH);
        let goals_get = [
            (PASSTHROUGH, 1.5 * self.cpu(GET_POD, HAPROXY)),
            (TRANSCODED, p + 1.5 * us(self.codec.get)),
        ];
        let goals_post = [(TRANSCODED, self.cpu(POST_POD, PASSTHROUGH) + 20.0)];
        let goals_list = [(
            TRANSCODED,
            self.cpu(LIST, HAPROXY) + 1.2 * us(self.codec.list),
        )];
        let goals_watch = [(TRANSCODED, 0.85 * self.rate(WATCH, PASSTHROUGH))];
        type Panel<'a> = (
            &'a str,
            &'a str,
            &'a str,
            &'a [Contestant],
            &'a dyn Fn(&Sample) -> f64,
            &'a [(Contestant, f64)],
        );
        let cpu_unit = "µs per request";
        let panels: [Panel; 6] = [
            (
                "GET pod 7 KB: proxy CPU",
                cpu_unit,
                GET_POD,
                &five,
                &cpu,
                &goals_get,
            ),
            (
                "POST pod: proxy CPU",
                cpu_unit,
                POST_POD,
                &two,
                &cpu,
                &goals_post,
            ),
            (
                "LIST 700 pods: proxy CPU",
                cpu_unit,
                LIST,
                &five,
                &cpu,
                &goals_list,
            ),
            (
                "GET pod 7 KB: requests/s",
                "requests/s",
                GET_POD,
                &five,
                &rps,
                &[],
            ),
            (
                "LIST 700 pods: requests/s",
                "requests/s",
                LIST,
                &five,
                &rps,
                &[],
            ),
            (
                "watch: events/s",
                "events/s",
                WATCH,
                &two,
                &rps,
                &goals_watch,
            ),
        ];
        for (area, (title, unit, scenario, who, f, goals)) in
            body.split_evenly((2, 3)).iter().zip(panels)
        {
            let bars: Vec<Bar> = who
                .iter()
                .filter_map(|&c| {
                    let m = self.get(scenario, c)?;
                    let (lo, hi) = m.range(f);
                    Some(Bar {
                        contestant: c,
                        value: m.median(f),
                        lo,
                        hi,
                        goal: goals.iter().find(|(g, _)| *g == c).map(|(_, v)| *v),
                    })
                })
                .collect();
            panel(area, title, unit, &bars).map_err(|x| e(&x))?;
        }
        root.present().map_err(|x| e(&x))?;
        Ok(())
    }
}

fn target_table(s: &mut String, targets: &[Target]) {
    let _ = writeln!(
        s,
        "| target | measured | goal | result | from |\n|---|---:|---:|:---:|---|"
    );
    for t in targets {
        let status = match t.status() {
            "PASS" => "PASS",
            other => {
                if other == "FAIL" {
                    "**FAIL**"
                } else {
                    "SKIP"
                }
            }
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {status} | {} |",
            t.what,
            t.measured_text(),
            t.goal_text(),
            t.detail
        );
    }
}

/// One bar of a panel.
struct Bar {
    contestant: Contestant,
    value: f64,
    lo: f64,
    hi: f64,
    goal: Option<f64>,
}

fn colour(c: Contestant) -> RGBColor {
    match c {
        HAPROXY => RGBColor(120, 120, 120),
        NGINX => RGBColor(60, 150, 80),
        PINGORA => RGBColor(170, 120, 200),
        PASSTHROUGH => RGBColor(50, 90, 200),
        _ => RGBColor(220, 80, 60),
    }
}

fn panel(
    area: &DrawingArea<BitMapBackend, Shift>,
    title: &str,
    unit: &str,
    bars: &[Bar],
) -> Result<(), Box<dyn std::error::Error>> {
    let finite = |v: f64| v.is_finite().then_some(v);
    let top = bars
        .iter()
        .flat_map(|b| [finite(b.hi), finite(b.value), b.goal.and_then(finite)])
        .flatten()
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.2;
    if bars.is_empty() {
        area.titled(&format!("{title}: not measured"), ("sans-serif", 18))?;
        return Ok(());
    }
    let n = bars.len() as u32;
    // `0..n - 1` has n segments; the right edge of the last one is `Last` (one bar:
    // `0..1`, two segments, the second empty).
    let right = |i: u32| {
        if i + 1 == n && n > 1 {
            SegmentValue::Last
        } else {
            SegmentValue::Exact(i + 1)
        }
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(70)
        .build_cartesian_2d((0u32..(n - 1).max(1)).into_segmented(), 0f64..top)?;
    let short: Vec<&str> = bars.iter().map(|b| b.contestant.short()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(unit)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => short.get(*i as usize).copied().unwrap_or("").into(),
            _ => String::new(),
        })
        .y_label_formatter(&|v| {
            if top >= 10_000.0 {
                format!("{:.0}k", v / 1000.0)
            } else {
                format!("{v:.0}")
            }
        })
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, b) in bars.iter().enumerate() {
        let i = i as u32;
        if !b.value.is_finite() {
            continue;
        }
        let mut r = Rectangle::new(
            [(SegmentValue::Exact(i), 0.0), (right(i), b.value)],
            colour(b.contestant).filled(),
        );
        r.set_margin(0, 0, 12, 12);
        chart.draw_series(std::iter::once(r))?;
        if b.lo.is_finite() && b.hi > b.lo {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![
                    (SegmentValue::CenterOf(i), b.lo),
                    (SegmentValue::CenterOf(i), b.hi),
                ],
                BLACK.stroke_width(2),
            )))?;
        }
        let label = if b.value >= 10_000.0 {
            format!("{:.1}k", b.value / 1000.0)
        } else if b.value >= 100.0 {
            format!("{:.0}", b.value)
        } else {
            format!("{:.1}", b.value)
        };
        chart.draw_series(std::iter::once(Text::new(
            label,
            (SegmentValue::Exact(i), b.value.max(b.hi) + top * 0.02),
            ("sans-serif", 14),
        )))?;
        if let Some(g) = b.goal.filter(|g| g.is_finite()) {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(SegmentValue::Exact(i), g), (right(i), g)],
                BLACK.stroke_width(3),
            )))?;
        }
    }
    Ok(())
}

/// `10000` → `10,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// CPU model and count, from /proc/cpuinfo.
fn machine() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, v)| v.trim())
        .to_string();
    let cpus = info.lines().filter(|l| l.starts_with("processor")).count();
    format!("{cpus} × {model}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(300), "300");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn a_target_without_its_figures_is_skipped() {
        let t = |m: f64, g: f64| target("t".into(), m, g, false, "µs");
        assert_eq!(t(10.0, 12.0).status(), "PASS");
        assert_eq!(t(13.0, 12.0).status(), "FAIL");
        assert_eq!(t(f64::NAN, 12.0).status(), "SKIP");
        assert_eq!(t(10.0, f64::NAN).status(), "SKIP");
        let h = target("h".into(), 0.9, 0.85, true, "×");
        assert_eq!(h.status(), "PASS");
        assert_eq!(h.goal_text(), "≥ 0.85×");
    }
}
