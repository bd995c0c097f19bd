//! The long-running commands `serve` and `demo` (the latter only with the `demo`
//! feature, on by default): their flags, configuration loading (flags > file >
//! defaults), logging set-up, and start-up.

use crate::config::{Checked, Config, ConfigError, UpstreamMode};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

// Parsed once at start-up: the size of the flags struct costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum ProxyCommand {
    /// Run the proxy.
    // `-1` is a value (refused by `flag_error` with the accepted range), never a flag.
    #[command(allow_negative_numbers = true)]
    Serve(ServeArgs),
    /// Start the built-in JSON-only apiserver stand-in with the proxy in front of it.
    #[cfg(feature = "demo")]
    Demo(crate::commands::demo::DemoArgs),
}

#[derive(Args, Default)]
pub struct ServeArgs {
    /// Configuration file (TOML; see config.toml for every key). Flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Proxy listen address (server.listen) [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Upstream apiserver URL, http:// or https:// (upstream.url). Required, here or in
    /// the config file.
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// Admin listen address for /metrics, /healthz, /readyz (server.admin)
    /// [default: 127.0.0.1:9464].
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<String>,
    /// How to treat the upstream (upstream.mode) [default: auto].
    #[arg(long)]
    pub mode: Option<UpstreamMode>,
    /// TLS certificate for the proxy listener, PEM; reloaded when it changes (server.tls_cert).
    #[arg(long, requires = "tls_key", value_name = "FILE")]
    pub tls_cert: Option<String>,
    /// TLS key for the proxy listener, PEM (server.tls_key).
    #[arg(long, requires = "tls_cert", value_name = "FILE")]
    pub tls_key: Option<String>,
    /// CA bundle that signs the upstream's certificate, PEM; reloaded when it changes
    /// (upstream.ca_file) [default: the system roots].
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Option<String>,
    /// Client certificate for the upstream, PEM (upstream.client_cert).
    #[arg(long, requires = "upstream_client_key", value_name = "FILE")]
    pub upstream_client_cert: Option<String>,
    /// Client key for the upstream, PEM (upstream.client_key).
    #[arg(long, requires = "upstream_client_cert", value_name = "FILE")]
    pub upstream_client_key: Option<String>,
    /// CA bundle for client certificates on the TLS listener, PEM: a verified client is
    /// named upstream as its CN (user) and O values (groups); reloaded when it changes
    /// (server.client_ca_file). Needs --tls-cert and --upstream-client-cert.
    #[arg(long, value_name = "FILE")]
    pub client_ca_file: Option<String>,
    /// CA bundle that signs trusted front proxies' certificates, PEM; reloaded when it
    /// changes (server.requestheader_client_ca_file).
    #[arg(long, value_name = "FILE")]
    pub requestheader_client_ca_file: Option<String>,
    /// CNs a front proxy's certificate may have, comma-separated; empty: any the CA
    /// signed (server.requestheader_allowed_names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', num_args = 0..)]
    pub requestheader_allowed_names: Option<Vec<String>>,
    /// Headers that name the user, comma-separated (server.requestheader_username_headers)
    /// [default: X-Remote-User].
    #[arg(long, value_name = "HEADERS", value_delimiter = ',')]
    pub requestheader_username_headers: Option<Vec<String>>,
    /// Headers that name a group, comma-separated (server.requestheader_group_headers)
    /// [default: X-Remote-Group].
    #[arg(long, value_name = "HEADERS", value_delimiter = ',')]
    pub requestheader_group_headers: Option<Vec<String>>,
    /// Prefixes of extra headers, comma-separated
    /// (server.requestheader_extra_headers_prefix) [default: X-Remote-Extra-].
    #[arg(long, value_name = "PREFIXES", value_delimiter = ',', num_args = 0..)]
    pub requestheader_extra_headers_prefix: Option<Vec<String>>,
    /// X-Forwarded-For upstream, for the apiserver's audit sourceIPs: append the client's
    /// address to what it sent, or replace it (and drop X-Real-Ip) for clients not
    /// trusted to say who they are (server.forwarded_for) [default: append].
    #[arg(long, value_name = "append|replace", value_parser = ["append", "replace"])]
    pub forwarded_for: Option<String>,
    /// Do not verify the upstream certificate; for tests (upstream.insecure_skip_verify).
    /// `--upstream-insecure-skip-verify=false` turns a file's `true` back off.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true")]
    pub upstream_insecure_skip_verify: Option<bool>,
    /// The lowest TLS version, kube-apiserver's names: VersionTLS12 or VersionTLS13
    /// (server.tls_min_version) [default: VersionTLS12].
    #[arg(long, value_name = "VERSION")]
    pub tls_min_version: Option<String>,
    /// TLS 1.2 cipher suites, comma-separated, by Go's names (server.tls_cipher_suites)
    /// [default: every ECDHE AEAD suite]. TLS 1.3's suites are always on.
    #[arg(long, value_name = "SUITES", value_delimiter = ',')]
    pub tls_cipher_suites: Option<Vec<String>>,
    /// Seconds after SIGTERM during which /readyz fails but requests are still served
    /// (server.shutdown_delay_seconds) [default: 0].
    #[arg(long, value_name = "SECONDS")]
    pub shutdown_delay_seconds: Option<u64>,
    /// Seconds short requests get to finish once the drain begins
    /// (server.grace_period_seconds) [default: 30].
    #[arg(long, value_name = "SECONDS")]
    pub grace_period_seconds: Option<u64>,
    /// Worker threads serving the proxy listener (server.threads) [default: 2].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Seconds an idle keep-alive client connection is kept between requests; 0 = no
    /// limit (server.idle_timeout_seconds) [default: 90].
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout_seconds: Option<u64>,
    /// Longest pause while a client sends its first request head or a request body
    /// (server.request_read_timeout_seconds) [default: 60].
    #[arg(long, value_name = "SECONDS")]
    pub request_read_timeout_seconds: Option<u64>,
    /// Longest time a whole request head may take to arrive, Go's ReadHeaderTimeout
    /// (server.request_head_timeout_seconds) [default: 32].
    #[arg(long, value_name = "SECONDS")]
    pub request_head_timeout_seconds: Option<u64>,
    /// Client connections open at once; 0 = what the open-file limit allows
    /// (server.max_connections) [default: 0].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Requests and watches one HTTP/2 client connection may have open at once
    /// (server.http2_max_streams) [default: 250].
    #[arg(long, value_name = "N")]
    pub http2_max_streams: Option<u32>,
    /// Bytes a client connection gathers before a write, so an HTTP/1.1 head and a small
    /// body go out together; 0 = none (server.write_buffer_bytes)
    /// [default: 16384].
    #[arg(long, value_name = "BYTES")]
    pub write_buffer_bytes: Option<usize>,
    /// Largest request head accepted, bytes; 431 beyond (server.max_header_bytes)
    /// [default: 1048575].
    #[arg(long, value_name = "BYTES")]
    pub max_header_bytes: Option<usize>,
    /// Short requests served at once; 429 beyond, 0 = no limit
    /// (server.max_requests_inflight) [default: 400].
    #[arg(long, value_name = "N")]
    pub max_requests_inflight: Option<usize>,
    /// Long-running requests (watches, exec, followed logs) open at once; 429 beyond,
    /// 0 = no limit (server.max_long_running_requests) [default: 0].
    #[arg(long, value_name = "N")]
    pub max_long_running_requests: Option<usize>,
    /// Gzip large transcoded CBOR answers for clients that accept gzip
    /// (server.compress_responses) [default: true]. `--compress-responses=false` turns
    /// it off.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true")]
    pub compress_responses: Option<bool>,
    /// Request body bytes held in memory at once over all requests; 429 beyond, 0 = no
    /// limit (server.max_buffered_body_bytes) [default: 134217728].
    #[arg(long, value_name = "BYTES")]
    pub max_buffered_body_bytes: Option<u64>,
    /// Milliseconds allowed to connect to the upstream, then 503
    /// (upstream.connect_timeout_ms) [default: 5000].
    #[arg(long, value_name = "MS")]
    pub upstream_connect_timeout_ms: Option<u64>,
    /// Seconds the upstream may take to send response headers on short requests, then
    /// 504 (upstream.response_header_timeout_seconds) [default: 60].
    #[arg(long, value_name = "SECONDS")]
    pub upstream_response_header_timeout_seconds: Option<u64>,
    /// Largest request body sent upstream after transcoding, bytes; 413 beyond
    /// (upstream.max_request_body_bytes) [default: 3145728].
    #[arg(long, value_name = "BYTES")]
    pub upstream_max_request_body_bytes: Option<u64>,
    /// auto mode: seconds what was learned about a (verb, group, resource) holds
    /// (upstream.capability_ttl_seconds) [default: 600].
    #[arg(long, value_name = "SECONDS")]
    pub upstream_capability_ttl_seconds: Option<u64>,
    /// HTTP/2 to a TLS upstream that offers it by ALPN, or HTTP/1.1 only
    /// (upstream.http2) [default: auto].
    #[arg(long, value_name = "auto|off", value_parser = ["auto", "off"])]
    pub upstream_http2: Option<String>,
    /// Most requests and watches on one HTTP/2 upstream connection
    /// (upstream.http2_max_streams) [default: 250].
    #[arg(long, value_name = "N")]
    pub upstream_http2_max_streams: Option<usize>,
    /// Streaming window, bytes: larger bodies stream with indefinite lengths
    /// (codec.window_bytes) [default: 1048576].
    #[arg(long, value_name = "BYTES")]
    pub codec_window_bytes: Option<usize>,
    /// CBOR strings written as byte strings (as kube-apiserver writes) or text strings
    /// (codec.strings) [default: bytes].
    #[arg(long, value_name = "bytes|text")]
    pub codec_strings: Option<crate::codec::StringMode>,
    /// Maximum nesting of arrays, maps and tags in a body; 400 beyond (codec.max_depth)
    /// [default: 10000].
    #[arg(long, value_name = "N")]
    pub codec_max_depth: Option<usize>,
    /// Maximum length of one string in a body, bytes; 400 beyond
    /// (codec.max_string_bytes) [default: 67108864].
    #[arg(long, value_name = "BYTES")]
    pub codec_max_string_bytes: Option<u64>,
    /// Maximum CBOR request body transcoded, bytes; 413 beyond
    /// (codec.max_request_body_bytes) [default: 3145728].
    #[arg(long, value_name = "BYTES")]
    pub codec_max_request_body_bytes: Option<usize>,
    /// Distinct (group, resource) pairs that get metric labels of their own; later ones
    /// are counted as "(other)" (metrics.max_resources) [default: 200].
    #[arg(long, value_name = "N")]
    pub metrics_max_resources: Option<usize>,
    /// Answer JSON instead of CBOR when a client with client-go 1.32–1.35's CBOR decode
    /// limits would get a wider array or map (cbor_protection.enabled) [default: true].
    /// `--cbor-protection-enabled=false` turns it off.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true")]
    pub cbor_protection_enabled: Option<bool>,
    /// More User-Agent patterns of clients with the old CBOR limits, comma-separated;
    /// `*` any run, `?` any one character (cbor_protection.user_agents).
    #[arg(long, value_name = "PATTERNS", value_delimiter = ',', num_args = 0..)]
    pub cbor_protection_user_agents: Option<Vec<String>>,
    /// Treat every client as one with the old CBOR limits
    /// (cbor_protection.all_clients) [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true")]
    pub cbor_protection_all_clients: Option<bool>,
    /// The widest array or map those clients decode
    /// (cbor_protection.max_elements) [default: 1024].
    #[arg(long, value_name = "N")]
    pub cbor_protection_max_elements: Option<u64>,
    /// The most of a response's start held while it is decided, bytes
    /// (cbor_protection.hold_bytes) [default: 1048576].
    #[arg(long, value_name = "BYTES")]
    pub cbor_protection_hold_bytes: Option<usize>,
    /// Log format (log.format) [default: text].
    #[arg(long)]
    pub log_format: Option<crate::config::LogFormat>,
    /// Log level (log.level; RUST_LOG wins when set) [default: info].
    #[arg(long)]
    pub log_level: Option<crate::config::LogLevel>,
    /// Log lines that may wait to be written to stderr; beyond, lines are dropped and
    /// counted in cborgate_log_lines_dropped_total (log.queue_lines) [default: 16384].
    #[arg(long, value_name = "N")]
    pub log_queue_lines: Option<usize>,
}

/// Apply flags over the file over the defaults.
pub fn load(args: &ServeArgs) -> Result<Checked, ConfigError> {
    let mut c = match &args.config {
        Some(p) => Config::from_file(p)?,
        None => Config::default(),
    };
    let set = |dst: &mut String, v: &Option<String>| {
        if let Some(v) = v {
            *dst = v.clone();
        }
    };
    set(&mut c.server.listen, &args.listen);
    set(&mut c.upstream.url, &args.upstream);
    set(&mut c.server.admin, &args.admin);
    set(&mut c.server.tls_cert, &args.tls_cert);
    set(&mut c.server.tls_key, &args.tls_key);
    set(&mut c.upstream.ca_file, &args.upstream_ca);
    set(&mut c.upstream.client_cert, &args.upstream_client_cert);
    set(&mut c.upstream.client_key, &args.upstream_client_key);
    set(&mut c.server.client_ca_file, &args.client_ca_file);
    set(
        &mut c.server.requestheader_client_ca_file,
        &args.requestheader_client_ca_file,
    );
    let list = |dst: &mut Vec<String>, v: &Option<Vec<String>>| {
        if let Some(v) = v {
            // `--flag=` (nothing, as kube-apiserver takes it) is the empty list.
            *dst = v.iter().filter(|s| !s.is_empty()).cloned().collect();
        }
    };
    let s = &mut c.server;
    list(
        &mut s.requestheader_allowed_names,
        &args.requestheader_allowed_names,
    );
    list(
        &mut s.requestheader_username_headers,
        &args.requestheader_username_headers,
    );
    list(
        &mut s.requestheader_group_headers,
        &args.requestheader_group_headers,
    );
    list(
        &mut s.requestheader_extra_headers_prefix,
        &args.requestheader_extra_headers_prefix,
    );
    set(&mut c.server.tls_min_version, &args.tls_min_version);
    list(&mut c.server.tls_cipher_suites, &args.tls_cipher_suites);
    put(&mut c.log.format, args.log_format);
    put(&mut c.log.level, args.log_level);
    put(&mut c.log.queue_lines, args.log_queue_lines);
    if let Some(m) = args.mode {
        c.upstream.mode = m;
    }
    if let Some(f) = &args.forwarded_for {
        c.server.forwarded_for = f.parse().map_err(ConfigError)?;
    }
    if let Some(v) = args.upstream_insecure_skip_verify {
        c.upstream.insecure_skip_verify = v;
    }
    if let Some(v) = args.shutdown_delay_seconds {
        c.server.shutdown_delay_seconds = v;
    }
    if let Some(v) = args.grace_period_seconds {
        c.server.grace_period_seconds = v;
    }
    {
        let s = &mut c.server;
        put(&mut s.threads, args.threads);
        put(&mut s.idle_timeout_seconds, args.idle_timeout_seconds);
        put(
            &mut s.request_read_timeout_seconds,
            args.request_read_timeout_seconds,
        );
        put(
            &mut s.request_head_timeout_seconds,
            args.request_head_timeout_seconds,
        );
        put(&mut s.max_connections, args.max_connections);
        put(&mut s.http2_max_streams, args.http2_max_streams);
        put(&mut s.write_buffer_bytes, args.write_buffer_bytes);
        put(&mut s.max_header_bytes, args.max_header_bytes);
        put(&mut s.max_requests_inflight, args.max_requests_inflight);
        put(
            &mut s.max_long_running_requests,
            args.max_long_running_requests,
        );
        put(&mut s.compress_responses, args.compress_responses);
        put(&mut s.max_buffered_body_bytes, args.max_buffered_body_bytes);
    }
    {
        let u = &mut c.upstream;
        put(&mut u.connect_timeout_ms, args.upstream_connect_timeout_ms);
        put(
            &mut u.response_header_timeout_seconds,
            args.upstream_response_header_timeout_seconds,
        );
        put(
            &mut u.max_request_body_bytes,
            args.upstream_max_request_body_bytes,
        );
        put(
            &mut u.capability_ttl_seconds,
            args.upstream_capability_ttl_seconds,
        );
        put(&mut u.http2_max_streams, args.upstream_http2_max_streams);
        if let Some(h) = &args.upstream_http2 {
            u.http2 = h
                .parse()
                .map_err(|e| ConfigError(format!("upstream.http2 (--upstream-http2): {e}")))?;
        }
    }
    {
        let k = &mut c.codec;
        put(&mut k.window_bytes, args.codec_window_bytes);
        put(&mut k.max_depth, args.codec_max_depth);
        put(&mut k.max_string_bytes, args.codec_max_string_bytes);
        put(
            &mut k.max_request_body_bytes,
            args.codec_max_request_body_bytes,
        );
    }
    put(&mut c.codec.strings, args.codec_strings);
    put(&mut c.metrics.max_resources, args.metrics_max_resources);
    {
        let p = &mut c.cbor_protection;
        put(&mut p.enabled, args.cbor_protection_enabled);
        list(&mut p.user_agents, &args.cbor_protection_user_agents);
        put(&mut p.all_clients, args.cbor_protection_all_clients);
        put(&mut p.max_elements, args.cbor_protection_max_elements);
        put(&mut p.hold_bytes, args.cbor_protection_hold_bytes);
    }
    let c = c.check(args.config.as_deref())?;
    if c.upstream.url.is_empty() {
        return Err(ConfigError(
            "upstream.url is not set: give --upstream URL, or upstream.url in the --config file"
                .into(),
        ));
    }
    Ok(c)
}

/// A `serve` flag's refused value as a configuration error in an operator's words,
/// `KEY (--FLAG): what it takes`, in place of the flag parser's own: a value none of the
/// accepted ones lists them, a negative or non-numeric number names the range. `None`:
/// any other command-line error (the parser's message stands).
pub fn flag_error(e: &clap::Error, cli: &clap::Command) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let text = |kind| match e.get(kind)? {
        ContextValue::String(s) => Some(s.clone()),
        ContextValue::StyledStr(s) => Some(s.to_string()),
        _ => None,
    };
    let flag = text(ContextKind::InvalidArg)?;
    let flag = flag.split([' ', '=', '[']).next()?;
    let value = text(ContextKind::InvalidValue)?;
    let arg = cli
        .find_subcommand("serve")?
        .get_arguments()
        .find(|a| a.get_long().is_some_and(|l| flag == format!("--{l}")))?;
    let help = arg.get_help()?.to_string();
    let key = help.split('(').skip(1).find_map(|s| {
        let key: String = s
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._".contains(*c))
            .collect();
        (key.contains('.') && crate::config::flag_for(&key) == flag).then_some(key)
    })?;
    let words = match e.kind() {
        ErrorKind::InvalidValue => match e.get(ContextKind::ValidValue)? {
            ContextValue::Strings(valid) => {
                let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
                crate::config::not_one_of(&value, &valid)
            }
            _ => return None,
        },
        ErrorKind::ValueValidation
            if arg.get_value_names().is_some_and(|n| {
                n.iter()
                    .any(|n| ["N", "SECONDS", "BYTES", "MS"].contains(&n.as_str()))
            }) =>
        {
            let range = match Config::most_for(&key) {
                Some(most) => format!("a whole number from 0 to {most}"),
                None => "a whole number, 0 or more".to_string(),
            };
            if value.trim().starts_with('-') {
                format!("{value} is negative: it takes {range}")
            } else {
                format!("{value:?} is not {range}")
            }
        }
        _ => return None,
    };
    Some(format!("{key} ({flag}): {words}"))
}

/// A flag's value over the file's (or the default).
fn put<T>(dst: &mut T, v: Option<T>) {
    if let Some(v) = v {
        *dst = v;
    }
}

pub fn run(cmd: ProxyCommand) -> ExitCode {
    match cmd {
        ProxyCommand::Serve(args) => {
            let config = match load(&args) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("cborgate: configuration error: {e}");
                    return ExitCode::from(2);
                }
            };
            let log = crate::ops::logs::init(&config.log);
            let requests = crate::ops::request_lines::RequestLines::of(&log);
            match crate::process::server::build(config, requests) {
                Ok(built) => crate::process::server::run(built, log.flush),
                Err(e) => {
                    eprintln!("cborgate: configuration error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        #[cfg(feature = "demo")]
        ProxyCommand::Demo(args) => crate::commands::demo::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_both_ways() {
        let dir = std::env::temp_dir().join(format!("cborgate-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(
            &file,
            "[upstream]\nurl = \"https://x:1\"\ninsecure_skip_verify = true\n",
        )
        .unwrap();
        let args = |skip: Option<bool>| ServeArgs {
            config: Some(file.clone()),
            upstream_insecure_skip_verify: skip,
            shutdown_delay_seconds: Some(5),
            grace_period_seconds: Some(60),
            forwarded_for: Some("replace".into()),
            ..ServeArgs::default()
        };
        let c = load(&args(None)).unwrap();
        assert!(c.upstream.insecure_skip_verify, "the file's value stays");
        assert_eq!(
            (
                c.server.shutdown_delay_seconds,
                c.server.grace_period_seconds
            ),
            (5, 60)
        );
        assert_eq!(c.server.forwarded_for, crate::config::ForwardedFor::Replace);
        assert!(
            !load(&args(Some(false)))
                .unwrap()
                .upstream
                .insecure_skip_verify
        );
        let e = load(&ServeArgs {
            grace_period_seconds: Some(3601),
            ..args(None)
        })
        .unwrap_err();
        assert!(
            e.0.ends_with(
                "c.toml: server.grace_period_seconds (--grace-period-seconds): 3601 is more than \
                 the most it may be, 3600 (3600 s)"
            ),
            "{e}"
        );
    }

    /// Two valid values for each key that is not a number or a boolean: the file's, then
    /// the flag's. Numbers and booleans get theirs from the default.
    const TEXT_VALUES: [(&str, &str, &str); 23] = [
        ("server.listen", "\"127.0.0.1:18080\"", "127.0.0.1:18081"),
        ("server.admin", "\"127.0.0.1:19464\"", "127.0.0.1:19465"),
        ("server.tls_cert", "\"a.crt\"", "b.crt"),
        ("server.tls_key", "\"a.key\"", "b.key"),
        ("server.client_ca_file", "\"a-ca.crt\"", "b-ca.crt"),
        (
            "server.requestheader_client_ca_file",
            "\"a-fp.crt\"",
            "b-fp.crt",
        ),
        ("server.requestheader_allowed_names", "[\"a\"]", "b,c"),
        (
            "server.requestheader_username_headers",
            "[\"X-A\"]",
            "X-B,X-C",
        ),
        ("server.requestheader_group_headers", "[\"X-A-G\"]", "X-B-G"),
        (
            "server.requestheader_extra_headers_prefix",
            "[\"X-A-\"]",
            "X-B-",
        ),
        ("server.forwarded_for", "\"replace\"", "append"),
        ("server.tls_min_version", "\"VersionTLS13\"", "VersionTLS12"),
        (
            "server.tls_cipher_suites",
            "[\"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\"]",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        ),
        ("upstream.url", "\"https://a:1\"", "https://b:2"),
        ("upstream.mode", "\"legacy\"", "native"),
        ("upstream.ca_file", "\"a-up.crt\"", "b-up.crt"),
        ("upstream.client_cert", "\"a-cl.crt\"", "b-cl.crt"),
        ("upstream.client_key", "\"a-cl.key\"", "b-cl.key"),
        ("upstream.http2", "\"off\"", "auto"),
        ("codec.strings", "\"text\"", "bytes"),
        ("cbor_protection.user_agents", "[\"a/*\"]", "b/*,c/v0.0.0-*"),
        ("log.level", "\"debug\"", "warn"),
        ("log.format", "\"json\"", "text"),
    ];

    /// Every key of config.toml, as `section.key`, with its default value.
    fn documented_keys() -> Vec<(String, toml::Value)> {
        let text = std::fs::read_to_string(crate::config::default_file()).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        let mut keys = Vec::new();
        for (section, inner) in doc {
            for (k, v) in inner.as_table().unwrap() {
                keys.push((format!("{section}.{k}"), v.clone()));
            }
        }
        keys
    }

    /// The file's value and the flag's for one key (see [`TEXT_VALUES`]).
    fn two_values(key: &str, default: &toml::Value) -> (toml::Value, String) {
        match default {
            toml::Value::Integer(d) => {
                let (a, b) = if *d >= 10 {
                    (d - 1, d - 2)
                } else {
                    (d + 1, d + 2)
                };
                (toml::Value::Integer(a), b.to_string())
            }
            toml::Value::Boolean(d) => (toml::Value::Boolean(!d), d.to_string()),
            _ => {
                let (_, a, b) = TEXT_VALUES
                    .iter()
                    .find(|(k, _, _)| *k == key)
                    .unwrap_or_else(|| panic!("{key}: give it two values in TEXT_VALUES"));
                let a: toml::Table = format!("v = {a}").parse().unwrap();
                (a["v"].clone(), b.to_string())
            }
        }
    }

    fn serve_args(argv: &[String]) -> Result<ServeArgs, clap::Error> {
        use clap::FromArgMatches;
        let m = ServeArgs::augment_args(clap::Command::new("serve")).try_get_matches_from(
            std::iter::once("serve".to_string()).chain(argv.iter().cloned()),
        )?;
        ServeArgs::from_arg_matches(&m)
    }

    #[test]
    fn every_key_has_a_flag_and_every_flag_a_key() {
        let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
        let mut flags: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_long())
            .filter(|l| *l != "config")
            .map(|l| format!("--{l}"))
            .collect();
        flags.sort();
        let mut from_keys: Vec<String> = documented_keys()
            .iter()
            .map(|(k, _)| crate::config::flag_for(k))
            .collect();
        from_keys.sort();
        let missing: Vec<_> = from_keys.iter().filter(|f| !flags.contains(f)).collect();
        assert!(
            missing.is_empty(),
            "config.toml keys with no flag: {missing:?}"
        );
        assert_eq!(flags, from_keys, "a flag that sets no config.toml key");
        // Each flag's help names the key it sets.
        for a in cmd.get_arguments().filter(|a| a.get_id() != "config") {
            let key = documented_keys()
                .into_iter()
                .map(|(k, _)| k)
                .find(|k| crate::config::flag_for(k) == format!("--{}", a.get_long().unwrap()))
                .unwrap();
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                help.contains(&format!("({key}")),
                "--{}: help does not name {key}",
                a.get_id()
            );
        }
    }

    #[test]
    fn every_flag_overrides_the_file() {
        let dir = std::env::temp_dir().join(format!("cborgate-flags-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("all.toml");
        let mut doc = toml::Table::new();
        let mut argv = vec!["--config".to_string(), file.display().to_string()];
        let keys = documented_keys();
        for (key, default) in &keys {
            let (section, k) = key.split_once('.').unwrap();
            let (in_file, in_flag) = two_values(key, default);
            doc.entry(section)
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()
                .unwrap()
                .insert(k.to_string(), in_file);
            argv.push(format!("{}={in_flag}", crate::config::flag_for(key)));
        }
        std::fs::write(&file, toml::to_string(&doc).unwrap()).unwrap();
        // The file alone is valid, and sets every key away from its default.
        let from_file = crate::config::Config::from_file(&file).unwrap();
        let from_file = toml::Table::try_from(&from_file).unwrap();
        let c = load(&serve_args(&argv).unwrap()).unwrap();
        let merged = toml::Table::try_from(&*c).unwrap();
        for (key, default) in &keys {
            let (section, k) = key.split_once('.').unwrap();
            let (in_file, in_flag) = two_values(key, default);
            assert_eq!(from_file[section][k], in_file, "{key} from the file");
            assert_ne!(&in_file, default, "{key}: the file's value is the default");
            let got = &merged[section][k];
            let want = match got {
                toml::Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().unwrap())
                    .collect::<Vec<_>>()
                    .join(","),
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            assert_eq!(
                want,
                in_flag,
                "{key}: {} did not win over the file",
                crate::config::flag_for(key)
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_flag_value_is_refused_naming_key_and_flag() {
        let up = "--upstream=http://127.0.0.1:1".to_string();
        for (flag, want) in [
            (
                "--threads=0",
                "server.threads (--threads): must be at least 1",
            ),
            (
                "--http2-max-streams=0",
                "server.http2_max_streams (--http2-max-streams): 0 is not between",
            ),
            (
                "--upstream-http2-max-streams=10001",
                "upstream.http2_max_streams (--upstream-http2-max-streams): 10001",
            ),
            (
                "--upstream-max-request-body-bytes=0",
                "upstream.max_request_body_bytes (--upstream-max-request-body-bytes): must be",
            ),
            (
                "--codec-window-bytes=0",
                "codec.window_bytes (--codec-window-bytes): must be",
            ),
            (
                "--idle-timeout-seconds=86401",
                "server.idle_timeout_seconds (--idle-timeout-seconds): 86401 is more",
            ),
        ] {
            let e = load(&serve_args(&[up.clone(), flag.to_string()]).unwrap()).unwrap_err();
            assert!(e.0.starts_with(want), "{flag}: {e}");
        }
        // Enumerations are refused by the flag parser, which lists the values.
        for flag in [
            "--upstream-http2=on",
            "--codec-strings=utf8",
            "--compress-responses=yes",
        ] {
            assert!(
                serve_args(&[up.clone(), flag.to_string()]).is_err(),
                "{flag}"
            );
        }
    }

    /// Every `serve` flag with a list of values, given one it does not list, and every
    /// numeric flag given a negative number, is refused naming its key and flag and
    /// what it takes, never with the flag parser's words or a Rust type's name.
    #[test]
    fn refused_flag_values_name_key_flag_and_what_they_take() {
        use clap::Subcommand;
        let cli = ProxyCommand::augment_subcommands(clap::Command::new("cborgate"));
        let refused = |argv: &[&str]| {
            let e = cli
                .clone()
                .try_get_matches_from(["cborgate", "serve"].iter().chain(argv))
                .unwrap_err();
            flag_error(&e, &cli)
        };
        for (argv, want) in [
            (
                &["--shutdown-delay-seconds", "-1"][..],
                "server.shutdown_delay_seconds (--shutdown-delay-seconds): -1 is negative: it \
                 takes a whole number from 0 to 3600",
            ),
            (
                &["--threads=-2"],
                "server.threads (--threads): -2 is negative: it takes a whole number, 0 or more",
            ),
            (
                &["--threads", "two"],
                "server.threads (--threads): \"two\" is not a whole number, 0 or more",
            ),
            (
                &["--mode", "nativ"],
                "upstream.mode (--mode): \"nativ\" is not one of: auto, legacy, native, upgrade",
            ),
            (
                &["--compress-responses=yes"],
                "server.compress_responses (--compress-responses): \"yes\" is not one of: true, \
                 false",
            ),
        ] {
            assert_eq!(refused(argv).as_deref(), Some(want), "{argv:?}");
        }
        let serve = cli.find_subcommand("serve").unwrap();
        let mut audited = 0;
        for a in serve.get_arguments() {
            let flag = format!("--{}", a.get_long().unwrap());
            let numeric = a.get_value_names().is_some_and(|n| {
                n.iter()
                    .any(|n| ["N", "SECONDS", "BYTES", "MS"].contains(&n.as_str()))
            });
            let bad = if !a.get_possible_values().is_empty() {
                "bogus"
            } else if numeric {
                "-1"
            } else {
                continue;
            };
            let got = refused(&[&format!("{flag}={bad}")])
                .unwrap_or_else(|| panic!("{flag}={bad}: the flag parser's own message"));
            assert!(got.contains(&format!(" ({flag}): ")), "{got}");
            assert!(
                got.contains("is not one of: ") || got.contains("is negative: it takes"),
                "{got}"
            );
            audited += 1;
        }
        assert!(audited >= 36, "{audited} flags with values to refuse");
    }
}
