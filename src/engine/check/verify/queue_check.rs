//! The consume queues: each read front to back, its files and each unit judged by themselves
//! beside the format ([`check_files`], [`check_unit`]), and the units no record matched during
//! the commitlog pass checked against the bytes they point at.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::props::FastMap;
use super::queue_runs::{add_range, QueueRun};
use super::{Sink, VerifyOptions};
use crate::engine::check::headers::{Claim, QueueSlot};
use crate::engine::check::recovery::{self, RecoveryPlan};
use crate::engine::store::dispatch::record_tags_code;
use crate::engine::store::Store;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::{prop, sysflag, MessageRef, Segment};
use crate::format::consumequeue::check::{
    check_files, check_unit, CommitlogBounds, UnitPlace, UnitVerdict,
};
use crate::format::consumequeue::{ConsumeQueue, CqUnit, UNIT_SIZE};
use crate::format::error::{ErrorKind, Result};
use crate::format::filename::QueueFile;
use crate::format::finding::{Code, Finding};
use crate::format::mapped::Mapped;

/// The commitlog files, each mapped on first use, for the phases after the walk that read single
/// records (units no record matched, duplicate keys). These reads land anywhere in the files, so
/// the pages they map are let go every [`RELEASE_EVERY`] reads: a store whose every unit points
/// at a wrong record would otherwise end up with all of its commitlog in this process's memory.
pub(super) struct LazyMaps<'a> {
    segs: &'a [Segment],
    maps: Vec<OnceLock<Option<Mapped>>>,
    reads: AtomicU64,
}

/// Record reads between two releases of the pages they mapped (each maps a few pages, up to the
/// kernel's fault-around of 64 KiB: some 32 MiB at most).
const RELEASE_EVERY: u64 = 512;

impl<'a> LazyMaps<'a> {
    pub(super) fn new(segs: &'a [Segment]) -> Self {
        LazyMaps {
            segs,
            maps: segs.iter().map(|_| OnceLock::new()).collect(),
            reads: AtomicU64::new(0),
        }
    }

    /// The map of file `i`; `None` when it cannot be mapped.
    fn get(&self, i: usize) -> Option<&Mapped> {
        if self.reads.fetch_add(1, Ordering::Relaxed) % RELEASE_EVERY == RELEASE_EVERY - 1 {
            for m in self.maps.iter().filter_map(|m| m.get()).flatten() {
                m.release(0, m.len());
            }
        }
        let seg = self.segs.get(i)?;
        self.maps
            .get(i)?
            .get_or_init(|| {
                let m = seg.map().ok()?;
                m.advise_random();
                Some(m)
            })
            .as_ref()
    }
}

#[derive(Default)]
pub(super) struct CqResult {
    /// The first queue offset below the queue's end no record's unit matched (worked out once
    /// the queue is checked, when `ranges` go).
    pub(super) first_missing: Option<u64>,
    pub(super) units: u64,
    /// Units matched here (by reading their record) that no record matched during the scan.
    pub(super) matched: u64,
    pub(super) ranges: Vec<(u64, u64)>,
    pub(super) ranges_overflow: bool,
    pub(super) findings: Sink,
    /// Units that point at a record with its size and tags code while the record names another
    /// topic, queue or queue offset (one field apart): evidence for [`headers::judge`], with the
    /// finding reported if the judgement does not take it.
    pub(super) claims: Vec<(Claim, Finding)>,
}

/// Claims kept per queue.
const MAX_CQ_CLAIMS: usize = 64;

impl CqResult {
    fn matched_q(&mut self, q: u64) {
        self.matched += 1;
        add_range(&mut self.ranges, &mut self.ranges_overflow, q, q + 1);
    }

    fn push(&mut self, f: Finding) {
        self.findings.push(f);
    }
}

/// Ranges sorted and merged.
pub(super) fn normalized(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// First queue offset in `[lo, hi)` not covered by `ranges` (sorted and merged).
pub(super) fn first_unmatched(ranges: &[(u64, u64)], lo: u64, hi: u64) -> Option<u64> {
    let mut q = lo;
    for &(a, b) in ranges {
        if b <= q {
            continue;
        }
        if a > q {
            break;
        }
        q = b;
    }
    (q < hi).then_some(q)
}

pub(super) struct CqCtx<'a> {
    pub(super) store: &'a Store,
    pub(super) opts: &'a VerifyOptions,
    pub(super) maps: &'a LazyMaps<'a>,
    pub(super) data_end: u64,
    pub(super) cl_min: u64,
    pub(super) plan: Option<&'a RecoveryPlan>,
    /// Consume queue files the commitlog pass mapped (their pages are mapped already).
    pub(super) cq_maps: Option<&'a FastMap<PathBuf, Arc<Mapped>>>,
    /// Commitlog offsets of the records a claim can be judged about (records the walk saw
    /// break a rule, alone in their queue, or where a queue's offsets break): a claim about
    /// another record is never taken, so it is not kept. `None`: every claim is kept.
    pub(super) claimable: Option<&'a HashSet<u64>>,
}

/// Why no message record was found at a commitlog offset a unit points at.
#[derive(Debug, thiserror::Error)]
pub(super) enum NoRecord {
    #[error("below the first commitlog file")]
    BelowFirstFile,
    #[error("no commitlog file")]
    NoFile,
    #[error("{} cannot be read", .0.display())]
    Unreadable(PathBuf),
    #[error("{0}")]
    BeyondAddressSpace(std::num::TryFromIntError),
    #[error("a blank record is there")]
    Blank,
    #[error("only zeros are there")]
    Zeros,
    #[error("no record parses there ({0})")]
    Unparsable(ErrorKind),
}

pub(super) fn record_at<'m>(
    c: &'m CqCtx<'_>,
    offset: u64,
) -> std::result::Result<MessageRef<'m>, NoRecord> {
    let segs = &c.store.commitlog.segments;
    let i = segs
        .partition_point(|s| s.start <= offset)
        .checked_sub(1)
        .ok_or(NoRecord::BelowFirstFile)?;
    let seg = segs.get(i).ok_or(NoRecord::NoFile)?;
    let map = c
        .maps
        .get(i)
        .ok_or_else(|| NoRecord::Unreadable(seg.path.clone()))?;
    let pos = usize::try_from(offset - seg.start).map_err(NoRecord::BeyondAddressSpace)?;
    match parse_record(map, pos, seg.start, false) {
        Ok(Record::Message(m)) => Ok(m),
        Ok(Record::Blank { .. }) => Err(NoRecord::Blank),
        Ok(Record::EndOfData) => Err(NoRecord::Zeros),
        Err(e) => Err(NoRecord::Unparsable(e.kind)),
    }
}

/// A [`Claim`] when the unit at queue offset `q` of `cq` and the record it points at agree on
/// everything but one of topic, queue id and queue offset (size, tags code, a queued transaction
/// type and an intact body): the record's header may have changed after it was dispatched.
fn unit_claim(
    cq: &ConsumeQueue,
    q: u64,
    u: &CqUnit,
    m: &MessageRef<'_>,
    g: &crate::format::geometry::Geometry,
    path: &Path,
    pos: u64,
) -> Option<Claim> {
    let tags_ok = u.has_ext_addr() || record_tags_code(m, g).ok() == Some(u.tags_code);
    if m.total_size != u.size || !tags_ok {
        return None;
    }
    if !m.body.is_empty() && !m.body_crc_ok() {
        return None;
    }
    let unit = QueueSlot {
        topic: cq.topic.clone(),
        queue_id: cq.queue_id,
        queue_offset: i64::try_from(q).ok()?,
    };
    let found = QueueSlot::of(m);
    if !m.transaction_type().is_queued() {
        // Only the type differs: the type it had is COMMIT for a transactional message.
        let committed = m.property(prop::TRAN_MSG).is_some_and(|v| v == "true");
        let right = (m.sys_flag & !sysflag::TRANSACTION_MASK)
            | if committed {
                sysflag::TRANSACTION_COMMIT
            } else {
                sysflag::TRANSACTION_NOT
            };
        return (found == unit).then(|| Claim {
            offset: m.position,
            unit,
            found,
            sys_flag: Some((m.sys_flag, right)),
            unit_file: path.display().to_string(),
            unit_pos: pos,
        });
    }
    let differing = [
        unit.topic != found.topic,
        unit.queue_id != found.queue_id,
        unit.queue_offset != found.queue_offset,
    ];
    (differing.iter().filter(|d| **d).count() == 1).then(|| Claim {
        offset: m.position,
        unit,
        found,
        sys_flag: None,
        unit_file: path.display().to_string(),
        unit_pos: pos,
    })
}

pub(super) fn check_queue(
    c: &CqCtx<'_>,
    cq: &ConsumeQueue,
    run: Option<&QueueRun>,
) -> Result<CqResult> {
    let mut r = CqResult {
        findings: Sink::new(c.opts.max_per_code),
        ..CqResult::default()
    };
    for finding in check_files(cq) {
        r.push(finding);
    }
    let mut w = QueueWalk::new(c, cq, run);
    for f in &cq.files {
        let cached = c.cq_maps.and_then(|m| m.get(&f.path)).cloned();
        match cached.map_or_else(|| Mapped::open(&f.path).map(Arc::new), Ok) {
            Ok(map) => w.file(f, &map, &mut r),
            Err(e) => r.push(Finding::new(
                Code::StoreUnreadable,
                &f.path,
                0,
                e.to_string(),
            )),
        }
    }
    w.finish(&mut r);
    Ok(r)
}

/// One queue read front to back: where it ended, and what its units showed on the way.
struct QueueWalk<'a> {
    c: &'a CqCtx<'a>,
    cq: &'a ConsumeQueue,
    name: String,
    bounds: CommitlogBounds,
    sample: u64,
    /// Units the scan already matched with their record need no second look.
    done: Vec<(u64, u64)>,
    done_at: usize,
    /// The queue offset of the first invalid unit.
    ended: Option<u64>,
    /// Non-zero units after the end: how many, and the first.
    torn: (u64, Option<(PathBuf, u64)>),
    prev_offset: Option<i64>,
    /// Units below the commitlog's first offset.
    stale: u64,
    /// Units past the commitlog's end of data: how many, and the first (file, position, queue
    /// offset).
    past_end: (u64, Option<(PathBuf, u64, u64)>),
}

impl<'a> QueueWalk<'a> {
    fn new(c: &'a CqCtx<'a>, cq: &'a ConsumeQueue, run: Option<&QueueRun>) -> Self {
        let done = match run {
            Some(run) if !run.ranges_overflow => normalized(run.ranges.clone()),
            _ => Vec::new(),
        };
        QueueWalk {
            c,
            cq,
            name: format!("{}/{}", cq.topic, cq.queue_id),
            bounds: CommitlogBounds {
                min_offset: c.cl_min,
                data_end: c.data_end,
            },
            sample: c.opts.sample.max(1),
            done,
            done_at: 0,
            ended: None,
            torn: (0, None),
            prev_offset: None,
            stale: 0,
            past_end: (0, None),
        }
    }

    /// The units of one file of the queue, in order.
    fn file(&mut self, f: &QueueFile, map: &Mapped, r: &mut CqResult) {
        let chunks = map.chunks_exact(UNIT_SIZE);
        let rem = chunks.remainder().len();
        let mut tail_from = None;
        for (i, chunk) in chunks.enumerate() {
            let fpos = (i * UNIT_SIZE) as u64;
            let q = f.start.saturating_add(fpos) / UNIT_SIZE as u64;
            let Some(u) = CqUnit::from_bytes(chunk) else {
                continue;
            };
            if self.ended.is_some() {
                tail_from = Some(i * UNIT_SIZE);
                break;
            }
            if self.unit_in_data(&u, q, &f.path, fpos, r) && !self.already_matched(q) {
                check_against_record(self.c, self.cq, &self.name, (q, &u), (&f.path, fpos), r);
            }
        }
        if let Some(from) = tail_from {
            count_torn_units(map, from, &f.path, &mut self.torn);
        }
        if rem != 0 {
            r.push(Finding::new(
                Code::ConsumequeueTorn,
                &f.path,
                map.len() as u64 - rem as u64,
                format!(
                    "{}: the file ends with a partial unit of {rem} bytes",
                    self.name
                ),
            ));
        }
    }

    /// Judges unit `u` at queue offset `q` by itself: true when it is a unit pointing into the
    /// commitlog's data, to be checked against its record.
    fn unit_in_data(
        &mut self,
        u: &CqUnit,
        q: u64,
        path: &Path,
        fpos: u64,
        r: &mut CqResult,
    ) -> bool {
        let verdict = check_unit(u, self.prev_offset, self.bounds);
        if let Some(finding) = verdict.finding(&self.name, q, u, path, fpos) {
            r.push(finding);
        }
        let place = match verdict {
            UnitVerdict::End { torn } => {
                self.ended = Some(q);
                if torn {
                    self.torn.0 += 1;
                    self.torn.1.get_or_insert((path.to_path_buf(), fpos));
                }
                return false;
            }
            UnitVerdict::PreBlank { .. } => return false,
            UnitVerdict::Real { place, .. } => place,
        };
        r.units += 1;
        self.prev_offset = Some(u.offset);
        match place {
            UnitPlace::Expired => {
                self.stale += 1;
                false
            }
            UnitPlace::PastEnd => {
                self.past_end.0 += 1;
                if self.past_end.1.is_none() {
                    self.past_end.1 = Some((path.to_path_buf(), fpos, q));
                }
                false
            }
            UnitPlace::InData => true,
        }
    }

    /// True when queue offset `q` needs no look at its record: left out by `--sample`, or
    /// matched during the commitlog pass.
    fn already_matched(&mut self, q: u64) -> bool {
        if self.sample > 1 && !q.is_multiple_of(self.sample) {
            return true;
        }
        while self.done.get(self.done_at).is_some_and(|&(_, b)| b <= q) {
            self.done_at += 1;
        }
        self.done.get(self.done_at).is_some_and(|&(a, _)| a <= q)
    }

    /// The findings the whole queue adds up to: units after its end, expired ones, ones past
    /// the commitlog's data.
    fn finish(self, r: &mut CqResult) {
        let name = &self.name;
        if let (n @ 1.., Some((p, pos))) = self.torn {
            r.push(
                Finding::new(
                    Code::ConsumequeueTorn,
                    &p,
                    pos,
                    format!(
                        "{name}: {n} non-zero units after the first invalid unit (queue offset {})",
                        self.ended.unwrap_or(0)
                    ),
                )
                .with_action(
                    "recovery ends the queue at the first invalid unit (within its last three \
                     files); later units are ignored and overwritten",
                ),
            );
        }
        if let (stale @ 1.., Some(f)) = (self.stale, self.cq.files.first()) {
            r.push(Finding::new(
                Code::ConsumequeueStaleUnit,
                &f.path,
                0,
                format!(
                    "{name}: {stale} units point below the commitlog's first offset {} (expired data)",
                    self.c.cl_min
                ),
            ));
        }
        if let (n @ 1.., Some((p, pos, q))) = self.past_end {
            let action = match self.c.plan.and_then(|pl| pl.cut.as_ref()) {
                Some(cut) => format!(
                    "recovery drops the units pointing at or after offset {} (truncateDirtyLogicFiles)",
                    cut.offset
                ),
                None => "recovery drops them (truncateDirtyLogicFiles)".to_string(),
            };
            r.push(
                Finding::new(
                    Code::ConsumequeuePastEnd,
                    &p,
                    pos,
                    format!(
                        "{name}: {n} units from queue offset {q} point past the commitlog's end of data ({})",
                        self.c.data_end
                    ),
                )
                .with_action(action),
            );
        }
    }
}

/// Unit `u` at queue offset `q` (at `fpos` of `path`) against the record it points at: a match,
/// a claim about the record's header for the judgement, or a mismatch finding.
fn check_against_record(
    c: &CqCtx<'_>,
    cq: &ConsumeQueue,
    name: &str,
    (q, u): (u64, &CqUnit),
    (path, fpos): (&Path, u64),
    r: &mut CqResult,
) {
    let uoff = u.offset as u64;
    let mut diffs = Vec::new();
    let mut claim = None;
    match record_at(c, uoff) {
        Err(why) => diffs.push(why.to_string()),
        Ok(m) => {
            claim = unit_claim(cq, q, u, &m, &c.store.geometry, path, fpos);
            diffs = record_diffs(cq, q, u, &m, &c.store.geometry);
        }
    }
    if diffs.is_empty() {
        r.matched_q(q);
        return;
    }
    let finding = Finding::new(
        Code::ConsumequeueUnitMismatch,
        path,
        fpos,
        format!(
            "{name}: unit at queue offset {q} points at commitlog offset {uoff} (size {}), but there: {}",
            u.size,
            diffs.join(", ")
        ),
    )
    .about_record(uoff)
    .with_action(format!(
        "consumers of {name} at queue offset {q} get the bytes at offset {uoff} \
         (a wrong message, or a pull error); the broker never rewrites the unit"
    ));
    let judged =
        |cl: &Claim| cl.sys_flag.is_some() || c.claimable.is_none_or(|s| s.contains(&cl.offset));
    match claim {
        Some(cl) if r.claims.len() < MAX_CQ_CLAIMS && judged(&cl) => r.claims.push((cl, finding)),
        _ => r.push(finding),
    }
}

/// What of record `m` differs from what unit `u` at queue offset `q` of `cq` says of it.
fn record_diffs(
    cq: &ConsumeQueue,
    q: u64,
    u: &CqUnit,
    m: &MessageRef<'_>,
    g: &crate::format::geometry::Geometry,
) -> Vec<String> {
    let mut diffs = Vec::new();
    if m.topic != cq.topic {
        diffs.push(format!("topic {}", m.topic));
    }
    if m.queue_id != cq.queue_id {
        diffs.push(format!("queue id {}", m.queue_id));
    }
    if m.queue_offset != q as i64 {
        diffs.push(format!("queue offset {}", m.queue_offset));
    }
    if m.total_size != u.size {
        diffs.push(format!("size {} (the unit says {})", m.total_size, u.size));
    }
    if !m.transaction_type().is_queued() {
        diffs.push(format!("transaction type {:?}", m.transaction_type()));
    }
    if !u.has_ext_addr() {
        match record_tags_code(m, g) {
            Ok(t) if t != u.tags_code => {
                diffs.push(format!("tags code {t} (the unit says {})", u.tags_code))
            }
            Ok(_) => {}
            Err(e) => diffs.push(e.to_string()),
        }
    }
    diffs
}

/// Count the units from byte `from` on that are not all zero (written after the queue ended),
/// noting the first. The search for the first one skips the holes of a pre-allocated file.
fn count_torn_units(
    map: &[u8],
    from: usize,
    path: &Path,
    torn: &mut (u64, Option<(PathBuf, u64)>),
) {
    let units_end = map.len() - map.len() % UNIT_SIZE;
    let Some(first) = recovery::first_nonzero_from(map, from, path).filter(|&p| p < units_end)
    else {
        return;
    };
    let start = first - first % UNIT_SIZE;
    for (i, unit) in map
        .get(start..units_end)
        .unwrap_or(&[])
        .chunks_exact(UNIT_SIZE)
        .enumerate()
    {
        if unit.iter().any(|&b| b != 0) {
            torn.0 += 1;
            torn.1
                .get_or_insert_with(|| (path.to_path_buf(), (start + i * UNIT_SIZE) as u64));
        }
    }
}

/// File and position of queue offset `q` in a queue (the file may not exist).
pub(super) fn unit_location(cq: &ConsumeQueue, q: u64) -> (PathBuf, u64) {
    let pos = q.saturating_mul(UNIT_SIZE as u64);
    let fs = cq.file_size.max(UNIT_SIZE as u64);
    let start = pos - pos % fs;
    (
        cq.dir.join(crate::format::filename::offset_to_name(start)),
        pos - start,
    )
}
