//! Index files (`store/index/<yyyyMMddHHmmssSSS>`): a hash index from `topic#key` to commitlog
//! offsets, written by `IndexService.buildIndex` (FORMAT.md section 7).
//!
//! Layout: `[header 40][hashSlotNum x i32 slot][indexNum x 20-byte entry]`. Slot `s` holds the
//! number of the newest entry whose key hash falls into bucket `s`; each entry names the previous
//! entry of its bucket, so a lookup walks a chain backwards in time. The header does not record
//! `hashSlotNum` and `indexNum`: a reader is told them ([`IndexGeometry`]) or infers them
//! ([`infer_geometry`]).
//!
//! - [`read`]: [`IndexFile`] over bytes, entry access, and the broker's lookups
//!   ([`select_phy_offsets`], [`query_offsets`]).
//! - [`write`]: [`IndexFileBuilder`] (`IndexFile.putKey`) and [`Indexer`] (`IndexService.buildIndex`
//!   with roll-over), which reproduce the broker's files byte for byte.
//! - [`infer`]: geometry inference from the file size, slot table and chains.
//! - [`check`]: structural checks of one file and of a sequence of headers (FORMAT.md 12, checks
//!   23, 25, 26).

pub mod check;
pub mod infer;
pub mod read;
pub mod write;

#[cfg(test)]
mod tests;

use chrono::{Datelike, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Timelike};

use super::bytes::{i32_at, i64_at};
use super::error::{ErrorKind, ParseError};
use super::java::string_hash;

pub use check::{check_file, check_file_with, check_sequence, Problem};
pub use infer::{check_geometry, infer_geometry, GeometryMismatch, InferResult, Inference};
pub use read::{query_offsets, select_phy_offsets, Entries, IndexFile, QueryOffsetResult};
pub use write::{
    name_by_store_time, AddOutcome, IndexFileBuilder, IndexRecord, Indexer, NamedIndexFile,
    NewFileContext,
};

/// `IndexHeader.INDEX_HEADER_SIZE`: bytes of the header at the start of every index file.
pub const INDEX_HEADER_SIZE: usize = 40;
/// `IndexFile.hashSlotSize`: bytes per hash slot (one i32 entry number).
pub const HASH_SLOT_SIZE: usize = 4;
/// `IndexFile.indexSize`: bytes per entry (hash i32, phy offset i64, time diff i32, prev i32).
pub const INDEX_SIZE: usize = 20;
/// `IndexFile.invalidIndex`: the entry number meaning "none" in a slot or a prev field.
pub const INVALID_INDEX: i32 = 0;
/// `MessageStoreConfig.maxHashSlotNum` default: 5,000,000 slots.
pub const DEFAULT_MAX_HASH_SLOT_NUM: u32 = 5_000_000;
/// `MessageStoreConfig.maxIndexNum` default: `5000000 * 4` entries.
pub const DEFAULT_MAX_INDEX_NUM: u32 = 20_000_000;
/// `MessageStoreConfig.maxMsgsNumBatch` default: `IndexService.queryOffset` caps maxNum at this.
pub const MAX_MSGS_NUM_BATCH: i32 = 64;
/// `MessageConst.KEY_SEPARATOR`: the KEYS property holds several keys separated by one space.
pub const KEY_SEPARATOR: char = ' ';
/// `IndexService.buildKey` joins topic and key with this.
pub const TOPIC_KEY_SEPARATOR: char = '#';
/// `MessageSysFlag` transaction-type bits (`getTransactionValue` = `flag & 0xC`).
pub const TRANSACTION_TYPE_MASK: i32 = 0x0C;
/// `MessageSysFlag.TRANSACTION_ROLLBACK_TYPE`: such records are not indexed.
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0x0C;
/// Length of an index file name (`UtilAll.timeMillisToHumanString`, `yyyyMMddHHmmssSSS`).
pub const FILE_NAME_LEN: usize = 17;

/// Header field offsets (`IndexHeader.beginTimestampIndex` ... `indexCountIndex`).
pub mod header_pos {
    /// `beginTimestampIndex`: i64 store time (ms) of the first entry.
    pub const BEGIN_TIMESTAMP: usize = 0;
    /// `endTimestampIndex`: i64 store time (ms) of the last entry.
    pub const END_TIMESTAMP: usize = 8;
    /// `beginPhyoffsetIndex`: i64 commitlog offset of the first entry.
    pub const BEGIN_PHY_OFFSET: usize = 16;
    /// `endPhyoffsetIndex`: i64 commitlog offset of the last entry.
    pub const END_PHY_OFFSET: usize = 24;
    /// `hashSlotcountIndex`: i32 number of times an empty slot was taken.
    pub const HASH_SLOT_COUNT: usize = 32;
    /// `indexCountIndex`: i32 next free entry number (0 on disk before the first entry).
    pub const INDEX_COUNT: usize = 36;
}

/// The two numbers that shape an index file and that the file does not record:
/// `maxHashSlotNum` (slots) and `maxIndexNum` (entries, entry 0 included and never used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct IndexGeometry {
    pub slots: u32,
    pub entries: u32,
}

impl IndexGeometry {
    /// The broker's defaults: 5,000,000 slots and 20,000,000 entries (420,000,040 bytes).
    pub const DEFAULT: IndexGeometry = IndexGeometry {
        slots: DEFAULT_MAX_HASH_SLOT_NUM,
        entries: DEFAULT_MAX_INDEX_NUM,
    };

    pub const fn new(slots: u32, entries: u32) -> Self {
        IndexGeometry { slots, entries }
    }

    /// `40 + 4*slots + 20*entries`.
    pub const fn file_size(&self) -> u64 {
        INDEX_HEADER_SIZE as u64
            + self.slots as u64 * HASH_SLOT_SIZE as u64
            + self.entries as u64 * INDEX_SIZE as u64
    }

    /// Byte position of slot `slot`.
    pub const fn slot_pos(&self, slot: u32) -> u64 {
        INDEX_HEADER_SIZE as u64 + slot as u64 * HASH_SLOT_SIZE as u64
    }

    /// Byte position of entry number `n` (entry 0 is never used).
    pub const fn entry_pos(&self, n: u32) -> u64 {
        self.slot_pos(self.slots) + n as u64 * INDEX_SIZE as u64
    }

    /// A geometry the broker can have: at least one slot and one entry, and a file size that
    /// fits Java's `int` (`IndexFile` computes `fileTotalSize` as an int).
    pub fn validate(&self) -> Result<(), ErrorKind> {
        if self.slots == 0 || self.entries == 0 {
            return Err(ErrorKind::Invalid {
                what: "index geometry",
                detail: format!(
                    "{} slots / {} entries: both must be at least 1",
                    self.slots, self.entries
                ),
            });
        }
        if self.file_size() > i32::MAX as u64 {
            return Err(ErrorKind::Invalid {
                what: "index geometry",
                detail: format!(
                    "{} slots / {} entries make a {}-byte file, over Java's int limit",
                    self.slots,
                    self.entries,
                    self.file_size()
                ),
            });
        }
        Ok(())
    }
}

impl std::fmt::Display for IndexGeometry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} slots / {} entries", self.slots, self.entries)
    }
}

/// The 40-byte header (`IndexHeader`). `index_count` is the raw on-disk value: 0 for a file that
/// never received an entry, `entries + 1` afterwards; see [`IndexHeader::effective_index_count`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct IndexHeader {
    pub begin_timestamp: i64,
    pub end_timestamp: i64,
    /// `beginPhyOffset` (`begin_commitlog_offset` in JSON).
    #[serde(rename = "begin_commitlog_offset")]
    pub begin_phy_offset: i64,
    /// `endPhyOffset` (`end_commitlog_offset` in JSON).
    #[serde(rename = "end_commitlog_offset")]
    pub end_phy_offset: i64,
    pub hash_slot_count: i32,
    pub index_count: i32,
}

impl IndexHeader {
    /// Parse the first 40 bytes of `buf`.
    pub fn from_bytes(buf: &[u8]) -> Result<Self, ParseError> {
        if buf.len() < INDEX_HEADER_SIZE {
            return Err(ParseError::new(
                0,
                ErrorKind::Truncated {
                    what: "index file header",
                    needed: INDEX_HEADER_SIZE as u64,
                    left: buf.len() as u64,
                },
            ));
        }
        let l = |p| i64_at(buf, p).unwrap_or(0);
        let i = |p| i32_at(buf, p).unwrap_or(0);
        Ok(IndexHeader {
            begin_timestamp: l(header_pos::BEGIN_TIMESTAMP),
            end_timestamp: l(header_pos::END_TIMESTAMP),
            begin_phy_offset: l(header_pos::BEGIN_PHY_OFFSET),
            end_phy_offset: l(header_pos::END_PHY_OFFSET),
            hash_slot_count: i(header_pos::HASH_SLOT_COUNT),
            index_count: i(header_pos::INDEX_COUNT),
        })
    }

    pub fn to_bytes(&self) -> [u8; INDEX_HEADER_SIZE] {
        let mut b = [0u8; INDEX_HEADER_SIZE];
        b[0..8].copy_from_slice(&self.begin_timestamp.to_be_bytes());
        b[8..16].copy_from_slice(&self.end_timestamp.to_be_bytes());
        b[16..24].copy_from_slice(&self.begin_phy_offset.to_be_bytes());
        b[24..32].copy_from_slice(&self.end_phy_offset.to_be_bytes());
        b[32..36].copy_from_slice(&self.hash_slot_count.to_be_bytes());
        b[36..40].copy_from_slice(&self.index_count.to_be_bytes());
        b
    }

    /// The count the broker works with after `IndexHeader.load`: values `<= 0` become 1.
    /// Entries `1..effective_index_count()` are in use.
    pub fn effective_index_count(&self) -> i32 {
        self.index_count.max(1)
    }

    /// `IndexFile.isTimeMatched`: does `[begin, end]` overlap this file's time range?
    pub fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let (b, e) = (self.begin_timestamp, self.end_timestamp);
        (begin < b && end > e) || (begin >= b && begin <= e) || (end >= b && end <= e)
    }
}

/// One 20-byte entry. `prev` is the number of the previous entry in the same bucket (0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct IndexEntry {
    pub key_hash: i32,
    /// `phyOffset` (`commitlog_offset` in JSON).
    #[serde(rename = "commitlog_offset")]
    pub phy_offset: i64,
    /// Seconds since the header's beginTimestamp (clamped to `[0, i32::MAX]` when written).
    pub time_diff: i32,
    pub prev: i32,
}

impl IndexEntry {
    /// The entry in the first 20 bytes of `b`, or `None` when `b` is shorter.
    #[inline]
    pub fn from_prefix(b: &[u8]) -> Option<Self> {
        let b: &[u8; INDEX_SIZE] = b.get(..INDEX_SIZE)?.try_into().ok()?;
        let [h0, h1, h2, h3, o0, o1, o2, o3, o4, o5, o6, o7, t0, t1, t2, t3, p0, p1, p2, p3] = *b;
        Some(IndexEntry {
            key_hash: i32::from_be_bytes([h0, h1, h2, h3]),
            phy_offset: i64::from_be_bytes([o0, o1, o2, o3, o4, o5, o6, o7]),
            time_diff: i32::from_be_bytes([t0, t1, t2, t3]),
            prev: i32::from_be_bytes([p0, p1, p2, p3]),
        })
    }

    /// Parse 20 bytes at `pos` of `buf`; `pos` is also the offset an error names.
    pub fn read_at(buf: &[u8], pos: usize) -> Result<Self, ParseError> {
        buf.get(pos..).and_then(Self::from_prefix).ok_or_else(|| {
            ParseError::new(
                pos as u64,
                ErrorKind::Truncated {
                    what: "index entry",
                    needed: INDEX_SIZE as u64,
                    left: buf.len().saturating_sub(pos) as u64,
                },
            )
        })
    }

    pub fn to_bytes(&self) -> [u8; INDEX_SIZE] {
        let mut b = [0u8; INDEX_SIZE];
        b[0..4].copy_from_slice(&self.key_hash.to_be_bytes());
        b[4..12].copy_from_slice(&self.phy_offset.to_be_bytes());
        b[12..16].copy_from_slice(&self.time_diff.to_be_bytes());
        b[16..20].copy_from_slice(&self.prev.to_be_bytes());
        b
    }

    pub fn is_zero(&self) -> bool {
        *self == IndexEntry::default()
    }
}

/// `IndexService.buildKey`: `topic + "#" + key`.
pub fn build_key(topic: &str, key: &str) -> String {
    let mut s = String::with_capacity(topic.len() + 1 + key.len());
    s.push_str(topic);
    s.push(TOPIC_KEY_SEPARATOR);
    s.push_str(key);
    s
}

/// `IndexFile.indexKeyHashMethod` on a built key: Java `hashCode`, then `Math.abs`, where
/// `abs(Integer.MIN_VALUE)` (still negative in Java) becomes 0. Always `>= 0`.
pub fn index_key_hash(built_key: &str) -> i32 {
    abs_hash(string_hash(built_key))
}

/// `Math.abs` as the index takes it: `abs(Integer.MIN_VALUE)` (still negative in Java) is 0.
pub fn abs_hash(h: i32) -> i32 {
    h.wrapping_abs().max(0)
}

/// The entry hash of `key` under `topic` (FORMAT.md 7.2).
pub fn key_hash(topic: &str, key: &str) -> i32 {
    index_key_hash(&build_key(topic, key))
}

/// The slot of a non-negative key hash: `hash % slots`. `slots` must be at least 1 (a zero
/// geometry is rejected everywhere else; here it gives slot 0).
pub fn slot_of(key_hash: i32, slots: u32) -> u32 {
    if slots == 0 {
        return 0;
    }
    (key_hash.unsigned_abs()) % slots
}

/// `UtilAll.timeMillisToHumanString` in the local time zone: `yyyyMMddHHmmssSSS`. `None` when
/// the time is outside what chrono represents or the year is not 0..=9999.
pub fn format_file_name(epoch_ms: i64) -> Option<String> {
    format_file_name_in(epoch_ms, &chrono::Local)
}

/// [`format_file_name`] in a given time zone (tests, or a broker in another zone).
pub fn format_file_name_in<Tz: TimeZone>(epoch_ms: i64, tz: &Tz) -> Option<String> {
    let dt = match tz.timestamp_millis_opt(epoch_ms) {
        LocalResult::Single(dt) => dt,
        _ => return None,
    };
    let n = dt.naive_local();
    if !(0..=9999).contains(&n.year()) {
        return None;
    }
    Some(format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}{:03}",
        n.year(),
        n.month(),
        n.day(),
        n.hour(),
        n.minute(),
        n.second(),
        n.nanosecond() / 1_000_000 % 1000
    ))
}

/// The wall-clock time an index file name stands for, without a time zone. `None` unless the name
/// is 17 ASCII digits forming a real date and time.
pub fn parse_file_name_naive(name: &str) -> Option<NaiveDateTime> {
    if name.len() != FILE_NAME_LEN || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |a: usize, b: usize| name.get(a..b).and_then(|s| s.parse::<u32>().ok());
    let year = i32::try_from(num(0, 4)?).ok()?;
    let date = NaiveDate::from_ymd_opt(year, num(4, 6)?, num(6, 8)?)?;
    date.and_hms_milli_opt(num(8, 10)?, num(10, 12)?, num(12, 14)?, num(14, 17)?)
}

/// Epoch ms of an index file name read in the local time zone (the earlier instant when a
/// daylight-saving fall-back makes the wall-clock time ambiguous).
pub fn parse_file_name(name: &str) -> Option<i64> {
    parse_file_name_in(name, &chrono::Local)
}

/// [`parse_file_name`] in a given time zone.
pub fn parse_file_name_in<Tz: TimeZone>(name: &str, tz: &Tz) -> Option<i64> {
    let naive = parse_file_name_naive(name)?;
    tz.from_local_datetime(&naive)
        .earliest()
        .map(|dt| dt.timestamp_millis())
}

/// Every regular file of an index directory, in the order `IndexService.load` loads them
/// (`Arrays.sort` on the paths: name order). Java loads every file it finds, whatever its name;
/// [`check_sequence`] reports names that are not `yyyyMMddHHmmssSSS`.
pub fn list_index_dir(dir: &std::path::Path) -> super::Result<Vec<std::path::PathBuf>> {
    use super::Error;
    let mut out = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let meta = entry.metadata().map_err(|e| Error::io(&path, e))?;
        if meta.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Zero-filled block the zero scans compare against (slice equality is a `memcmp`).
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Position of the first non-zero byte of `b`.
pub(crate) fn first_nonzero(b: &[u8]) -> Option<usize> {
    let mut base = 0;
    for chunk in b.chunks(ZEROS.len()) {
        if chunk != ZEROS.get(..chunk.len()).unwrap_or(&[]) {
            return chunk.iter().position(|&x| x != 0).map(|p| base + p);
        }
        base += chunk.len();
    }
    None
}

/// Position of the last non-zero byte of `b`.
pub(crate) fn last_nonzero(b: &[u8]) -> Option<usize> {
    let mut end = b.len();
    for chunk in b.rchunks(ZEROS.len()) {
        let start = end - chunk.len();
        if chunk != ZEROS.get(..chunk.len()).unwrap_or(&[]) {
            return chunk.iter().rposition(|&x| x != 0).map(|p| start + p);
        }
        end = start;
    }
    None
}
