//! Looking messages up in a store, the way the broker does: by key through the index files
//! (`DefaultMessageStore.queryMessage`), by commitlog offset (`lookMessageByOffset`, offset message
//! ids), by client UNIQ_KEY, by consume queue offset, and by store time
//! (`getOffsetInQueueByTime`, 4.9 and 5.x rules, ENGINE.md 4.5); plus a commitlog scan for stores
//! whose index is missing or broken.
//!
//! A [`Reader`] maps the commitlog files once (and the index files on first use), so repeated
//! lookups cost a few page reads each. Lookups return commitlog offsets; [`Reader::message_at`]
//! turns an offset into a borrowed [`MessageRef`].

mod by_time;

use by_time::file_for;
pub use by_time::{file_mtime_ms, Boundary, WindowQuery, WindowQueue};

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use serde::Serialize;

use crate::engine::filter::TagFilter;
use crate::engine::store::version::BrokerVersion;
use crate::engine::store::Store;
use crate::format::bytes::{i32_at, i64_at};
use crate::format::commitlog::read::{parse_record, Record, SegmentKind};
use crate::format::commitlog::walk::walk_segment;
use crate::format::commitlog::{sysflag, Host, MessageRef, TransactionType};
use crate::format::consumequeue::{ConsumeQueue, CqUnit, UNIT_SIZE};
use crate::format::dledger::EntryHeader;
use crate::format::error::{Error, Result};
use crate::format::filename::QueueFile;
use crate::format::indexfile::{query_offsets, IndexFile, IndexGeometry};
use crate::format::mapped::Mapped;
use crate::format::msgid::decode_offset_msg_id;

/// `MessageDecoder.SYSFLAG_POSITION`.
const SYSFLAG_POSITION: usize = 36;
/// Offset of BORNHOST in a record (`4+4+4+4+4+8+8+4+8`); STORETIMESTAMP follows the born host.
const BORNHOST_POSITION: usize = 48;
/// Rounds of `DefaultMessageStore.queryMessage`.
const QUERY_ROUNDS: usize = 3;

/// A record found in the commitlog, with the file it is in.
#[derive(Debug, Clone)]
pub struct Located<'a> {
    pub message: MessageRef<'a>,
    pub file: &'a Path,
}

/// A hit of a lookup: the record's commitlog offset, and its queue offset when it was found
/// through a consume queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Hit {
    pub offset: u64,
    pub queue_offset: Option<u64>,
}

impl Hit {
    fn at(offset: u64) -> Self {
        Hit {
            offset,
            queue_offset: None,
        }
    }
}

/// What `queryMessage` answered for one key.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KeyQueryResult {
    /// Offsets of the records the broker returns, ascending (it sorts them before reading).
    pub offsets: Vec<u64>,
    /// Those of `offsets` whose record does not carry the key under the topic: index hash
    /// collisions, which the client (`MQAdminImpl.queryMessage`) drops.
    pub collisions: Vec<u64>,
    /// Commitlog offsets (as the index entries store them) whose record could not be read:
    /// deleted or corrupt data, or an offset no record can have.
    pub unreadable: Vec<i64>,
    /// The last round found `max_num` offsets: more may exist.
    pub capped: bool,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phy_offset: i64,
    /// Index files searched (all loaded files; the broker picks by time range).
    pub index_files: usize,
}

impl KeyQueryResult {
    /// The offsets the client keeps (collisions removed).
    pub fn matching(&self) -> Vec<u64> {
        self.offsets
            .iter()
            .copied()
            .filter(|o| !self.collisions.contains(o))
            .collect()
    }
}

/// What a commitlog scan found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScanResult {
    /// Matching records, ascending.
    pub offsets: Vec<u64>,
    /// `max` matches were found before the end: more may exist.
    pub capped: bool,
    pub bytes_scanned: u64,
    pub records_scanned: u64,
    /// Files whose walk stopped at a record that does not parse.
    pub problems: Vec<String>,
}

/// An offset message id, decoded and checked against the record it names.
#[derive(Debug, Clone)]
pub struct OffsetIdLookup<'a> {
    pub host: Host,
    pub offset: i64,
    /// The record at that offset, if one starts there.
    pub record: Option<Located<'a>>,
}

impl OffsetIdLookup<'_> {
    /// True when a record starts at the offset and its store host is the id's.
    pub fn host_matches(&self) -> bool {
        self.record
            .as_ref()
            .is_some_and(|r| r.message.store_host == self.host)
    }
}

/// The index files, mapped, newest first.
struct IndexSet {
    files: Vec<IndexFile<Mapped>>,
    problems: Vec<String>,
}

/// A consume queue as the broker holds it after recovery: the files up to the end of its data,
/// each with the bytes written in it.
struct LoadedQueue<'q> {
    files: Vec<(&'q QueueFile, usize)>,
    /// `minLogicOffset` (bytes).
    min_logic: u64,
    /// End of data (bytes).
    end: u64,
    file_size: u64,
}

/// Read access to a store for lookups: commitlog files mapped once, index files on first use.
pub struct Reader<'s> {
    store: &'s Store,
    maps: Vec<std::result::Result<Mapped, Arc<Error>>>,
    index: OnceLock<IndexSet>,
    end_of_data: OnceLock<Option<u64>>,
    topics: OnceLock<Vec<String>>,
}

impl<'s> Reader<'s> {
    /// Map the store's commitlog files (a file that cannot be mapped reads as missing).
    pub fn new(store: &'s Store) -> Self {
        let maps = store
            .commitlog
            .segments
            .iter()
            .map(|s| Mapped::open(&s.path).map_err(Arc::new))
            .collect();
        Reader {
            store,
            maps,
            index: OnceLock::new(),
            end_of_data: OnceLock::new(),
            topics: OnceLock::new(),
        }
    }

    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// Problems met while opening the index files (files skipped).
    pub fn index_problems(&self) -> &[String] {
        &self.index_set().problems
    }

    /// How many index files were loaded.
    pub fn index_file_count(&self) -> usize {
        self.index_set().files.len()
    }

    fn index_set(&self) -> &IndexSet {
        self.index.get_or_init(|| {
            let g = &self.store.geometry;
            let geometry = IndexGeometry::new(g.index_slots.value, g.index_entries.value);
            let mut files = Vec::new();
            let mut problems = Vec::new();
            for p in self.store.index_files.iter().rev() {
                match IndexFile::open(p, geometry) {
                    Ok(f) => files.push(f),
                    Err(e) => problems.push(format!("index file skipped: {e}")),
                }
            }
            IndexSet { files, problems }
        })
    }

    fn segment_index(&self, offset: u64) -> Option<usize> {
        let segs = &self.store.commitlog.segments;
        let i = segs.partition_point(|s| s.start <= offset).checked_sub(1)?;
        let s = segs.get(i)?;
        (offset < s.start.saturating_add(s.len)).then_some(i)
    }

    fn segment_bytes(&self, i: usize) -> Option<&[u8]> {
        self.maps.get(i)?.as_ref().ok().map(|m| &m[..])
    }

    /// `lookMessageByOffset`: the message record that starts at commitlog offset `offset`.
    /// `Ok(None)` when no file holds the offset or no message starts there (a blank, zeros);
    /// an error when the bytes there do not parse as a record.
    pub fn message_at(&self, offset: u64) -> Result<Option<Located<'_>>> {
        // an uncommitted DLedger entry's record is not the broker's to serve
        match self.message_shown_at(offset)? {
            Some((l, false)) => Ok(Some(l)),
            _ => Ok(None),
        }
    }

    /// [`Reader::message_at`] that also reads the record of an uncommitted DLedger entry, to
    /// show it marked as such: the record and whether its entry is uncommitted.
    pub fn message_shown_at(&self, offset: u64) -> Result<Option<(Located<'_>, bool)>> {
        let Some(i) = self.segment_index(offset) else {
            return Ok(None);
        };
        let Some(seg) = self.store.commitlog.segments.get(i) else {
            return Ok(None);
        };
        let uncommitted = seg.uncommitted(offset);
        let buf = match self.maps.get(i) {
            Some(Ok(m)) => &m[..],
            Some(Err(e)) => return Err(Error::Unmapped(Arc::clone(e))),
            None => return Ok(None),
        };
        let pos = (offset - seg.start) as usize;
        match parse_record(buf, pos, seg.start, false) {
            Ok(Record::Message(message)) => Ok(Some((
                Located {
                    message,
                    file: &seg.path,
                },
                uncommitted,
            ))),
            Ok(_) => Ok(None),
            Err(e) => Err(e.in_file(&seg.path, 0)),
        }
    }

    /// The header of the DLedger entry that wraps the record at commitlog offset `offset`;
    /// `None` in a `commitlog/` file.
    pub fn dledger_entry(&self, offset: u64) -> Option<EntryHeader> {
        let i = self.segment_index(offset)?;
        let seg = self.store.commitlog.segments.get(i)?;
        if seg.kind != SegmentKind::Dledger {
            return None;
        }
        let at = usize::try_from(offset.checked_sub(seg.start)?)
            .ok()?
            .checked_sub(seg.header_len())?;
        EntryHeader::from_bytes(self.segment_bytes(i)?.get(at..)?)
    }

    /// End of the commitlog's data as recovery finds it, computed once (a walk of the last
    /// files); `None` if it cannot be read.
    fn end_of_data(&self) -> Option<u64> {
        *self
            .end_of_data
            .get_or_init(|| self.store.commitlog.max_offset().ok())
    }

    /// `CommitLog.pickupStoreTimestamp(offset, size)`: the STORETIMESTAMP of the record a unit
    /// points at, or -1 when the bytes `[offset, offset+size)` are below the commitlog minimum or
    /// not inside written data. Like Java, only the sysflag and the timestamp are read. A record
    /// that parses with exactly `size` bytes counts as written without computing the end of data;
    /// anything else is checked against it.
    pub fn pickup_store_timestamp(&self, offset: i64, size: i32) -> i64 {
        let min = self.store.commitlog.min_offset() as i64;
        if self.store.commitlog.segments.is_empty() || offset < min || size <= 0 || offset < 0 {
            return -1;
        }
        let off = offset as u64;
        let (i, pos) = match self.segment_index(off) {
            Some(i) => match self.store.commitlog.segments.get(i) {
                Some(seg) if seg.uncommitted(off) => return -1,
                Some(seg) => (i, off - seg.start),
                None => return -1,
            },
            // `getMessage` looks offset 0 up with returnFirstOnNotFound.
            None if off == 0 => (0, 0),
            None => return -1,
        };
        let Some(buf) = self.segment_bytes(i) else {
            return -1;
        };
        let (Ok(pos), Ok(size)) = (usize::try_from(pos), usize::try_from(size)) else {
            return -1;
        };
        let Some(rec) = pos.checked_add(size).and_then(|e| buf.get(pos..e)) else {
            return -1;
        };
        let parses = matches!(
            parse_record(rec, 0, 0, false),
            Ok(Record::Message(ref m)) if m.raw.len() == size
        );
        if !parses {
            let Some(seg) = self.store.commitlog.segments.get(i) else {
                return -1;
            };
            let Some(end) = self.end_of_data() else {
                return -1;
            };
            if seg.start > end || seg.start + (pos + size) as u64 > end {
                return -1;
            }
        }
        let Some(flag) = i32_at(rec, SYSFLAG_POSITION) else {
            return -1;
        };
        let born_len = if flag & sysflag::BORNHOST_V6 == 0 {
            8
        } else {
            20
        };
        i64_at(rec, BORNHOST_POSITION + born_len).unwrap_or(-1)
    }

    // ----------------------------------------------------------------------------------------
    // By key, through the index

    /// `DefaultMessageStore.queryMessage(topic, key, maxNum, begin, end)`: up to three rounds of
    /// `IndexService.queryOffset` (newest index file first, `maxNum` capped at 64), each sorted
    /// ascending and read; a round that reads nothing retries with `end` = the store time of its
    /// first record. Hash collisions are kept in `offsets` and listed in `collisions`.
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin: i64,
        end: i64,
    ) -> KeyQueryResult {
        let set = self.index_set();
        let mut res = KeyQueryResult {
            index_files: set.files.len(),
            ..Default::default()
        };
        let mut last = end;
        for _ in 0..QUERY_ROUNDS {
            let q = query_offsets(set.files.iter(), topic, key, max_num, begin, last);
            if q.phy_offsets.is_empty() {
                break;
            }
            res.capped = q.phy_offsets.len() >= max_num.clamp(0, 64) as usize;
            let mut offsets = q.phy_offsets;
            offsets.sort_unstable();
            res.index_last_update_timestamp = q.index_last_update_timestamp;
            res.index_last_update_phy_offset = q.index_last_update_phy_offset;
            for (m, off) in offsets.into_iter().enumerate() {
                let found = u64::try_from(off)
                    .ok()
                    .and_then(|o| self.message_at(o).ok().flatten());
                match found {
                    Some(r) => {
                        if m == 0 {
                            last = r.message.store_timestamp;
                        }
                        let o = r.message.position;
                        if !carries_key(&r.message, topic, key) {
                            res.collisions.push(o);
                        }
                        res.offsets.push(o);
                    }
                    None => res.unreadable.push(off),
                }
            }
            if !res.offsets.is_empty() || last < begin {
                break;
            }
        }
        res
    }

    /// Every topic a UNIQ_KEY may be indexed under: the consume queue topics and those of
    /// `topics.json`.
    pub fn topics(&self) -> &[String] {
        self.topics.get_or_init(|| {
            let mut v: Vec<String> = self.store.topics().iter().map(|t| t.to_string()).collect();
            if let Ok(l) = crate::format::config::load::<crate::format::config::TopicConfigs>(
                &self.store.config_dir(),
            ) {
                v.extend(l.value.iter().map(|t| t.topic_name.clone()));
            }
            v.sort();
            v.dedup();
            v
        })
    }

    /// A client message id (UNIQ_KEY) looked up through the index under `topic`, or under every
    /// topic; keeps the records whose UNIQ_KEY is `key` (the client's check), ascending.
    pub fn by_uniq_key(&self, key: &str, topic: Option<&str>, max_num: i32) -> KeyQueryResult {
        let topics: Vec<&str> = match topic {
            Some(t) => vec![t],
            None => self.topics().iter().map(String::as_str).collect(),
        };
        let mut out = KeyQueryResult {
            index_files: self.index_file_count(),
            ..Default::default()
        };
        for t in topics {
            let r = self.query_message(t, key, max_num, 0, i64::MAX);
            out.capped |= r.capped;
            for o in r.offsets {
                let uniq = self
                    .message_at(o)
                    .ok()
                    .flatten()
                    .and_then(|m| m.message.uniq_key().map(|u| u == key));
                if uniq == Some(true) {
                    out.offsets.push(o);
                } else {
                    out.collisions.push(o);
                }
            }
            out.unreadable.extend(r.unreadable);
            out.index_last_update_timestamp = r.index_last_update_timestamp;
            out.index_last_update_phy_offset = r.index_last_update_phy_offset;
        }
        out.offsets.sort_unstable();
        out.offsets.dedup();
        out
    }

    /// An offset message id decoded (`MessageDecoder.decodeMessageId`) and the record at its
    /// offset; `None` when `id` is not 32 or 56 hex characters.
    pub fn by_offset_msg_id(&self, id: &str) -> Option<OffsetIdLookup<'_>> {
        let (host, offset) = decode_offset_msg_id(id)?;
        let record = u64::try_from(offset)
            .ok()
            .and_then(|o| self.message_at(o).ok().flatten());
        Some(OffsetIdLookup {
            host,
            offset,
            record,
        })
    }

    // ----------------------------------------------------------------------------------------
    // By scanning the commitlog

    /// Walk every commitlog file (in parallel, in chunks) and keep the records `pred` accepts, at
    /// most `max` (the lowest offsets).
    pub fn scan<P>(&self, max: usize, pred: P) -> ScanResult
    where
        P: Fn(&MessageRef<'_>) -> bool + Sync,
    {
        let per: Vec<ScanResult> = self
            .store
            .commitlog
            .segments
            .par_iter()
            .map(|seg| {
                let mut r = ScanResult::default();
                let walked = walk_segment(seg, 0, false, |m| {
                    if pred(m) {
                        if r.offsets.len() >= max {
                            r.capped = true;
                            return ControlFlow::Break(());
                        }
                        r.offsets.push(m.position);
                    }
                    ControlFlow::Continue(())
                });
                match walked {
                    Ok(w) => {
                        r.bytes_scanned = w.bytes;
                        r.records_scanned = w.records;
                        r.problems.extend(w.error.map(|e| e.to_string()));
                    }
                    Err(e) => r.problems.push(e.to_string()),
                }
                r
            })
            .collect();
        let mut res = ScanResult::default();
        for r in per {
            res.bytes_scanned += r.bytes_scanned;
            res.records_scanned += r.records_scanned;
            res.problems.extend(r.problems);
            res.capped |= r.capped;
            res.offsets.extend(r.offsets);
        }
        if res.offsets.len() > max {
            res.capped = true;
            res.offsets.truncate(max);
        }
        res
    }

    /// The records the index would hold under `topic#key` (UNIQ_KEY or a KEYS element, not a
    /// ROLLBACK record), stored in `[begin, end]`, found by scanning the commitlog.
    pub fn scan_for_key(
        &self,
        topic: Option<&str>,
        key: &str,
        begin: i64,
        end: i64,
        max: usize,
    ) -> ScanResult {
        self.scan(max, |m| {
            topic.is_none_or(|t| m.topic == t)
                && m.transaction_type() != TransactionType::Rollback
                && (begin..=end).contains(&m.store_timestamp)
                && carries_key(m, &m.topic, key)
        })
    }

    // ----------------------------------------------------------------------------------------
    // Through the consume queues

    /// Visit the valid units of `cq` from queue offset `from`, in order, until the end of the
    /// queue or until `f` breaks. Pre-blank units are visited too (see [`CqUnit::is_pre_blank`]).
    pub fn for_each_unit_from(
        &self,
        cq: &ConsumeQueue,
        from: u64,
        mut f: impl FnMut(u64, CqUnit) -> ControlFlow<()>,
    ) -> Result<()> {
        let mut pos = from.saturating_mul(UNIT_SIZE as u64);
        loop {
            let Some(file) = file_for(cq, pos) else {
                return Ok(());
            };
            let map = Mapped::open(&file.path)?;
            let at = (pos - file.start) as usize;
            let body = map.get(at..).unwrap_or_default();
            let mut n = 0usize;
            for chunk in body.chunks_exact(UNIT_SIZE) {
                let Some(u) = CqUnit::from_bytes(chunk) else {
                    return Ok(());
                };
                if !u.is_valid() {
                    return Ok(());
                }
                if f(pos / UNIT_SIZE as u64, u).is_break() {
                    return Ok(());
                }
                n += 1;
                pos += UNIT_SIZE as u64;
            }
            if n * UNIT_SIZE < body.len() || (map.len() as u64) < cq.file_size {
                return Ok(());
            }
        }
    }

    /// Up to `count` messages of a queue from queue offset `from` (pre-blank units skipped),
    /// kept by `filter` (tags code of the unit, then the record's TAGS). The flag says whether
    /// more units follow the last one visited.
    pub fn by_queue_offset(
        &self,
        topic: &str,
        queue_id: i32,
        from: u64,
        count: usize,
        filter: &TagFilter,
    ) -> Result<(Vec<Hit>, bool)> {
        let Some(cq) = self.store.queue(topic, queue_id) else {
            return Ok((Vec::new(), false));
        };
        let mut hits = Vec::new();
        let mut more = false;
        self.for_each_unit_from(cq, from, |q, u| {
            if u.is_pre_blank() {
                return ControlFlow::Continue(());
            }
            if hits.len() >= count {
                more = true;
                return ControlFlow::Break(());
            }
            if let Some(offset) = u
                .commitlog_offset()
                .filter(|_| self.unit_matches(&u, filter))
            {
                hits.push(Hit {
                    offset,
                    queue_offset: Some(q),
                });
            }
            ControlFlow::Continue(())
        })?;
        Ok((hits, more))
    }

    /// The filter on a unit: its tags code first (an ext address counts as unknown), then the
    /// TAGS of the record it points at.
    fn unit_matches(&self, u: &CqUnit, filter: &TagFilter) -> bool {
        if filter.is_all() {
            return true;
        }
        let code = (!u.has_ext_addr()).then_some(u.tags_code);
        if !filter.matches_tags_code(code) {
            return false;
        }
        match u.commitlog_offset().map(|o| self.message_at(o)) {
            Some(Ok(Some(r))) => filter.matches_tags(r.message.tags().as_deref()),
            _ => false,
        }
    }

    fn loaded_queue<'q>(&self, cq: &'q ConsumeQueue) -> Result<LoadedQueue<'q>> {
        let end = cq.end_pos()?;
        let min_logic = cq
            .min_offset(self.store.commitlog.min_offset())?
            .saturating_mul(UNIT_SIZE as u64);
        let files = cq
            .files
            .iter()
            .filter(|f| f.start <= end)
            .map(|f| {
                let written = f.len.min(cq.file_size).min(end - f.start);
                (f, written as usize)
            })
            .collect();
        Ok(LoadedQueue {
            files,
            min_logic,
            end,
            file_size: cq.file_size,
        })
    }

    /// Hits for a list of commitlog offsets.
    pub fn hits(offsets: &[u64]) -> Vec<Hit> {
        offsets.iter().map(|&o| Hit::at(o)).collect()
    }
}

/// True when `m` is indexed under `topic#key`: its topic is `topic` and its UNIQ_KEY or one of its
/// KEYS is `key` (the client's check in `MQAdminImpl.queryMessage`, plus the UNIQ_KEY entry).
pub fn carries_key(m: &MessageRef<'_>, topic: &str, key: &str) -> bool {
    m.topic == topic && (m.uniq_key().as_deref() == Some(key) || m.keys().iter().any(|k| k == key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Store {
        crate::engine::store::test_fixture(name)
    }

    #[test]
    fn a_file_that_did_not_map_gives_its_error_on_each_read() {
        let mut store = fixture("store-4.9");
        let t = tempfile::tempdir().unwrap();
        let gone = t.path().join("00000000000000262144");
        store.commitlog.segments[1].path = gone.clone();
        let reader = Reader::new(&store);
        for _ in 0..2 {
            let e = reader.message_at(262_144).expect_err("an unmapped file");
            match &e {
                Error::Unmapped(first) => {
                    assert!(matches!(**first, Error::Io { .. }), "{first}");
                }
                other => panic!("{other}"),
            }
            assert_eq!(e.path(), gone);
            // the path is said once, as the map error said it
            let text = e.to_string();
            assert_eq!(text.matches(&*gone.to_string_lossy()).count(), 1, "{text}");
        }
        assert!(reader.message_at(0).unwrap().is_some());
    }

    #[test]
    fn chunked_walk_equals_the_mapped_walk() {
        let store = fixture("store-4.9");
        for seg in &store.commitlog.segments {
            let map = Mapped::open(&seg.path).unwrap();
            let mapped: Vec<u64> = crate::format::commitlog::RecordIter::new(&map, seg, true)
                .map(|r| r.unwrap().position)
                .collect();
            let mut walked = Vec::new();
            let w = walk_segment(seg, 0, true, |m| {
                walked.push(m.position);
                ControlFlow::Continue(())
            })
            .unwrap();
            assert_eq!(walked, mapped);
            assert!(w.error.is_none());
            assert_eq!(w.records as usize, mapped.len());
            // from the middle, stopping early
            if let Some(&third) = mapped.get(2) {
                let mut got = Vec::new();
                let w = walk_segment(seg, third - seg.start, true, |m| {
                    got.push(m.position);
                    if got.len() == 2 {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                })
                .unwrap();
                assert!(w.stopped);
                assert_eq!(got, mapped[2..4.min(mapped.len())]);
            }
        }
    }

    #[test]
    fn lookups_on_the_fixture() {
        let store = fixture("store-4.9");
        let r = Reader::new(&store);
        let first = r.message_at(0).unwrap().unwrap();
        let m = first.message.clone();
        assert_eq!(m.position, 0);
        // offset id
        let id = m.offset_msg_id();
        let l = r.by_offset_msg_id(&id).unwrap();
        assert!(l.host_matches());
        // uniq key through the index, under every topic
        let uniq = m.uniq_key().unwrap().into_owned();
        let u = r.by_uniq_key(&uniq, None, 32);
        assert!(u.offsets.contains(&0), "{u:?}");
        // a key through the index equals a scan
        if let Some(k) = m.keys().first() {
            let by_index = r.query_message(&m.topic, k, 64, 0, i64::MAX);
            let by_scan = r.scan_for_key(Some(&m.topic), k, 0, i64::MAX, 64);
            assert_eq!(by_index.matching(), by_scan.offsets);
        }
        // not a record start
        assert!(r.message_at(1).is_err() || r.message_at(1).unwrap().is_none());
        // through the consume queue
        let cq = store.queue(&m.topic, m.queue_id).unwrap();
        let (hits, _) = r
            .by_queue_offset(
                &m.topic,
                m.queue_id,
                m.queue_offset as u64,
                1,
                &TagFilter::all(),
            )
            .unwrap();
        assert_eq!(hits[0].offset, 0);
        // by time: the first message's own store time finds it
        let t = r.pickup_store_timestamp(0, m.total_size);
        assert_eq!(t, m.store_timestamp);
        let q = r
            .offset_by_time_5x(cq, m.store_timestamp, Boundary::Lower)
            .unwrap();
        assert_eq!(q, 0);
        assert_eq!(
            r.offset_by_time_5x(cq, i64::MAX, Boundary::Lower).unwrap() as u64,
            cq.max_offset().unwrap()
        );
        assert_eq!(r.pickup_store_timestamp(-5, 10), -1);
        assert_eq!(r.pickup_store_timestamp(1 << 40, 100), -1);
    }

    #[test]
    fn offset_by_time_49_picks_the_file_by_its_time() {
        let store = fixture("store-4.9");
        let r = Reader::new(&store);
        let cq = store.queue("OrderTopic", 0).unwrap();
        assert!(cq.files.len() >= 2);
        let last_start = (cq.files.last().unwrap().start / UNIT_SIZE as u64) as i64;
        let max = cq.max_offset().unwrap() as i64;
        // every file "modified" after ts: the first file is searched
        let late = |_: &QueueFile| i64::MAX;
        assert_eq!(r.offset_by_time_49(cq, 0, &late).unwrap(), 0);
        // none: the last file is searched, and a time before it finds its first unit
        let early = |_: &QueueFile| 0;
        assert_eq!(r.offset_by_time_49(cq, 1, &early).unwrap(), last_start);
        // a time after everything finds the last unit, not the max offset (no clamping)
        assert_eq!(r.offset_by_time_49(cq, i64::MAX, &early).unwrap(), max - 1);
        assert_eq!(
            r.offset_by_time_5x(cq, i64::MAX, Boundary::Lower).unwrap(),
            max
        );
        assert_eq!(
            r.offset_by_time_5x(cq, i64::MAX, Boundary::Upper).unwrap(),
            max - 1
        );
        assert_eq!(r.offset_by_time_5x(cq, 0, Boundary::Upper).unwrap(), 0);
        // exact hits: every unit's own store time finds it (LOWER) in both rule sets when the
        // times are distinct
        let mut units = Vec::new();
        r.for_each_unit_from(cq, 0, |q, u| {
            units.push((q, r.pickup_store_timestamp(u.offset, u.size)));
            ControlFlow::Continue(())
        })
        .unwrap();
        for w in units.windows(3) {
            let (q, t) = w[1];
            if w[0].1 < t && t < w[2].1 {
                assert_eq!(
                    r.offset_by_time_5x(cq, t, Boundary::Lower).unwrap(),
                    q as i64
                );
                assert_eq!(
                    r.offset_by_time_5x(cq, t, Boundary::Upper).unwrap(),
                    q as i64
                );
                // between two units: LOWER takes the later, UPPER the earlier
                if t + 1 < w[2].1 {
                    assert_eq!(
                        r.offset_by_time_5x(cq, t + 1, Boundary::Lower).unwrap(),
                        q as i64 + 1
                    );
                    assert_eq!(
                        r.offset_by_time_5x(cq, t + 1, Boundary::Upper).unwrap(),
                        q as i64
                    );
                }
            }
        }
        assert_eq!(
            r.offset_in_queue_by_time("NoSuchTopic", 0, 5, BrokerVersion::V5)
                .unwrap(),
            0
        );
    }
}
