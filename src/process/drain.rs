//! SIGTERM, from failing `/readyz` to the exit: the shutdown delay (still serving),
//! then listeners closed (pingora), long-running requests ended each cleanly, and the
//! exit as soon as nothing is in flight or the grace period is over.

use crate::config::Config;
use crate::inbound::connections::Connections;
use crate::limits::admission::Admission;
use crate::ops::logs::Flush;
use async_trait::async_trait;
use pingora::server::{ShutdownSignal, ShutdownSignalWatch};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
/// the shutdown delay, stop accepting (pingora), end long-running requests, let short
/// requests finish, then exit 0 as soon as none is left or the grace period is over.
/// Watches end cleanly, each with its request line logged, as kube-apiserver ends
/// them when it shuts down: the terminating chunk on HTTP/1.1, `END_STREAM` on HTTP/2
/// (`Admission::end_long_running`, `Gate::fail_to_proxy`); clients re-watch at once.
/// A second SIGTERM, SIGQUIT or SIGINT during the shutdown delay skips the rest of it: the
/// drain begins at once. SIGINT first: fast exit.
pub struct Drain {
    times: DrainTimes,
    admission: Arc<Admission>,
    connections: Arc<Connections>,
    /// Written out before the exit.
    logs: Flush,
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
        self.admission.start_draining();
        let DrainTimes { delay, grace } = self.times;
        if !delay.is_zero() {
            tracing::info!(
                delay_seconds = delay.as_secs(),
                "SIGTERM: /readyz fails; still serving until the shutdown delay ends"
            );
            // A second signal (SIGTERM, SIGQUIT or SIGINT) ends the delay early, as a
            // second signal ends kube-apiserver's: the drain begins at once, so watches
            // still end cleanly and short requests keep their grace period.
            let second = tokio::select! {
                _ = tokio::time::sleep(delay) => None,
                _ = term.recv() => Some("SIGTERM"),
                _ = quit.recv() => Some("SIGQUIT"),
                _ = int.recv() => Some("SIGINT"),
            };
            if let Some(signal) = second {
                tracing::info!(
                    signal,
                    "a second signal: the rest of the shutdown delay is skipped; draining now"
                );
            }
        }
        tracing::info!(
            grace_seconds = grace.as_secs(),
            long_running = self.admission.long_running_open(),
            "SIGTERM: draining; ending watches and other long-running requests"
        );
        self.admission.end_long_running();
        let (admission, connections, logs) = (
            self.admission.clone(),
            self.connections.clone(),
            self.logs.clone(),
        );
        // pingora's own graceful stop waits its whole grace period; this ends the
        // process as soon as nothing is left, on a thread of its own because pingora
        // stops its runtimes (and the tasks on them) once `recv` returns.
        std::thread::spawn(move || exit_when_drained(&admission, &connections, grace, &logs));
        ShutdownSignal::GracefulTerminate
    }
}

impl Drain {
    pub fn new(
        times: DrainTimes,
        admission: Arc<Admission>,
        connections: Arc<Connections>,
        logs: Flush,
    ) -> Self {
        Drain {
            times,
            admission,
            connections,
            logs,
        }
    }
}

/// What still keeps the process: requests in flight, short and long-running; a request
/// whose head has begun to arrive (waited for like one in flight); an HTTP/2 connection
/// until it has closed, so that its last frames (a watch's `END_STREAM`) are sent.
fn busy(admission: &Admission, connections: &Connections) -> bool {
    admission.short_in_flight()
        + admission.long_running_open()
        + connections.heads_arriving()
        + connections.h2_connections()
        > 0
}

/// Exit 0 once nothing is [`busy`], or when `grace` is over, with one line saying what
/// was still in flight, after every queued log line is written.
fn exit_when_drained(
    admission: &Admission,
    connections: &Connections,
    grace: Duration,
    logs: &Flush,
) -> ! {
    let started = Instant::now();
    while busy(admission, connections) && started.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(25));
    }
    tracing::info!(
        in_flight = admission.short_in_flight(),
        long_running = admission.long_running_open(),
        "drained; exiting"
    );
    logs.flush();
    std::process::exit(0)
}
