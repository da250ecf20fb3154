//! `config/timercheck` (`TimerCheckpoint`): one 4096-byte page of big-endian longs.

use serde::Serialize;

use crate::format::bytes::i64_at;
use crate::format::error::{ErrorKind, ParseError};

/// The file maps one OS page.
pub const TIMERCHECK_FILE_SIZE: usize = 4096;
/// Bytes in use: seven longs.
pub const TIMERCHECK_LEN: usize = 56;

/// The timer's progress, as `TimerCheckpoint` keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TimerCheckpoint {
    /// `lastReadTimeMs`: the wheel's read cursor; slots before it have been delivered.
    pub last_read_time_ms: i64,
    /// `lastTimerLogFlushPos`: how far the timer log was flushed.
    pub last_timer_log_flush_pos: i64,
    /// `lastTimerQueueOffset`: the next unit of `rmq_sys_wheel_timer` queue 0 to enqueue.
    pub last_timer_queue_offset: i64,
    /// `masterTimerQueueOffset`: the same, as last seen on the master.
    pub master_timer_queue_offset: i64,
    /// `dataVersion.stateVersion`.
    pub state_version: i64,
    /// `dataVersion.timestamp`.
    pub data_timestamp: i64,
    /// `dataVersion.counter`.
    pub data_counter: i64,
}

impl TimerCheckpoint {
    /// Parse the file's bytes (at least the 56 bytes in use).
    pub fn from_bytes(b: &[u8]) -> Result<Self, ParseError> {
        if b.len() < TIMERCHECK_LEN {
            return Err(ParseError::new(
                0,
                ErrorKind::Truncated {
                    what: "timer checkpoint",
                    needed: TIMERCHECK_LEN as u64,
                    left: b.len() as u64,
                },
            ));
        }
        let at = |i: usize| i64_at(b, i * 8).unwrap_or(0);
        Ok(TimerCheckpoint {
            last_read_time_ms: at(0),
            last_timer_log_flush_pos: at(1),
            last_timer_queue_offset: at(2),
            master_timer_queue_offset: at(3),
            state_version: at(4),
            data_timestamp: at(5),
            data_counter: at(6),
        })
    }

    /// The 4096-byte file, unused bytes zero.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; TIMERCHECK_FILE_SIZE];
        let fields = [
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
            self.state_version,
            self.data_timestamp,
            self.data_counter,
        ];
        for (i, x) in fields.iter().enumerate() {
            v[i * 8..i * 8 + 8].copy_from_slice(&x.to_be_bytes());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short_files() {
        let cp = TimerCheckpoint {
            last_read_time_ms: 1_796_074_411_000,
            last_timer_log_flush_pos: 6708,
            last_timer_queue_offset: 129,
            master_timer_queue_offset: 129,
            state_version: 0,
            data_timestamp: 1_796_074_411_524,
            data_counter: 25,
        };
        let b = cp.to_bytes();
        assert_eq!(b.len(), TIMERCHECK_FILE_SIZE);
        assert_eq!(TimerCheckpoint::from_bytes(&b).unwrap(), cp);
        let e = TimerCheckpoint::from_bytes(&b[..55]).unwrap_err();
        assert!(e.to_string().contains("56 bytes"), "{e}");
    }
}
