//! The checks of each record of a commitlog piece as a worker walks it: the header rules, the
//! strict checks, the record's consume queue unit, its index entries and its UNIQ_KEY.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::index_stream::{Cursor, IndexStream, KeyBits};
use super::names::NameTable;
use super::props::{
    expected_index_keys, fast_tags_code, index_key_texts, is_reput, key_hash64, topic_prefix_hash,
    FastMap, Props,
};
use super::queue_runs::{QueueRun, QueueRuns, SegQueue};
use super::scan::{Ctx, IndexTally};
use super::{Part, Phase, Sink};
use crate::engine::check::headers::{Gap, QueueSlot, Rule, Suspect};
use crate::engine::check::recovery::RecordPlace;
use crate::engine::store::dispatch::is_system_topic;
use crate::format::commitlog::{sysflag, MessageRef, MessageVersion, TransactionType};
use crate::format::consumequeue::{queue_offset_fits, CqUnit, UNIT_SIZE};
use crate::format::finding::{Code, Finding, Severity};
use crate::format::indexfile::IndexEntry;
use crate::format::java::masked_crc32;
use crate::format::mapped::Mapped;

pub(super) struct SegState<'c, 'a> {
    pub(super) ctx: &'c Ctx<'a>,
    pub(super) path: &'c Path,
    pub(super) seg_start: u64,
    pub(super) sink: Sink,
    pub(super) queues: QueueRuns<'a>,
    pub(super) idx: IndexTally,
    pub(super) cursor: Option<Cursor>,
    pub(super) keys: Vec<i32>,
    /// The hashes of the last record's topic (records of one topic often come in runs).
    pub(super) topics: TopicCache,
    pub(super) dup_batch: Vec<(u64, u64)>,
    /// Records to skip before the next sampled one.
    pub(super) until_sample: u64,
    pub(super) records: u64,
    pub(super) bytes: u64,
    pub(super) data_end: u64,
    pub(super) max_store_ts: i64,
    pub(super) unreported: u64,
    pub(super) open_maps: usize,
    /// Records set aside by a header rule, and breaks in queue offset sequences (both bounded by
    /// [`MAX_HEADER_EVIDENCE`]): what [`headers::judge`] works from.
    pub(super) suspects: Vec<Suspect>,
    pub(super) gaps: Vec<Gap>,
}

/// At most this many suspects and gaps are kept per piece and per run.
pub(super) const MAX_HEADER_EVIDENCE: usize = 4096;

/// What the per-record checks need of a topic.
#[derive(Clone, Copy)]
struct TopicHashes {
    /// Number of the topic in its worker's [`TopicCache`] (key of the worker's queue map).
    id: u32,
    /// Why the topic cannot name a consume queue folder, if it cannot.
    bad_name: Option<crate::format::layout::NameError>,
    /// [`topic_prefix_hash`], where index key hashes start.
    prefix_hash: i32,
    /// [`is_system_topic`].
    system: bool,
}

/// [`TopicHashes`] of every topic a worker met: records of several topics interleave in the
/// commitlog, so each record's topic is looked up once here and then known by its number.
#[derive(Default)]
pub(super) struct TopicCache {
    known: NameTable<TopicHashes>,
}

impl TopicCache {
    #[inline]
    fn of(&mut self, topic: &str) -> TopicHashes {
        self.known
            .get_or_insert_with(topic.as_bytes(), |id| TopicHashes {
                id,
                bad_name: crate::format::layout::check_topic(topic).err(),
                prefix_hash: topic_prefix_hash(topic),
                system: is_system_topic(topic),
            })
    }
}

/// Above this many mapped consume queue files, a worker drops its cached maps (they are dropped
/// with each commitlog file's state anyway).
pub(super) const MAX_CQ_MAPS: usize = 2048;

/// The unit at queue offset `q` of a queue, reading through the worker's cached map of the
/// consume queue file that holds it.
fn sq_unit(
    sq: &mut SegQueue<'_>,
    q: u64,
    opened: &mut usize,
    shared: &Mutex<FastMap<PathBuf, Arc<Mapped>>>,
) -> Option<CqUnit> {
    let pos = q.checked_mul(UNIT_SIZE as u64)?;
    let hit = matches!(&sq.map, Some((start, len, _)) if pos >= *start && pos < start + len);
    if !hit {
        let cq = sq.cq?;
        let i = cq
            .files
            .partition_point(|f| f.start <= pos)
            .checked_sub(1)?;
        let f = cq.files.get(i)?;
        if pos >= f.start.saturating_add(f.len) {
            return None;
        }
        let map = {
            let mut maps = shared.lock().ok()?;
            match maps.get(&f.path) {
                Some(m) => m.clone(),
                None => {
                    if maps.len() >= MAX_CQ_MAPS {
                        maps.clear();
                    }
                    let m = Arc::new(Mapped::open(&f.path).ok()?);
                    maps.insert(f.path.clone(), m.clone());
                    m
                }
            }
        };
        sq.map = Some((f.start, f.len, map));
        *opened += 1;
    }
    let (start, _, map) = sq.map.as_ref()?;
    let at = usize::try_from(pos - start).ok()?;
    // The queue's later records read the units after this one. Not much further on: a queue's
    // next record comes some twenty records later among several queues, and a line loaded long
    // before that has been pushed out of the cache by the records read meanwhile.
    crate::format::mapped::prefetch(map, at + 4 * UNIT_SIZE);
    CqUnit::from_bytes(map.get(at..)?)
}

/// What is wrong with the `__CRC32#` property of a record (5.2+, FORMAT.md 2.5), if anything: it
/// must be the last 20 bytes (`__CRC32#` 0x01, ten digits least significant first, 0x02) and hold
/// the masked CRC-32 of the bytes before them.
pub(super) fn prop_crc_problem(raw: &[u8]) -> Option<String> {
    let split = raw.len().checked_sub(20)?;
    let (head, tail) = raw.split_at(split);
    let ok_shape = tail.starts_with(b"__CRC32#\x01") && tail.last() == Some(&0x02);
    let digits = tail.get(9..19).unwrap_or(&[]);
    let stored = if ok_shape && digits.iter().all(u8::is_ascii_digit) {
        let rev: Vec<u8> = digits.iter().rev().copied().collect();
        parse_digits(&rev)
    } else {
        None
    };
    let computed = masked_crc32(head) as i64;
    match stored {
        None => Some("__CRC32# is present but not as the record's last 20 bytes".to_string()),
        Some(s) if s != computed => {
            Some(format!("__CRC32# says {s}, the record's CRC is {computed}"))
        }
        _ => None,
    }
}

fn parse_digits(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

impl<'c, 'a> SegState<'c, 'a> {
    pub(super) fn flush_dups(&mut self) {
        if self.dup_batch.is_empty() {
            return;
        }
        self.ctx.dups.add(&self.dup_batch);
        self.dup_batch.clear();
    }

    pub(super) fn report_progress(&mut self, force: bool) {
        if self.unreported >= 8 << 20 || (force && self.unreported > 0) {
            let done =
                self.ctx.done.fetch_add(self.unreported, Ordering::Relaxed) + self.unreported;
            self.unreported = 0;
            if let Some(p) = self.ctx.progress {
                p(Phase::Commitlog, done.min(self.ctx.total), self.ctx.total);
            }
        }
    }

    fn finding(&mut self, code: Code, pos: u64, msg: String) -> &mut Self {
        self.sink.push(Finding::new(code, self.path, pos, msg));
        self
    }

    pub(super) fn visit(&mut self, m: &MessageRef<'_>, _place: RecordPlace) {
        let ctx = self.ctx;
        let o = ctx.opts;
        let size = m.raw.len() as u64;
        self.records += 1;
        self.bytes += size;
        self.unreported += size;
        self.data_end = self.data_end.max(m.position.saturating_add(size));
        self.max_store_ts = self.max_store_ts.max(m.store_timestamp);
        let pos = m.position - self.seg_start;
        let in_topic = o.in_topic(&m.topic);
        // Every `sample`-th record (counted down: no division per record).
        let sampled = self.until_sample == 0;
        self.until_sample = if sampled {
            o.sample.max(1) - 1
        } else {
            self.until_sample - 1
        };
        let p = Props::of(m);
        let topic = self.topics.of(&m.topic);
        if in_topic && self.suspects.len() < MAX_HEADER_EVIDENCE {
            // PHYSICALOFFSET apart from the rest: one record can break both.
            let physical =
                (m.physical_offset != m.position as i64).then_some(Rule::PhysicalOffset {
                    found: m.physical_offset,
                });
            let queue = if let Some(e) = topic.bad_name {
                Some(Rule::Topic(e))
            } else if m.queue_id < 0 {
                Some(Rule::NegativeQueueId)
            } else if !queue_offset_fits(m.queue_offset) && m.transaction_type().is_queued() {
                Some(Rule::QueueOffsetOutOfRange)
            } else {
                None
            };
            for rule in physical.into_iter().chain(queue) {
                self.suspects.push(Suspect {
                    offset: m.position,
                    slot: QueueSlot::of(m),
                    rule,
                });
            }
        }

        if o.strict && in_topic && o.wants(Part::Commitlog) {
            self.strict_checks(m, &p, pos);
        }
        if (p.tombstone || p.filler) && in_topic && o.wants(Part::Commitlog) {
            self.repair_record(m, &p, pos);
        }

        let tx = m.transaction_type();
        let inner_batch = m.sys_flag & sysflag::INNER_BATCH != 0;
        if ctx.track_queues && in_topic && tx.is_queued() && !inner_batch {
            let check_unit = sampled && o.wants(Part::ConsumeQueue) && ctx.units_in_scan;
            self.queue_record(m, &p, topic.id, check_unit);
        }

        if ctx.index.is_none()
            && in_topic
            && tx != TransactionType::Rollback
            && (p.uniq.is_some() || p.keys.is_some_and(|k| k.iter().any(|&b| b != b' ')))
        {
            // No index to compare with: count what the broker would have indexed.
            self.idx.lag += 1;
        }
        if let Some(ix) = ctx.index {
            let mut keys = std::mem::take(&mut self.keys);
            expected_index_keys(m, &p, topic.prefix_hash, &mut keys);
            self.index_record(
                ix,
                m,
                &p,
                &keys,
                in_topic && sampled && o.wants(Part::Index),
            );
            self.keys = keys;
        }

        if in_topic && o.wants(Part::Commitlog) {
            if let Some(u) = p.uniq {
                if !is_reput(m, &p, topic.system) {
                    self.dup_batch.push((key_hash64(u), m.position));
                    if self.dup_batch.len() >= 1024 {
                        self.flush_dups();
                    }
                }
            }
        }
        self.report_progress(false);
    }

    /// A tombstone or filler a repair wrote: said, not an error.
    #[cold]
    fn repair_record(&mut self, m: &MessageRef<'_>, p: &Props<'_>, pos: u64) {
        let rollback = m.transaction_type() == TransactionType::Rollback;
        if p.filler && rollback {
            self.finding(
                Code::CommitlogRepairFiller,
                pos,
                format!(
                    "a filler record of {} bytes a repair wrote over damaged bytes",
                    m.raw.len()
                ),
            );
        } else if p.tombstone {
            self.finding(
                Code::CommitlogRepairTombstone,
                pos,
                format!(
                    "a tombstone for a destroyed message of {}/{} at queue offset {}: {}",
                    m.topic,
                    m.queue_id,
                    m.queue_offset,
                    String::from_utf8_lossy(m.body).trim_end()
                ),
            );
        }
    }

    fn strict_checks(&mut self, m: &MessageRef<'_>, p: &Props<'_>, pos: u64) {
        if m.body.is_empty() && m.body_crc != 0 {
            self.sink.push(
                Finding::new(
                    Code::CommitlogCrcMismatch,
                    self.path,
                    pos,
                    format!(
                        "record at commitlog offset {} has no body but BODYCRC {} (an empty body's CRC is 0)",
                        m.position, m.body_crc
                    ),
                )
                .with_severity(Severity::Warning)
                .with_action("the broker checks the CRC only when the body is not empty"),
            );
        }
        if p.crc32 {
            self.prop_crc(m, pos);
        }
        let mut odd = Vec::new();
        if m.sys_flag & !0x7FF != 0 {
            odd.push(format!("SYSFLAG {:#x} has bits above 0x7ff", m.sys_flag));
        }
        if m.store_timestamp <= 0 {
            odd.push(format!("STORETIMESTAMP is {}", m.store_timestamp));
        }
        let t = m.topic.as_bytes();
        match m.version {
            MessageVersion::V1 if t.len() > 127 => {
                odd.push(format!("a version 1 record with a {}-byte topic", t.len()))
            }
            MessageVersion::V2 if t.len() <= 127 => odd.push(format!(
                "a version 2 record for a {}-byte topic (the broker uses V2 only above 127)",
                t.len()
            )),
            _ => {}
        }
        if !odd.is_empty() {
            self.finding(
                Code::CommitlogOddField,
                pos,
                format!(
                    "record at commitlog offset {}: {}",
                    m.position,
                    odd.join("; ")
                ),
            );
        }
    }

    /// `__CRC32#` (5.2+): the last 20 bytes are `__CRC32#` 0x01, ten digits least significant
    /// first, 0x02; the CRC covers the record before them.
    fn prop_crc(&mut self, m: &MessageRef<'_>, pos: u64) {
        if let Some(what) = prop_crc_problem(m.raw) {
            self.sink.push(
                Finding::new(
                    Code::CommitlogPropCrcMismatch,
                    self.path,
                    pos,
                    format!("record at commitlog offset {}: {what}", m.position),
                )
                .with_action(
                    "checked only with forceVerifyPropCRC=true; then recovery truncates here",
                ),
            );
        }
    }

    fn queue_record(&mut self, m: &MessageRef<'_>, p: &Props<'_>, topic_id: u32, check_unit: bool) {
        let step = if m.sys_flag & sysflag::INNER_BATCH != 0 {
            p.inner_num.and_then(parse_digits).unwrap_or(1).max(1)
        } else {
            1
        };
        let q = m.queue_offset;
        let ctx = self.ctx;
        let topic: &str = &m.topic;
        let Some(sq) = self.queues.get_or_insert_with(topic_id, m.queue_id, || {
            let found = ctx
                .cq_index
                .get(topic)
                .and_then(|m2| m2.get(&m.queue_id))
                .copied();
            let out_of_range = ctx
                .topic_queues
                .get(topic)
                .copied()
                .filter(|&n| m.queue_id >= n && found.is_none());
            SegQueue {
                topic: topic.into(),
                out_of_range,
                run: QueueRun {
                    first_q: q,
                    first_pos: m.position,
                    last_pos: m.position,
                    next_q: q,
                    count: 0,
                    cq_end: found.map_or(0, |(e, _)| e),
                    beyond: 0,
                    first_beyond: None,
                    matched: 0,
                    ranges: Vec::new(),
                    ranges_overflow: false,
                },
                cq: found.map(|(_, cq)| cq),
                map: None,
            }
        }) else {
            return;
        };
        if let Some(queues) = sq.out_of_range {
            if self.suspects.len() < MAX_HEADER_EVIDENCE {
                self.suspects.push(Suspect {
                    offset: m.position,
                    slot: QueueSlot::of(m),
                    rule: Rule::QueueIdOutOfRange { queues },
                });
            }
        }
        let run = &mut sq.run;
        if run.count > 0 && q != run.next_q && self.gaps.len() < MAX_HEADER_EVIDENCE {
            self.gaps.push(Gap {
                topic: topic.to_string(),
                queue_id: m.queue_id,
                expected: run.next_q,
                found: q,
                offset: m.position,
                prev_offset: run.last_pos,
            });
        }
        run.next_q = q.saturating_add(step);
        run.last_pos = m.position;
        run.count += 1;
        if q >= 0 && q as u64 >= run.cq_end {
            run.beyond += 1;
            if run.first_beyond.is_none() {
                run.first_beyond = Some((m.position, q));
            }
        } else if check_unit && q >= 0 {
            // The unit at this queue offset must point back at this record.
            if let Some(u) = sq_unit(sq, q as u64, &mut self.open_maps, &ctx.cq_maps) {
                let tags_ok = u.has_ext_addr()
                    || fast_tags_code(m, p, &ctx.store.geometry) == Some(u.tags_code);
                if u.offset == m.position as i64 && u.size == m.total_size && tags_ok {
                    sq.run.add_matched(q as u64);
                }
            }
        }
        if self.open_maps > MAX_CQ_MAPS {
            for (_, sq) in self.queues.queues.iter_mut() {
                sq.map = None;
            }
            self.open_maps = 0;
        }
    }

    fn index_record(
        &mut self,
        ix: &IndexStream,
        m: &MessageRef<'_>,
        p: &Props<'_>,
        keys: &[i32],
        check: bool,
    ) {
        let x = m.position as i64;
        let mut c = match self.cursor {
            Some(c) => c,
            None => return,
        };
        ix.prefetch_ahead(c);
        let mut matched = KeyBits::new(keys.len());
        while let Some(e) = ix.entry(c) {
            if e.phy_offset > x {
                break;
            }
            if e.phy_offset < x {
                // Before this record: inside the previous record or between records.
                if e.phy_offset >= self.seg_start as i64 {
                    self.dangling(ix, c, &e, "where no record starts");
                }
            } else if check {
                self.idx.checked += 1;
                let free = keys
                    .iter()
                    .enumerate()
                    .position(|(i, h)| *h == e.key_hash && !matched.get(i));
                match free {
                    Some(i) => {
                        matched.set(i);
                        self.time_check(ix, c, &e, m);
                    }
                    None if keys.contains(&e.key_hash) => self.idx.duplicates += 1,
                    None => {
                        let what = if keys.is_empty() {
                            "a record that is not indexed (no keys, or ROLLBACK)".to_string()
                        } else {
                            format!("a record of topic {} whose keys do not hash to it", m.topic)
                        };
                        self.dangling(ix, c, &e, &what);
                    }
                }
            }
            c = ix.advance(c);
        }
        self.cursor = Some(c);
        if !check || keys.is_empty() || ix.is_unreadable_range(m.position) {
            return;
        }
        let covered = match (ix.first_offset, ix.coverage_end) {
            (Some(_), Some(end)) => x <= end,
            _ => false,
        };
        let mut texts: Option<Vec<String>> = None;
        for i in 0..keys.len() {
            if matched.get(i) {
                continue;
            }
            if !covered {
                self.idx.lag += 1;
                if self.idx.first_lag.is_none() {
                    self.idx.first_lag = Some(m.position);
                }
                continue;
            }
            self.idx.missing += 1;
            let key = texts
                .get_or_insert_with(|| index_key_texts(p))
                .get(i)
                .cloned()
                .unwrap_or_default();
            let action = if m.position >= self.ctx.redispatch_from {
                "the broker re-indexes it on its next start (re-dispatch)"
            } else {
                "queries by this key do not find the message; the broker never re-indexes old records"
            };
            self.sink.push(
                Finding::new(
                    Code::IndexMissingKey,
                    self.path,
                    m.position - self.seg_start,
                    format!(
                        "record at commitlog offset {} has key {}#{} but no index entry",
                        m.position, m.topic, key
                    ),
                )
                .about_record(m.position)
                .with_action(action),
            );
        }
    }

    fn time_check(&mut self, ix: &IndexStream, c: Cursor, e: &IndexEntry, m: &MessageRef<'_>) {
        if c.n < 2 {
            return;
        }
        let begin = ix.begin_timestamp(c);
        let want = if begin <= 0 {
            0
        } else {
            (m.store_timestamp.wrapping_sub(begin) / 1000).clamp(0, i32::MAX as i64) as i32
        };
        if e.time_diff != want {
            self.idx.time_mismatch += 1;
            self.sink.push(
                Finding::new(
                    Code::IndexTimeMismatch,
                    ix.path(c),
                    ix.entry_pos(c) + 12,
                    format!(
                        "entry {} has time diff {} s, but the record at offset {} was stored {} s after the file's beginTimestamp",
                        c.n, e.time_diff, m.position, want
                    ),
                )
                .with_action("time-bounded queries may miss this entry"),
            );
        }
    }

    fn dangling(&mut self, ix: &IndexStream, c: Cursor, e: &IndexEntry, what: &str) {
        self.idx.dangling += 1;
        if !self.ctx.opts.in_topic_any() || !self.ctx.opts.wants(Part::Index) {
            return;
        }
        self.sink.push(
            Finding::new(
                Code::IndexDanglingEntry,
                ix.path(c),
                ix.entry_pos(c),
                format!(
                    "entry {} (hash {}) points at commitlog offset {}, {what}",
                    c.n, e.key_hash, e.phy_offset
                ),
            )
            .about_stored_record(e.phy_offset)
            .with_action(
                "a query that reaches this entry reads the wrong bytes; clients drop records \
                 whose key differs, so the answer is only incomplete",
            ),
        );
    }

    /// Entries left in this file's range after its last record.
    pub(super) fn finish_index(&mut self, ix: &IndexStream, seg_end: u64) {
        let Some(mut c) = self.cursor else { return };
        while let Some(e) = ix.entry(c) {
            if e.phy_offset >= seg_end as i64 {
                break;
            }
            self.dangling(ix, c, &e, "past the last record of its file");
            c = ix.advance(c);
        }
        self.cursor = Some(c);
    }
}
