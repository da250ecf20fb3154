//! The 5.x timer wheel's own files (FORMAT.md 10.4, ENGINE.md 7.2): `timerlog/` (52-byte units,
//! [`log`]), the fixed-size sparse `timerwheel` (32-byte slots, [`wheel`]), `config/timercheck`
//! (the timer's checkpoint, [`checkpoint`]) and `config/timermetrics` (pending counts per real
//! topic, [`metrics`]). [`check`] holds the structural checks of each file and of the links
//! between them.
//!
//! A timer message is first stored on [`TIMER_TOPIC`] queue 0 with `TIMER_OUT_MS`, `REAL_TOPIC`
//! and `REAL_QID`; the timer store reads that queue, appends a unit to the timer log and links it
//! into the wheel slot of its second; when the slot's second has passed it puts a copy on the real
//! topic. Layouts as RocketMQ 5.3.3's `TimerLog`, `TimerWheel`, `Slot`, `TimerCheckpoint` and
//! `TimerMetrics` write them.

pub mod check;
pub mod checkpoint;
pub mod log;
pub mod metrics;
pub mod wheel;

pub use checkpoint::TimerCheckpoint;
pub use log::{TimerLog, TimerUnit};
pub use wheel::{Slot, TimerWheel};

/// `TimerMessageStore.TIMER_TOPIC`: where timer messages wait.
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// `timerPrecisionMs` default: one slot per second.
pub const DEFAULT_PRECISION_MS: i64 = 1000;
/// `timerRollWindowSlot` default (2 days of slots): a message due further ahead is rolled.
pub const DEFAULT_ROLL_WINDOW_SLOTS: i64 = 2 * 86_400;
/// `timerMaxDelaySec` default (3 days): a put asking for more is refused.
pub const DEFAULT_MAX_DELAY_SEC: i64 = 3 * 86_400;
/// `mappedFileSizeTimerLog` default (100 MiB).
pub const DEFAULT_TIMERLOG_FILE_SIZE: u64 = 100 * 1024 * 1024;
/// Folder of the timer log under the store root.
pub const TIMERLOG_DIR: &str = "timerlog";
/// The wheel file under the store root.
pub const TIMERWHEEL_FILE: &str = "timerwheel";
/// The timer checkpoint under `config/`.
pub const TIMERCHECK_FILE: &str = "timercheck";
/// The timer metrics under `config/`.
pub const TIMERMETRICS_FILE: &str = "timermetrics";

/// `TIMER_OUT_MS` for a requested delivery time `deliver_ms` (`transformTimerMessage`): one
/// precision step earlier when it falls on a step, else floored to the step.
pub fn normalize_deliver_ms(deliver_ms: i64, precision_ms: i64) -> i64 {
    let p = precision_ms.max(1);
    if deliver_ms % p == 0 {
        deliver_ms - p
    } else {
        deliver_ms.div_euclid(p) * p
    }
}

/// When the wheel releases a message whose `TIMER_OUT_MS` is `timer_out_ms`: its slot is read
/// once the write cursor (`now` floored to the precision) is past it, so at `timer_out_ms + p`.
pub fn release_time(timer_out_ms: i64, precision_ms: i64) -> i64 {
    timer_out_ms.saturating_add(precision_ms.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizing_deliver_times() {
        assert_eq!(
            normalize_deliver_ms(1_796_074_385_000, 1000),
            1_796_074_384_000
        );
        assert_eq!(
            normalize_deliver_ms(1_796_074_385_123, 1000),
            1_796_074_385_000
        );
        assert_eq!(release_time(1_796_074_385_000, 1000), 1_796_074_386_000);
    }
}
