//! The engine's clock: every time-dependent decision (delay due times, retry schedules, lock
//! expiry, transaction ages) reads it, so tests drive hours of broker time in milliseconds.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

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

/// A clock that starts at `origin_ms` and runs `scale` times faster than the machine's clock
/// (delays of minutes pass in seconds; the records it stamps are in its own time).
#[derive(Debug)]
pub struct ScaledClock {
    origin_ms: i64,
    start: Instant,
    scale: f64,
}

impl ScaledClock {
    pub fn new(origin_ms: i64, scale: f64) -> Self {
        ScaledClock {
            origin_ms,
            start: Instant::now(),
            scale: if scale.is_finite() && scale > 0.0 {
                scale
            } else {
                1.0
            },
        }
    }

    /// Real milliseconds until this clock reads `t` (0 when it already does).
    pub fn real_ms_until(&self, t: i64) -> u64 {
        let d = t.saturating_sub(self.now_ms());
        if d <= 0 {
            0
        } else {
            (d as f64 / self.scale).ceil() as u64
        }
    }
}

impl Clock for ScaledClock {
    fn now_ms(&self) -> i64 {
        let elapsed = self.start.elapsed().as_secs_f64() * 1000.0 * self.scale;
        self.origin_ms.saturating_add(elapsed as i64)
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

    #[test]
    fn scaled_clock_runs_faster() {
        let c = ScaledClock::new(1_000, 1000.0);
        let a = c.now_ms();
        assert!(a >= 1_000);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(c.now_ms() >= a + 4_000);
        assert_eq!(c.real_ms_until(0), 0);
        assert!(c.real_ms_until(c.now_ms() + 10_000) <= 10);
        assert_eq!(ScaledClock::new(0, -1.0).scale, 1.0);
    }
}

/// How a time written without a zone is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zoneless {
    /// In the machine's local time zone (`TZ`).
    Local,
    Utc,
}

/// Parse a time: epoch milliseconds (`1796073054160`), or an ISO 8601 date (`2026-11-30`,
/// midnight) or date-time (`2026-11-30T10:15:00`, seconds and `.SSS` optional, a space accepted
/// for `T`) with a zone (`Z`, `+08:00`), or else read as `zoneless` says.
pub fn parse_time(s: &str, zoneless: Zoneless) -> Result<i64, String> {
    use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, TimeZone};
    let s = s.trim();
    let digits = s.strip_prefix('-').unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<i64>().map_err(|e| format!("time {s:?}: {e}"));
    }
    let with_t = s.replacen(' ', "T", 1);
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M%:z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%dT%H:%M%z",
    ] {
        if let Ok(t) = DateTime::parse_from_str(&with_t, fmt) {
            return Ok(t.timestamp_millis());
        }
    }
    let (naive_text, utc) = match with_t.strip_suffix(['Z', 'z']) {
        Some(rest) => (rest, true),
        None => (with_t.as_str(), zoneless == Zoneless::Utc),
    };
    let zone = match zoneless {
        Zoneless::Local => "the local time zone",
        Zoneless::Utc => "UTC",
    };
    let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(naive_text, f).ok())
        .or_else(|| {
            NaiveDate::parse_from_str(naive_text, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
        .ok_or_else(|| {
            format!(
                "time {s:?}: expected epoch milliseconds or an ISO 8601 date or date-time \
                 (2026-11-30, 2026-11-30T10:15:00 in {zone}, 2026-11-30T10:15:00.250+08:00)"
            )
        })?;
    if utc {
        return Ok(naive.and_utc().timestamp_millis());
    }
    match chrono::Local.from_local_datetime(&naive) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Ok(t.timestamp_millis()),
        LocalResult::None => Err(format!("time {s:?} does not exist in {zone}")),
    }
}
