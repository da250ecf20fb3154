//! The engine's clock: every time-dependent decision (delay due times, retry schedules, lock
//! expiry, transaction ages) reads it, so tests drive hours of broker time in milliseconds.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// A source of "now" in epoch milliseconds, as the broker's `System.currentTimeMillis()`.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now_ms(&self) -> i64;
}

/// The machine's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

/// A clock that only moves when told to. Clones share the same time, so a test keeps one handle
/// and gives another to the engine.
#[derive(Debug, Clone, Default)]
pub struct FakeClock(Arc<AtomicI64>);

impl FakeClock {
    pub fn new(now_ms: i64) -> Self {
        FakeClock(Arc::new(AtomicI64::new(now_ms)))
    }

    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }

    /// Move forward (or back, with a negative step) by `ms`; returns the new time.
    pub fn advance(&self, ms: i64) -> i64 {
        self.0.fetch_add(ms, Ordering::SeqCst).wrapping_add(ms)
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_is_shared_between_clones() {
        let c = FakeClock::new(1_000);
        let engine_side: Arc<dyn Clock> = Arc::new(c.clone());
        assert_eq!(engine_side.now_ms(), 1_000);
        assert_eq!(c.advance(10_000), 11_000);
        assert_eq!(engine_side.now_ms(), 11_000);
        c.set(5);
        assert_eq!(engine_side.now_ms(), 5);
        assert!(SystemClock.now_ms() > 1_600_000_000_000);
    }
}
