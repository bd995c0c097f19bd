//! Logging set-up (docs/surface.md "Logs"): `tracing` events to stderr, as text or
//! as flat JSON, at the level `RUST_LOG` or else `log.level` sets, coloured only
//! on a terminal without `NO_COLOR`. And client noise: pingora logs at ERROR,
//! through the `log` crate, for things clients do every day (a failed TLS
//! handshake, a hang-up); those lines are counted in
//! `cborgate_client_errors_total{kind}` and kept out of the log, shown only
//! as a debug line with target `cborgate::client`. Everything else pingora
//! logs passes as before, `Accept() failed` (e.g. out of file descriptors)
//! among it: that one is the operator's problem.

use crate::config::{LogConfig, LogFormat, LogLevel};
use crate::ops::metrics::metrics;
use serde_json::{Map, Value};
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::{EnvFilter, FilterExt, LevelFilter};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::{Context, Filter, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Registry;

/// The target of the debug line that stands in for a client error.
pub const CLIENT_TARGET: &str = "cborgate::client";

/// Installs the process-wide subscriber (and the `log` bridge pingora's lines
/// come through). A second call changes nothing.
pub fn init(log: &LogConfig) {
    use std::io::IsTerminal;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter(log.level));
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = subscriber(log.format, filter, colour, std::io::stderr).try_init();
}

/// `log.level` for cborgate, `warn` for pingora (its info lines are start-up
/// and shutdown chatter).
fn default_filter(level: LogLevel) -> EnvFilter {
    EnvFilter::new(format!("{},pingora=warn", level.filter()))
}

/// The output layer, filtered by `filter` and without client noise, and the
/// layer that counts client noise (whatever `filter` says: a metric does not
/// depend on the log level).
fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    colour: bool,
    writer: W,
) -> impl Subscriber + Send + Sync + for<'a> LookupSpan<'a>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let output = filter.and(NotClientNoise);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(colour);
    let fmt: Box<dyn Layer<Registry> + Send + Sync> = if format == LogFormat::Json {
        fmt.event_format(FlatJson).with_filter(output).boxed()
    } else {
        fmt.with_filter(output).boxed()
    };
    // The counting layer goes last: its debug line is a nested event, and by
    // then the output layer is done with the event that caused it.
    let layers = vec![fmt, ClientErrors.with_filter(PingoraErrors).boxed()];
    tracing_subscriber::registry().with(layers)
}

/// Client behaviour pingora logs as an error; the `kind` label of
/// `cborgate_client_errors_total`. The set is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientError {
    /// The client's TLS handshake failed: it does not trust the certificate,
    /// spoke plain HTTP to the TLS port, or connected and closed (a probe).
    TlsHandshake,
    /// No TLS handshake within pingora's 60 seconds.
    HandshakeTimeout,
    /// The HTTP/2 connection preface or settings exchange failed.
    H2Handshake,
    /// The client hung up before its request head was whole (proxy), or before
    /// its response was written (admin listener).
    Disconnect,
    /// The client paused longer than `server.request_read_timeout_seconds`
    /// while sending its request head (proxy).
    ReadTimeout,
    /// The client sent a request head that is not HTTP (admin listener).
    BadRequest,
}

impl ClientError {
    /// Every kind, so the metric's series exist at zero from start-up.
    pub const ALL: [ClientError; 6] = [
        ClientError::TlsHandshake,
        ClientError::HandshakeTimeout,
        ClientError::H2Handshake,
        ClientError::Disconnect,
        ClientError::ReadTimeout,
        ClientError::BadRequest,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientError::TlsHandshake => "tls_handshake",
            ClientError::HandshakeTimeout => "handshake_timeout",
            ClientError::H2Handshake => "h2_handshake",
            ClientError::Disconnect => "disconnect",
            ClientError::ReadTimeout => "read_timeout",
            ClientError::BadRequest => "bad_request",
        }
    }

    /// The kind of client error a pingora log line (its `log` target and
    /// message) reports, if it reports one.
    pub fn of(target: &str, message: &str) -> Option<ClientError> {
        Noise::parse(target, message).map(|n| n.kind)
    }
}

/// pingora-core 0.9.1's ERROR lines about what clients do: (target, start of
/// the message, kind). The `log` target is the module path.
const NOISE: [(&str, &str, ClientError); 7] = [
    // pingora-proxy 0.9.1 lib.rs:363 `Fail to proxy: {e}, downstream session
    // type: …` when reading a request head fails for any reason but a bad head
    // (that one is answered 400 at debug level): the client closed the
    // connection or stalled. Every other "Fail to proxy" line is suppressed by
    // `ProxyHttp::suppress_error_log` and written as cborgate's request line.
    (
        "pingora_proxy",
        "Fail to proxy: Downstream",
        ClientError::Disconnect,
    ),
    // services/listening.rs:241 `Downstream handshake error from {addr}: {e}`
    // and :243 `Downstream handshake error: {e}`, when `io.handshake()` (TLS
    // accept) fails.
    (
        "pingora_core::services::listening",
        "Downstream handshake error",
        ClientError::TlsHandshake,
    ),
    // services/listening.rs:249, the 60 s timeout around `io.handshake()`.
    (
        "pingora_core::services::listening",
        "Downstream handshake timeout",
        ClientError::HandshakeTimeout,
    ),
    // apps/mod.rs:312 `H2 handshake error {e}`.
    (
        "pingora_core::apps",
        "H2 handshake error",
        ClientError::H2Handshake,
    ),
    // apps/http_app.rs:66 and :157 (read_request failed: ConnectionClosed,
    // ReadTimedout, or InvalidHTTPHeader, which is a bad request, below).
    (
        "pingora_core::apps::http_app",
        "HTTP server fails to read from downstream",
        ClientError::Disconnect,
    ),
    // apps/http_app.rs:84, :94, :186, :203.
    (
        "pingora_core::apps::http_app",
        "HTTP server fails to write to downstream",
        ClientError::Disconnect,
    ),
    // apps/http_app.rs:104 and :212.
    (
        "pingora_core::apps::http_app",
        "HTTP server fails to finish the request",
        ClientError::Disconnect,
    ),
];

/// One recognised client error line, taken apart.
#[derive(Debug, PartialEq, Eq)]
struct Noise<'a> {
    kind: ClientError,
    /// The client's address, where pingora names it.
    peer: Option<&'a str>,
    /// pingora's error text.
    error: &'a str,
}

impl<'a> Noise<'a> {
    fn parse(target: &str, message: &'a str) -> Option<Noise<'a>> {
        let (prefix, kind) = NOISE
            .iter()
            .find(|(t, p, _)| *t == target && message.starts_with(p))
            .map(|(_, p, k)| (*p, *k))?;
        let rest = &message[prefix.len()..];
        // pingora-proxy's line: " ConnectionClosed context: …, downstream session type: h1".
        if target == "pingora_proxy" {
            let error = rest.trim();
            let kind = if error.starts_with("ReadTimedout") {
                ClientError::ReadTimeout
            } else {
                kind
            };
            return Some(Noise {
                kind,
                peer: None,
                error,
            });
        }
        let (peer, error) = match rest.strip_prefix(" from ") {
            Some(r) => match r.split_once(": ") {
                Some((peer, error)) => (Some(peer), error),
                None => (Some(r), ""),
            },
            None => (None, rest.trim_start_matches(':')),
        };
        let error = error.trim();
        // pingora's error Display starts with its type (" InvalidHTTPHeader context: …").
        let kind = if kind == ClientError::Disconnect && error.starts_with("InvalidHTTPHeader") {
            ClientError::BadRequest
        } else {
            kind
        };
        Some(Noise { kind, peer, error })
    }
}

/// An event's fields as JSON values. Events bridged from the `log` crate carry
/// `log.target`, `log.module_path`, `log.file` and `log.line` fields
/// (tracing-log 0.2 `dispatch_record`); their metadata target is `log`.
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Fields {
    fn of(event: &Event<'_>) -> Fields {
        let mut f = Fields::default();
        event.record(&mut f);
        f
    }

    fn str(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(Value::as_str)
    }

    /// The target the event was logged with.
    fn target<'a>(&'a self, event: &'a Event<'_>) -> &'a str {
        self.str("log.target")
            .unwrap_or_else(|| event.metadata().target())
    }

    fn noise<'a>(&'a self, event: &'a Event<'_>) -> Option<Noise<'a>> {
        Noise::parse(self.target(event), self.str("message")?)
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
}

/// Whether an event could be client noise at all, from its metadata alone
/// (pingora logs it at ERROR), so that other events are not taken apart.
fn maybe_noise(meta: &Metadata<'_>) -> bool {
    *meta.level() == Level::ERROR
}

/// The output layer's filter: everything but client noise.
struct NotClientNoise;

impl<S> Filter<S> for NotClientNoise {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }
    fn callsite_enabled(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }
    // `And` keeps the smaller hint, or none if either has none.
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }
    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        !maybe_noise(event.metadata()) || Fields::of(event).noise(event).is_none()
    }
}

/// The counting layer's filter: pingora-core's and pingora-proxy's ERROR lines. For `log` records
/// `enabled` sees the record's own target (tracing-log's `as_trace`).
struct PingoraErrors;

impl PingoraErrors {
    fn wants(meta: &Metadata<'_>) -> bool {
        maybe_noise(meta)
            && (meta.target().starts_with("pingora_core") || meta.target() == "pingora_proxy")
    }
}

impl<S> Filter<S> for PingoraErrors {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        Self::wants(meta)
    }
    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if Self::wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::ERROR)
    }
}

/// Counts client noise and says it again at debug level, concisely.
struct ClientErrors;

impl<S: Subscriber> Layer<S> for ClientErrors {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let fields = Fields::of(event);
        let Some(n) = fields.noise(event) else {
            return;
        };
        // A nested event: it reaches the process-wide subscriber (tracing-core
        // gives a nested event under a scoped one, `with_default`, to no one).
        // Written before the count, so a line is there once the count shows.
        tracing::debug!(
            target: CLIENT_TARGET,
            kind = %n.kind.as_str(),
            peer = %n.peer.unwrap_or("-"),
            error = %n.error,
            "client connection failed"
        );
        metrics()
            .client_errors_total
            .with_label_values(&[n.kind.as_str()])
            .inc();
    }
}

/// One JSON object a line: `timestamp`, `level`, `target`, then the event's
/// fields at the top level. No spans, and none of the `log.*` fields of
/// events bridged from the `log` crate (`log.file` is a build path).
struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let fields = Fields::of(event);
        let mut line = Map::new();
        line.insert("timestamp".into(), timestamp.into());
        line.insert("level".into(), event.metadata().level().as_str().into());
        line.insert("target".into(), fields.target(event).into());
        for (name, value) in &fields.0 {
            // The three keys above win over fields of the same name.
            if !name.starts_with("log.") && !line.contains_key(name) {
                line.insert(name.clone(), value.clone());
            }
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What a subscriber wrote.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Capture {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn client_errors(kind: ClientError) -> u64 {
        metrics()
            .client_errors_total
            .with_label_values(&[kind.as_str()])
            .get()
    }

    /// Runs `f` under a subscriber made as `init` makes it, with the default
    /// filter for `level`; returns what it wrote. `log` records reach it
    /// through tracing-log, as pingora's do.
    fn logged(format: LogFormat, level: LogLevel, f: impl FnOnce()) -> String {
        let _ = tracing_log::LogTracer::init();
        let out = Capture::default();
        let w = out.clone();
        let sub = subscriber(format, default_filter(level), false, move || w.clone());
        tracing::subscriber::with_default(sub, f);
        out.text()
    }

    const LISTENING: &str = "pingora_core::services::listening";

    #[test]
    fn pingora_lines_about_clients_are_recognised() {
        use ClientError::*;
        let http_app = "pingora_core::apps::http_app";
        for (target, message, kind) in [
            (LISTENING, "Downstream handshake error from 127.0.0.1:5555:  TLSHandshakeFailure context: TLS accept() failed:  TLSHandshakeFailure context: tls connect error: received fatal alert: UnknownCA", Some(TlsHandshake)),
            (LISTENING, "Downstream handshake error from [::1]:5555:  TLSHandshakeFailure context: tls handshake eof", Some(TlsHandshake)),
            (LISTENING, "Downstream handshake error:  TLSHandshakeFailure", Some(TlsHandshake)),
            (LISTENING, "Downstream handshake timeout", Some(HandshakeTimeout)),
            ("pingora_core::apps", "H2 handshake error  H2Error context: invalid preface", Some(H2Handshake)),
            (http_app, "HTTP server fails to read from downstream:  ConnectionClosed context: while reading request headers, bytes already read: 32", Some(Disconnect)),
            (http_app, "HTTP server fails to read from downstream:  InvalidHTTPHeader context: buf: GARBAGE\\r\\n\\r\\n cause: invalid token", Some(BadRequest)),
            (http_app, "HTTP server fails to write to downstream:  WriteError, GET /metrics", Some(Disconnect)),
            (http_app, "HTTP server fails to finish the request:  WriteError", Some(Disconnect)),
            // The operator's problem, not a client's.
            (LISTENING, "Accept() failed Too many open files (os error 24)", None),
            (LISTENING, "shutdown_signal error channel closed", None),
            // pingora-proxy, reading a request head.
            ("pingora_proxy", "Fail to proxy: Downstream ConnectionClosed context: while reading request headers, bytes already read: 42, downstream session type: h1", Some(Disconnect)),
            ("pingora_proxy", "Fail to proxy: Downstream ReadTimedout context: while reading request headers, downstream session type: h1", Some(ReadTimeout)),
            // An upstream failure.
            ("pingora_proxy", "Fail to proxy: Upstream ConnectRefused", None),
            // The right words from elsewhere.
            ("cborgate::proxy", "Downstream handshake timeout", None),
        ] {
            assert_eq!(ClientError::of(target, message), kind, "{target}: {message}");
        }
        assert_eq!(
            Noise::parse(
                LISTENING,
                "Downstream handshake error from [::1]:5555:  TLSHandshakeFailure context: x"
            ),
            Some(Noise {
                kind: TlsHandshake,
                peer: Some("[::1]:5555"),
                error: "TLSHandshakeFailure context: x"
            })
        );
        let labels: Vec<&str> = ClientError::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            labels,
            crate::ops::metrics::CLIENT_ERROR_KINDS,
            "the metric's label set"
        );
    }

    #[test]
    fn client_noise_is_counted_and_not_logged() {
        let before = client_errors(ClientError::HandshakeTimeout);
        for format in [LogFormat::Text, LogFormat::Json] {
            let text = logged(format, LogLevel::Info, || {
                log::error!(target: LISTENING, "Downstream handshake timeout");
                log::error!(target: LISTENING, "Accept() failed Too many open files (os error 24)");
            });
            assert!(!text.contains("Downstream"), "{format:?}:\n{text}");
            assert!(text.contains("Accept() failed"), "{format:?}:\n{text}");
            assert!(text.contains("ERROR"), "{format:?}:\n{text}");
        }
        // Even with logging off: the count does not depend on the log level.
        let text = logged(LogFormat::Text, LogLevel::Off, || {
            log::error!(target: LISTENING, "Downstream handshake timeout");
        });
        assert_eq!(text, "");
        // Other tests in this process may count too: at least ours.
        assert!(client_errors(ClientError::HandshakeTimeout) >= before + 3);
    }

    #[test]
    fn json_lines_are_flat_and_carry_no_build_paths() {
        let text = logged(LogFormat::Json, LogLevel::Info, || {
            log::warn!(target: "pingora_core::server", "Server starting");
            tracing::info!(target: "cborgate::proxy", status = 200u64, path = "/api", "request");
        });
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["level"], "WARN");
        assert_eq!(lines[0]["target"], "pingora_core::server");
        assert_eq!(lines[0]["message"], "Server starting");
        assert_eq!(lines[1]["message"], "request");
        assert_eq!(lines[1]["status"], 200);
        assert_eq!(lines[1]["path"], "/api");
        assert!(lines[1]["timestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')));
        for l in &lines {
            let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
            assert!(
                keys.iter()
                    .all(|k| !k.starts_with("log.") && *k != "fields" && *k != "spans"),
                "{l}"
            );
        }
        assert!(!text.contains(".rs"), "a source path in:\n{text}");
    }

    #[test]
    fn text_lines_carry_no_build_paths() {
        let text = logged(LogFormat::Text, LogLevel::Info, || {
            log::warn!(target: "pingora_core::server", "Server starting");
        });
        assert!(
            text.contains(" WARN pingora_core::server: Server starting"),
            "{text}"
        );
        assert!(!text.contains("log.") && !text.contains(".rs"), "{text}");
    }
}
