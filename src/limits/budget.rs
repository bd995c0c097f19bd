//! The process-wide budget for request body bytes cborgate holds in memory: the
//! transcoded body of every request that is read whole before it goes upstream
//! (`server.max_buffered_body_bytes`). One [`BodyBudget`] is made at start-up and
//! passed to the proxy; each request holds a [`Charge`] that grows as its body
//! does and gives everything back when it is dropped, on every path a request can
//! end by (a panic included). When the budget is spent the request gets a 429 with
//! `Retry-After`, so a flood of large bodies costs a bounded amount of memory,
//! whatever they expand to. `cborgate_request_body_buffered_bytes` shows what is held.

use crate::metrics::metrics;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Body bytes held by all requests, and the most they may hold (0: no limit).
#[derive(Debug, Default)]
pub struct BodyBudget {
    used: AtomicU64,
    limit: u64,
}

/// What one request holds of the budget; dropping it gives it back.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<BodyBudget>,
    held: u64,
}

/// The budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent;

impl BodyBudget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(BodyBudget {
            used: AtomicU64::new(0),
            limit,
        })
    }

    /// An empty charge against this budget.
    pub fn charge(self: &Arc<Self>) -> Charge {
        Charge {
            budget: self.clone(),
            held: 0,
        }
    }

    /// Bytes held by all requests now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    fn take(&self, n: u64) -> Result<(), Spent> {
        let before = self.used.fetch_add(n, Ordering::AcqRel);
        if self.limit > 0 && before.saturating_add(n) > self.limit {
            self.used.fetch_sub(n, Ordering::AcqRel);
            return Err(Spent);
        }
        metrics().request_body_buffered_bytes.add(n as i64);
        Ok(())
    }

    fn give_back(&self, n: u64) {
        self.used.fetch_sub(n, Ordering::AcqRel);
        metrics().request_body_buffered_bytes.sub(n as i64);
    }
}

impl Charge {
    /// Hold `total` bytes in all (more than now, or nothing changes). `Err`: the budget
    /// cannot give the difference; what was held before is still held.
    pub fn hold(&mut self, total: u64) -> Result<(), Spent> {
        if total > self.held {
            self.budget.take(total - self.held)?;
            self.held = total;
        }
        Ok(())
    }

    /// Bytes this charge holds.
    pub fn held(&self) -> u64 {
        self.held
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.held > 0 {
            self.budget.give_back(self.held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_grow_within_the_limit_and_come_back_when_dropped() {
        let b = BodyBudget::new(100);
        let mut one = b.charge();
        let mut two = b.charge();
        one.hold(60).unwrap();
        one.hold(50).unwrap(); // never shrinks
        assert_eq!((one.held(), b.used()), (60, 60));
        assert_eq!(two.hold(41), Err(Spent));
        assert_eq!(
            (two.held(), b.used()),
            (0, 60),
            "a refusal holds nothing more"
        );
        two.hold(40).unwrap();
        assert_eq!(b.used(), 100);
        drop(one);
        assert_eq!(b.used(), 40);
        two.hold(100).unwrap();
        drop(two);
        assert_eq!(b.used(), 0);
        // 0 is no limit.
        let free = BodyBudget::new(0);
        let mut c = free.charge();
        c.hold(u64::MAX / 2).unwrap();
        drop(c);
        assert_eq!(free.used(), 0);
    }

    #[test]
    fn a_panic_while_holding_a_charge_gives_it_back() {
        let b = BodyBudget::new(10);
        let b2 = b.clone();
        let r = std::panic::catch_unwind(move || {
            let mut c = b2.charge();
            c.hold(10).unwrap();
            panic!("a bug in a callback");
        });
        assert!(r.is_err());
        assert_eq!(b.used(), 0);
    }
}
