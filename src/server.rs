//! Assembles and runs the pingora server: the proxy service (plain or TLS
//! with h2 + http/1.1 ALPN) and the admin service, with graceful shutdown on
//! SIGTERM (stop accepting, let requests finish within the grace period).

use crate::admin::Admin;
use crate::config::{Config, ConfigError};
use crate::proxy::Gate;
use async_trait::async_trait;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::{RunArgs, Server, ShutdownSignal, ShutdownSignalWatch};
use pingora::services::listening::Service;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Short (not long-running) requests in flight; shutdown waits for them.
pub static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Long-running requests (watches, exec, attach, port-forward, followed logs) open now.
pub static LONG_RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Set on SIGTERM: `/readyz` answers 503 and every response closes its connection.
pub static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// How SIGTERM drains (`server.shutdown_delay_seconds`, `server.grace_period_seconds`).
#[derive(Debug, Clone, Copy)]
pub struct DrainTimes {
    /// Still accept and serve, with `/readyz` failing, for this long.
    pub delay: Duration,
    /// Then stop accepting and give short requests this long to finish.
    pub grace: Duration,
}

impl DrainTimes {
    pub fn of(config: &Config) -> Self {
        DrainTimes {
            delay: Duration::from_secs(config.server.shutdown_delay_seconds),
            grace: Duration::from_secs(config.server.grace_period_seconds),
        }
    }
}

/// SIGTERM: fail `/readyz` and close each connection after its next response; after
/// the shutdown delay, stop accepting (pingora), let short requests finish, then exit 0
/// as soon as none is left or the grace period is over. Watches and other
/// long-running streams are ended then; clients re-watch. SIGINT: fast exit.
struct Drain {
    times: DrainTimes,
}

#[async_trait]
impl ShutdownSignalWatch for Drain {
    async fn recv(&self) -> ShutdownSignal {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int), Ok(mut quit)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::quit()),
        ) else {
            tracing::error!("cannot install signal handlers; waiting forever");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = quit.recv() => {}
            _ = int.recv() => return ShutdownSignal::FastShutdown,
        }
        SHUTTING_DOWN.store(true, Ordering::Release);
        let DrainTimes { delay, grace } = self.times;
        if !delay.is_zero() {
            tracing::info!(
                delay_seconds = delay.as_secs(),
                "SIGTERM: /readyz fails; still serving until the shutdown delay ends"
            );
            tokio::time::sleep(delay).await;
        }
        tracing::info!(grace_seconds = grace.as_secs(), "SIGTERM: draining");
        std::thread::spawn(move || {
            let started = Instant::now();
            while IN_FLIGHT.load(Ordering::Acquire) > 0 && started.elapsed() < grace {
                std::thread::sleep(Duration::from_millis(25));
            }
            tracing::info!(
                in_flight = IN_FLIGHT.load(Ordering::Acquire),
                "drained; exiting"
            );
            std::process::exit(0);
        });
        ShutdownSignal::GracefulTerminate
    }
}

/// Run until SIGTERM (drain, exit 0) or SIGINT (exit at once).
pub fn run(server: Server, times: DrainTimes) -> ! {
    server.run(RunArgs {
        shutdown_signal: Box::new(Drain { times }),
    });
    std::process::exit(0)
}

/// Build the server. Errors are configuration problems (exit status 2).
pub fn build(config: Config) -> Result<Server, ConfigError> {
    config.validate()?;
    // The vendored pingora-core's start-of-connection read timeout (see its README.cborgate.md).
    pingora::protocols::http::v1::server::DEFAULT_READ_TIMEOUT_SECS.store(
        config.server.request_read_timeout_seconds,
        Ordering::Relaxed,
    );
    let config = Arc::new(config);
    let conf = ServerConf {
        threads: config.server.threads,
        // The drain watchdog exits earlier when nothing is in flight.
        grace_period_seconds: Some(config.server.grace_period_seconds),
        graceful_shutdown_timeout_seconds: Some(1),
        ca_file: (!config.upstream.ca_file.is_empty()).then(|| config.upstream.ca_file.clone()),
        ..ServerConf::default()
    };
    let opt = Opt::default();
    let mut server = Server::new_with_opt_and_conf(Some(opt), conf);
    server.bootstrap();

    let gate = Gate::new(config.clone())?;
    let admin = Admin {
        upstream: crate::config::UpstreamUrl::parse(&config.upstream.url)?,
        readiness: gate.readiness(),
        capabilities: gate.capabilities(),
    };
    let mut proxy = pingora::proxy::http_proxy_service(&server.configuration, gate);
    if config.server.tls_cert.is_empty() {
        proxy.add_tcp(&config.server.listen);
    } else {
        let mut tls = pingora::listeners::tls::TlsSettings::intermediate(
            &config.server.tls_cert,
            &config.server.tls_key,
        )
        .map_err(|e| ConfigError(format!("server.tls_cert/tls_key: {e}")))?;
        tls.enable_h2();
        proxy.add_tls_with_settings(&config.server.listen, None, tls);
    }
    let mut admin_service = Service::new("cborgate admin".to_string(), admin);
    admin_service.add_tcp(&config.server.admin);
    server.add_service(proxy);
    server.add_service(admin_service);
    Ok(server)
}
