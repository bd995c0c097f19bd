//! Typed configuration: built-in defaults, `config.toml`, and command-line
//! overrides, in that order of precedence (flags win). Unknown keys are an
//! error; every key is documented in the repository's `config.toml`.

pub use crate::negotiate::forwarded::ForwardedFor;
pub use crate::negotiate::UpstreamMode;
pub use listen::listen_addr;
pub use messages::not_one_of;
use messages::plain_toml_error;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::path::{Path, PathBuf};

mod listen;
mod messages;

/// Whether cborgate offers HTTP/2 to a TLS upstream (ALPN `h2`, then `http/1.1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Http2 {
    /// HTTP/2 when the upstream offers it by ALPN; upgrades (SPDY, WebSocket) stay HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Off,
}

impl std::str::FromStr for Http2 {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Http2::Auto),
            "off" => Ok(Http2::Off),
            _ => Err(not_one_of(s, &["auto", "off"])),
        }
    }
}

impl std::str::FromStr for ForwardedFor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "append" => Ok(ForwardedFor::Append),
            "replace" => Ok(ForwardedFor::Replace),
            _ => Err(not_one_of(s, &["append", "replace"])),
        }
    }
}

impl<'de> Deserialize<'de> for ForwardedFor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for ForwardedFor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The largest request head pingora reads at all (its own fixed limit is one byte less
/// than 1 MiB of raw head); `server.max_header_bytes` may only lower it.
pub const MAX_HEADER_BYTES: usize = 1_048_575;

/// `server.max_buffered_body_bytes` by default: 128 MiB, room for about 40 bodies at
/// the 3 MiB limit at once, and a bounded cost for a flood of them.
pub const DEFAULT_MAX_BUFFERED_BODY_BYTES: u64 = 128 * 1024 * 1024;

/// `server.write_buffer_bytes` by default: a response head with a body of up to about
/// 16 KiB in one write (most single objects; a 7 KB Pod's GET measured in bench/RESULTS.md).
pub const DEFAULT_WRITE_BUFFER_BYTES: usize = 16 * 1024;
/// The largest `server.write_buffer_bytes`: more only copies what a direct write sends.
pub const MAX_WRITE_BUFFER_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Proxy listener address.
    pub listen: String,
    /// Admin listener (/metrics, /healthz, /readyz).
    pub admin: String,
    /// Worker threads for the proxy.
    pub threads: usize,
    /// TLS certificate and key for the proxy listener (empty: plain HTTP).
    pub tls_cert: String,
    pub tls_key: String,
    /// Seconds to let in-flight requests finish after SIGTERM.
    pub grace_period_seconds: u64,
    /// Seconds after SIGTERM during which `/readyz` fails but the listener still serves.
    pub shutdown_delay_seconds: u64,
    /// Longest pause, in seconds, while a client sends its first request head on a
    /// connection or a request body (then the connection is closed).
    pub request_read_timeout_seconds: u64,
    /// Seconds an idle keep-alive client connection is kept between requests (0 = forever).
    pub idle_timeout_seconds: u64,
    /// Longest time, in seconds, a whole request head may take to arrive (Go's
    /// `ReadHeaderTimeout`; kube-apiserver's is 32 s), counted from the connection's
    /// accept for its first request and from the first byte for the next ones.
    pub request_head_timeout_seconds: u64,
    /// Client connections open at once; more are closed as soon as they are accepted.
    /// 0 = derived from the open-file limit (`limit_from_fds`).
    pub max_connections: usize,
    /// Requests and watches one HTTP/2 client connection may have open at once
    /// (SETTINGS_MAX_CONCURRENT_STREAMS; Go's default, and so kube-apiserver's, 250).
    pub http2_max_streams: u32,
    /// Bytes a client connection gathers before a write to its socket (below TLS and
    /// HTTP/2 too): an HTTP/1.1 response head goes out together with a body that fits
    /// (one write, one TCP segment, one wake-up of the client, instead of two). Allocated
    /// per connection, touched only as far as its writes fill it; 0 writes each piece as
    /// it comes.
    pub write_buffer_bytes: usize,
    /// Largest request head (request line and headers) accepted, in bytes (431 beyond).
    pub max_header_bytes: usize,
    /// Short requests served at once (429 beyond; 0 = no limit).
    pub max_requests_inflight: usize,
    /// Long-running requests (watches, exec, attach, port-forward, followed logs) open at
    /// once (429 beyond; 0 = no limit).
    pub max_long_running_requests: usize,
    /// Gzip large transcoded CBOR answers for clients that accept gzip, as a CBOR-enabled
    /// kube-apiserver does (over 128 KiB, Go's `BestSpeed`, never watches).
    pub compress_responses: bool,
    /// Request body bytes held in memory at once, over all requests: transcoded bodies
    /// are read whole before they go upstream (429 with `Retry-After` beyond; 0 = no
    /// limit).
    pub max_buffered_body_bytes: u64,
    /// CA bundle (PEM) for client certificates on the TLS listener: a client whose
    /// certificate verifies is the user its CN names, in the groups its O values name
    /// (kube-apiserver's `--client-ca-file`). Empty: no client certificates.
    pub client_ca_file: String,
    /// CA bundle (PEM) that signs trusted front proxies' certificates
    /// (kube-apiserver's `--requestheader-client-ca-file`). Empty: no front proxy.
    pub requestheader_client_ca_file: String,
    /// CNs a front proxy's certificate may have (empty: any the CA signed).
    pub requestheader_allowed_names: Vec<String>,
    /// Headers that name the user; the first is the one written upstream.
    pub requestheader_username_headers: Vec<String>,
    /// Headers that name a group; the first is the one written upstream.
    pub requestheader_group_headers: Vec<String>,
    /// Prefixes of headers that carry extras; the first is the one written upstream.
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// `X-Forwarded-For` upstream (the apiserver's audit `sourceIPs`): `append` the
    /// client's address to what it sent, or `replace` it (and drop `X-Real-Ip`) for
    /// clients not trusted to say who they are.
    pub forwarded_for: ForwardedFor,
    /// The lowest TLS version cborgate speaks, by kube-apiserver's names
    /// (`--tls-min-version`): `VersionTLS12` or `VersionTLS13`.
    pub tls_min_version: String,
    /// The TLS 1.2 cipher suites offered, by Go's and kube-apiserver's names
    /// (`--tls-cipher-suites`); empty: every suite of [`TLS12_CIPHER_SUITES`]. TLS 1.3's
    /// suites are always on, as in Go.
    pub tls_cipher_suites: Vec<String>,
}

/// The TLS 1.2 cipher suites cborgate can offer (rustls, ring), by the names Go and
/// kube-apiserver's `--tls-cipher-suites` give them; every one is ECDHE with an AEAD.
pub const TLS12_CIPHER_SUITES: [&str; 6] = [
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
];

/// Go's names of TLS 1.3's suites, which `--tls-cipher-suites` may list (they are
/// always on).
const TLS13_CIPHER_SUITES: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// A `--tls-cipher-suites` name as [`TLS12_CIPHER_SUITES`] or TLS 1.3's list has it (Go
/// also takes the CHACHA20 names without `_SHA256`); `None`: not one cborgate offers.
pub fn cipher_suite_name(name: &str) -> Option<&'static str> {
    let full = match name {
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        n => n,
    };
    TLS12_CIPHER_SUITES
        .iter()
        .chain(TLS13_CIPHER_SUITES.iter())
        .find(|n| **n == full)
        .copied()
}

impl Default for ServerConfig {
    fn default() -> Self {
        let names = crate::negotiate::identity::HeaderNames::default();
        ServerConfig {
            listen: "127.0.0.1:8080".into(),
            admin: "127.0.0.1:9464".into(),
            threads: 2,
            tls_cert: String::new(),
            tls_key: String::new(),
            grace_period_seconds: 30,
            shutdown_delay_seconds: 0,
            idle_timeout_seconds: 90,
            request_head_timeout_seconds: 32,
            max_connections: 0,
            http2_max_streams: 250,
            write_buffer_bytes: DEFAULT_WRITE_BUFFER_BYTES,
            request_read_timeout_seconds: 60,
            max_header_bytes: MAX_HEADER_BYTES,
            max_requests_inflight: 400,
            max_long_running_requests: 0,
            compress_responses: true,
            max_buffered_body_bytes: DEFAULT_MAX_BUFFERED_BODY_BYTES,
            client_ca_file: String::new(),
            requestheader_client_ca_file: String::new(),
            requestheader_allowed_names: Vec::new(),
            // kube-apiserver's defaults, as `negotiate::identity` has them.
            requestheader_username_headers: names.user,
            requestheader_group_headers: names.group,
            requestheader_extra_headers_prefix: names.extra_prefix,
            forwarded_for: ForwardedFor::Append,
            tls_min_version: "VersionTLS12".into(),
            tls_cipher_suites: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// `http://host:port` or `https://host:port` of the apiserver; empty = not set.
    pub url: String,
    pub mode: UpstreamMode,
    /// CA bundle (PEM) to verify the upstream; empty: the system roots.
    pub ca_file: String,
    /// Client certificate and key (PEM) presented to the upstream.
    pub client_cert: String,
    pub client_key: String,
    /// Skip verifying the upstream certificate (tests only).
    pub insecure_skip_verify: bool,
    /// Connect timeout, milliseconds.
    pub connect_timeout_ms: u64,
    /// Time allowed for the upstream to send response headers on short
    /// requests (never applied to watches and other long-running requests).
    pub response_header_timeout_seconds: u64,
    /// The largest request body cborgate sends upstream after transcoding it, bytes
    /// (413 beyond): the apiserver's own limit on a JSON body.
    pub max_request_body_bytes: u64,
    /// `auto`: how long what was learned about a (verb, group, resource)
    /// holds before cborgate probes with CBOR again.
    pub capability_ttl_seconds: u64,
    /// HTTP/2 to a TLS upstream that offers it.
    pub http2: Http2,
    /// Most requests (streams) cborgate puts on one HTTP/2 upstream connection; the
    /// upstream's own SETTINGS_MAX_CONCURRENT_STREAMS also applies.
    pub http2_max_streams: usize,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            url: String::new(),
            mode: UpstreamMode::Auto,
            ca_file: String::new(),
            client_cert: String::new(),
            client_key: String::new(),
            insecure_skip_verify: false,
            connect_timeout_ms: 5_000,
            response_header_timeout_seconds: 60,
            max_request_body_bytes: 3 * 1024 * 1024,
            capability_ttl_seconds: 600,
            http2: Http2::Auto,
            http2_max_streams: 250,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CodecConfig {
    /// Streaming window in bytes: smaller bodies use definite lengths only.
    pub window_bytes: usize,
    /// `bytes` (as kube-apiserver writes) or `text` strings in CBOR.
    pub strings: crate::codec::StringMode,
    /// Maximum nesting depth of a body.
    pub max_depth: usize,
    /// Maximum length of one string, bytes.
    pub max_string_bytes: u64,
    /// Maximum request body cborgate transcodes (413 beyond), bytes.
    pub max_request_body_bytes: usize,
}

impl Default for CodecConfig {
    fn default() -> Self {
        let limits = crate::codec::Limits::default();
        CodecConfig {
            window_bytes: crate::codec::DEFAULT_WINDOW,
            strings: crate::codec::StringMode::Bytes,
            max_depth: limits.max_depth,
            max_string_bytes: limits.max_string_len,
            max_request_body_bytes: 3 * 1024 * 1024,
        }
    }
}

/// The largest `metrics.max_resources`: each pair multiplies the series of the families
/// that carry `group` and `resource` (docs/wire.md §6).
pub const MAX_RESOURCE_LABELS: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Distinct (group, resource) label pairs with labels of their own; later ones are
    /// counted as `(other)`. 0: every resource is `(other)`.
    pub max_resources: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig { max_resources: 200 }
    }
}

/// Keeping answers that old CBOR decoders refuse from being made CBOR (docs/wire.md §2b).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CborProtectionConfig {
    /// Answer JSON instead of CBOR when a client that decodes CBOR with the old limits
    /// (and accepts JSON) would get an array or map wider than `max_elements`.
    pub enabled: bool,
    /// `User-Agent` patterns of further clients with the old limits: `*` any run of
    /// bytes, `?` any one byte, matched against the whole value.
    pub user_agents: Vec<String>,
    /// Treat every client as one with the old limits.
    pub all_clients: bool,
    /// The widest array (elements) or map (pairs) such a client decodes.
    pub max_elements: u64,
    /// The most of a response's start held while it is decided, bytes.
    pub hold_bytes: usize,
}

/// The decode limit of client-go 1.32–1.35 (apimachinery's CBOR decode modes:
/// `MaxArrayElements` and `MaxMapPairs`, docs/wire.md §2b).
pub const OLD_CBOR_LIMIT: u64 = 1024;

/// The most `cbor_protection.hold_bytes` may be: each request held holds this much.
pub const MAX_HOLD_BYTES: usize = 64 * 1024 * 1024;

impl Default for CborProtectionConfig {
    fn default() -> Self {
        CborProtectionConfig {
            enabled: true,
            user_agents: Vec::new(),
            all_clients: false,
            max_elements: OLD_CBOR_LIMIT,
            hold_bytes: 1024 * 1024,
        }
    }
}

/// `log.level` and `--log-level`: cborgate's own lines at this level and above. Anything
/// else is a configuration error: an unknown level (`verbose`, `warning`) once reached
/// the log filter, which read it as a target name and silenced every line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
    Trace,
    Off,
}

impl LogLevel {
    /// The level as tracing filters by it.
    pub fn filter(self) -> tracing::level_filters::LevelFilter {
        use tracing::level_filters::LevelFilter;
        match self {
            LogLevel::Error => LevelFilter::ERROR,
            LogLevel::Warn => LevelFilter::WARN,
            LogLevel::Info => LevelFilter::INFO,
            LogLevel::Debug => LevelFilter::DEBUG,
            LogLevel::Trace => LevelFilter::TRACE,
            LogLevel::Off => LevelFilter::OFF,
        }
    }
}

/// `log.format` and `--log-format`: how each line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line of text, `key=value` fields.
    #[default]
    Text,
    /// One flat JSON object a line.
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// RUST_LOG, when set, wins. pingora's own lines stay at `warn` unless RUST_LOG
    /// says otherwise.
    pub level: LogLevel,
    pub format: LogFormat,
    /// Lines that may wait to be written to stderr, at least 1; when stderr does not
    /// keep up, further lines are dropped and counted, and requests never wait.
    pub queue_lines: usize,
}

/// The most `log.queue_lines` may be. The queue holds at most 16 MiB of lines in any
/// case (src/ops/logs.rs); beyond a million lines a bound in lines means nothing.
pub const MAX_LOG_QUEUE_LINES: usize = 1 << 20;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: LogLevel::default(),
            format: LogFormat::default(),
            queue_lines: 16_384,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub upstream: UpstreamConfig,
    pub codec: CodecConfig,
    pub metrics: MetricsConfig,
    pub cbor_protection: CborProtectionConfig,
    pub log: LogConfig,
}

/// A configuration whose values were checked ([`Config::check`]): what the server is
/// built from.
#[derive(Debug, Clone)]
pub struct Checked(Config);

impl std::ops::Deref for Checked {
    type Target = Config;
    fn deref(&self) -> &Config {
        &self.0
    }
}

impl Checked {
    pub fn into_inner(self) -> Config {
        self.0
    }
}

/// A configuration problem: exit status 2, with a message naming the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The upstream URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamUrl {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl UpstreamUrl {
    pub fn parse(url: &str) -> Result<Self, ConfigError> {
        let bad = || {
            ConfigError(format!(
                "upstream.url: {url:?} is not http://HOST:PORT or https://HOST:PORT"
            ))
        };
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(bad());
        };
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') {
            return Err(bad());
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h.to_string(), p.parse::<u16>().map_err(|_| bad())?)
            }
            _ => (rest.to_string(), if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(bad());
        }
        Ok(UpstreamUrl {
            tls,
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
        })
    }
}

impl Config {
    /// Read a TOML file; unknown keys and values of the wrong type are errors that name
    /// the key and the file. The values are checked once, with the flags over them
    /// ([`Config::check`]).
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError(format!("--config {}: cannot read it: {e}", path.display()))
        })?;
        Self::from_toml(&text).map_err(|e| ConfigError(format!("{}: {}", path.display(), e.0)))
    }

    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError(toml_error(text, &e)))
    }

    /// Check, once, what types cannot: each value, and the keys that go together. An
    /// error about one key names its `serve` flag too, and the file when there is one,
    /// as `FILE: KEY (--FLAG): …`, whether the value came from the file or the flag.
    pub fn check(self, file: Option<&Path>) -> Result<Checked, ConfigError> {
        let checked = self
            .validate_values()
            .map_err(|e| ConfigError(name_the_flag(&e.0)))
            .and_then(|()| self.validate_client_certificates());
        match (checked, file) {
            (Ok(()), _) => Ok(Checked(self)),
            (Err(e), Some(f)) => Err(ConfigError(format!("{}: {}", f.display(), e.0))),
            (Err(e), None) => Err(e),
        }
    }

    fn validate_values(&self) -> Result<(), ConfigError> {
        // Empty is "not set": `serve` requires it (cli::load), `demo` sets its own.
        if !self.upstream.url.is_empty() {
            UpstreamUrl::parse(&self.upstream.url)?;
        }
        let (l, a) = self.listen_addrs()?;
        if self.server.tls_cert.is_empty() != self.server.tls_key.is_empty() {
            return Err(ConfigError(
                "server.tls_cert and server.tls_key go together".into(),
            ));
        }
        if self.upstream.client_cert.is_empty() != self.upstream.client_key.is_empty() {
            return Err(ConfigError(
                "upstream.client_cert and upstream.client_key go together".into(),
            ));
        }
        self.validate_identity()?;
        let overlap = l.port() == a.port()
            && (l.ip() == a.ip() || l.ip().is_unspecified() || a.ip().is_unspecified());
        if overlap {
            return Err(ConfigError(format!(
                "server.listen ({l}) and server.admin ({a}) must be different ports: the admin \
                 listener is never the proxy port"
            )));
        }
        if self.server.max_header_bytes == 0 || self.server.max_header_bytes > MAX_HEADER_BYTES {
            return Err(ConfigError(format!(
                "server.max_header_bytes: {} is not between 1 and {MAX_HEADER_BYTES}",
                self.server.max_header_bytes
            )));
        }
        if self.server.write_buffer_bytes > MAX_WRITE_BUFFER_BYTES {
            return Err(ConfigError(format!(
                "server.write_buffer_bytes: {} is over {MAX_WRITE_BUFFER_BYTES}",
                self.server.write_buffer_bytes
            )));
        }
        if !(1..=10_000).contains(&self.server.http2_max_streams) {
            return Err(ConfigError(format!(
                "server.http2_max_streams: {} is not between 1 and 10000",
                self.server.http2_max_streams
            )));
        }
        if !(1..=10_000).contains(&self.upstream.http2_max_streams) {
            return Err(ConfigError(format!(
                "upstream.http2_max_streams: {} is not between 1 and 10000",
                self.upstream.http2_max_streams
            )));
        }
        if self.server.request_read_timeout_seconds == 0 {
            return Err(ConfigError(
                "server.request_read_timeout_seconds: must be at least 1".into(),
            ));
        }
        if self.upstream.max_request_body_bytes == 0 {
            return Err(ConfigError(
                "upstream.max_request_body_bytes: must be at least 1".into(),
            ));
        }
        if self.server.request_head_timeout_seconds == 0 {
            return Err(ConfigError(
                "server.request_head_timeout_seconds: must be at least 1".into(),
            ));
        }
        if self.server.threads == 0 {
            return Err(ConfigError("server.threads: must be at least 1".into()));
        }
        self.validate_times()?;
        self.validate_tls_policy()?;
        if self.codec.max_depth == 0 {
            return Err(ConfigError("codec.max_depth: must be at least 1".into()));
        }
        if self.codec.window_bytes == 0 {
            return Err(ConfigError("codec.window_bytes: must be at least 1".into()));
        }
        if self.metrics.max_resources > MAX_RESOURCE_LABELS {
            return Err(ConfigError(format!(
                "metrics.max_resources: {} is more than {MAX_RESOURCE_LABELS}",
                self.metrics.max_resources
            )));
        }
        self.validate_cbor_protection()
    }

    /// `[cbor_protection]`: a bound that holds something, patterns that match something.
    fn validate_cbor_protection(&self) -> Result<(), ConfigError> {
        let p = &self.cbor_protection;
        if p.max_elements == 0 {
            return Err(ConfigError(
                "cbor_protection.max_elements: must be at least 1".into(),
            ));
        }
        if p.hold_bytes == 0 || p.hold_bytes > MAX_HOLD_BYTES {
            return Err(ConfigError(format!(
                "cbor_protection.hold_bytes: {} is not between 1 and {MAX_HOLD_BYTES}",
                p.hold_bytes
            )));
        }
        if !(1..=MAX_LOG_QUEUE_LINES).contains(&self.log.queue_lines) {
            return Err(ConfigError(format!(
                "log.queue_lines: {} is not between 1 and {MAX_LOG_QUEUE_LINES}",
                self.log.queue_lines
            )));
        }
        if p.user_agents.iter().any(|u| u.is_empty()) {
            return Err(ConfigError(
                "cbor_protection.user_agents: an empty pattern matches no User-Agent".into(),
            ));
        }
        Ok(())
    }

    /// `server.tls_min_version` and `server.tls_cipher_suites`, by kube-apiserver's names.
    fn validate_tls_policy(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        match s.tls_min_version.as_str() {
            "VersionTLS12" | "VersionTLS13" => {}
            "VersionTLS10" | "VersionTLS11" => {
                return Err(ConfigError(format!(
                    "server.tls_min_version (--tls-min-version): {}: cborgate speaks TLS 1.2 \
                     and 1.3 only; VersionTLS12 is the lowest",
                    s.tls_min_version
                )))
            }
            other => {
                return Err(ConfigError(format!(
                    "server.tls_min_version (--tls-min-version): {other:?} is not VersionTLS12 \
                     or VersionTLS13"
                )))
            }
        }
        if let Some(bad) = s
            .tls_cipher_suites
            .iter()
            .find(|n| cipher_suite_name(n).is_none())
        {
            return Err(ConfigError(format!(
                "server.tls_cipher_suites (--tls-cipher-suites): {bad} is not one cborgate \
                 offers; the TLS 1.2 suites are {}, and TLS 1.3's are always on",
                TLS12_CIPHER_SUITES.join(", ")
            )));
        }
        // TLS 1.3's suites cannot be chosen (always on, as in Go), so a list of only those
        // leaves TLS 1.2 clients no suite at all. kube-apiserver takes such a list and
        // then fails every TLS 1.2 handshake; cborgate says so at start instead.
        let only_tls13 = !s.tls_cipher_suites.is_empty()
            && s.tls_cipher_suites
                .iter()
                .all(|n| TLS13_CIPHER_SUITES.contains(&cipher_suite_name(n).unwrap_or("")));
        if only_tls13 && s.tls_min_version != "VersionTLS13" {
            return Err(ConfigError(format!(
                "server.tls_cipher_suites (--tls-cipher-suites): {} are TLS 1.3 suites only, \
                 which are always on and cannot be chosen: TLS 1.2 clients would have no suite. \
                 For TLS 1.3 only, set server.tls_min_version = \"VersionTLS13\" \
                 (--tls-min-version=VersionTLS13); otherwise name TLS 1.2 suites too",
                s.tls_cipher_suites.join(", ")
            )));
        }
        Ok(())
    }

    /// Times beyond their bound are a mistake (a unit confused, a digit too many), not a
    /// wish: each is refused with its bound.
    /// The times and their upper bounds: (key, value, most, unit).
    fn time_bounds(&self) -> [(&'static str, u64, u64, &'static str); 8] {
        const HOUR: u64 = 3_600;
        const DAY: u64 = 86_400;
        let (s, u) = (&self.server, &self.upstream);
        [
            (
                "server.grace_period_seconds",
                s.grace_period_seconds,
                HOUR,
                "s",
            ),
            (
                "server.shutdown_delay_seconds",
                s.shutdown_delay_seconds,
                HOUR,
                "s",
            ),
            (
                "server.request_read_timeout_seconds",
                s.request_read_timeout_seconds,
                DAY,
                "s",
            ),
            (
                "server.request_head_timeout_seconds",
                s.request_head_timeout_seconds,
                DAY,
                "s",
            ),
            (
                "server.idle_timeout_seconds",
                s.idle_timeout_seconds,
                DAY,
                "s",
            ),
            (
                "upstream.connect_timeout_ms",
                u.connect_timeout_ms,
                600_000,
                "ms",
            ),
            (
                "upstream.response_header_timeout_seconds",
                u.response_header_timeout_seconds,
                DAY,
                "s",
            ),
            (
                "upstream.capability_ttl_seconds",
                u.capability_ttl_seconds,
                7 * DAY,
                "s",
            ),
        ]
    }

    /// The most `key` (a time) may be, for a flag's message; `None` for other keys.
    pub fn most_for(key: &str) -> Option<u64> {
        Config::default()
            .time_bounds()
            .iter()
            .find(|(k, ..)| *k == key)
            .map(|&(_, _, most, _)| most)
    }

    fn validate_times(&self) -> Result<(), ConfigError> {
        for (key, value, bound, unit) in self.time_bounds() {
            if value > bound {
                return Err(ConfigError(format!(
                    "{key}: {value} is more than the most it may be, {bound} ({bound} {unit})"
                )));
            }
        }
        Ok(())
    }

    /// The request-header keys: header names that are names.
    fn validate_identity(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        for (key, list, may_be_empty) in [
            (
                "server.requestheader_username_headers",
                &s.requestheader_username_headers,
                false,
            ),
            (
                "server.requestheader_group_headers",
                &s.requestheader_group_headers,
                false,
            ),
            (
                "server.requestheader_extra_headers_prefix",
                &s.requestheader_extra_headers_prefix,
                true,
            ),
        ] {
            if list.is_empty() && !may_be_empty {
                return Err(ConfigError(format!(
                    "{key}: needs at least one header name"
                )));
            }
            for name in list {
                if name.is_empty()
                    || !name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
                {
                    return Err(ConfigError(format!("{key}: {name:?} is not a header name")));
                }
            }
        }
        Ok(())
    }

    /// What client certificates need beside them, checked once every source (file and
    /// flags) is merged: the TLS listener, and a certificate to name identities upstream
    /// with.
    fn validate_client_certificates(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        for (key, file) in [
            ("server.client_ca_file", &s.client_ca_file),
            (
                "server.requestheader_client_ca_file",
                &s.requestheader_client_ca_file,
            ),
        ] {
            if file.is_empty() {
                continue;
            }
            if s.tls_cert.is_empty() {
                return Err(ConfigError(format!(
                    "{key}: client certificates need the TLS listener (server.tls_cert/tls_key)"
                )));
            }
            if self.upstream.client_cert.is_empty() {
                return Err(ConfigError(format!(
                    "{key}: needs upstream.client_cert/client_key, the front-proxy client \
                     certificate the upstream trusts identity headers from"
                )));
            }
        }
        if !s.requestheader_allowed_names.is_empty() && s.requestheader_client_ca_file.is_empty() {
            return Err(ConfigError(
                "server.requestheader_allowed_names: needs server.requestheader_client_ca_file"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The identity header names, for `negotiate::identity`.
    pub fn identity_headers(&self) -> crate::negotiate::identity::HeaderNames {
        crate::negotiate::identity::HeaderNames {
            client_certs: !self.server.client_ca_file.is_empty()
                || !self.server.requestheader_client_ca_file.is_empty(),
            user: self.server.requestheader_username_headers.clone(),
            group: self.server.requestheader_group_headers.clone(),
            extra_prefix: self.server.requestheader_extra_headers_prefix.clone(),
        }
    }

    /// The limit on client connections: `server.max_connections`, or when that is 0 what
    /// the open-file limit `nofile` leaves (`limit_from_fds`; no limit
    /// known: 1,024 assumed).
    pub fn connection_limit(&self, nofile: Option<u64>) -> usize {
        match self.server.max_connections {
            0 => limit_from_fds(nofile.unwrap_or(1024)),
            n => n,
        }
    }

    /// `server.listen` and `server.admin` as socket addresses; an error names the key.
    pub fn listen_addrs(
        &self,
    ) -> Result<(std::net::SocketAddr, std::net::SocketAddr), ConfigError> {
        let parse = |key: &str, addr: &str| {
            listen_addr(addr).map_err(|e| ConfigError(format!("{key}: {e}")))
        };
        Ok((
            parse("server.listen", &self.server.listen)?,
            parse("server.admin", &self.server.admin)?,
        ))
    }

    pub fn codec_limits(&self) -> crate::codec::Limits {
        crate::codec::Limits {
            max_depth: self.codec.max_depth,
            max_string_len: self.codec.max_string_bytes,
            ..Default::default()
        }
    }
}

/// The `serve` flag that sets a configuration key: `[server]` keys by their own name,
/// the other sections' with the section in front (`upstream.http2_max_streams` is
/// `--upstream-http2-max-streams`, `codec.max_request_body_bytes` is
/// `--codec-max-request-body-bytes`), but for three older, shorter names.
pub fn flag_for(key: &str) -> String {
    match key {
        "upstream.url" => return "--upstream".into(),
        "upstream.mode" => return "--mode".into(),
        "upstream.ca_file" => return "--upstream-ca".into(),
        _ => {}
    }
    let name = match key.split_once('.') {
        Some(("server", k)) => k.to_string(),
        Some((section, k)) => format!("{section}_{k}"),
        None => key.to_string(),
    };
    format!("--{}", name.replace('_', "-"))
}

/// `KEY: message` as `KEY (--FLAG): message`; messages that name the flag already, or
/// do not start with one key, are left as they are.
fn name_the_flag(message: &str) -> String {
    match message.split_once(": ") {
        Some((key, rest))
            if key.split_once('.').is_some_and(|(section, k)| {
                [
                    "server",
                    "upstream",
                    "codec",
                    "metrics",
                    "cbor_protection",
                    "log",
                ]
                .contains(&section)
                    && !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit())
            }) =>
        {
            format!("{key} ({}): {rest}", flag_for(key))
        }
        _ => message.to_string(),
    }
}

/// The TOML parser's message with serde's Rust type names put in words: `expected usize`
/// (a negative number or a fraction given) says what the key takes instead.
/// A TOML error in an operator's words: `KEY (--FLAG): what is wrong` when it is about
/// one key's value (the key found from where the error is), never a Rust type's name.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = plain_toml_error(e.message()).replace('`', "");
    let Some(span) = e.span() else {
        return plain_toml_error(&e.to_string());
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.rsplit('\n').next().unwrap_or("");
    let key = line.split_once('=').map(|(k, _)| k.trim());
    let section = before
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix('[')?.strip_suffix(']'))
        .map(str::trim);
    match (section, key) {
        (Some(section), Some(key)) if !key.is_empty() => {
            name_the_flag(&format!("{section}.{key}: {message}"))
        }
        _ => plain_toml_error(&e.to_string()),
    }
}

/// The documented default file at the repository root.
pub fn default_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config.toml")
}

/// Descriptors kept back from client connections when the limit is derived: the
/// listeners, the runtimes' own descriptors, log and certificate files, the admin
/// listener's connections and pingora's pool of idle upstream connections (128).
pub const FD_RESERVE: u64 = 256;

/// `server.max_connections` when it is 0: what is left of the descriptor limit after
/// [`FD_RESERVE`], halved because each client connection may hold an upstream
/// connection too. At a 1,024 limit that is 384; at least 1.
pub fn limit_from_fds(nofile: u64) -> usize {
    (nofile.saturating_sub(FD_RESERVE) / 2).max(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file's text parsed and checked, as `serve` loads it (without flags).
    fn checked(text: &str) -> Result<Checked, ConfigError> {
        Config::from_toml(text).and_then(|c| c.check(None))
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let e = checked("[server]\nlisten = \"127.0.0.1:1\"\nlsten = 1\n").unwrap_err();
        assert!(e.0.contains("lsten"), "{e}");
        let e = checked("[nope]\n").unwrap_err();
        assert!(e.0.contains("nope"), "{e}");
    }

    #[test]
    fn listen_addresses_as_go_takes_them() {
        let a = |s: &str| listen_addr(s).map(|a| a.to_string()).ok();
        for (given, bound) in [
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("[127.0.0.1]:8080", "127.0.0.1:8080"),
            ("[::1]:8080", "[::1]:8080"),
            ("[fd00::5]:9464", "[fd00::5]:9464"),
            ("[::]:9464", "[::]:9464"),
            (":8443", "[::]:8443"),
            ("localhost:8080", "127.0.0.1:8080"),
            ("[localhost]:8080", "127.0.0.1:8080"),
        ] {
            assert_eq!(a(given).as_deref(), Some(bound), "{given}");
        }
        for bad in [
            "",
            ":",
            "8080",
            ":x",
            "127.0.0.1",
            "localhost:99999",
            "[::1]",
            "[::1]8080",
            "[]:80",
            ":-1",
            ":0",
            "127.0.0.1:0",
            "[::1]:0",
        ] {
            assert_eq!(a(bad), None, "{bad}");
        }
        let e = checked("[server]\nadmin = \"127.0.0.1:0\"\n").unwrap_err();
        assert!(
            e.0.starts_with("server.admin (--admin): \"127.0.0.1:0\": port 0"),
            "{e}"
        );
        let e = listen_addr("fd00::5:9464").unwrap_err();
        assert!(e.contains("write [fd00::5]:9464"), "{e}");
        let e = checked("[server]\nlisten = \"fd00::5:9464\"\n").unwrap_err();
        assert!(
            e.0.starts_with("server.listen (--listen): \"fd00::5:9464\" is an IPv6 address"),
            "{e}"
        );
        let c = checked("[server]\nlisten = \":8443\"\nadmin = \"localhost:9464\"\n");
        assert!(c.is_ok(), "{c:?}");
        let c = checked("[server]\nlisten = \"[127.0.0.1]:8443\"\nadmin = \"[::1]:9464\"\n");
        assert!(c.is_ok(), "{c:?}");
        // `:PORT` is every interface of both families: the admin port may not be the same.
        let e = checked("[server]\nlisten = \":9464\"\nadmin = \"127.0.0.1:9464\"\n");
        assert!(e.is_err());
    }

    /// Every key that takes one of a list of values, given another, and every number
    /// given a negative one: the key, its flag, and what it takes; never serde's
    /// "unknown variant" or a Rust type's name.
    #[test]
    fn refused_values_name_what_the_key_takes() {
        for (section, key, want) in [
            ("upstream", "mode", "auto, legacy, native, upgrade"),
            ("upstream", "http2", "auto, off"),
            ("codec", "strings", "bytes, text"),
            ("log", "level", "error, warn, info, debug, trace, off"),
            ("log", "format", "text, json"),
            ("server", "forwarded_for", "append, replace"),
        ] {
            let e = Config::from_toml(&format!("[{section}]\n{key} = \"bogus\"\n")).unwrap_err();
            let flag = flag_for(&format!("{section}.{key}"));
            assert_eq!(
                e.0,
                format!("{section}.{key} ({flag}): \"bogus\" is not one of: {want}")
            );
        }
        let text = std::fs::read_to_string(default_file()).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        let mut numbers = 0;
        for (section, keys) in doc {
            for (key, value) in keys.as_table().unwrap() {
                if !value.is_integer() {
                    continue;
                }
                let e = Config::from_toml(&format!("[{section}]\n{key} = -1\n")).unwrap_err();
                let flag = flag_for(&format!("{section}.{key}"));
                assert_eq!(
                    e.0,
                    format!(
                        "{section}.{key} ({flag}): -1 is not accepted: expected a whole number, \
                         0 or more"
                    )
                );
                numbers += 1;
            }
        }
        assert!(numbers >= 26, "{numbers} numeric keys");
    }

    /// A cipher list of TLS 1.3 suites only would leave TLS 1.2 clients nothing: refused
    /// at start unless TLS 1.3 is the minimum; TLS 1.3 names beside TLS 1.2 ones are
    /// harmless (always on).
    #[test]
    fn a_tls13_only_cipher_list_needs_a_tls13_minimum() {
        let suites = "tls_cipher_suites = [\"TLS_AES_128_GCM_SHA256\", \"TLS_AES_256_GCM_SHA384\"]";
        let e = checked(&format!("[server]\n{suites}\n")).unwrap_err();
        assert_eq!(
            e.0,
            "server.tls_cipher_suites (--tls-cipher-suites): TLS_AES_128_GCM_SHA256, \
             TLS_AES_256_GCM_SHA384 are TLS 1.3 suites only, which are always on and cannot be \
             chosen: TLS 1.2 clients would have no suite. For TLS 1.3 only, set \
             server.tls_min_version = \"VersionTLS13\" (--tls-min-version=VersionTLS13); \
             otherwise name TLS 1.2 suites too"
        );
        assert!(checked(&format!(
            "[server]\n{suites}\ntls_min_version = \"VersionTLS13\"\n"
        ))
        .is_ok());
        assert!(checked(
            "[server]\ntls_cipher_suites = [\"TLS_AES_128_GCM_SHA256\", \
             \"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\"]\n"
        )
        .is_ok());
    }

    #[test]
    fn a_config_file_that_cannot_be_read_is_named_with_its_flag() {
        let e = Config::from_file(Path::new("/nonexistent/cborgate.toml")).unwrap_err();
        assert_eq!(
            e.0,
            "--config /nonexistent/cborgate.toml: cannot read it: No such file or directory \
             (os error 2)"
        );
    }

    #[test]
    fn absurd_times_are_refused_with_their_bound() {
        let e = checked("[server]\ngrace_period_seconds = 99999999999\n").unwrap_err();
        assert_eq!(
            e.0,
            "server.grace_period_seconds (--grace-period-seconds): 99999999999 is more than the most it may be, 3600 (3600 s)"
        );
        let e = checked("[upstream]\nconnect_timeout_ms = 3600000\n").unwrap_err();
        assert!(
            e.0.starts_with("upstream.connect_timeout_ms (--upstream-connect-timeout-ms): "),
            "{e}"
        );
        assert!(checked("[server]\ngrace_period_seconds = 3600\n").is_ok());
    }

    #[test]
    fn tls_policy_names_are_kube_apiservers() {
        let c = |t: &str| checked(&format!("[server]\n{t}\n"));
        assert!(c("tls_min_version = \"VersionTLS13\"").is_ok());
        assert!(c("tls_cipher_suites = [\"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305\", \"TLS_AES_128_GCM_SHA256\"]").is_ok());
        let e = c("tls_min_version = \"VersionTLS10\"").unwrap_err();
        assert!(e.0.contains("TLS 1.2 and 1.3 only"), "{e}");
        let e = c("tls_cipher_suites = [\"TLS_RSA_WITH_AES_128_CBC_SHA\"]").unwrap_err();
        assert!(
            e.0.starts_with("server.tls_cipher_suites (--tls-cipher-suites): TLS_RSA_WITH_AES_128_CBC_SHA is not one"),
            "{e}"
        );
    }

    #[test]
    fn type_errors_name_no_rust_type() {
        let e = checked("[server]\nthreads = -1\n").unwrap_err();
        assert!(e.0.contains("expected a whole number, 0 or more"), "{e}");
        assert!(!e.0.contains("usize"), "{e}");
    }

    #[test]
    fn log_level_is_one_of_the_known_levels() {
        for level in ["error", "warn", "info", "debug", "trace", "off"] {
            let c = checked(&format!("[log]\nlevel = \"{level}\"\n"));
            assert!(c.is_ok(), "{level}: {c:?}");
        }
        for level in ["verbose", "warning", "INFO", "", "info,cborgate=debug"] {
            let e = checked(&format!("[log]\nlevel = {level:?}\n")).unwrap_err();
            assert!(e.0.starts_with("log.level (--log-level): "), "{level}: {e}");
            assert!(
                e.0.contains("error, warn, info, debug, trace, off"),
                "{level}: {e}"
            );
        }
    }

    #[test]
    fn cbor_protection_values_are_checked_naming_key_and_flag() {
        let c = |t: &str| checked(&format!("[cbor_protection]\n{t}\n"));
        assert!(c("user_agents = [\"my-operator/*\"]\nall_clients = true").is_ok());
        for (text, want) in [
            ("max_elements = 0", "cbor_protection.max_elements (--cbor-protection-max-elements): must be at least 1"),
            ("hold_bytes = 0", "cbor_protection.hold_bytes (--cbor-protection-hold-bytes): 0 is not between"),
            ("hold_bytes = 67108865", "cbor_protection.hold_bytes (--cbor-protection-hold-bytes): 67108865 is not between"),
            ("user_agents = [\"\"]", "cbor_protection.user_agents (--cbor-protection-user-agents): an empty pattern"),
        ] {
            let e = c(text).unwrap_err();
            assert!(e.0.starts_with(want), "{text}: {e}");
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            UpstreamUrl::parse("https://10.0.0.1:6443").unwrap(),
            UpstreamUrl {
                tls: true,
                host: "10.0.0.1".into(),
                port: 6443
            }
        );
        assert_eq!(UpstreamUrl::parse("http://localhost").unwrap().port, 80);
        assert_eq!(UpstreamUrl::parse("http://[::1]:8080").unwrap().host, "::1");
        assert!(UpstreamUrl::parse("ftp://x").is_err());
        assert!(UpstreamUrl::parse("http://x:y").is_err());
        assert!(UpstreamUrl::parse("http://x/path").is_err());
    }

    #[test]
    fn the_documented_file_is_the_defaults() {
        let file = Config::from_file(&default_file()).expect("config.toml parses");
        assert_eq!(
            file,
            Config::default(),
            "config.toml and the code's defaults differ"
        );
        // The file spells out every key the code knows, and no other.
        let text = std::fs::read_to_string(default_file()).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        let code = toml::Table::try_from(Config::default()).unwrap();
        let keys = |t: &toml::Table| -> Vec<String> {
            let mut v = Vec::new();
            for (section, inner) in t {
                for k in inner.as_table().unwrap().keys() {
                    v.push(format!("{section}.{k}"));
                }
            }
            v.sort();
            v
        };
        assert_eq!(keys(&doc), keys(&code));
        // And each key has a comment right above it.
        let lines: Vec<&str> = text.lines().collect();
        for (n, l) in lines.iter().enumerate() {
            let l = l.trim();
            if l.contains(" = ") && !l.starts_with('#') {
                assert!(
                    n > 0 && lines[n - 1].trim_start().starts_with('#'),
                    "config.toml: `{l}` has no comment above it"
                );
            }
        }
    }
}
