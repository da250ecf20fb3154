//! Rebuilding consume queues and index files from the commitlog, as the broker's dispatch builds
//! them (the same units, tags codes, transaction rules and index keys; the writer's rules).
//!
//! The records dispatched are those the broker's recovery keeps, judged by the one recovery walk
//! ([`recovery::walk_file`]): files are walked in order, a blank record moves on to the next
//! file, and the first end of data or damaged record (CRC checked, as `checkCRCOnRecover`) ends
//! the walk. A [`Source`] can end the walk earlier (a repair's cut) and mend header fields on the
//! way (a repair's proven fixes), so a repair's queues are rebuilt from exactly the records its
//! commitlog keeps. Each file is walked in pieces on the rayon workers, which also find each
//! record's units and index keys; the pieces are taken in commitlog order by one thread, which
//! writes the consume queue units, while the index is built on another. Memory does not grow
//! with the store (a window of pieces at a time, pending units flushed above a bound, an index
//! file built in memory one at a time).
//!
//! A record whose topic or queue id cannot name a folder is never dispatched (it is counted in
//! [`RebuildSummary::refused`]; `verify` names it).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use serde::Serialize;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::engine::check::pieces::{piece_count, piece_span};
use crate::engine::check::recovery::{self, FileWalk, RecordPlace, StopReason, WalkOptions};
use crate::engine::store::dispatch::{dispatch_with, DispatchProps};
use crate::engine::store::index_builder::{
    index_record, uniq_key_and_keys, IndexBuilder, IndexNaming,
};
use crate::engine::store::{paths, Store};
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::{MessageRef, Segment};
use crate::format::consumequeue::write::QueueWriter;
use crate::format::consumequeue::CqUnit;
use crate::format::error::{Error, ErrorKind, RebuildError, Result, WritePathError};
use crate::format::geometry::Geometry;
use crate::format::indexfile::write::HashedRecord;
use crate::format::mapped::Mapped;

/// What to rebuild.
#[derive(Debug, Clone)]
pub struct RebuildOptions {
    pub geometry: Geometry,
    pub consumequeue: bool,
    pub index: bool,
    /// Only these topics (all when `None`).
    pub topics: Option<BTreeSet<String>>,
    pub index_naming: IndexNaming,
    /// Also write a DLedger-mode store's DLedger index (`dledger-<selfId>/index/`) from its
    /// data files.
    pub dledger_index: bool,
    /// Set (by Ctrl-C, say) to stop the run at the next piece of the commitlog: the rebuild then
    /// ends with [`Error::Interrupted`], its output unfinished.
    pub interrupt: Option<Arc<AtomicBool>>,
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
            dledger_index: false,
            interrupt: None,
        }
    }

    /// Whether [`RebuildOptions::interrupt`] was set.
    pub fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
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

/// A range of the commitlog replaced by new records (a repair's tombstones and fillers over
/// damaged bytes): `bytes` are whole records, as long as the range, the first at `offset`.
#[derive(Debug, Clone)]
pub struct Insert {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

impl Insert {
    /// The commitlog offset after the range.
    pub fn end(&self) -> u64 {
        self.offset + self.bytes.len() as u64
    }
}

/// The records to dispatch: the commitlog of `store` as recovery walks it, ending at `end` (a
/// commitlog offset) if that comes first, with `patches` applied and the ranges of `inserts`
/// read from their new records.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub store: &'a Store,
    pub end: Option<u64>,
    /// Sorted by record offset.
    pub patches: &'a [Patch],
    /// Sorted by offset, none overlapping.
    pub inserts: &'a [Insert],
}

impl<'a> Source<'a> {
    /// The whole commitlog as the broker's recovery keeps it, up to where the broker serves
    /// records (a DLedger log's committed position).
    pub fn whole(store: &'a Store) -> Self {
        Source {
            store,
            end: store.commitlog.served_end(),
            patches: &[],
            inserts: &[],
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
    /// DLedger index units written (`--dledger-index`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dledger_index_units: Option<u64>,
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

/// Commitlog files are walked in pieces of this many bytes, a window of pieces at a time on
/// the rayon workers while the window before is applied in order.
const PIECE: u64 = 4 << 20;

/// Walk every record `src` keeps, in commitlog order: each file in pieces on the rayon workers,
/// each piece's records prepared into a [`Batch`] there, and the batches handed to `apply` in
/// commitlog order. `done` counts the bytes walked.
fn walk_kept(
    src: &Source<'_>,
    opts: &RebuildOptions,
    index: bool,
    done: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
    apply: &mut (dyn FnMut(Batch) -> Result<()> + Send),
) -> Result<KeptEnd> {
    let segs = &src.store.commitlog.segments;
    let file_size = src.store.geometry.commitlog_file_size.value;
    let mut out = KeptEnd {
        end_offset: src.store.commitlog.min_offset(),
        ..Default::default()
    };
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
        crate::format::failpoint::failpoint("rebuild-walk");
        let map = seg.map()?;
        let limit = src.end.map_or(map.len(), |e| {
            (e - seg.start).min(map.len() as u64) as usize
        });
        let buf = map.get(..limit).unwrap_or(&map);
        let prepare = |m: &MessageRef<'_>, b: &mut Batch| b.add_kept(src, seg, m, opts, index);
        let mut apply_or_stop = |b: Batch| {
            if opts.interrupted() {
                return Err(Error::interrupted(&seg.path, "rebuild"));
            }
            apply(b)
        };
        let here = inserts_in(src.inserts, seg.start, seg.start + limit as u64);
        let walk = if here.is_empty() {
            walk_in_pieces(&map, buf, seg, PIECE, &prepare, &mut apply_or_stop)
        } else {
            walk_around(buf, seg, here, &prepare, &mut apply_or_stop)
        };
        map.release(0, map.len());
        progress(done.fetch_add(seg.len, Ordering::Relaxed) + seg.len);
        let walk = walk?;
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

/// The inserts that lie within commitlog offsets `from..to`.
fn inserts_in(inserts: &[Insert], from: u64, to: u64) -> &[Insert] {
    let a = inserts.partition_point(|i| i.offset < from);
    let b = inserts.partition_point(|i| i.end() <= to);
    inserts.get(a..b.max(a)).unwrap_or(&[])
}

/// Walk one commitlog file (`buf`) in one go with `inserts` (within the file, in order) read in
/// place of the bytes they replace: the walk of each stretch between them must end cleanly
/// where the next insert starts, or the file's walk ends there.
fn walk_around(
    buf: &[u8],
    seg: &Segment,
    inserts: &[Insert],
    prepare: &(dyn Fn(&MessageRef<'_>, &mut Batch) + Sync),
    apply: &mut (dyn FnMut(Batch) -> Result<()> + Send),
) -> Result<FileWalk> {
    let mut before: Option<FileWalk> = None;
    let mut from = 0usize;
    for ins in inserts {
        let at = (ins.offset - seg.start) as usize;
        let walk = walk_stretch(buf, seg, before.take(), from, at, prepare, apply)?;
        if !walk.ends_cleanly_at(at as u64) {
            return Ok(walk);
        }
        let mut batch = Batch::default();
        let mut q = 0usize;
        while q < ins.bytes.len() {
            match parse_record(&ins.bytes, q, ins.offset, false) {
                Ok(Record::Message(m)) => {
                    prepare(&m, &mut batch);
                    q += m.raw.len();
                }
                _ => break,
            }
        }
        apply(batch)?;
        from = at + ins.bytes.len();
        before = Some(FileWalk {
            stop_pos: from as u64,
            ..walk
        });
    }
    walk_stretch(buf, seg, before, from, buf.len(), prepare, apply)
}

/// The recovery walk of `buf[from..to]`, continuing `before`, its records prepared and applied
/// in batches.
fn walk_stretch(
    buf: &[u8],
    seg: &Segment,
    before: Option<FileWalk>,
    from: usize,
    to: usize,
    prepare: &(dyn Fn(&MessageRef<'_>, &mut Batch) + Sync),
    apply: &mut (dyn FnMut(Batch) -> Result<()> + Send),
) -> Result<FileWalk> {
    let mut batch = Batch::default();
    let mut failed = None;
    let part = buf.get(..to).unwrap_or(buf);
    let walk = recovery::walk_on(
        before,
        part,
        from,
        seg,
        &WalkOptions::default(),
        |m, place| {
            if place != RecordPlace::Chain || failed.is_some() {
                return;
            }
            prepare(m, &mut batch);
            if batch.records >= BATCH_RECORDS {
                failed = apply(std::mem::take(&mut batch)).err();
            }
        },
    );
    if let Some(e) = failed {
        return Err(e);
    }
    apply(batch)?;
    Ok(walk)
}

/// One walked piece of a file: where it was walked from and to, its walk and its records.
struct WalkedPiece {
    from: usize,
    to: usize,
    walk: FileWalk,
    batch: Batch,
}

/// Walk one commitlog file (`buf`, the part of `map` to walk) as [`recovery::walk_file`] does, in
/// pieces of `piece_size` walked in parallel, each piece's pages released once it is walked:
/// `prepare` sees each record before the walk's stop (on any worker), and `apply` receives the
/// batches in file order. The walk of a piece is taken into the walk of the file when it joins
/// (it ends cleanly where the next piece begins, or it is the last and nothing is wrong in it);
/// from the first piece that does not, the rest of the file is walked again in one go, so the
/// result is the walk of the whole file in one go.
fn walk_in_pieces(
    map: &Mapped,
    buf: &[u8],
    seg: &Segment,
    piece_size: u64,
    prepare: &(dyn Fn(&MessageRef<'_>, &mut Batch) + Sync),
    apply: &mut (dyn FnMut(Batch) -> Result<()> + Send),
) -> Result<FileWalk> {
    let o = WalkOptions::default();
    let walk_piece = |j: usize| {
        let (from, to) = piece_span(buf, seg, piece_size, j)?;
        let mut batch = Batch::default();
        let walk = recovery::walk_on(None, buf.get(..to)?, from, seg, &o, |m, place| {
            if place == RecordPlace::Chain {
                prepare(m, &mut batch)
            }
        });
        // The batch owns what it took: the piece's pages can go (resident memory stays a few
        // pieces, not the file).
        map.release(from, to);
        Some(WalkedPiece {
            from,
            to,
            walk,
            batch,
        })
    };
    let n = piece_count(buf.len() as u64, piece_size);
    let window = 2 * rayon::current_num_threads().max(1);
    let mut joined: Option<FileWalk> = None;
    let mut ready: Vec<WalkedPiece> = Vec::new();
    let mut next = 0;
    loop {
        let range = next..(next + window).min(n);
        next = range.end;
        let (taken, walked) = rayon::join(
            || take_in_order(std::mem::take(&mut ready), &mut joined, buf.len(), apply),
            || {
                range
                    .into_par_iter()
                    .filter_map(walk_piece)
                    .collect::<Vec<_>>()
            },
        );
        match taken? {
            Taken::Finished => break,
            Taken::RestFrom(from) => {
                return walk_stretch(buf, seg, joined.take(), from, buf.len(), prepare, apply);
            }
            Taken::More if walked.is_empty() && next >= n => break,
            Taken::More => ready = walked,
        }
    }
    joined.ok_or_else(|| {
        RebuildError::NoPieceWalked {
            path: seg.path.clone(),
        }
        .into()
    })
}

/// What [`take_in_order`] did with a window of pieces.
enum Taken {
    /// Every piece joined; the file goes on in the next window.
    More,
    /// The last piece joined: the file is walked.
    Finished,
    /// A piece did not join: the rest of the file is to be walked again from this position.
    RestFrom(usize),
}

/// Take the walked pieces of a window into `joined` (the walk of the file so far) in file
/// order, applying each one's batch, up to the first that does not join.
fn take_in_order(
    pieces: Vec<WalkedPiece>,
    joined: &mut Option<FileWalk>,
    len: usize,
    apply: &mut (dyn FnMut(Batch) -> Result<()> + Send),
) -> Result<Taken> {
    for p in pieces {
        let expected = joined.as_ref().map_or(0, |w| w.stop_pos as usize);
        let last = p.to == len;
        let joins = p.from == expected
            && if last {
                p.from == 0 || p.walk.is_clean()
            } else {
                p.walk.ends_cleanly_at(p.to as u64)
            };
        if !joins {
            return Ok(Taken::RestFrom(expected));
        }
        *joined = Some(match joined.take() {
            Some(w) => w.join(p.walk),
            None => p.walk,
        });
        apply(p.batch)?;
        if last {
            return Ok(Taken::Finished);
        }
    }
    Ok(Taken::More)
}

/// The patches of the record at `offset`.
fn patch_of(patches: &[Patch], offset: u64) -> &[Patch] {
    let a = patches.partition_point(|p| p.record < offset);
    let b = patches.partition_point(|p| p.record <= offset);
    patches.get(a..b).unwrap_or(&[])
}

/// Records found in the files from `from` on (each walked on its own, damage resynchronised).
fn records_from(segs: &[Segment], from: usize) -> Result<u64> {
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

/// When a file is walked again in one go, its records are applied this many at a time.
const BATCH_RECORDS: u64 = 4096;

/// What the records of one piece give, found on a worker: their consume queue units (each
/// naming its queue by a number of the batch's own), their index keys hashed, the counts.
#[derive(Default)]
struct Batch {
    /// The queues the units name, and where each is in `queues`.
    queues: Vec<(String, i32)>,
    queue_numbers: FxHashMap<String, Vec<(i32, u32)>>,
    /// (queue number, QUEUEOFFSET, unit), in commitlog order.
    units: Vec<(u32, i64, CqUnit)>,
    records: u64,
    bytes: u64,
    last_store_timestamp: Option<i64>,
    last_queued_timestamp: Option<i64>,
    refused: u64,
    first_refused: Option<u64>,
    index: IndexBatch,
    /// A record that cannot be dispatched: the rebuild fails there.
    error: Option<Error>,
}

impl Batch {
    /// Add a kept record of `seg` (patched first when `src` mends it).
    fn add_kept(
        &mut self,
        src: &Source<'_>,
        seg: &Segment,
        m: &MessageRef<'_>,
        opts: &RebuildOptions,
        index: bool,
    ) {
        if self.error.is_some() {
            return;
        }
        let ps = patch_of(src.patches, m.position);
        if ps.is_empty() {
            return self.add(m, opts, index);
        }
        let mut patched = m.raw.to_vec();
        for p in ps {
            if let Some(dst) = patched.get_mut(p.at..p.at + p.bytes.len()) {
                dst.copy_from_slice(&p.bytes);
            }
        }
        match parse_record(&patched, 0, m.position, false) {
            Ok(Record::Message(fixed)) => self.add(&fixed, opts, index),
            _ => {
                self.error = Some(Error::data(
                    &seg.path,
                    m.position - seg.start,
                    ErrorKind::Invalid {
                        what: "patched record",
                        detail: "does not parse after its header fix".into(),
                    },
                ))
            }
        }
    }

    /// Add one record: the properties dispatch and the index read found once.
    fn add(&mut self, m: &MessageRef<'_>, opts: &RebuildOptions, index: bool) {
        let props = DispatchProps::of(m);
        let wanted = wanted(opts, &m.topic);
        if index && wanted {
            let (uniq, keys) = uniq_key_and_keys(&props);
            let rec = index_record(m, uniq.as_deref(), keys.as_deref());
            let from = self.index.hashes.len();
            rec.key_hashes(&mut self.index.hashes);
            let to = self.index.hashes.len();
            self.index.records.push((rec.hashed(), from..to));
        }
        self.records += 1;
        self.bytes += m.raw.len() as u64;
        self.last_store_timestamp = Some(m.store_timestamp);
        if !opts.consumequeue || !wanted {
            return;
        }
        let d = match dispatch_with(m, &opts.geometry, &props) {
            Ok(d) => d,
            Err(e) => {
                self.error = Some(Error::data(
                    Path::new(&crate::format::filename::offset_to_name(m.position)),
                    m.position,
                    ErrorKind::Invalid {
                        what: "record",
                        detail: e.to_string(),
                    },
                ));
                return;
            }
        };
        if d.refused.is_some() {
            self.refused += 1;
            self.first_refused.get_or_insert(m.position);
        }
        let Some(cq) = d.cq else { return };
        self.last_queued_timestamp = Some(m.store_timestamp);
        let q = self.queue_number(cq.topic, cq.queue_id);
        self.units.push((q, cq.queue_offset, cq.unit));
    }

    fn queue_number(&mut self, topic: String, queue_id: i32) -> u32 {
        if let Some(&(_, q)) = self
            .queue_numbers
            .get(&topic)
            .and_then(|ids| ids.iter().find(|(id, _)| *id == queue_id))
        {
            return q;
        }
        let q = self.queues.len() as u32;
        self.queue_numbers
            .entry(topic.clone())
            .or_default()
            .push((queue_id, q));
        self.queues.push((topic, queue_id));
        q
    }
}

/// Takes the batches in commitlog order: the queue writers (written under `out_root`, or only
/// counting with `None`), the summary, and the index thread's channel.
struct Applier<'a> {
    out_root: Option<&'a Path>,
    cq_file_size: u64,
    writers: Vec<QueueWriter>,
    writer_of: HashMap<(String, i32), usize>,
    pending: usize,
    summary: RebuildSummary,
    index: Option<mpsc::SyncSender<IndexBatch>>,
}

impl Applier<'_> {
    fn apply(&mut self, b: Batch) -> Result<()> {
        let s = &mut self.summary;
        s.records += b.records;
        s.bytes += b.bytes;
        if let Some(t) = b.last_store_timestamp {
            s.last_store_timestamp = t;
        }
        if let Some(t) = b.last_queued_timestamp {
            s.last_queued_timestamp = t;
        }
        s.refused += b.refused;
        if s.first_refused.is_none() {
            s.first_refused = b.first_refused;
        }
        let mut numbers = Vec::with_capacity(b.queues.len());
        for key in b.queues {
            let next = self.writers.len();
            let w = *self.writer_of.entry(key.clone()).or_insert(next);
            if w == next {
                self.writers.push(match self.out_root {
                    Some(root) => QueueWriter::new(
                        crate::format::layout::queue_dir(root, &key.0, key.1)?,
                        self.cq_file_size,
                    ),
                    None => QueueWriter::counting(self.cq_file_size),
                });
            }
            numbers.push(w);
        }
        for (q, queue_offset, unit) in b.units {
            let Some(w) = numbers
                .get(q as usize)
                .and_then(|&w| self.writers.get_mut(w))
            else {
                continue;
            };
            let before = w.pending_bytes();
            w.put(unit, queue_offset)?;
            self.pending = (self.pending + w.pending_bytes()).saturating_sub(before);
            self.summary.units += 1;
            if self.pending > MAX_PENDING_UNITS {
                for w in self.writers.iter_mut() {
                    w.flush()?;
                }
                self.pending = 0;
            }
        }
        if let Some(tx) = &self.index {
            if !b.index.records.is_empty() {
                // a closed channel means the index thread failed; it reports why
                let _ = tx.send(b.index);
            }
        }
        match b.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Dispatch the kept records into consume queues: written under `out_root`, or with `out_root`
/// `None` only counted (the queues' bounds, for a plan). With `index`, every kept record's keys
/// are also handed to the index thread.
fn build_queues(
    src: &Source<'_>,
    opts: &RebuildOptions,
    out_root: Option<&Path>,
    done: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
    index: Option<mpsc::SyncSender<IndexBatch>>,
) -> Result<(RebuildSummary, KeptEnd)> {
    let with_index = index.is_some();
    let mut applier = Applier {
        out_root,
        cq_file_size: opts.geometry.cq_file_size(),
        writers: Vec::new(),
        writer_of: HashMap::new(),
        pending: 0,
        summary: RebuildSummary::default(),
        index,
    };
    let end = walk_kept(src, opts, with_index, done, progress, &mut |b| {
        applier.apply(b)
    })?;
    applier.index = None;
    let mut s = applier.summary;
    s.queues = applier.writers.len();
    for (k, &w) in &applier.writer_of {
        let Some(w) = applier.writers.get_mut(w) else {
            continue;
        };
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
            return Err(WritePathError::AlreadyExists { path: p }.into());
        }
    }
    let dledger_index = match (opts.dledger_index, &src.store.dledger) {
        (false, _) => None,
        (true, None) => {
            return Err(crate::format::error::DledgerError::NotDledger {
                root: src.store.root.clone(),
            }
            .into())
        }
        (true, Some(l)) => {
            let p = out_root.join(dledger_index_dir(l));
            if crate::format::entry::probe(&p).kind != crate::format::entry::Kind::Missing {
                return Err(WritePathError::AlreadyExists { path: p }.into());
            }
            Some((l, p))
        }
    };
    std::fs::create_dir_all(out_root).map_err(|e| Error::io(out_root, e))?;
    let dledger_index_units = match dledger_index {
        Some((l, p)) => {
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            let size = l.geometry.index_file_size.value;
            Some(crate::format::dledger::index::write_index(l, &p, size)?.units)
        }
        None => None,
    };
    if !opts.consumequeue && !opts.index {
        return Ok(RebuildSummary {
            dledger_index_units,
            end_offset: src.store.commitlog.min_offset(),
            ..Default::default()
        });
    }
    let done = AtomicU64::new(0);
    // one walk: the rayon workers check the records, this thread writes the queues in order,
    // a second one indexes
    let (queues, index) = std::thread::scope(|s| {
        let (tx, index) = if opts.index {
            let (tx, rx) = mpsc::sync_channel(4);
            (
                Some(tx),
                Some(s.spawn(move || build_index(rx, opts, out_root))),
            )
        } else {
            (None, None)
        };
        let queues = build_queues(src, opts, Some(out_root), &done, progress, tx);
        let index = match index {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(Error::worker_panicked(out_root, "the index thread"))),
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
    summary.dledger_index_units = dledger_index_units;
    progress(summary.bytes);
    Ok(summary)
}

/// Where a DLedger-mode store keeps its DLedger index, relative to the store root
/// (`dledger-<selfId>/index`).
pub fn dledger_index_dir(l: &crate::format::dledger::DledgerLayout) -> std::path::PathBuf {
    Path::new(&format!(
        "{}{}",
        crate::format::dledger::DIR_PREFIX,
        l.self_id
    ))
    .join(crate::format::dledger::INDEX_DIR)
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

#[cfg(test)]
mod tests;
