//! Carrying a plan out: the repaired store staged in a new folder, every byte that does not
//! reach it saved in the repair folder and listed in the manifest.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{rel, salvage_scan, Fate, Manifest, Plan, Removed, STAGE_MARKER};
use crate::engine::check::rebuild::{rebuild_from, Insert, Source};
use crate::engine::check::recovery::StopReason;
use crate::engine::store::index_builder::{IndexBuilder, IndexNaming};
use crate::engine::store::safedir::{link_or_copy, sync_tree, write_copy, write_new};
use crate::engine::store::writer::{StoreWriter, WriterOptions};
use crate::engine::store::{paths, Store};
use crate::format::checkpoint::Checkpoint;
use crate::format::config::{ConfigFile, ConsumerOffsets, SubscriptionGroups, TopicConfigs};
use crate::format::entry::{self, Entry, Kind};
use crate::format::error::{Error, RepairError, Result, WritePathError};
use crate::format::indexfile::write::IndexRecord;
use crate::format::mapped::Mapped;

/// Carries a plan out: the repaired store is staged at `stage` (which must not exist), its repair
/// folder at `stage/<repair_name>`. Nothing outside `stage` is written.
pub fn apply(store: &Store, plan: &Plan, stage: &Path, repair_name: &str) -> Result<Manifest> {
    if entry::probe(stage).kind != Kind::Missing {
        return Err(WritePathError::AlreadyExists {
            path: stage.to_path_buf(),
        }
        .into());
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
    // The salvage writes a store of its own in the repair folder: on a thread of its own, beside
    // the copy and rebuild of the kept store (both stream over the commitlog).
    let (salvaged, m) = std::thread::scope(|s| {
        let salvaging = s.spawn(|| salvage(store, plan, &repair));
        let kept = stage_kept(store, plan, stage, &mut st);
        let salvaged = salvaging
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (salvaged, kept)
    });
    let mut m = m?;
    (m.salvaged_records, m.salvaged_bytes) = salvaged?;
    m.removed = std::mem::take(&mut st.removed);
    let text = serde_json::to_string_pretty(&m).unwrap_or_default();
    write_new(&repair.join("manifest.json"), text.as_bytes())?;
    stopped(store, plan)?;
    sync_tree(stage)?;
    stopped(store, plan)?;
    Ok(m)
}

/// The run was interrupted: every step that takes long (each commitlog file, the comparisons, the
/// copies, the fsync) checks it, so that the stage is removed promptly, before a supervisor that
/// sent SIGTERM follows with SIGKILL.
fn stopped(store: &Store, plan: &Plan) -> Result<()> {
    if plan.rebuild.interrupted() {
        return Err(Error::interrupted(&store.root, "repair"));
    }
    Ok(())
}

/// Everything of the stage but the salvage: the kept commitlog, queues and index rebuilt from
/// it, the checkpoint, what is set aside, the other files and the config.
fn stage_kept(store: &Store, plan: &Plan, stage: &Path, st: &mut Staging<'_>) -> Result<Manifest> {
    let size = store.geometry.commitlog_file_size.value;
    let inserts: Vec<Insert> = plan.bridges.iter().map(|b| b.insert()).collect();

    // Commitlog.
    let cl = stage.join(paths::COMMITLOG);
    if store.dledger.is_none() || store.commitlog.dir.is_dir() {
        std::fs::create_dir_all(&cl).map_err(|e| Error::io(&cl, e))?;
    }
    for (i, seg) in store.commitlog.segments.iter().enumerate() {
        stopped(store, plan)?;
        let relp = rel(store, &seg.path);
        // A DLedger data file goes to its own folder (`dledger-<selfId>/data/`).
        let cl = match seg.kind {
            crate::format::commitlog::SegmentKind::Dledger => {
                let d = stage.join(&relp);
                let d = d.parent().map(Path::to_path_buf).unwrap_or(d);
                std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
                d
            }
            crate::format::commitlog::SegmentKind::Commitlog => cl.clone(),
        };
        let name = seg.path.file_name().map(PathBuf::from).unwrap_or_default();
        match plan.fates.get(i).cloned().unwrap_or(Fate::Keep) {
            // A file that ends in a blank record is full: no broker writes to it again, so the
            // repaired store and the original can share it. A broker appends to the file where
            // the data ends (and the empty ones after it): those are copied, so that a broker
            // running on the repaired store never changes the original's bytes.
            Fate::Keep if ends_full(plan, i) => link_or_copy(&seg.path, &cl.join(&name))?,
            Fate::Keep => write_copy(&seg.path, &cl.join(&name), seg.len, seg.len, &[])?,
            Fate::Out => st.save_whole(&seg.path, "after the commitlog cut")?,
            Fate::Rewrite { keep } => {
                let mut patches = plan.file_patches.get(&i).cloned().unwrap_or_default();
                for (at, new) in &patches {
                    st.save_part(
                        &seg.path,
                        *at,
                        *at + new.len() as u64,
                        "a header field or blank size rewritten",
                    )?;
                }
                for (b, ins) in plan.bridges.iter().zip(&inserts) {
                    if b.segment != i {
                        continue;
                    }
                    st.save_part(
                        &seg.path,
                        b.position,
                        b.position + b.length,
                        &format!(
                            "damaged ({}): replaced in place by {} tombstone(s) and {} filler(s)",
                            b.why, b.tombstones, b.fillers
                        ),
                    )?;
                    patches.push((b.position, ins.bytes.clone()));
                }
                write_copy(&seg.path, &cl.join(&name), keep, size, &patches)?;
                let at_cut = plan
                    .cut
                    .as_ref()
                    .is_some_and(|c| c.file == relp && c.position == keep);
                st.save_tail(&seg.path, keep, seg.len, &relp, at_cut)?;
            }
        }
    }
    let mut m = Manifest {
        store: store.root.display().to_string(),
        created: chrono::Utc::now().to_rfc3339(),
        cut: plan.cut.clone(),
        bridges: plan.bridges.clone(),
        cut_lost: plan.cut_lost.clone(),
        actions: plan.actions.clone(),
        headers: plan.headers.clone(),
        removed: Vec::new(),
        salvaged_records: 0,
        salvaged_bytes: 0,
        messages_kept: 0,
        checkpoint: None,
        dledger: plan.dledger.clone(),
    };

    // Consume queues and index from the kept records, compared with the old ones.
    let src = Source {
        store,
        end: plan.cut.as_ref().map(|c| c.offset),
        patches: &plan.patches,
        inserts: &inserts,
    };
    let summary = rebuild_from(&src, stage, &plan.rebuild, &|_| {})?;
    m.messages_kept = summary.records;
    stopped(store, plan)?;
    st.compare_tree(
        &store.root.join(paths::CONSUMEQUEUE),
        &stage.join(paths::CONSUMEQUEUE),
        "the consume queues were rebuilt",
    )?;
    stopped(store, plan)?;
    compare_index(st, stage)?;
    stopped(store, plan)?;

    // Checkpoint set to the data: its times from the kept records, its offsets within them.
    let old = store.checkpoint().ok().flatten().unwrap_or_default();
    let cp = Checkpoint {
        physic_msg_timestamp: summary.last_store_timestamp,
        logics_msg_timestamp: summary.last_queued_timestamp,
        index_msg_timestamp: summary.index_msg_timestamp,
        master_flushed_offset: within(old.master_flushed_offset, summary.end_offset).unwrap_or(0),
        confirm_phy_offset: within(old.confirm_phy_offset, summary.end_offset)
            .filter(|_| !confirm_offset_judged(plan))
            .unwrap_or(summary.end_offset as i64),
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
    stopped(store, plan)?;
    let timer_written = super::timer::TimerPlan::written(plan.timer.as_ref());
    let mut written: Vec<&str> = timer_written.to_vec();
    let dledger_dir = store
        .dledger
        .as_ref()
        .and_then(|l| l.dir.file_name())
        .and_then(|n| n.to_str());
    if let (Some(l), Some(d), Some(n)) = (&store.dledger, &plan.dledger, dledger_dir) {
        super::dledger::stage(store, l, plan, d, stage, st)?;
        written.push(n);
    }
    copy_others(store, stage, st, &written)?;
    if let Some(t) = &plan.timer {
        super::timer::stage(store, t, stage, st)?;
    }
    copy_config(store, stage, plan, st)?;
    stopped(store, plan)?;
    Ok(m)
}

/// `offset` when it lies within the kept data (`0..=end`).
fn within(offset: i64, end: u64) -> Option<i64> {
    (0..=end as i64).contains(&offset).then_some(offset)
}

/// Did verify find the checkpoint's confirmPhyOffset ahead of the data or off a record?
fn confirm_offset_judged(plan: &Plan) -> bool {
    use crate::format::finding::Code;
    plan.report.findings.iter().any(|f| {
        matches!(
            f.code,
            Code::CheckpointAhead | Code::CheckpointConfirmOffset
        ) && f.offset == 32
    })
}

/// Did the broker's walk leave commitlog file `i` at a blank record (the file is full)?
fn ends_full(plan: &Plan, i: usize) -> bool {
    plan.report
        .walks
        .get(i)
        .and_then(Option::as_ref)
        .is_some_and(|w| w.stop == StopReason::Blank)
}

/// The repair folder being filled, and the list of what left the store.
pub(super) struct Staging<'a> {
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
    pub(super) fn save_whole(&mut self, p: &Path, why: &str) -> Result<()> {
        let relp = rel(self.store, p);
        let (dst, saved) = self.saved_path(&relp, "");
        let len = entry::probe(p).kind.file_len();
        link_or_copy(p, &dst)?;
        self.removed.push(Removed {
            file: relp,
            offset: 0,
            length: len,
            saved_as: Some(saved),
            saved_offset: 0,
            why: why.into(),
        });
        Ok(())
    }

    /// Bytes `from..to` of a file that is rewritten: the file as it was is kept whole in the
    /// repair folder (a hard link, made once) and the range is listed as a part of it.
    fn save_part(&mut self, p: &Path, from: u64, to: u64, why: &str) -> Result<()> {
        let relp = rel(self.store, p);
        let (dst, saved) = self.saved_path(&relp, "");
        if entry::probe(&dst).kind == Kind::Missing {
            link_or_copy(p, &dst)?;
        }
        self.removed.push(Removed {
            file: relp,
            offset: from,
            length: to - from,
            saved_as: Some(saved),
            saved_offset: from,
            why: why.into(),
        });
        Ok(())
    }

    /// What a rewritten file does not keep after `keep`: data saved, zeros only listed.
    pub(super) fn save_tail(
        &mut self,
        p: &Path,
        keep: u64,
        len: u64,
        relp: &str,
        at_cut: bool,
    ) -> Result<()> {
        if keep >= len {
            return Ok(());
        }
        let f = entry::open_regular(p)?;
        let map = Mapped::open(p)?;
        let mut listed_to = keep;
        for (a, b) in crate::engine::store::safedir::data_ranges(&f, len) {
            let (a, b) = (a.max(keep), b);
            if b <= a {
                continue;
            }
            // Trim zeros at both ends of the data range: they need no copy. The bytes right at
            // the cut are the start of the first record dropped: kept as they are, zeros or not.
            let bytes = map.get(a as usize..b as usize).unwrap_or_default();
            let Some(first) = bytes.iter().position(|&x| x != 0) else {
                continue;
            };
            let first = if at_cut && a == keep { 0 } else { first };
            let last = bytes.iter().rposition(|&x| x != 0).unwrap_or(first);
            let (s, e) = (a + first as u64, a + last as u64 + 1);
            if s > listed_to {
                self.zeros(relp, listed_to, s);
            }
            let why = if at_cut && s == keep {
                "the commitlog from the cut on (the record at the cut first)"
            } else if at_cut {
                "data after the cut"
            } else {
                "non-zero bytes after the end of the data"
            };
            self.save_part(p, s, e, why)?;
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
            saved_offset: 0,
            why: "zeros after the end of the data (unused file space)".into(),
        });
    }

    /// An entry that is not a regular file, or a foreign one: kept in the repair folder when it
    /// has content that can be linked (files, symlinks), listed in any case.
    pub(super) fn set_aside(&mut self, e: &Entry, why: &str) -> Result<()> {
        let relp = rel(self.store, &e.path);
        let saved = if e.kind.is_file() || e.symlink {
            let (dst, saved) = self.saved_path(&relp, "");
            link_or_copy(&e.path, &dst)?;
            Some(saved)
        } else if e.kind == Kind::Dir {
            let (dst, saved) = self.saved_path(&relp, "");
            self.link_tree(&e.path, &dst, false)?;
            Some(saved)
        } else {
            None
        };
        self.removed.push(Removed {
            file: relp,
            offset: 0,
            length: e.kind.file_len(),
            saved_as: saved,
            saved_offset: 0,
            why: why.into(),
        });
        Ok(())
    }

    /// Every regular file below `old` that is not byte-identical at the same path below `new` is
    /// saved; `new` is the rebuilt tree.
    pub(super) fn is_aside(&self, p: &Path) -> bool {
        self.aside.iter().any(|a| p.starts_with(a))
    }

    /// Link every file of the tree `from` into `to`, or copy them with `copy` (folders made,
    /// symlinks linked as themselves, symlinked folders not followed); what cannot be linked
    /// (FIFOs, devices) is listed as removed.
    pub(super) fn link_tree(&mut self, from: &Path, to: &Path, copy: bool) -> Result<()> {
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
                Kind::Dir => self.link_tree(&e.path, &dst, copy)?,
                Kind::File { len } if copy => write_copy(&e.path, &dst, len, len, &[])?,
                Kind::File { .. } => link_or_copy(&e.path, &dst)?,
                k => self.removed.push(Removed {
                    file: rel(self.store, &e.path),
                    offset: 0,
                    length: 0,
                    saved_as: None,
                    saved_offset: 0,
                    why: format!("{}: has no bytes to keep", k.describe()),
                }),
            }
        }
        Ok(())
    }

    pub(super) fn compare_tree(&mut self, old: &Path, new: &Path, why: &str) -> Result<()> {
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
        // The broker puts keys into the newest file: that one is copied, the others shared.
        for (k, p) in old.iter().enumerate() {
            if let Some(n) = p.file_name() {
                if k + 1 == old.len() {
                    let len = entry::probe(p).kind.file_len();
                    write_copy(p, &new_dir.join(n), len, len, &[])?;
                } else {
                    link_or_copy(p, &new_dir.join(n))?;
                }
            }
        }
        return Ok(());
    }
    for p in old {
        st.save_whole(p, "the index was rebuilt")?;
    }
    Ok(())
}

/// Everything else under the root (lock, compaction/, abort.bak, timerlog/, timerwheel, earlier
/// repair folders, ...) goes along unchanged: copied, since a broker may write into any of them
/// in place, but for earlier repair folders, which no broker writes (linked). The entries named
/// in `written` are left out: the stage writes them itself.
fn copy_others(store: &Store, stage: &Path, st: &mut Staging<'_>, written: &[&str]) -> Result<()> {
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
        if skip.contains(&name.as_str()) || written.contains(&name.as_str()) || st.is_aside(&e.path)
        {
            continue;
        }
        let dst = stage.join(&name);
        let ours = name.starts_with("repair-");
        if e.symlink || (ours && e.kind.is_file()) {
            link_or_copy(&e.path, &dst)?;
        } else if e.kind.is_file() {
            let len = e.kind.file_len();
            write_copy(&e.path, &dst, len, len, &[])?;
        } else if e.kind == Kind::Dir {
            st.link_tree(&e.path, &dst, !ours)?;
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
    let writes: BTreeMap<&str, &[u8]> = plan
        .config
        .iter()
        .map(|w| (w.name, w.bytes.as_slice()))
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
            Kind::Dir => st.link_tree(&e.path, &dst.join(&name), false)?,
            _ => {}
        }
    }
    for (name, bytes) in writes {
        write_new(&dst.join(name), bytes)?;
    }
    Ok(())
}

/// One line of `salvaged.jsonl`: where a salvaged record was, where it is in the salvage
/// store, and what finds it (ids, keys, tags). The body is in the salvage store only.
#[derive(Serialize)]
struct SalvagedLine<'a> {
    file: &'a str,
    commitlog_offset: u64,
    salvaged_offset: u64,
    size: i32,
    topic: &'a str,
    queue_id: i32,
    queue_offset: i64,
    /// The broker gives the record a consume queue unit at `queue_offset` (false for
    /// transaction half and rollback records: they were never in a queue).
    queued: bool,
    msg_id: String,
    uniq_key: Option<Cow<'a, str>>,
    keys: Vec<String>,
    tags: Option<Cow<'a, str>>,
    store_timestamp: i64,
}

/// A salvaged record as the scan hands it to the listing: its commitlog file (an index into
/// the store's segments), its position there, its offset in the salvage store.
type Salvaged = (usize, u64, u64);

/// Salvaged records handed from the scan to the listing at a time.
const SALVAGE_BATCH: usize = 4096;

/// Salvage the records after the cut into `repair/salvaged/` (a store) and `salvaged.jsonl`.
/// The scan writes the salvage store's commitlog and queues; a second thread reads each
/// salvaged record again to index it and list it, fed in batches over a bounded channel.
fn salvage(store: &Store, plan: &Plan, repair: &Path) -> Result<(u64, u64)> {
    let Some(c) = &plan.cut else {
        return Ok((0, 0));
    };
    let Some(i) = store
        .commitlog
        .segments
        .iter()
        .position(|s| rel(store, &s.path) == c.file)
    else {
        return Ok((0, 0));
    };
    let root = repair.join("salvaged");
    let mut offsets = GroupOffsets::of(store);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Salvaged>>(4);
    let done = std::thread::scope(|s| {
        let listing = s.spawn(|| list_salvaged(store, rx, &root, repair));
        let scanned = scan_salvage(store, plan, i, c.position, &root, tx, &mut offsets);
        let listed = listing
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        let (n, bytes, cp) = scanned?;
        if let (Some(mut cp), Some(index_ts)) = (cp, listed?) {
            // The writer wrote its checkpoint without an index: the listing built it.
            cp.index_msg_timestamp = index_ts;
            crate::engine::store::writer::write_synced(
                &root.join(paths::CHECKPOINT),
                &cp.to_bytes(),
            )?;
        }
        Ok::<_, Error>((n, bytes))
    })?;
    if done.0 > 0 {
        offsets.write(store, &root)?;
    }
    Ok(done)
}

/// A group, its committed offset in the original queue, its offset in the salvaged queue (-1
/// while none of the queue's records was salvaged).
type GroupOffset = (String, i64, i64);

/// The groups' committed offsets, translated to the salvage store's queues: a group's offset on
/// a salvaged queue is the number of its salvaged records the group had consumed (those below
/// its committed offset in the original queue), so `export --group` on the salvage store hands
/// over only what the group still needs.
struct GroupOffsets {
    /// (topic, queue id) -> (group, committed offset in the original store, translated offset).
    by_queue: HashMap<(String, i32), Vec<GroupOffset>>,
}

impl GroupOffsets {
    fn of(store: &Store) -> Self {
        let mut by_queue: HashMap<(String, i32), Vec<GroupOffset>> = HashMap::new();
        if let Ok(l) = crate::format::config::load::<ConsumerOffsets>(&store.config_dir()) {
            for (topic, group, queues) in l.value.iter() {
                if topic.is_empty() || group.is_empty() {
                    continue;
                }
                for &(q, off) in queues {
                    by_queue.entry((topic.to_string(), q)).or_default().push((
                        group.to_string(),
                        off,
                        -1,
                    ));
                }
            }
        }
        GroupOffsets { by_queue }
    }

    /// A record salvaged from queue offset `was` of its queue to `now` of the salvage store's.
    fn salvaged(&mut self, topic: &str, queue_id: i32, was: i64, now: i64) {
        let Some(groups) = self.by_queue.get_mut(&(topic.to_string(), queue_id)) else {
            return;
        };
        for (_, committed, translated) in groups {
            // A record the group consumed moves its offset past it; one it did not, not.
            let past = if was < *committed { now + 1 } else { 0 };
            *translated = (*translated).max(past);
        }
    }

    /// `config/consumerOffset.json` of the salvage store (and the topics and groups as they are).
    fn write(&self, store: &Store, root: &Path) -> Result<()> {
        let mut out = ConsumerOffsets::new();
        let mut rows: Vec<(&String, &i32, &String, i64)> = self
            .by_queue
            .iter()
            .flat_map(|((t, q), gs)| {
                gs.iter()
                    .filter(|g| g.2 >= 0)
                    .map(move |(g, _, n)| (t, q, g, *n))
            })
            .collect();
        rows.sort();
        for (t, q, g, n) in rows {
            out.set(t, g, *q, n);
        }
        let dir = root.join(paths::CONFIG);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        write_new(
            &dir.join(ConsumerOffsets::FILE_NAME),
            out.to_pretty().as_bytes(),
        )?;
        let src = store.config_dir();
        if let Ok(l) = crate::format::config::load::<TopicConfigs>(&src) {
            write_new(
                &dir.join(TopicConfigs::FILE_NAME),
                l.value.to_pretty().as_bytes(),
            )?;
        }
        if let Ok(l) = crate::format::config::load::<SubscriptionGroups>(&src) {
            write_new(
                &dir.join(SubscriptionGroups::FILE_NAME),
                l.value.to_pretty().as_bytes(),
            )?;
        }
        Ok(())
    }
}

/// The scan: each salvaged record appended to the salvage store and sent to the listing.
fn scan_salvage(
    store: &Store,
    plan: &Plan,
    seg: usize,
    position: u64,
    root: &Path,
    tx: std::sync::mpsc::SyncSender<Vec<Salvaged>>,
    offsets: &mut GroupOffsets,
) -> Result<(u64, u64, Option<Checkpoint>)> {
    let mut writer: Option<StoreWriter> = None;
    let mut batch = Vec::with_capacity(SALVAGE_BATCH);
    let (n, bytes) = salvage_scan(store, seg, position, |seg, r| {
        if plan.rebuild.interrupted() {
            return Err(Error::interrupted(&store.root, "repair"));
        }
        let w = match writer.as_mut() {
            Some(w) => w,
            None => writer.insert(StoreWriter::create(
                root,
                WriterOptions {
                    geometry: store.geometry.clone(),
                    consumequeue: true,
                    index: false,
                    index_naming: IndexNaming::Local,
                    dledger: None,
                },
            )?),
        };
        let at = w.append_record(r)?;
        if r.transaction_type().is_queued() {
            offsets.salvaged(&r.topic, r.queue_id, r.queue_offset, at.queue_offset);
        }
        batch.push((seg, r.position, at.wrote_offset));
        if batch.len() == SALVAGE_BATCH {
            // A closed channel means the listing failed: its error is the one reported.
            let _ = tx.send(std::mem::replace(
                &mut batch,
                Vec::with_capacity(SALVAGE_BATCH),
            ));
        }
        Ok(())
    })?;
    let _ = tx.send(batch);
    drop(tx);
    let cp = writer.map(StoreWriter::finish).transpose()?;
    Ok((n, bytes, cp))
}

/// The listing: the salvage store's index and `salvaged.jsonl`, each record read again where
/// the scan found it. Returns the index's checkpoint timestamp, `None` when nothing was salvaged.
fn list_salvaged(
    store: &Store,
    rx: std::sync::mpsc::Receiver<Vec<Salvaged>>,
    root: &Path,
    repair: &Path,
) -> Result<Option<i64>> {
    use crate::format::commitlog::read::{parse_record, Record};
    let jsonl_path = repair.join("salvaged.jsonl");
    let mut index: Option<IndexBuilder> = None;
    let mut jsonl: Option<std::io::BufWriter<std::fs::File>> = None;
    // The commitlog file being read: its segment number, name and map.
    let mut file: Option<(usize, String, Mapped)> = None;
    for (seg, position, salvaged_offset) in rx.iter().flatten() {
        let s = &store.commitlog.segments[seg];
        let (_, name, map) = match &mut file {
            Some(f) if f.0 == seg => f,
            f => {
                if let Some((_, _, old)) = f.take() {
                    old.release(0, old.len());
                }
                f.insert((seg, rel(store, &s.path), s.map()?))
            }
        };
        let at = position.saturating_sub(s.start) as usize;
        let r = match parse_record(map, at, s.start, false) {
            Ok(Record::Message(r)) => r,
            _ => {
                return Err(RepairError::SalvagedRecordUnreadable {
                    path: s.path.clone(),
                    at: at as u64,
                }
                .into())
            }
        };
        let ix = match index.as_mut() {
            Some(ix) => ix,
            None => index.insert(IndexBuilder::new(
                root.join(paths::INDEX),
                &store.geometry,
                IndexNaming::Local,
            )?),
        };
        let keys = r.property(crate::format::commitlog::prop::KEYS);
        let uniq_key = r.uniq_key();
        ix.add_record(&IndexRecord {
            topic: &r.topic,
            uniq_key: uniq_key.as_deref(),
            keys: keys.as_deref(),
            phy_offset: salvaged_offset as i64,
            store_timestamp: r.store_timestamp,
            is_rollback: IndexRecord::is_rollback_sys_flag(r.sys_flag),
        })?;
        let line = SalvagedLine {
            file: name,
            commitlog_offset: r.position,
            salvaged_offset,
            size: r.total_size,
            topic: &r.topic,
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            queued: crate::format::commitlog::TransactionType::of(r.sys_flag).is_queued(),
            msg_id: r.offset_msg_id(),
            uniq_key,
            keys: r.keys(),
            tags: r.tags(),
            store_timestamp: r.store_timestamp,
        };
        let j = match jsonl.as_mut() {
            Some(j) => j,
            None => jsonl.insert(std::io::BufWriter::new(
                crate::engine::store::safedir::create_new(&jsonl_path)?,
            )),
        };
        serde_json::to_writer(&mut *j, &line).map_err(|e| Error::io(&jsonl_path, e.into()))?;
        j.write_all(b"\n").map_err(|e| Error::io(&jsonl_path, e))?;
    }
    if let Some(mut j) = jsonl {
        j.flush().map_err(|e| Error::io(&jsonl_path, e))?;
        j.get_ref()
            .sync_all()
            .map_err(|e| Error::io(&jsonl_path, e))?;
    }
    index.map(IndexBuilder::finish).transpose()
}
