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
//! [`crate::engine::broker::transaction`]; they are `impl Engine` blocks over the state kept here,
//! as are opening and closing (`open`), the queue views (`queues`), what consumers ask
//! (`consumers`) and writing to the overlay (`put`).

pub mod client_offsets;
pub mod clock;
mod consumers;
pub mod offsets;
mod open;
pub mod orderly;
pub mod pending;
pub mod pull;
mod put;
mod queues;
pub mod rebalance;
pub mod retry;
pub mod schedule;
pub mod timer;
pub mod transaction;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::broker::client_offsets::ClientOffsets;
use crate::engine::broker::clock::Clock;
use crate::engine::broker::orderly::QueueLocks;
use crate::engine::broker::pull::{BrokerRole, PullOptions};
use crate::engine::store::version::{detect_broker_version, BrokerVersion};
use crate::engine::store::writer::StoreWriter;
use crate::engine::store::{paths, Store};
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::write::EncodeError;
use crate::format::commitlog::Host;
use crate::format::config::{
    load, ConfigFile, ConfigSource, ConsumerOffsets, DelayOffsets, SubscriptionGroups, TopicConfigs,
};
use crate::format::error::Error;
use crate::format::mapped::Mapped;
use open::SourceLog;
use queues::QueueView;

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
    /// What opening did that a person should hear of (a torn overlay tail cut), for the command
    /// to say.
    pub notes: Vec<String>,
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
