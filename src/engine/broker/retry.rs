//! Consume failures (ENGINE.md 6.2-6.5, FORMAT.md 10.2): the broker's send-back, which puts a
//! copy of the message into `%RETRY%<group>` with delay level `3 + reconsumeTimes` (so it comes
//! back through the schedule service) or, past the group's max reconsume times, into
//! `%DLQ%<group>`; and the producer path to a retry topic that orderly consumers use.

use serde::Serialize;

use crate::engine::broker::{
    property_pairs, set_property, Engine, EngineError, EngineResult, PutResult,
};
use crate::engine::store::dispatch::{dlq_topic, retry_topic};
use crate::engine::store::version::BrokerVersion;
use crate::format::commitlog::{encode_properties, prop, Message};
use crate::format::config::files::{PERM_READ, PERM_WRITE};
use crate::format::geometry::Geometry;

/// `SubscriptionGroupConfig.retryMaxTimes` default; a push consumer's -1 means this too.
pub const DEFAULT_MAX_RECONSUME_TIMES: i32 = 16;
/// The first retry's delay level (`3 + reconsumeTimes`).
pub const RETRY_BASE_LEVEL: i32 = 3;

/// The delay level of the retry after a consume of a record with `reconsume_times`.
pub fn retry_level(reconsume_times: i32) -> i32 {
    RETRY_BASE_LEVEL.saturating_add(reconsume_times)
}

/// One row of the retry timeline (ENGINE.md 6.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetryStep {
    /// Stored reconsume count of the record that failed.
    pub reconsume_times: i32,
    /// `None`: this failure goes to the DLQ.
    pub delay_level: Option<i32>,
    pub delay_ms: Option<i64>,
}

/// The whole timeline for `max` reconsume times: `max` retries, then the DLQ.
pub fn retry_schedule(g: &Geometry, max: i32) -> Vec<RetryStep> {
    (0..=max.max(0))
        .map(|r| {
            let level = (r < max).then(|| retry_level(r).min(g.max_delay_level()));
            RetryStep {
                reconsume_times: r,
                delay_level: level,
                delay_ms: level.and_then(|l| g.delay_millis(l)),
            }
        })
        .collect()
}

/// What a send-back did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendBackOutcome {
    /// Parked for `%RETRY%<group>`; visible there from `due_at`.
    Retry {
        delay_level: i32,
        due_at: i64,
        put: PutResult,
    },
    /// Put into `%DLQ%<group>` (possibly delayed, see [`Engine::orderly_send_back`]).
    DeadLetter { put: PutResult },
    /// The group has `retryQueueNums <= 0`: acknowledged, nothing written.
    Acknowledged,
}

impl Engine {
    /// `CONSUMER_SEND_MSG_BACK` (4.9 `asyncConsumerSendMsgBack`, 5.x `consumerSendMsgBack`):
    /// the record at `commitlog_offset` failed in `group`. `delay_level` is the consumer's
    /// `delayLevelWhenNextConsume` (0: `3 + reconsumeTimes`, negative: straight to the DLQ);
    /// `max_reconsume_times` overrides the group's `retryMaxTimes` (clients 3.4.9+ send it).
    pub fn send_back(
        &mut self,
        group: &str,
        commitlog_offset: i64,
        delay_level: i32,
        max_reconsume_times: Option<i32>,
    ) -> EngineResult<SendBackOutcome> {
        let cfg = self.group_config(group);
        if cfg.retry_queue_nums <= 0 {
            return Ok(SendBackOutcome::Acknowledged);
        }
        let original = self
            .message_at(commitlog_offset)
            .ok_or(EngineError::NoMessage(commitlog_offset))?;
        let max = max_reconsume_times.unwrap_or(cfg.retry_max_times);
        let rc = original.reconsume_times;
        let to_dlq = rc >= max || delay_level < 0;
        let (topic, queue_id, level) = if to_dlq {
            let t = dlq_topic(group);
            self.ensure_topic(&t, 1, PERM_READ | PERM_WRITE);
            (t, 0, 0)
        } else {
            let t = retry_topic(group);
            self.ensure_topic(&t, cfg.retry_queue_nums, PERM_READ | PERM_WRITE);
            let q = commitlog_offset.rem_euclid(i64::from(cfg.retry_queue_nums)) as i32;
            let level = if delay_level == 0 {
                retry_level(rc)
            } else {
                delay_level
            };
            (t, q, level)
        };
        let mut pairs = property_pairs(&original.properties);
        if !pairs.iter().any(|(k, _)| k == prop::RETRY_TOPIC) {
            set_property(&mut pairs, prop::RETRY_TOPIC, original.topic.clone());
        }
        let origin_blank = pairs
            .iter()
            .find(|(k, _)| k == prop::ORIGIN_MESSAGE_ID)
            .is_none_or(|(_, v)| v.trim().is_empty());
        if origin_blank {
            let id = crate::format::msgid::offset_msg_id(&original.store_host, commitlog_offset);
            set_property(&mut pairs, prop::ORIGIN_MESSAGE_ID, id);
        }
        set_property(&mut pairs, prop::WAIT, "false");
        set_property(&mut pairs, prop::DELAY, level.to_string());
        let store_host = match self.options.version {
            BrokerVersion::V4_9 => original.store_host,
            BrokerVersion::V5 => self.options.store_host,
        };
        let msg = Message {
            topic,
            queue_id,
            queue_offset: 0,
            physical_offset: 0,
            store_timestamp: 0,
            store_host,
            reconsume_times: rc.saturating_add(1),
            prepared_transaction_offset: 0,
            properties: encode_properties(&pairs, self.options.trailing_separator()),
            ..original
        };
        let put = self.put_with_delay(msg, level)?;
        if to_dlq {
            return Ok(SendBackOutcome::DeadLetter { put });
        }
        let capped = level.min(self.source.geometry.max_delay_level());
        let delay = self.source.geometry.delay_millis(capped).unwrap_or(1000);
        Ok(SendBackOutcome::Retry {
            delay_level: capped,
            due_at: put.store_timestamp.saturating_add(delay),
            put,
        })
    }

    /// An orderly consumer's send-back past `maxReconsumeTimes` (ENGINE.md 6.5): a producer's
    /// send of a copy to `%RETRY%<group>` with `RETRY_TOPIC`, `ORIGIN_MESSAGE_ID` and
    /// `DELAY = 3 + reconsume_times` (the consumer's in-memory count), checked by
    /// `handleRetryAndDLQ` (6.4). The header's reconsume times (the record's RECONSUMETIMES) is
    /// `reconsume_times` in 4.9 and one more in 5.x. 4.9 sends it to the DLQ when that is
    /// `>= max`, keeping the client's DELAY (so it reaches the DLQ after that delay); 5.x when
    /// it is `> max` or the group holds a live queue lock, with `DELAY=-1` (at once).
    pub fn orderly_send_back(
        &mut self,
        group: &str,
        commitlog_offset: i64,
        reconsume_times: i32,
        max_reconsume_times: i32,
    ) -> EngineResult<SendBackOutcome> {
        let original = self
            .message_at(commitlog_offset)
            .ok_or(EngineError::NoMessage(commitlog_offset))?;
        let cfg = self.group_config(group);
        let now = self.now();
        let five = self.options.version == BrokerVersion::V5;
        let header_rc = if five {
            reconsume_times.saturating_add(1)
        } else {
            reconsume_times
        };
        let to_dlq = if five {
            header_rc > max_reconsume_times || !self.locks.is_lock_all_expired(group, now)
        } else {
            header_rc >= max_reconsume_times
        };
        let client_level = retry_level(reconsume_times);
        let mut pairs = property_pairs(&original.properties);
        set_property(&mut pairs, prop::RETRY_TOPIC, original.topic.clone());
        let origin_blank = pairs
            .iter()
            .find(|(k, _)| k == prop::ORIGIN_MESSAGE_ID)
            .is_none_or(|(_, v)| v.trim().is_empty());
        if origin_blank {
            let id = original
                .property(prop::UNIQ_KEY)
                .map(|s| s.into_owned())
                .unwrap_or_else(|| {
                    crate::format::msgid::offset_msg_id(&original.store_host, commitlog_offset)
                });
            set_property(&mut pairs, prop::ORIGIN_MESSAGE_ID, id);
        }
        crate::engine::broker::remove_property(&mut pairs, prop::TRAN_MSG);
        let (topic, level) = if to_dlq {
            let t = dlq_topic(group);
            self.ensure_topic(&t, 1, PERM_READ | PERM_WRITE);
            (t, if five { -1 } else { client_level })
        } else {
            let t = retry_topic(group);
            self.ensure_topic(&t, cfg.retry_queue_nums.max(1), PERM_READ | PERM_WRITE);
            (t, client_level)
        };
        set_property(&mut pairs, prop::DELAY, level.to_string());
        let msg = Message {
            topic,
            queue_id: 0,
            queue_offset: 0,
            physical_offset: 0,
            store_timestamp: 0,
            store_host: self.options.store_host,
            born_timestamp: now,
            reconsume_times: header_rc,
            prepared_transaction_offset: 0,
            sys_flag: original.sys_flag & !crate::format::commitlog::sysflag::TRANSACTION_MASK,
            properties: encode_properties(&pairs, self.options.trailing_separator()),
            ..original
        };
        let put = self.put_with_delay(msg, level.max(0))?;
        if to_dlq {
            return Ok(SendBackOutcome::DeadLetter { put });
        }
        let capped = level.min(self.source.geometry.max_delay_level());
        let delay = self.source.geometry.delay_millis(capped).unwrap_or(1000);
        Ok(SendBackOutcome::Retry {
            delay_level: capped,
            due_at: put.store_timestamp.saturating_add(delay),
            put,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_step_table() {
        let g = Geometry::default();
        let s = retry_schedule(&g, 16);
        assert_eq!(s.len(), 17);
        let secs: Vec<i64> = s
            .iter()
            .filter_map(|r| r.delay_ms)
            .map(|m| m / 1000)
            .collect();
        assert_eq!(
            secs,
            [10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200]
        );
        assert_eq!(secs.iter().sum::<i64>(), 4 * 3600 + 45 * 60 + 40);
        assert_eq!(s[16].delay_level, None);
        assert_eq!(retry_topic("g"), "%RETRY%g");
        assert_eq!(dlq_topic("g"), "%DLQ%g");
    }
}
