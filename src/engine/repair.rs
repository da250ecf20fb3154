//! Repair: make a damaged store one that `verify` passes and a broker starts on, keeping every
//! byte. The repaired store is staged in a new folder (unchanged large files hard-linked, never
//! written), so the same code serves `--dry-run` (stage, report, discard), `--out` and
//! `--in-place` (stage beside the store, then switch the whole folder atomically).
//!
//! Every byte that does not reach the repaired store is saved under `repair-<time>/removed/` and
//! listed in `repair-<time>/manifest.json`; records that still validate past a cut are salvaged to
//! `repair-<time>/salvaged/` (a store) and `repair-<time>/salvaged.jsonl`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::index::IndexNaming;
use super::rebuild::{rebuild, RebuildOptions};
use super::store::{paths, Store};
use super::writer::{StoreWriter, WriterOptions};
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{parse_record, Record, RecordIter, SegmentEnd};
use crate::format::commitlog::{MAGIC_V1, MAGIC_V2};
use crate::format::config::{
    load, ConfigFile, ConfigSource, ConsumerOffsets, DelayOffsets, SubscriptionGroups, TopicConfigs,
};
use crate::format::error::{Error, Result};
use crate::format::geometry::{GeometryInputs, GeometryOverrides};

/// Name of the marker file inside a staged store (removed by a later run once switched in).
pub const STAGE_MARKER: &str = ".rmqstore-stage";

/// One planned (and, unless dry-run, applied) step.
#[derive(Debug, Clone, Serialize)]
pub struct Action {
    pub problem: String,
    pub action: String,
    /// Messages affected (dropped from the store, salvaged, re-pointed...).
    pub messages: u64,
    /// Bytes moved out of the store into the repair folder.
    pub bytes: u64,
}

/// A byte range that left the store, and where it was saved.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    /// Path relative to the store root.
    pub file: String,
    pub offset: u64,
    pub length: u64,
    /// Path relative to the repair folder.
    pub saved_as: String,
}

/// Where the commitlog is cut, as the broker's recovery would cut it.
#[derive(Debug, Clone, Serialize)]
pub struct Cut {
    pub file: String,
    /// Position in that file.
    pub position: u64,
    /// Commitlog offset.
    pub offset: u64,
    pub reason: String,
}

/// The repair folder's `manifest.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub store: String,
    pub created: String,
    pub cut: Option<Cut>,
    pub actions: Vec<Action>,
    pub removed: Vec<Removed>,
    pub salvaged_records: u64,
    pub salvaged_bytes: u64,
    /// Messages of the repaired store's commitlog.
    pub messages_kept: u64,
}

/// Stage a repaired copy of `store` at `stage` (which must not exist). The repair folder is
/// `stage/<repair_name>`.
pub fn stage(store: &Store, stage: &Path, repair_name: &str) -> Result<Manifest> {
    if stage.exists() {
        return Err(Error::layout(
            stage,
            "already exists: refusing to write over it",
        ));
    }
    mkdir(stage)?;
    File::create(stage.join(STAGE_MARKER)).map_err(|e| Error::io(stage, e))?;
    let repair = stage.join(repair_name);
    mkdir(&repair)?;
    let mut m = Manifest {
        store: store.root.display().to_string(),
        created: chrono::Utc::now().to_rfc3339(),
        cut: None,
        actions: Vec::new(),
        removed: Vec::new(),
        salvaged_records: 0,
        salvaged_bytes: 0,
        messages_kept: 0,
    };
    let cut_at = stage_commitlog(store, stage, &repair, &mut m)?;
    salvage(store, cut_at, &repair, &mut m)?;

    // Consume queues and index rebuilt from the repaired commitlog, compared with the old ones.
    let staged = Store::open(stage, &fixed_geometry(store))?;
    let summary = rebuild(
        &staged,
        stage,
        &RebuildOptions {
            geometry: store.geometry.clone(),
            consumequeue: true,
            index: true,
            topics: None,
            index_naming: IndexNaming::Local,
        },
        &|_| {},
    )?;
    m.messages_kept = summary.records;
    compare_consume_queues(store, stage, &repair, &mut m)?;
    compare_index(store, stage, &repair, &mut m)?;

    // Checkpoint set to the data.
    let cp = Checkpoint {
        physic_msg_timestamp: summary.last_store_timestamp,
        logics_msg_timestamp: summary.last_queued_timestamp,
        index_msg_timestamp: summary.index_msg_timestamp,
        ..store.checkpoint().ok().flatten().unwrap_or_default()
    };
    let old_cp = std::fs::read(store.checkpoint_path()).ok();
    let new_cp = cp.to_bytes();
    if old_cp.as_deref() != Some(&new_cp[..]) {
        if old_cp.is_some() {
            save_whole(store, &repair, Path::new(paths::CHECKPOINT), &mut m)?;
        }
        m.actions.push(Action {
            problem: "checkpoint does not match the data".into(),
            action: format!(
                "write checkpoint: physic {} logics {} index {}",
                cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp
            ),
            messages: 0,
            bytes: 0,
        });
    }
    write_file(&stage.join(paths::CHECKPOINT), &new_cp)?;

    // abort: the store is consistent now.
    if store.abort.present {
        save_whole(store, &repair, Path::new(paths::ABORT), &mut m)?;
        m.actions.push(Action {
            problem: "abort file present (unclean shutdown)".into(),
            action: "remove it: the repaired store is consistent, a normal recovery is right"
                .into(),
            messages: 0,
            bytes: 0,
        });
    }
    copy_others(store, stage)?;
    repair_config(store, stage, &repair, &mut m)?;
    let text = serde_json::to_string_pretty(&m).unwrap_or_default();
    write_file(&repair.join("manifest.json"), text.as_bytes())?;
    crate::engine::safedir::sync_tree(stage)?;
    Ok(m)
}

/// The geometry of `store` as explicit values (the staged store is read with the same sizes).
fn fixed_geometry(store: &Store) -> GeometryInputs {
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

fn mkdir(p: &Path) -> Result<()> {
    std::fs::create_dir_all(p).map_err(|e| Error::io(p, e))
}

fn write_file(p: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(d) = p.parent() {
        mkdir(d)?;
    }
    // never write through a hard link: remove the name first
    let _ = std::fs::remove_file(p);
    let mut f = File::create(p).map_err(|e| Error::io(p, e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(p, e))
}

/// Hard-link `from` to `to` (copy when linking is not possible, e.g. across file systems).
fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(d) = to.parent() {
        mkdir(d)?;
    }
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).map_err(|e| Error::io(to, e))?;
    }
    Ok(())
}

fn rel(store: &Store, p: &Path) -> String {
    p.strip_prefix(&store.root)
        .unwrap_or(p)
        .display()
        .to_string()
}

/// Save a whole file of the store into the repair folder (by hard link) and list it.
fn save_whole(store: &Store, repair: &Path, relpath: &Path, m: &mut Manifest) -> Result<u64> {
    let src = store.root.join(relpath);
    let len = std::fs::metadata(&src)
        .map_err(|e| Error::io(&src, e))?
        .len();
    let saved = Path::new("removed").join(relpath);
    link_or_copy(&src, &repair.join(&saved))?;
    m.removed.push(Removed {
        file: relpath.display().to_string(),
        offset: 0,
        length: len,
        saved_as: saved.display().to_string(),
    });
    Ok(len)
}

/// Where the kept data of the commitlog ends: (segment index, position) of the cut, if any.
type CutAt = Option<(usize, usize)>;

/// Copy the commitlog into the stage up to the broker's recovery cut; save everything after it.
fn stage_commitlog(store: &Store, stage: &Path, repair: &Path, m: &mut Manifest) -> Result<CutAt> {
    let segs = &store.commitlog.segments;
    let size = store.geometry.commitlog_file_size.value;
    let dir = stage.join(paths::COMMITLOG);
    mkdir(&dir)?;
    let mut cut: CutAt = None;
    let mut gap = false;
    for (i, seg) in segs.iter().enumerate() {
        if cut.is_some() {
            break;
        }
        if i > 0 && seg.start != segs[i - 1].start + size {
            m.cut = Some(Cut {
                file: rel(store, &seg.path),
                position: 0,
                offset: seg.start,
                reason: format!(
                    "no commitlog file covers offsets {}..{}",
                    segs[i - 1].start + size,
                    seg.start
                ),
            });
            cut = Some((i, 0));
            gap = true;
            break;
        }
        let map = seg.map()?;
        let mut it = RecordIter::new(&map, &seg.path, seg.start, true);
        let mut err = None;
        for r in it.by_ref() {
            if let Err(e) = r {
                err = Some(e.to_string());
            }
        }
        let pos = it.valid_pos();
        let blank = matches!(it.end(), SegmentEnd::Blank { .. });
        let tail_dirty = !blank && map.get(pos..).is_some_and(|t| t.iter().any(|&b| b != 0));
        let last = i + 1 == segs.len();
        let reason = match (&err, blank, tail_dirty, last) {
            (Some(e), _, _, _) => Some(e.clone()),
            (None, false, true, _) => Some(format!(
                "end of data at byte {pos} with non-zero bytes after it"
            )),
            (None, false, false, false) => Some(format!(
                "end of data at byte {pos} before the last commitlog file"
            )),
            _ => None,
        };
        let name = seg.path.file_name().map(PathBuf::from).unwrap_or_default();
        let out = dir.join(&name);
        if let Some(reason) = reason {
            m.cut = Some(Cut {
                file: rel(store, &seg.path),
                position: pos as u64,
                offset: seg.start + pos as u64,
                reason,
            });
            cut = Some((i, pos));
            // the kept head, zeros to the full size; the rest saved
            let mut head = map.get(..pos).unwrap_or_default().to_vec();
            head.resize(size.max(pos as u64) as usize, 0);
            write_file(&out, &head)?;
            let end = map
                .iter()
                .rposition(|&b| b != 0)
                .map_or(pos, |p| p + 1)
                .max(pos);
            if end > pos {
                let saved = Path::new("removed")
                    .join(paths::COMMITLOG)
                    .join(format!("{}.from-{pos}", name.display()));
                write_file(&repair.join(&saved), map.get(pos..end).unwrap_or_default())?;
                m.removed.push(Removed {
                    file: rel(store, &seg.path),
                    offset: pos as u64,
                    length: (end - pos) as u64,
                    saved_as: saved.display().to_string(),
                });
            }
        } else if seg.len < size && last {
            // a short last file: extended to full size with zeros (nothing removed)
            let mut all = map.to_vec();
            all.resize(size as usize, 0);
            write_file(&out, &all)?;
            m.actions.push(Action {
                problem: format!("{} is {} bytes, not {size}", rel(store, &seg.path), seg.len),
                action: "extend it with zeros to the configured size".into(),
                messages: 0,
                bytes: 0,
            });
        } else {
            link_or_copy(&seg.path, &out)?;
        }
    }
    if let (Some((ci, _)), Some(c)) = (cut, m.cut.clone()) {
        let mut bytes = m.removed.iter().map(|r| r.length).sum::<u64>();
        let first_moved = if gap { ci } else { ci + 1 };
        for seg in segs.iter().skip(first_moved) {
            bytes += save_whole(store, repair, Path::new(&rel(store, &seg.path)), m)?;
        }
        m.actions.push(Action {
            problem: format!("commitlog unreadable from {} byte {}: {}", c.file, c.position, c.reason),
            action: format!(
                "cut there as the broker's recovery would; move {} later file(s) and the bytes after the cut to the repair folder",
                segs.len().saturating_sub(first_moved)
            ),
            messages: 0,
            bytes,
        });
    }
    Ok(cut)
}

/// Scan past the cut for records that validate (magic, sizes, CRC, PHYSICALOFFSET equal to the
/// position) and write them to the salvage store and JSON Lines.
fn salvage(store: &Store, cut: CutAt, repair: &Path, m: &mut Manifest) -> Result<()> {
    let Some((ci, pos)) = cut else { return Ok(()) };
    let mut writer: Option<StoreWriter> = None;
    let jsonl_path = repair.join("salvaged.jsonl");
    let mut jsonl: Option<std::io::BufWriter<File>> = None;
    let magics = [MAGIC_V1.to_be_bytes(), MAGIC_V2.to_be_bytes()];
    for (i, seg) in store.commitlog.segments.iter().enumerate().skip(ci) {
        let map = seg.map()?;
        let mut p = if i == ci { pos } else { 0 };
        while p + 8 <= map.len() {
            // next candidate: a message magic 4 bytes after a record start
            let hay = map.get(p + 4..).unwrap_or_default();
            let next = magics
                .iter()
                .filter_map(|mg| memchr::memmem::find(hay, mg))
                .min();
            let Some(k) = next else { break };
            let start = p + k;
            match parse_record(&map, start, seg.start, true) {
                Ok(Record::Message(r))
                    if r.physical_offset == (seg.start + start as u64) as i64 =>
                {
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
                        None => jsonl.insert(std::io::BufWriter::new(
                            File::create(&jsonl_path).map_err(|e| Error::io(&jsonl_path, e))?,
                        )),
                    };
                    let line = super::message_json::MessageJson::new(
                        &r,
                        &seg.path,
                        super::message_json::BodyMode::Base64,
                    );
                    serde_json::to_writer(&mut *j, &line)
                        .map_err(|e| Error::io(&jsonl_path, e.into()))?;
                    j.write_all(b"\n").map_err(|e| Error::io(&jsonl_path, e))?;
                    m.salvaged_records += 1;
                    m.salvaged_bytes += r.raw.len() as u64;
                    p = start + r.raw.len();
                }
                _ => p = start + 1,
            }
        }
    }
    if let Some(w) = writer {
        w.finish()?;
    }
    if let Some(mut j) = jsonl {
        j.flush().map_err(|e| Error::io(&jsonl_path, e))?;
    }
    if m.salvaged_records > 0 {
        m.actions.push(Action {
            problem: "valid records after the cut".into(),
            action: "salvage them to salvaged/ (a store) and salvaged.jsonl, with original offsets and ids".into(),
            messages: m.salvaged_records,
            bytes: m.salvaged_bytes,
        });
    }
    Ok(())
}

/// Relative path -> absolute path of every file below `dir`.
fn files_below(dir: &Path) -> BTreeMap<PathBuf, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(r) = p.strip_prefix(dir) {
                out.insert(r.to_path_buf(), p.clone());
            }
        }
    }
    out
}

fn same_bytes(a: &Path, b: &Path) -> bool {
    match (std::fs::read(a), std::fs::read(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn compare_consume_queues(
    store: &Store,
    stage: &Path,
    repair: &Path,
    m: &mut Manifest,
) -> Result<()> {
    let old = files_below(&store.root.join(paths::CONSUMEQUEUE));
    let new = files_below(&stage.join(paths::CONSUMEQUEUE));
    let mut changed = 0;
    let mut bytes = 0;
    for (r, p) in &old {
        if new.get(r).is_some_and(|n| same_bytes(n, p)) {
            continue;
        }
        changed += 1;
        bytes += save_whole(store, repair, &Path::new(paths::CONSUMEQUEUE).join(r), m)?;
    }
    let added = new.keys().filter(|r| !old.contains_key(*r)).count();
    if changed + added > 0 {
        m.actions.push(Action {
            problem: format!("{changed} consume queue file(s) differ from the commitlog, {added} missing"),
            action: "rebuild every consume queue from the commitlog as the broker's dispatch does; keep the old files".into(),
            messages: 0,
            bytes,
        });
    }
    Ok(())
}

fn compare_index(store: &Store, stage: &Path, repair: &Path, m: &mut Manifest) -> Result<()> {
    let old: Vec<PathBuf> = store.index_files.clone();
    let new_dir = stage.join(paths::INDEX);
    let new: Vec<PathBuf> = files_below(&new_dir).into_values().collect();
    let same = old.len() == new.len() && old.iter().zip(&new).all(|(a, b)| same_bytes(a, b));
    if same {
        // identical contents: keep the broker's own files (and names)
        for p in &new {
            std::fs::remove_file(p).map_err(|e| Error::io(p, e))?;
        }
        for p in &old {
            if let Some(n) = p.file_name() {
                link_or_copy(p, &new_dir.join(n))?;
            }
        }
        return Ok(());
    }
    let mut bytes = 0;
    for p in &old {
        bytes += save_whole(store, repair, Path::new(&rel(store, p)), m)?;
    }
    m.actions.push(Action {
        problem: "index files inconsistent with the commitlog".into(),
        action: format!(
            "rebuild the index ({} file(s)); keep the old files",
            new.len()
        ),
        messages: 0,
        bytes,
    });
    Ok(())
}

/// Everything else under the root (lock, compaction/, abort.bak, ...) goes along unchanged.
fn copy_others(store: &Store, stage: &Path) -> Result<()> {
    let skip = [
        paths::COMMITLOG,
        paths::CONSUMEQUEUE,
        paths::INDEX,
        paths::CHECKPOINT,
        paths::ABORT,
        paths::CONFIG,
        STAGE_MARKER,
    ];
    let rd = std::fs::read_dir(&store.root).map_err(|e| Error::io(&store.root, e))?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if skip.contains(&name.as_str())
            || name.starts_with("repair-")
            || name.starts_with("rmqstore-backup-")
        {
            continue;
        }
        for (r, p) in files_below(&e.path()) {
            link_or_copy(&p, &stage.join(&name).join(r))?;
        }
        if e.path().is_file() {
            std::fs::copy(e.path(), stage.join(&name)).map_err(|x| Error::io(&e.path(), x))?;
        }
    }
    Ok(())
}

/// Config: copies (never links: they are rewritten), `.bak` restores, offsets clamped.
fn repair_config(store: &Store, stage: &Path, repair: &Path, m: &mut Manifest) -> Result<()> {
    let src = store.config_dir();
    let dst = stage.join(paths::CONFIG);
    if !src.is_dir() {
        return Ok(());
    }
    mkdir(&dst)?;
    for e in std::fs::read_dir(&src)
        .map_err(|e| Error::io(&src, e))?
        .flatten()
    {
        if e.path().is_file() {
            std::fs::copy(e.path(), dst.join(e.file_name()))
                .map_err(|x| Error::io(&e.path(), x))?;
        }
    }
    let staged = Store::open(stage, &fixed_geometry(store))?;
    let bounds = |topic: &str, q: i32| -> Option<(i64, i64)> {
        let cq = staged.queue(topic, q)?;
        let max = cq.max_offset().ok()? as i64;
        let min = cq.min_offset(staged.commitlog.min_offset()).ok()? as i64;
        Some((min, max))
    };

    // consumerOffset.json
    if let Ok(l) = load::<ConsumerOffsets>(&src) {
        let mut value = l.value;
        let mut changed = restored(store, repair, &l.source, ConsumerOffsets::FILE_NAME, m)?;
        let mut clamps = Vec::new();
        for (topic, group, queues) in value.entries() {
            for (q, off) in queues {
                let (min, max) = bounds(&topic, q).unwrap_or((0, 0));
                let new = off.clamp(min, max.max(min));
                if new != off {
                    clamps.push((topic.clone(), group.clone(), q, off, new));
                }
            }
        }
        for (topic, group, q, old, new) in &clamps {
            value.set(topic, group, *q, *new);
            m.actions.push(Action {
                problem: format!("offset of {group} on {topic}/{q} is {old}, outside the queue"),
                action: format!("clamp it to {new}"),
                messages: old.abs_diff(*new),
                bytes: 0,
            });
        }
        changed |= !clamps.is_empty();
        if changed {
            write_config(store, repair, &dst, &value, m)?;
        }
    }
    // topics.json and subscriptionGroup.json: only restored
    if let Ok(l) = load::<TopicConfigs>(&src) {
        if restored(store, repair, &l.source, TopicConfigs::FILE_NAME, m)? {
            write_config(store, repair, &dst, &l.value, m)?;
        }
    }
    if let Ok(l) = load::<SubscriptionGroups>(&src) {
        if restored(store, repair, &l.source, SubscriptionGroups::FILE_NAME, m)? {
            write_config(store, repair, &dst, &l.value, m)?;
        }
    }
    // delayOffset.json: levels clamped into SCHEDULE_TOPIC_XXXX queue level-1
    if let Ok(l) = load::<DelayOffsets>(&src) {
        let mut value = l.value;
        let mut changed = restored(store, repair, &l.source, DelayOffsets::FILE_NAME, m)?;
        let levels: Vec<(i32, i64)> = value.iter().collect();
        for (level, off) in levels {
            let (min, max) = bounds(super::dispatch::SCHEDULE_TOPIC, level - 1).unwrap_or((0, 0));
            let new = off.clamp(min, max.max(min));
            if new != off {
                value.set(level, new);
                changed = true;
                m.actions.push(Action {
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
            write_config(store, repair, &dst, &value, m)?;
        }
    }
    Ok(())
}

/// When only the `.bak` parsed, note the restore; the caller rewrites the main file.
fn restored(
    store: &Store,
    _repair: &Path,
    source: &ConfigSource,
    name: &str,
    m: &mut Manifest,
) -> Result<bool> {
    let _ = store;
    match source {
        ConfigSource::Backup { reason } => {
            m.actions.push(Action {
                problem: format!("config/{name} {reason}"),
                action: format!("restore config/{name} from config/{name}.bak"),
                messages: 0,
                bytes: 0,
            });
            Ok(true)
        }
        ConfigSource::Empty { reason } => {
            m.actions.push(Action {
                problem: format!("config/{name}: {reason}"),
                action: format!(
                    "write config/{name} with the empty state the broker would start from (the unusable file is kept)"
                ),
                messages: 0,
                bytes: 0,
            });
            Ok(true)
        }
        ConfigSource::Main | ConfigSource::Missing => Ok(false),
    }
}

fn write_config<T: ConfigFile>(
    store: &Store,
    repair: &Path,
    dst: &Path,
    value: &T,
    m: &mut Manifest,
) -> Result<()> {
    let relp = Path::new(paths::CONFIG).join(T::FILE_NAME);
    if store.root.join(&relp).exists() {
        save_whole(store, repair, &relp, m)?;
    }
    write_file(&dst.join(T::FILE_NAME), value.to_pretty().as_bytes())
}
