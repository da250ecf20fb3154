//! Opening the engine: the source's commitlog mapped and its end found, its queues loaded and
//! replayed where they lag, the overlay created or continued; and closing it, configs persisted.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::engine::broker::clock::Clock;
use crate::engine::broker::orderly::QueueLocks;
use crate::engine::store::dispatch::dispatch;
use crate::engine::store::index_builder::IndexNaming;
use crate::engine::store::writer::{StoreWriter, WriterOptions};
use crate::engine::store::{paths, Store};
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{parse_record, Commitlog, Record, Segment};
use crate::format::commitlog::walk::{RecordIter, SegmentEnd};
use crate::format::commitlog::MessageRef;
use crate::format::config::{
    ConfigFile, ConsumerOffsets, DelayOffsets, SubscriptionGroups, TopicConfigs,
};
use crate::format::consumequeue::CqUnit;
use crate::format::error::Error;
use crate::format::mapped::Mapped;

use super::{
    load_config, round_up, Dirty, Engine, EngineError, EngineOptions, EngineResult, Overlay,
    QueueView, ReplayMode, ReplaySummary,
};

/// The source's commitlog: files mapped once, end of data found as recovery finds it.
pub(super) struct SourceLog {
    pub(super) segments: Vec<(Segment, Option<Mapped>)>,
    pub(super) min: u64,
    pub(super) end: u64,
}

impl SourceLog {
    pub(super) fn open(store: &Store) -> Result<Self, Error> {
        let cl = &store.commitlog;
        let mut log = SourceLog {
            segments: cl
                .segments
                .iter()
                .map(|s| (s.clone(), Mapped::open(&s.path).ok()))
                .collect(),
            min: cl.min_offset(),
            end: 0,
        };
        log.end = match log.end_from_queues(store) {
            Some(end) => end,
            None => cl.max_offset()?,
        };
        Ok(log)
    }

    /// The end of data found from the furthest consume queue unit, so that opening a store
    /// with 1 GiB files does not read three of them: when the record that unit names parses
    /// whole where the unit says (CRC checked), the data is walked on from there record by
    /// record as recovery walks it. `None` (walk the last files instead) when no unit qualifies.
    pub(super) fn end_from_queues(&self, store: &Store) -> Option<u64> {
        let mut best: Option<CqUnit> = None;
        for cq in store.queues.values() {
            let end = cq.max_offset().ok()?;
            let Some(u) = end
                .checked_sub(1)
                .and_then(|q| cq.unit_at(q).ok().flatten())
            else {
                continue;
            };
            let stop = |u: &CqUnit| u.offset.saturating_add(i64::from(u.size));
            if u.is_valid() && !u.is_pre_blank() && best.is_none_or(|b| stop(&u) > stop(&b)) {
                best = Some(u);
            }
        }
        let u = best?;
        let start = u64::try_from(u.offset).ok()?;
        let first = self
            .segments
            .iter()
            .position(|(s, _)| s.start <= start && start < s.start.saturating_add(s.len))?;
        let (seg, map) = self.segments.get(first)?;
        if seg.uncommitted(start) {
            return None;
        }
        let pos = usize::try_from(start - seg.start).ok()?;
        match parse_record(map.as_ref()?, pos, seg.start, true) {
            Ok(Record::Message(m))
                if i64::try_from(m.raw.len()).ok() == Some(i64::from(u.size)) => {}
            _ => return None,
        }
        let mut end = start;
        for (i, (seg, map)) in self.segments.iter().enumerate().skip(first) {
            let map = map.as_ref()?;
            let from = if i == first { seg.walk_pos(pos) } else { 0 };
            let mut it = RecordIter::starting_at(map, seg, from, true);
            for r in it.by_ref() {
                if r.is_err() {
                    break;
                }
            }
            end = seg.start.saturating_add(it.valid_pos() as u64);
            if !matches!(it.end(), SegmentEnd::Blank { .. }) {
                break;
            }
        }
        Some(end)
    }

    /// `CommitLog.getMessage(phy, size)`: the file holding `phy` (the first file for 0), and
    /// the bytes only if they lie inside its written data.
    pub(super) fn read(&self, phy: i64, size: i32) -> Option<&[u8]> {
        let (Ok(phy), Ok(size)) = (u64::try_from(phy), usize::try_from(size)) else {
            return None;
        };
        let i = self
            .segments
            .partition_point(|(s, _)| s.start <= phy)
            .checked_sub(1)
            .filter(|&i| {
                self.segments
                    .get(i)
                    .is_some_and(|(s, _)| phy < s.start.saturating_add(s.len))
            })
            .or(if phy == 0 && !self.segments.is_empty() {
                Some(0)
            } else {
                None
            })?;
        let (seg, map) = self.segments.get(i)?;
        let map = map.as_ref()?;
        let pos = usize::try_from(phy.saturating_sub(seg.start)).ok()?;
        let written = self.end.saturating_sub(seg.start).min(seg.len) as usize;
        let stop = pos.checked_add(size)?;
        if stop > written {
            return None;
        }
        map.get(pos..stop)
    }
}

impl Engine {
    /// Open `source` (read-only) with an overlay in `overlay` (created if missing, continued if
    /// it holds an earlier run's store), or in memory when `None`.
    pub fn open(
        source: Store,
        overlay: Option<&Path>,
        clock: Arc<dyn Clock>,
        options: EngineOptions,
    ) -> EngineResult<Engine> {
        Self::open_with(source, overlay, clock, options, true)
    }

    /// Like [`Engine::open`], but an existing overlay is only read: nothing is written to it,
    /// and what the engine writes stays in memory (for reports such as `pending`).
    pub fn open_read_only(
        source: Store,
        overlay: Option<&Path>,
        clock: Arc<dyn Clock>,
        options: EngineOptions,
    ) -> EngineResult<Engine> {
        Self::open_with(source, overlay, clock, options, false)
    }

    pub(super) fn open_with(
        source: Store,
        overlay: Option<&Path>,
        clock: Arc<dyn Clock>,
        options: EngineOptions,
        writable: bool,
    ) -> EngineResult<Engine> {
        if let Some(dir) = overlay {
            let same = match (dir.canonicalize(), source.root.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if same {
                return Err(EngineError::OverlayIsSource(dir.to_path_buf()));
            }
        }
        let log = SourceLog::open(&source)?;
        let file_size = source.geometry.commitlog_file_size.value;
        let mut engine = Engine {
            overlay: Overlay {
                dir: overlay.map(Path::to_path_buf),
                writer: None,
                lock: None,
                start: round_up(log.end, file_size),
                next: round_up(log.end, file_size),
                records: BTreeMap::new(),
            },
            log,
            queues: BTreeMap::new(),
            offsets: load_config(overlay, &source.config_dir())?,
            delay_offsets: load_config(overlay, &source.config_dir())?,
            delay_progress: BTreeMap::new(),
            topics: load_config(overlay, &source.config_dir())?,
            groups: load_config(overlay, &source.config_dir())?,
            dirty: Dirty::default(),
            locks: QueueLocks::new(),
            clock,
            options,
            replay: ReplaySummary::default(),
            timer: crate::engine::broker::timer::TimerProgress::load(&source.root, overlay)?,
            client: None,
            cq_maps: Default::default(),
            notes: Vec::new(),
            source,
        };
        engine.load_source_queues()?;
        engine.replay_source()?;
        engine.open_overlay(writable)?;
        engine.correct_delay_offsets();
        Ok(engine)
    }

    /// Source queues: their bounds, with units past the commitlog's data dropped
    /// (`truncateDirtyLogicFiles`).
    pub(super) fn load_source_queues(&mut self) -> Result<(), Error> {
        let cl_end = self.log.end as i64;
        let cl_min = self.log.min;
        for ((topic, qid), cq) in &self.source.queues {
            let mut end = cq.max_offset()?;
            let mut max_physic = -1i64;
            while end > 0 {
                match cq.unit_at(end - 1)? {
                    Some(u) if u.is_pre_blank() => break,
                    Some(u) if u.offset.saturating_add(i64::from(u.size)) > cl_end => {
                        end -= 1;
                        self.replay.dirty_units += 1;
                    }
                    Some(u) => {
                        max_physic = u.offset.saturating_add(i64::from(u.size));
                        break;
                    }
                    None => break,
                }
            }
            let min = cq.min_offset(cl_min)?.min(end);
            self.queues.insert(
                (topic.clone(), *qid),
                QueueView {
                    source: Some(cq.clone()),
                    source_min: min,
                    source_end: end,
                    tail_start: end,
                    tail: Vec::new(),
                    max_physic,
                },
            );
        }
        Ok(())
    }

    /// The broker's reput after recovery: dispatch every record from the end of the furthest
    /// consume queue to the end of the commitlog's data into the queues that lack it.
    /// Signs of missing or stale consume queues: none at all over a non-empty commitlog, or a
    /// committed consumer offset or delay offset beyond its queue's end.
    pub(super) fn queues_look_stale(&self) -> bool {
        if self.queues.is_empty() {
            return self.log.end > self.log.min;
        }
        let end_of = |t: &str, q: i32| {
            self.queues
                .get(&(t.to_string(), q))
                .map(|v| v.source_end as i64)
                .unwrap_or(0)
        };
        let consumer = self
            .offsets
            .iter()
            .any(|(t, _, qs)| qs.iter().any(|(q, o)| *o > end_of(t, *q)));
        let delay = self
            .delay_offsets
            .iter()
            .any(|(l, o)| o > end_of(crate::engine::store::dispatch::SCHEDULE_TOPIC, l - 1));
        consumer || delay
    }

    pub(super) fn replay_source(&mut self) -> Result<(), Error> {
        let full = match self.options.replay {
            ReplayMode::Full => true,
            ReplayMode::Broker => false,
            ReplayMode::Auto => self.queues_look_stale(),
        };
        let furthest = self
            .queues
            .values()
            .map(|q| q.max_physic)
            .max()
            .unwrap_or(-1);
        let from = if full {
            self.log.min
        } else {
            u64::try_from(furthest).map_or(self.log.min, |f| f.max(self.log.min))
        };
        self.replay.full = full;
        let to = self.log.end;
        self.replay.from = from;
        self.replay.to = from.max(to);
        if from >= to {
            return Ok(());
        }
        let g = self.source.geometry.clone();
        let segments: Vec<Segment> = self.log.segments.iter().map(|(s, _)| s.clone()).collect();
        for seg in segments
            .iter()
            .filter(|s| s.start.saturating_add(s.len) > from && s.start < to)
        {
            let map = Mapped::open(&seg.path)?;
            let pos = from.saturating_sub(seg.start) as usize;
            let mut it = RecordIter::starting_at(&map, seg, pos, false);
            for r in it.by_ref() {
                let m = match r {
                    Ok(m) => m,
                    Err(e) => {
                        self.replay.stopped = Some(e.to_string());
                        return Ok(());
                    }
                };
                if m.position >= to {
                    return Ok(());
                }
                self.replay.records += 1;
                if self.dispatch_in_memory(&m, &g) {
                    self.replay.units += 1;
                }
            }
            if !matches!(it.end(), SegmentEnd::Blank { .. }) {
                break;
            }
        }
        Ok(())
    }

    /// Put the unit of one record into its queue's in-memory tail; false when the rules skip it.
    pub(super) fn dispatch_in_memory(
        &mut self,
        m: &MessageRef<'_>,
        g: &crate::format::geometry::Geometry,
    ) -> bool {
        let Ok(d) = dispatch(m, g) else {
            return false;
        };
        let Some(cq) = d.cq else {
            return false;
        };
        self.queues
            .entry((cq.topic, cq.queue_id))
            .or_default()
            .put(cq.unit, cq.queue_offset)
    }

    pub(super) fn writer_options(&self) -> WriterOptions {
        WriterOptions {
            geometry: self.source.geometry.clone(),
            consumequeue: true,
            index: true,
            index_naming: IndexNaming::Local,
            dledger: None,
        }
    }

    /// Read back an earlier run's overlay and reopen its writer, or start a new one.
    pub(super) fn open_overlay(&mut self, writable: bool) -> EngineResult<()> {
        let Some(dir) = self.overlay.dir.clone() else {
            return Ok(());
        };
        if writable {
            // The overlay is a store of its own: never inside another one, and locked as a
            // broker locks its store while this engine may write it.
            crate::format::layout::ensure_outside_stores(&dir, "the overlay", true)?;
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            self.overlay.lock = Some(crate::engine::store::safedir::StoreLock::acquire(&dir)?);
        }
        let cl_dir = dir.join(paths::COMMITLOG);
        let existing = if cl_dir.is_dir() {
            Commitlog::open(&cl_dir)?
        } else {
            Commitlog {
                dir: cl_dir,
                segments: Vec::new(),
                foreign: Vec::new(),
                odd: Vec::new(),
            }
        };
        if let Some(first) = existing.segments.first() {
            if first.start < self.log.end {
                return Err(EngineError::OverlayMismatch {
                    path: dir.clone(),
                    overlay_start: first.start,
                    source_end: self.log.end,
                });
            }
            self.overlay.start = first.start;
            self.overlay.next = first.start;
            let g = self.source.geometry.clone();
            let file_size = g.commitlog_file_size.value;
            // a crash while appending leaves a torn record: recovery cuts it (read-only, the
            // walk just ends there)
            let torn = crate::engine::store::writer::torn_tail(&existing)?;
            if let Some(t) = &torn {
                if writable {
                    crate::engine::store::writer::cut_torn_tail(t)?;
                    self.notes.push(format!("overlay recovered: {t}"));
                } else {
                    self.notes
                        .push(format!("overlay ends in a torn record, left as is: {t}"));
                }
            }
            for seg in &existing.segments {
                let map = Mapped::open(&seg.path)?;
                let mut it = RecordIter::new(&map, seg, true);
                while let Some(r) = it.next() {
                    let m = match r {
                        Ok(m) => m,
                        Err(_)
                            if torn
                                .as_ref()
                                .is_some_and(|t| t.offset == seg.start + it.valid_pos() as u64) =>
                        {
                            break
                        }
                        Err(e) => return Err(e.into()),
                    };
                    self.dispatch_in_memory(&m, &g);
                    self.overlay.next = m.position + m.raw.len() as u64;
                    self.overlay.records.insert(m.position, m.raw.to_vec());
                    self.replay.overlay_records += 1;
                }
                match it.end() {
                    SegmentEnd::Blank { .. } => {
                        self.overlay.next = seg.start.saturating_add(file_size)
                    }
                    _ => break,
                }
            }
            if writable {
                self.overlay.writer = Some(StoreWriter::resume(&dir, self.writer_options())?);
            }
        } else if writable {
            let mut w = StoreWriter::create(&dir, self.writer_options())?;
            w.set_start_offset(self.overlay.start);
            self.overlay.writer = Some(w);
        }
        Ok(())
    }

    /// `correctDelayOffset`: every stored level offset clamped into its queue's bounds.
    pub(super) fn correct_delay_offsets(&mut self) {
        let levels: Vec<(i32, i64)> = self.delay_offsets.iter().collect();
        for (level, off) in levels {
            let (min, max) =
                self.queue_bounds(crate::engine::store::dispatch::SCHEDULE_TOPIC, level - 1);
            self.delay_progress
                .insert(level, off.clamp(min, max.max(min)));
        }
    }

    /// Write the changed config files and finish the overlay store (consume queues, index files,
    /// checkpoint). Returns the overlay's checkpoint, `None` without an overlay directory.
    pub fn close(mut self) -> EngineResult<Option<Checkpoint>> {
        self.persist_configs()?;
        match self.overlay.writer.take() {
            Some(w) => Ok(Some(w.finish()?)),
            None => Ok(None),
        }
    }

    /// Write the config files that changed (or that the overlay lacks) to the overlay.
    pub fn persist_configs(&mut self) -> EngineResult<()> {
        let Some(w) = self.overlay.writer.as_ref() else {
            return Ok(());
        };
        let conf = w.root().join(paths::CONFIG);
        let missing = |name: &str| !conf.join(name).exists();
        for (level, off) in &self.delay_progress {
            self.delay_offsets.set(*level, *off);
        }
        if self.dirty.offsets || missing(ConsumerOffsets::FILE_NAME) {
            w.write_config(&self.offsets)?;
        }
        if self.dirty.delay || missing(DelayOffsets::FILE_NAME) {
            w.write_config(&self.delay_offsets)?;
        }
        if self.dirty.topics || missing(TopicConfigs::FILE_NAME) {
            w.write_config(&self.topics)?;
        }
        if self.dirty.groups || missing(SubscriptionGroups::FILE_NAME) {
            w.write_config(&self.groups)?;
        }
        if self.timer.dirty {
            let cp = self.timer.to_checkpoint();
            crate::engine::broker::timer::write_checkpoint(
                &crate::engine::broker::timer::overlay_checkpoint_path(w.root()),
                &cp,
            )?;
            self.timer.checkpoint = cp;
            self.timer.dirty = false;
        }
        self.dirty = Dirty::default();
        Ok(())
    }
}
