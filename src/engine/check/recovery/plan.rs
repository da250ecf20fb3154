//! The recovery plan: which recovery the broker runs, where its scan starts and cuts, the
//! files it deletes, the consume queue units and index files it drops, and what each step loses.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::walk::*;
use crate::engine::store::version::{guess_version, BrokerVersion, VersionGuess};
use crate::engine::store::Store;
use crate::format::bytes::{i32_at, i64_at};
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::Segment;
use crate::format::commitlog::{sysflag, MAGIC_V1, MAGIC_V2};
use crate::format::consumequeue::{ConsumeQueue, CqUnit, UNIT_SIZE};
use crate::format::dledger::start::{recovery_start, RecoveryStart};
use crate::format::error::Result;
use crate::format::indexfile::IndexHeader;
use crate::format::mapped::Mapped;

/// Normal (clean shutdown) or abnormal (abort file present) recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryMode {
    Normal,
    Abnormal,
}

/// A file named by path and start offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileRef {
    #[serde(serialize_with = "path_str")]
    pub path: PathBuf,
    pub start: u64,
}

/// A commitlog file recovery deletes (`truncateDirtyFiles`), with what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeletedFile {
    #[serde(serialize_with = "path_str")]
    pub path: PathBuf,
    pub start: u64,
    pub messages: u64,
    pub bytes: u64,
}

/// Consume queue units recovery drops (`truncateDirtyLogicFiles`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueTruncation {
    pub topic: String,
    pub queue_id: i32,
    /// First queue offset dropped; the queue's max offset afterwards.
    pub from_queue_offset: u64,
    pub units: u64,
    /// Files deleted whole (their first unit is dropped).
    pub deleted_files: Vec<String>,
}

/// An index file recovery deletes (`IndexService.load(lastExitOK=false)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexDrop {
    #[serde(serialize_with = "path_str")]
    pub path: PathBuf,
    pub entries: u64,
    #[serde(rename = "begin_commitlog_offset")]
    pub begin_phy_offset: i64,
    #[serde(rename = "end_commitlog_offset")]
    pub end_phy_offset: i64,
    pub end_timestamp: i64,
}

/// Where the scan cuts and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cut {
    /// `processOffset`: the commitlog's max offset after recovery (`commitlog_offset` in JSON).
    #[serde(rename = "commitlog_offset")]
    pub offset: u64,
    #[serde(serialize_with = "path_str")]
    pub file: PathBuf,
    /// Position of the cut inside `file` (`file_offset` in JSON).
    #[serde(rename = "file_offset")]
    pub pos: u64,
    pub reason: StopReason,
    /// Valid-looking records after the cut (in the cut file and every later file).
    pub messages_dropped: u64,
    pub bytes_dropped: u64,
}

/// Everything the broker would do on its next start, and what each step costs.
#[derive(Debug, Clone, Serialize)]
pub struct RecoveryPlan {
    pub version: VersionGuess,
    pub mode: RecoveryMode,
    /// The `abort` file exists.
    pub abort_present: bool,
    /// The pid a 5.x broker wrote into `abort`.
    pub abort_pid: Option<u32>,
    pub checkpoint: Option<Checkpoint>,
    /// `getMinTimestamp()` of the checkpoint (abnormal recovery compares file start times to it).
    pub checkpoint_min_timestamp: Option<i64>,
    /// Reasons the broker would refuse to start (file sizes, foreign names).
    pub refuses_to_start: Vec<String>,
    /// The largest `offset + size` of any consume queue's last unit (`maxPhyOffsetOfConsumeQueue`;
    /// `max_commitlog_offset_of_consume_queue` in JSON).
    #[serde(rename = "max_commitlog_offset_of_consume_queue")]
    pub max_phy_offset_of_consume_queue: u64,
    /// Where the commitlog scan starts and why.
    pub start_file: Option<FileRef>,
    pub start_reason: String,
    /// Where it cuts (None without commitlog files).
    pub cut: Option<Cut>,
    /// Commitlog files deleted whole because they lie after the cut.
    pub deleted_files: Vec<DeletedFile>,
    /// Consume queue units dropped because they point at or after the cut.
    pub queue_truncations: Vec<QueueTruncation>,
    /// Queues the start leaves with messages at the wrong queue offsets, served nowhere, or
    /// units that are no message ([`super::requeue`]; worked out by [`plan`] only).
    pub requeues: Vec<super::Requeue>,
    /// Commitlog offsets `[from, to)` whose records are dispatched again (consume queues and
    /// index rebuilt), and how many records that is.
    pub redispatch_from: u64,
    pub redispatch_to: u64,
    pub redispatched_messages: u64,
    /// Index files deleted on an unclean start.
    pub index_files_deleted: Vec<IndexDrop>,
    /// Records with index keys whose entries are deleted and not rebuilt (they lie before the
    /// re-dispatch start but after the last kept index file).
    pub index_records_lost: u64,
    /// True when the body CRC was checked as the broker does (`checkCRCOnRecover`).
    pub crc_checked: bool,
    pub notes: Vec<String>,
    /// A DLedger-mode store: what `DLedgerMmapFileStore.recover` and `DLedgerCommitLog.recover`
    /// do instead of the commitlog scan (null for a normal store).
    pub dledger: Option<super::dledger::DledgerRecovery>,
}

impl RecoveryPlan {
    /// Messages recovery drops from the commitlog.
    pub fn messages_dropped(&self) -> u64 {
        self.cut.as_ref().map_or(0, |c| c.messages_dropped)
    }

    /// True when recovery loses nothing: no records, units or index entries dropped.
    pub fn loses_nothing(&self) -> bool {
        self.refuses_to_start.is_empty()
            && self.messages_dropped() == 0
            && self.queue_truncations.is_empty()
            && self.requeues.is_empty()
            && self.index_records_lost == 0
    }

    /// The steps as sentences, in the order the broker takes them.
    pub fn steps(&self) -> Vec<String> {
        if let Some(d) = &self.dledger {
            return d.steps(self);
        }
        let mut s = Vec::new();
        s.push(match self.mode {
            RecoveryMode::Normal => "no abort file: the last shutdown was clean; the broker runs \
                normal recovery (recoverNormally)"
                .to_string(),
            RecoveryMode::Abnormal => {
                format!(
                "abort file present{}: the last shutdown was unclean; the broker runs abnormal \
                 recovery (recoverAbnormally)",
                self.abort_pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
            )
            }
        });
        if let Some(c) = &self.checkpoint {
            s.push(format!(
                "checkpoint: physicMsgTimestamp {}, logicsMsgTimestamp {}, indexMsgTimestamp {}{}",
                c.physic_msg_timestamp,
                c.logics_msg_timestamp,
                c.index_msg_timestamp,
                self.checkpoint_min_timestamp
                    .map(|m| format!(" (getMinTimestamp {m})"))
                    .unwrap_or_default()
            ));
        }
        for r in &self.refuses_to_start {
            s.push(format!("the broker refuses to start: {r}"));
        }
        if !self.index_files_deleted.is_empty() {
            for d in &self.index_files_deleted {
                s.push(format!(
                    "delete index file {} ({} entries, offsets {}..={}, endTimestamp {} is after indexMsgTimestamp)",
                    d.path.display(),
                    d.entries,
                    d.begin_phy_offset,
                    d.end_phy_offset,
                    d.end_timestamp
                ));
            }
        }
        s.push(format!(
            "consume queues end at commitlog offset {} (maxPhyOffsetOfConsumeQueue)",
            self.max_phy_offset_of_consume_queue
        ));
        match &self.start_file {
            Some(f) => s.push(format!(
                "scan the commitlog from {} (offset {}): {}",
                f.path.display(),
                f.start,
                self.start_reason
            )),
            None => s.push(self.start_reason.clone()),
        }
        if let Some(c) = &self.cut {
            let why = match c.reason {
                StopReason::Blank | StopReason::EndOfData => "the end of the data".to_string(),
                StopReason::BadRecord => "a record that does not parse".to_string(),
                StopReason::CrcMismatch => "a body CRC mismatch".to_string(),
                StopReason::ZeroHole => "zeros where a record should start".to_string(),
            };
            let damaged = match c.reason {
                StopReason::CrcMismatch | StopReason::BadRecord => {
                    "the damaged record at the cut and "
                }
                _ => "",
            };
            s.push(format!(
                "cut the commitlog at offset {} ({} at position {}): {}; {damaged}{} later messages ({} bytes) dropped",
                c.offset,
                c.file.display(),
                c.pos,
                why,
                c.messages_dropped,
                c.bytes_dropped
            ));
        }
        for d in &self.deleted_files {
            s.push(format!(
                "delete commitlog file {} ({} messages, {} bytes)",
                d.path.display(),
                d.messages,
                d.bytes
            ));
        }
        for q in &self.queue_truncations {
            s.push(format!(
                "truncate consume queue {}/{} at queue offset {}: {} units dropped{}",
                q.topic,
                q.queue_id,
                q.from_queue_offset,
                q.units,
                if q.deleted_files.is_empty() {
                    String::new()
                } else {
                    format!(", files {} deleted", q.deleted_files.join(", "))
                }
            ));
        }
        if self.redispatched_messages > 0 {
            s.push(format!(
                "dispatch {} messages at offsets {}..{} again (consume queues and index rebuilt for them)",
                self.redispatched_messages, self.redispatch_from, self.redispatch_to
            ));
        }
        for r in &self.requeues {
            s.push(requeue_step(r));
        }
        if self.index_records_lost > 0 {
            s.push(format!(
                "{} messages lose their index entries for good (their index file is deleted and \
                 the re-dispatch starts after them)",
                self.index_records_lost
            ));
        }
        for n in &self.notes {
            s.push(n.clone());
        }
        s
    }
}

/// What the plan needs before walking: cheap to compute (headers, first records, queue ends).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub version: VersionGuess,
    pub mode: RecoveryMode,
    pub checkpoint: Option<Checkpoint>,
    pub checkpoint_error: Option<String>,
    /// Per queue: (end queue offset as recovery finds it, offset + size of its last unit).
    pub queue_ends: BTreeMap<(String, i32), (u64, u64)>,
    pub max_phy_offset_of_consume_queue: u64,
    /// Index of the commitlog file the scan starts from.
    pub start_index: Option<usize>,
    pub start_reason: String,
    pub index_files_deleted: Vec<IndexDrop>,
    /// Just after the largest endPhyOffset of the index files recovery keeps (0 when it keeps
    /// none): records with keys from here on lose their entries if they are not dispatched again.
    pub index_kept_end: u64,
    pub refuses_to_start: Vec<String>,
    pub notes: Vec<String>,
}

impl Prepared {
    /// Walk options that count what [`finish`] needs.
    pub fn walk_options(&self, store: &Store, check_crc: bool) -> WalkOptions {
        let start = self
            .start_index
            .and_then(|i| store.commitlog.segments.get(i))
            .map_or(0, |s| s.start);
        let dledger = store.dledger.is_some();
        WalkOptions {
            check_crc,
            keyed_from: self.index_kept_end,
            // DLedger: nothing is dispatched during recovery; the reput service starts at the
            // consume queues' max offset, so keys below it are lost with their index file.
            keyed_to: if dledger {
                self.dispatch_from(store)
            } else {
                u64::MAX
            },
            counted_from: match self.mode {
                _ if dledger => self.dispatch_from(store),
                RecoveryMode::Normal => self.max_phy_offset_of_consume_queue,
                RecoveryMode::Abnormal => start,
            },
        }
    }

    /// Where the broker's dispatch starts after a recovery that re-dispatches nothing (a clean
    /// start, and every start of a DLedger-mode store): the consume queues' max offset.
    pub fn dispatch_from(&self, store: &Store) -> u64 {
        self.max_phy_offset_of_consume_queue
            .max(store.commitlog.min_offset())
    }

    /// Index of the first commitlog file [`finish`] needs a walk of.
    pub fn first_needed(&self, store: &Store) -> usize {
        let mut start = self.start_index.unwrap_or(0);
        if store.dledger.is_some() {
            let from = self.dispatch_from(store);
            start = start.min(
                store
                    .commitlog
                    .segments
                    .partition_point(|s| s.start.saturating_add(s.len) <= from),
            );
        }
        let keyed = store
            .commitlog
            .segments
            .partition_point(|s| s.start.saturating_add(s.len) <= self.index_kept_end);
        start.min(keyed)
    }
}

/// The queue end recovery finds and the `offset + size` of the last unit before it (FORMAT.md
/// 6.1; a pre-blank unit counts with its size 0x7FFFFFFF, as Java does).
pub fn queue_end(cq: &ConsumeQueue) -> Result<(u64, u64)> {
    let end = cq.end_pos()?;
    let q = end / UNIT_SIZE as u64;
    if q == 0 {
        return Ok((0, 0));
    }
    let phy = match cq.unit_at(q - 1)? {
        Some(u) if u.is_valid() => (u.offset as u64).saturating_add(u.size as u64),
        _ => 0,
    };
    Ok((q, phy))
}

/// STORETIMESTAMP of a file's first record when its magic is a message magic
/// (`isMappedFileMatchedRecover`; 4.9 accepts version 1 only).
fn first_store_timestamp(seg: &Segment, version: BrokerVersion) -> Option<i64> {
    let map = Mapped::open(&seg.path).ok()?;
    let magic = i32_at(&map, 4)?;
    let ok = magic == MAGIC_V1 || (version == BrokerVersion::V5 && magic == MAGIC_V2);
    if !ok {
        return None;
    }
    let flag = i32_at(&map, 36)?;
    let born = if flag & sysflag::BORNHOST_V6 == 0 {
        8
    } else {
        20
    };
    let ts = i64_at(&map, 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born)?;
    (ts != 0).then_some(ts)
}

/// The cheap half of the plan: mode, checkpoint, queue ends, the scan origin, index files to drop.
pub fn prepare(store: &Store) -> Result<Prepared> {
    let (checkpoint, checkpoint_error) = match store.checkpoint() {
        Ok(c) => (c, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let version = guess_version(store, checkpoint.as_ref());
    let mode = if store.abort.present {
        RecoveryMode::Abnormal
    } else {
        RecoveryMode::Normal
    };
    let mut notes = Vec::new();
    let mut refuses = Vec::new();
    let file_size = store.geometry.commitlog_file_size.value;
    let segs = &store.commitlog.segments;
    for f in &store.commitlog.foreign {
        refuses.push(format!(
            "{} is not named by a 20-digit offset (MappedFileQueue.load fails on it)",
            f.display()
        ));
    }
    let v5 = version.version == BrokerVersion::V5;
    let odd_queues = store.queues.values().flat_map(|q| q.odd.iter());
    for e in store.commitlog.odd.iter().chain(odd_queues) {
        if !(v5 && e.kind == crate::format::entry::Kind::Dir) {
            refuses.push(format!(
                "{} is {}, not a file of the configured size (MappedFileQueue.load fails on it)",
                e.path.display(),
                e.kind.describe()
            ));
        }
    }
    for q in store.queues.values() {
        for f in &q.foreign {
            refuses.push(format!(
                "{} is not named by a 20-digit offset (the consume queue does not load)",
                f.display()
            ));
        }
    }
    for e in &store.index_odd {
        refuses.push(format!(
            "{} is {} (IndexService.load cannot open it)",
            e.path.display(),
            e.kind.describe()
        ));
    }
    let checkpoint_entry = crate::format::entry::probe(&store.checkpoint_path());
    if !matches!(
        checkpoint_entry.kind,
        crate::format::entry::Kind::File { .. } | crate::format::entry::Kind::Missing
    ) {
        refuses.push(format!(
            "{} is {} (StoreCheckpoint cannot map it)",
            checkpoint_entry.path.display(),
            checkpoint_entry.kind.describe()
        ));
    }
    for (i, s) in segs.iter().enumerate() {
        if s.len != file_size {
            if version.version == BrokerVersion::V5 && s.len == 0 && i + 1 == segs.len() {
                notes.push(format!(
                    "{} is empty and the last file: 5.x deletes it before loading",
                    s.path.display()
                ));
            } else {
                refuses.push(format!(
                    "{} is {} bytes, not mappedFileSizeCommitLog {} (MappedFileQueue.load fails)",
                    s.path.display(),
                    s.len,
                    file_size
                ));
            }
        }
    }
    let cq_size = store.geometry.cq_file_size();
    let mut queue_ends = BTreeMap::new();
    let mut max_phy = 0u64;
    // Each queue's end is a scan of its last files: the queues are scanned in parallel.
    let ends: Vec<Result<(u64, u64)>> = {
        use rayon::prelude::*;
        store
            .queues
            .par_iter()
            .map(|(_, cq)| queue_end(cq))
            .collect()
    };
    for (((t, q), cq), end) in store.queues.iter().zip(ends) {
        for f in &cq.files {
            if f.len != cq_size {
                refuses.push(format!(
                    "{} is {} bytes, not mappedFileSizeConsumeQueue {} (the consume queue does not load)",
                    f.path.display(),
                    f.len,
                    cq_size
                ));
            }
        }
        let (end, phy) = end?;
        max_phy = max_phy.max(phy);
        queue_ends.insert((t.clone(), *q), (end, phy));
    }

    let (start_index, start_reason) = if segs.is_empty() {
        (
            None,
            "there are no commitlog files: the broker destroys every consume queue".to_string(),
        )
    } else {
        match mode {
            RecoveryMode::Normal => match version.version {
                BrokerVersion::V4_9 => (
                    Some(segs.len().saturating_sub(3)),
                    format!(
                        "{} (recoverNormally scans the last three)",
                        third_to_last(segs.len())
                    ),
                ),
                BrokerVersion::V5 => {
                    let i = segs
                        .partition_point(|s| s.start <= max_phy)
                        .saturating_sub(1);
                    (
                        Some(i),
                        format!(
                            "the last file starting at or below the consume queues' max offset {max_phy} \
                             (5.3.2+; 5.0-5.3.1 start at {}, {})",
                            third_to_last(segs.len()),
                            segs.get(segs.len().saturating_sub(3))
                                .map(|s| s.path.display().to_string())
                                .unwrap_or_default()
                        ),
                    )
                }
            },
            RecoveryMode::Abnormal => {
                let min_ts = checkpoint.map(|c| c.min_timestamp());
                let mut found = None;
                for (i, s) in segs.iter().enumerate().rev() {
                    if let (Some(ts), Some(min)) =
                        (first_store_timestamp(s, version.version), min_ts)
                    {
                        if ts <= min {
                            found = Some((i, ts));
                            break;
                        }
                    }
                }
                match (found, min_ts) {
                    (Some((i, ts)), Some(min)) => (
                        Some(i),
                        format!(
                            "the newest file whose first record was stored at {ts}, at or before \
                             the checkpoint's min timestamp {min} (min(physic, logics) - 3000)"
                        ),
                    ),
                    _ => (
                        Some(0),
                        "no file's first record is older than the checkpoint: the first file"
                            .to_string(),
                    ),
                }
            }
        }
    };

    // Index files: an unclean start deletes those whose endTimestamp is after indexMsgTimestamp.
    let mut index_files_deleted = Vec::new();
    let mut index_kept_end = 0u64;
    let index_ts = checkpoint.map_or(0, |c| c.index_msg_timestamp);
    for p in &store.index_files {
        let Ok(map) = Mapped::open(p) else { continue };
        let Ok(h) = IndexHeader::from_bytes(&map) else {
            continue;
        };
        if mode == RecoveryMode::Abnormal && h.end_timestamp > index_ts {
            index_files_deleted.push(IndexDrop {
                path: p.clone(),
                entries: (h.index_count.max(1) - 1) as u64,
                begin_phy_offset: h.begin_phy_offset,
                end_phy_offset: h.end_phy_offset,
                end_timestamp: h.end_timestamp,
            });
        } else if h.index_count > 1 {
            // The record at endPhyOffset is the file's last entry: it keeps its entries.
            if let Ok(end) = u64::try_from(h.end_phy_offset) {
                index_kept_end = index_kept_end.max(end.saturating_add(1));
            }
        }
    }
    if let Some(e) = &checkpoint_error {
        notes.push(format!("the checkpoint does not read: {e}"));
    }
    if checkpoint.is_none() && checkpoint_error.is_none() {
        notes.push("there is no checkpoint file: the broker starts with all times 0".into());
    }
    let (mut start_index, mut start_reason) = (start_index, start_reason);
    if let Some(l) = &store.dledger {
        // DLedgerMmapFileStore.recover starts near the end of the data files.
        let first = segs.partition_point(|s| s.start < l.divide());
        if first < segs.len() {
            let n = l.data.files.len();
            // A data file that cannot be read is verify's finding; the search then gives up.
            let start = recovery_start(l).ok().flatten().unwrap_or(RecoveryStart {
                file: n.saturating_sub(3),
                first_index: None,
                passed_over: Vec::new(),
            });
            start_index = Some((first + start.file).min(segs.len() - 1));
            start_reason = match (start.first_index, start.passed_over.len()) {
                (Some(i), 0) => format!(
                    "DLedgerMmapFileStore.recover: {} (its first entry, index {i}, agrees with \
                     its index unit)",
                    third_to_last(n)
                ),
                (Some(i), k) => format!(
                    "DLedgerMmapFileStore.recover: {k} file(s) before {} whose first entry, index \
                     {i}, agrees with its index unit ({})",
                    third_to_last(n),
                    passed_over(&start.passed_over)
                ),
                (None, 0) => format!("DLedgerMmapFileStore.recover: {}", third_to_last(n)),
                (None, _) => format!(
                    "DLedgerMmapFileStore.recover: no file from {} back to the first starts with \
                     an entry that agrees with its index unit ({}): the first file",
                    third_to_last(n),
                    passed_over(&start.passed_over)
                ),
            };
        }
    }
    Ok(Prepared {
        version,
        mode,
        checkpoint,
        checkpoint_error,
        queue_ends,
        max_phy_offset_of_consume_queue: max_phy,
        start_index,
        start_reason,
        index_files_deleted,
        index_kept_end,
        refuses_to_start: refuses,
        notes,
    })
}

/// First queue offset in `[lo, hi)` whose unit points at or after `cut`, by binary search (unit
/// offsets increase along a queue).
fn first_unit_at_or_after(cq: &ConsumeQueue, lo: u64, hi: u64, cut: u64) -> Result<u64> {
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let at_or_after = match cq.unit_at(mid)? {
            Some(u) if u.is_valid() && !u.is_pre_blank() => u.offset as u64 >= cut,
            Some(CqUnit { .. }) => false,
            None => true,
        };
        if at_or_after {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo)
}

/// Build the plan from the walks of the commitlog files (`walks[i]` is the walk of
/// `store.commitlog.segments[i]`; walks before [`Prepared::first_needed`] may be `None`).
pub fn finish(
    store: &Store,
    prep: &Prepared,
    walks: &[Option<&FileWalk>],
    crc_checked: bool,
) -> Result<RecoveryPlan> {
    let segs = &store.commitlog.segments;
    let mut notes = prep.notes.clone();
    let mut cut = None;
    let mut deleted_files = Vec::new();
    let mut redispatched = 0u64;
    let start_offset = prep
        .start_index
        .and_then(|i| segs.get(i))
        .map_or(0, |s| s.start);
    if let Some(si) = prep.start_index {
        // Follow the chain from the start file to the first stop.
        let mut cut_index = None;
        for i in si..segs.len() {
            let Some(w) = walks.get(i).copied().flatten() else {
                break;
            };
            redispatched += w.counted_from_count;
            let last = i + 1 == segs.len();
            if w.stop.ends_scan() || last {
                cut_index = Some(i);
                break;
            }
        }
        if let Some(ci) = cut_index {
            if let Some(w) = walks.get(ci).copied().flatten() {
                let offset = w.stop_offset();
                let mut messages = w.after_records;
                let mut bytes = w.after_bytes;
                for (j, s) in segs.iter().enumerate().skip(ci + 1) {
                    let (m, b) = walks.get(j).copied().flatten().map_or((0, 0), |w| {
                        (w.records + w.after_records, w.bytes + w.after_bytes)
                    });
                    messages += m;
                    bytes += b;
                    if s.start > offset {
                        deleted_files.push(DeletedFile {
                            path: s.path.clone(),
                            start: s.start,
                            messages: m,
                            bytes: b,
                        });
                    }
                }
                cut = Some(Cut {
                    offset,
                    file: w.path.clone(),
                    pos: w.stop_pos,
                    reason: w.stop,
                    messages_dropped: messages,
                    bytes_dropped: bytes,
                });
            }
        }
    }

    // Consume queues: every queue drops its units at or after the cut when the queues reach it.
    let mut queue_truncations = Vec::new();
    let process_offset = cut.as_ref().map_or(0, |c| c.offset);
    if prep.max_phy_offset_of_consume_queue >= process_offset && !segs.is_empty() {
        for ((t, q), cq) in &store.queues {
            let Some(&(end, phy)) = prep.queue_ends.get(&(t.clone(), *q)) else {
                continue;
            };
            if phy < process_offset || end == 0 {
                continue;
            }
            let lo = cq.files.first().map_or(0, |f| f.start / UNIT_SIZE as u64);
            let from = first_unit_at_or_after(cq, lo, end, process_offset)?;
            if from >= end {
                continue;
            }
            let deleted_files = cq
                .files
                .iter()
                .filter(|f| f.start >= from * UNIT_SIZE as u64)
                .map(|f| f.path.display().to_string())
                .collect();
            queue_truncations.push(QueueTruncation {
                topic: t.clone(),
                queue_id: *q,
                from_queue_offset: from,
                units: end - from,
                deleted_files,
            });
        }
    }
    if segs.is_empty() && !store.queues.is_empty() {
        for (t, q) in store.queues.keys() {
            if let Some(&(end, _)) = prep.queue_ends.get(&(t.clone(), *q)) {
                if end > 0 {
                    queue_truncations.push(QueueTruncation {
                        topic: t.clone(),
                        queue_id: *q,
                        from_queue_offset: 0,
                        units: end,
                        deleted_files: Vec::new(),
                    });
                }
            }
        }
    }

    // What is dispatched again: abnormal recovery dispatches every record it scans; a clean
    // start (5.x during recovery, 4.9 by the reput service afterwards) dispatches what lies after
    // the consume queues' max offset.
    let dledger_mode = store.dledger.is_some();
    let (redispatch_from, redispatch_to) = match prep.mode {
        RecoveryMode::Abnormal if !dledger_mode => (start_offset, process_offset),
        _ => (prep.dispatch_from(store), process_offset),
    };
    if prep.mode == RecoveryMode::Normal || dledger_mode {
        // Records before the scan start are not counted by the walks; the reput service reads
        // from the consume queues' max offset onward.
        redispatched = 0;
        for (i, s) in segs.iter().enumerate() {
            if s.start.saturating_add(s.len) <= redispatch_from {
                continue;
            }
            if let Some(w) = walks.get(i).copied().flatten() {
                redispatched += w.counted_from_count;
                if w.stop.ends_scan() {
                    break;
                }
            }
        }
    }
    if redispatch_to <= redispatch_from {
        redispatched = 0;
    }

    // Index entries lost: records with keys after the last kept index file and before the
    // re-dispatch start.
    let mut index_records_lost = 0u64;
    if prep.mode == RecoveryMode::Abnormal && !prep.index_files_deleted.is_empty() {
        let keyed_end = if dledger_mode {
            redispatch_from
        } else {
            start_offset
        };
        for (i, s) in segs.iter().enumerate() {
            if s.start >= keyed_end {
                break;
            }
            if let Some(w) = walks.get(i).copied().flatten() {
                index_records_lost += w.keyed_from_count;
            }
        }
    }
    if !crc_checked {
        notes.push(
            "body CRCs were not checked (--no-crc); the broker checks them (checkCRCOnRecover) \
             and may cut earlier"
                .to_string(),
        );
    }
    if prep.version.version == BrokerVersion::V5 {
        notes.push(
            "5.x then sets the confirm offset (checkpoint confirmPhyOffset) from the end of the scan"
                .to_string(),
        );
    }
    let dledger = store
        .dledger
        .as_ref()
        .map(|_| super::dledger::explain(store, prep, redispatch_from, index_records_lost));
    Ok(RecoveryPlan {
        dledger,
        version: prep.version.clone(),
        mode: prep.mode,
        abort_present: store.abort.present,
        abort_pid: store.abort.pid,
        checkpoint: prep.checkpoint,
        checkpoint_min_timestamp: prep.checkpoint.map(|c| c.min_timestamp()),
        refuses_to_start: prep.refuses_to_start.clone(),
        max_phy_offset_of_consume_queue: prep.max_phy_offset_of_consume_queue,
        start_file: prep.start_index.and_then(|i| segs.get(i)).map(|s| FileRef {
            path: s.path.clone(),
            start: s.start,
        }),
        start_reason: prep.start_reason.clone(),
        cut,
        deleted_files,
        queue_truncations,
        requeues: Vec::new(),
        redispatch_from,
        redispatch_to,
        redispatched_messages: redispatched,
        index_files_deleted: prep.index_files_deleted.clone(),
        index_records_lost,
        crc_checked,
        notes,
    })
}

/// The whole plan, walking only the commitlog files it needs (the scan's files and, on an
/// unclean start, those between the last kept index file and the scan start).
pub fn plan(store: &Store, check_crc: bool) -> Result<RecoveryPlan> {
    let prep = prepare(store)?;
    let opts = prep.walk_options(store, check_crc);
    let first = prep.first_needed(store);
    let mut walks: Vec<Option<FileWalk>> = Vec::with_capacity(store.commitlog.segments.len());
    for (i, seg) in store.commitlog.segments.iter().enumerate() {
        if i < first {
            walks.push(None);
            continue;
        }
        let map = seg.map()?;
        walks.push(Some(walk_file(&map, seg, &opts, |_, _| {})));
    }
    let mut owned: Vec<FileWalk> = Vec::new();
    let mut present = Vec::new();
    for w in walks {
        present.push(w.is_some());
        if let Some(w) = w {
            owned.push(w);
        }
    }
    mark_missing_blanks(&mut owned);
    let mut it = owned.iter();
    let refs: Vec<Option<&FileWalk>> = present
        .iter()
        .map(|&p| if p { it.next() } else { None })
        .collect();
    let mut plan = finish(store, &prep, &refs, check_crc)?;
    add_requeues(store, &prep, &mut plan)?;
    Ok(plan)
}

/// Fills `plan.requeues`: what the re-dispatch and `truncateDirtyLogicFiles` leave in each
/// queue (not for DLedger mode, whose dispatch starts at the queues' max offset).
pub fn add_requeues(store: &Store, prep: &Prepared, plan: &mut RecoveryPlan) -> Result<()> {
    if store.dledger.is_none() {
        plan.requeues = plan_requeues(store, prep, plan)?;
    }
    Ok(())
}

fn plan_requeues(
    store: &Store,
    prep: &Prepared,
    plan: &RecoveryPlan,
) -> Result<Vec<super::Requeue>> {
    let Some(cut) = plan.cut.as_ref().map(|c| c.offset) else {
        return Ok(Vec::new());
    };
    let truncate = (prep.max_phy_offset_of_consume_queue >= cut).then_some(cut);
    let order = if prep.mode == RecoveryMode::Abnormal || prep.version.version == BrokerVersion::V5
    {
        super::Order::DispatchThenTruncate
    } else {
        super::Order::TruncateThenDispatch
    };
    super::requeues(
        store,
        plan.redispatch_from,
        plan.redispatch_to,
        truncate,
        order,
    )
}

/// One queue the start leaves wrong, in words.
pub fn requeue_step(r: &super::Requeue) -> String {
    let mut parts = Vec::new();
    if let Some((own, at)) = r.first_misplaced {
        parts.push(format!(
            "{} messages get units at other queue offsets than their own (the one at {own} is \
             served at {at})",
            r.misplaced
        ));
    }
    if r.out_of_service > 0 {
        parts.push(format!(
            "{} messages from queue offset {} on are served at no offset",
            r.out_of_service, r.recovered_end
        ));
    }
    if !r.bogus_units.is_empty() {
        let at: Vec<String> = r.bogus_units.iter().map(|q| q.to_string()).collect();
        parts.push(format!(
            "a unit that is no message is kept at queue offset {} (getMessage answers it \
             FOUND, with no message in it)",
            at.join(", ")
        ));
    }
    if r.stale_units > 0 {
        parts.push(format!(
            "{} stale units after the queue's end are kept",
            r.stale_units
        ));
    }
    format!(
        "consume queue {}/{} (recovered end {}): {}; its max offset becomes {}",
        r.topic,
        r.queue_id,
        r.recovered_end,
        parts.join("; "),
        r.max_offset
    )
}

/// The files the DLedger recovery passed over, in words.
fn passed_over(files: &[(std::path::PathBuf, String)]) -> String {
    files
        .iter()
        .map(|(p, why)| {
            format!(
                "{}: {why}",
                p.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The file `recoverNormally` of 4.9 (and 5.0 to 5.3.1) starts at among `n` files, in words.
fn third_to_last(n: usize) -> &'static str {
    match n {
        0 | 1 => "the first file (the only one)",
        2 => "the first file (there are only two)",
        _ => "the third-to-last file",
    }
}
