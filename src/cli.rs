//! The long-running commands `serve` and `demo`: their flags, configuration
//! loading (flags > file > defaults), logging set-up, and start-up.

use crate::config::{Config, ConfigError, Mode};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum ProxyCommand {
    /// Run the proxy.
    Serve(ServeArgs),
    /// Start the built-in JSON-only apiserver stand-in with the proxy in front of it.
    Demo(DemoArgs),
}

#[derive(Args, Default)]
pub struct ServeArgs {
    /// Configuration file (TOML; see config.toml for every key).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Proxy listen address (server.listen).
    #[arg(long)]
    pub listen: Option<String>,
    /// Upstream apiserver URL, http:// or https:// (upstream.url).
    #[arg(long)]
    pub upstream: Option<String>,
    /// Admin listen address for /metrics, /healthz, /readyz (server.admin).
    #[arg(long)]
    pub admin: Option<String>,
    /// auto | legacy | native | upgrade (upstream.mode).
    #[arg(long)]
    pub mode: Option<Mode>,
    /// TLS certificate for the proxy listener (server.tls_cert).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<String>,
    /// TLS key for the proxy listener (server.tls_key).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<String>,
    /// CA bundle that signs the upstream's certificate (upstream.ca_file).
    #[arg(long)]
    pub upstream_ca: Option<String>,
    /// Client certificate for the upstream (upstream.client_cert).
    #[arg(long, requires = "upstream_client_key")]
    pub upstream_client_cert: Option<String>,
    /// Client key for the upstream (upstream.client_key).
    #[arg(long, requires = "upstream_client_cert")]
    pub upstream_client_key: Option<String>,
    /// Do not verify the upstream certificate; for tests (upstream.insecure_skip_verify).
    #[arg(long)]
    pub upstream_insecure_skip_verify: bool,
    /// text or json (log.format).
    #[arg(long)]
    pub log_format: Option<String>,
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

#[derive(Args, Default)]
pub struct DemoArgs {
    /// Proxy listen address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Stand-in apiserver listen address.
    #[arg(long, default_value = "127.0.0.1:8001")]
    pub standin: String,
    /// Admin listen address.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub admin: String,
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
    set(&mut c.log.format, &args.log_format);
    if let Some(m) = args.mode {
        c.upstream.mode = m;
    }
    if args.upstream_insecure_skip_verify {
        c.upstream.insecure_skip_verify = true;
    }
    c.validate()?;
    Ok(c)
}

/// Logs to stderr as configured; see [`crate::logs`].
pub fn init_logging(config: &Config) {
    crate::logs::init(&config.log);
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
            init_logging(&config);
            let drain = crate::server::DrainTimes::of(&config);
            match crate::server::build(config) {
                Ok(server) => crate::server::run(server, drain),
                Err(e) => {
                    eprintln!("cborgate: configuration error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        ProxyCommand::Demo(args) => crate::demo::run(args),
    }
}
