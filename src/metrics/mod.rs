//! Every Prometheus metric family cborgate exports (docs/wire.md §6), defined in
//! one place, and the text rendering for `/metrics` that lists every family
//! from start-up, even before it has a sample, and every series an alert or
//! dashboard panel selects (over closed label sets) at zero. On Linux the standard
//! `process_*` families (CPU seconds, resident memory, open and maximum file
//! descriptors, threads, start time) come along, as from any Prometheus
//! client library, read from `/proc` at each scrape ([`process_families`]).
//!
//! The bottom room: it imports nothing of the crate, so every ring may count into it.
//! The label sets that the core defines (client families, retry and transcode-error
//! reasons, authentication methods, the labels of an unclassified request) are handed
//! in at start-up as a [`Vocabulary`] ([`Metrics::count_at_zero`]). The `group` and
//! `resource` labels are bounded by `proxy::request_labels::ResourceLabels`, the cap on
//! distinct (group, resource) pairs (`metrics.max_resources`), an object the proxy owns:
//! each pair is interned once, with its codec series, and every later request for it
//! gets the same `&'static` labels without allocating.

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
/// kube-apiserver's own for `apiserver_request_duration_seconds` (1.36), so that the
/// mixin's thresholds (1, 5 and 30 s) are bucket boundaries on both sides.
pub const REQUEST_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// The `component` label of the request families: kube-aggregator's precedent
/// (`component="aggregator"` on the apiserver's own families) for a server in front.
pub const COMPONENT: &str = "cborgate";

/// The labels `cborgate_requests_total` shares with `apiserver_request_total`, in order
/// (the first eight), then cborgate's own (`component` is a constant label).
pub const REQUEST_LABELS: &[&str] = &[
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "code",
    "request_format",
    "response_format",
    "client",
];
/// The labels `cborgate_request_duration_seconds` shares with
/// `apiserver_request_duration_seconds`, then the response format.
pub const DURATION_LABELS: &[&str] = &[
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "response_format",
];

/// The name of every cborgate family, in definition order: what `/metrics` lists from
/// start-up. Public so the end-to-end tests check the running binary against the same
/// list (a unit test below holds it equal to the families [`Metrics`] defines).
pub const FAMILIES: &[&str] = &[
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
    "cborgate_client_errors_total",
    "cborgate_log_lines_dropped_total",
    "cborgate_upstream_resolve_failures_total",
    "cborgate_upstream_retries_total",
    "cborgate_upstream_connections_opened_total",
    "cborgate_upstream_ready",
    "cborgate_reloads_total",
    "cborgate_authentications_total",
    "cborgate_panics_total",
    "cborgate_request_body_buffered_bytes",
    "cborgate_connections_open",
    "cborgate_connections_limit",
    "cborgate_connections_refused_total",
    "cborgate_request_head_timeouts_total",
    "cborgate_memory_trims_total",
    "cborgate_certificate_expiry_timestamp_seconds",
    "cborgate_cbor_protected_total",
    "cborgate_upstream_cbor",
    "cborgate_reload_last_success",
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
    /// `kind` is one of [`CLIENT_ERROR_KINDS`]: client behaviour pingora logs as an
    /// error, counted here instead (see the `logs` module).
    pub client_errors_total: IntCounterVec,
    /// Log lines the log's queue had no room for (see the `logs` module).
    pub log_lines_dropped_total: IntCounter,
    pub upstream_resolve_failures_total: IntCounter,
    /// `reason` is one of [`Vocabulary::retry_reasons`]: `refused`, the upstream refused the request
    /// unprocessed (an HTTP/2 GOAWAY or REFUSED_STREAM); `ended_before_body`, the upstream
    /// ended the request's HTTP/2 stream before it had the whole body; `connection`, an
    /// idempotent request whose reused connection failed.
    pub upstream_retries_total: IntCounterVec,
    pub upstream_connections_opened_total: IntCounter,
    pub upstream_ready: IntGauge,
    /// 0 while upgrade mode knows the upstream refuses CBOR, 1 otherwise.
    pub upstream_cbor: IntGauge,
    /// `file` is one of [`RELOAD_FILES`]: 1 when its last load succeeded, 0 when it failed.
    pub reload_last_success: IntGaugeVec,
    /// `file` is one of [`RELOAD_FILES`], `result` one of [`RELOAD_RESULTS`].
    pub reloads_total: IntCounterVec,
    /// `method` is one of [`Vocabulary::auth_methods`], `result` one of
    /// [`Vocabulary::auth_results`]; never a user.
    pub authentications_total: IntCounterVec,
    pub panics_total: IntCounter,
    /// Request body bytes held in memory (`limits::budget`), against
    /// `server.max_buffered_body_bytes`.
    pub request_body_buffered_bytes: IntGauge,
    pub connections_open: IntGauge,
    pub connections_limit: IntGauge,
    pub connections_refused_total: IntCounter,
    pub request_head_timeouts_total: IntCounter,
    pub memory_trims_total: IntCounter,
    /// `file` is one of [`RELOAD_FILES`]; a sample only for the files configured.
    pub certificate_expiry_timestamp_seconds: IntGaugeVec,
    /// `client` is one of [`Vocabulary::client_families`], `reason` one of
    /// [`Vocabulary::protect_reasons`].
    pub cbor_protected_total: IntCounterVec,
}

/// Who answered a 415 or a 406: the `origin` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// cborgate, from the request head.
    Proxy,
    /// The upstream.
    Upstream,
}

impl Origin {
    pub const ALL: [Origin; 2] = [Origin::Proxy, Origin::Upstream];

    pub const fn label(self) -> &'static str {
        match self {
            Origin::Proxy => "proxy",
            Origin::Upstream => "upstream",
        }
    }
}

/// A gauge counted up while this is held and down when it is dropped, on every path
/// (panics included): `cborgate_watch_streams_active`, `cborgate_upgrades_active`.
#[derive(Debug)]
pub struct GaugeHeld(IntGauge);

impl GaugeHeld {
    pub fn hold(gauge: &IntGauge) -> GaugeHeld {
        gauge.inc();
        GaugeHeld(gauge.clone())
    }
}

impl Drop for GaugeHeld {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// One direction and pair of formats of the codec families, for one (group, resource):
/// its time, and the bytes on each side.
pub struct CodecSeries {
    pub duration: prometheus::Histogram,
    pub bytes_from: IntCounter,
    pub bytes_to: IntCounter,
}

/// The `file` label values of `cborgate_reloads_total`.
/// The `kind` label of `cborgate_client_errors_total` (`logs::ClientError` labels, test-checked).
pub const CLIENT_ERROR_KINDS: [&str; 7] = [
    "tls_handshake",
    "handshake_timeout",
    "h2_handshake",
    "disconnect",
    "read_timeout",
    "bad_request",
    "too_many_headers",
];

pub const RELOAD_FILES: [&str; 5] = [
    "serving",
    "upstream_ca",
    "upstream_client",
    "client_ca",
    "requestheader_ca",
];
/// The `result` label values of `cborgate_reloads_total`.
pub const RELOAD_RESULTS: [&str; 2] = ["success", "failure"];

/// The `fallbacks_total` reasons the proxy counts (src/proxy/mod.rs, where the
/// upstream answers 415 to a CBOR body and the request is replayed as JSON).
const FALLBACK_REASONS: [&str; 1] = ["unsupported_media_type"];

/// Every transcoding the proxy runs, and its (direction, from, to) labels
/// (src/proxy/body.rs: `BodyCodec::request`, `request_to_cbor`, `response`,
/// `response_to_json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transcoding {
    /// A CBOR request body made JSON for a JSON-only upstream.
    RequestCborToJson,
    /// Upgrade mode: a JSON request body made CBOR.
    RequestJsonToCbor,
    /// A JSON answer (or watch) made CBOR for a CBOR client.
    ResponseJsonToCbor,
    /// Upgrade mode: a CBOR answer made JSON.
    ResponseCborToJson,
}

impl Transcoding {
    pub const ALL: [Transcoding; 4] = [
        Transcoding::RequestCborToJson,
        Transcoding::RequestJsonToCbor,
        Transcoding::ResponseJsonToCbor,
        Transcoding::ResponseCborToJson,
    ];

    /// The `direction`, `from` and `to` labels.
    pub const fn labels(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Transcoding::RequestCborToJson => ("request", "cbor", "json"),
            Transcoding::RequestJsonToCbor => ("request", "json", "cbor"),
            Transcoding::ResponseJsonToCbor => ("response", "json", "cbor"),
            Transcoding::ResponseCborToJson => ("response", "cbor", "json"),
        }
    }

    /// The `direction` label alone.
    pub const fn direction(self) -> &'static str {
        self.labels().0
    }
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let registry = Registry::new();
        let mut families = Vec::new();
        // `family!(type, name, help, make)`: `make(name, help)` builds the
        // metric; it is registered and its HELP and TYPE lines are recorded.
        macro_rules! family {
            ($kind:literal, $name:literal, $help:literal, $make:expr) => {{
                let m = $make($name, $help);
                registry
                    .register(Box::new(m.clone()))
                    .expect("metric names are unique");
                families.push(($name, $kind, $help));
                m
            }};
        }
        let component = |opts: Opts| opts.const_label("component", COMPONENT);
        let counter = |labels: &'static [&'static str]| {
            move |name: &str, help: &str| {
                IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
            }
        };
        let hist = |labels: &'static [&'static str], buckets: &'static [f64]| {
            move |name: &str, help: &str| {
                HistogramVec::new(
                    HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                    labels,
                )
                .expect("valid metric")
            }
        };
        let gauge = |name: &str, help: &str| IntGauge::new(name, help).expect("valid metric");
        let gauges = |labels: &'static [&'static str]| {
            move |name: &str, help: &str| {
                IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
            }
        };
        let count = |name: &str, help: &str| IntCounter::new(name, help).expect("valid metric");
        let m = Metrics {
            requests_total: family!("counter", "cborgate_requests_total",
                "Requests handled, with apiserver_request_total's labels and values (verb, dry_run, group, version, resource, subresource, scope, code; component=cborgate; resources bounded by metrics.max_resources), and the request and response body formats and client family.",
                |name: &str, help: &str| IntCounterVec::new(component(Opts::new(name, help)), REQUEST_LABELS).expect("valid metric")),
            request_duration_seconds: family!("histogram", "cborgate_request_duration_seconds",
                "Time from request head to the end of the response, with apiserver_request_duration_seconds' labels and buckets (component=cborgate), and the response format.",
                |name: &str, help: &str| HistogramVec::new(
                    HistogramOpts::new(name, help)
                        .const_label("component", COMPONENT)
                        .buckets(REQUEST_BUCKETS.to_vec()),
                    DURATION_LABELS,
                )
                .expect("valid metric")),
            codec_duration_seconds: family!("histogram", "cborgate_codec_duration_seconds",
                "Time spent transcoding, per body or per watch event, by direction, formats, API group and resource.",
                hist(&["direction", "from", "to", "group", "resource"], CODEC_BUCKETS)),
            codec_bytes_total: family!("counter", "cborgate_codec_bytes_total",
                "Bytes through the codec, by direction (request or response), format (the format of the counted bytes: the same bodies are counted once as JSON and once as CBOR), API group and resource.",
                counter(&["direction", "format", "group", "resource"])),
            fallbacks_total: family!("counter", "cborgate_fallbacks_total",
                "Requests replayed or re-routed to JSON because the upstream refused CBOR, by reason, API group, resource and client family.",
                counter(&["reason", "group", "resource", "client"])),
            unsupported_media_type_total: family!("counter", "cborgate_unsupported_media_type_total",
                "415 responses, by origin (proxy: answered by cborgate; upstream: sent by the apiserver), API group, resource and client family.",
                counter(&["origin", "group", "resource", "client"])),
            not_acceptable_total: family!("counter", "cborgate_not_acceptable_total",
                "406 responses, by origin (proxy or upstream), API group, resource and client family.",
                counter(&["origin", "group", "resource", "client"])),
            transcode_errors_total: family!("counter", "cborgate_transcode_errors_total",
                "Bodies that could not be transcoded, by direction and reason.",
                counter(&["direction", "reason"])),
            watch_streams_active: family!("gauge", "cborgate_watch_streams_active",
                "Watch streams currently open through the proxy.",
                gauge),
            watch_events_total: family!("counter", "cborgate_watch_events_total",
                "Watch events delivered to clients, by the format the client received.",
                counter(&["format"])),
            upgrades_active: family!("gauge", "cborgate_upgrades_active",
                "Upgraded connections (exec, attach, port-forward) currently open, by protocol.",
                gauges(&["protocol"])),
            build_info: family!("gauge", "cborgate_build_info",
                "Always 1; the version and commit labels say which cborgate is running.",
                gauges(&["version", "commit"])),
            client_errors_total: family!("counter", "cborgate_client_errors_total",
                "Client connections that failed through the client's doing (TLS or HTTP/2 handshake failures and timeouts, hang-ups, malformed requests), by kind; logged at debug level only.",
                counter(&["kind"])),
            log_lines_dropped_total: family!("counter", "cborgate_log_lines_dropped_total",
                "Log lines dropped rather than written to stderr: more were waiting to be written than log.queue_lines (or 16 MiB of them) while stderr did not keep up, or stderr failed. Requests never wait for the log.",
                count),
            upstream_resolve_failures_total: family!("counter", "cborgate_upstream_resolve_failures_total",
                "Failed DNS lookups of the upstream's host name.",
                count),
            upstream_retries_total: family!("counter", "cborgate_upstream_retries_total",
                "Requests sent upstream again after a failed attempt, by reason (refused: the upstream refused it unprocessed, with an HTTP/2 GOAWAY or REFUSED_STREAM, any method; connection: an idempotent request whose reused connection failed). The 415 replay is counted in cborgate_fallbacks_total instead.",
                counter(&["reason"])),
            upstream_connections_opened_total: family!("counter", "cborgate_upstream_connections_opened_total",
                "Connections cborgate opened to the upstream, for requests and for its readiness probe: on a TLS upstream each is a TLS handshake (with the upstream client certificate when one is configured). Requests that reused a kept connection or shared an HTTP/2 one are not counted.",
                count),
            upstream_ready: family!("gauge", "cborgate_upstream_ready",
                "1 while /readyz is 200 for the upstream: it answers the readiness probe over the same TLS and credentials as requests and, with --mode upgrade, is not known to refuse CBOR (cborgate_upstream_cbor); 0 otherwise.",
                gauge),
            reloads_total: family!("counter", "cborgate_reloads_total",
                "Reloads of certificates, keys and CA bundles from disk, by file (serving, upstream_ca, upstream_client, client_ca, requestheader_ca) and result (success, failure).",
                counter(&["file", "result"])),
            authentications_total: family!("counter", "cborgate_authentications_total",
                "How clients arrive, by method (x509: a client certificate; front-proxy: a trusted front proxy's identity headers; none: no verified identity) and result. x509 failure: a certificate refused at the TLS handshake (once per connection) or one that names no user; front-proxy failure: a request-header-CA certificate whose CN is not allowed or that names no user; none failure: identity headers removed from a client that is not a trusted front proxy.",
                counter(&["method", "result"])),
            panics_total: family!("counter", "cborgate_panics_total",
                "Panics caught while serving a request (each is a bug; the request was answered or its connection closed).",
                count),
            request_body_buffered_bytes: family!("gauge", "cborgate_request_body_buffered_bytes",
                "Request body bytes held in memory while bodies are read whole and transcoded before they go upstream (limit: server.max_buffered_body_bytes).",
                gauge),
            connections_open: family!("gauge", "cborgate_connections_open",
                "Client connections open on the proxy port (server.max_connections is the limit).",
                gauge),
            connections_limit: family!("gauge", "cborgate_connections_limit",
                "The limit on client connections in force (server.max_connections, or what the file-descriptor limit allows).",
                gauge),
            connections_refused_total: family!("counter", "cborgate_connections_refused_total",
                "Client connections closed as soon as they were accepted because server.max_connections were open.",
                count),
            request_head_timeouts_total: family!("counter", "cborgate_request_head_timeouts_total",
                "Client connections closed because a request head was not complete within server.request_head_timeout_seconds.",
                count),
            memory_trims_total: family!("counter", "cborgate_memory_trims_total",
                "Times freed memory was handed back to the operating system after a burst of connections ended.",
                count),
            certificate_expiry_timestamp_seconds: family!("gauge", "cborgate_certificate_expiry_timestamp_seconds",
                "The notAfter (Unix seconds) of the certificate in use that expires first in each file: serving, upstream_client (the certificate chains), upstream_ca, client_ca, requestheader_ca (the CA bundles). Set at start-up and on each successful reload; no sample for a file not configured.",
                gauges(&["file"])),
            cbor_protected_total: family!("counter", "cborgate_cbor_protected_total",
                "Answers sent as JSON instead of CBOR to a client that decodes CBOR with client-go 1.32-1.35's limits (1,024 elements per array or pairs per map) and accepts JSON, by client family and reason (over_limit: an array or map over cbor_protection.max_elements was seen; undecided: not known within cbor_protection.hold_bytes, or a watch).",
                counter(&["client", "reason"])),
            upstream_cbor: family!("gauge", "cborgate_upstream_cbor",
                "0 while /readyz is 503 because the upstream answers but refuses CBOR (--mode upgrade: its CBOR probe or a request cborgate made CBOR was answered 406 or 415), 1 otherwise. With cborgate_upstream_ready 0, 1 means the upstream cannot be reached (or answers 5xx), 0 that it answers without CBOR.",
                gauge),
            reload_last_success: family!("gauge", "cborgate_reload_last_success",
                "1 when the last load of each configured file (serving, upstream_ca, upstream_client, client_ca, requestheader_ca) succeeded, at start-up or on a reload; 0 while its last reload failed and the previous material is still in use. No sample for a file not configured.",
                gauges(&["file"])),
            registry,
            families,
        };
        m.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION"), env!("CBORGATE_GIT_COMMIT")])
            .set(1);
        m.create_series_at_zero();
        m
    }

    /// Every series an alert or a dashboard panel in deploy/monitoring selects,
    /// over closed label sets, so that a rate over it is 0 rather than absent
    /// on a fresh process (an absent series alerts on nothing): those over the label
    /// sets this module defines. [`Metrics::count_at_zero`] adds those over the sets
    /// the core defines.
    fn create_series_at_zero(&self) {
        for format in ["cbor", "json"] {
            self.watch_events_total.with_label_values(&[format]);
        }
        self.upstream_cbor.set(1);
        for kind in CLIENT_ERROR_KINDS {
            self.client_errors_total.with_label_values(&[kind]);
        }
        for file in RELOAD_FILES {
            for result in RELOAD_RESULTS {
                self.reloads_total.with_label_values(&[file, result]);
            }
        }
    }

    /// The series at zero over the label sets the core defines, handed in at start-up
    /// (`process::server`). `requests_total` gets the one series the
    /// upstream-unavailable alert selects by label, `code="503"`, with the labels
    /// cborgate's own 503 carries for a GET while the upstream is unreachable; its other
    /// label combinations, and `request_duration_seconds`' (dashboard panels only),
    /// appear with traffic. The families with `group`, `resource` and `client` labels
    /// get their zero series under [`Vocabulary::unclassified`].
    pub fn count_at_zero(&self, v: &Vocabulary) {
        let [group, resource, client] = v.unclassified;
        self.requests_total.with_label_values(&v.unavailable_get);
        for origin in Origin::ALL.map(Origin::label) {
            self.unsupported_media_type_total
                .with_label_values(&[origin, group, resource, client]);
            self.not_acceptable_total
                .with_label_values(&[origin, group, resource, client]);
        }
        for reason in FALLBACK_REASONS {
            self.fallbacks_total
                .with_label_values(&[reason, group, resource, client]);
        }
        // The codec-latency alert's histogram; the bytes appear with traffic (a ratio
        // of two zeros would be a NaN on every dashboard).
        for (direction, from, to) in Transcoding::ALL.map(Transcoding::labels) {
            self.codec_duration_seconds
                .with_label_values(&[direction, from, to, group, resource]);
        }
        for reason in &v.retry_reasons {
            self.upstream_retries_total.with_label_values(&[reason]);
        }
        for direction in ["request", "response"] {
            for reason in &v.transcode_errors {
                self.transcode_errors_total
                    .with_label_values(&[direction, reason]);
            }
        }
        for client in &v.client_families {
            for reason in &v.protect_reasons {
                self.cbor_protected_total
                    .with_label_values(&[client, reason]);
            }
        }
        for method in &v.auth_methods {
            for result in &v.auth_results {
                self.authentications_total
                    .with_label_values(&[method, result]);
            }
        }
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

/// The closed label sets the core defines, which [`Metrics::count_at_zero`] creates
/// series over at start-up (this module imports nothing of the crate: the shell hands
/// them in, from `proxy::request_labels::vocabulary`).
#[derive(Clone, Debug, Default)]
pub struct Vocabulary {
    /// The `group`, `resource` and `client` labels of a request outside the resource API
    /// from a client of no known family.
    pub unclassified: [&'static str; 3],
    /// `cborgate_requests_total`'s series, in [`REQUEST_LABELS`] order, of cborgate's
    /// own 503 to such a request, a GET while the upstream is unreachable.
    pub unavailable_get: [&'static str; 11],
    /// `cborgate_upstream_retries_total`'s `reason`s.
    pub retry_reasons: Vec<&'static str>,
    /// `cborgate_transcode_errors_total`'s `reason`s.
    pub transcode_errors: Vec<&'static str>,
    /// The `client` label's values.
    pub client_families: Vec<&'static str>,
    /// `cborgate_cbor_protected_total`'s `reason`s.
    pub protect_reasons: Vec<&'static str>,
    /// `cborgate_authentications_total`'s `method`s and `result`s.
    pub auth_methods: Vec<&'static str>,
    pub auth_results: Vec<&'static str>,
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
pub(crate) mod tests {
    use super::*;

    #[test]
    fn every_family_is_listed_from_start_up() {
        let text = metrics().render();
        let defined: Vec<&str> = metrics().families.iter().map(|f| f.0).collect();
        assert_eq!(defined, FAMILIES, "FAMILIES lists every family, in order");
        for name in FAMILIES {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name} missing");
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} help missing"
            );
        }
        let commit = format!(
            "cborgate_build_info{{commit=\"{}\",version=\"{}\"}} 1",
            env!("CBORGATE_GIT_COMMIT"),
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&commit), "{commit} in:\n{text}");
    }

    /// The label pairs of a sample line `name{a="x",b="y"} value` named `name`.
    pub(crate) fn sample_labels<'a>(line: &'a str, name: &str) -> Option<&'a str> {
        let rest = line.strip_prefix(name)?;
        match rest.strip_prefix('{') {
            Some(r) => r.split_once('}').map(|(labels, _)| labels),
            None => rest.starts_with(' ').then_some(""),
        }
    }

    #[test]
    fn new_families_have_every_series_at_zero() {
        let text = Metrics::new().render();
        let series = |name: &str| -> Vec<String> {
            text.lines()
                .filter_map(|l| Some((sample_labels(l, name)?, l.rsplit(' ').next()?)))
                .map(|(labels, value)| {
                    assert_eq!(value, "0", "{name}{{{labels}}}");
                    labels.to_string()
                })
                .collect()
        };
        let mut reloads = series("cborgate_reloads_total");
        reloads.sort();
        let mut want = Vec::new();
        for file in RELOAD_FILES {
            for result in RELOAD_RESULTS {
                want.push(format!("file=\"{file}\",result=\"{result}\""));
            }
        }
        want.sort();
        assert_eq!(reloads, want);
        assert_eq!(
            series("cborgate_client_errors_total").len(),
            CLIENT_ERROR_KINDS.len()
        );
        for name in [
            "cborgate_upstream_connections_opened_total",
            "cborgate_log_lines_dropped_total",
            "cborgate_upstream_resolve_failures_total",
            "cborgate_upstream_ready",
            "cborgate_panics_total",
        ] {
            assert_eq!(series(name), [""], "{name}");
        }
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
