//! Rebuilding consume queues and index files from the commitlog, as the broker's dispatch builds
//! them (the same units, tags codes, transaction rules and index keys; the writer's rules).
//!
//! The records dispatched are those the broker's recovery keeps, judged by the one recovery walk
//! ([`recovery::walk_file`]): files are walked in order, a blank record moves on to the next
//! file, and the first end of data or damaged record (CRC checked, as `checkCRCOnRecover`) ends
//! the walk. A [`Source`] can end the walk earlier (a repair's cut) and mend header fields on the
//! way (a repair's proven fixes), so a repair's queues are rebuilt from exactly the records its
//! commitlog keeps. Consume queue units stream into their files in commitlog order on one thread
//! while the index is built on another; memory does not grow with the store (pending units are
//! flushed above a bound, and an index file is built in memory one at a time).
//!
//! A record whose topic or queue id cannot name a folder is never dispatched (it is counted in
//! [`RebuildSummary::refused`]; `verify` names it).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use serde::Serialize;

use crate::engine::check::recovery::{self, RecordPlace, StopReason, WalkOptions};
use crate::engine::store::dispatch::{dispatch_with, DispatchProps};
use crate::engine::store::index_builder::{
    index_record, uniq_key_and_keys, IndexBuilder, IndexNaming,
};
use crate::engine::store::{paths, Store};
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::MessageRef;
use crate::format::consumequeue::write::QueueWriter;
use crate::format::error::{Error, ErrorKind, Result};
use crate::format::geometry::Geometry;
use crate::format::indexfile::write::HashedRecord;

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

impl RebuildOptions {
    /// Both parts, all topics, index files named in local time (as the broker names them).
    pub fn for_geometry(geometry: Geometry) -> Self {
        RebuildOptions {
            geometry,
            consumequeue: true,
            index: true,
            topics: None,
            index_naming: IndexNaming::Local,
        }
    }
}

/// New bytes for a record: `bytes` replace the record's bytes from `at` (a repair's proven
/// header fix).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Patch {
    /// Commitlog offset of the record.
    pub record: u64,
    /// Position inside the record.
    pub at: usize,
    pub bytes: Vec<u8>,
}

/// The records to dispatch: the commitlog of `store` as recovery walks it, ending at `end` (a
/// commitlog offset) if that comes first, with `patches` applied.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub store: &'a Store,
    pub end: Option<u64>,
    /// Sorted by record offset.
    pub patches: &'a [Patch],
}

impl<'a> Source<'a> {
    /// The whole commitlog as the broker's recovery keeps it.
    pub fn whole(store: &'a Store) -> Self {
        Source {
            store,
            end: None,
            patches: &[],
        }
    }
}

/// What a rebuild did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RebuildSummary {
    pub records: u64,
    pub bytes: u64,
    pub queues: usize,
    pub units: u64,
    pub index_files: usize,
    /// Where the walk ended (the broker's end of data), as a commitlog offset
    /// (`end_commitlog_offset` in JSON).
    #[serde(rename = "end_commitlog_offset")]
    pub end_offset: u64,
    /// The bad record or end of data that ended the walk before the last file, if any.
    pub stopped_early: Option<String>,
    /// Records with data after an early stop (in the file it stopped in, or later files): what
    /// a rebuild in place would take out of the broker's reach.
    pub records_after_stop: u64,
    /// Records given no unit because their topic or queue id names no folder (damaged headers),
    /// and the first of them.
    pub refused: u64,
    pub first_refused: Option<u64>,
    /// Store time of the last record dispatched (the checkpoint's physicMsgTimestamp).
    pub last_store_timestamp: i64,
    /// Store time of the last record given a consume queue unit (logicsMsgTimestamp).
    pub last_queued_timestamp: i64,
    /// End time of the last full index file (indexMsgTimestamp).
    pub index_msg_timestamp: i64,
    /// Per queue: (min, max) offset of the rebuilt queue.
    #[serde(skip)]
    pub queue_bounds: BTreeMap<(String, i32), (u64, u64)>,
}

fn wanted(opts: &RebuildOptions, topic: &str) -> bool {
    opts.topics.as_ref().is_none_or(|t| t.contains(topic))
}

/// Where the walk of the kept records ended.
#[derive(Debug, Clone, Default)]
struct KeptEnd {
    end_offset: u64,
    stopped_early: Option<String>,
    records_after_stop: u64,
}

/// Call `f` with every record `src` keeps, in commitlog order (patched ones re-parsed from their
/// mended bytes); `done` counts the bytes walked.
fn walk_kept(
    src: &Source<'_>,
    done: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
    mut f: impl FnMut(&MessageRef<'_>) -> Result<()>,
) -> Result<KeptEnd> {
    let segs = &src.store.commitlog.segments;
    let file_size = src.store.geometry.commitlog_file_size.value;
    let mut out = KeptEnd {
        end_offset: src.store.commitlog.min_offset(),
        ..Default::default()
    };
    let mut failed: Option<Error> = None;
    let mut patched = Vec::new();
    for (i, seg) in segs.iter().enumerate() {
        if i > 0 && seg.start != segs[i - 1].start.saturating_add(file_size) {
            out.stopped_early = Some(format!(
                "no commitlog file covers offsets {}..{}",
                segs[i - 1].start.saturating_add(file_size),
                seg.start
            ));
            out.records_after_stop += records_from(segs, i)?;
            break;
        }
        if src.end.is_some_and(|e| e <= seg.start) {
            break;
        }
        let map = seg.map()?;
        let limit = src.end.map_or(map.len(), |e| {
            (e - seg.start).min(map.len() as u64) as usize
        });
        let buf = map.get(..limit).unwrap_or(&map);
        let walk = recovery::walk_file(buf, seg, &WalkOptions::default(), |m, place| {
            if place != RecordPlace::Chain || failed.is_some() {
                return;
            }
            let r = match patch_of(src.patches, m.position) {
                [] => f(m),
                ps => {
                    patched.clear();
                    patched.extend_from_slice(m.raw);
                    for p in ps {
                        if let Some(dst) = patched.get_mut(p.at..p.at + p.bytes.len()) {
                            dst.copy_from_slice(&p.bytes);
                        }
                    }
                    match parse_record(&patched, 0, m.position, false) {
                        Ok(Record::Message(fixed)) => f(&fixed),
                        _ => Err(Error::data(
                            &seg.path,
                            m.position - seg.start,
                            ErrorKind::Invalid {
                                what: "patched record",
                                detail: "does not parse after its header fix".into(),
                            },
                        )),
                    }
                }
            };
            if let Err(e) = r {
                failed = Some(e);
            }
        });
        map.release(0, map.len());
        progress(done.fetch_add(seg.len, Ordering::Relaxed) + seg.len);
        if let Some(e) = failed {
            return Err(e);
        }
        out.end_offset = walk.stop_offset();
        let at_end = src.end.is_some_and(|e| e <= seg.start + limit as u64);
        if walk.stop != StopReason::Blank || at_end {
            let damaged = walk.stop.is_damage();
            if (damaged || i + 1 < segs.len()) && !at_end {
                out.stopped_early = Some(format!(
                    "{}: the recovery walk stops at byte {} ({:?}) before the last commitlog file \
                     or its data ends",
                    seg.path.display(),
                    walk.stop_pos,
                    walk.stop
                ));
                out.records_after_stop = walk.after_records + records_from(segs, i + 1)?;
            }
            break;
        }
    }
    Ok(out)
}

/// The patches of the record at `offset`.
fn patch_of(patches: &[Patch], offset: u64) -> &[Patch] {
    let a = patches.partition_point(|p| p.record < offset);
    let b = patches.partition_point(|p| p.record <= offset);
    patches.get(a..b).unwrap_or(&[])
}

/// Records found in the files from `from` on (each walked on its own, damage resynchronised).
fn records_from(segs: &[crate::format::commitlog::Segment], from: usize) -> Result<u64> {
    let mut n = 0;
    for seg in segs.iter().skip(from) {
        let map = seg.map()?;
        let w = recovery::walk_file(&map, seg, &WalkOptions::default(), |_, _| {});
        n += w.records + w.after_records;
        map.release(0, map.len());
    }
    Ok(n)
}

/// Above this many bytes of units waiting in all queue writers, every writer flushes.
const MAX_PENDING_UNITS: usize = 64 << 20;

/// Records handed to the index thread, their keys hashed.
#[derive(Default)]
struct IndexBatch {
    records: Vec<(HashedRecord, std::ops::Range<usize>)>,
    /// The key hashes of every record, `records[i].1` being the range of record `i`'s.
    hashes: Vec<i32>,
}

/// Records per [`IndexBatch`].
const INDEX_BATCH: usize = 4096;

/// Fills [`IndexBatch`]es from the walk and sends each one full: this thread reads the keys of
/// the record it has parsed anyway, the index thread only puts their hashes.
struct IndexFeed<'o> {
    tx: mpsc::SyncSender<IndexBatch>,
    batch: IndexBatch,
    opts: &'o RebuildOptions,
}

impl IndexFeed<'_> {
    fn push(&mut self, m: &MessageRef<'_>, props: &DispatchProps<'_>) {
        if !wanted(self.opts, &m.topic) {
            return;
        }
        let (uniq, keys) = uniq_key_and_keys(props);
        let rec = index_record(m, uniq.as_deref(), keys.as_deref());
        let from = self.batch.hashes.len();
        rec.key_hashes(&mut self.batch.hashes);
        let to = self.batch.hashes.len();
        self.batch.records.push((rec.hashed(), from..to));
        if self.batch.records.len() >= INDEX_BATCH {
            self.send();
        }
    }

    fn send(&mut self) {
        let b = std::mem::take(&mut self.batch);
        if !b.records.is_empty() {
            // a closed channel means the index thread failed; it reports why
            let _ = self.tx.send(b);
        }
    }
}

/// Dispatch the kept records into consume queues: written under `out_root`, or with `out_root`
/// `None` only counted (the queues' bounds, for a plan). With `index`, every kept record is also
/// handed to the index thread.
fn build_queues(
    src: &Source<'_>,
    opts: &RebuildOptions,
    out_root: Option<&Path>,
    done: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
    mut index: Option<IndexFeed<'_>>,
) -> Result<(RebuildSummary, KeptEnd)> {
    let mut s = RebuildSummary::default();
    let mut writers: HashMap<(String, i32), QueueWriter> = HashMap::new();
    let cq_file_size = opts.geometry.cq_file_size();
    let mut pending = 0usize;
    let end = walk_kept(src, done, progress, |m| {
        // the properties dispatch and the index read, found once
        let props = DispatchProps::of(m);
        if let Some(feed) = &mut index {
            feed.push(m, &props);
        }
        s.records += 1;
        s.bytes += m.raw.len() as u64;
        s.last_store_timestamp = m.store_timestamp;
        if !opts.consumequeue || !wanted(opts, &m.topic) {
            return Ok(());
        }
        let d = dispatch_with(m, &opts.geometry, &props).map_err(|e| {
            Error::data(
                Path::new(&crate::format::filename::offset_to_name(m.position)),
                m.position,
                ErrorKind::Invalid {
                    what: "record",
                    detail: e.to_string(),
                },
            )
        })?;
        if d.refused.is_some() {
            s.refused += 1;
            s.first_refused.get_or_insert(m.position);
        }
        let Some(cq) = d.cq else { return Ok(()) };
        s.last_queued_timestamp = m.store_timestamp;
        let w = match writers.entry((cq.topic.clone(), cq.queue_id)) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(match out_root {
                Some(root) => QueueWriter::new(
                    crate::format::layout::queue_dir(root, &cq.topic, cq.queue_id)?,
                    cq_file_size,
                ),
                None => QueueWriter::counting(cq_file_size),
            }),
        };
        let before = w.pending_bytes();
        w.put(cq.unit, cq.queue_offset)?;
        pending = (pending + w.pending_bytes()).saturating_sub(before);
        s.units += 1;
        if pending > MAX_PENDING_UNITS {
            for w in writers.values_mut() {
                w.flush()?;
            }
            pending = 0;
        }
        Ok(())
    })?;
    if let Some(feed) = &mut index {
        feed.send();
    }
    drop(index);
    s.queues = writers.len();
    for (k, w) in writers.iter_mut() {
        w.finish()?;
        s.queue_bounds
            .insert(k.clone(), (w.min_offset(), w.max_offset()));
    }
    if opts.consumequeue {
        if let Some(root) = out_root {
            let dir = root.join(paths::CONSUMEQUEUE);
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
    }
    Ok((s, end))
}

/// Index the records the walk hands on into `out_root/index/`: (files written,
/// indexMsgTimestamp).
fn build_index(
    rx: mpsc::Receiver<IndexBatch>,
    opts: &RebuildOptions,
    out_root: &Path,
) -> Result<(usize, i64)> {
    let mut ix = IndexBuilder::new(
        out_root.join(paths::INDEX),
        &opts.geometry,
        opts.index_naming,
    )?;
    // slots are read in random order: each key's slot is asked for this many keys ahead
    const AHEAD: usize = 8;
    for b in rx {
        for &h in b.hashes.iter().take(AHEAD) {
            ix.prefetch(h);
        }
        for (rec, keys) in &b.records {
            for &h in b
                .hashes
                .get(keys.start + AHEAD..keys.end + AHEAD)
                .unwrap_or(&[])
            {
                ix.prefetch(h);
            }
            ix.add_hashed(rec, b.hashes.get(keys.clone()).unwrap_or(&[]))?;
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
    rebuild_from(&Source::whole(store), out_root, opts, progress)
}

/// [`rebuild`] from the records `src` keeps.
pub fn rebuild_from(
    src: &Source<'_>,
    out_root: &Path,
    opts: &RebuildOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<RebuildSummary> {
    for (flag, name) in [
        (opts.consumequeue, paths::CONSUMEQUEUE),
        (opts.index, paths::INDEX),
    ] {
        let p = out_root.join(name);
        if flag && crate::format::entry::probe(&p).kind != crate::format::entry::Kind::Missing {
            return Err(Error::layout(
                &p,
                "already exists: refusing to write over it",
            ));
        }
    }
    std::fs::create_dir_all(out_root).map_err(|e| Error::io(out_root, e))?;
    let done = AtomicU64::new(0);
    // one walk: this thread checks each record and writes the queues, a second one indexes
    let (queues, index) = std::thread::scope(|s| {
        let (feed, index) = if opts.index {
            let (tx, rx) = mpsc::sync_channel(16);
            let feed = IndexFeed {
                tx,
                batch: IndexBatch::default(),
                opts,
            };
            (
                Some(feed),
                Some(s.spawn(move || build_index(rx, opts, out_root))),
            )
        } else {
            (None, None)
        };
        let queues = build_queues(src, opts, Some(out_root), &done, progress, feed);
        let index = match index {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(Error::layout(out_root, "the index thread panicked"))),
            None => Ok((0, 0)),
        };
        (queues, index)
    });
    let (mut summary, end) = queues?;
    let (index_files, index_msg_timestamp) = index?;
    summary.index_files = index_files;
    summary.index_msg_timestamp = index_msg_timestamp;
    summary.end_offset = end.end_offset;
    summary.stopped_early = end.stopped_early;
    summary.records_after_stop = end.records_after_stop;
    progress(summary.bytes);
    Ok(summary)
}

/// What a rebuild from `src` would give, writing nothing: the consume queues' bounds, record and
/// unit counts, where the walk ends. Memory holds one small counter per queue.
pub fn plan_queues(src: &Source<'_>, opts: &RebuildOptions) -> Result<RebuildSummary> {
    let done = AtomicU64::new(0);
    let (mut summary, end) = build_queues(src, opts, None, &done, &|_| {}, None)?;
    summary.end_offset = end.end_offset;
    summary.stopped_early = end.stopped_early;
    summary.records_after_stop = end.records_after_stop;
    Ok(summary)
}
