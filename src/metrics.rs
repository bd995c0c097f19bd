//! Every Prometheus metric family cborgate exports (WIRE.md §6), defined in
//! one place, and the text rendering for `/metrics` that lists every family
//! from start-up, even before it has a sample. On Linux the standard
//! `process_*` families (CPU seconds, resident memory, open and maximum file
//! descriptors, threads, start time) come along, as from any Prometheus
//! client library, read from `/proc` at each scrape ([`process_families`]).

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use std::sync::OnceLock;

/// Sub-millisecond buckets for codec time (per body or per watch event).
const CODEC_BUCKETS: &[f64] = &[
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0,
];
const REQUEST_BUCKETS: &[f64] = &[
    0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

pub struct Metrics {
    registry: Registry,
    /// (name, type, help) of every family, for the HELP/TYPE lines.
    families: Vec<(&'static str, &'static str, &'static str)>,
    pub requests_total: IntCounterVec,
    pub request_duration_seconds: HistogramVec,
    pub codec_duration_seconds: HistogramVec,
    pub codec_bytes_total: IntCounterVec,
    pub fallbacks_total: IntCounterVec,
    pub unsupported_media_type_total: IntCounterVec,
    pub not_acceptable_total: IntCounterVec,
    pub transcode_errors_total: IntCounterVec,
    pub watch_streams_active: IntGauge,
    pub watch_events_total: IntCounterVec,
    pub upgrades_active: IntGaugeVec,
    pub build_info: IntGaugeVec,
    pub upstream_resolve_failures_total: IntCounter,
    pub upstream_ready: IntGauge,
    pub reloads_total: IntCounterVec,
    pub panics_total: IntCounter,
}

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let mut families = Vec::new();
        macro_rules! family {
            ($m:expr, $name:literal, $kind:literal, $help:literal) => {{
                let m = $m;
                registry
                    .register(Box::new(m.clone()))
                    .expect("metric names are unique");
                families.push(($name, $kind, $help));
                m
            }};
        }
        let counter = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
        };
        let hist = |name: &str, help: &str, labels: &[&str], buckets: &[f64]| {
            HistogramVec::new(
                HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                labels,
            )
            .expect("valid metric")
        };
        let m = Metrics {
            requests_total: family!(
                counter("cborgate_requests_total", "Requests handled, by normalised verb, status code and the request and response body formats.", &["verb", "code", "request_format", "response_format"]),
                "cborgate_requests_total", "counter", "Requests handled, by normalised verb, status code and the request and response body formats."),
            request_duration_seconds: family!(
                hist("cborgate_request_duration_seconds", "Time from request head to the end of the response, by verb and response format.", &["verb", "response_format"], REQUEST_BUCKETS),
                "cborgate_request_duration_seconds", "histogram", "Time from request head to the end of the response, by verb and response format."),
            codec_duration_seconds: family!(
                hist("cborgate_codec_duration_seconds", "Time spent transcoding, per body or per watch event.", &["direction", "from", "to"], CODEC_BUCKETS),
                "cborgate_codec_duration_seconds", "histogram", "Time spent transcoding, per body or per watch event."),
            codec_bytes_total: family!(
                counter("cborgate_codec_bytes_total", "Bytes through the codec, by direction (request or response) and format (the format of the counted bytes).", &["direction", "format"]),
                "cborgate_codec_bytes_total", "counter", "Bytes through the codec, by direction (request or response) and format (the format of the counted bytes)."),
            fallbacks_total: family!(
                counter("cborgate_fallbacks_total", "Requests replayed or re-routed to JSON because the upstream refused CBOR.", &["reason"]),
                "cborgate_fallbacks_total", "counter", "Requests replayed or re-routed to JSON because the upstream refused CBOR."),
            unsupported_media_type_total: family!(
                counter("cborgate_unsupported_media_type_total", "415 responses, by origin (proxy: answered by cborgate; upstream: sent by the apiserver).", &["origin"]),
                "cborgate_unsupported_media_type_total", "counter", "415 responses, by origin (proxy: answered by cborgate; upstream: sent by the apiserver)."),
            not_acceptable_total: family!(
                counter("cborgate_not_acceptable_total", "406 responses, by origin (proxy or upstream).", &["origin"]),
                "cborgate_not_acceptable_total", "counter", "406 responses, by origin (proxy or upstream)."),
            transcode_errors_total: family!(
                counter("cborgate_transcode_errors_total", "Bodies that could not be transcoded, by direction and reason.", &["direction", "reason"]),
                "cborgate_transcode_errors_total", "counter", "Bodies that could not be transcoded, by direction and reason."),
            watch_streams_active: family!(
                IntGauge::new("cborgate_watch_streams_active", "Watch streams currently open through the proxy.").expect("valid metric"),
                "cborgate_watch_streams_active", "gauge", "Watch streams currently open through the proxy."),
            watch_events_total: family!(
                counter("cborgate_watch_events_total", "Watch events delivered to clients, by the format the client received.", &["format"]),
                "cborgate_watch_events_total", "counter", "Watch events delivered to clients, by the format the client received."),
            upgrades_active: family!(
                IntGaugeVec::new(Opts::new("cborgate_upgrades_active", "Upgraded connections (exec, attach, port-forward) currently open, by protocol."), &["protocol"]).expect("valid metric"),
                "cborgate_upgrades_active", "gauge", "Upgraded connections (exec, attach, port-forward) currently open, by protocol."),
            build_info: family!(
                IntGaugeVec::new(Opts::new("cborgate_build_info", "Always 1; the version label says which cborgate is running."), &["version"]).expect("valid metric"),
                "cborgate_build_info", "gauge", "Always 1; the version label says which cborgate is running."),
            upstream_resolve_failures_total: family!(
                IntCounter::new("cborgate_upstream_resolve_failures_total", "Failed DNS lookups of the upstream's host name.").expect("valid metric"),
                "cborgate_upstream_resolve_failures_total", "counter", "Failed DNS lookups of the upstream's host name."),
            upstream_ready: family!(
                IntGauge::new("cborgate_upstream_ready", "1 while the upstream answers the readiness probe over the same TLS and credentials as requests, 0 otherwise.").expect("valid metric"),
                "cborgate_upstream_ready", "gauge", "1 while the upstream answers the readiness probe over the same TLS and credentials as requests, 0 otherwise."),
            reloads_total: family!(
                counter("cborgate_reloads_total", "Reloads of certificates, keys and CA bundles from disk, by file (serving, upstream_ca, upstream_client) and result (success, failure).", &["file", "result"]),
                "cborgate_reloads_total", "counter", "Reloads of certificates, keys and CA bundles from disk, by file (serving, upstream_ca, upstream_client) and result (success, failure)."),
            panics_total: family!(
                IntCounter::new("cborgate_panics_total", "Panics caught while serving a request (each is a bug; the request was answered or its connection closed).").expect("valid metric"),
                "cborgate_panics_total", "counter", "Panics caught while serving a request (each is a bug; the request was answered or its connection closed)."),
            registry,
            families,
        };
        m.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        for origin in ["proxy", "upstream"] {
            m.unsupported_media_type_total.with_label_values(&[origin]);
            m.not_acceptable_total.with_label_values(&[origin]);
        }
        m
    }

    /// The Prometheus text exposition of every family.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        let mut text = String::from_utf8(buf).unwrap_or_default();
        for (name, kind, help) in &self.families {
            if !text.contains(&format!("# TYPE {name} ")) {
                text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
            }
        }
        text.push_str(&process_families());
        text
    }

    /// Names of every family, for tests and docs.
    pub fn family_names(&self) -> Vec<&'static str> {
        self.families.iter().map(|f| f.0).collect()
    }
}

/// The standard `process_*` families of the Prometheus client libraries, in
/// text format, for this process: CPU seconds, resident and virtual memory,
/// threads, start time, open and maximum file descriptors. Read from `/proc`
/// (Linux); a value that cannot be read is left out, and elsewhere there are
/// none. Units as the Go client's: `/proc` counts CPU time in USER_HZ ticks,
/// which is 100 per second on every Linux architecture.
pub fn process_families() -> String {
    const USER_HZ: f64 = 100.0;
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, value: Option<f64>| {
        if let Some(v) = value {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
            ));
        }
    };
    let read = |path: &str| std::fs::read_to_string(path).ok();
    // /proc/self/stat: the fields after the command name, which ends at the
    // last ')'; `f(n)` is field n as man 5 proc numbers them (state is 3).
    let stat = read("/proc/self/stat");
    let fields: Vec<&str> = stat
        .as_deref()
        .and_then(|s| s.rsplit_once(')'))
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let f = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    // /proc/self/status: "VmRSS:   1234 kB".
    let status = read("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| number_after(&status, key).map(|k| k * 1024.0);
    let boot_time = read("/proc/stat").and_then(|s| number_after(&s, "btime "));
    family(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        f(14).zip(f(15)).map(|(u, s)| (u + s) / USER_HZ),
    );
    family(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        kib("VmRSS:"),
    );
    family(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        kib("VmSize:"),
    );
    family(
        "process_threads",
        "gauge",
        "Number of OS threads in the process.",
        f(20),
    );
    family(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        f(22)
            .zip(boot_time)
            .map(|(ticks, boot)| boot + ticks / USER_HZ),
    );
    family(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as f64),
    );
    family(
        "process_max_fds",
        "gauge",
        "Maximum number of open file descriptors.",
        read("/proc/self/limits").and_then(|s| number_after(&s, "Max open files")),
    );
    out
}

/// The first number after `prefix` on the first line of `text` that starts
/// with it (`/proc`'s "key: value unit" and "name soft hard" lines).
fn number_after(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The process-wide metrics.
pub fn metrics() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(Metrics::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_listed_from_start_up() {
        let text = metrics().render();
        for name in [
            "cborgate_requests_total",
            "cborgate_request_duration_seconds",
            "cborgate_codec_duration_seconds",
            "cborgate_codec_bytes_total",
            "cborgate_fallbacks_total",
            "cborgate_unsupported_media_type_total",
            "cborgate_not_acceptable_total",
            "cborgate_transcode_errors_total",
            "cborgate_watch_streams_active",
            "cborgate_watch_events_total",
            "cborgate_upgrades_active",
            "cborgate_build_info",
        ] {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name} missing");
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} help missing"
            );
        }
        assert!(text.contains("cborgate_build_info{version=\""));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_metrics_are_exported_with_samples() {
        // Some CPU time to count (fractions of a second must show).
        let spin = std::time::Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let text = metrics().render();
        let sample = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} sample in:\n{text}"))
                .trim()
                .parse()
                .unwrap()
        };
        assert!(sample("process_resident_memory_bytes") > 1e6);
        assert!(sample("process_open_fds") >= 3.0);
        assert!(sample("process_max_fds") >= sample("process_open_fds"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = sample("process_start_time_seconds");
        assert!(
            started <= now + 1.0 && started > now - 3600.0,
            "{started} vs {now}"
        );
        assert!(sample("process_virtual_memory_bytes") >= sample("process_resident_memory_bytes"));
        assert!(text.contains("# TYPE process_cpu_seconds_total counter\n"));
        assert!(sample("process_cpu_seconds_total") >= 0.05);
        assert!(sample("process_threads") >= 1.0);
    }
}
