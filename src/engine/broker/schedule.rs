//! Delayed delivery by delay level (ENGINE.md 7.1, FORMAT.md 10.1): parking a message in
//! `SCHEDULE_TOPIC_XXXX` queue `level - 1`, delivering it to its `REAL_TOPIC`/`REAL_QID` when
//! due, progress per level in `delayOffset.json`, and the list of what is still waiting.
//!
//! Delivery happens exactly at the due time of the engine's clock (a broker runs up to 100 ms
//! late), in due-time order across levels, each level in queue order stopping at its first unit
//! that is not due.

use serde::Serialize;

use crate::engine::broker::pull::PullSource;
use crate::engine::broker::{property_pairs, set_property, Engine, EngineResult, PutResult};
use crate::engine::store::dispatch::{SCHEDULE_TOPIC, TRANS_HALF_TOPIC};
use crate::engine::store::version::BrokerVersion;
use crate::format::commitlog::message_in;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::{encode_properties, prop, Message};
use crate::format::consumequeue::CqUnit;
use crate::format::java::parse_int;

/// `delayLevel2QueueId`.
pub fn queue_id_of_level(level: i32) -> i32 {
    level - 1
}

/// The parking rewrite (4.9 `CommitLog.asyncPutMessage`, 5.x `transformDelayLevelMessage`):
/// `REAL_TOPIC`/`REAL_QID` keep the target, `DELAY` the (capped) level, and the message moves
/// to `SCHEDULE_TOPIC_XXXX` queue `level - 1`.
pub fn park(msg: &mut Message, level: i32, trailing_separator: bool) {
    let mut pairs = property_pairs(&msg.properties);
    set_property(&mut pairs, prop::DELAY, level.to_string());
    set_property(&mut pairs, prop::REAL_TOPIC, msg.topic.clone());
    set_property(&mut pairs, prop::REAL_QID, msg.queue_id.to_string());
    msg.properties = encode_properties(&pairs, trailing_separator);
    msg.topic = SCHEDULE_TOPIC.to_string();
    msg.queue_id = queue_id_of_level(level);
}

/// A message waiting in `SCHEDULE_TOPIC_XXXX`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DelayedMessage {
    pub level: i32,
    pub queue_offset: i64,
    pub commitlog_offset: i64,
    /// The unit's tags code: store time + the level's delay (`due_timestamp` in JSON).
    #[serde(rename = "due_timestamp")]
    pub due: i64,
    pub real_topic: Option<String>,
    pub real_queue_id: Option<i32>,
    pub uniq_key: Option<String>,
    pub store_timestamp: i64,
    /// `%RETRY%<group>` targets are consumer retries.
    pub is_retry: bool,
}

/// What happened to one due unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// Put to its real topic.
    Delivered(PutResult),
    /// Its record can no longer be read: skipped.
    Gone,
    /// Its real topic is the transaction half topic: dropped.
    HalfTopicDropped,
    /// `REAL_TOPIC`/`REAL_QID` missing or not a number: 4.9 retries this unit forever (the level
    /// is stuck), 5.x skips it.
    BadTarget { skipped: bool },
}

/// One step of the schedule service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub level: i32,
    pub queue_offset: i64,
    pub commitlog_offset: i64,
    pub due: i64,
    pub outcome: DeliveryOutcome,
}

impl Engine {
    /// The next offset of `level` to deliver: `delayOffset.json` clamped into the level queue's
    /// bounds; a level without an entry starts at 0, raised to the queue's min.
    pub fn delay_offset(&self, level: i32) -> i64 {
        let (min, max) = self.queue_bounds(SCHEDULE_TOPIC, queue_id_of_level(level));
        let o = self.delay_progress.get(&level).copied().unwrap_or(0);
        o.clamp(min, max.max(min))
    }

    /// The delivery time of a unit (`correctDeliverTimestamp` applied at `now`): its tags code,
    /// or store time + delay for an ext address; a time beyond one full delay ahead is now.
    fn due_of(&self, level: i32, unit: &CqUnit, now: i64) -> i64 {
        let delay = self.source.geometry.delay_millis(level).unwrap_or(1000);
        let due = if unit.has_ext_addr() {
            self.record_store_time(unit.offset)
                .unwrap_or(now)
                .saturating_add(delay)
        } else {
            unit.tags_code
        };
        if due > now.saturating_add(delay) {
            now
        } else {
            due
        }
    }

    fn record_store_time(&self, phy: i64) -> Option<i64> {
        let raw = self.record_at(phy)?;
        match parse_record(&raw, 0, 0, false) {
            Ok(Record::Message(m)) => Some(m.store_timestamp),
            _ => None,
        }
    }

    /// Every message still waiting, level by level in queue order.
    pub fn pending_delayed(&self) -> Vec<DelayedMessage> {
        let mut out = Vec::new();
        for level in 1..=self.source.geometry.max_delay_level() {
            let q = queue_id_of_level(level);
            let (_, max) = self.queue_bounds(SCHEDULE_TOPIC, q);
            let mut o = self.delay_offset(level);
            while o < max {
                let Some(units) = self.units_from(SCHEDULE_TOPIC, q, o, 100_000) else {
                    let per_file = self.cq_file_units().max(1) as i64;
                    o = o - o % per_file + per_file;
                    continue;
                };
                if units.is_empty() {
                    break;
                }
                for (i, u) in units.iter().enumerate() {
                    out.push(self.describe_delayed(level, o + i as i64, u));
                }
                o += units.len() as i64;
            }
        }
        out
    }

    fn describe_delayed(&self, level: i32, queue_offset: i64, u: &CqUnit) -> DelayedMessage {
        let raw = self.read(u.offset, u.size);
        let m = raw
            .as_deref()
            .and_then(|r| match parse_record(r, 0, 0, false) {
                Ok(Record::Message(m)) => Some(m),
                _ => None,
            });
        let real_topic = m
            .as_ref()
            .and_then(|m| m.property(prop::REAL_TOPIC))
            .map(|s| s.into_owned());
        DelayedMessage {
            level,
            queue_offset,
            commitlog_offset: u.offset,
            due: if u.has_ext_addr() {
                m.as_ref()
                    .map(|m| m.store_timestamp)
                    .unwrap_or(0)
                    .saturating_add(self.source.geometry.delay_millis(level).unwrap_or(1000))
            } else {
                u.tags_code
            },
            is_retry: real_topic
                .as_deref()
                .is_some_and(|t| t.starts_with(crate::engine::store::dispatch::RETRY_PREFIX)),
            real_topic,
            real_queue_id: m
                .as_ref()
                .and_then(|m| m.property(prop::REAL_QID))
                .and_then(|s| parse_int(&s)),
            uniq_key: m
                .as_ref()
                .and_then(|m| m.uniq_key())
                .map(|s| s.into_owned()),
            store_timestamp: m.as_ref().map(|m| m.store_timestamp).unwrap_or(0),
        }
    }

    /// The earliest time at which some level has a unit to deliver (after correction at now).
    pub fn next_delivery_time(&self) -> Option<i64> {
        let now = self.now();
        (1..=self.source.geometry.max_delay_level())
            .filter_map(|level| {
                let o = self.delay_offset(level);
                let u = self.unit_at(SCHEDULE_TOPIC, queue_id_of_level(level), o)?;
                Some(self.due_of(level, &u, now))
            })
            .min()
    }

    /// Run the schedule service at the clock's now: deliver every due unit, earliest first.
    pub fn deliver_due(&mut self) -> EngineResult<Vec<Delivery>> {
        let mut done = Vec::new();
        let mut stuck: Vec<i32> = Vec::new();
        loop {
            let now = self.now();
            let mut best: Option<(i64, i32, i64, CqUnit)> = None;
            for level in 1..=self.source.geometry.max_delay_level() {
                if stuck.contains(&level) {
                    continue;
                }
                let o = self.delay_offset(level);
                let Some(u) = self.unit_at(SCHEDULE_TOPIC, queue_id_of_level(level), o) else {
                    continue;
                };
                let due = self.due_of(level, &u, now);
                if due <= now && best.is_none_or(|b| due < b.0) {
                    best = Some((due, level, o, u));
                }
            }
            let Some((due, level, o, u)) = best else {
                break;
            };
            let outcome = self.deliver_unit(&u)?;
            if matches!(outcome, DeliveryOutcome::BadTarget { skipped: false }) {
                stuck.push(level);
            } else {
                self.delay_progress.insert(level, o + 1);
                self.mark_delay_dirty();
            }
            done.push(Delivery {
                level,
                queue_offset: o,
                commitlog_offset: u.offset,
                due,
                outcome,
            });
        }
        Ok(done)
    }

    /// `messageTimeup`: the parked record rebuilt for its real topic and put.
    fn deliver_unit(&mut self, u: &CqUnit) -> EngineResult<DeliveryOutcome> {
        let Some(raw) = self.read(u.offset, u.size).map(|r| r.into_owned()) else {
            return Ok(DeliveryOutcome::Gone);
        };
        let Some(parked) = message_in(&raw, u.offset) else {
            return Ok(DeliveryOutcome::Gone);
        };
        let topic = parked.property(prop::REAL_TOPIC).map(|s| s.into_owned());
        let qid = parked.property(prop::REAL_QID).and_then(|s| parse_int(&s));
        let (Some(topic), Some(queue_id)) = (topic, qid) else {
            return Ok(DeliveryOutcome::BadTarget {
                skipped: self.options.version == BrokerVersion::V5,
            });
        };
        if topic == TRANS_HALF_TOPIC {
            return Ok(DeliveryOutcome::HalfTopicDropped);
        }
        let mut msg = parked.to_owned_message();
        msg.topic = topic;
        msg.queue_id = queue_id;
        msg.prepared_transaction_offset = 0;
        // The stored properties are the parked map serialized before DELAY is cleared.
        let put = self.put_with_delay(msg, 0)?;
        Ok(DeliveryOutcome::Delivered(put))
    }
}
