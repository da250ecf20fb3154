//! Records whose header contradicts the store: the judgement `verify` reports and `repair`
//! mends, made once from what the commitlog walk and the consume queue pass saw.
//!
//! The broker's recovery checks a record's lengths and body CRC, not its TOPIC, QUEUEID,
//! QUEUEOFFSET or PHYSICALOFFSET (FORMAT.md 2.6): a bit flipped there leaves a record that
//! parses, and that the broker dispatches into a queue of its own making. The store itself
//! proves what such a field should say:
//! - PHYSICALOFFSET is the record's position.
//! - A consume queue unit was written from the record's header when the broker dispatched it:
//!   when the unit at `(topic, queue, q)` points at the record with its size and tags code but
//!   the record now names another topic, queue or queue offset, and the record does not fit the
//!   sequence of the queue it now names, the unit holds the old value.
//! - Queue offsets of a queue increase by one in commitlog order: a record whose neighbours in
//!   its queue are `q - 1` and `q + 1` has queue offset `q`; a queue missing exactly offset `q`
//!   between two records gets the one record between them that differs from `(topic, queue, q)`
//!   in one field.
//!
//! A field the broker's rules forbid (a topic outside its characters, a negative queue id, a
//! queue id outside the topic's queues) is damage even when nothing proves the old value; such
//! a record has no fix, and `repair` cuts the commitlog there (as at a bad record), salvaging
//! what follows.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::format::commitlog::MessageRef;
use crate::format::consumequeue::MAX_QUEUE_OFFSET;
use crate::format::layout::NameError;

/// A header field the broker does not check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Field {
    Topic,
    QueueId,
    QueueOffset,
    PhysicalOffset,
    /// The transaction type bits of SYSFLAG.
    SysFlag,
}

impl Field {
    pub fn name(self) -> &'static str {
        match self {
            Field::Topic => "TOPIC",
            Field::QueueId => "QUEUEID",
            Field::QueueOffset => "QUEUEOFFSET",
            Field::PhysicalOffset => "PHYSICALOFFSET",
            Field::SysFlag => "SYSFLAG",
        }
    }
}

/// Where a record says it belongs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct QueueSlot {
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
}

impl QueueSlot {
    pub fn of(m: &MessageRef<'_>) -> Self {
        QueueSlot {
            topic: m.topic.to_string(),
            queue_id: m.queue_id,
            queue_offset: m.queue_offset,
        }
    }

    /// The one field in which `other` differs from `self`, if exactly one does.
    fn only_difference(&self, other: &QueueSlot) -> Option<Field> {
        let diffs = [
            (self.topic != other.topic, Field::Topic),
            (self.queue_id != other.queue_id, Field::QueueId),
            (self.queue_offset != other.queue_offset, Field::QueueOffset),
        ];
        let mut it = diffs.iter().filter(|(d, _)| *d).map(|(_, f)| *f);
        match (it.next(), it.next()) {
            (Some(f), None) => Some(f),
            _ => None,
        }
    }

    fn value(&self, f: Field) -> String {
        match f {
            Field::Topic => self.topic.clone(),
            Field::QueueId => self.queue_id.to_string(),
            Field::QueueOffset => self.queue_offset.to_string(),
            Field::PhysicalOffset | Field::SysFlag => String::new(),
        }
    }
}

/// Why the walk set a record aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// PHYSICALOFFSET is not the record's position.
    PhysicalOffset { found: i64 },
    /// The topic cannot name a queue folder.
    Topic(NameError),
    /// The queue id is negative.
    NegativeQueueId,
    /// A record that gets a unit has a queue offset no unit can have: negative, or above
    /// `MAX_QUEUE_OFFSET`.
    QueueOffsetOutOfRange,
    /// The queue id is not below the topic's queue count in topics.json, and the queue has no
    /// consume queue folder.
    QueueIdOutOfRange { queues: i32 },
}

/// A record the walk set aside by a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspect {
    /// Commitlog offset (the record's position).
    pub offset: u64,
    pub slot: QueueSlot,
    pub rule: Rule,
}

/// A break in the queue offsets of a queue, in commitlog order: the record at `offset` has
/// `found` where its queue's previous record (at `prev_offset`) made `expected` next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub topic: String,
    pub queue_id: i32,
    pub expected: i64,
    pub found: i64,
    pub offset: u64,
    pub prev_offset: u64,
}

/// Where a queue's records are in the commitlog: its first and last record and the queue
/// offset after the last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEnds {
    pub topic: String,
    pub queue_id: i32,
    pub first_q: i64,
    pub first_offset: u64,
    pub next_q: i64,
    pub last_offset: u64,
}

/// A consume queue unit at `unit` that points at the record at `offset` with the record's size
/// and tags code, while the record names `found` (one field apart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub offset: u64,
    pub unit: QueueSlot,
    pub found: QueueSlot,
    /// When the record names the unit's very slot but its transaction type is not one that
    /// gets a unit (PREPARED, ROLLBACK): its SYSFLAG, and the SYSFLAG with the type it must have
    /// had (COMMIT for a transactional message, else NOT).
    pub sys_flag: Option<(i32, i32)>,
    /// The unit's file and position, for the message.
    pub unit_file: String,
    pub unit_pos: u64,
}

/// The new value of a field and what proves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Proven {
    pub value: String,
    pub evidence: String,
}

/// One damaged header field of one record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DamagedHeader {
    /// Commitlog offset of the record.
    pub offset: u64,
    pub field: Field,
    pub found: String,
    /// What makes it wrong.
    pub why: String,
    /// The value the store proves, when it does.
    pub fix: Option<Proven>,
    /// The queue the record names as it is (its run counted it there).
    #[serde(skip)]
    pub named: QueueSlot,
}

impl DamagedHeader {
    /// "record at commitlog offset N: FIELD is VALUE", the start of every message about it.
    pub fn title(&self) -> String {
        format!(
            "record at commitlog offset {}: {} is {}",
            self.offset,
            self.field.name(),
            self.found
        )
    }
}

/// The judgement, with what it explains: breaks in queue sequences and units that point at a
/// damaged record are consequences, not faults of their own.
#[derive(Debug, Clone, Default)]
pub struct Judgement {
    /// Sorted by offset, then field.
    pub damaged: Vec<DamagedHeader>,
    /// Indices into the gaps given to [`judge`].
    pub explained_gaps: Vec<usize>,
    /// Indices into the claims given to [`judge`] that were taken as proof.
    pub accepted_claims: Vec<usize>,
}

impl Judgement {
    /// The damaged fields of the record at `offset`.
    pub fn at(&self, offset: u64) -> impl Iterator<Item = &DamagedHeader> {
        let i = self.damaged.partition_point(|d| d.offset < offset);
        self.damaged[i..]
            .iter()
            .take_while(move |d| d.offset == offset)
    }

    pub fn is_damaged(&self, offset: u64) -> bool {
        self.at(offset).next().is_some()
    }
}

/// Which queue a key of the gap index is: (topic, queue id).
type QueueKey = (String, i32);

/// Judge the suspects, claims and gaps of one verify run. `lone` are records that are the only
/// record of their queue in the commitlog, where that queue has no consume queue folder.
pub fn judge(
    suspects: &[Suspect],
    claims: &[Claim],
    gaps: &[Gap],
    lone: &[(u64, QueueSlot)],
    ends: &[QueueEnds],
) -> Judgement {
    let mut out = Judgement::default();
    let mut explained = vec![false; gaps.len()];
    // Gaps by queue and by the record they are at / follow.
    let mut at: HashMap<(QueueKey, u64), usize> = HashMap::new();
    let mut after: HashMap<(QueueKey, u64), usize> = HashMap::new();
    for (i, g) in gaps.iter().enumerate() {
        let k = (g.topic.clone(), g.queue_id);
        at.entry((k.clone(), g.offset)).or_insert(i);
        after.entry((k, g.prev_offset)).or_insert(i);
    }
    let lone_at: HashMap<u64, &QueueSlot> = lone.iter().map(|(o, s)| (*o, s)).collect();
    let suspect_at: BTreeMap<u64, &Suspect> = suspects
        .iter()
        .filter(|s| !matches!(s.rule, Rule::PhysicalOffset { .. }))
        .map(|s| (s.offset, s))
        .collect();
    // A record out of the sequence of the queue it names: a rule broke, it is alone there, its
    // queue's offsets break at it and right after it, or its queue offset is one the queue
    // already had (or gets again right after it).
    let outlier = |offset: u64, slot: &QueueSlot| {
        let k = (slot.topic.clone(), slot.queue_id);
        at.contains_key(&(k.clone(), offset)) && after.contains_key(&(k, offset))
    };
    let out_of_sequence = |offset: u64, slot: &QueueSlot| {
        let k = (slot.topic.clone(), slot.queue_id);
        let here = at.get(&(k.clone(), offset)).map(|&i| &gaps[i]);
        let next = after.get(&(k, offset)).map(|&i| &gaps[i]);
        suspect_at.contains_key(&offset)
            || lone_at.contains_key(&offset)
            || outlier(offset, slot)
            || here.is_some_and(|g| g.found < g.expected)
            || next.is_some_and(|g| g.found < g.expected && g.found == slot.queue_offset)
    };
    // The queue of `slot` has no record with its queue offset around commitlog offset
    // `offset`: a break that skips it with records on both sides, or it lies past the queue's
    // last record or before its first, or the queue has no record at all.
    let ends_of: HashMap<QueueKey, &QueueEnds> = ends
        .iter()
        .map(|e| ((e.topic.clone(), e.queue_id), e))
        .collect();
    let lacks = |offset: u64, slot: &QueueSlot| {
        let q = slot.queue_offset;
        let in_gap = gaps.iter().any(|g| {
            g.topic == slot.topic
                && g.queue_id == slot.queue_id
                && g.expected <= q
                && q < g.found
                && g.prev_offset < offset
                && offset < g.offset
        });
        in_gap
            || match ends_of.get(&(slot.topic.clone(), slot.queue_id)) {
                None => true,
                Some(e) => {
                    (e.next_q == q && e.last_offset < offset)
                        || (q.checked_add(1) == Some(e.first_q) && offset < e.first_offset)
                }
            }
    };
    // The gaps a fixed record explains: in the queue it names, the break at it and after it;
    // in the queue it belongs to, the break where its offset was missing.
    let mut explain = |named: &QueueSlot, offset: u64, right: &QueueSlot| {
        let k = (named.topic.clone(), named.queue_id);
        for m in [&at, &after] {
            if let Some(&i) = m.get(&(k.clone(), offset)) {
                explained[i] = true;
            }
        }
        for (i, g) in gaps.iter().enumerate() {
            if g.topic == right.topic
                && g.queue_id == right.queue_id
                && g.expected <= right.queue_offset
                && right.queue_offset < g.found
                && g.prev_offset < offset
                && offset < g.offset
            {
                explained[i] = true;
            }
        }
    };
    let mut fixed: BTreeMap<(u64, Field), DamagedHeader> = BTreeMap::new();

    // 1. Units that point at the record.
    for (ci, c) in claims.iter().enumerate() {
        if let Some((found, right)) = c.sys_flag {
            // The record left its queue's sequence: the queue lacks its offset around it.
            if !lacks(c.offset, &c.unit) || fixed.keys().any(|(o, _)| *o == c.offset) {
                continue;
            }
            out.accepted_claims.push(ci);
            explain(&c.unit, c.offset, &c.unit);
            fixed.insert(
                (c.offset, Field::SysFlag),
                DamagedHeader {
                    offset: c.offset,
                    field: Field::SysFlag,
                    found: format!("{found:#x}"),
                    why: format!(
                        "its transaction type gets no consume queue unit, yet the unit {}/{} at \
                         queue offset {} ({} @ {}) points at it and the queue lacks that offset \
                         here",
                        c.unit.topic, c.unit.queue_id, c.unit.queue_offset, c.unit_file, c.unit_pos
                    ),
                    fix: Some(Proven {
                        value: format!("{right:#x}"),
                        evidence: "the unit was written when the record was dispatched with a \
                                   type that gets one (COMMIT for a transactional message, else \
                                   NOT)"
                            .to_string(),
                    }),
                    named: c.unit.clone(),
                },
            );
            continue;
        }
        let Some(field) = c.found.only_difference(&c.unit) else {
            continue;
        };
        // A queue offset of the record's own queue: only an outlier between its neighbours (a
        // record numbered again after a restart, which the broker's writer also puts at its
        // write position, fits the sequence it starts). Another topic or queue: the record does
        // not fit the queue it names, and the unit's queue lacks the record's place.
        let proven = match field {
            Field::QueueOffset => outlier(c.offset, &c.found),
            _ => out_of_sequence(c.offset, &c.found) && lacks(c.offset, &c.unit),
        };
        if fixed.keys().any(|(o, _)| *o == c.offset) || !proven {
            continue;
        }
        out.accepted_claims.push(ci);
        explain(&c.found, c.offset, &c.unit);
        fixed.insert(
            (c.offset, field),
            DamagedHeader {
                offset: c.offset,
                field,
                found: c.found.value(field),
                why: format!(
                    "the consume queue unit {}/{} at queue offset {} ({} @ {}) points at this \
                     record, which names {}",
                    c.unit.topic,
                    c.unit.queue_id,
                    c.unit.queue_offset,
                    c.unit_file,
                    c.unit_pos,
                    describe(&c.found)
                ),
                fix: Some(Proven {
                    value: c.unit.value(field),
                    evidence: format!(
                        "the unit was written from this record's header when the broker \
                         dispatched it; the record does not fit the sequence of {}/{}",
                        c.found.topic, c.found.queue_id
                    ),
                }),
                named: c.found.clone(),
            },
        );
    }

    // 2. A record between q - 1 and q + 1 of its own queue has queue offset q.
    for g1 in gaps {
        let k = (g1.topic.clone(), g1.queue_id);
        let Some(&j) = after.get(&(k, g1.offset)) else {
            continue;
        };
        let g2 = &gaps[j];
        if g1.expected.checked_add(1) != Some(g2.found) || g1.found == g1.expected {
            continue;
        }
        if fixed.keys().any(|(o, _)| *o == g1.offset) {
            continue;
        }
        let named = QueueSlot {
            topic: g1.topic.clone(),
            queue_id: g1.queue_id,
            queue_offset: g1.found,
        };
        let right = QueueSlot {
            queue_offset: g1.expected,
            ..named.clone()
        };
        explain(&named, g1.offset, &right);
        fixed.insert(
            (g1.offset, Field::QueueOffset),
            DamagedHeader {
                offset: g1.offset,
                field: Field::QueueOffset,
                found: g1.found.to_string(),
                why: format!(
                    "queue {}/{} goes {} -> {} -> {} here: the records before and after this \
                     one in the queue are {} and {}",
                    g1.topic,
                    g1.queue_id,
                    g1.expected.saturating_sub(1),
                    g1.found,
                    g2.found,
                    g1.expected.saturating_sub(1),
                    g2.found
                ),
                fix: Some(Proven {
                    value: g1.expected.to_string(),
                    evidence: format!(
                        "queue offsets of {}/{} increase by one in commitlog order",
                        g1.topic, g1.queue_id
                    ),
                }),
                named,
            },
        );
    }

    // 3. A queue missing exactly one offset gets the one stray record between its neighbours.
    let strays: BTreeMap<u64, &QueueSlot> = suspects
        .iter()
        .filter(|s| !matches!(s.rule, Rule::PhysicalOffset { .. }))
        .map(|s| (s.offset, &s.slot))
        .chain(lone.iter().map(|(o, s)| (*o, s)))
        .collect();
    for g in gaps {
        if g.expected.checked_add(1) != Some(g.found) {
            continue;
        }
        let right = QueueSlot {
            topic: g.topic.clone(),
            queue_id: g.queue_id,
            queue_offset: g.expected,
        };
        let between: Vec<(u64, Field, &QueueSlot)> = strays
            .range(g.prev_offset.saturating_add(1)..g.offset)
            .filter(|(o, _)| !fixed.keys().any(|(f, _)| f == *o))
            .filter_map(|(o, s)| s.only_difference(&right).map(|f| (*o, f, *s)))
            .collect();
        let [(offset, field, named)] = between[..] else {
            continue;
        };
        explain(named, offset, &right);
        fixed.insert(
            (offset, field),
            DamagedHeader {
                offset,
                field,
                found: named.value(field),
                why: format!(
                    "queue {}/{} lacks queue offset {} between commitlog offsets {} and {}, \
                     and this record, the only one between them that names no queue of its own, \
                     names {}",
                    g.topic,
                    g.queue_id,
                    g.expected,
                    g.prev_offset,
                    g.offset,
                    describe(named)
                ),
                fix: Some(Proven {
                    value: right.value(field),
                    evidence: format!(
                        "queue offsets of {}/{} increase by one in commitlog order",
                        g.topic, g.queue_id
                    ),
                }),
                named: named.clone(),
            },
        );
    }

    // 4. The rules: PHYSICALOFFSET is always proven; the others are damage with or without a fix.
    for s in suspects {
        let (field, found, why, fix) = match &s.rule {
            Rule::PhysicalOffset { found } => (
                Field::PhysicalOffset,
                found.to_string(),
                format!("the record is at {}", s.offset),
                Some(Proven {
                    value: s.offset.to_string(),
                    evidence: "a record's PHYSICALOFFSET is its position in the commitlog"
                        .to_string(),
                }),
            ),
            Rule::Topic(e) => (Field::Topic, s.slot.topic.clone(), e.to_string(), None),
            Rule::NegativeQueueId => (
                Field::QueueId,
                s.slot.queue_id.to_string(),
                "a queue id is never negative".to_string(),
                None,
            ),
            Rule::QueueOffsetOutOfRange => (
                Field::QueueOffset,
                s.slot.queue_offset.to_string(),
                if s.slot.queue_offset < 0 {
                    "a queue offset is never negative".to_string()
                } else {
                    format!(
                        "a queue offset is at most {MAX_QUEUE_OFFSET} (its unit's position, 20 \
                         bytes a unit, is a Java long)"
                    )
                },
                None,
            ),
            Rule::QueueIdOutOfRange { queues } => (
                Field::QueueId,
                s.slot.queue_id.to_string(),
                format!(
                    "topics.json gives {} {queues} queues and no consume queue folder exists for \
                     queue {}",
                    s.slot.topic, s.slot.queue_id
                ),
                None,
            ),
        };
        let already = if field == Field::PhysicalOffset {
            fixed.contains_key(&(s.offset, field))
        } else {
            // A proven fix of another field of this record (not PHYSICALOFFSET, which the
            // position proves alone) explains the rule it broke.
            fixed
                .keys()
                .any(|(o, f)| *o == s.offset && *f != Field::PhysicalOffset)
        };
        if already {
            continue;
        }
        fixed.insert(
            (s.offset, field),
            DamagedHeader {
                offset: s.offset,
                field,
                found,
                why,
                fix,
                named: s.slot.clone(),
            },
        );
    }
    out.damaged = fixed.into_values().collect();
    out.explained_gaps = explained
        .iter()
        .enumerate()
        .filter(|(_, e)| **e)
        .map(|(i, _)| i)
        .collect();
    out
}

fn describe(s: &QueueSlot) -> String {
    format!(
        "topic {:?} queue {} queue offset {}",
        s.topic, s.queue_id, s.queue_offset
    )
}

/// Where a field's bytes are in a record, and its new bytes for `value`. `None` when the value
/// does not fit the field (a topic of another length would change the record's size).
pub fn field_patch(m: &MessageRef<'_>, field: Field, value: &str) -> Option<(usize, Vec<u8>)> {
    match field {
        Field::QueueId => Some((12, value.parse::<i32>().ok()?.to_be_bytes().to_vec())),
        Field::QueueOffset => Some((20, value.parse::<i64>().ok()?.to_be_bytes().to_vec())),
        Field::PhysicalOffset => Some((28, value.parse::<i64>().ok()?.to_be_bytes().to_vec())),
        Field::SysFlag => {
            let v = i32::from_str_radix(value.trim_start_matches("0x"), 16).ok()?;
            Some((36, v.to_be_bytes().to_vec()))
        }
        Field::Topic => {
            // The topic's own length field: the text of a topic that is not UTF-8 is longer.
            let len_at = m.body_len_pos + 4 + m.body.len();
            let len = match m.version.topic_len_size() {
                1 => usize::from(*m.raw.get(len_at)?),
                _ => usize::try_from(crate::format::bytes::i16_at(m.raw, len_at)?).ok()?,
            };
            let at = len_at + m.version.topic_len_size();
            m.raw.get(at..at + len)?;
            (value.len() == len).then(|| (at, value.as_bytes().to_vec()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(t: &str, q: i32, o: i64) -> QueueSlot {
        QueueSlot {
            topic: t.into(),
            queue_id: q,
            queue_offset: o,
        }
    }

    fn gap(t: &str, q: i32, expected: i64, found: i64, offset: u64, prev: u64) -> Gap {
        Gap {
            topic: t.into(),
            queue_id: q,
            expected,
            found,
            offset,
            prev_offset: prev,
        }
    }

    #[test]
    fn a_unit_proves_a_flipped_queue_id_when_the_record_strays() {
        // Queue T/3 lacks offset 7 (records at 100 and 300); the record at 200 says T/1073741827.
        let claims = [Claim {
            offset: 200,
            unit: slot("T", 3, 7),
            found: slot("T", 1_073_741_827, 7),
            unit_file: "cq".into(),
            unit_pos: 140,
            sys_flag: None,
        }];
        let gaps = [gap("T", 3, 7, 8, 300, 100)];
        let lone = [(200, slot("T", 1_073_741_827, 7))];
        let j = judge(&[], &claims, &gaps, &lone, &[]);
        assert_eq!(j.damaged.len(), 1);
        let d = &j.damaged[0];
        assert_eq!((d.offset, d.field), (200, Field::QueueId));
        assert_eq!(d.fix.as_ref().unwrap().value, "3");
        assert_eq!(j.explained_gaps, vec![0]);
        assert_eq!(j.accepted_claims, vec![0]);
        // A unit pointing at a record that fits its own queue's sequence proves nothing.
        let j = judge(&[], &claims, &[], &[], &[]);
        assert!(j.damaged.is_empty());
        // Nor one whose own queue has the record's place filled (the unit is what is wrong).
        let ends = [QueueEnds {
            topic: "T".into(),
            queue_id: 3,
            first_q: 0,
            first_offset: 10,
            next_q: 9,
            last_offset: 900,
        }];
        let j = judge(&[], &claims, &[], &lone, &ends);
        assert!(j.damaged.is_empty());
        // A record numbered again after a restart (0, 0, 1 in one queue) is no damage, though
        // the broker's writer puts its unit at its write position (1).
        let again = [Claim {
            offset: 200,
            unit: slot("T", 0, 1),
            found: slot("T", 0, 0),
            unit_file: "cq".into(),
            unit_pos: 20,
            sys_flag: None,
        }];
        let gaps = [gap("T", 0, 1, 0, 200, 100)];
        assert!(judge(&[], &again, &gaps, &[], &[]).damaged.is_empty());
    }

    #[test]
    fn neighbours_prove_a_queue_offset_and_a_missing_offset_finds_its_record() {
        // T/0: 4 at 100, 9999 at 200, 6 at 300.
        let gaps = [
            gap("T", 0, 5, 9999, 200, 100),
            gap("T", 0, 10000, 6, 300, 200),
        ];
        let j = judge(&[], &[], &gaps, &[], &[]);
        assert_eq!(j.damaged.len(), 1);
        assert_eq!(j.damaged[0].field, Field::QueueOffset);
        assert_eq!(j.damaged[0].fix.as_ref().unwrap().value, "5");
        assert_eq!(j.explained_gaps, vec![0, 1]);
        // A real jump (the next record continues from it) is no damage.
        let gaps = [gap("T", 0, 5, 9999, 200, 100), gap("T", 1, 3, 5, 300, 250)];
        assert!(judge(&[], &[], &gaps, &[], &[]).damaged.is_empty());
        // VopicB/3 at 200 is alone; TopicB/3 lacks 7 between 100 and 300.
        let gaps = [gap("TopicB", 3, 7, 8, 300, 100)];
        let lone = [(200, slot("VopicB", 3, 7))];
        let j = judge(&[], &[], &gaps, &lone, &[]);
        assert_eq!(j.damaged.len(), 1);
        assert_eq!(j.damaged[0].field, Field::Topic);
        assert_eq!(j.damaged[0].fix.as_ref().unwrap().value, "TopicB");
        // Two candidates: nothing is proven.
        let lone = [(150, slot("VopicB", 3, 7)), (200, slot("TopicB", 2, 7))];
        assert!(judge(&[], &[], &gaps, &lone, &[]).damaged.is_empty());
    }

    #[test]
    fn rules_without_proof_are_damage_without_a_fix() {
        let suspects = [
            Suspect {
                offset: 10,
                slot: slot("../x", 0, 0),
                rule: Rule::Topic(NameError::TopicChar { at: 0, found: '.' }),
            },
            Suspect {
                offset: 20,
                slot: slot("T", 0, 0),
                rule: Rule::PhysicalOffset { found: 99 },
            },
        ];
        let j = judge(&suspects, &[], &[], &[], &[]);
        assert_eq!(j.damaged.len(), 2);
        assert!(j.damaged[0].fix.is_none());
        assert_eq!(j.damaged[1].fix.as_ref().unwrap().value, "20");
        assert!(j.is_damaged(10) && j.is_damaged(20) && !j.is_damaged(15));
    }
}
