//! The engine: a small broker over a store (DESIGN.md "engine").
//!
//! [`Engine`] reads a source store that it never writes, and writes everything a broker would
//! write (retry, delay, DLQ and transaction records, consumer and delay offsets, topic and group
//! configs) to an overlay store directory in the broker's own formats, through [`StoreWriter`].
//! The overlay's commitlog starts at the source's end of data rounded up to a file boundary and
//! its queues continue the source's queue offsets, so commitlog offsets and message ids stay
//! unique and the overlay is itself a store. A queue offset below a source queue's end reads the
//! source; at or above it reads units the engine holds in memory: units the source's consume
//! queues lack (replayed from its commitlog, as the broker's reput does after a crash) followed
//! by the overlay's units. Without an overlay directory the overlay lives in memory only.
//!
//! Time comes from an injected [`Clock`]. Pulls are in [`crate::engine::broker::pull`], retries in
//! [`crate::engine::broker::retry`], delayed delivery in [`crate::engine::broker::schedule`], transactions in
//! [`crate::engine::broker::transaction`]; they are `impl Engine` blocks over the state kept here.

pub mod client_offsets;
pub mod clock;
pub mod offsets;
pub mod orderly;
pub mod pending;
pub mod pull;
pub mod rebalance;
pub mod retry;
pub mod schedule;
pub mod timer;
pub mod transaction;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::broker::client_offsets::ClientOffsets;
use crate::engine::broker::clock::Clock;
use crate::engine::broker::offsets::{
    compute_pull_from_where, offset_for_unknown_group, ConsumeFrom, QueueStart,
};
use crate::engine::broker::orderly::QueueLocks;
use crate::engine::broker::pull::{
    get_message, get_message_with, BrokerRole, PullOptions, PullRequest, PullResult, PullSource,
    PullStatus,
};
use crate::engine::broker::rebalance::MessageQueue;
use crate::engine::store::dispatch::{dispatch, RETRY_PREFIX};
use crate::engine::store::index_builder::IndexNaming;
use crate::engine::store::reader::Reader;
use crate::engine::store::version::{detect_broker_version, BrokerVersion};
use crate::engine::store::writer::{StoreWriter, WriterOptions};
use crate::engine::store::{paths, Store};
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{parse_record, Commitlog, Record, Segment};
use crate::format::commitlog::walk::{RecordIter, SegmentEnd};
use crate::format::commitlog::write::EncodeError;
use crate::format::commitlog::{
    Host, Message, MessageRef, MessageVersion, END_FILE_MIN_BLANK_LENGTH,
};
use crate::format::config::{
    load, ConfigFile, ConfigSource, ConsumerOffsets, DataVersion, DelayOffsets,
    SubscriptionGroupConfig, SubscriptionGroups, TopicConfig, TopicConfigs,
};
use crate::format::consumequeue::{ConsumeQueue, CqUnit, UNIT_SIZE};
use crate::format::error::Error;
use crate::format::mapped::Mapped;

/// Why the engine refused or failed an operation.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] Error),
    #[error(transparent)]
    TimerRefused(crate::engine::broker::timer::TimerRefused),
    #[error("no message record at commitlog offset {0}")]
    NoMessage(i64),
    #[error(
        "the record at commitlog offset {offset} is in {topic}, not a transaction half message"
    )]
    NotHalfMessage { offset: i64, topic: String },
    #[error("the half message belongs to producer group {found:?}, not {expected:?}")]
    ProducerGroupMismatch { expected: String, found: String },
    #[error("the overlay {} starts at commitlog offset {overlay_start}, inside the source's data (which ends at {source_end}): it was made for another store", path.display())]
    OverlayMismatch {
        path: PathBuf,
        overlay_start: u64,
        source_end: u64,
    },
    #[error("the overlay directory is the source store itself: {}", .0.display())]
    OverlayIsSource(PathBuf),
    #[error("cannot encode the record: {0}")]
    Encode(#[from] EncodeError),
    #[error("a record of {len} bytes does not fit commitlog files of {file_size} bytes")]
    TooLarge { len: usize, file_size: u64 },
    #[error("the overlay writer put the record at {written} (queue offset {written_queue}), expected {expected} ({expected_queue})")]
    WriterOutOfStep {
        expected: u64,
        written: u64,
        expected_queue: i64,
        written_queue: i64,
    },
    #[error("consumer group {group} has no committed offset on {topic}")]
    GroupHasNoOffset { group: String, topic: String },
}

pub type EngineResult<T> = std::result::Result<T, EngineError>;

/// `TopicValidator.RMQ_SYS_OFFSET_MOVED_EVENT`.
pub const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";

/// How the engine behaves: which broker's rules, which role, how much memory counts as resident.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// 4.9 or 5.x rules where they differ.
    pub version: BrokerVersion,
    /// A master corrects consumer offsets and runs the schedule; a slave (as the oracle answers
    /// were taken) keeps the request offset (ENGINE.md 1.2).
    pub role: BrokerRole,
    /// `offsetCheckInSlave`.
    pub offset_check_in_slave: bool,
    /// Bytes of commitlog that count as "in memory" (`TOTAL_PHYSICAL_MEMORY_SIZE * 40%`);
    /// `u64::MAX` (the default) keeps everything in memory.
    pub memory_bytes: u64,
    /// `brokerName`, for message queues in rebalancing and broadcasting offsets.
    pub broker_name: String,
    /// The broker's address: the store host of the records the engine writes itself.
    pub store_host: Host,
    /// How much of the source's commitlog is dispatched again at open.
    pub replay: ReplayMode,
}

/// Which records the engine dispatches again at open to complete the source's consume queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplayMode {
    /// The broker's reput: from the end of the furthest consume queue (cheap; completes queues
    /// that lag after a crash).
    Broker,
    /// Every record: also rebuilds queues whose files are missing or cut short.
    Full,
    /// `Full` when the store shows missing or stale queues (no consume queues at all, or a
    /// consumer or delay offset beyond its queue's end), else `Broker`.
    #[default]
    Auto,
}

impl EngineOptions {
    /// Options for `store`: its broker version guessed from its files, master role, everything
    /// in memory, the store host of its first record (or 127.0.0.1:10911).
    pub fn for_store(store: &Store) -> Self {
        let (version, _) = detect_broker_version(store);
        let store_host = store
            .commitlog
            .segments
            .first()
            .and_then(|s| Mapped::open(&s.path).ok().map(|m| (s.start, m)))
            .and_then(|(start, m)| match parse_record(&m, 0, start, false) {
                Ok(Record::Message(r)) => Some(r.store_host),
                _ => None,
            })
            .unwrap_or_else(|| Host::v4([127, 0, 0, 1], 10911));
        EngineOptions {
            version,
            role: BrokerRole::Master,
            offset_check_in_slave: false,
            memory_bytes: u64::MAX,
            broker_name: "broker-a".into(),
            store_host,
            replay: ReplayMode::Auto,
        }
    }

    /// 5.x writes a separator after the last property (5.2+); 4.9.1+ does not.
    pub fn trailing_separator(&self) -> bool {
        self.version == BrokerVersion::V5
    }

    pub fn pull_options(&self) -> PullOptions {
        PullOptions {
            version: self.version,
            role: self.role,
            offset_check_in_slave: self.offset_check_in_slave,
            memory_bytes: self.memory_bytes,
        }
    }
}

/// What one put did (`PutMessageResult` / `AppendMessageResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutResult {
    pub commitlog_offset: u64,
    pub size: usize,
    /// Where the record went (after a delay level parked it in `SCHEDULE_TOPIC_XXXX`).
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    /// The offset message id.
    pub msg_id: String,
    pub store_timestamp: i64,
}

/// Consume queue state the replay from the commitlog added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Commitlog range re-dispatched (`[from, to)`); empty when the queues were complete.
    pub from: u64,
    pub to: u64,
    pub records: u64,
    /// Units added to queues beyond their consume queue files.
    pub units: u64,
    /// Units dropped from consume queue files because they point past the commitlog's data.
    pub dirty_units: u64,
    /// Records read back from an existing overlay.
    pub overlay_records: u64,
    /// Why the replay stopped early, if it did.
    pub stopped: Option<String>,
    /// Every record was dispatched again ([`ReplayMode::Full`], or `Auto` saw stale queues).
    pub full: bool,
}

/// The source's commitlog: files mapped once, end of data found as recovery finds it.
struct SourceLog {
    segments: Vec<(Segment, Option<Mapped>)>,
    min: u64,
    end: u64,
}

impl SourceLog {
    fn open(store: &Store) -> Result<Self, Error> {
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
    fn end_from_queues(&self, store: &Store) -> Option<u64> {
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
        let pos = usize::try_from(start - seg.start).ok()?;
        match parse_record(map.as_ref()?, pos, seg.start, true) {
            Ok(Record::Message(m))
                if i64::try_from(m.raw.len()).ok() == Some(i64::from(u.size)) => {}
            _ => return None,
        }
        let mut end = start;
        for (i, (seg, map)) in self.segments.iter().enumerate().skip(first) {
            let map = map.as_ref()?;
            let from = if i == first { pos } else { 0 };
            let mut it = RecordIter::starting_at(map, &seg.path, seg.start, from, true);
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
    fn read(&self, phy: i64, size: i32) -> Option<&[u8]> {
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

/// One queue as the engine sees it: the source's consume queue files, then units in memory.
#[derive(Debug, Clone, Default)]
struct QueueView {
    source: Option<ConsumeQueue>,
    source_min: u64,
    /// Queue offsets `[.., source_end)` come from the source's files.
    source_end: u64,
    /// Queue offset of `tail[0]`.
    tail_start: u64,
    tail: Vec<CqUnit>,
    /// `maxPhysicOffset`: end of the last unit's record, for the repeat rule.
    max_physic: i64,
}

impl QueueView {
    fn has_source_units(&self) -> bool {
        self.source.is_some() && self.source_end > 0
    }

    fn max(&self) -> u64 {
        if self.tail.is_empty() && self.has_source_units() {
            self.source_end
        } else if self.tail.is_empty() {
            self.tail_start.max(self.source_end)
        } else {
            self.tail_start + self.tail.len() as u64
        }
    }

    fn min(&self) -> u64 {
        if self.has_source_units() {
            self.source_min.min(self.max())
        } else {
            self.tail_start
        }
    }

    /// `putMessagePositionInfo`'s rules for a unit added in memory.
    fn put(&mut self, unit: CqUnit, queue_offset: i64) -> bool {
        if unit.offset.saturating_add(i64::from(unit.size)) <= self.max_physic {
            return false;
        }
        let expected = queue_offset.max(0) as u64;
        if !self.has_source_units() && self.tail.is_empty() {
            self.tail_start = expected;
        } else if queue_offset != 0 && expected < self.max() {
            return false;
        }
        self.tail.push(unit);
        self.max_physic = unit.offset.saturating_add(i64::from(unit.size));
        true
    }
}

/// Where the engine's own records go.
struct Overlay {
    dir: Option<PathBuf>,
    writer: Option<StoreWriter>,
    /// The overlay store's lock, held while the engine may write it.
    lock: Option<crate::engine::store::safedir::StoreLock>,
    start: u64,
    next: u64,
    records: BTreeMap<u64, Vec<u8>>,
}

/// Config files the engine changed since it opened (written to the overlay on close).
#[derive(Debug, Clone, Copy, Default)]
struct Dirty {
    offsets: bool,
    delay: bool,
    topics: bool,
    groups: bool,
}

/// A small broker over a read-only source store and an overlay store.
pub struct Engine {
    pub(crate) source: Store,
    log: SourceLog,
    overlay: Overlay,
    queues: BTreeMap<(String, i32), QueueView>,
    pub(crate) offsets: ConsumerOffsets,
    pub(crate) delay_offsets: DelayOffsets,
    /// Level -> next offset to deliver, clamped into the level queue's bounds at open.
    pub(crate) delay_progress: BTreeMap<i32, i64>,
    pub(crate) topics: TopicConfigs,
    pub(crate) groups: SubscriptionGroups,
    dirty: Dirty,
    pub(crate) locks: QueueLocks,
    clock: Arc<dyn Clock>,
    pub(crate) options: EngineOptions,
    replay: ReplaySummary,
    /// 5.x timer progress (defaults for a store without timer files).
    pub(crate) timer: crate::engine::broker::timer::TimerProgress,
    /// A broadcasting client's offsets, used for its group in place of `offsets`.
    client: Option<ClientOffsets>,
    /// The source's consume queue files mapped so far: a pull maps its file once, not per call.
    cq_maps: std::sync::Mutex<std::collections::HashMap<PathBuf, Arc<Mapped>>>,
}

/// `value` rounded up to a multiple of `size`.
fn round_up(value: u64, size: u64) -> u64 {
    if size == 0 || value.is_multiple_of(size) {
        value
    } else {
        (value - value % size).saturating_add(size)
    }
}

fn load_config<T: ConfigFile>(overlay: Option<&Path>, source: &Path) -> Result<T, Error> {
    if let Some(dir) = overlay {
        let l = load::<T>(&dir.join(paths::CONFIG))?;
        if l.source != ConfigSource::Missing {
            return Ok(l.value);
        }
    }
    Ok(load::<T>(source)?.value)
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

    fn open_with(
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
    fn load_source_queues(&mut self) -> Result<(), Error> {
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
    fn queues_look_stale(&self) -> bool {
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

    fn replay_source(&mut self) -> Result<(), Error> {
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
            (furthest.max(0) as u64).max(self.log.min)
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
            let mut it = RecordIter::starting_at(&map, &seg.path, seg.start, pos, false);
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
    fn dispatch_in_memory(
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

    fn writer_options(&self) -> WriterOptions {
        WriterOptions {
            geometry: self.source.geometry.clone(),
            consumequeue: true,
            index: true,
            index_naming: IndexNaming::Local,
        }
    }

    /// Read back an earlier run's overlay and reopen its writer, or start a new one.
    fn open_overlay(&mut self, writable: bool) -> EngineResult<()> {
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
            for seg in &existing.segments {
                let map = Mapped::open(&seg.path)?;
                let mut it = RecordIter::new(&map, &seg.path, seg.start, true);
                for r in it.by_ref() {
                    let m = r?;
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
    fn correct_delay_offsets(&mut self) {
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

    // -----------------------------------------------------------------------------------------
    // Accessors

    pub fn source(&self) -> &Store {
        &self.source
    }

    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// What the replay from the commitlog (and the overlay read-back) did at open.
    pub fn replay_summary(&self) -> &ReplaySummary {
        &self.replay
    }

    /// The overlay directory, if the overlay is on disk.
    pub fn overlay_dir(&self) -> Option<&Path> {
        self.overlay.dir.as_deref()
    }

    /// First commitlog offset of the overlay.
    pub fn overlay_start(&self) -> u64 {
        self.overlay.start
    }

    pub fn consumer_offsets(&self) -> &ConsumerOffsets {
        &self.offsets
    }

    pub fn topic_configs(&self) -> &TopicConfigs {
        &self.topics
    }

    pub fn subscription_groups(&self) -> &SubscriptionGroups {
        &self.groups
    }

    /// Every (topic, queue id) the engine knows, sorted.
    pub fn queue_keys(&self) -> Vec<(String, i32)> {
        self.queues.keys().cloned().collect()
    }

    /// The queue ids of `topic`: those with data, and those `topics.json` declares for reading.
    pub fn queue_ids(&self, topic: &str) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .queues
            .range((topic.to_string(), i32::MIN)..=(topic.to_string(), i32::MAX))
            .map(|((_, q), _)| *q)
            .collect();
        if let Some(tc) = self.topics.get(topic) {
            ids.extend(0..tc.read_queue_nums.max(0));
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The message queues a client would see for `topic` on this broker.
    pub fn message_queues(&self, topic: &str) -> Vec<MessageQueue> {
        self.queue_ids(topic)
            .into_iter()
            .map(|q| MessageQueue::new(topic, self.options.broker_name.clone(), q))
            .collect()
    }

    /// `(minOffset, maxOffset)` of a queue over source and overlay; `(0, 0)` when unknown.
    pub fn queue_bounds(&self, topic: &str, queue_id: i32) -> (i64, i64) {
        self.queues
            .get(&(topic.to_string(), queue_id))
            .map(|q| (q.min() as i64, q.max() as i64))
            .unwrap_or((0, 0))
    }

    /// The commitlog's max offset: the overlay's end once it holds records, else the source's
    /// end of data.
    pub fn commitlog_max(&self) -> i64 {
        if self.overlay.records.is_empty() {
            self.log.end as i64
        } else {
            self.overlay.next as i64
        }
    }

    /// The consume queue unit at `offset`, from the source's files or memory.
    pub fn unit_at(&self, topic: &str, queue_id: i32, offset: i64) -> Option<CqUnit> {
        self.units_from(topic, queue_id, offset, 1)?
            .into_iter()
            .next()
    }

    /// The record at commitlog offset `phy` (source or overlay), whole.
    pub fn record_at(&self, phy: i64) -> Option<Cow<'_, [u8]>> {
        let p = u64::try_from(phy).ok()?;
        if p >= self.overlay.start && !self.overlay.records.is_empty() {
            return self
                .overlay
                .records
                .get(&p)
                .map(|r| Cow::Borrowed(r.as_slice()));
        }
        let head = self.log.read(phy, 8)?;
        let size = crate::format::bytes::i32_at(head, 0)?;
        self.log.read(phy, size).map(Cow::Borrowed)
    }

    /// The commitlog file that holds `phy`, for printing: a source file, the overlay's file, or
    /// `(overlay in memory)`.
    pub fn record_file(&self, phy: i64) -> PathBuf {
        let p = phy.max(0) as u64;
        if p >= self.overlay.start && !self.overlay.records.is_empty() {
            let file_size = self.source.geometry.commitlog_file_size.value.max(1);
            return match &self.overlay.dir {
                Some(d) => d
                    .join(paths::COMMITLOG)
                    .join(crate::format::filename::offset_to_name(p - p % file_size)),
                None => PathBuf::from("(overlay in memory)"),
            };
        }
        self.source
            .commitlog
            .segment_for(p)
            .map(|s| s.path.clone())
            .unwrap_or_else(|| self.source.commitlog.dir.clone())
    }

    /// The record at `phy` as an owned message.
    pub fn message_at(&self, phy: i64) -> Option<Message> {
        let raw = self.record_at(phy)?;
        match parse_record(&raw, 0, phy.max(0) as u64, false) {
            Ok(Record::Message(m)) => Some(m.to_owned_message()),
            _ => None,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Pull and offsets

    /// A source consume queue file's map, kept for later reads (the files are not written).
    fn cq_map(&self, path: &Path) -> Option<Arc<Mapped>> {
        let mut maps = self.cq_maps.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = maps.get(path) {
            return Some(m.clone());
        }
        let m = Arc::new(Mapped::open(path).ok()?);
        maps.insert(path.to_path_buf(), m.clone());
        Some(m)
    }

    /// `getMessage` with the engine's options: the store's answer, nothing written.
    pub fn pull(&self, req: &PullRequest<'_>) -> PullResult {
        get_message(self, req, &self.options.pull_options())
    }

    /// [`Engine::pull`] with the records left where they are (each `raw` empty; read them
    /// with [`PullSource::read`]).
    pub fn pull_in_place(&self, req: &PullRequest<'_>) -> PullResult {
        get_message_with(self, req, &self.options.pull_options(), false)
    }

    /// A consumer's pull as `PullMessageProcessor` serves it (ENGINE.md 2.4, 2.6): the store's
    /// answer; then `commit_offset` (the client's offset carried by the request) is committed,
    /// except by a 4.9 slave; and a 4.9 master writes an `OFFSET_MOVED_EVENT` record for every
    /// `PULL_OFFSET_MOVED` answer.
    pub fn process_pull(
        &mut self,
        group: &str,
        req: &PullRequest<'_>,
        commit_offset: Option<i64>,
    ) -> EngineResult<PullResult> {
        self.process_pull_with(group, req, commit_offset, true)
    }

    /// [`Engine::process_pull`]; without `copy_records` the records are left where they are
    /// (each `raw` empty; read them with [`PullSource::read`]).
    pub fn process_pull_with(
        &mut self,
        group: &str,
        req: &PullRequest<'_>,
        commit_offset: Option<i64>,
        copy_records: bool,
    ) -> EngineResult<PullResult> {
        let r = get_message_with(self, req, &self.options.pull_options(), copy_records);
        let v49 = self.options.version == BrokerVersion::V4_9;
        let master = self.options.role == BrokerRole::Master;
        if let Some(c) = commit_offset {
            if master || !v49 {
                self.commit_offset(group, req.topic, req.queue_id, c);
            }
        }
        let moved = r.pull_status(req.offset, self.options.role) == PullStatus::OffsetIllegal;
        if v49 && master && moved {
            self.write_offset_moved_event(group, req, r.next_begin_offset)?;
        }
        Ok(r)
    }

    /// `generateOffsetMovedEvent` (4.9): topic `OFFSET_MOVED_EVENT`, TAGS and KEYS the group,
    /// body the compact fastjson of the event.
    fn write_offset_moved_event(
        &mut self,
        group: &str,
        req: &PullRequest<'_>,
        offset_new: i64,
    ) -> EngineResult<PutResult> {
        use crate::format::config::fastjson::write_string;
        let mut body = String::from("{\"consumerGroup\":");
        write_string(&mut body, group);
        body.push_str(",\"messageQueue\":{\"brokerName\":");
        write_string(&mut body, &self.options.broker_name);
        body.push_str(&format!(",\"queueId\":{},\"topic\":", req.queue_id));
        write_string(&mut body, req.topic);
        body.push_str(&format!(
            "}},\"offsetNew\":{offset_new},\"offsetRequest\":{}}}",
            req.offset
        ));
        self.ensure_topic(OFFSET_MOVED_EVENT, 1, 6);
        let now = self.now();
        let host = self.options.store_host;
        let msg = Message {
            topic: OFFSET_MOVED_EVENT.to_string(),
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp: now,
            born_host: host,
            store_timestamp: 0,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: body.into_bytes(),
            properties: crate::format::commitlog::encode_properties(
                &[("TAGS", group), ("KEYS", group), ("DELAY", "0")],
                self.options.trailing_separator(),
            ),
            version: MessageVersion::V1,
        };
        self.put_with_delay(msg, 0)
    }

    /// `queryOffset`: the group's committed offset, or -1. For the group of
    /// [`Engine::use_client_offsets`], the client's own offset (`readOffset(READ_FROM_STORE)`).
    pub fn committed_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        match self.client_for(group, topic) {
            Some(c) => c.get(topic, queue_id).unwrap_or(-1),
            None => {
                crate::engine::broker::offsets::query_offset(&self.offsets, group, topic, queue_id)
            }
        }
    }

    /// `commitOffset`: overwrite the group's offset (clustering; persisted on close). For the
    /// group of [`Engine::use_client_offsets`], the client's table (persisted by its owner).
    pub fn commit_offset(&mut self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        if let Some(c) = self.client.as_mut().filter(|c| c.covers(group, topic)) {
            c.set(topic, queue_id, offset);
            return;
        }
        self.offsets.set(topic, group, queue_id, offset);
        self.dirty.offsets = true;
    }

    /// Take a broadcasting client's offsets for its group: committed offsets of that group (its
    /// `%RETRY%` topic aside) are read from and written to `client`, not the broker's table.
    pub fn use_client_offsets(&mut self, client: ClientOffsets) {
        self.client = Some(client);
    }

    pub fn client_offsets(&self) -> Option<&ClientOffsets> {
        self.client.as_ref()
    }

    /// Give back the client's offsets (with what was committed since), to persist them.
    pub fn take_client_offsets(&mut self) -> Option<ClientOffsets> {
        self.client.take()
    }

    fn client_for(&self, group: &str, topic: &str) -> Option<&ClientOffsets> {
        self.client.as_ref().filter(|c| c.covers(group, topic))
    }

    /// The topics `group` has committed offsets for (the client's, for a client's group).
    pub fn offset_topics(&self, group: &str) -> BTreeSet<String> {
        let mut set: BTreeSet<String> = self
            .offsets
            .iter()
            .filter(|(t, g, _)| *g == group && self.client_for(g, t).is_none())
            .map(|(t, _, _)| t.to_string())
            .collect();
        if let Some(c) = self.client.as_ref().filter(|c| c.group() == group) {
            set.extend(c.topics());
        }
        set
    }

    /// What the broker answers a client asking for the group's offset: the committed offset,
    /// else the new-group rule of ENGINE.md 4.1 (0 or -1). A broadcasting client asks no broker:
    /// its own offset or -1.
    pub fn query_consumer_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        let c = self.committed_offset(group, topic, queue_id);
        if c >= 0 || self.client_for(group, topic).is_some() {
            return c;
        }
        let (min, max) = self.queue_bounds(topic, queue_id);
        let head = (max > 0 && min == 0)
            .then(|| self.unit_at(topic, queue_id, 0))
            .flatten();
        let in_memory = head.is_some_and(|u| {
            let behind = self.commitlog_max().saturating_sub(u.offset);
            behind <= 0 || (behind as u64) <= self.options.memory_bytes
        });
        offset_for_unknown_group(
            min,
            head.is_some(),
            in_memory,
            self.options.version == BrokerVersion::V5,
        )
    }

    /// Where a push consumer of `group` starts on a newly assigned queue
    /// (`computePullFromWhere`); `None` when it skips the queue this round.
    pub fn pull_from_where(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        from: ConsumeFrom,
    ) -> Option<i64> {
        let (_, max) = self.queue_bounds(topic, queue_id);
        compute_pull_from_where(
            from,
            QueueStart {
                last_offset: self.query_consumer_offset(group, topic, queue_id),
                retry_topic: topic.starts_with(RETRY_PREFIX),
                max_offset: max,
            },
            |t| self.offset_by_time(topic, queue_id, t),
        )
    }

    /// `getOffsetInQueueByTime` over the source's files (4.9 or 5.x rules); for a time after the
    /// source's last message, the first in-memory unit stored at or after it (else max offset).
    pub fn offset_by_time(&self, topic: &str, queue_id: i32, ts: i64) -> i64 {
        let (min, max) = self.queue_bounds(topic, queue_id);
        let Some(view) = self.queues.get(&(topic.to_string(), queue_id)) else {
            return 0;
        };
        let store_time = |u: &CqUnit| {
            self.record_at(u.offset)
                .and_then(|r| match parse_record(&r, 0, 0, false) {
                    Ok(Record::Message(m)) => Some(m.store_timestamp),
                    _ => None,
                })
        };
        let tail_hit = || {
            view.tail
                .iter()
                .position(|u| store_time(u).is_some_and(|t| t >= ts))
                .map(|i| view.tail_start as i64 + i as i64)
                .unwrap_or(max)
        };
        if view.has_source_units() {
            let last_source = view
                .source
                .as_ref()
                .and_then(|cq| cq.unit_at(view.source_end - 1).ok().flatten())
                .and_then(|u| store_time(&u));
            if last_source.is_some_and(|t| t < ts) && !view.tail.is_empty() {
                return tail_hit();
            }
            let reader = Reader::new(&self.source);
            return reader
                .offset_in_queue_by_time(topic, queue_id, ts, self.options.version)
                .unwrap_or(min);
        }
        tail_hit()
    }

    /// Reset a group's offsets on `topic` to the messages stored at `ts` (-1: the max offset).
    /// 4.9 (`Broker2Client.resetOffset`): every queue needs a committed offset; without `force`
    /// an offset only moves back. 5.x: the target is written as is. Returns
    /// `(queue, old, new)` per queue.
    pub fn reset_offsets_by_time(
        &mut self,
        group: &str,
        topic: &str,
        ts: i64,
        force: bool,
    ) -> EngineResult<Vec<(i32, i64, i64)>> {
        let queues = self.queue_ids(topic);
        let mut plan = Vec::new();
        for q in queues {
            let old = self.committed_offset(group, topic, q);
            if old < 0 && self.options.version == BrokerVersion::V4_9 {
                return Err(EngineError::GroupHasNoOffset {
                    group: group.into(),
                    topic: topic.into(),
                });
            }
            let (_, max) = self.queue_bounds(topic, q);
            let target = if ts < 0 {
                max
            } else {
                self.offset_by_time(topic, q, ts)
            }
            .max(0);
            let new = if self.options.version == BrokerVersion::V5 || force || old < 0 {
                target
            } else {
                target.min(old)
            };
            plan.push((q, old, new));
        }
        for (q, _, new) in &plan {
            self.commit_offset(group, topic, *q, *new);
        }
        Ok(plan)
    }

    // -----------------------------------------------------------------------------------------
    // Configs

    /// The group's config; an unknown group is created with the defaults
    /// (`autoCreateSubscriptionGroup`).
    pub fn group_config(&mut self, group: &str) -> SubscriptionGroupConfig {
        if let Some(c) = self.groups.get(group) {
            return c.clone();
        }
        let c = SubscriptionGroupConfig::new(group);
        self.groups.insert(c.clone());
        let now = self.now();
        self.groups
            .data_version
            .get_or_insert_with(|| DataVersion::new(0, now))
            .next_version(now);
        self.dirty.groups = true;
        c
    }

    /// Create `topic` in `topics.json` if missing (`createTopicInSendMessageBackMethod`).
    pub fn ensure_topic(&mut self, topic: &str, queues: i32, perm: i32) {
        if self.topics.get(topic).is_some() {
            return;
        }
        let mut tc = TopicConfig::new(topic);
        tc.read_queue_nums = queues;
        tc.write_queue_nums = queues;
        tc.perm = perm;
        self.topics.insert(tc);
        let now = self.now();
        self.topics
            .data_version
            .get_or_insert_with(|| DataVersion::new(0, now))
            .next_version(now);
        self.dirty.topics = true;
    }

    /// Set the next offset to deliver of a delay level (persisted to `delayOffset.json`).
    pub fn set_delay_offset(&mut self, level: i32, offset: i64) {
        self.delay_progress.insert(level, offset);
        self.dirty.delay = true;
    }

    // -----------------------------------------------------------------------------------------
    // Orderly consumption

    /// `lockBatchMQ`: lock `mqs` for `client_id` of `group` at the clock's now; returns the
    /// queues granted (free, already held by the client, or expired after 60 s).
    pub fn lock_batch(
        &mut self,
        group: &str,
        client_id: &str,
        mqs: &[MessageQueue],
    ) -> Vec<MessageQueue> {
        let now = self.now();
        self.locks.try_lock_batch(group, mqs, client_id, now)
    }

    /// `unlockBatchMQ`: release the locks `client_id` holds among `mqs`.
    pub fn unlock_batch(&mut self, group: &str, client_id: &str, mqs: &[MessageQueue]) {
        self.locks.unlock_batch(group, mqs, client_id);
    }

    /// The client holding a live lock on `mq` for `group`, if any.
    pub fn queue_owner(&self, group: &str, mq: &MessageQueue) -> Option<String> {
        self.locks.owner(group, mq, self.now()).map(str::to_string)
    }

    pub(crate) fn mark_delay_dirty(&mut self) {
        self.dirty.delay = true;
    }

    // -----------------------------------------------------------------------------------------
    // Writing

    /// Put a message as a producer's send would: a NOT or COMMIT message with `DELAY > 0` is
    /// parked in `SCHEDULE_TOPIC_XXXX`; the store time is the clock's now.
    pub fn put_message(&mut self, msg: Message) -> EngineResult<PutResult> {
        let level = msg
            .property(crate::format::commitlog::prop::DELAY)
            .and_then(|d| crate::format::java::parse_int(&d))
            .unwrap_or(0);
        self.put_with_delay(msg, level)
    }

    /// Put with an explicit delay level, whatever the DELAY property says (the schedule
    /// service's deliveries keep DELAY in their bytes but are not delayed again).
    pub(crate) fn put_with_delay(
        &mut self,
        mut msg: Message,
        delay_level: i32,
    ) -> EngineResult<PutResult> {
        msg.store_timestamp = self.now();
        if self.options.version == BrokerVersion::V5 && msg.transaction_type().is_queued() {
            let (trailing, now) = (self.options.trailing_separator(), msg.store_timestamp);
            crate::engine::broker::timer::park_if_timer(&mut msg, delay_level, now, trailing)
                .map_err(EngineError::TimerRefused)?;
        }
        if delay_level > 0 && msg.transaction_type().is_queued() {
            let level = delay_level.min(self.source.geometry.max_delay_level());
            crate::engine::broker::schedule::park(
                &mut msg,
                level,
                self.options.trailing_separator(),
            );
        }
        if msg.version == MessageVersion::V1 && msg.topic.len() > i8::MAX as usize {
            msg.version = MessageVersion::V2;
        }
        let key = (msg.topic.clone(), msg.queue_id);
        let queued = msg.transaction_type().is_queued();
        let queue_offset = if queued {
            self.queues.get(&key).map(QueueView::max).unwrap_or(0) as i64
        } else {
            0
        };
        msg.queue_offset = queue_offset;
        let len = msg.encoded_len();
        let file_size = self.source.geometry.commitlog_file_size.value;
        if (len + END_FILE_MIN_BLANK_LENGTH) as u64 > file_size {
            return Err(EngineError::TooLarge { len, file_size });
        }
        let mut phy = self.overlay.next;
        let pos = phy % file_size;
        if (len + END_FILE_MIN_BLANK_LENGTH) as u64 > file_size - pos {
            phy = (phy - pos).saturating_add(file_size);
        }
        msg.physical_offset = phy as i64;
        let raw = msg.encode()?;
        if let Some(w) = self.overlay.writer.as_mut() {
            if queued {
                w.set_next_queue_offset(&msg.topic, msg.queue_id, queue_offset);
            }
            let a = w.append(msg.clone())?;
            if a.wrote_offset != phy || (queued && a.queue_offset != queue_offset) {
                return Err(EngineError::WriterOutOfStep {
                    expected: phy,
                    written: a.wrote_offset,
                    expected_queue: queue_offset,
                    written_queue: a.queue_offset,
                });
            }
        }
        self.overlay.next = phy.saturating_add(raw.len() as u64);
        if let Ok(Record::Message(m)) = parse_record(&raw, 0, phy, false) {
            let g = self.source.geometry.clone();
            self.dispatch_in_memory(&m, &g);
        }
        let result = PutResult {
            commitlog_offset: phy,
            size: raw.len(),
            topic: msg.topic.clone(),
            queue_id: msg.queue_id,
            queue_offset,
            msg_id: crate::format::msgid::offset_msg_id(&msg.store_host, phy as i64),
            store_timestamp: msg.store_timestamp,
        };
        self.overlay.records.insert(phy, raw);
        Ok(result)
    }
}

impl PullSource for Engine {
    fn queue_bounds(&self, topic: &str, queue_id: i32) -> (i64, i64) {
        Engine::queue_bounds(self, topic, queue_id)
    }

    fn units_from(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        limit: usize,
    ) -> Option<Vec<CqUnit>> {
        let view = self.queues.get(&(topic.to_string(), queue_id))?;
        let offset = u64::try_from(offset).ok()?;
        let per_file = self.source.geometry.cq_file_units.value.max(1);
        let file_end = offset - offset % per_file + per_file;
        let max = view.max();
        if offset >= max {
            return None;
        }
        let mut out = Vec::new();
        let mut next = offset;
        if offset < view.source_end {
            let cq = view.source.as_ref()?;
            let pos = offset * UNIT_SIZE as u64;
            let f = cq
                .files
                .iter()
                .find(|f| f.start <= pos && pos < f.start.saturating_add(f.len))?;
            let map = self.cq_map(&f.path)?;
            let file_stop = f.start.saturating_add(f.len) / UNIT_SIZE as u64;
            let stop = view.source_end.min(file_end).min(file_stop);
            while next < stop && out.len() < limit {
                let at = usize::try_from(next * UNIT_SIZE as u64 - f.start).ok()?;
                let Some(u) = map.get(at..).and_then(CqUnit::from_bytes) else {
                    break;
                };
                out.push(u);
                next += 1;
            }
            if next < view.source_end || next >= file_end {
                return Some(out);
            }
        }
        if next < view.tail_start {
            return if out.is_empty() { None } else { Some(out) };
        }
        let stop = max.min(file_end);
        while next < stop && out.len() < limit {
            let Some(u) = view.tail.get((next - view.tail_start) as usize) else {
                break;
            };
            out.push(*u);
            next += 1;
        }
        Some(out)
    }

    fn read(&self, phy: i64, size: i32) -> Option<Cow<'_, [u8]>> {
        let p = u64::try_from(phy).ok()?;
        if p >= self.overlay.start && !self.overlay.records.is_empty() {
            let r = self.overlay.records.get(&p)?;
            return (usize::try_from(size).ok()? == r.len()).then_some(Cow::Borrowed(r.as_slice()));
        }
        self.log.read(phy, size).map(Cow::Borrowed)
    }

    fn commitlog_max(&self) -> i64 {
        Engine::commitlog_max(self)
    }

    fn commitlog_file_size(&self) -> u64 {
        self.source.geometry.commitlog_file_size.value
    }

    fn cq_file_units(&self) -> u64 {
        self.source.geometry.cq_file_units.value
    }
}

/// Every topic a clustering push consumer of `group` pulls for a subscription to `topic`: the
/// topic and the group's retry topic (`copySubscription`).
pub fn subscribed_topics(group: &str, topic: &str) -> [String; 2] {
    [
        topic.to_string(),
        crate::engine::store::dispatch::retry_topic(group),
    ]
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("source", &self.source.root)
            .field("overlay", &self.overlay.dir)
            .field("overlay_start", &self.overlay.start)
            .field("overlay_records", &self.overlay.records.len())
            .field("queues", &self.queues.len())
            .finish()
    }
}

/// A record's properties as owned pairs in stored order, for editing (`getProperties`).
pub fn property_pairs(raw: &[u8]) -> Vec<(String, String)> {
    crate::format::commitlog::Properties(raw)
        .iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// `putProperty`: replace the value in place, or append the pair.
pub fn set_property(pairs: &mut Vec<(String, String)>, name: &str, value: impl Into<String>) {
    let value = value.into();
    match pairs.iter_mut().find(|(k, _)| k == name) {
        Some(p) => p.1 = value,
        None => pairs.push((name.to_string(), value)),
    }
}

/// `clearProperty`.
pub fn remove_property(pairs: &mut Vec<(String, String)>, name: &str) {
    pairs.retain(|(k, _)| k != name);
}
