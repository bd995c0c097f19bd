//! Admission and drain: how many requests are in flight (short and
//! long-running counted apart, as kube-apiserver's max-in-flight filter does),
//! whether the process is draining after SIGTERM, and the [`Slot`] each
//! admitted request holds.
//!
//! A slot is given back when it is dropped, so it is released on every path a
//! request can end by: a normal end, an error, a client that hangs up, and a
//! panic in a callback (the request task unwinds and drops its context).
//! One [`Admission`] is made at start-up and passed to the proxy, the admin
//! listener and the SIGTERM drain; there is no process-wide state.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The counters and the draining flag shared by the proxy, `/readyz` and the drain.
#[derive(Debug, Default)]
pub struct Admission {
    short: AtomicUsize,
    long_running: AtomicUsize,
    draining: AtomicBool,
}

/// One admitted request's place in its counter; dropping it gives the place back.
#[derive(Debug)]
pub struct Slot {
    admission: Arc<Admission>,
    long_running: bool,
}

impl Admission {
    pub fn new() -> Arc<Self> {
        Arc::new(Admission::default())
    }

    /// Take a place for a request. `limit` 0 means no limit. `Err` means the
    /// limit is reached (the caller answers 429); nothing is held then.
    pub fn admit(self: &Arc<Self>, long_running: bool, limit: usize) -> Result<Slot, Full> {
        let counter = self.counter(long_running);
        let before = counter.fetch_add(1, Ordering::AcqRel);
        if limit > 0 && before >= limit {
            counter.fetch_sub(1, Ordering::AcqRel);
            return Err(Full);
        }
        Ok(Slot {
            admission: self.clone(),
            long_running,
        })
    }

    /// Short (not long-running) requests in flight; the drain waits for them.
    pub fn short_in_flight(&self) -> usize {
        self.short.load(Ordering::Acquire)
    }

    /// Long-running requests (watches, exec, attach, port-forward, followed logs) open.
    pub fn long_running_open(&self) -> usize {
        self.long_running.load(Ordering::Acquire)
    }

    /// SIGTERM was received: `/readyz` fails and responses close their connections.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    fn counter(&self, long_running: bool) -> &AtomicUsize {
        if long_running {
            &self.long_running
        } else {
            &self.short
        }
    }
}

/// The limit was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

impl Drop for Slot {
    fn drop(&mut self) {
        self.admission
            .counter(self.long_running)
            .fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_apart_and_come_back_when_dropped() {
        let a = Admission::new();
        let s1 = a.admit(false, 2).unwrap();
        let s2 = a.admit(false, 2).unwrap();
        assert_eq!(a.admit(false, 2).unwrap_err(), Full);
        assert_eq!(a.short_in_flight(), 2, "a refused request holds nothing");
        let w = a.admit(true, 1).unwrap();
        assert_eq!(a.long_running_open(), 1);
        drop(s1);
        let s3 = a.admit(false, 2).unwrap();
        drop((s2, s3, w));
        assert_eq!((a.short_in_flight(), a.long_running_open()), (0, 0));
        // 0 is no limit.
        let many: Vec<Slot> = (0..1000).map(|_| a.admit(false, 0).unwrap()).collect();
        assert_eq!(a.short_in_flight(), 1000);
        drop(many);
        assert_eq!(a.short_in_flight(), 0);
    }

    #[test]
    fn a_panic_while_holding_a_slot_gives_it_back() {
        let a = Admission::new();
        let a2 = a.clone();
        let r = std::panic::catch_unwind(move || {
            let _slot = a2.admit(false, 1).unwrap();
            panic!("a bug in a callback");
        });
        assert!(r.is_err());
        assert_eq!(a.short_in_flight(), 0);
        assert!(a.admit(false, 1).is_ok());
    }
}
