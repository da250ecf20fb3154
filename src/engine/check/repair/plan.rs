//! The plan: what a repair does, worked out from `verify`'s judgement without writing anything.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::bridge::{self, Bridge};
use super::{
    hex, rel, salvage_count, Action, ConfigWrite, Cut, Fate, HeaderRepair, Mode, Plan, STAGE_MARKER,
};
use crate::engine::check::headers::{field_patch, DamagedHeader};
use crate::engine::check::rebuild::{plan_queues, Patch, RebuildOptions, Source};
use crate::engine::check::recovery::{FileWalk, StopReason, WalkProblem};
use crate::engine::check::verify::{verify, Report, VerifyOptions};
use crate::engine::store::{paths, Store};
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::SegmentKind;
use crate::format::config::{
    load, ConfigFile, ConfigSource, ConsumerOffsets, DelayOffsets, SubscriptionGroups, TopicConfigs,
};
use crate::format::entry::{self, Entry, Kind};
use crate::format::error::Result;
use crate::format::finding::Severity;

/// The problem a walk stopped at, in words.
fn stop_reason(w: &FileWalk) -> String {
    let at = w.stop_pos;
    let p = w.problems.iter().find(|p| p.pos() == at);
    match (w.stop, p) {
        (
            StopReason::CrcMismatch,
            Some(WalkProblem::CrcMismatch {
                stored, computed, ..
            }),
        ) => {
            format!("body CRC mismatch (BODYCRC {stored}, the body's CRC is {computed})")
        }
        (StopReason::BadRecord, Some(WalkProblem::BadRecord { detail, .. })) => {
            format!("a record that does not parse: {detail}")
        }
        (StopReason::BadRecord, Some(WalkProblem::BadDelay { value, .. })) => {
            format!("a schedule record whose DELAY {value:?} is not a number")
        }
        (StopReason::ZeroHole, _) => "zeros where a record should start, records after them".into(),
        (StopReason::EndOfData, _) => {
            "the data ends without a blank record, and later files hold data".into()
        }
        (s, _) => format!("{s:?}"),
    }
}

/// Work out the repair of `store`: read-only, memory independent of the store's size.
pub fn plan(store: &Store) -> Result<Plan> {
    plan_with(store, None)
}

/// [`plan`] that stops when `interrupt` is set (the check of the store ends with
/// [`crate::format::error::Error::Interrupted`]); the plan carries the flag, so that [`super::apply`]
/// stops too, at its next salvaged record or piece of the commitlog rebuilt.
pub fn plan_with(store: &Store, interrupt: Option<Arc<AtomicBool>>) -> Result<Plan> {
    plan_mode(store, interrupt, Mode::Bridge)
}

/// [`plan_with`] in the given [`Mode`].
pub fn plan_mode(store: &Store, interrupt: Option<Arc<AtomicBool>>, mode: Mode) -> Result<Plan> {
    let check = VerifyOptions {
        interrupt: interrupt.clone(),
        ..VerifyOptions::default()
    };
    let report = verify(store, &check, None)?;
    crate::format::mapped::give_back_free_heap();
    let mut d = Draft {
        store,
        size: store.geometry.commitlog_file_size.value,
        fates: vec![Fate::Keep; store.commitlog.segments.len()],
        file_patches: BTreeMap::new(),
        actions: Vec::new(),
    };
    // A DLedger log is a replica: no byte of an entry a peer may hold is rewritten (no header
    // mended, no damage bridged); it is cut where its chain breaks. The `commitlog/` files below
    // a converted store's divide are this broker's own: repaired as a normal store's.
    let mendable = mendable(store, &report)?;
    let mut bridging = match mode {
        Mode::Bridge => bridging(store, &report)?,
        Mode::Cut => Bridging::none(&report),
    };
    let mut brk = chain_break(store, &report, &mendable, &bridging);
    let log_damage = match &store.dledger {
        Some(l) => super::dledger::log_damage(store, l)?,
        None => Default::default(),
    };
    if let Some((i, pos, why)) = log_damage.cut {
        if brk.as_ref().is_none_or(|b| (b.0, b.1) > (i, pos)) {
            brk = Some(ChainBreak(i, pos, why, true));
        }
    }
    if let (Some(l), Some(b)) = (&store.dledger, &brk) {
        let segs = &store.commitlog.segments;
        let seg = &segs[b.0];
        // A break in a `commitlog/` file, or the old files ending before the divide.
        let below = seg.kind == SegmentKind::Commitlog
            || (b.0 > 0 && segs[b.0 - 1].kind == SegmentKind::Commitlog && b.1 == 0 && !b.3);
        if below {
            // Below a converted store's divide: a cut there would end the store before the
            // DLedger log, which no damage of this broker's own files may take from the replica.
            return Err(crate::format::error::DledgerError::NotRepaired {
                root: store.root.clone(),
                why: format!(
                    "damage below the divide (commitlog offset {}) that is not bridged in \
                     place ({} byte {}: {}): a cut there would take the DLedger log of {} with it",
                    l.divide(),
                    rel(store, &seg.path),
                    b.1,
                    b.2,
                    l.self_id
                ),
            }
            .into());
        }
    }
    let cut = d.cut(brk);
    let cut_offset = cut.as_ref().map(|c| c.offset);
    bridging
        .bridges
        .retain(|b| cut_offset.is_none_or(|c| b.offset + b.length <= c));
    d.bridged(&bridging.bridges);
    d.kept_files(&report, cut_offset);
    if let Some((i, at)) = log_damage.tail {
        d.dledger_tail(i, at, cut_offset);
    }
    let (headers, patches) = d.headers(mendable, cut_offset);
    let (salvage_records, salvage_bytes) = d.salvage(cut.as_ref(), &report)?;
    let dledger = match &store.dledger {
        Some(l) => Some(super::dledger::plan(
            l,
            &report,
            cut.as_ref(),
            &mut d.actions,
        )?),
        None => None,
    };
    let set_aside = set_aside_entries(store)?;
    for (e, why) in &set_aside {
        d.act(
            format!("{}: {why}", rel(store, &e.path)),
            "move it to the repair folder (listed in the manifest)",
            0,
            e.kind.file_len(),
        );
    }

    // Consume queues and index: rebuilt from the kept records when verify found anything in them
    // or the commitlog changes.
    let commitlog_changes = cut.is_some() || !patches.is_empty() || !bridging.bridges.is_empty();
    let why = |n: usize, what: &str| match (n, commitlog_changes) {
        (0, _) => "the commitlog changes".to_string(),
        (n, false) => format!("verify has {n} {what} finding(s)"),
        (n, true) => format!("verify has {n} {what} finding(s), and the commitlog changes"),
    };
    let cq_findings = problems(&report, "consumequeue");
    if commitlog_changes || cq_findings > 0 {
        d.act(
            why(cq_findings, "consume queue"),
            "rebuild every consume queue from the kept records as the broker's dispatch does; \
             old files that differ are kept in the repair folder",
            0,
            0,
        );
    }
    let ix_findings = problems(&report, "index");
    if commitlog_changes || ix_findings > 0 {
        d.act(
            why(ix_findings, "index"),
            "rebuild the index from the kept records; old files that differ are kept",
            0,
            0,
        );
    }
    if store.abort.present {
        d.act(
            "abort file present (unclean shutdown)".into(),
            "remove it: the repaired store is consistent, a normal recovery is right",
            0,
            0,
        );
    }
    let rebuild = RebuildOptions {
        interrupt,
        ..RebuildOptions::for_geometry(store.geometry.clone())
    };
    let inserts: Vec<_> = bridging.bridges.iter().map(|b| b.insert()).collect();
    let src = Source {
        store,
        end: cut_offset,
        patches: &patches,
        inserts: &inserts,
    };
    let queues = plan_queues(&src, &rebuild)?;
    let salvage_from = cut.as_ref().map(|c| (cut_segment(store, c), c.position));
    let cut_lost = super::dropped::dropped_units(store, &queues.queue_bounds, salvage_from)?;
    if !cut_lost.is_empty() {
        d.act(
            format!(
                "{} message(s) the consume queues hold lie past the kept commitlog, and no \
                 salvaged record is theirs",
                cut_lost.len()
            ),
            "leave them out of the rebuilt queues (each named, as its consume queue unit \
             proves it)",
            cut_lost.len() as u64,
            0,
        );
    }
    let mut config = plan_config(store, &queues.queue_bounds, &mut d.actions)?;
    let (timer, timercheck) =
        super::timer::plan(store, &report, &queues.queue_bounds, &mut d.actions)?;
    config.extend(timercheck);
    let cp_findings = report
        .findings
        .iter()
        .filter(|f| f.code.part() == "checkpoint")
        .count();
    if cp_findings > 0 || commitlog_changes {
        d.act(
            why(cp_findings, "checkpoint"),
            "write the checkpoint from the repaired data (the old one is kept if it differs)",
            0,
            0,
        );
    }
    Ok(Plan {
        messages_kept: queues.records,
        dledger,
        report,
        cut,
        bridges: bridging.bridges,
        cut_lost,
        headers,
        actions: d.actions,
        salvage_records,
        salvage_bytes,
        fates: d.fates,
        file_patches: d.file_patches,
        patches,
        set_aside,
        config,
        timer,
        rebuild,
    })
}

/// The index of the commitlog file the cut is in.
fn cut_segment(store: &Store, c: &Cut) -> usize {
    store
        .commitlog
        .segments
        .iter()
        .position(|s| rel(store, &s.path) == c.file)
        .unwrap_or(0)
}

/// Findings above info about `part` of the store (`index`, `consumequeue`): all of them, not
/// only those listed under the per-code cap.
fn problems(report: &Report, part: &str) -> usize {
    report
        .summary
        .findings_per_code
        .iter()
        .filter_map(|(code, n)| Some((crate::format::finding::Code::from_name(code)?, *n)))
        .filter(|(c, _)| c.part() == part && c.severity() > Severity::Info)
        .map(|(_, n)| n as usize)
        .sum()
}

/// The plan being worked out: what becomes of each commitlog file, the bytes written over in
/// the files kept, and the actions so far.
struct Draft<'s> {
    store: &'s Store,
    /// The configured commitlog file size.
    size: u64,
    fates: Vec<Fate>,
    file_patches: BTreeMap<usize, Vec<(u64, Vec<u8>)>>,
    actions: Vec<Action>,
}

impl Draft<'_> {
    fn act(&mut self, problem: String, action: &str, messages: u64, bytes: u64) {
        self.actions.push(Action {
            problem,
            action: action.into(),
            messages,
            bytes,
        });
    }

    /// The cut where the chain of records breaks: that file rewritten up to it (or moved out
    /// when it is cut at its start), every later file moved out.
    fn cut(&mut self, at: Option<ChainBreak>) -> Option<Cut> {
        let ChainBreak(i, pos, reason, within) = at?;
        let seg = &self.store.commitlog.segments[i];
        self.fates[i] = if within {
            Fate::Rewrite { keep: pos }
        } else {
            Fate::Out
        };
        for f in self.fates.iter_mut().skip(i + 1) {
            *f = Fate::Out;
        }
        // Service ends where the kept data ends: at a file's start that is where the file before
        // it ends, which is not the file's own offset when its name is out of sequence.
        let segs = &self.store.commitlog.segments;
        let offset = match i.checked_sub(1) {
            Some(prev) if pos == 0 => segs[prev].start.saturating_add(self.size).min(seg.start),
            _ => seg.start + pos,
        };
        Some(Cut {
            file: rel(self.store, &seg.path),
            position: pos,
            offset,
            reason,
        })
    }

    /// The files with damage bridged in place are rewritten; each range is an action.
    fn bridged(&mut self, bridges: &[Bridge]) {
        for b in bridges {
            let seg = &self.store.commitlog.segments[b.segment];
            if self.fates[b.segment] == Fate::Keep {
                self.fates[b.segment] = Fate::Rewrite {
                    keep: seg.len.min(self.size),
                };
            }
            let named = b.lost.iter().filter(|l| l.topic.is_some()).count();
            self.act(
                format!(
                    "{} byte {} ({} bytes, commitlog offset {}): {}",
                    b.file, b.position, b.length, b.offset, b.why
                ),
                &format!(
                    "replace the range in place by {} tombstone(s) (the destroyed messages the \
                     store proves, at their own offsets) and {} filler record(s); every later \
                     record keeps its offsets; the bytes are kept in the repair folder",
                    b.tombstones, b.fillers
                ),
                named as u64,
                b.length,
            );
        }
    }

    /// File sizes, dirty tails and blank sizes of the files kept.
    fn kept_files(&mut self, report: &Report, cut_offset: Option<u64>) {
        let (store, size) = (self.store, self.size);
        for (i, seg) in store.commitlog.segments.iter().enumerate() {
            if self.fates[i] == Fate::Out {
                continue;
            }
            let name = rel(store, &seg.path);
            let w = report.walks.get(i).and_then(Option::as_ref);
            let mut keep = match self.fates[i] {
                Fate::Rewrite { keep } => keep,
                _ => seg.len,
            }
            .min(size);
            if let Some(w) = w {
                // Non-zero bytes after the data: the data's end is kept, the rest zeroed (saved).
                let data_end = match w.end {
                    StopReason::Blank => w.end_pos + 8,
                    _ => w.end_pos,
                };
                for p in &w.problems {
                    match p {
                        WalkProblem::DirtyTail { .. } => keep = keep.min(data_end),
                        WalkProblem::BlankSize { pos, .. }
                            if seg.kind == SegmentKind::Commitlog =>
                        {
                            let left = size.saturating_sub(*pos) as i32;
                            self.file_patches
                                .entry(i)
                                .or_default()
                                .push((*pos, left.to_be_bytes().to_vec()));
                        }
                        _ => {}
                    }
                }
            }
            if keep < seg.len || seg.len != size || self.file_patches.contains_key(&i) {
                self.fates[i] = Fate::Rewrite { keep };
            }
            if seg.len < size {
                self.act(
                    format!("{name} is {} bytes, not {size}", seg.len),
                    "extend it with zeros to the configured size",
                    0,
                    0,
                );
            } else if seg.len > size {
                self.act(
                    format!("{name} is {} bytes, not {size}", seg.len),
                    &format!(
                        "cut it to {size} bytes; the bytes after that are kept in the repair \
                         folder (zeros are only listed)"
                    ),
                    0,
                    seg.len - size,
                );
            }
            let Some(w) = w else { continue };
            if let Some(WalkProblem::DirtyTail { pos, end, .. }) = w
                .problems
                .iter()
                .find(|p| matches!(p, WalkProblem::DirtyTail { .. }))
            {
                if cut_offset.is_none_or(|c| c > seg.start + *pos) {
                    self.act(
                        format!("{name} has non-zero bytes after its data ({pos}..{end})"),
                        "zero them; the bytes are kept in the repair folder",
                        0,
                        end - pos,
                    );
                }
            }
            if w.problems
                .iter()
                .any(|p| matches!(p, WalkProblem::BlankSize { .. }))
            {
                self.act(
                    format!("{name}: the blank record's size is not the bytes left"),
                    "write the size the broker writes (the bytes left in the file)",
                    0,
                    0,
                );
            }
        }
    }

    /// Non-zero bytes after the end of a DLedger log past its committed position (which the
    /// commitlog walks do not read): zeroed from `at` of file `i` on, saved first.
    fn dledger_tail(&mut self, i: usize, at: u64, cut_offset: Option<u64>) {
        let seg = &self.store.commitlog.segments[i];
        if cut_offset.is_some_and(|c| c <= seg.start + at) {
            return;
        }
        let keep = match self.fates[i] {
            Fate::Out => return,
            Fate::Rewrite { keep } => keep.min(at),
            Fate::Keep => at,
        };
        self.fates[i] = Fate::Rewrite { keep };
        let len = seg.len.min(self.size);
        self.act(
            format!(
                "{} has non-zero bytes after the end of the DLedger data ({at}..{len})",
                rel(self.store, &seg.path)
            ),
            "zero them; the bytes are kept in the repair folder",
            0,
            len.saturating_sub(at),
        );
    }

    /// Header fields the store proves, in the records kept: what the manifest lists, and the
    /// patches the rebuild and the copies apply (sorted by record).
    fn headers(
        &mut self,
        mendable: Vec<Mend<'_>>,
        cut_offset: Option<u64>,
    ) -> (Vec<HeaderRepair>, Vec<Patch>) {
        let mut headers = Vec::new();
        let mut patches = Vec::new();
        for Mend {
            header: d,
            segment: i,
            at,
            new,
            old,
        } in mendable
        {
            let Some(fix) = &d.fix else { continue };
            if cut_offset.is_some_and(|c| d.offset >= c) {
                continue;
            }
            let seg = &self.store.commitlog.segments[i];
            let position = d.offset - seg.start + at as u64;
            headers.push(HeaderRepair {
                file: rel(self.store, &seg.path),
                position,
                record: d.offset,
                field: d.field.name(),
                was: d.found.clone(),
                now: fix.value.clone(),
                evidence: fix.evidence.clone(),
                old_bytes: hex(&old),
                new_bytes: hex(&new),
            });
            patches.push(Patch {
                record: d.offset,
                at,
                bytes: new.clone(),
            });
            self.file_patches
                .entry(i)
                .or_default()
                .push((position, new));
            if self.fates[i] == Fate::Keep {
                self.fates[i] = Fate::Rewrite {
                    keep: seg.len.min(self.size),
                };
            }
            self.act(
                d.title(),
                &format!(
                    "write {} {} back ({})",
                    d.field.name(),
                    fix.value,
                    fix.evidence
                ),
                1,
                0,
            );
        }
        patches.sort_by_key(|p| p.record);
        (headers, patches)
    }

    /// The cut, the files after it, and what can be salvaged from them: (records, bytes).
    fn salvage(&mut self, cut: Option<&Cut>, report: &Report) -> Result<(u64, u64)> {
        let Some(c) = cut else { return Ok((0, 0)) };
        let segs = &self.store.commitlog.segments;
        let i = cut_segment(self.store, c);
        let (records, bytes) = salvage_count(self.store, i, c.position)?;
        let moved = self.fates.iter().filter(|f| **f == Fate::Out).count();
        // Data after the cut: in the cut file up to where its walk ends, and in every later file.
        let data_end = |j: usize| {
            report.walks.get(j).and_then(Option::as_ref).map_or(0, |w| {
                let end = match w.end {
                    StopReason::Blank => w.end_pos + 8,
                    _ => w.end_pos,
                };
                end.max(w.stop_pos)
            })
        };
        let after: u64 =
            data_end(i).saturating_sub(c.position) + (i + 1..segs.len()).map(data_end).sum::<u64>();
        let mut what = vec!["cut there as the broker's recovery would".to_string()];
        if after > 0 {
            what.push(format!(
                "keep the {after} data bytes after the cut in the repair folder"
            ));
        }
        if moved > 0 {
            what.push(format!(
                "move {moved} file(s) from the cut on to the repair folder"
            ));
        }
        let damaged = report
            .walks
            .get(i)
            .and_then(Option::as_ref)
            .is_some_and(|w| {
                w.stop_pos == c.position
                    && matches!(w.stop, StopReason::CrcMismatch | StopReason::BadRecord)
            });
        self.act(
            format!(
                "commitlog unreadable from {} byte {}: {}",
                c.file, c.position, c.reason
            ),
            &what.join("; "),
            u64::from(damaged),
            after,
        );
        if records > 0 {
            self.act(
                "valid records after the cut".into(),
                "salvage them to salvaged/ (a store, with each group's offsets translated to it) \
                 and salvaged.jsonl, with original offsets and ids",
                records,
                bytes,
            );
        }
        Ok((records, bytes))
    }
}

/// A proven header fix that fits its field: the damaged header, its commitlog file, the
/// field's position in the record, its new and old bytes.
struct Mend<'r> {
    header: &'r DamagedHeader,
    segment: usize,
    at: usize,
    new: Vec<u8>,
    old: Vec<u8>,
}

/// The proven header fixes that fit their field (the other damaged headers cannot be mended).
fn mendable<'r>(
    store: &Store,
    report: &'r crate::engine::check::verify::Report,
) -> Result<Vec<Mend<'r>>> {
    let segs = &store.commitlog.segments;
    let mut out = Vec::new();
    for d in &report.damaged_headers {
        let Some(fix) = &d.fix else { continue };
        let Some(i) = segs
            .iter()
            .position(|s| d.offset >= s.start && d.offset < s.start.saturating_add(s.len))
        else {
            continue;
        };
        let seg = &segs[i];
        if seg.kind == SegmentKind::Dledger {
            continue; // a replica's entry is never rewritten
        }
        let map = seg.map()?;
        let at = (d.offset - seg.start) as usize;
        if let Ok(Record::Message(m)) = parse_record(&map, at, seg.start, false) {
            if let Some((pos, new)) = field_patch(&m, d.field, &fix.value) {
                let old = m.raw.get(pos..pos + new.len()).unwrap_or_default().to_vec();
                out.push(Mend {
                    header: d,
                    segment: i,
                    at: pos,
                    new,
                    old,
                });
            }
        }
    }
    Ok(out)
}

/// Where the chain of records from the first file breaks: (file index, position, why, whether
/// the file itself is cut or goes whole).
struct ChainBreak(usize, u64, String, bool);

/// The damage bridged in place, and where bridging gave up (per file: the position and why).
#[derive(Default)]
struct Bridging {
    bridges: Vec<Bridge>,
    breaks: BTreeMap<usize, (u64, String)>,
}

impl Bridging {
    /// Nothing bridged: the chain breaks at the first damaged record.
    fn none(report: &Report) -> Self {
        let mut out = Bridging::default();
        if let Some((i, w)) = report
            .walks
            .iter()
            .enumerate()
            .find_map(|(i, w)| w.as_ref().filter(|w| w.stop.is_damage()).map(|w| (i, w)))
        {
            out.breaks.insert(i, (w.stop_pos, stop_reason(w)));
        }
        out
    }
}

/// Bridge the damaged ranges of every file whose walk stops at damage, in commitlog order, up
/// to the first range that cannot be bridged.
fn bridging(store: &Store, report: &Report) -> Result<Bridging> {
    let mut damage = Vec::new();
    let mut out = Bridging::default();
    for (i, w) in report.walks.iter().enumerate() {
        let Some(w) = w.as_ref().filter(|w| w.stop.is_damage()) else {
            continue;
        };
        if store.commitlog.segments[i].kind == SegmentKind::Dledger {
            // Never bridged: the replica's log is cut at its first damage.
            out.breaks.insert(i, (w.stop_pos, stop_reason(w)));
            break;
        }
        let (ranges, broken) = bridge::damage_of(store, i, w)?;
        damage.extend(ranges);
        if let Some(pos) = broken {
            let why = if pos == w.stop_pos {
                stop_reason(w)
            } else {
                "damage that cannot be bridged in place (data ends in it, or it overlaps)".into()
            };
            out.breaks.insert(i, (pos, why));
            break;
        }
    }
    let (mut bridges, failed) = bridge::bridges(store, &damage)?;
    bridge::infer_from_queue_gaps(&mut bridges, &report.queue_breaks);
    if let Some((at, why)) = failed {
        let segs = &store.commitlog.segments;
        if let Some(i) = segs
            .iter()
            .position(|s| at >= s.start && at < s.start.saturating_add(s.len))
        {
            let pos = at - store.commitlog.segments[i].start;
            let e = out.breaks.entry(i).or_insert((pos, why.clone()));
            if pos <= e.0 {
                *e = (pos, why);
            }
        }
    }
    out.bridges = bridges;
    Ok(out)
}

/// True when the queue break at commitlog offset `o` is closed by a tombstone: the record there
/// follows, in its queue, a record a bridge keeps as a tombstone.
fn closed_by_tombstone(store: &Store, o: u64, bridges: &[Bridge]) -> bool {
    let Some(seg) = store.commitlog.segment_for(o) else {
        return false;
    };
    let Ok(map) = seg.map() else { return false };
    let found = match parse_record(&map, (o - seg.start) as usize, seg.start, false) {
        Ok(Record::Message(m)) => Some((m.topic.to_string(), m.queue_id, m.queue_offset)),
        _ => None,
    };
    map.release(0, map.len());
    let Some((topic, q, qo)) = found else {
        return false;
    };
    bridges.iter().flat_map(|b| &b.lost).any(|l| {
        l.replaced_by == "tombstone"
            && l.topic.as_deref() == Some(topic.as_str())
            && l.queue_id == Some(q)
            && l.queue_offset == Some(qo - 1)
    })
}

/// The first place the chain of records from the first file breaks: a missing or unreadable
/// file, an unexplained break in a queue's offsets, a header nothing can mend, a record the
/// recovery walk rejects that is not bridged in place, records past the file size, data ending
/// before later data.
fn chain_break(
    store: &Store,
    report: &crate::engine::check::verify::Report,
    mendable: &[Mend<'_>],
    bridging: &Bridging,
) -> Option<ChainBreak> {
    let segs = &store.commitlog.segments;
    let size = store.geometry.commitlog_file_size.value;
    let in_bridge = |o: u64| {
        bridging
            .bridges
            .iter()
            .any(|b| o >= b.offset && o < b.offset + b.length)
    };
    let unfixable: Vec<&DamagedHeader> = report
        .damaged_headers
        .iter()
        .filter(|d| !mendable.iter().any(|m| std::ptr::eq(m.header, *d)))
        .filter(|d| !in_bridge(d.offset))
        .collect();
    let has_data = |w: Option<&FileWalk>| {
        w.is_some_and(|w| w.records + w.after_records > 0 || !w.problems.is_empty())
    };
    let mut cut: Option<ChainBreak> = None;
    for (i, seg) in segs.iter().enumerate() {
        let walk = report.walks.get(i).and_then(Option::as_ref);
        if i > 0 && seg.start != segs[i - 1].start.saturating_add(size) {
            cut = Some(ChainBreak(
                i,
                0,
                format!(
                    "no commitlog file holds offsets {}..{}",
                    segs[i - 1].start.saturating_add(size),
                    seg.start
                ),
                false,
            ));
            break;
        }
        let Some(w) = walk else {
            cut = Some(ChainBreak(i, 0, "the file cannot be read".into(), false));
            break;
        };
        let limit = seg.len.min(size);
        // Damage bridged in place does not stop the chain: the walk goes on to the file's end.
        let (stop_at, stop_kind) = match (w.stop.is_damage(), bridging.breaks.get(&i)) {
            (false, _) => (w.stop_pos, w.stop),
            (true, Some((pos, _))) => (*pos, StopReason::BadRecord),
            (true, None) => (w.end_pos, w.end),
        };
        let stop = stop_at.min(limit);
        let break_here = report.queue_breaks.iter().map(|g| g.offset).find(|&o| {
            o >= seg.start
                && o < seg.start + stop
                && !closed_by_tombstone(store, o, &bridging.bridges)
        });
        let header_here = unfixable
            .iter()
            .find(|d| d.offset >= seg.start && d.offset < seg.start + stop);
        if let Some(o) = break_here.filter(|&o| header_here.is_none_or(|d| o < d.offset)) {
            cut = Some(ChainBreak(
                i,
                o - seg.start,
                format!(
                    "the record at commitlog offset {o} breaks its queue's offset sequence, and \
                     nothing proves what its queue offset was (the broker's dispatch would \
                     misplace or skip the units from there on)"
                ),
                true,
            ));
            break;
        }
        if let Some(d) = header_here {
            cut = Some(ChainBreak(
                i,
                d.offset - seg.start,
                format!("{}: {} (nothing proves what it was)", d.title(), d.why),
                true,
            ));
            break;
        }
        if let Some((pos, why)) = bridging.breaks.get(&i).filter(|_| w.stop.is_damage()) {
            cut = Some(ChainBreak(i, (*pos).min(limit), why.clone(), true));
            break;
        }
        if stop_at > limit {
            cut = Some(ChainBreak(
                i,
                limit,
                format!("records run past the file size {size}"),
                true,
            ));
            break;
        }
        if stop_kind == StopReason::Blank {
            continue;
        }
        let later =
            (i + 1..segs.len()).any(|j| has_data(report.walks.get(j).and_then(Option::as_ref)));
        if later {
            cut = Some(ChainBreak(i, stop, stop_reason(w), true));
        }
        break;
    }
    cut
}

/// Entries that are not what the broker loads there: folders, FIFOs, symlink loops and foreign
/// names where files belong, files where folders belong, config files too large to read.
fn set_aside_entries(store: &Store) -> Result<Vec<(Entry, String)>> {
    let mut set_aside: Vec<(Entry, String)> = Vec::new();
    for e in &store.commitlog.odd {
        set_aside.push((e.clone(), format!("{} in commitlog/", e.kind.describe())));
    }
    for p in &store.commitlog.foreign {
        set_aside.push((
            entry::probe(p),
            "a file in commitlog/ whose name is not a 20-digit offset".into(),
        ));
    }
    for q in store.queues.values() {
        for e in &q.odd {
            set_aside.push((
                e.clone(),
                format!("{} in a queue folder", e.kind.describe()),
            ));
        }
        for p in &q.foreign {
            set_aside.push((
                entry::probe(p),
                "a file in a queue folder whose name is not a 20-digit offset".into(),
            ));
        }
    }
    for e in store.consumequeue_odd.iter().chain(&store.index_odd) {
        set_aside.push((
            e.clone(),
            format!("{} where the broker expects none", e.kind.describe()),
        ));
    }
    for e in entry::list(&store.root)? {
        let ok = match e.name.as_deref() {
            None => false,
            Some(paths::COMMITLOG | paths::CONSUMEQUEUE | paths::INDEX | paths::CONFIG) => {
                e.kind == Kind::Dir
            }
            Some(paths::CHECKPOINT | paths::ABORT | paths::LOCK) => e.kind.is_file(),
            Some(STAGE_MARKER) => true,
            Some(_) => matches!(e.kind, Kind::File { .. } | Kind::Dir),
        };
        if !ok {
            set_aside.push((
                e,
                "not what the broker keeps under this name in the store root".into(),
            ));
        }
    }
    let config_dir = store.config_dir();
    if entry::probe(&config_dir).kind == Kind::Dir {
        let known = [
            ConsumerOffsets::FILE_NAME,
            TopicConfigs::FILE_NAME,
            SubscriptionGroups::FILE_NAME,
            DelayOffsets::FILE_NAME,
        ];
        for e in entry::list(&config_dir)? {
            let config_file = e.name.as_deref().is_some_and(|n| {
                known
                    .iter()
                    .any(|k| n == *k || n.strip_suffix(".bak") == Some(k))
            });
            let why = match e.kind {
                Kind::File { len } if len > crate::format::config::MAX_CONFIG_BYTES => {
                    Some("too large to be a config file")
                }
                Kind::File { .. } if e.name.is_some() => None,
                Kind::Dir if e.name.is_some() && !config_file => None,
                _ => Some("a config entry that is not a regular file"),
            };
            if let Some(why) = why {
                set_aside.push((e, why.into()));
            }
        }
    }
    Ok(set_aside)
}

/// Config files to write: restored from `.bak`, offsets clamped into the rebuilt queues.
fn plan_config(
    store: &Store,
    bounds: &BTreeMap<(String, i32), (u64, u64)>,
    actions: &mut Vec<Action>,
) -> Result<Vec<ConfigWrite>> {
    let src = store.config_dir();
    let mut out = Vec::new();
    if !src.is_dir() {
        return Ok(out);
    }
    let bound = |topic: &str, q: i32| -> (i64, i64) {
        bounds
            .get(&(topic.to_string(), q))
            .map_or((0, 0), |&(a, b)| (a as i64, b as i64))
    };
    if let Ok(l) = load::<ConsumerOffsets>(&src) {
        let mut value = l.value;
        let mut changed = restored(&l.source, ConsumerOffsets::FILE_NAME, actions);
        for (topic, group, queues) in value.entries() {
            if topic.is_empty() || group.is_empty() || group.contains('@') {
                continue; // no consumer reads it (verify warns)
            }
            for (q, off) in queues {
                let (min, max) = bound(&topic, q);
                let new = off.clamp(min, max.max(min));
                if new != off {
                    value.set(&topic, &group, q, new);
                    changed = true;
                    actions.push(Action {
                        problem: format!(
                            "offset of {group} on {topic}/{q} is {off}, outside the queue ({min}..{max})"
                        ),
                        action: format!("clamp it to {new}"),
                        messages: off.abs_diff(new),
                        bytes: 0,
                    });
                }
            }
        }
        if changed {
            out.push(config_write(&value));
        }
    }
    if let Ok(l) = load::<TopicConfigs>(&src) {
        if restored(&l.source, TopicConfigs::FILE_NAME, actions) {
            out.push(config_write(&l.value));
        }
    }
    if let Ok(l) = load::<SubscriptionGroups>(&src) {
        if restored(&l.source, SubscriptionGroups::FILE_NAME, actions) {
            out.push(config_write(&l.value));
        }
    }
    if let Ok(l) = load::<DelayOffsets>(&src) {
        let mut value = l.value;
        let mut changed = restored(&l.source, DelayOffsets::FILE_NAME, actions);
        let levels: Vec<(i32, i64)> = value.iter().collect();
        for (level, off) in levels {
            let (min, max) = bound(crate::engine::store::dispatch::SCHEDULE_TOPIC, level - 1);
            let new = off.clamp(min, max.max(min));
            if new != off {
                value.set(level, new);
                changed = true;
                actions.push(Action {
                    problem: format!(
                        "delay offset of level {level} is {off}, outside its schedule queue"
                    ),
                    action: format!("clamp it to {new}"),
                    messages: off.abs_diff(new),
                    bytes: 0,
                });
            }
        }
        if changed {
            out.push(config_write(&value));
        }
    }
    Ok(out)
}

fn config_write<T: ConfigFile>(value: &T) -> ConfigWrite {
    ConfigWrite {
        name: T::FILE_NAME,
        bytes: value.to_pretty().into_bytes(),
    }
}

/// When only the `.bak` parsed (or nothing did), say so; the caller rewrites the main file.
fn restored(source: &ConfigSource, name: &str, actions: &mut Vec<Action>) -> bool {
    match source {
        ConfigSource::Backup { reason } => {
            actions.push(Action {
                problem: format!("config/{name} {reason}"),
                action: format!("restore config/{name} from config/{name}.bak"),
                messages: 0,
                bytes: 0,
            });
            true
        }
        ConfigSource::Empty { reason } => {
            actions.push(Action {
                problem: format!("config/{name}: {reason}"),
                action: format!(
                    "write config/{name} with the empty state the broker would start from (the \
                     unusable file is kept)"
                ),
                messages: 0,
                bytes: 0,
            });
            true
        }
        ConfigSource::Main | ConfigSource::Missing => false,
    }
}
