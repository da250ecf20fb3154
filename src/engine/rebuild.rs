//! Rebuilding consume queues and index files from the commitlog, as the broker's dispatch builds
//! them (the same units, tags codes, transaction rules and index keys; the writer's rules).
//!
//! The records dispatched are those the broker's recovery keeps: files are walked in order, a
//! blank record moves on to the next file, and the first end of data or bad record (CRC checked,
//! as `checkCRCOnRecover`) ends the walk. Consume queue units are collected per commitlog file in
//! parallel and written in order; the index is built at the same time on another thread.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde::Serialize;

use super::dispatch::dispatch;
use super::index::{IndexBuilder, IndexNaming};
use super::store::{paths, Store};
use crate::format::commitlog::read::{RecordIter, Segment, SegmentEnd};
use crate::format::consumequeue::write::QueueWriter;
use crate::format::consumequeue::CqUnit;
use crate::format::error::{Error, ErrorKind, Result};
use crate::format::geometry::Geometry;

/// What to rebuild.
#[derive(Debug, Clone)]
pub struct RebuildOptions {
    pub geometry: Geometry,
    pub consumequeue: bool,
    pub index: bool,
    /// Only these topics (all when `None`).
    pub topics: Option<BTreeSet<String>>,
    pub index_naming: IndexNaming,
}

/// What a rebuild did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RebuildSummary {
    pub records: u64,
    pub bytes: u64,
    pub queues: usize,
    pub units: u64,
    pub index_files: usize,
    /// Where the walk ended (the broker's end of data), as a commitlog offset.
    pub end_offset: u64,
    /// The bad record or end of data that ended the walk before the last file, if any.
    pub stopped_early: Option<String>,
    /// Store time of the last record dispatched (the checkpoint's physicMsgTimestamp).
    pub last_store_timestamp: i64,
    /// Store time of the last record given a consume queue unit (logicsMsgTimestamp).
    pub last_queued_timestamp: i64,
    /// End time of the last full index file (indexMsgTimestamp).
    pub index_msg_timestamp: i64,
}

/// One commitlog file's contribution: units per queue in record order.
struct SegmentUnits {
    queues: HashMap<(String, i32), Vec<(i64, CqUnit)>>,
    records: u64,
    bytes: u64,
    end_pos: usize,
    end: SegmentEnd,
    error: Option<Error>,
    last_store_timestamp: i64,
    last_queued_timestamp: i64,
}

fn wanted(opts: &RebuildOptions, topic: &str) -> bool {
    opts.topics.as_ref().is_none_or(|t| t.contains(topic))
}

fn collect_units(seg: &Segment, opts: &RebuildOptions, done: &AtomicU64) -> Result<SegmentUnits> {
    let map = seg.map()?;
    let mut it = RecordIter::new(&map, &seg.path, seg.start, true);
    let mut out = SegmentUnits {
        queues: HashMap::new(),
        records: 0,
        bytes: 0,
        end_pos: 0,
        end: SegmentEnd::Running,
        error: None,
        last_store_timestamp: 0,
        last_queued_timestamp: 0,
    };
    for r in it.by_ref() {
        let m = match r {
            Ok(m) => m,
            Err(e) => {
                out.error = Some(e);
                break;
            }
        };
        out.records += 1;
        out.bytes += m.raw.len() as u64;
        out.last_store_timestamp = m.store_timestamp;
        if out.records % 4096 == 0 {
            done.fetch_add(4096 * 1024, Ordering::Relaxed);
        }
        if !opts.consumequeue || !wanted(opts, &m.topic) {
            continue;
        }
        let d = dispatch(&m, &opts.geometry).map_err(|e| {
            Error::data(
                &seg.path,
                m.position - seg.start,
                ErrorKind::Invalid {
                    what: "record",
                    detail: e.to_string(),
                },
            )
        })?;
        if let Some(cq) = d.cq {
            out.last_queued_timestamp = m.store_timestamp;
            out.queues
                .entry((cq.topic, cq.queue_id))
                .or_default()
                .push((cq.queue_offset, cq.unit));
        }
    }
    out.end_pos = it.valid_pos();
    out.end = it.end().clone();
    Ok(out)
}

/// Index the records the broker's recovery would dispatch: files up to and including the first
/// one whose walk does not end in a blank record.
fn build_index(
    segments: &[Segment],
    opts: &RebuildOptions,
    out_root: &Path,
) -> Result<(usize, i64)> {
    let mut ix = IndexBuilder::new(
        out_root.join(paths::INDEX),
        &opts.geometry,
        opts.index_naming,
    )?;
    let file_size = opts.geometry.commitlog_file_size.value;
    for (i, seg) in segments.iter().enumerate() {
        if i > 0 && seg.start != segments[i - 1].start + file_size {
            break;
        }
        let map = seg.map()?;
        let mut it = RecordIter::new(&map, &seg.path, seg.start, true);
        for r in it.by_ref() {
            let Ok(m) = r else { break };
            if wanted(opts, &m.topic) {
                ix.add(&m)?;
            }
        }
        if !matches!(it.end(), SegmentEnd::Blank { .. }) {
            break;
        }
    }
    let full_end = ix.finish()?;
    let dir = out_root.join(paths::INDEX);
    Ok((
        std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0),
        full_end,
    ))
}

/// Rebuild into `out_root` (`consumequeue/` and/or `index/` are created there; they must not
/// exist yet). `progress` receives bytes done so far (approximately).
pub fn rebuild(
    store: &Store,
    out_root: &Path,
    opts: &RebuildOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<RebuildSummary> {
    for (flag, name) in [
        (opts.consumequeue, paths::CONSUMEQUEUE),
        (opts.index, paths::INDEX),
    ] {
        let p = out_root.join(name);
        if flag && p.exists() {
            return Err(Error::layout(
                &p,
                "already exists: refusing to write over it",
            ));
        }
    }
    std::fs::create_dir_all(out_root).map_err(|e| Error::io(out_root, e))?;
    let segments = &store.commitlog.segments;
    let done = AtomicU64::new(0);
    let (units, index_files) = std::thread::scope(|s| {
        let index = opts
            .index
            .then(|| s.spawn(|| build_index(segments, opts, out_root)));
        let units: Vec<Result<SegmentUnits>> = segments
            .par_iter()
            .map(|seg| {
                let r = collect_units(seg, opts, &done);
                progress(done.load(Ordering::Relaxed));
                r
            })
            .collect();
        let index_files = match index {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(Error::layout(out_root, "the index thread panicked"))),
            None => Ok((0, 0)),
        };
        (units, index_files)
    });
    let (index_files, index_msg_timestamp) = index_files?;

    let mut summary = RebuildSummary {
        index_files,
        index_msg_timestamp,
        end_offset: store.commitlog.min_offset(),
        ..Default::default()
    };
    let mut writers: HashMap<(String, i32), QueueWriter> = HashMap::new();
    let cq_file_size = opts.geometry.cq_file_size();
    let n = segments.len();
    let file_size = opts.geometry.commitlog_file_size.value;
    for (i, (seg, su)) in segments.iter().zip(units).enumerate() {
        let su = su?;
        if i > 0 && seg.start != segments[i - 1].start + file_size {
            summary.stopped_early = Some(format!(
                "no commitlog file covers offsets {}..{}",
                segments[i - 1].start + file_size,
                seg.start
            ));
            break;
        }
        summary.records += su.records;
        summary.bytes += su.bytes;
        summary.end_offset = seg.start + su.end_pos as u64;
        if su.records > 0 {
            summary.last_store_timestamp = su.last_store_timestamp;
        }
        if su.last_queued_timestamp > 0 {
            summary.last_queued_timestamp = su.last_queued_timestamp;
        }
        let mut queues: Vec<_> = su.queues.into_iter().collect();
        queues.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, list) in queues {
            let w = match writers.entry(key.clone()) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => v.insert(QueueWriter::new(
                    crate::format::layout::queue_dir(out_root, &key.0, key.1)?,
                    cq_file_size,
                )),
            };
            for (q, u) in list {
                w.put(u, q)?;
                summary.units += 1;
            }
        }
        let blank = matches!(su.end, SegmentEnd::Blank { .. });
        if let Some(e) = su.error {
            summary.stopped_early = Some(e.to_string());
            break;
        }
        if !blank {
            if i + 1 < n {
                summary.stopped_early = Some(format!(
                    "{}: end of data at byte {} before the last commitlog file",
                    seg.path.display(),
                    su.end_pos
                ));
            }
            break;
        }
    }
    summary.queues = writers.len();
    for w in writers.values_mut() {
        w.finish()?;
    }
    if opts.consumequeue {
        std::fs::create_dir_all(out_root.join(paths::CONSUMEQUEUE))
            .map_err(|e| Error::io(out_root, e))?;
    }
    progress(summary.bytes);
    Ok(summary)
}
