//! The broker's dispatch rules, stated once: what a commitlog record means for the consume
//! queues and the index (`CommitLog.checkMessageAndReturnSize`, `CommitLogDispatcherBuildConsumeQueue`,
//! `IndexService.buildIndex`; FORMAT.md 3.3, 6.1, 7.2, 7.5). The writer, rebuild, verify and the
//! engine all call [`dispatch`].

use crate::format::commitlog::{prop, MessageRef, TransactionType};
use crate::format::consumequeue::CqUnit;
use crate::format::geometry::Geometry;
use crate::format::java::{parse_int, tags_code};
use crate::format::layout::{check_queue_id, check_topic, NameError};

/// `TopicValidator.RMQ_SYS_SCHEDULE_TOPIC`.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// `TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC`.
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// `TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC`.
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// `MixAll.RETRY_GROUP_TOPIC_PREFIX`.
pub const RETRY_PREFIX: &str = "%RETRY%";
/// `MixAll.DLQ_GROUP_TOPIC_PREFIX`.
pub const DLQ_PREFIX: &str = "%DLQ%";

/// `MixAll.getRetryTopic`.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_PREFIX}{group}")
}

/// `MixAll.getDLQTopic`.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_PREFIX}{group}")
}

/// Where a record's consume queue unit goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CqTarget {
    pub topic: String,
    pub queue_id: i32,
    /// The QUEUEOFFSET field: the unit's logical position.
    pub queue_offset: i64,
    pub unit: CqUnit,
}

/// What the broker's dispatch does with one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    /// The consume queue unit, for NOT and COMMIT records whose topic and queue id can name a
    /// consume queue folder.
    pub cq: Option<CqTarget>,
    /// Why a NOT or COMMIT record gets no unit here although the broker would dispatch it: its
    /// topic breaks the topic rule or its queue id is negative, so it names no folder that can
    /// be made safely (the record's header is damaged; `verify` reports it).
    pub refused: Option<NameError>,
    /// The record's commitlog offset (the PHYSICALOFFSET field, as the broker uses it).
    pub phy_offset: i64,
    pub store_timestamp: i64,
}

/// Why the broker would reject a record at dispatch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    #[error("DELAY property {0:?} of a {SCHEDULE_TOPIC} record is not a number")]
    BadDelay(String),
}

/// The tags code the consume queue unit carries (FORMAT.md 3.3): the TAGS hash, or for a
/// SCHEDULE_TOPIC_XXXX record with DELAY > 0 its delivery time.
pub fn record_tags_code(m: &MessageRef<'_>, g: &Geometry) -> Result<i64, DispatchError> {
    tags_code_with(m, g, &DispatchProps::of(m))
}

/// The properties dispatch and the index read, found in one pass over the block (a repeated
/// name keeps its last value, as the broker's map does).
#[derive(Debug, Default, Clone, Copy)]
pub struct DispatchProps<'a> {
    pub tags: Option<&'a [u8]>,
    pub keys: Option<&'a [u8]>,
    pub uniq_key: Option<&'a [u8]>,
    pub delay: Option<&'a [u8]>,
}

impl<'a> DispatchProps<'a> {
    pub fn of(m: &MessageRef<'a>) -> Self {
        let mut p = DispatchProps::default();
        for (name, value) in m.properties.iter_raw() {
            let slot = match name {
                n if n == prop::TAGS.as_bytes() => &mut p.tags,
                n if n == prop::KEYS.as_bytes() => &mut p.keys,
                n if n == prop::UNIQ_KEY.as_bytes() => &mut p.uniq_key,
                n if n == prop::DELAY.as_bytes() => &mut p.delay,
                _ => continue,
            };
            *slot = Some(value);
        }
        p
    }
}

/// [`record_tags_code`] from properties already found.
fn tags_code_with(
    m: &MessageRef<'_>,
    g: &Geometry,
    p: &DispatchProps<'_>,
) -> Result<i64, DispatchError> {
    let text = crate::format::commitlog::text;
    let mut code = p.tags.map(|t| tags_code(&text(t))).unwrap_or(0);
    if m.topic == SCHEDULE_TOPIC {
        if let Some(d) = p.delay.map(text) {
            let level = parse_int(&d).ok_or_else(|| DispatchError::BadDelay(d.to_string()))?;
            let level = level.min(g.max_delay_level());
            if level > 0 {
                code = deliver_timestamp(g, level, m.store_timestamp);
            }
        }
    }
    Ok(code)
}

/// `computeDeliverTimestamp`: store time plus the level's delay, or plus 1 s for an unknown level.
pub fn deliver_timestamp(g: &Geometry, level: i32, store_timestamp: i64) -> i64 {
    match g.delay_millis(level) {
        Some(d) => store_timestamp.wrapping_add(d),
        None => store_timestamp.wrapping_add(1000),
    }
}

/// Apply the broker's rules to one record.
pub fn dispatch(m: &MessageRef<'_>, g: &Geometry) -> Result<Dispatch, DispatchError> {
    dispatch_with(m, g, &DispatchProps::of(m))
}

/// [`dispatch`] with the record's properties already found.
pub fn dispatch_with(
    m: &MessageRef<'_>,
    g: &Geometry,
    p: &DispatchProps<'_>,
) -> Result<Dispatch, DispatchError> {
    let tx = m.transaction_type();
    let refused = if tx.is_queued() {
        check_topic(&m.topic)
            .and_then(|_| check_queue_id(m.queue_id))
            .err()
    } else {
        None
    };
    let cq = if tx.is_queued() && refused.is_none() {
        Some(CqTarget {
            topic: m.topic.to_string(),
            queue_id: m.queue_id,
            queue_offset: m.queue_offset,
            unit: CqUnit {
                offset: m.physical_offset,
                size: m.total_size,
                tags_code: tags_code_with(m, g, p)?,
            },
        })
    } else {
        // Java computes the tags code for every record, so a bad DELAY fails either way.
        tags_code_with(m, g, p)?;
        None
    };
    Ok(Dispatch {
        cq,
        refused,
        phy_offset: m.physical_offset,
        store_timestamp: m.store_timestamp,
    })
}

/// Index keys `topic#key` in insertion order: UNIQ_KEY, then each KEYS element. Empty for
/// ROLLBACK records.
pub fn index_keys(m: &MessageRef<'_>) -> Vec<String> {
    let mut keys = Vec::new();
    if m.transaction_type() != TransactionType::Rollback {
        if let Some(u) = m.uniq_key() {
            keys.push(format!("{}#{}", m.topic, u));
        }
        for k in m.keys() {
            keys.push(format!("{}#{}", m.topic, k));
        }
    }
    keys
}

/// True for topics the broker creates for itself (schedule, transactions, retry, DLQ, `rmq_sys_`).
pub fn is_system_topic(topic: &str) -> bool {
    topic == SCHEDULE_TOPIC
        || topic == TRANS_HALF_TOPIC
        || topic == TRANS_OP_HALF_TOPIC
        || topic == "TRANS_CHECK_MAX_TIME_TOPIC"
        || topic.starts_with(RETRY_PREFIX)
        || topic.starts_with(DLQ_PREFIX)
        || topic.starts_with("rmq_sys_")
        || topic == crate::format::trace::DEFAULT_TRACE_TOPIC
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::commitlog::read::{parse_record, Record};
    use crate::format::commitlog::{encode_properties, sysflag, Host, Message, MessageVersion};

    fn msg(topic: &str, props: &[(&str, &str)], sys_flag: i32) -> Vec<u8> {
        Message {
            topic: topic.into(),
            queue_id: 2,
            flag: 0,
            queue_offset: 7,
            physical_offset: 1000,
            sys_flag,
            born_timestamp: 1,
            born_host: Host::v4([1, 2, 3, 4], 5),
            store_timestamp: 1_700_000_000_000,
            store_host: Host::v4([1, 2, 3, 4], 6),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"x".to_vec(),
            properties: encode_properties(props, false),
            version: MessageVersion::V1,
        }
        .encode()
        .unwrap()
    }

    fn run(b: &[u8]) -> Result<Dispatch, DispatchError> {
        let Ok(Record::Message(m)) = parse_record(b, 0, 0, true) else {
            panic!()
        };
        dispatch(&m, &Geometry::default())
    }

    fn keys_of(b: &[u8]) -> Vec<String> {
        let Ok(Record::Message(m)) = parse_record(b, 0, 0, true) else {
            panic!()
        };
        index_keys(&m)
    }

    #[test]
    fn normal_record() {
        let b = msg(
            "T",
            &[("TAGS", "TagA"), ("UNIQ_KEY", "U1"), ("KEYS", "k1  k2")],
            0,
        );
        let d = run(&b).unwrap();
        let cq = d.cq.unwrap();
        assert_eq!(
            (cq.topic.as_str(), cq.queue_id, cq.queue_offset),
            ("T", 2, 7)
        );
        assert_eq!(
            cq.unit,
            CqUnit {
                offset: 1000,
                size: b.len() as i32,
                tags_code: 2598919
            }
        );
        assert_eq!(keys_of(&b), vec!["T#U1", "T#k1", "T#k2"]);
    }

    #[test]
    fn schedule_topic_uses_delivery_time() {
        let b = msg(SCHEDULE_TOPIC, &[("TAGS", "TagA"), ("DELAY", "3")], 0);
        assert_eq!(
            run(&b).unwrap().cq.unwrap().unit.tags_code,
            1_700_000_010_000
        );
        // capped at the max level
        let b = msg(SCHEDULE_TOPIC, &[("DELAY", "99")], 0);
        assert_eq!(
            run(&b).unwrap().cq.unwrap().unit.tags_code,
            1_700_007_200_000
        );
        // level 0 keeps the tags hash
        let b = msg(SCHEDULE_TOPIC, &[("TAGS", "TagA"), ("DELAY", "0")], 0);
        assert_eq!(run(&b).unwrap().cq.unwrap().unit.tags_code, 2598919);
        let b = msg(SCHEDULE_TOPIC, &[("DELAY", " 3")], 0);
        assert!(matches!(run(&b), Err(DispatchError::BadDelay(_))));
        // other topics ignore DELAY
        let b = msg("T", &[("DELAY", "x")], 0);
        assert_eq!(run(&b).unwrap().cq.unwrap().unit.tags_code, 0);
    }

    #[test]
    fn transaction_types() {
        let p = &[("UNIQ_KEY", "U"), ("KEYS", "k")][..];
        let prepared = msg("T", p, sysflag::TRANSACTION_PREPARED);
        assert!(run(&prepared).unwrap().cq.is_none());
        assert_eq!(keys_of(&prepared).len(), 2);
        let rollback = msg("T", p, sysflag::TRANSACTION_ROLLBACK);
        assert!(run(&rollback).unwrap().cq.is_none() && keys_of(&rollback).is_empty());
        let commit = msg("T", p, sysflag::TRANSACTION_COMMIT);
        assert!(run(&commit).unwrap().cq.is_some() && keys_of(&commit).len() == 2);
    }

    #[test]
    fn names_that_cannot_be_paths_get_no_unit() {
        for topic in ["../../x", "/abs/path", "a/b", ".."] {
            let d = run(&msg(topic, &[("TAGS", "T")], 0)).unwrap();
            assert!(d.cq.is_none(), "{topic}");
            assert!(
                matches!(d.refused, Some(NameError::TopicChar { .. })),
                "{topic}"
            );
        }
        let mut b = msg("T", &[], 0);
        b[12..16].copy_from_slice(&(-5i32).to_be_bytes());
        let d = run(&b).unwrap();
        assert!(d.cq.is_none());
        assert_eq!(d.refused, Some(NameError::NegativeQueueId(-5)));
    }
}
