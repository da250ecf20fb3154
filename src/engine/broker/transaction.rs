//! Transactions (ENGINE.md 8, FORMAT.md 10.3): half messages matched against op messages, the
//! final-state view of every half record above the check service's committed offset, the
//! undecided ones grouped per transaction, and commit or rollback as `EndTransactionProcessor`
//! writes them.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::engine::broker::pull::PullSource;
use crate::engine::broker::{Engine, EngineError, EngineResult, PutResult};
use crate::engine::store::dispatch::{TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};
use crate::engine::store::version::BrokerVersion;
use crate::format::commitlog::message_in;
use crate::format::commitlog::{encode_properties, prop, sysflag, Message, MessageRef};
use crate::format::consumequeue::CqUnit;
use crate::format::java::{parse_int, parse_long};

/// `MixAll.CID_RMQ_SYS_TRANS`: the check service's consumer group.
pub const TRANS_CHECK_GROUP: &str = "CID_RMQ_SYS_TRANS";
/// `TransactionalMessageUtil.REMOVETAG`: the tag of op records.
pub const REMOVE_TAG: &str = "d";
/// `transactionTimeOut`.
pub const TRANSACTION_TIMEOUT_MS: i64 = 6_000;
/// `transactionCheckMax`.
pub const TRANSACTION_CHECK_MAX: i32 = 15;
/// `fileReservedTime` (72 h).
pub const FILE_RESERVED_MS: i64 = 72 * 3_600_000;
/// `MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS`.
pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";

/// Where a half record stands (ENGINE.md 8, "final-state view").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HalfState {
    /// A `d` op names its queue offset.
    Decided,
    /// An immunity copy whose original a `d` op names.
    DecidedByOriginal,
    /// Checked 15 times already, or born more than 72 h ago: discarded at the next visit.
    ToDiscard,
    /// Younger than its immunity time or the 6 s transaction timeout.
    NotYetDue,
    /// The next check run asks the producer about it.
    PendingCheck,
}

/// One record of the half queue at or above the committed half offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HalfRecord {
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commitlog_offset: i64,
    pub store_timestamp: i64,
    pub born_timestamp: i64,
    pub uniq_key: Option<String>,
    pub producer_group: Option<String>,
    pub real_topic: Option<String>,
    pub real_queue_id: Option<i32>,
    /// `TRANSACTION_CHECK_TIMES`: how many checks this copy has used.
    pub check_times: Option<i32>,
    /// `TRAN_PREPARED_QUEUE_OFFSET`: an immunity copy's original.
    pub prepared_queue_offset: Option<i64>,
    pub state: HalfState,
}

/// One half queue and its op queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransactionQueue {
    pub queue_id: i32,
    /// `CID_RMQ_SYS_TRANS` offset on the half queue (or its min).
    pub half_offset: i64,
    /// `CID_RMQ_SYS_TRANS` offset on the op queue (or its min).
    pub op_offset: i64,
    pub half_max: i64,
    pub op_max: i64,
    pub records: Vec<HalfRecord>,
}

/// An undecided transaction: its half records grouped by UNIQ_KEY, the highest offset live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingTransaction {
    pub uniq_key: Option<String>,
    pub live: HalfRecord,
    pub copies: usize,
}

/// What a commit or rollback wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTransaction {
    /// The committed record in the real topic (commit only).
    pub committed: Option<PutResult>,
    /// The op record.
    pub op: PutResult,
}

/// Half offsets an op body names: `17` (4.9, 5.0) or `17,18,21,` (5.1+).
pub fn op_body_offsets(body: &[u8]) -> Vec<i64> {
    String::from_utf8_lossy(body)
        .split(',')
        .filter_map(|p| parse_long(p.trim()))
        .collect()
}

impl Engine {
    /// Every unit of a queue from `from`, across files, with its queue offset.
    fn units_between(&self, topic: &str, queue_id: i32, from: i64) -> Vec<(i64, CqUnit)> {
        let (_, max) = self.queue_bounds(topic, queue_id);
        let per_file = self.cq_file_units().max(1) as i64;
        let mut out = Vec::new();
        let mut o = from.max(0);
        while o < max {
            match self.units_from(topic, queue_id, o, usize::MAX) {
                Some(units) if !units.is_empty() => {
                    for (i, u) in units.iter().enumerate() {
                        out.push((o + i as i64, *u));
                    }
                    o += units.len() as i64;
                }
                _ => o = o - o.rem_euclid(per_file) + per_file,
            }
        }
        out
    }

    fn with_record<T>(&self, u: &CqUnit, f: impl FnOnce(&MessageRef<'_>) -> T) -> Option<T> {
        let raw = self.read(u.offset, u.size)?;
        message_in(&raw, u.offset).map(|m| f(&m))
    }

    /// The final-state view of every half queue at the clock's now.
    pub fn transactions(&self) -> Vec<TransactionQueue> {
        let now = self.now();
        let mut out = Vec::new();
        for queue_id in self.queue_ids(TRANS_HALF_TOPIC) {
            let (half_min, half_max) = self.queue_bounds(TRANS_HALF_TOPIC, queue_id);
            let (op_min, op_max) = self.queue_bounds(TRANS_OP_HALF_TOPIC, queue_id);
            let committed = |t: &str, min: i64| {
                let c = self.committed_offset(TRANS_CHECK_GROUP, t, queue_id);
                if c < 0 {
                    min
                } else {
                    c
                }
            };
            let half_offset = committed(TRANS_HALF_TOPIC, half_min);
            let op_offset = committed(TRANS_OP_HALF_TOPIC, op_min);
            let mut named_after: BTreeSet<i64> = BTreeSet::new();
            let mut named_any: BTreeSet<i64> = BTreeSet::new();
            for (o, u) in self.units_between(TRANS_OP_HALF_TOPIC, queue_id, op_min) {
                let offsets = self
                    .with_record(&u, |m| {
                        (m.tags().as_deref() == Some(REMOVE_TAG)).then(|| op_body_offsets(m.body))
                    })
                    .flatten()
                    .unwrap_or_default();
                for h in offsets {
                    named_any.insert(h);
                    if o >= op_offset && h >= half_offset {
                        named_after.insert(h);
                    }
                }
            }
            let mut records = Vec::new();
            for (o, u) in self.units_between(TRANS_HALF_TOPIC, queue_id, half_offset) {
                let Some(r) = self.with_record(&u, |m| {
                    half_record(m, queue_id, o, now, &named_after, &named_any)
                }) else {
                    continue;
                };
                records.push(r);
            }
            out.push(TransactionQueue {
                queue_id,
                half_offset,
                op_offset,
                half_max,
                op_max,
                records,
            });
        }
        out
    }

    /// Undecided transactions, one per UNIQ_KEY (the live copy is the highest offset).
    pub fn pending_transactions(&self) -> Vec<PendingTransaction> {
        let mut by_key: BTreeMap<(Option<String>, i64), Vec<HalfRecord>> = BTreeMap::new();
        for q in self.transactions() {
            for r in q.records {
                if matches!(r.state, HalfState::Decided | HalfState::DecidedByOriginal) {
                    continue;
                }
                // Records without a key stay apart.
                let key = match &r.uniq_key {
                    Some(k) => (Some(k.clone()), 0),
                    None => (None, r.commitlog_offset),
                };
                by_key.entry(key).or_default().push(r);
            }
        }
        let mut out: Vec<PendingTransaction> = by_key
            .into_iter()
            .filter_map(|((k, _), mut v)| {
                v.sort_by_key(|r| (r.queue_id, r.queue_offset));
                let copies = v.len();
                v.pop().map(|live| PendingTransaction {
                    uniq_key: k,
                    live,
                    copies,
                })
            })
            .collect();
        out.sort_by_key(|p| (p.live.queue_id, p.live.queue_offset));
        out
    }

    /// `END_TRANSACTION` for the half record at `half_commitlog_offset`: a commit puts the real
    /// record (transaction type COMMIT, `preparedTransactionOffset` = the half's offset, the
    /// half's property bytes), then the op record; a rollback puts the op record only. With
    /// `producer_group`, the half's `PGROUP` must match.
    pub fn end_transaction(
        &mut self,
        half_commitlog_offset: i64,
        commit: bool,
        producer_group: Option<&str>,
    ) -> EngineResult<EndTransaction> {
        let half = self
            .message_at(half_commitlog_offset)
            .ok_or(EngineError::NoMessage(half_commitlog_offset))?;
        if half.topic != TRANS_HALF_TOPIC {
            return Err(EngineError::NotHalfMessage {
                offset: half_commitlog_offset,
                topic: half.topic,
            });
        }
        if let Some(pg) = producer_group {
            let found = half
                .property(prop::PGROUP)
                .map(|s| s.into_owned())
                .unwrap_or_default();
            if found != pg {
                return Err(EngineError::ProducerGroupMismatch {
                    expected: pg.to_string(),
                    found,
                });
            }
        }
        let committed = if commit {
            let topic = half.property(prop::REAL_TOPIC).map(|s| s.into_owned());
            let qid = half.property(prop::REAL_QID).and_then(|s| parse_int(&s));
            let (Some(topic), Some(queue_id)) = (topic, qid) else {
                return Err(EngineError::NotHalfMessage {
                    offset: half_commitlog_offset,
                    topic: half.topic,
                });
            };
            let msg = Message {
                topic,
                queue_id,
                queue_offset: 0,
                physical_offset: 0,
                store_timestamp: 0,
                store_host: self.options.store_host,
                sys_flag: (half.sys_flag & !sysflag::TRANSACTION_MASK)
                    | sysflag::TRANSACTION_COMMIT,
                prepared_transaction_offset: half_commitlog_offset,
                ..half.clone()
            };
            Some(self.put_with_delay(msg, 0)?)
        } else {
            None
        };
        let now = self.now();
        let body = match self.options.version {
            BrokerVersion::V4_9 => half.queue_offset.to_string(),
            BrokerVersion::V5 => format!("{},", half.queue_offset),
        };
        let op = Message {
            topic: TRANS_OP_HALF_TOPIC.to_string(),
            queue_id: half.queue_id,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp: now,
            born_host: self.options.store_host,
            store_timestamp: 0,
            store_host: self.options.store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: body.into_bytes(),
            properties: encode_properties(
                &[(prop::WAIT, "true"), (prop::TAGS, REMOVE_TAG)],
                self.options.trailing_separator(),
            ),
            version: crate::format::commitlog::MessageVersion::V1,
        };
        let op = self.put_with_delay(op, 0)?;
        Ok(EndTransaction { committed, op })
    }
}

fn half_record(
    m: &MessageRef<'_>,
    queue_id: i32,
    queue_offset: i64,
    now: i64,
    named_after: &BTreeSet<i64>,
    named_any: &BTreeSet<i64>,
) -> HalfRecord {
    let check_times = m
        .property(prop::TRANSACTION_CHECK_TIMES)
        .and_then(|s| parse_int(&s));
    let prepared_queue_offset = m
        .property(prop::TRAN_PREPARED_QUEUE_OFFSET)
        .and_then(|s| parse_long(&s));
    let immunity = m.property(CHECK_IMMUNITY_TIME_IN_SECONDS).map(|s| {
        parse_long(&s)
            .map(|v| v.saturating_mul(1000))
            .unwrap_or(TRANSACTION_TIMEOUT_MS)
    });
    let age = now.saturating_sub(m.born_timestamp);
    let state = if named_after.contains(&queue_offset) {
        HalfState::Decided
    } else if prepared_queue_offset.is_some_and(|p| named_any.contains(&p)) {
        HalfState::DecidedByOriginal
    } else if check_times.is_some_and(|c| c >= TRANSACTION_CHECK_MAX) || age > FILE_RESERVED_MS {
        HalfState::ToDiscard
    } else if match immunity {
        Some(im) => age < im,
        None => (0..TRANSACTION_TIMEOUT_MS).contains(&age),
    } {
        HalfState::NotYetDue
    } else {
        HalfState::PendingCheck
    };
    HalfRecord {
        queue_id,
        queue_offset,
        commitlog_offset: m.position as i64,
        store_timestamp: m.store_timestamp,
        born_timestamp: m.born_timestamp,
        uniq_key: m.uniq_key().map(|s| s.into_owned()),
        producer_group: m.property(prop::PGROUP).map(|s| s.into_owned()),
        real_topic: m.property(prop::REAL_TOPIC).map(|s| s.into_owned()),
        real_queue_id: m.property(prop::REAL_QID).and_then(|s| parse_int(&s)),
        check_times,
        prepared_queue_offset,
        state,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_bodies_of_both_versions() {
        assert_eq!(op_body_offsets(b"17"), [17]);
        assert_eq!(op_body_offsets(b"17,18,21,"), [17, 18, 21]);
        assert_eq!(op_body_offsets(b"0,1,2,"), [0, 1, 2]);
        assert!(op_body_offsets(b"x").is_empty());
    }
}
