//! Logging set-up (docs/surface.md "Logs"): `tracing` events to stderr, as text or
//! as flat JSON, at the level `RUST_LOG` or else `log.level` sets, coloured only
//! on a terminal without `NO_COLOR`. And client noise: pingora logs at ERROR,
//! through the `log` crate, for things clients do every day (a failed TLS
//! handshake, a hang-up); those lines are counted in
//! `cborgate_client_errors_total{kind}` and kept out of the log, shown only
//! as a debug line with target `cborgate::client`. Everything else pingora
//! logs passes as before, `Accept() failed` (e.g. out of file descriptors)
//! among it: that one is the operator's problem.
//!
//! Lines are written by a thread of their own from a bounded queue, in batches,
//! so a request never waits for stderr: when the queue is full the line is
//! dropped and counted in `cborgate_log_lines_dropped_total`. [`init`] returns the [`Flush`] every exit
//! path calls, so the lines logged before an exit are written. JSON lines are
//! written field by field, as the event is visited: no document tree per line.

use crate::config::{LogConfig, LogFormat, LogLevel};
use crate::metrics::metrics;
use prometheus::IntCounter;
use std::fmt::{self, Write as _};
use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::field::{RecordFields, VisitOutput};
use tracing_subscriber::filter::{EnvFilter, FilterExt, LevelFilter};
use tracing_subscriber::fmt::format::{DefaultVisitor, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::{Context, Filter, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Registry;

/// The target of the debug line that stands in for a client error.
pub const CLIENT_TARGET: &str = "cborgate::client";

/// Installs the process-wide subscriber (and the `log` bridge pingora's lines
/// come through), writing to stderr through a queue of at most `log.queue_lines`
/// lines. A second call changes nothing. The [`Flush`] must be called before the
/// process exits, and dropped otherwise: either writes out the queued lines.
pub fn init(log: &LogConfig) -> Log {
    use std::io::IsTerminal;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter(log.level));
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let dropped = metrics().log_lines_dropped_total.clone();
    let (queue, flush) = Queue::new(std::io::stderr(), log.queue_lines, QUEUE_BYTES, dropped);
    let lines = queue.clone();
    let installed = subscriber(log.format, filter, colour, queue)
        .try_init()
        .is_ok();
    // Request lines at the level and filter the subscriber has for their target
    // (`RUST_LOG=cborgate::proxy=warn` turns them off), decided once: neither changes
    // while the process runs.
    let wanted = installed && tracing::enabled!(target: "cborgate::proxy", Level::INFO);
    Log {
        requests: wanted.then_some((lines, log.format)),
        flush,
    }
}

/// The process's log, as [`init`] set it up.
pub struct Log {
    /// Its writer thread's flush, for every exit path.
    pub flush: Flush,
    /// Where request lines go, and in which format (`ops::request_lines`); none when
    /// the log does not want them.
    pub(super) requests: Option<(Queue, LogFormat)>,
}

/// At most this many bytes of lines wait for the writer thread, whatever
/// `log.queue_lines` allows: a line is as long as a request's path and user
/// agent make it.
const QUEUE_BYTES: usize = 16 << 20;

/// The writer thread writes at most once in this long, unless [`BATCH_BYTES`]
/// have gathered: when lines come fast, one wake-up and one write for many lines
/// rather than a wake-up per line (a thread woken for each line cost more CPU per
/// request than the write to stderr it saved; measured, see the commit that
/// brought this in). A line that comes after a quiet spell is written at once;
/// none waits longer than this.
const GATHER: Duration = Duration::from_millis(20);

/// Lines are written in blocks of about this many bytes when they come fast.
const BATCH_BYTES: usize = 64 << 10;

/// How long [`Flush::flush`] waits for stderr to take the lines still queued.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// The log's writer thread, to be flushed once, just before the process exits:
/// what [`init`] returns, handed to every exit path. Clones share it; dropping
/// the last one flushes too.
#[derive(Clone)]
pub struct Flush(Arc<FlushOnDrop>);

struct FlushOnDrop(Arc<Shared>);

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl Flush {
    /// A flush with no writer thread behind it, for a server run without a log
    /// (a test running the proxy in its own process).
    pub fn none() -> Flush {
        let shared = Shared::new(0, 0);
        {
            let mut s = shared.lock();
            s.stop = true;
            s.stopped = true;
        }
        Flush(Arc::new(FlushOnDrop(Arc::new(shared))))
    }

    /// Writes every line queued so far and stops the writer thread, waiting at
    /// most [`FLUSH_WAIT`] for stderr. A line logged afterwards is counted as
    /// dropped. A second call, or one on another thread at the same time, returns
    /// once the first is done, so that neither exits while the other is writing.
    pub fn flush(&self) {
        self.0 .0.stop();
    }
}

/// What the subscriber's writer and the writer thread share.
struct Shared {
    state: Mutex<State>,
    /// The writer thread waits on it: for a first line, then for a batch.
    wake: Condvar,
    /// [`Flush::flush`] waits on it for the writer thread to stop.
    stopped: Condvar,
}

struct State {
    /// The lines waiting, whole, one after another.
    lines: Vec<u8>,
    /// How many.
    count: usize,
    max_lines: usize,
    max_bytes: usize,
    /// The writer thread waits for a first line (and must be woken for it).
    idle: bool,
    /// [`Flush::flush`] asked the writer thread to write what is queued and stop.
    stop: bool,
    /// It has.
    stopped: bool,
}

impl Shared {
    fn new(max_lines: usize, max_bytes: usize) -> Shared {
        Shared {
            state: Mutex::new(State {
                lines: Vec::new(),
                count: 0,
                max_lines,
                max_bytes,
                idle: false,
                stop: false,
                stopped: false,
            }),
            wake: Condvar::new(),
            stopped: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues one line if there is room for it; false if there is not, or the
    /// writer thread has stopped.
    fn push(&self, line: &[u8]) -> bool {
        let mut s = self.lock();
        if s.stop || s.count >= s.max_lines || s.lines.len() + line.len() > s.max_bytes {
            return false;
        }
        let before = s.lines.len();
        s.lines.extend_from_slice(line);
        s.count += 1;
        let wake =
            (before == 0 && s.idle) || (before < BATCH_BYTES && s.lines.len() >= BATCH_BYTES);
        drop(s);
        if wake {
            self.wake.notify_one();
        }
        true
    }

    /// The writer thread: takes the lines queued, a batch at a time, and writes
    /// them to `out`; a batch it cannot write is counted as dropped. Stops once a
    /// flush is asked and everything queued before is written.
    fn write_to(&self, mut out: impl Write, dropped: &IntCounter) {
        let mut batch = Vec::new();
        let mut last_write: Option<Instant> = None;
        loop {
            let mut s = self.lock();
            while s.lines.is_empty() && !s.stop {
                s.idle = true;
                s = self.wake.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            s.idle = false;
            // Lines gather until GATHER after the last write.
            let wait = last_write.map_or(Duration::ZERO, |t| GATHER.saturating_sub(t.elapsed()));
            let (mut s, _) = self
                .wake
                .wait_timeout_while(s, wait, |s| !s.stop && s.lines.len() < BATCH_BYTES)
                .unwrap_or_else(|e| e.into_inner());
            std::mem::swap(&mut s.lines, &mut batch);
            let (count, stop) = (std::mem::take(&mut s.count), s.stop);
            drop(s);
            last_write = Some(Instant::now());
            if !batch.is_empty() && out.write_all(&batch).and_then(|()| out.flush()).is_err() {
                dropped.inc_by(count as u64);
            }
            batch.clear();
            // What a burst grew is given back once it is written.
            if batch.capacity() > 4 * BATCH_BYTES {
                batch = Vec::new();
            }
            if stop {
                self.lock().stopped = true;
                self.stopped.notify_all();
                return;
            }
        }
    }

    /// Asks the writer thread to write what is queued and stop, and waits for it.
    fn stop(&self) {
        let mut s = self.lock();
        s.stop = true;
        self.wake.notify_one();
        let _ = self
            .stopped
            .wait_timeout_while(s, FLUSH_WAIT, |s| !s.stopped)
            .unwrap_or_else(|e| e.into_inner());
    }
}

/// The subscriber's writer: a line goes into the queue if there is room for it,
/// and is counted as dropped if not. It never waits for stderr.
#[derive(Clone)]
pub(super) struct Queue {
    shared: Arc<Shared>,
    dropped: IntCounter,
}

impl Queue {
    /// A queue of at most `max_lines` lines and `max_bytes` bytes in front of
    /// `out`, written by a thread of its own, and its flush; lines that do not
    /// fit are counted in `dropped`.
    fn new<W: Write + Send + 'static>(
        out: W,
        max_lines: usize,
        max_bytes: usize,
        dropped: IntCounter,
    ) -> (Queue, Flush) {
        let shared = Arc::new(Shared::new(max_lines, max_bytes));
        let (writer, counter) = (shared.clone(), dropped.clone());
        let spawned = std::thread::Builder::new()
            .name("cborgate-log".into())
            .spawn(move || writer.write_to(out, &counter));
        if spawned.is_err() {
            // No thread, no log: every line is counted as dropped.
            shared.lock().stop = true;
            shared.lock().stopped = true;
        }
        let flush = Flush(Arc::new(FlushOnDrop(shared.clone())));
        (Queue { shared, dropped }, flush)
    }

    /// Queues one whole line, or counts it as dropped.
    pub(super) fn line(&self, line: &[u8]) {
        if !self.shared.push(line) {
            self.dropped.inc();
        }
    }
}

impl<'a> MakeWriter<'a> for Queue {
    type Writer = Line<'a>;
    fn make_writer(&'a self) -> Line<'a> {
        Line(self)
    }
}

/// One line's writer; tracing-subscriber's fmt layer writes each line with one
/// `write_all`.
pub(super) struct Line<'a>(&'a Queue);

impl Write for Line<'_> {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        self.0.line(line);
        Ok(line.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `log.level` for cborgate, `warn` for pingora (its info lines are start-up
/// and shutdown chatter).
pub(super) fn default_filter(level: LogLevel) -> EnvFilter {
    EnvFilter::new(format!("{},pingora=warn", level.filter()))
}

/// The output layer, filtered by `filter` and without client noise, and the
/// layer that counts client noise (whatever `filter` says: a metric does not
/// depend on the log level).
pub(super) fn subscriber<W>(
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
        fmt.fmt_fields(TextFields).with_filter(output).boxed()
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
    /// An HTTP/1.1 request head with more than pingora's 256 header lines, answered
    /// with a 431 `Status` (`inbound::connections`).
    TooManyHeaders,
}

impl ClientError {
    /// Every kind, so the metric's series exist at zero from start-up.
    pub const ALL: [ClientError; 7] = [
        ClientError::TlsHandshake,
        ClientError::HandshakeTimeout,
        ClientError::H2Handshake,
        ClientError::Disconnect,
        ClientError::ReadTimeout,
        ClientError::BadRequest,
        ClientError::TooManyHeaders,
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
            ClientError::TooManyHeaders => "too_many_headers",
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

/// What client-noise detection reads of an event: its message and, for events
/// bridged from the `log` crate, the target they were logged with. Those carry
/// `log.target`, `log.module_path`, `log.file` and `log.line` fields (tracing-log
/// 0.2 `dispatch_record`); their metadata target is `log`. Only ERROR events are
/// taken apart.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    log_target: Option<String>,
}

impl Fields {
    fn of(event: &Event<'_>) -> Fields {
        let mut f = Fields::default();
        event.record(&mut f);
        f
    }

    /// The target the event was logged with.
    fn target<'a>(&'a self, event: &'a Event<'_>) -> &'a str {
        self.log_target
            .as_deref()
            .unwrap_or_else(|| event.metadata().target())
    }

    fn noise<'a>(&'a self, event: &'a Event<'_>) -> Option<Noise<'a>> {
        Noise::parse(self.target(event), self.message.as_deref()?)
    }

    fn slot(&mut self, field: &Field) -> Option<&mut Option<String>> {
        match field.name() {
            "message" => Some(&mut self.message),
            "log.target" => Some(&mut self.log_target),
            _ => None,
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(slot) = self.slot(field) {
            *slot = Some(format!("{value:?}"));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(slot) = self.slot(field) {
            *slot = Some(value.to_string());
        }
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
/// fields at the top level, in the order they are recorded. No spans, and none of
/// the `log.*` fields of events bridged from the `log` crate (`log.file` is a
/// build path). Written as the fields are visited, without a document in between.
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
        let meta = event.metadata();
        // A bridged `log` record names its target in a field; read it first. Not
        // on a request's path: cborgate's own events are `tracing` events.
        let bridged = (meta.target() == "log").then(|| Fields::of(event));
        let target = match &bridged {
            Some(f) => f.target(event),
            None => meta.target(),
        };
        writer.write_str("{\"timestamp\":\"")?;
        SystemTime.format_time(&mut writer)?;
        writer.write_str("\",\"level\":\"")?;
        writer.write_str(meta.level().as_str())?;
        writer.write_str("\",\"target\":\"")?;
        write_escaped(&mut writer, target)?;
        writer.write_char('"')?;
        let mut fields = JsonFields {
            out: &mut writer,
            result: Ok(()),
        };
        event.record(&mut fields);
        fields.result?;
        writer.write_str("}\n")
    }
}

/// Writes each field as `,"name":value`: strings and `Debug` values (messages,
/// `%` values) as JSON strings, numbers and booleans as themselves.
struct JsonFields<'a, 'w> {
    out: &'a mut Writer<'w>,
    result: fmt::Result,
}

impl JsonFields<'_, '_> {
    /// `,"name":` and true, or false for a field not written: `log.*`, and the
    /// three keys every line starts with, which win over fields of the same name.
    fn key(&mut self, field: &Field) -> bool {
        let name = field.name();
        if self.result.is_err()
            || name.starts_with("log.")
            || matches!(name, "timestamp" | "level" | "target")
        {
            return false;
        }
        self.result = self
            .out
            .write_str(",\"")
            .and_then(|()| write_escaped(self.out, name))
            .and_then(|()| self.out.write_str("\":"));
        self.result.is_ok()
    }

    fn raw(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.key(field) {
            self.result = self.out.write_fmt(value);
        }
    }
}

impl Visit for JsonFields<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.key(field) {
            self.result = self
                .out
                .write_char('"')
                .and_then(|()| write_escaped(self.out, value))
                .and_then(|()| self.out.write_char('"'));
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.key(field) {
            self.result = self
                .out
                .write_char('"')
                .and_then(|()| write!(Escaped(self.out), "{value:?}"))
                .and_then(|()| self.out.write_char('"'));
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.raw(field, format_args!("{value}"));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.raw(field, format_args!("{value}"));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.raw(field, format_args!("{value}"));
    }
    /// `null` if not finite, as serde_json writes it.
    fn record_f64(&mut self, field: &Field, value: f64) {
        if !value.is_finite() {
            self.raw(field, format_args!("null"));
        } else if self.key(field) {
            self.result = write_float(self.out, value);
        }
    }
}

/// A finite number with a fraction or an exponent (`2.0`, `0.036`, `1e16`), so that
/// a field keeps one number type from line to line.
pub(super) fn write_float(out: &mut impl fmt::Write, value: f64) -> fmt::Result {
    if value.fract() != 0.0 {
        write!(out, "{value}")
    } else if value.abs() < 1e16 {
        write!(out, "{value:.1}")
    } else {
        write!(out, "{value:e}")
    }
}

/// The text format's fields as tracing-subscriber's `DefaultFields` writes them
/// (`name=value`, separated by spaces; strings quoted and escaped as Rust's `Debug`
/// writes them), but strings that need no escape, numbers and booleans written as
/// they are rather than through `Debug`, and no colour codes to fill in. The
/// message, and everything when colours are on, are left to `DefaultFields`, with
/// its escape of terminal control sequences in messages.
struct TextFields;

impl<'w> FormatFields<'w> for TextFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut v = TextVisitor {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut v);
        v.result
    }
}

struct TextVisitor<'w> {
    writer: Writer<'w>,
    /// No field written yet.
    first: bool,
    result: fmt::Result,
}

impl TextVisitor<'_> {
    /// Writes ` name=` and returns true for a field written here; false for one
    /// `DefaultFields` writes (see [`TextVisitor::default_fields`]).
    fn plain(&mut self, field: &Field) -> bool {
        let name = field.name();
        if self.result.is_err()
            || self.writer.has_ansi_escapes()
            || name == "message"
            || name.starts_with("log.")
            || name.starts_with("r#")
        {
            return false;
        }
        let first = std::mem::take(&mut self.first);
        let w = &mut self.writer;
        self.result = (if first { Ok(()) } else { w.write_char(' ') })
            .and_then(|()| w.write_str(name))
            .and_then(|()| w.write_char('='));
        true
    }

    /// An integer or a boolean: its `Display`, which is what its `Debug` writes.
    fn display(
        &mut self,
        field: &Field,
        value: &dyn fmt::Display,
        record: impl FnOnce(&mut DefaultVisitor<'_>),
    ) {
        if self.plain(field) {
            self.result = write!(self.writer, "{value}");
        } else {
            self.default_fields(field, record);
        }
    }

    /// The field as `DefaultFields` writes it; `log.*` fields it leaves out.
    fn default_fields(&mut self, field: &Field, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        if self.result.is_err() {
            return;
        }
        let mut v = DefaultVisitor::new(self.writer.by_ref(), self.first);
        record(&mut v);
        self.result = v.finish();
        self.first &= field.name().starts_with("log.");
    }
}

impl Visit for TextVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.plain(field) {
            return self.default_fields(field, |v| v.record_str(field, value));
        }
        self.result = write_debug_str(&mut self.writer, value);
    }
    /// A `%` value's `Display`, which tracing passes as its `Debug`.
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.plain(field) {
            self.result = write!(self.writer, "{value:?}");
        } else {
            self.default_fields(field, |v| v.record_debug(field, value));
        }
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.default_fields(field, |v| v.record_error(field, value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.display(field, &value, |v| v.record_u64(field, value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.display(field, &value, |v| v.record_i64(field, value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.display(field, &value, |v| v.record_bool(field, value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        if value.is_finite() && self.plain(field) {
            self.result = write_float(&mut self.writer, value);
        } else {
            self.default_fields(field, |v| v.record_f64(field, value));
        }
    }
}

/// `value` as Rust's `Debug` writes a string (what tracing-subscriber writes for a string
/// field), without the formatting machinery when `Debug` leaves it unchanged: printable
/// ASCII but the quote and the backslash.
pub(super) fn write_debug_str(out: &mut impl fmt::Write, value: &str) -> fmt::Result {
    let plain = value
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\');
    if plain {
        out.write_char('"')?;
        out.write_str(value)?;
        out.write_char('"')
    } else {
        write!(out, "{value:?}")
    }
}

/// `s` as the inside of a JSON string: the quote, the backslash and control
/// characters escaped (RFC 8259 section 7), everything else as it is.
pub(super) fn write_escaped(out: &mut impl fmt::Write, s: &str) -> fmt::Result {
    let mut from = 0;
    for (at, b) in s.bytes().enumerate() {
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        // `at` is an ASCII byte's: a character boundary.
        out.write_str(&s[from..at])?;
        if short.is_empty() {
            write!(out, "\\u{b:04x}")?;
        } else {
            out.write_str(short)?;
        }
        from = at + 1;
    }
    out.write_str(&s[from..])
}

/// A `fmt::Write` that escapes what it is given for the inside of a JSON string.
pub(super) struct Escaped<'a, W>(pub(super) &'a mut W);

impl<W: fmt::Write> fmt::Write for Escaped<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_escaped(self.0, s)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::Value;
    use std::sync::{Arc, Mutex};

    /// What a subscriber wrote.
    #[derive(Clone, Default)]
    pub(in crate::ops) struct Capture(Arc<Mutex<Vec<u8>>>);

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
        pub(in crate::ops) fn text(&self) -> String {
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
            crate::metrics::CLIENT_ERROR_KINDS,
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

    /// A writer that blocks until it is let go, as stderr does when nobody reads it.
    #[derive(Clone, Default)]
    struct Stalled {
        /// (entered, let go).
        state: Arc<(Mutex<(bool, bool)>, std::sync::Condvar)>,
        out: Capture,
    }

    impl Stalled {
        fn wait_entered(&self) {
            let (m, cv) = &*self.state;
            let s = m.lock().unwrap();
            let (s, timeout) = cv
                .wait_timeout_while(s, std::time::Duration::from_secs(20), |s| !s.0)
                .unwrap();
            assert!(s.0 && !timeout.timed_out(), "the writer thread never wrote");
        }
        fn let_go(&self) {
            let (m, cv) = &*self.state;
            m.lock().unwrap().1 = true;
            cv.notify_all();
        }
    }

    impl Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let (m, cv) = &*self.state;
            let mut s = m.lock().unwrap();
            s.0 = true;
            cv.notify_all();
            while !s.1 {
                s = cv.wait(s).unwrap();
            }
            self.out.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn counter() -> IntCounter {
        IntCounter::new("dropped", "dropped").unwrap()
    }

    #[test]
    fn a_stalled_writer_drops_and_counts_the_lines_beyond_the_queue() {
        let out = Stalled::default();
        let dropped = counter();
        let (queue, flush) = Queue::new(out.clone(), 4, 1 << 20, dropped.clone());
        let line = |n: usize| {
            let mut w = queue.make_writer();
            w.write_all(format!("line {n}\n").as_bytes()).unwrap();
        };
        // The writer thread takes the first line and blocks writing it.
        line(0);
        out.wait_entered();
        // Four lines wait; the other six are dropped, at once.
        for n in 1..=10 {
            line(n);
        }
        assert_eq!(dropped.get(), 6);
        out.let_go();
        flush.flush();
        assert_eq!(out.out.text(), "line 0\nline 1\nline 2\nline 3\nline 4\n");
        // After the flush, nothing is written and everything is counted.
        line(11);
        assert_eq!(dropped.get(), 7);
        assert_eq!(out.out.text().lines().count(), 5);
    }

    #[test]
    fn the_queue_is_bounded_in_bytes_too() {
        let q = Shared::new(100, 10);
        assert!(!q.push(b"0123456789\n"), "longer than the whole queue");
        assert!(q.push(b"01234\n"));
        assert!(!q.push(b"0123\n"), "11 bytes would wait");
        assert!(q.push(b"012\n"));
        let s = q.lock();
        assert_eq!((s.lines.as_slice(), s.count), (&b"01234\n012\n"[..], 2));
    }

    #[test]
    fn json_fields_are_escaped_and_typed() {
        let text = logged(LogFormat::Json, LogLevel::Info, || {
            tracing::info!(
                target: "cborgate::proxy",
                user_agent = "a \"quoted\"\\ agent\n\u{1}é",
                client = %"127.0.0.1:1",
                level = "not the level",
                whole_ms = 2.0f64,
                part_ms = 0.036f64,
                nan = f64::NAN,
                n = -3i64,
                yes = true,
                "request"
            );
        });
        let line: Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["user_agent"], "a \"quoted\"\\ agent\n\u{1}é");
        assert_eq!(line["client"], "127.0.0.1:1");
        assert_eq!(line["level"], "INFO", "the line's own key wins");
        assert!(text.contains(r#""whole_ms":2.0,"#), "{text}");
        assert!(text.contains(r#""part_ms":0.036,"#), "{text}");
        assert_eq!(line["nan"], Value::Null);
        assert_eq!(
            (line["n"].as_i64(), line["yes"].as_bool()),
            (Some(-3), Some(true))
        );
        assert_eq!(text.matches('\n').count(), 1, "one line: {text}");
    }

    #[test]
    fn text_fields_are_written_as_tracing_subscriber_writes_them() {
        let event = || {
            tracing::info!(
                target: "cborgate::proxy",
                method = %"GET",
                path = %"/api/v1/pods",
                status = 200u64,
                verb = "LIST",
                user_agent = "kubectl/v1.36.2 (linux/amd64) kubernetes/abc",
                odd = "tab\there \"q\" \\ é",
                upstream_ms = 0.036f64,
                codec_ms = 0.0f64,
                n = -1i64,
                ok = true,
                user = None::<&str>,
                debug = ?Some("x"),
                r#type = "raw",
                "request"
            )
        };
        let ours = logged(LogFormat::Text, LogLevel::Info, event);
        let theirs = Capture::default();
        let w = theirs.clone();
        let sub = tracing_subscriber::fmt()
            .with_writer(move || w.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(sub, event);
        let (theirs, ours) = (theirs.text(), ours);
        let after_time = |l: &str| l.split_once(' ').map(|(_, rest)| rest.to_string());
        assert!(ours.contains(r#"odd="tab\there \"q\" \\ é""#), "{ours}");
        assert_eq!(after_time(&ours), after_time(&theirs));
    }
}
