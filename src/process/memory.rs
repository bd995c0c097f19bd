//! Memory that comes back after a burst of connections. Each connection's buffers
//! (pingora's request and response buffers, the codec's) are freed when it ends, but
//! glibc's malloc keeps freed memory inside its arenas, where it fragments and is not
//! handed back: without this, three rounds of 2,000 idle watches left the proxy at
//! 157, 308 and 353 MB. A background task looks at the number of open client
//! connections every 5 s (a tick a second was a tenth of an idle cborgate's CPU); when a burst has ended (half of the peak since the last
//! look is gone), it asks the allocator to give free pages back (jemalloc's purge, or
//! glibc's `malloc_trim` in a build without jemalloc: `process::sys::malloc_trim`), off
//! the worker threads.

use crate::inbound::connections::Connections;
use crate::metrics::metrics;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::sync::Arc;
use std::time::Duration;

/// How often the number of open connections is looked at.
const INTERVAL: Duration = Duration::from_secs(5);

/// A smaller peak is not a burst worth a trim.
const MIN_BURST: usize = 64;

/// Whether a burst has ended: the peak since the last trim was a burst, and at least
/// half of it is gone.
pub fn burst_ended(peak: usize, open: usize) -> bool {
    peak >= MIN_BURST && open <= peak / 2
}

/// The background task (a pingora background service).
pub struct Trimmer(pub Arc<Connections>);

#[async_trait]
impl BackgroundService for Trimmer {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(INTERVAL);
        let mut peak = 0;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            let open = self.0.open();
            peak = peak.max(self.0.take_peak()).max(open);
            if burst_ended(peak, open) {
                peak = open;
                if tokio::task::spawn_blocking(crate::process::sys::malloc_trim)
                    .await
                    .is_ok()
                {
                    metrics().memory_trims_total.inc();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_ends_when_half_of_its_peak_is_gone() {
        assert!(!burst_ended(10, 0), "too small to be a burst");
        assert!(!burst_ended(2000, 1500));
        assert!(burst_ended(2000, 1000));
        assert!(burst_ended(64, 0));
        assert!(!burst_ended(0, 0));
    }
}
