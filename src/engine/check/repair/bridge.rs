//! Bridging damage in place: a damaged range between two intact records (a body that fails its
//! CRC, a zeroed page, garbage) is replaced by records the broker's recovery accepts, so that
//! the chain of records stays whole and every later record keeps its commitlog and queue offset.
//!
//! A destroyed record whose place the store still proves (a consume queue unit pointing at it,
//! or its own intact header) becomes a tombstone: a message of the same size at the same offset,
//! in its topic, queue and queue offset, marked by the [`TOMBSTONE`] property, whose body says
//! where the original bytes are kept. Consumers receive it in place of the lost message (a
//! poison message takes the normal retry and DLQ path). The rest of the range is filled by
//! fillers: ROLLBACK records (the broker's dispatch gives them no consume queue unit and no
//! index key) in the [`FILLER_TOPIC`], marked by the [`FILLER`] property.
//!
//! A range that cannot be bridged (data ends inside it, a gap too small for a filler, too many
//! bytes to hold) is left to the cut.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::check::headers::Gap;
use crate::engine::check::rebuild::Insert;
use crate::engine::check::recovery::{resync, FileWalk, StopReason, WalkProblem};
use crate::engine::store::Store;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::write::{encode_properties, record_len};
use crate::format::commitlog::{prop, sysflag, Host, Message, MessageVersion};
use crate::format::error::Result;

/// The property that marks a tombstone; its value is the commitlog offset of the record.
pub const TOMBSTONE: &str = "RMQSTORE_TOMBSTONE";
/// The property that marks a filler; its value is the commitlog offset of the damaged range.
pub const FILLER: &str = "RMQSTORE_FILLER";
/// The topic of fillers (never dispatched: they are ROLLBACK records).
pub const FILLER_TOPIC: &str = "RMQSTORE_FILLER";

/// The largest filler written: longer stretches take several.
const FILLER_MAX: u64 = 1 << 20;
/// At most this many bytes are bridged in all (the new records are held in memory); damage
/// beyond that is cut.
const MAX_BRIDGED_BYTES: u64 = 64 << 20;

/// A record that left service: destroyed by damage, kept as a tombstone (when its place is
/// proven) or under a filler.
#[derive(Debug, Clone, Serialize)]
pub struct LostRecord {
    pub commitlog_offset: u64,
    pub size: u64,
    /// `None` when nothing proves what the bytes held (they lie under fillers).
    pub topic: Option<String>,
    pub queue_id: Option<i32>,
    pub queue_offset: Option<i64>,
    pub msg_id: Option<String>,
    pub uniq_key: Option<String>,
    pub keys: Vec<String>,
    /// What proves the place, or why there is none.
    pub proof: String,
    /// `tombstone` or `filler` (a bridge), or `cut` (past the kept commitlog, see
    /// [`super::dropped`]).
    pub replaced_by: &'static str,
}

/// One new record of a bridge.
#[derive(Debug, Clone)]
enum Piece {
    Tombstone {
        at: u64,
        size: u64,
        topic: String,
        queue_id: i32,
        queue_offset: i64,
        store_host: Host,
        born_host: Host,
        store_timestamp: i64,
        uniq_key: Option<String>,
        keys: Option<String>,
        /// The destroyed record's own properties and SYSFLAG, when its header is intact.
        original: Option<(Vec<u8>, i32)>,
    },
    Filler {
        at: u64,
        size: u64,
    },
}

/// A damaged range replaced in place.
#[derive(Debug, Clone, Serialize)]
pub struct Bridge {
    /// The commitlog file (relative to the store root), the range's position in it.
    pub file: String,
    pub position: u64,
    pub offset: u64,
    pub length: u64,
    pub why: String,
    pub tombstones: u64,
    pub fillers: u64,
    /// The records the range held, as far as the store proves them.
    pub lost: Vec<LostRecord>,
    #[serde(skip)]
    pub(super) segment: usize,
    #[serde(skip)]
    pieces: Vec<Piece>,
    #[serde(skip)]
    host: (Host, Host, i64),
}

impl Bridge {
    /// The new records, whole (their bodies say where in the repair folder the original bytes
    /// are kept; the same bytes for every run, whatever the folder's name).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.length as usize);
        let kept = format!("the repair folder's removed/{}", self.file);
        for p in &self.pieces {
            let bytes = match p {
                Piece::Tombstone {
                    at,
                    size,
                    topic,
                    queue_id,
                    queue_offset,
                    store_host,
                    born_host,
                    store_timestamp,
                    uniq_key,
                    keys,
                    original,
                } => {
                    let text = format!(
                        "rmqstore repair: the message stored here ({size} bytes at commitlog \
                         offset {at}) was destroyed; its bytes are kept in {kept} from byte {}",
                        at - (self.offset - self.position)
                    );
                    tombstone_message(
                        *at,
                        *size,
                        topic,
                        *queue_id,
                        *queue_offset,
                        (*store_host, *born_host, *store_timestamp),
                        (uniq_key.as_deref(), keys.as_deref()),
                        original.as_ref(),
                        &text,
                    )
                }
                Piece::Filler { at, size } => {
                    let text = format!(
                        "rmqstore repair: filler over damaged bytes at commitlog offsets {}..{}; \
                         they are kept in {kept} from byte {}",
                        self.offset,
                        self.offset + self.length,
                        self.position
                    );
                    filler_message(*at, *size, self.offset, self.host, &text)
                }
            };
            out.extend_from_slice(&bytes.unwrap_or_default());
        }
        out
    }

    /// The range as an insert for the rebuild of queues and index.
    pub fn insert(&self) -> Insert {
        Insert {
            offset: self.offset,
            bytes: self.encode(),
        }
    }
}

/// A message of exactly `size` bytes: `text` as the body, cut or padded with spaces to fit;
/// `None` when even an empty body does not fit.
fn fit(mut m: Message, size: u64, text: &str) -> Option<Vec<u8>> {
    m.body.clear();
    let base = m.encoded_len() as u64;
    let room = size.checked_sub(base)? as usize;
    let mut body = text.as_bytes().to_vec();
    body.resize(room, b' ');
    m.body = body;
    m.encode().ok()
}

fn base_message(at: u64, topic: &str, (store_host, born_host, ts): (Host, Host, i64)) -> Message {
    Message {
        topic: topic.to_string(),
        queue_id: 0,
        flag: 0,
        queue_offset: 0,
        physical_offset: at as i64,
        sys_flag: 0,
        born_timestamp: ts,
        born_host,
        store_timestamp: ts,
        store_host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Vec::new(),
        properties: Vec::new(),
        version: MessageVersion::for_topic(topic),
    }
}

#[allow(clippy::too_many_arguments)]
fn tombstone_message(
    at: u64,
    size: u64,
    topic: &str,
    queue_id: i32,
    queue_offset: i64,
    host: (Host, Host, i64),
    (uniq_key, keys): (Option<&str>, Option<&str>),
    original: Option<&(Vec<u8>, i32)>,
    text: &str,
) -> Option<Vec<u8>> {
    let mut m = base_message(at, topic, host);
    m.queue_id = queue_id;
    m.queue_offset = queue_offset;
    let mark = at.to_string();
    if let Some((props, sys_flag)) = original {
        // The record's own properties (its tags, keys, delay or timer, real topic) and
        // transaction type, the marker added: it is dispatched where the original was.
        m.sys_flag = sys_flag & sysflag::TRANSACTION_MASK;
        let trailing = props.is_empty() || props.last() == Some(&2);
        let mut p = props.clone();
        if !trailing {
            p.push(2);
        }
        p.extend_from_slice(&encode_properties(&[(TOMBSTONE, &mark)], trailing));
        m.properties = p;
        return fit(m, size, text);
    }
    let mut props: Vec<(&str, &str)> = vec![(TOMBSTONE, &mark)];
    if let Some(u) = uniq_key {
        props.push((prop::UNIQ_KEY, u));
    }
    if let Some(k) = keys {
        props.push((prop::KEYS, k));
    }
    // The fullest form that fits: with the original's keys, without, with the marker alone.
    for n in (1..=props.len()).rev() {
        m.properties = encode_properties(&props[..n], true);
        if let Some(b) = fit(m.clone(), size, text) {
            return Some(b);
        }
    }
    m.properties = encode_properties(&[(TOMBSTONE, "")], true);
    fit(m, size, text)
}

fn filler_message(
    at: u64,
    size: u64,
    range: u64,
    host: (Host, Host, i64),
    text: &str,
) -> Option<Vec<u8>> {
    let mut m = base_message(at, FILLER_TOPIC, host);
    m.sys_flag = sysflag::TRANSACTION_ROLLBACK;
    m.properties = encode_properties(&[(FILLER, range.to_string())], true);
    fit(m, size, text)
}

/// The smallest filler.
fn filler_min() -> u64 {
    record_len(
        MessageVersion::V1,
        8,
        8,
        0,
        FILLER_TOPIC.len(),
        encode_properties(&[(FILLER, u64::MAX.to_string())], true).len(),
    ) as u64
}

/// The smallest tombstone of a topic (the marker alone, hosts of the given kinds).
fn tombstone_min(topic: &str, host: (Host, Host, i64)) -> u64 {
    let v = MessageVersion::for_topic(topic);
    record_len(
        v,
        host.1.encoded_len(),
        host.0.encoded_len(),
        0,
        topic.len(),
        encode_properties(&[(TOMBSTONE, "")], true).len(),
    ) as u64
}

/// A damaged range of one file, before it is bridged: `[from, to)` (file positions).
#[derive(Debug, Clone)]
pub(super) struct Damage {
    pub segment: usize,
    pub from: u64,
    pub to: u64,
    pub why: String,
}

/// The damaged ranges of the walk of file `i`, in order, up to the first one that cannot be
/// bridged: `(ranges, Some(position))` names where the chain breaks for good.
pub(super) fn damage_of(
    store: &Store,
    i: usize,
    w: &FileWalk,
) -> Result<(Vec<Damage>, Option<u64>)> {
    let seg = &store.commitlog.segments[i];
    let map = seg.map()?;
    let mut out: Vec<Damage> = Vec::new();
    let mut broken = None;
    // Where the walk resynchronised past every damaged spot ends: a range must end before it
    // (or at the blank that ends the file).
    let data_end = w.end_pos;
    let ends_ok = |to: u64| to < data_end || (to == data_end && w.end == StopReason::Blank);
    for p in &w.problems {
        let (from, to, why) = match p {
            WalkProblem::CrcMismatch {
                pos,
                stored,
                computed,
            } => {
                let size = match parse_record(&map, *pos as usize, seg.start, false) {
                    Ok(Record::Message(m)) => m.raw.len() as u64,
                    _ => {
                        broken = Some(*pos);
                        break;
                    }
                };
                (
                    *pos,
                    pos + size,
                    format!("body CRC mismatch (BODYCRC {stored}, the body's CRC is {computed})"),
                )
            }
            WalkProblem::ZeroHole { pos, len } => (
                *pos,
                pos + len,
                "zeros where a record should start, records after them".to_string(),
            ),
            WalkProblem::BadRecord { pos, detail } => match resync(&map, *pos as usize + 1, seg) {
                Some(n) => (
                    *pos,
                    n as u64,
                    format!("a record that does not parse: {detail}"),
                ),
                None => {
                    broken = Some(*pos);
                    break;
                }
            },
            WalkProblem::BadDelay { pos, .. } => {
                broken = Some(*pos);
                break;
            }
            _ => continue,
        };
        if !ends_ok(to) || out.last().is_some_and(|d| d.to > from) {
            broken = Some(from);
            break;
        }
        out.push(Damage {
            segment: i,
            from,
            to,
            why,
        });
    }
    if broken.is_none() && w.problems_not_listed > 0 {
        // Damage past the listed problems: bridged up to the last listed, cut after it.
        broken = Some(out.last().map_or(w.stop_pos, |d| d.to));
    }
    map.release(0, map.len());
    Ok((out, broken))
}

/// Where bridging gave up: the commitlog offset of the range, and why.
pub(super) type Unbridged = (u64, String);

/// What a consume queue unit says of the record it points at.
#[derive(Debug, Clone)]
struct Proof {
    size: u64,
    topic: String,
    queue_id: i32,
    queue_offset: i64,
}

/// Every consume queue unit that points into one of `ranges` (commitlog offsets, sorted, not
/// overlapping): one pass over every queue file.
fn units_in(store: &Store, ranges: &[(u64, u64)]) -> Result<BTreeMap<u64, Proof>> {
    let mut out = BTreeMap::new();
    if ranges.is_empty() {
        return Ok(out);
    }
    for cq in store.queues.values() {
        cq.for_each_unit(|q, u| {
            let (Some(o), Ok(size)) = (u.commitlog_offset(), u64::try_from(u.size)) else {
                return true;
            };
            let k = ranges.partition_point(|r| r.1 <= o);
            if ranges
                .get(k)
                .is_some_and(|r| r.0 <= o && o.saturating_add(size) <= r.1)
            {
                out.entry(o).or_insert(Proof {
                    size,
                    topic: cq.topic.clone(),
                    queue_id: cq.queue_id,
                    queue_offset: q as i64,
                });
            }
            true
        })?;
    }
    Ok(out)
}

/// Bridge each damaged range: tombstones where the store proves a record, fillers for the rest.
/// Returns the bridges, in order, up to the first range that cannot be bridged, and that
/// range's start (commitlog offset) with why.
pub(super) fn bridges(
    store: &Store,
    damage: &[Damage],
) -> Result<(Vec<Bridge>, Option<Unbridged>)> {
    let segs = &store.commitlog.segments;
    let ranges: Vec<(u64, u64)> = damage
        .iter()
        .map(|d| (segs[d.segment].start + d.from, segs[d.segment].start + d.to))
        .collect();
    let units = units_in(store, &ranges)?;
    let mut out = Vec::new();
    let mut total = 0u64;
    for d in damage {
        let seg = &segs[d.segment];
        let (a, b) = (seg.start + d.from, seg.start + d.to);
        total += b - a;
        if total > MAX_BRIDGED_BYTES {
            return Ok((
                out,
                Some((
                    a,
                    "more damaged bytes than a repair bridges in place".into(),
                )),
            ));
        }
        let map = seg.map()?;
        // The record after the range gives the hosts and time of the new records.
        let host = match parse_record(&map, d.to as usize, seg.start, false) {
            Ok(Record::Message(m)) => (m.store_host, m.born_host, m.store_timestamp),
            _ => (Host::v4([0; 4], 0), Host::v4([0; 4], 0), 0),
        };
        // The record at the range's start proves itself when its header is intact (a body that
        // fails its CRC).
        let mut proofs: BTreeMap<u64, (Proof, Option<Owned>)> = units
            .range(a..b)
            .map(|(o, p)| (*o, (p.clone(), None)))
            .collect();
        if let Ok(Record::Message(m)) = parse_record(&map, d.from as usize, seg.start, false) {
            if m.physical_offset == a as i64 && a + m.raw.len() as u64 <= b {
                let own = Owned {
                    store_host: m.store_host,
                    born_host: m.born_host,
                    store_timestamp: m.store_timestamp,
                    msg_id: m.offset_msg_id(),
                    uniq_key: m.uniq_key().map(|u| u.into_owned()),
                    keys: m.property(prop::KEYS).map(|k| k.into_owned()),
                    props: m.properties.0.to_vec(),
                    sys_flag: m.sys_flag,
                };
                proofs.insert(
                    a,
                    (
                        Proof {
                            size: m.raw.len() as u64,
                            topic: m.topic.to_string(),
                            queue_id: m.queue_id,
                            queue_offset: m.queue_offset,
                        },
                        Some(own),
                    ),
                );
            }
        }
        map.release(0, map.len());
        match layout(d, a, b, host, proofs) {
            Ok((pieces, lost)) => out.push(Bridge {
                file: super::rel(store, &seg.path),
                position: d.from,
                offset: a,
                length: b - a,
                why: d.why.clone(),
                tombstones: lost.iter().filter(|l| l.replaced_by == "tombstone").count() as u64,
                fillers: pieces
                    .iter()
                    .filter(|p| matches!(p, Piece::Filler { .. }))
                    .count() as u64,
                lost,
                segment: d.segment,
                pieces,
                host,
            }),
            Err(why) => return Ok((out, Some((a, why)))),
        }
    }
    Ok((out, None))
}

/// What a record's own intact header says beyond its place.
#[derive(Debug, Clone)]
struct Owned {
    store_host: Host,
    born_host: Host,
    store_timestamp: i64,
    msg_id: String,
    uniq_key: Option<String>,
    keys: Option<String>,
    props: Vec<u8>,
    sys_flag: i32,
}

/// The new records of range `a..b`: a tombstone at each proven place that leaves room for
/// fillers around it, fillers for the rest.
fn layout(
    d: &Damage,
    a: u64,
    b: u64,
    host: (Host, Host, i64),
    proofs: BTreeMap<u64, (Proof, Option<Owned>)>,
) -> std::result::Result<(Vec<Piece>, Vec<LostRecord>), String> {
    let min = filler_min();
    let mut pieces = Vec::new();
    let mut lost = Vec::new();
    let mut cur = a;
    let fill = |from: u64, to: u64, pieces: &mut Vec<Piece>, lost: &mut Vec<LostRecord>| {
        if to == from {
            return Ok(());
        }
        if to - from < min {
            return Err(format!(
                "{} damaged bytes at commitlog offset {from} are too few for a filler record \
                 ({min} bytes at least)",
                to - from
            ));
        }
        lost.push(LostRecord {
            commitlog_offset: from,
            size: to - from,
            topic: None,
            queue_id: None,
            queue_offset: None,
            msg_id: None,
            uniq_key: None,
            keys: Vec::new(),
            proof: "nothing proves what these bytes held".into(),
            replaced_by: "filler",
        });
        let mut at = from;
        while at < to {
            let left = to - at;
            let mut n = left.min(FILLER_MAX);
            if left > n && left - n < min {
                n = left - min;
            }
            pieces.push(Piece::Filler { at, size: n });
            at += n;
        }
        Ok(())
    };
    for (o, (p, own)) in proofs {
        let end = o + p.size;
        if o < cur || end > b {
            continue;
        }
        let gap = o - cur;
        let h = own
            .as_ref()
            .map_or(host, |w| (w.store_host, w.born_host, w.store_timestamp));
        if let Some(w) = &own {
            // The record's own header: its tombstone keeps its properties, or the range is cut
            // (under a filler its queue would lose a unit nothing else names).
            let fits = tombstone_message(
                o,
                p.size,
                &p.topic,
                p.queue_id,
                p.queue_offset,
                h,
                (None, None),
                Some(&(w.props.clone(), w.sys_flag)),
                "",
            )
            .is_some();
            if !fits || (gap > 0 && gap < min) {
                return Err(format!(
                    "{}: no room for a tombstone with the record's own properties",
                    d.why
                ));
            }
        } else if (gap > 0 && gap < min)
            || p.size < tombstone_min(&p.topic, h)
            // A schedule record needs its DELAY and REAL_TOPIC, which no unit gives.
            || p.topic == crate::engine::store::dispatch::SCHEDULE_TOPIC
        {
            continue;
        }
        fill(cur, o, &mut pieces, &mut lost)?;
        lost.push(LostRecord {
            commitlog_offset: o,
            size: p.size,
            topic: Some(p.topic.clone()),
            queue_id: Some(p.queue_id),
            queue_offset: Some(p.queue_offset),
            msg_id: own.as_ref().map(|w| w.msg_id.clone()),
            uniq_key: own.as_ref().and_then(|w| w.uniq_key.clone()),
            keys: own
                .as_ref()
                .map(|w| crate::format::commitlog::split_keys(w.keys.as_deref()))
                .unwrap_or_default(),
            proof: if own.is_some() {
                "its own header (the body fails its CRC)".into()
            } else {
                format!(
                    "the unit at queue offset {} of {}/{}",
                    p.queue_offset, p.topic, p.queue_id
                )
            },
            replaced_by: "tombstone",
        });
        pieces.push(Piece::Tombstone {
            at: o,
            size: p.size,
            topic: p.topic,
            queue_id: p.queue_id,
            queue_offset: p.queue_offset,
            store_host: h.0,
            born_host: h.1,
            store_timestamp: h.2,
            uniq_key: own.as_ref().and_then(|w| w.uniq_key.clone()),
            keys: own.as_ref().and_then(|w| w.keys.clone()),
            original: own.map(|w| (w.props, w.sys_flag)),
        });
        cur = end;
    }
    fill(cur, b, &mut pieces, &mut lost).map_err(|e| format!("{}: {e}", d.why))?;
    Ok((pieces, lost))
}

/// Tombstones the queues' own offsets prove: where a queue's offsets jump across a bridged range
/// (its record before the range has queue offset `e - 1`, its record after it `f > e`), the
/// records of queue offsets `e..f` lay in the range, their units lost. Each is given a tombstone
/// carved from the range's filler space, in queue order, so the queue stays whole. A jump whose
/// tombstones do not fit is left (the chain breaks there).
pub(super) fn infer_from_queue_gaps(bridges: &mut [Bridge], gaps: &[Gap]) {
    for g in gaps
        .iter()
        .filter(|g| g.found > g.expected && g.expected >= 0)
    {
        // The queue offsets no tombstone holds yet (a proven one may already fill the jump).
        let held = |q: i64| {
            bridges.iter().flat_map(|b| &b.lost).any(|l| {
                l.topic.as_deref() == Some(g.topic.as_str())
                    && l.queue_id == Some(g.queue_id)
                    && l.queue_offset == Some(q)
            })
        };
        let wanted: Vec<i64> = (g.expected..g.found).filter(|q| !held(*q)).collect();
        if wanted.is_empty() || wanted.len() > 1024 {
            continue;
        }
        let Some(b) = bridges
            .iter_mut()
            .find(|b| b.offset > g.prev_offset && b.offset + b.length <= g.offset)
        else {
            continue;
        };
        let missing = wanted.len() as u64;
        let mut wanted = wanted.into_iter();
        let tmin = tombstone_min(&g.topic, b.host);
        let fmin = filler_min();
        // Room: each tombstone takes tmin bytes of a filler, or the whole filler when what would
        // be left is too small for a filler.
        let room: u64 = b
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Filler { size, .. } => size / tmin,
                Piece::Tombstone { .. } => 0,
            })
            .sum();
        if room < missing {
            continue;
        }
        let mut left = missing;
        let mut pieces = Vec::with_capacity(b.pieces.len() + missing as usize);
        for p in std::mem::take(&mut b.pieces) {
            let Piece::Filler { mut at, mut size } = p else {
                pieces.push(p);
                continue;
            };
            while left > 0 && size >= tmin {
                let Some(next_q) = wanted.next() else { break };
                let take = if size - tmin >= fmin || size - tmin == 0 {
                    tmin
                } else if left == 1 {
                    size
                } else {
                    break;
                };
                pieces.push(Piece::Tombstone {
                    at,
                    size: take,
                    topic: g.topic.clone(),
                    queue_id: g.queue_id,
                    queue_offset: next_q,
                    store_host: b.host.0,
                    born_host: b.host.1,
                    store_timestamp: b.host.2,
                    uniq_key: None,
                    keys: None,
                    original: None,
                });
                b.lost.push(LostRecord {
                    commitlog_offset: at,
                    size: take,
                    topic: Some(g.topic.clone()),
                    queue_id: Some(g.queue_id),
                    queue_offset: Some(next_q),
                    msg_id: None,
                    uniq_key: None,
                    keys: Vec::new(),
                    proof: format!(
                        "the queue's offsets jump from {} to {} across the damaged range (its \
                         exact place and size in the range are not known)",
                        g.expected - 1,
                        g.found
                    ),
                    replaced_by: "tombstone",
                });
                left -= 1;
                at += take;
                size -= take;
            }
            if size > 0 {
                pieces.push(Piece::Filler { at, size });
            }
        }
        b.pieces = pieces;
        b.tombstones = b
            .lost
            .iter()
            .filter(|l| l.replaced_by == "tombstone")
            .count() as u64;
        b.fillers = b
            .pieces
            .iter()
            .filter(|p| matches!(p, Piece::Filler { .. }))
            .count() as u64;
        b.lost.sort_by_key(|l| l.commitlog_offset);
    }
}
