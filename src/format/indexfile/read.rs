//! Reading one index file, and the broker's lookups over one file (`IndexFile.selectPhyOffset`)
//! and over all of them (`IndexService.queryOffset`).

use std::path::Path;

use super::{
    index_key_hash, IndexEntry, IndexGeometry, IndexHeader, HASH_SLOT_SIZE, INDEX_HEADER_SIZE,
    INDEX_SIZE, INVALID_INDEX, MAX_MSGS_NUM_BATCH,
};
use crate::format::bytes::i32_at;
use crate::format::error::{Error, ErrorKind, ParseError};
use crate::format::mapped::Mapped;

/// One index file over its bytes (a map, a `Vec`, a slice), with the geometry it was written with.
/// Opening checks only that the size matches the geometry and reads the header; entries are
/// decoded on access, every access bounds-checked.
#[derive(Clone)]
pub struct IndexFile<B> {
    bytes: B,
    geometry: IndexGeometry,
    header: IndexHeader,
}

impl<B: AsRef<[u8]>> std::fmt::Debug for IndexFile<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile")
            .field("len", &self.bytes.as_ref().len())
            .field("geometry", &self.geometry)
            .field("header", &self.header)
            .finish()
    }
}

impl IndexFile<Mapped> {
    /// Map `path` read-only and open it with `geometry`.
    pub fn open(path: &Path, geometry: IndexGeometry) -> Result<Self, Error> {
        let map = Mapped::open(path)?;
        IndexFile::new(map, geometry).map_err(|e| e.in_file(path, 0))
    }
}

impl<B: AsRef<[u8]>> IndexFile<B> {
    /// Open `bytes` as an index file of `geometry`: the length must be exactly
    /// `40 + 4*slots + 20*entries` (the broker maps exactly that many bytes).
    pub fn new(bytes: B, geometry: IndexGeometry) -> Result<Self, ParseError> {
        geometry
            .validate()
            .map_err(|kind| ParseError::new(0, kind))?;
        let len = bytes.as_ref().len() as u64;
        let want = geometry.file_size();
        if len != want {
            return Err(ParseError::new(
                len.min(want),
                ErrorKind::Unexpected {
                    what: "index file size",
                    expected: format!("{want} bytes for {geometry}"),
                    found: format!("{len} bytes"),
                },
            ));
        }
        let header = IndexHeader::from_bytes(bytes.as_ref())?;
        Ok(IndexFile {
            bytes,
            geometry,
            header,
        })
    }

    pub fn header(&self) -> &IndexHeader {
        &self.header
    }

    pub fn geometry(&self) -> IndexGeometry {
        self.geometry
    }

    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    pub fn into_inner(self) -> B {
        self.bytes
    }

    /// The raw value of slot `slot` (`0..slots`).
    pub fn slot(&self, slot: u32) -> Result<i32, ParseError> {
        let pos = self.geometry.slot_pos(slot);
        if slot >= self.geometry.slots {
            return Err(ParseError::new(
                pos,
                ErrorKind::Invalid {
                    what: "slot number",
                    detail: format!("{slot} is not below {} slots", self.geometry.slots),
                },
            ));
        }
        let p = usize::try_from(pos).unwrap_or(usize::MAX);
        i32_at(self.bytes(), p).ok_or_else(|| {
            ParseError::new(
                pos,
                ErrorKind::Truncated {
                    what: "hash slot",
                    needed: HASH_SLOT_SIZE as u64,
                    left: self.bytes().len().saturating_sub(p) as u64,
                },
            )
        })
    }

    /// Entry number `n` (`0..entries`; entry 0 is never written by the broker).
    pub fn entry(&self, n: u32) -> Result<IndexEntry, ParseError> {
        let pos = self.geometry.entry_pos(n);
        if n >= self.geometry.entries {
            return Err(ParseError::new(
                pos,
                ErrorKind::Invalid {
                    what: "entry number",
                    detail: format!("{n} is not below {} entries", self.geometry.entries),
                },
            ));
        }
        IndexEntry::read_at(self.bytes(), usize::try_from(pos).unwrap_or(usize::MAX))
    }

    /// The entries in use, `1..indexCount` (with `indexCount` as the broker loads it). An
    /// `indexCount` beyond the file's capacity yields an error for the first missing entry, then
    /// ends.
    pub fn entries(&self) -> Entries<'_, B> {
        Entries {
            file: self,
            next: 1,
            end: self.header.effective_index_count().max(1) as u32,
            failed: false,
        }
    }

    /// `IndexFile.isTimeMatched`.
    pub fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        self.header.is_time_matched(begin, end)
    }

    /// `IndexFile.selectPhyOffset` for a built key (`topic#key`), see [`select_phy_offsets`].
    pub fn select_phy_offsets(
        &self,
        built_key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> Vec<i64> {
        let mut out = Vec::new();
        self.select_phy_offsets_into(&mut out, built_key, max_num, begin, end);
        out
    }

    /// Like [`IndexFile::select_phy_offsets`], appending to `out` and stopping when `out` holds
    /// `max_num` offsets (the list is shared across files, as in `IndexService.queryOffset`).
    pub fn select_phy_offsets_into(
        &self,
        out: &mut Vec<i64>,
        built_key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) {
        let buf = self.bytes();
        let count = self.header.effective_index_count();
        let hash = index_key_hash(built_key);
        let slot = super::slot_of(hash, self.geometry.slots);
        let slot_value = match self.slot(slot) {
            Ok(v) => v,
            Err(_) => return,
        };
        if slot_value <= INVALID_INDEX || slot_value > count || count <= 1 {
            return;
        }
        // Positions use Java int arithmetic (`absIndexPos` is an int): a corrupt huge entry
        // number wraps there too, and an out-of-range read ends the search like Java's caught
        // IndexOutOfBoundsException.
        let entries_start = (INDEX_HEADER_SIZE as i32)
            .wrapping_add((self.geometry.slots as i32).wrapping_mul(HASH_SLOT_SIZE as i32));
        // A chain of a healthy file visits each entry at most once. A corrupt file can hold a
        // cycle: Java then loops until maxNum results are collected, or forever when no entry of
        // the cycle matches. We stop in the second case.
        let mut since_last_add: i64 = 0;
        let mut next = slot_value;
        loop {
            if out.len() >= max_num {
                break;
            }
            let pos = entries_start.wrapping_add(next.wrapping_mul(INDEX_SIZE as i32));
            let Ok(pos) = usize::try_from(pos) else { break };
            let Ok(e) = IndexEntry::read_at(buf, pos) else {
                break;
            };
            if e.time_diff < 0 {
                break;
            }
            let time_read = self
                .header
                .begin_timestamp
                .wrapping_add(i64::from(e.time_diff).wrapping_mul(1000));
            let time_matched = time_read >= begin && time_read <= end;
            if hash == e.key_hash && time_matched {
                out.push(e.phy_offset);
                since_last_add = 0;
            } else {
                since_last_add += 1;
                // bounded by what the file can hold, not by the (possibly corrupt) header
                let bound = i64::from(count).min(i64::from(self.geometry.entries));
                if since_last_add > bound + 1 {
                    break;
                }
            }
            if e.prev <= INVALID_INDEX || e.prev > count || e.prev == next || time_read < begin {
                break;
            }
            next = e.prev;
        }
    }
}

/// Iterator over entries `1..indexCount` of an [`IndexFile`], yielding `(number, entry)`.
pub struct Entries<'a, B> {
    file: &'a IndexFile<B>,
    next: u32,
    end: u32,
    failed: bool,
}

impl<B: AsRef<[u8]>> Iterator for Entries<'_, B> {
    type Item = Result<(u32, IndexEntry), ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next >= self.end {
            return None;
        }
        let n = self.next;
        self.next += 1;
        match self.file.entry(n) {
            Ok(e) => Some(Ok((n, e))),
            Err(err) => {
                self.failed = true;
                Some(Err(err))
            }
        }
    }
}

/// `IndexFile.selectPhyOffset`: the commitlog offsets of the entries in `built_key`'s chain whose
/// hash equals the key's and whose time `begin + diff*1000` lies in `[begin, end]`, newest first,
/// at most `max_num`. The walk stops at a negative time diff, at a prev that is `<= 0`,
/// `> indexCount` or equal to the current entry, and after an entry older than `begin`. Nothing is
/// searched when `indexCount <= 1` or the slot is out of range. Hash collisions are returned too:
/// a caller checks the record's keys.
pub fn select_phy_offsets<B: AsRef<[u8]>>(
    file: &IndexFile<B>,
    built_key: &str,
    max_num: usize,
    begin: i64,
    end: i64,
) -> Vec<i64> {
    file.select_phy_offsets(built_key, max_num, begin, end)
}

/// What `IndexService.queryOffset` returns.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct QueryOffsetResult {
    /// In the order found: files newest first, each chain newest first. (The broker's
    /// `DefaultMessageStore.queryMessage` sorts these ascending before reading the records.)
    pub phy_offsets: Vec<i64>,
    /// endTimestamp of the newest file (0 when there are no files).
    pub index_last_update_timestamp: i64,
    /// endPhyOffset of the newest file (0 when there are no files).
    pub index_last_update_phy_offset: i64,
}

/// `IndexService.queryOffset(topic, key, maxNum, begin, end)` over the loaded files given
/// **newest first** (the broker's list in name order, reversed). `max_num` is capped at
/// `maxMsgsNumBatch` (64); a value `<= 0` finds nothing. A file is searched when its time range
/// overlaps `[begin, end]`; the walk stops after a file whose beginTimestamp is below `begin`, or
/// once `max_num` offsets are found.
pub fn query_offsets<'a, B, I>(
    newest_first: I,
    topic: &str,
    key: &str,
    max_num: i32,
    begin: i64,
    end: i64,
) -> QueryOffsetResult
where
    B: AsRef<[u8]> + 'a,
    I: IntoIterator<Item = &'a IndexFile<B>>,
{
    let max_num = usize::try_from(max_num.min(MAX_MSGS_NUM_BATCH)).unwrap_or(0);
    let built = super::build_key(topic, key);
    let mut res = QueryOffsetResult::default();
    for (i, f) in newest_first.into_iter().enumerate() {
        if i == 0 {
            res.index_last_update_timestamp = f.header.end_timestamp;
            res.index_last_update_phy_offset = f.header.end_phy_offset;
        }
        if f.is_time_matched(begin, end) {
            f.select_phy_offsets_into(&mut res.phy_offsets, &built, max_num, begin, end);
        }
        if f.header.begin_timestamp < begin || res.phy_offsets.len() >= max_num {
            break;
        }
    }
    res
}
