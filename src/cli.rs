//! The long-running commands `serve` and `demo` (the latter only with the `demo`
//! feature, on by default): their flags, configuration loading (flags > file >
//! defaults), logging set-up, and start-up.

use crate::config::{Config, ConfigError, Mode};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

// Parsed once at start-up: the size of the flags struct costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum ProxyCommand {
    /// Run the proxy.
    Serve(ServeArgs),
    /// Start the built-in JSON-only apiserver stand-in with the proxy in front of it.
    #[cfg(feature = "demo")]
    Demo(crate::demo::DemoArgs),
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
    pub mode: Option<Mode>,
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
    /// Log format (log.format) [default: text].
    #[arg(long, value_parser = ["text", "json"])]
    pub log_format: Option<String>,
    /// Log level (log.level; RUST_LOG wins when set) [default: info].
    #[arg(long, value_parser = crate::config::LOG_LEVELS)]
    pub log_level: Option<String>,
}

impl clap::ValueEnum for Mode {
    fn value_variants<'a>() -> &'a [Self] {
        &[Mode::Auto, Mode::Legacy, Mode::Native, Mode::Upgrade]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(match self {
            Mode::Auto => "auto",
            Mode::Legacy => "legacy",
            Mode::Native => "native",
            Mode::Upgrade => "upgrade",
        }))
    }
}

/// Apply flags over the file over the defaults.
pub fn load(args: &ServeArgs) -> Result<Config, ConfigError> {
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
    set(&mut c.log.format, &args.log_format);
    set(&mut c.log.level, &args.log_level);
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
    c.validate()?;
    c.validate_client_certificates()?;
    if c.upstream.url.is_empty() {
        return Err(ConfigError(
            "upstream.url is not set: give --upstream URL, or upstream.url in the --config file"
                .into(),
        ));
    }
    Ok(c)
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
            crate::logs::init(&config.log);
            match crate::server::build(config) {
                Ok(built) => crate::server::run(built),
                Err(e) => {
                    eprintln!("cborgate: configuration error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        #[cfg(feature = "demo")]
        ProxyCommand::Demo(args) => crate::demo::run(args),
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
        assert!(e.0.starts_with("server.grace_period_seconds: 3601 "), "{e}");
    }
}
