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

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The counters and the draining flag shared by the proxy, `/readyz` and the drain.
#[derive(Debug, Default)]
pub struct Admission {
    short: AtomicUsize,
    long_running: AtomicUsize,
    draining: AtomicBool,
    upstreams: Mutex<Upstreams>,
}

/// The upstream sockets of long-running requests, so the drain can end them: an idle
/// watch waits on its upstream read, and nothing else would wake it.
#[derive(Debug, Default)]
struct Upstreams {
    next: u64,
    open: HashMap<u64, TcpStream>,
    /// `Admission::end_long_running` was called: a socket held from now on ends at once.
    ending: bool,
}

/// A long-running request's upstream socket (a second handle on it) held for the
/// drain; dropping it (the request is over) lets it go.
#[derive(Debug)]
pub struct UpstreamHeld {
    admission: Arc<Admission>,
    id: u64,
}

impl Drop for UpstreamHeld {
    fn drop(&mut self) {
        self.admission.upstreams().open.remove(&self.id);
    }
}

/// End reads on an upstream socket (and tell the upstream): pingora's read of the
/// response then fails, and the proxy ends the client's response cleanly.
fn end(socket: &TcpStream) {
    // An error: the connection is already closed, which ends it too.
    let _ = socket.shutdown(Shutdown::Both);
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

    /// Hold a long-running request's upstream socket until the request is over, so
    /// that [`Admission::end_long_running`] can end it.
    pub fn hold_upstream(self: &Arc<Self>, socket: TcpStream) -> UpstreamHeld {
        let mut u = self.upstreams();
        if u.ending {
            end(&socket);
        }
        let id = u.next;
        u.next += 1;
        u.open.insert(id, socket);
        UpstreamHeld {
            admission: self.clone(),
            id,
        }
    }

    /// The drain's grace period has begun: end every long-running request's upstream
    /// connection (and any held later). Each response then ends cleanly, as
    /// kube-apiserver ends its watches when it shuts down.
    pub fn end_long_running(&self) {
        let mut u = self.upstreams();
        u.ending = true;
        u.open.values().for_each(end);
    }

    /// Whether [`Admission::end_long_running`] was called.
    pub fn long_running_ending(&self) -> bool {
        self.upstreams().ending
    }

    fn upstreams(&self) -> std::sync::MutexGuard<'_, Upstreams> {
        self.upstreams.lock().unwrap_or_else(|e| e.into_inner())
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

/// A second handle (`dup`) on the TCP socket `fd`, which pingora passes to
/// `connected_to_upstream` for the upstream connection it holds. The socket stays open
/// while either handle does; shutting the copy down ends reads on pingora's too.
pub fn dup_socket(fd: std::os::fd::RawFd) -> std::io::Result<std::net::TcpStream> {
    // SAFETY: `fd` is the descriptor of the upstream connection pingora holds open for
    // the whole `connected_to_upstream` callback this is called from, so it stays open
    // for this borrow, which ends before the callback returns.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    Ok(std::net::TcpStream::from(borrowed.try_clone_to_owned()?))
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
    fn ending_long_running_requests_ends_their_upstream_reads() {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = Admission::new();
        let mut before = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let held = a.hold_upstream(before.try_clone().unwrap());
        let released = a.hold_upstream(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
        drop(released);
        assert_eq!(
            a.upstreams().open.len(),
            1,
            "a request that is over lets its socket go"
        );
        assert!(!a.long_running_ending());
        a.end_long_running();
        assert!(a.long_running_ending());
        assert_eq!(before.read(&mut [0u8; 8]).unwrap(), 0, "end of stream");
        // A socket held after the drain began ends at once.
        let mut after = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _late = a.hold_upstream(after.try_clone().unwrap());
        assert_eq!(after.read(&mut [0u8; 8]).unwrap(), 0, "end of stream");
        drop(held);
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
