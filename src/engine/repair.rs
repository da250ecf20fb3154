//! Repair: make a damaged store one that `verify` passes and a broker starts on, keeping every
//! byte.
//!
//! [`plan`] reads the store and decides, writing nothing: it runs `verify` and takes its
//! judgement as it is (the walks of the commitlog files, the damaged headers, the entries that
//! are not files), so repair plans from exactly what verify reports. [`apply`] carries a plan out
//! into a new folder (the stage): unchanged files are hard-linked, changed ones written anew,
//! and every byte that does not reach the stage is saved under `repair-<time>/removed/` and
//! listed in `repair-<time>/manifest.json`. Records that still validate past the cut are
//! salvaged to `repair-<time>/salvaged/` (a store) and `repair-<time>/salvaged.jsonl`. The same
//! stage serves `--out` (it is the output) and `--in-place` (it is switched in by one atomic
//! exchange of folders).
//!
//! The commitlog is cut at the first place the chain of records from the first file breaks: a
//! record recovery rejects, a header nothing can mend, a missing or misnamed file, data ending
//! before the last file. Header fields the store proves (see [`super::headers`]) are mended in
//! place instead, keeping the record. Bytes after the end of the data are zeroed (saved first).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::headers::{field_patch, DamagedHeader};
use super::index::IndexNaming;
use super::rebuild::{plan_queues, rebuild_from, Patch, RebuildOptions, Source};
use super::recovery::{FileWalk, StopReason, WalkProblem};
use super::safedir::{link_or_copy, save_range, sync_tree, write_copy, write_new};
use super::store::{paths, Store};
use super::verify::{verify, Report, VerifyOptions};
use super::writer::{StoreWriter, WriterOptions};
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{next_magic, parse_record, Record};
use crate::format::config::{
    load, ConfigFile, ConfigSource, ConsumerOffsets, DelayOffsets, SubscriptionGroups, TopicConfigs,
};
use crate::format::entry::{self, Entry, Kind};
use crate::format::error::{Error, Result};
use crate::format::geometry::{GeometryInputs, GeometryOverrides};
use crate::format::mapped::Mapped;

pub use super::safedir::STAGE_MARKER;

/// One step of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct Action {
    pub problem: String,
    pub action: String,
    /// Messages affected (dropped from the store, salvaged, re-pointed...).
    pub messages: u64,
    /// Bytes moved out of the store into the repair folder.
    pub bytes: u64,
}

/// Where the kept commitlog ends.
#[derive(Debug, Clone, Serialize)]
pub struct Cut {
    /// The file the cut is in (relative to the store root).
    pub file: String,
    /// Position in that file.
    pub position: u64,
    /// Commitlog offset.
    pub offset: u64,
    pub reason: String,
}

/// A header field mended in place.
#[derive(Debug, Clone, Serialize)]
pub struct HeaderRepair {
    /// The commitlog file (relative) and the position of the field's bytes in it.
    pub file: String,
    pub position: u64,
    /// Commitlog offset of the record.
    pub record: u64,
    pub field: &'static str,
    pub was: String,
    pub now: String,
    pub evidence: String,
    /// The field's bytes before and after, in hex.
    pub old_bytes: String,
    pub new_bytes: String,
}

/// A byte range that left the store, and where it was saved.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    /// Path relative to the store root.
    pub file: String,
    pub offset: u64,
    pub length: u64,
    /// Path relative to the repair folder; `None` when the range held only zeros (nothing to
    /// keep) or the entry has no bytes (a FIFO, a folder).
    pub saved_as: Option<String>,
    pub why: String,
}

/// The repair folder's `manifest.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub store: String,
    pub created: String,
    pub cut: Option<Cut>,
    pub actions: Vec<Action>,
    pub headers: Vec<HeaderRepair>,
    pub removed: Vec<Removed>,
    pub salvaged_records: u64,
    pub salvaged_bytes: u64,
    /// Messages of the repaired store's commitlog.
    pub messages_kept: u64,
    pub checkpoint: Option<Checkpoint>,
}

/// What happens to one commitlog file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fate {
    /// Linked unchanged.
    Keep,
    /// Written anew: bytes `0..keep`, zeros to the file size, patches over it; what lies at
    /// `keep..` and is not zero is saved.
    Rewrite { keep: u64 },
    /// Moved whole to the repair folder.
    Out,
}

/// A config file to write, and the action that says why.
#[derive(Debug, Clone)]
struct ConfigWrite {
    name: &'static str,
    text: String,
}

/// Everything a repair would do, worked out without writing anything.
pub struct Plan {
    pub report: Report,
    pub cut: Option<Cut>,
    pub headers: Vec<HeaderRepair>,
    pub actions: Vec<Action>,
    /// Records found after the cut that validate, and their bytes (what salvage keeps).
    pub salvage_records: u64,
    pub salvage_bytes: u64,
    /// Messages the repaired commitlog keeps.
    pub messages_kept: u64,
    fates: Vec<Fate>,
    /// Per commitlog file: (position, bytes) patches of the rewrite.
    file_patches: BTreeMap<usize, Vec<(u64, Vec<u8>)>>,
    patches: Vec<Patch>,
    /// Entries set aside (not regular files, foreign names), relative path and why.
    set_aside: Vec<(Entry, String)>,
    config: Vec<ConfigWrite>,
    rebuild: RebuildOptions,
}

impl Plan {
    /// True when the store needs nothing.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

fn rel(store: &Store, p: &Path) -> String {
    p.strip_prefix(&store.root)
        .unwrap_or(p)
        .display()
        .to_string()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The geometry of `store` as explicit values (the staged store is read with the same sizes).
pub fn fixed_geometry(store: &Store) -> GeometryInputs {
    let g = &store.geometry;
    GeometryInputs {
        flags: GeometryOverrides {
            commitlog_file_size: Some(g.commitlog_file_size.value),
            cq_file_units: Some(g.cq_file_units.value),
            index_slots: Some(g.index_slots.value),
            index_entries: Some(g.index_entries.value),
            delay_levels: Some(g.delay_levels.value.clone()),
        },
        ..Default::default()
    }
}

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
    let report = verify(store, &VerifyOptions::default(), None)?;
    let segs = &store.commitlog.segments;
    let size = store.geometry.commitlog_file_size.value;
    let mut actions = Vec::new();
    let mut fates = vec![Fate::Keep; segs.len()];
    let mut file_patches: BTreeMap<usize, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
    let mut set_aside: Vec<(Entry, String)> = Vec::new();

    // The proven header fixes that fit their field, as (damaged header, file index, patch
    // position in the record, new bytes, old bytes); the other damaged headers cannot be mended.
    let mut mendable = Vec::new();
    for d in &report.damaged_headers {
        let Some(fix) = &d.fix else { continue };
        let Some(i) = segs
            .iter()
            .position(|s| d.offset >= s.start && d.offset < s.start.saturating_add(s.len))
        else {
            continue;
        };
        let seg = &segs[i];
        let map = seg.map()?;
        let at = (d.offset - seg.start) as usize;
        if let Ok(Record::Message(m)) = parse_record(&map, at, seg.start, false) {
            if let Some((pos, new)) = field_patch(&m, d.field, &fix.value) {
                let old = m.raw.get(pos..pos + new.len()).unwrap_or_default().to_vec();
                mendable.push((d, i, pos, new, old));
            }
        }
    }
    // Where the chain of records from the first file breaks.
    let unfixable: Vec<&DamagedHeader> = report
        .damaged_headers
        .iter()
        .filter(|d| !mendable.iter().any(|(m, ..)| std::ptr::eq(*m, *d)))
        .collect();
    let has_data = |w: Option<&FileWalk>| {
        w.is_some_and(|w| w.records + w.after_records > 0 || !w.problems.is_empty())
    };
    // (file, position, reason, whether the file itself is cut or goes whole)
    let mut cut: Option<(usize, u64, String, bool)> = None;
    for (i, seg) in segs.iter().enumerate() {
        let walk = report.walks.get(i).and_then(Option::as_ref);
        if i > 0 && seg.start != segs[i - 1].start.saturating_add(size) {
            cut = Some((
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
            cut = Some((i, 0, "the file cannot be read".into(), false));
            break;
        };
        let limit = seg.len.min(size);
        let stop = w.stop_pos.min(limit);
        let break_here = report
            .queue_breaks
            .iter()
            .find(|&&o| o >= seg.start && o < seg.start + stop)
            .copied();
        let header_here = unfixable
            .iter()
            .find(|d| d.offset >= seg.start && d.offset < seg.start + stop);
        if let Some(o) = break_here.filter(|&o| header_here.is_none_or(|d| o < d.offset)) {
            cut = Some((
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
            cut = Some((
                i,
                d.offset - seg.start,
                format!(
                    "record at commitlog offset {}: {} is {}: {} (nothing proves what it was)",
                    d.offset,
                    d.field.name(),
                    d.found,
                    d.why
                ),
                true,
            ));
            break;
        }
        if w.stop.is_damage() {
            cut = Some((i, stop, stop_reason(w), true));
            break;
        }
        if w.stop_pos > limit {
            cut = Some((
                i,
                limit,
                format!("records run past the file size {size}"),
                true,
            ));
            break;
        }
        if w.stop == StopReason::Blank {
            continue;
        }
        let later =
            (i + 1..segs.len()).any(|j| has_data(report.walks.get(j).and_then(Option::as_ref)));
        if later {
            cut = Some((i, stop, stop_reason(w), true));
        }
        break;
    }
    let cut = cut.map(|(i, pos, reason, within)| {
        let seg = &segs[i];
        fates[i] = if within {
            Fate::Rewrite { keep: pos }
        } else {
            Fate::Out
        };
        for f in fates.iter_mut().skip(i + 1) {
            *f = Fate::Out;
        }
        Cut {
            file: rel(store, &seg.path),
            position: pos,
            offset: seg.start + pos,
            reason,
        }
    });
    let cut_offset = cut.as_ref().map(|c| c.offset);

    // File sizes, dirty tails and blank sizes of the files kept.
    for (i, seg) in segs.iter().enumerate() {
        if fates[i] == Fate::Out {
            continue;
        }
        let w = report.walks.get(i).and_then(Option::as_ref);
        let mut keep = match fates[i] {
            Fate::Rewrite { keep } => keep,
            _ => seg.len,
        };
        if keep > size {
            keep = size;
        }
        if let Some(w) = w {
            // Non-zero bytes after the data: the data's end is kept, the rest zeroed (saved).
            let data_end = match w.stop {
                StopReason::Blank => w.stop_pos + 8,
                _ => w.stop_pos,
            };
            for p in &w.problems {
                match p {
                    WalkProblem::DirtyTail { .. } => keep = keep.min(data_end),
                    WalkProblem::BlankSize { pos, .. } => {
                        let left = size.saturating_sub(*pos) as i32;
                        file_patches
                            .entry(i)
                            .or_default()
                            .push((*pos, left.to_be_bytes().to_vec()));
                    }
                    _ => {}
                }
            }
        }
        let rewrite = keep < seg.len || seg.len != size || file_patches.contains_key(&i);
        if rewrite {
            fates[i] = Fate::Rewrite { keep };
        }
        if seg.len < size {
            actions.push(Action {
                problem: format!("{} is {} bytes, not {size}", rel(store, &seg.path), seg.len),
                action: "extend it with zeros to the configured size".into(),
                messages: 0,
                bytes: 0,
            });
        } else if seg.len > size {
            actions.push(Action {
                problem: format!("{} is {} bytes, not {size}", rel(store, &seg.path), seg.len),
                action: format!(
                    "cut it to {size} bytes; the bytes after that are kept in the repair folder \
                     (zeros are only listed)"
                ),
                messages: 0,
                bytes: seg.len - size,
            });
        }
        if let Some(w) = w {
            if let Some(WalkProblem::DirtyTail { pos, end, .. }) = w
                .problems
                .iter()
                .find(|p| matches!(p, WalkProblem::DirtyTail { .. }))
            {
                if cut.as_ref().is_none_or(|c| c.offset > seg.start + *pos) {
                    actions.push(Action {
                        problem: format!(
                            "{} has non-zero bytes after its data ({}..{})",
                            rel(store, &seg.path),
                            pos,
                            end
                        ),
                        action: "zero them; the bytes are kept in the repair folder".into(),
                        messages: 0,
                        bytes: end - pos,
                    });
                }
            }
            if w.problems
                .iter()
                .any(|p| matches!(p, WalkProblem::BlankSize { .. }))
            {
                actions.push(Action {
                    problem: format!(
                        "{}: the blank record's size is not the bytes left",
                        rel(store, &seg.path)
                    ),
                    action: "write the size the broker writes (the bytes left in the file)".into(),
                    messages: 0,
                    bytes: 0,
                });
            }
        }
    }

    // Header fields the store proves, in the records kept.
    let mut headers = Vec::new();
    let mut patches = Vec::new();
    for (d, i, at, new, old) in mendable {
        let Some(fix) = &d.fix else { continue };
        if cut_offset.is_some_and(|c| d.offset >= c) {
            continue;
        }
        let seg = &segs[i];
        let position = d.offset - seg.start + at as u64;
        headers.push(HeaderRepair {
            file: rel(store, &seg.path),
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
        file_patches.entry(i).or_default().push((position, new));
        if fates[i] == Fate::Keep {
            fates[i] = Fate::Rewrite {
                keep: seg.len.min(size),
            };
        }
        actions.push(Action {
            problem: format!(
                "record at commitlog offset {}: {} is {}",
                d.offset,
                d.field.name(),
                d.found
            ),
            action: format!(
                "write {} {} back ({})",
                d.field.name(),
                fix.value,
                fix.evidence
            ),
            messages: 1,
            bytes: 0,
        });
    }
    patches.sort_by_key(|p| p.record);

    // The cut, the files after it, and what can be salvaged from them.
    let (salvage_records, salvage_bytes) = match &cut {
        Some(c) => {
            let i = segs
                .iter()
                .position(|s| rel(store, &s.path) == c.file)
                .unwrap_or(0);
            salvage_scan(store, i, c.position, |_, _| Ok(()))?
        }
        None => (0, 0),
    };
    if let Some(c) = &cut {
        let moved = fates.iter().filter(|f| **f == Fate::Out).count();
        actions.push(Action {
            problem: format!(
                "commitlog unreadable from {} byte {}: {}",
                c.file, c.position, c.reason
            ),
            action: format!(
                "cut there as the broker's recovery would; move {moved} later file(s) and the \
                 bytes after the cut to the repair folder"
            ),
            messages: 0,
            bytes: 0,
        });
        if salvage_records > 0 {
            actions.push(Action {
                problem: "valid records after the cut".into(),
                action: "salvage them to salvaged/ (a store) and salvaged.jsonl, with original \
                         offsets and ids"
                    .into(),
                messages: salvage_records,
                bytes: salvage_bytes,
            });
        }
    }

    // Entries that are not what the broker loads.
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
    for (e, why) in &set_aside {
        actions.push(Action {
            problem: format!("{}: {why}", rel(store, &e.path)),
            action: "move it to the repair folder (listed in the manifest)".into(),
            messages: 0,
            bytes: e.kind.file_len(),
        });
    }

    // Consume queues and index: rebuilt from the kept records when verify found anything in them
    // or the commitlog changes.
    let commitlog_changes = cut.is_some() || !patches.is_empty();
    let cq_findings = report
        .findings
        .iter()
        .filter(|f| {
            f.code.starts_with("consumequeue.")
                && f.severity > crate::format::finding::Severity::Info
        })
        .count();
    let ix_findings = report
        .findings
        .iter()
        .filter(|f| {
            f.code.starts_with("index.") && f.severity > crate::format::finding::Severity::Info
        })
        .count();
    let rebuild = RebuildOptions::for_geometry(store.geometry.clone());
    let src = Source {
        store,
        end: cut_offset,
        patches: &patches,
    };
    let queues = plan_queues(&src, &rebuild)?;
    let why = |n: usize, what: &str| match (n, commitlog_changes) {
        (0, _) => "the commitlog changes".to_string(),
        (n, false) => format!("verify has {n} {what} finding(s)"),
        (n, true) => format!("verify has {n} {what} finding(s), and the commitlog changes"),
    };
    if commitlog_changes || cq_findings > 0 {
        actions.push(Action {
            problem: why(cq_findings, "consume queue"),
            action: "rebuild every consume queue from the kept records as the broker's dispatch \
                     does; old files that differ are kept in the repair folder"
                .into(),
            messages: 0,
            bytes: 0,
        });
    }
    if commitlog_changes || ix_findings > 0 {
        actions.push(Action {
            problem: why(ix_findings, "index"),
            action: "rebuild the index from the kept records; old files that differ are kept"
                .into(),
            messages: 0,
            bytes: 0,
        });
    }
    if store.abort.present {
        actions.push(Action {
            problem: "abort file present (unclean shutdown)".into(),
            action: "remove it: the repaired store is consistent, a normal recovery is right"
                .into(),
            messages: 0,
            bytes: 0,
        });
    }
    let config = plan_config(store, &queues.queue_bounds, &mut actions)?;
    let cp_findings = report
        .findings
        .iter()
        .filter(|f| f.code.starts_with("checkpoint."))
        .count();
    if cp_findings > 0 || commitlog_changes {
        actions.push(Action {
            problem: why(cp_findings, "checkpoint"),
            action:
                "write the checkpoint from the repaired data (the old one is kept if it differs)"
                    .into(),
            messages: 0,
            bytes: 0,
        });
    }
    Ok(Plan {
        messages_kept: queues.records,
        report,
        cut,
        headers,
        actions,
        salvage_records,
        salvage_bytes,
        fates,
        file_patches,
        patches,
        set_aside,
        config,
        rebuild,
    })
}

/// Call `f` with every record from file `from_seg` position `from_pos` on that validates as a
/// record of its place (a message magic, sizes that add up, PHYSICALOFFSET equal to its position,
/// the body CRC), in one forward pass; returns (records, bytes).
fn salvage_scan(
    store: &Store,
    from_seg: usize,
    from_pos: u64,
    mut f: impl FnMut(&Path, &crate::format::commitlog::MessageRef<'_>) -> Result<()>,
) -> Result<(u64, u64)> {
    let (mut n, mut bytes) = (0u64, 0u64);
    for (i, seg) in store.commitlog.segments.iter().enumerate().skip(from_seg) {
        let map = seg.map()?;
        let mut p = if i == from_seg { from_pos as usize } else { 0 };
        // The record at the cut itself is a candidate too.
        let mut next = Some(p);
        while let Some(start) = next {
            match parse_record(&map, start, seg.start, false) {
                Ok(Record::Message(m))
                    if m.physical_offset == (seg.start + start as u64) as i64
                        && (m.body.is_empty() || m.body_crc_ok()) =>
                {
                    f(&seg.path, &m)?;
                    n += 1;
                    bytes += m.raw.len() as u64;
                    p = start + m.raw.len();
                    next = Some(p);
                    continue;
                }
                Ok(Record::EndOfData) => {
                    // Zeros (or a hole): go on from the next byte that is not zero.
                    next = super::recovery::first_nonzero_from(&map, start, &seg.path)
                        .and_then(|z| next_magic(&map, z.saturating_sub(4).max(start + 1), false));
                    continue;
                }
                _ => {}
            }
            next = next_magic(&map, start + 1, false);
        }
        map.release(0, map.len());
    }
    Ok((n, bytes))
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
            let (min, max) = bound(super::dispatch::SCHEDULE_TOPIC, level - 1);
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
        text: value.to_pretty(),
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

/// Carries a plan out: the repaired store is staged at `stage` (which must not exist), its repair
/// folder at `stage/<repair_name>`. Nothing outside `stage` is written.
pub fn apply(store: &Store, plan: &Plan, stage: &Path, repair_name: &str) -> Result<Manifest> {
    if entry::probe(stage).kind != Kind::Missing {
        return Err(Error::layout(
            stage,
            "already exists: refusing to write over it",
        ));
    }
    std::fs::create_dir_all(stage).map_err(|e| Error::io(stage, e))?;
    write_new(&stage.join(STAGE_MARKER), b"")?;
    let repair = stage.join(repair_name);
    let mut st = Staging {
        store,
        repair: repair.clone(),
        removed: Vec::new(),
        aside: plan.set_aside.iter().map(|(e, _)| e.path.clone()).collect(),
    };
    std::fs::create_dir_all(&repair).map_err(|e| Error::io(&repair, e))?;
    let size = store.geometry.commitlog_file_size.value;

    // Commitlog.
    let cl = stage.join(paths::COMMITLOG);
    std::fs::create_dir_all(&cl).map_err(|e| Error::io(&cl, e))?;
    for (i, seg) in store.commitlog.segments.iter().enumerate() {
        let relp = rel(store, &seg.path);
        let name = seg.path.file_name().map(PathBuf::from).unwrap_or_default();
        match plan.fates.get(i).cloned().unwrap_or(Fate::Keep) {
            Fate::Keep => link_or_copy(&seg.path, &cl.join(&name))?,
            Fate::Out => st.save_whole(&seg.path, "after the commitlog cut")?,
            Fate::Rewrite { keep } => {
                let patches = plan.file_patches.get(&i).cloned().unwrap_or_default();
                for (at, new) in &patches {
                    st.save_part(
                        &seg.path,
                        *at,
                        *at + new.len() as u64,
                        "a header field or blank size rewritten",
                    )?;
                }
                write_copy(&seg.path, &cl.join(&name), keep, size, &patches)?;
                st.save_tail(&seg.path, keep, seg.len, &relp)?;
            }
        }
    }
    let mut m = Manifest {
        store: store.root.display().to_string(),
        created: chrono::Utc::now().to_rfc3339(),
        cut: plan.cut.clone(),
        actions: plan.actions.clone(),
        headers: plan.headers.clone(),
        removed: Vec::new(),
        salvaged_records: 0,
        salvaged_bytes: 0,
        messages_kept: 0,
        checkpoint: None,
    };
    salvage(store, plan, &repair, &mut m)?;

    // Consume queues and index from the kept records, compared with the old ones.
    let src = Source {
        store,
        end: plan.cut.as_ref().map(|c| c.offset),
        patches: &plan.patches,
    };
    let summary = rebuild_from(&src, stage, &plan.rebuild, &|_| {})?;
    m.messages_kept = summary.records;
    st.compare_tree(
        &store.root.join(paths::CONSUMEQUEUE),
        &stage.join(paths::CONSUMEQUEUE),
        "the consume queues were rebuilt",
    )?;
    compare_index(&mut st, stage)?;

    // Checkpoint set to the data.
    let cp = Checkpoint {
        physic_msg_timestamp: summary.last_store_timestamp,
        logics_msg_timestamp: summary.last_queued_timestamp,
        index_msg_timestamp: summary.index_msg_timestamp,
        ..store.checkpoint().ok().flatten().unwrap_or_default()
    };
    let new_cp = cp.to_bytes();
    let cp_path = store.checkpoint_path();
    let old_cp = entry::read_prefix(&cp_path, new_cp.len() as u64 + 1).ok();
    if old_cp.as_deref() != Some(&new_cp[..]) && entry::probe(&cp_path).kind.is_file() {
        st.save_whole(&cp_path, "replaced by a checkpoint of the repaired data")?;
    }
    write_new(&stage.join(paths::CHECKPOINT), &new_cp)?;
    m.checkpoint = Some(cp);
    if store.abort.present && entry::probe(&store.root.join(paths::ABORT)).kind.is_file() {
        st.save_whole(
            &store.root.join(paths::ABORT),
            "the repaired store is consistent",
        )?;
    }
    for (e, why) in &plan.set_aside {
        st.set_aside(e, why)?;
    }
    copy_others(store, stage, &mut st)?;
    copy_config(store, stage, plan, &mut st)?;
    m.removed = std::mem::take(&mut st.removed);
    let text = serde_json::to_string_pretty(&m).unwrap_or_default();
    write_new(&repair.join("manifest.json"), text.as_bytes())?;
    sync_tree(stage)?;
    Ok(m)
}

/// The repair folder being filled, and the list of what left the store.
struct Staging<'a> {
    store: &'a Store,
    repair: PathBuf,
    removed: Vec<Removed>,
    /// Entries the plan sets aside: never copied into the stage.
    aside: Vec<PathBuf>,
}

impl Staging<'_> {
    fn saved_path(&self, relp: &str, suffix: &str) -> (PathBuf, String) {
        let saved = format!("removed/{relp}{suffix}");
        (self.repair.join(&saved), saved)
    }

    /// A whole file of the store, kept in the repair folder by a hard link.
    fn save_whole(&mut self, p: &Path, why: &str) -> Result<()> {
        let relp = rel(self.store, p);
        let (dst, saved) = self.saved_path(&relp, "");
        let len = entry::probe(p).kind.file_len();
        link_or_copy(p, &dst)?;
        self.removed.push(Removed {
            file: relp,
            offset: 0,
            length: len,
            saved_as: Some(saved),
            why: why.into(),
        });
        Ok(())
    }

    /// Bytes `from..to` of a file, copied into the repair folder.
    fn save_part(&mut self, p: &Path, from: u64, to: u64, why: &str) -> Result<()> {
        let relp = rel(self.store, p);
        let (dst, saved) = self.saved_path(&relp, &format!(".at-{from}"));
        save_range(p, from, to, &dst)?;
        self.removed.push(Removed {
            file: relp,
            offset: from,
            length: to - from,
            saved_as: Some(saved),
            why: why.into(),
        });
        Ok(())
    }

    /// What a rewritten file does not keep after `keep`: data saved, zeros only listed.
    fn save_tail(&mut self, p: &Path, keep: u64, len: u64, relp: &str) -> Result<()> {
        if keep >= len {
            return Ok(());
        }
        let f = entry::open_regular(p)?;
        let map = Mapped::open(p)?;
        let mut listed_to = keep;
        for (a, b) in super::safedir::data_ranges(&f, len) {
            let (a, b) = (a.max(keep), b);
            if b <= a {
                continue;
            }
            // Trim zeros at both ends of the data range: they need no copy.
            let bytes = map.get(a as usize..b as usize).unwrap_or_default();
            let Some(first) = bytes.iter().position(|&x| x != 0) else {
                continue;
            };
            let last = bytes.iter().rposition(|&x| x != 0).unwrap_or(first);
            let (s, e) = (a + first as u64, a + last as u64 + 1);
            if s > listed_to {
                self.zeros(relp, listed_to, s);
            }
            self.save_part(p, s, e, "after the end of the kept data")?;
            listed_to = e;
        }
        if len > listed_to {
            self.zeros(relp, listed_to, len);
        }
        map.release(0, map.len());
        Ok(())
    }

    fn zeros(&mut self, relp: &str, from: u64, to: u64) {
        self.removed.push(Removed {
            file: relp.to_string(),
            offset: from,
            length: to - from,
            saved_as: None,
            why: "zeros after the end of the kept data".into(),
        });
    }

    /// An entry that is not a regular file, or a foreign one: kept in the repair folder when it
    /// has content that can be linked (files, symlinks), listed in any case.
    fn set_aside(&mut self, e: &Entry, why: &str) -> Result<()> {
        let relp = rel(self.store, &e.path);
        let saved = if e.kind.is_file() || e.symlink {
            let (dst, saved) = self.saved_path(&relp, "");
            link_or_copy(&e.path, &dst)?;
            Some(saved)
        } else if e.kind == Kind::Dir {
            let (dst, saved) = self.saved_path(&relp, "");
            self.link_tree(&e.path, &dst)?;
            Some(saved)
        } else {
            None
        };
        self.removed.push(Removed {
            file: relp,
            offset: 0,
            length: e.kind.file_len(),
            saved_as: saved,
            why: why.into(),
        });
        Ok(())
    }

    /// Every regular file below `old` that is not byte-identical at the same path below `new` is
    /// saved; `new` is the rebuilt tree.
    fn is_aside(&self, p: &Path) -> bool {
        self.aside.iter().any(|a| p.starts_with(a))
    }

    /// Link every file of the tree `from` into `to` (folders made, symlinks linked as
    /// themselves, symlinked folders not followed); what cannot be linked (FIFOs, devices) is
    /// listed as removed.
    fn link_tree(&mut self, from: &Path, to: &Path) -> Result<()> {
        std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
        for e in entry::list(from)? {
            let Some(name) = e.path.file_name() else {
                continue;
            };
            let dst = to.join(name);
            if e.symlink {
                link_or_copy(&e.path, &dst)?;
                continue;
            }
            match e.kind {
                Kind::Dir => self.link_tree(&e.path, &dst)?,
                Kind::File { .. } => link_or_copy(&e.path, &dst)?,
                k => self.removed.push(Removed {
                    file: rel(self.store, &e.path),
                    offset: 0,
                    length: 0,
                    saved_as: None,
                    why: format!("{}: has no bytes to keep", k.describe()),
                }),
            }
        }
        Ok(())
    }

    fn compare_tree(&mut self, old: &Path, new: &Path, why: &str) -> Result<()> {
        for (r, p) in files_below(old)? {
            if self.is_aside(&p) {
                continue;
            }
            if !same_bytes(&p, &new.join(&r))? {
                self.save_whole(&p, why)?;
            }
        }
        Ok(())
    }
}

/// Relative path -> path of every regular file below `dir` (symlinks to files included,
/// symlinked folders not followed: the walk cannot loop).
fn files_below(dir: &Path) -> Result<BTreeMap<PathBuf, PathBuf>> {
    let mut out = BTreeMap::new();
    if entry::probe(dir).kind != Kind::Dir {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in entry::list(&d)? {
            match e.kind {
                Kind::Dir if !e.symlink => stack.push(e.path.clone()),
                Kind::File { .. } => {
                    if let Ok(r) = e.path.strip_prefix(dir) {
                        out.insert(r.to_path_buf(), e.path.clone());
                    }
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// Byte-identical files (compared through their maps, a page at a time); a missing `b` differs.
fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    if !entry::probe(b).kind.is_file() {
        return Ok(false);
    }
    let (x, y) = (Mapped::open(a)?, Mapped::open(b)?);
    Ok(x.len() == y.len()
        && x.chunks(1 << 20)
            .zip(y.chunks(1 << 20))
            .all(|(p, q)| p == q))
}

/// The index: when the rebuilt files are identical to the old ones the broker's own files (and
/// names) are kept; otherwise the old ones are saved.
fn compare_index(st: &mut Staging<'_>, stage: &Path) -> Result<()> {
    let store = st.store;
    let new_dir = stage.join(paths::INDEX);
    let new: Vec<PathBuf> = files_below(&new_dir)?.into_values().collect();
    let old = &store.index_files;
    let mut same = old.len() == new.len();
    for (a, b) in old.iter().zip(&new) {
        if !same || !same_bytes(a, b)? {
            same = false;
            break;
        }
    }
    if same {
        for p in &new {
            std::fs::remove_file(p).map_err(|e| Error::io(p, e))?;
        }
        for p in old {
            if let Some(n) = p.file_name() {
                link_or_copy(p, &new_dir.join(n))?;
            }
        }
        return Ok(());
    }
    for p in old {
        st.save_whole(p, "the index was rebuilt")?;
    }
    Ok(())
}

/// Everything else under the root (lock, compaction/, abort.bak, timerlog/, earlier repair
/// folders, ...) goes along unchanged, linked.
fn copy_others(store: &Store, stage: &Path, st: &mut Staging<'_>) -> Result<()> {
    let skip = [
        paths::COMMITLOG,
        paths::CONSUMEQUEUE,
        paths::INDEX,
        paths::CHECKPOINT,
        paths::ABORT,
        paths::CONFIG,
        STAGE_MARKER,
    ];
    for e in entry::list(&store.root)? {
        let Some(name) = e.name.clone() else { continue };
        if skip.contains(&name.as_str()) || st.is_aside(&e.path) {
            continue;
        }
        let dst = stage.join(&name);
        if e.symlink || e.kind.is_file() {
            link_or_copy(&e.path, &dst)?;
        } else if e.kind == Kind::Dir {
            st.link_tree(&e.path, &dst)?;
        }
    }
    Ok(())
}

/// Config: copied (never linked: the broker rewrites them by rename anyway), the planned files
/// written instead of their copies (the old ones saved).
fn copy_config(store: &Store, stage: &Path, plan: &Plan, st: &mut Staging<'_>) -> Result<()> {
    let src = store.config_dir();
    let dst = stage.join(paths::CONFIG);
    if entry::probe(&src).kind != Kind::Dir {
        return Ok(());
    }
    std::fs::create_dir_all(&dst).map_err(|e| Error::io(&dst, e))?;
    let writes: BTreeMap<&str, &str> = plan
        .config
        .iter()
        .map(|w| (w.name, w.text.as_str()))
        .collect();
    for e in entry::list(&src)? {
        let Some(name) = e.name.clone() else { continue };
        if st.is_aside(&e.path) {
            continue;
        }
        match e.kind {
            Kind::File { len } => {
                if writes.contains_key(name.as_str()) {
                    st.save_whole(&e.path, "replaced by a repaired config file")?;
                } else {
                    write_copy(&e.path, &dst.join(&name), len, len, &[])?;
                }
            }
            Kind::Dir => st.link_tree(&e.path, &dst.join(&name))?,
            _ => {}
        }
    }
    for (name, text) in writes {
        write_new(&dst.join(name), text.as_bytes())?;
    }
    Ok(())
}

/// Salvage the records after the cut into `repair/salvaged/` (a store) and `salvaged.jsonl`.
fn salvage(store: &Store, plan: &Plan, repair: &Path, m: &mut Manifest) -> Result<()> {
    let Some(c) = &plan.cut else { return Ok(()) };
    let Some(i) = store
        .commitlog
        .segments
        .iter()
        .position(|s| rel(store, &s.path) == c.file)
    else {
        return Ok(());
    };
    let jsonl_path = repair.join("salvaged.jsonl");
    let mut writer: Option<StoreWriter> = None;
    let mut jsonl: Option<std::io::BufWriter<std::fs::File>> = None;
    let (n, bytes) = salvage_scan(store, i, c.position, |path, r| {
        let w = match writer.as_mut() {
            Some(w) => w,
            None => writer.insert(StoreWriter::create(
                &repair.join("salvaged"),
                WriterOptions {
                    geometry: store.geometry.clone(),
                    consumequeue: true,
                    index: true,
                    index_naming: IndexNaming::Local,
                },
            )?),
        };
        w.append(r.to_owned_message())?;
        let j = match jsonl.as_mut() {
            Some(j) => j,
            None => jsonl.insert(std::io::BufWriter::new(super::safedir::create_new(
                &jsonl_path,
            )?)),
        };
        let line =
            super::message_json::MessageJson::new(r, path, super::message_json::BodyMode::Base64);
        serde_json::to_writer(&mut *j, &line).map_err(|e| Error::io(&jsonl_path, e.into()))?;
        j.write_all(b"\n").map_err(|e| Error::io(&jsonl_path, e))
    })?;
    if let Some(w) = writer {
        w.finish()?;
    }
    if let Some(mut j) = jsonl {
        j.flush().map_err(|e| Error::io(&jsonl_path, e))?;
        j.get_ref()
            .sync_all()
            .map_err(|e| Error::io(&jsonl_path, e))?;
    }
    m.salvaged_records = n;
    m.salvaged_bytes = bytes;
    Ok(())
}
