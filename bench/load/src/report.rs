//! What a run wrote: `bench/RESULTS.md` (the measurements, and each target as a measured
//! ratio next to its goal) and `bench/results.png` (the ratios as a bar chart).

use crate::{Config, Measured};
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
    pub pod_bytes: usize,
    pub list_bytes: usize,
    pub event_bytes: usize,
    pub results: Vec<Measured>,
    /// RSS per idle watch, KiB.
    pub idle: Vec<(Config, f64)>,
    /// Idle transcoded watches over HTTP/2, to an HTTP/2 upstream.
    pub idle_h2: Option<IdleH2>,
    /// The codec's own time for the LIST body (JSON → CBOR, in this process, release
    /// build, best of several), for the LIST CPU target.
    pub list_codec_time: Duration,
    pub errors: Vec<String>,
}

/// What 1,000 idle transcoded watches over HTTP/2 cost (after 100 to warm up).
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
}

impl Target {
    pub fn met(&self) -> bool {
        if self.higher_is_better {
            self.measured >= self.goal
        } else {
            self.measured <= self.goal
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn us(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}

impl Report {
    fn get(&self, scenario_prefix: &str, config: Config) -> Option<&Measured> {
        self.results
            .iter()
            .find(|m| m.scenario.starts_with(scenario_prefix) && m.config == config)
    }

    fn ratio(&self, scenario: &str, f: impl Fn(&Measured) -> f64) -> f64 {
        match (
            self.get(scenario, Config::Transcoding),
            self.get(scenario, Config::Passthrough),
        ) {
            (Some(t), Some(p)) if f(p) > 0.0 => f(t) / f(p),
            _ => f64::NAN,
        }
    }

    pub fn targets(&self) -> Vec<Target> {
        let rps = |m: &Measured| m.run.per_second();
        let cpu = |m: &Measured| m.per_request.cpu().as_secs_f64();
        let get = |scenario: &str, c: Config, f: &dyn Fn(&Measured) -> f64| {
            self.get(scenario, c).map_or(f64::NAN, f)
        };
        let events = |c: Config| {
            get("watch", c, &|m: &Measured| {
                m.events_per_second.unwrap_or(f64::NAN)
            })
        };
        let faults = |m: &Measured| m.per_request.faults;
        let extra_faults = |scenario: &str| {
            get(scenario, Config::Transcoding, &faults)
                - get(scenario, Config::Passthrough, &faults)
        };
        let idle = self
            .idle
            .iter()
            .find(|(c, _)| *c == Config::Transcoding)
            .map_or(f64::NAN, |(_, k)| *k);
        // LIST: transcoding CPU ≤ passthrough's + 1.2 × the codec's own time, as a ratio
        // of the allowance (≤ 1 met).
        let list_allowance =
            get("LIST", Config::Passthrough, &cpu) + 1.2 * self.list_codec_time.as_secs_f64();
        let ratio = |what: &str, measured: f64, goal: f64, higher: bool| Target {
            what: what.into(),
            measured,
            goal,
            higher_is_better: higher,
            unit: "×",
        };
        vec![
            ratio(
                "GET 7 KB: transcoding / passthrough requests/s",
                self.ratio("GET", rps),
                0.9,
                true,
            ),
            ratio(
                "GET 7 KB: transcoding / passthrough proxy CPU per request",
                self.ratio("GET", cpu),
                1.15,
                false,
            ),
            ratio(
                "LIST 700 pods: transcoding / passthrough requests/s",
                self.ratio("LIST", rps),
                0.7,
                true,
            ),
            ratio(
                "LIST 700 pods: transcoding CPU / (passthrough CPU + 1.2 × codec time)",
                get("LIST", Config::Transcoding, &cpu) / list_allowance,
                1.0,
                false,
            ),
            ratio(
                "watch: transcoded / passthrough events/s",
                events(Config::Transcoding) / events(Config::Passthrough),
                0.85,
                true,
            ),
            Target {
                what: "GET 7 KB: page faults per request, transcoding − passthrough".into(),
                measured: extra_faults("GET"),
                goal: 8.0,
                higher_is_better: false,
                unit: "faults",
            },
            Target {
                what: "LIST 700 pods: page faults per request, transcoding − passthrough".into(),
                measured: extra_faults("LIST"),
                goal: 8.0,
                higher_is_better: false,
                unit: "faults",
            },
            Target {
                what: "watch: page faults per event, transcoding − passthrough".into(),
                measured: extra_faults("watch"),
                goal: 8.0,
                higher_is_better: false,
                unit: "faults",
            },
            Target {
                what: "idle transcoded watch (HTTP/1.1): proxy RSS per watch".into(),
                measured: idle,
                goal: 32.0,
                higher_is_better: false,
                unit: "KiB",
            },
            Target {
                what: "idle transcoded watch (HTTP/2 both sides): proxy RSS per watch".into(),
                measured: self.idle_h2.as_ref().map_or(f64::NAN, |h| h.kib_per_watch),
                goal: 12.0,
                higher_is_better: false,
                unit: "KiB",
            },
            Target {
                what: "HTTP/2 watches per upstream connection".into(),
                measured: self.idle_h2.as_ref().map_or(f64::NAN, |h| {
                    h.watches as f64 / h.upstream_connections.max(1) as f64
                }),
                goal: 100.0,
                higher_is_better: true,
                unit: "watches",
            },
        ]
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# End-to-end results\n");
        let _ = writeln!(
            s,
            "Written by `bench/load.sh` (see `bench/README.md`); do not \
             edit by hand.\n\n- **Run:** {}, commit `{}`\n- **Machine:** {}\n- **Method:** \
             {} round(s) of {:.1} s per scenario and configuration, taking turns; best round \
             kept. A fresh `cborgate serve --mode legacy` per run, in front of a static-body \
             upstream; client, upstream and proxy share the machine.\n- **Bodies:** pod {} \
             bytes of JSON, list {} bytes (700 pods), watch events {} bytes each on average.\n",
            self.date,
            self.commit,
            machine(),
            self.rounds,
            self.seconds,
            self.pod_bytes,
            self.list_bytes,
            self.event_bytes
        );
        let _ = writeln!(s, "## Targets (ratios measured within this run)\n");
        let _ = writeln!(
            s,
            "| target | measured | goal | met |\n|---|---:|---:|:---:|"
        );
        for t in self.targets() {
            let (m, g) = if t.unit == "×" {
                (
                    format!("{:.2}×", t.measured),
                    format!("{} {:.2}×", cmp(&t), t.goal),
                )
            } else {
                (
                    format!("{:.1} {}", t.measured, t.unit),
                    format!("{} {:.0} {}", cmp(&t), t.goal, t.unit),
                )
            };
            let _ = writeln!(
                s,
                "| {} | {m} | {g} | {} |",
                t.what,
                if t.met() { "yes" } else { "**no**" }
            );
        }
        let _ = writeln!(
            s,
            "\n## Measurements\n\n| scenario | configuration | requests/s | p50 ms | p99 ms | \
             proxy CPU µs/request (user + sys) | page faults/request | proxy peak RSS MiB | errors |\n\
             |---|---|---:|---:|---:|---:|---:|---:|---:|"
        );
        for m in &self.results {
            let rate = match m.events_per_second {
                Some(e) => format!("{e:.0} events/s"),
                None => format!("{:.0}", m.run.per_second()),
            };
            let (p50, p99) = if m.events_per_second.is_some() {
                ("–".to_string(), "–".to_string())
            } else {
                (ms(m.run.percentile(0.5)), ms(m.run.percentile(0.99)))
            };
            let _ = writeln!(
                s,
                "| {} | {} | {rate} | {p50} | {p99} | {} ({} + {}){} | {:.1} | {:.1} | {} |",
                m.scenario,
                m.config.name(),
                us(m.per_request.cpu()),
                us(m.per_request.user),
                us(m.per_request.sys),
                if m.events_per_second.is_some() {
                    " per event"
                } else {
                    ""
                },
                m.per_request.faults,
                m.peak_rss_kib as f64 / 1024.0,
                m.run.errors
            );
        }
        let _ = writeln!(s, "\n| idle watches | proxy RSS per watch |\n|---|---:|");
        for (c, k) in &self.idle {
            let _ = writeln!(s, "| 1,000 over HTTP/1.1, {} | {k:.1} KiB |", c.name());
        }
        if let Some(h) = &self.idle_h2 {
            let _ = writeln!(
                s,
                "| 1,000 over HTTP/2 (250 per client connection), transcoding, to an HTTP/2 \
                 upstream | {:.1} KiB ({} upstream connections for {} watches) |",
                h.kib_per_watch, h.upstream_connections, h.watches
            );
        }
        if !self.errors.is_empty() {
            let _ = writeln!(s, "\n## Errors\n");
            for e in &self.errors {
                let _ = writeln!(s, "- {e}");
            }
        }
        let _ = writeln!(s, "\n![transcoding / passthrough](results.png)");
        s
    }

    pub fn summary(&self) -> String {
        let mut s = String::new();
        for t in self.targets() {
            let _ = writeln!(
                s,
                "{:<62} {:>10.2} {:<8} goal {} {} {}",
                t.what,
                t.measured,
                t.unit,
                cmp(&t),
                t.goal,
                if t.met() { "met" } else { "NOT MET" }
            );
        }
        s
    }

    /// Bars: transcoding / passthrough, for requests/s and CPU per request, per scenario,
    /// with each scenario's goal drawn as a tick.
    pub fn chart(&self, path: &Path) -> Result<(), String> {
        let _ = register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
        let scenarios = ["GET", "LIST", "POST", "watch"];
        let labels = [
            "GET pod 7 KB",
            "LIST 700 pods",
            "POST pod",
            "watch 10,000 events",
        ];
        let rps = |m: &Measured| m.events_per_second.unwrap_or_else(|| m.run.per_second());
        let cpu = |m: &Measured| m.per_request.cpu().as_secs_f64();
        let thr: Vec<f64> = scenarios.iter().map(|s| self.ratio(s, rps)).collect();
        let cpus: Vec<f64> = scenarios.iter().map(|s| self.ratio(s, cpu)).collect();
        let top = thr
            .iter()
            .chain(&cpus)
            .copied()
            .filter(|v| v.is_finite())
            .fold(1.5f64, f64::max)
            * 1.35;
        let e = |e: &dyn std::fmt::Debug| format!("{e:?}");
        let root = BitMapBackend::new(path, (1100, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "cborgate: transcoding / passthrough ({}, {})",
                    self.date, self.commit
                ),
                ("sans-serif", 22),
            )
            .margin(16)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..scenarios.len() as f64, 0f64..top)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("ratio (passthrough = 1)")
            .draw()
            .map_err(|x| e(&x))?;
        // Two bars per scenario: throughput on the left, CPU on the right.
        let bars = [
            (
                &thr,
                0.12,
                RGBColor(50, 90, 200),
                "requests/s (watch: events/s)",
            ),
            (
                &cpus,
                0.52,
                RGBColor(220, 80, 60),
                "proxy CPU per request (watch: per event)",
            ),
        ];
        for (values, off, colour, label) in bars {
            chart
                .draw_series(
                    values
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| v.is_finite())
                        .map(|(i, v)| {
                            let x = i as f64 + off;
                            Rectangle::new([(x, 0.0), (x + 0.36, *v)], colour.filled())
                        }),
                )
                .map_err(|x| e(&x))?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled())
                });
        }
        // Goals: GET requests/s ≥ 0.9, GET CPU ≤ 1.25, LIST requests/s ≥ 0.7.
        let goals = [(0usize, 0.12, 0.9), (0, 0.52, 1.15), (1, 0.12, 0.7)];
        chart
            .draw_series(goals.iter().map(|&(i, off, g)| {
                let x = i as f64 + off;
                PathElement::new(vec![(x - 0.03, g), (x + 0.39, g)], BLACK.stroke_width(3))
            }))
            .map_err(|x| e(&x))?
            .label("goal")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK.stroke_width(3)));
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 1.0), (scenarios.len() as f64, 1.0)],
                BLACK.mix(0.5),
            )))
            .map_err(|x| e(&x))?;
        for (i, (l, (t, c))) in labels.iter().zip(thr.iter().zip(&cpus)).enumerate() {
            chart
                .draw_series(std::iter::once(Text::new(
                    l.to_string(),
                    (i as f64 + 0.12, top * 0.80),
                    ("sans-serif", 16).into_font().color(&BLACK),
                )))
                .map_err(|x| e(&x))?;
            for (v, off) in [(t, 0.14), (c, 0.54)] {
                if v.is_finite() {
                    chart
                        .draw_series(std::iter::once(Text::new(
                            format!("{v:.2}"),
                            (i as f64 + off, v + top * 0.035),
                            ("sans-serif", 15),
                        )))
                        .map_err(|x| e(&x))?;
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .draw()
            .map_err(|x| e(&x))?;
        root.present().map_err(|x| e(&x))?;
        Ok(())
    }
}

fn cmp(t: &Target) -> &'static str {
    if t.higher_is_better {
        "≥"
    } else {
        "≤"
    }
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
