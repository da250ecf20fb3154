//! `verify`: the invariants of a healthy store, checked across files (FORMAT.md section 12), as
//! [`Finding`]s with what the broker would do about each on its next start.
//!
//! One parallel pass reads the commitlog: rayon workers take the files in pieces of
//! [`VerifyOptions::piece_size`], in order (a piece starts at the record recovery would
//! resynchronise to; a record never spans two files), and the index file structure checks run
//! on one more thread beside them. Each piece is walked as recovery walks a file
//! ([`recovery::walk_on`]); the pieces of a file are joined into the walk of the whole file, and
//! from the first piece that does not join cleanly (damage) on, the file is walked again in one
//! go, so damage is judged exactly as recovery judges it. Per record the pass checks the CRC,
//! compares the consume queue unit at its queue offset with it (units of one queue are read in
//! order through a shared map), merge-joins the index entries against the records in offset
//! order (index entries are appended in commitlog order, so both streams are sorted), and feeds
//! UNIQ_KEYs to a bounded duplicate window (module `dups`). Everything read in that loop is
//! prefetched a little ahead, and the properties are read once per record. Then each consume
//! queue is read front to back for its structure, and only the units no record matched are
//! checked against the bytes they point at. The checkpoint and the config files come last. The
//! recovery plan is built from the same walks and says, per commitlog finding, what recovery
//! would do.
//!
//! The broker's mode checks what the broker checks (body CRC as recovery does: masked to 31
//! bits, skipped for an empty body). `strict` adds what it misses: the `__CRC32#` property,
//! PHYSICALOFFSET against the position, queue offset continuity, stale records after the end of
//! the data, a non-zero BODYCRC on an empty body and odd fields.
//!
//! Memory does not grow with the store: per-queue state is one small run per queue, findings are
//! capped per code (the summary counts them all), per-file results are merged in file order as
//! they come in, and the duplicate-key window holds at most three generations of [`DUP_WINDOW`]
//! keys (about 30 MB). Checking an index file's chains takes four bytes per hash slot
//! (20 MB for the broker's default geometry).
//!
//! Nothing here prints; `commands::verify` presents the [`Report`].

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;

use crate::engine::check::headers::{self, Claim, Gap, QueueSlot, Rule, Suspect};
use crate::engine::check::recovery::{
    self, FileWalk, Prepared, RecordPlace, RecoveryMode, RecoveryPlan, StopReason, WalkProblem,
};
use crate::engine::store::dispatch::{is_system_topic, record_tags_code, SCHEDULE_TOPIC};
use crate::engine::store::version::BrokerVersion;
use crate::engine::store::{paths, Store};
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::{
    prop, sysflag, MessageRef, MessageVersion, Segment, TransactionType,
};
use crate::format::config::{
    load_file, ConfigFile, ConfigSource, ConsumerOffsets, DelayOffsets, SubscriptionGroups,
    TopicConfigs,
};
use crate::format::consumequeue::{queue_offset_fits, ConsumeQueue, CqUnit, UNIT_SIZE};
use crate::format::entry::{Entry, Kind};
use crate::format::error::Result;
use crate::format::finding::{Finding, Severity};
use crate::format::geometry::Source;
use crate::format::indexfile::{
    check_file_with, check_sequence, IndexEntry, IndexFile, IndexGeometry, IndexHeader,
};
use crate::format::java::{bytes_hash_extend, masked_crc32};
use crate::format::mapped::Mapped;

mod dups;
mod names;
mod timer;
use dups::DupWindow;
pub use dups::DUP_WINDOW;
use names::NameTable;
/// Default cap of findings listed per code.
pub const DEFAULT_MAX_PER_CODE: usize = 1000;

/// The parts of a store `verify` can check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// Commitlog files and records, the checkpoint and the abort marker.
    Commitlog,
    ConsumeQueue,
    Index,
    Config,
    /// 5.x timer files: timerlog/, timerwheel, config/timercheck and timermetrics.
    Timer,
}

impl Part {
    pub const ALL: [Part; 5] = [
        Part::Commitlog,
        Part::ConsumeQueue,
        Part::Index,
        Part::Config,
        Part::Timer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Part::Commitlog => "commitlog",
            Part::ConsumeQueue => "consumequeue",
            Part::Index => "index",
            Part::Config => "config",
            Part::Timer => "timer",
        }
    }
}

/// What to check and how.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// Check body CRCs (what the broker's recovery does by default).
    pub check_crc: bool,
    /// Add what the broker does not check: the `__CRC32#` property, PHYSICALOFFSET against the
    /// position, queue offset continuity, stale records, odd fields.
    pub strict: bool,
    /// Parts to check; empty means all.
    pub parts: Vec<Part>,
    /// Restrict record, queue and config checks to one topic (file structure is always checked).
    pub topic: Option<String>,
    /// Check the index and consume queue contents of one record or unit in `sample` (1 = all).
    pub sample: u64,
    /// Findings listed per code; the summary counts all of them.
    pub max_per_code: usize,
    /// Commitlog files are walked in pieces of about this many bytes (a quarter of it in the
    /// last file), so the workers finish together even when a store has only a few files. The
    /// findings do not depend on it.
    pub piece_size: u64,
    /// Set it to stop a run early: the workers finish the piece, queue or file at hand, and
    /// `verify` returns an error saying it was interrupted.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            check_crc: true,
            strict: false,
            parts: Vec::new(),
            topic: None,
            sample: 1,
            max_per_code: DEFAULT_MAX_PER_CODE,
            piece_size: PIECE,
            interrupt: None,
        }
    }
}

impl VerifyOptions {
    /// Whether [`VerifyOptions::interrupt`] was set.
    pub fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    pub fn wants(&self, p: Part) -> bool {
        self.parts.is_empty() || self.parts.contains(&p)
    }

    fn in_topic(&self, topic: &str) -> bool {
        self.topic.as_deref().is_none_or(|t| t == topic)
    }

    /// Dangling entries cannot be attributed to a topic: report them only without `--topic`.
    fn in_topic_any(&self) -> bool {
        self.topic.is_none()
    }
}

/// The phase a progress report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the commitlog: `done` and `total` are bytes.
    Commitlog,
    /// Checking consume queues: `done` and `total` are queues.
    ConsumeQueues,
    /// Checking index files: `done` and `total` are files.
    Index,
}

/// Progress callback: phase, done, total. Called from worker threads.
pub type Progress<'a> = &'a (dyn Fn(Phase, u64, u64) + Sync);

/// Counts for the end of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub errors: u64,
    pub warnings: u64,
    pub infos: u64,
    /// Records read in the commitlog, and their bytes.
    pub messages: u64,
    pub bytes: u64,
    pub commitlog_files: u64,
    pub consume_queues: u64,
    pub cq_units: u64,
    pub index_files: u64,
    pub index_entries_checked: u64,
    /// Records whose UNIQ_KEY was already stored at an earlier offset.
    pub duplicate_uniq_keys: u64,
    /// Findings counted but not listed (over the per-code cap).
    pub findings_not_listed: u64,
    /// No errors (and, with `strict`, no warnings).
    pub healthy: bool,
    pub strict: bool,
    pub crc_checked: bool,
    pub parts: Vec<&'static str>,
    pub topic: Option<String>,
    pub sample: u64,
    /// The release whose rules were applied ("4.9" or "5.x") and whether the files said so.
    pub store_version: String,
    pub clean_shutdown: bool,
    /// Why the broker would not start on the store as it is (empty: it starts).
    pub refuses_to_start: Vec<String>,
    pub recovery_mode: Option<RecoveryMode>,
    /// The commitlog max offset after recovery, and what recovery drops.
    pub recovery_cut: Option<u64>,
    pub recovery_drops_messages: u64,
    /// What the duplicate-key check guarantees.
    pub duplicate_window: String,
}

/// What `verify` found: every finding listed (up to the per-code cap), the counts, the recovery
/// plan.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub summary: Summary,
    pub recovery: Option<RecoveryPlan>,
    /// Records whose header contradicts the store, with the values the store proves.
    #[serde(skip)]
    pub damaged_headers: Vec<headers::DamagedHeader>,
    /// The walk of each commitlog file, as recovery walks it (`None` when not walked).
    #[serde(skip)]
    pub walks: Vec<Option<FileWalk>>,
    /// Commitlog offsets of records whose queue offset breaks their queue's sequence with no
    /// damaged header to explain it, in commitlog order.
    #[serde(skip)]
    pub queue_breaks: Vec<u64>,
}

// ---------------------------------------------------------------------------------------------
// Collecting findings with a cap per code.

#[derive(Debug, Default)]
struct Sink {
    list: Vec<Finding>,
    per_code: HashMap<&'static str, usize>,
    dropped: [u64; 3],
    cap: usize,
}

fn sev_index(s: Severity) -> usize {
    match s {
        Severity::Info => 0,
        Severity::Warning => 1,
        Severity::Error => 2,
    }
}

impl Sink {
    fn new(cap: usize) -> Self {
        Sink {
            cap,
            ..Default::default()
        }
    }

    fn push(&mut self, f: Finding) {
        let n = self.per_code.entry(f.code).or_insert(0);
        if *n < self.cap {
            *n += 1;
            self.list.push(f);
        } else {
            self.dropped[sev_index(f.severity)] += 1;
        }
    }

    fn absorb(&mut self, other: Sink) {
        for f in other.list {
            self.push(f);
        }
        for i in 0..3 {
            self.dropped[i] += other.dropped[i];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Properties read once per record.

#[derive(Debug, Default, Clone, Copy)]
struct Props<'a> {
    tags: Option<&'a [u8]>,
    delay: Option<&'a [u8]>,
    keys: Option<&'a [u8]>,
    uniq: Option<&'a [u8]>,
    uniq_count: u8,
    real_topic: bool,
    retry_topic: bool,
    tx_check: bool,
    inner_num: Option<&'a [u8]>,
    crc32: bool,
}

/// Each `name 0x01 value` segment of a properties block, split at 0x02
/// (`MessageDecoder.string2messageProperties`). The 0x02 bytes of up to 64 bytes at a time are
/// found first (16 at a time with SIMD compares) as one bit mask, and the segments are then
/// taken from the mask: the branches depend on the number of segments, not on where each one
/// ends.
#[inline]
fn for_each_segment<'a>(b: &'a [u8], mut f: impl FnMut(&'a [u8])) {
    use wide::u8x16;
    let twos = u8x16::splat(2);
    let mut start = 0;
    for (g, group) in b.chunks(64).enumerate() {
        let mut mask = 0u64;
        let mut blocks = group.chunks_exact(16);
        for (i, c) in blocks.by_ref().enumerate() {
            if let Ok(c) = <[u8; 16]>::try_from(c) {
                let m = u8x16::new(c).cmp_eq(twos).move_mask() as u16;
                mask |= u64::from(m) << (16 * i);
            }
        }
        let base = 64 * g;
        let rest = blocks.remainder().len();
        let done = group.len() - rest;
        if rest > 0 {
            // The last bytes: from the block's last 16 bytes (overlapping bytes already seen)
            // when it has that many.
            let tail = match b.last_chunk::<16>() {
                Some(c) => u32::from(u8x16::new(*c).cmp_eq(twos).move_mask() as u16) >> (16 - rest),
                None => (blocks.remainder().iter().enumerate())
                    .fold(0, |m, (i, &c)| m | (u32::from(c == 2) << i)),
            };
            mask |= u64::from(tail) << done;
        }
        while mask != 0 {
            let end = base + mask.trailing_zeros() as usize;
            f(b.get(start..end).unwrap_or(&[]));
            start = end + 1;
            mask &= mask - 1;
        }
    }
    if let Some(last) = b.get(start..).filter(|l| !l.is_empty()) {
        f(last);
    }
}

/// The value of a segment whose name is `name`: the name must end at the segment's first 0x01
/// and the value after it must not be empty, as `Properties::iter_raw` decides.
#[inline]
fn value_of<'a>(segment: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let value = segment.strip_prefix(name)?.strip_prefix(&[1])?;
    (!value.is_empty()).then_some(value)
}

impl<'a> Props<'a> {
    /// The properties verify needs, in one pass; a segment is looked at only when its first
    /// byte can start one of their names.
    fn of(m: &MessageRef<'a>) -> Self {
        Self::of_block(m.properties.0)
    }

    fn of_block(block: &'a [u8]) -> Self {
        /// The first eight bytes of a name followed by 0x01, as a little-endian word.
        const fn word(name: &[u8]) -> u64 {
            let mut w = 0u64;
            let mut i = 0;
            while i < 8 && i <= name.len() {
                let c = if i < name.len() { name[i] } else { 1 };
                w |= (c as u64) << (8 * i);
                i += 1;
            }
            w
        }
        const FIVE: u64 = (1 << 40) - 1;
        const TAGS: u64 = word(b"TAGS");
        const KEYS: u64 = word(b"KEYS");
        const UNIQ_KEY: u64 = word(b"UNIQ_KEY");
        let mut p = Props::default();
        for_each_segment(block, |seg| {
            // The segment's first eight bytes (zero-padded): the usual names are told apart by
            // one compare each.
            let (w, _) = names::end_words(seg);
            let value = |at: usize| seg.get(at..).filter(|v| !v.is_empty());
            if w & FIVE == TAGS {
                p.tags = value(5).or(p.tags);
            } else if w & FIVE == KEYS {
                p.keys = value(5).or(p.keys);
            } else if w == UNIQ_KEY {
                if let Some(v) = value(9).filter(|_| seg.get(8) == Some(&1)) {
                    p.uniq = Some(v);
                    p.uniq_count = p.uniq_count.saturating_add(1);
                }
            } else if matches!(seg.first(), Some(b'T' | b'D' | b'R' | b'I' | b'_')) {
                p.rare(seg);
            }
        });
        p
    }

    /// The properties verify needs besides TAGS, KEYS and UNIQ_KEY.
    #[cold]
    fn rare(&mut self, seg: &'a [u8]) {
        match seg.first() {
            Some(b'T') => self.tx_check |= value_of(seg, b"TRANSACTION_CHECK_TIMES").is_some(),
            Some(b'D') => {
                if let Some(v) = value_of(seg, b"DELAY") {
                    self.delay = Some(v);
                }
            }
            Some(b'R') => {
                self.real_topic |= value_of(seg, b"REAL_TOPIC").is_some();
                self.retry_topic |= value_of(seg, b"RETRY_TOPIC").is_some();
            }
            Some(b'I') => {
                if let Some(v) = value_of(seg, b"INNER_NUM") {
                    self.inner_num = Some(v);
                }
            }
            Some(b'_') => self.crc32 |= value_of(seg, b"__CRC32#").is_some(),
            _ => {}
        }
    }
}

/// The tags code of a record (FORMAT.md 3.3), as [`record_tags_code`] states it, from the
/// properties already read: `None` when a SCHEDULE_TOPIC_XXXX DELAY is not a number.
fn fast_tags_code(
    m: &MessageRef<'_>,
    p: &Props<'_>,
    g: &crate::format::geometry::Geometry,
) -> Option<i64> {
    let mut code = match p.tags {
        Some(t) if !t.is_empty() => bytes_hash_extend(0, t) as i64,
        _ => 0,
    };
    if let Some(d) = p.delay.filter(|_| m.topic == SCHEDULE_TOPIC) {
        let level = crate::format::java::parse_int(&String::from_utf8_lossy(d))?;
        let level = level.min(g.max_delay_level());
        if level > 0 {
            code = crate::engine::store::dispatch::deliver_timestamp(g, level, m.store_timestamp);
        }
    }
    Some(code)
}

/// A fast non-cryptographic hasher for short keys (topic names, queue ids, key hashes).
#[derive(Default, Clone, Copy)]
struct FastHasher(u64);

const FAST_K: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        x ^= x >> 33;
        x
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in chunks.by_ref() {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(a)).wrapping_mul(FAST_K);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut a = [0u8; 8];
            if let Some(d) = a.get_mut(..rest.len()) {
                d.copy_from_slice(rest);
            }
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(a) ^ ((rest.len() as u64) << 59))
                .wrapping_mul(FAST_K);
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(FAST_K);
    }
    fn write_i32(&mut self, n: i32) {
        self.0 = (self.0.rotate_left(5) ^ n as u32 as u64).wrapping_mul(FAST_K);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(FAST_K);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// The index hash of `topic#key` (`IndexFile.indexKeyHashMethod`) from the hash of `topic#`.
fn index_hash(prefix: i32, key: &[u8]) -> i32 {
    let h = bytes_hash_extend(prefix, key).wrapping_abs();
    if h < 0 {
        0
    } else {
        h
    }
}

/// The Java hash of `topic#`, from which the index hash of each key of the topic continues.
fn topic_prefix_hash(topic: &str) -> i32 {
    bytes_hash_extend(0, topic.as_bytes())
        .wrapping_mul(31)
        .wrapping_add('#' as i32)
}

/// The index key hashes of a record in the broker's order (UNIQ_KEY, then each KEYS element);
/// empty for ROLLBACK records. `prefix` is [`topic_prefix_hash`] of the record's topic.
fn expected_index_keys(m: &MessageRef<'_>, p: &Props<'_>, prefix: i32, out: &mut Vec<i32>) {
    out.clear();
    if m.transaction_type() == TransactionType::Rollback {
        return;
    }
    if let Some(u) = p.uniq {
        out.push(index_hash(prefix, u));
    }
    match p.keys {
        // Usually a single key.
        Some(k) if !k.is_empty() && !has_space(k) => out.push(index_hash(prefix, k)),
        Some(k) => {
            for key in k.split(|&b| b == b' ').filter(|s| !s.is_empty()) {
                out.push(index_hash(prefix, key));
            }
        }
        None => {}
    }
}

/// True when `b` holds a space (the KEYS separator). Up to 16 bytes are tested as two
/// overlapping words, without a loop.
fn has_space(b: &[u8]) -> bool {
    const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const TOPS: u64 = u64::from_ne_bytes([0x80; 8]);
    // A byte of `w` is zero exactly when this has its top bit set somewhere.
    let any_zero = |w: u64| w.wrapping_sub(ONES) & !w & TOPS != 0;
    match (b.first_chunk::<8>(), b.last_chunk::<8>()) {
        (Some(f), Some(l)) if b.len() <= 16 => {
            any_zero(u64::from_ne_bytes(*f) ^ SPACES) || any_zero(u64::from_ne_bytes(*l) ^ SPACES)
        }
        _ => b.contains(&b' '),
    }
}

/// The index keys of a record as text, in the order of [`expected_index_keys`].
fn index_key_texts(p: &Props<'_>) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(u) = p.uniq {
        v.push(String::from_utf8_lossy(u).into_owned());
    }
    if let Some(k) = p.keys {
        for key in k.split(|&b| b == b' ').filter(|s| !s.is_empty()) {
            v.push(String::from_utf8_lossy(key).into_owned());
        }
    }
    v
}

/// True for records that a broker re-put (delayed delivery, retries, transactions, 5.x batch
/// properties): their UNIQ_KEY repeats by design. `system_topic` is [`is_system_topic`] of the
/// record's topic.
fn is_reput(m: &MessageRef<'_>, p: &Props<'_>, system_topic: bool) -> bool {
    system_topic
        || p.real_topic
        || p.retry_topic
        || p.tx_check
        || p.uniq_count > 1
        || m.transaction_type() != TransactionType::Not
}

// ---------------------------------------------------------------------------------------------
// Duplicate UNIQ_KEY window: see [`dups`].

/// A 64-bit hash of a UNIQ_KEY.
fn key_hash64(key: &[u8]) -> u64 {
    /// The high and low halves of the 128-bit product, folded.
    fn fold(a: u64, b: u64) -> u64 {
        let p = u128::from(a) * u128::from(b);
        (p >> 64) as u64 ^ p as u64
    }
    // The usual UNIQ_KEY is 32 hex digits: its four words in two independent products.
    if let Ok(w) = <&[u8; 32]>::try_from(key) {
        let word = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(w.get(i * 8..i * 8 + 8).unwrap_or(&[0; 8]));
            u64::from_le_bytes(a)
        };
        let x = fold(
            word(0) ^ 0xA076_1D64_78BD_642F,
            word(1) ^ 0xE703_7ED1_A0B4_28DB,
        );
        let y = fold(
            word(2) ^ 0x8EBC_6AF0_9C88_C6E3,
            word(3) ^ 0x5899_65CC_7537_4CC3,
        );
        return fold(x ^ 0x1D8E_4E27_C47D_124F, y ^ 32);
    }
    let mut h = FastHasher(0x243F_6A88_85A3_08D3);
    h.write(key);
    h.finish()
}

// ---------------------------------------------------------------------------------------------
// Index entries as one stream in commitlog order.

struct IdxFile {
    path: PathBuf,
    file: IndexFile<Mapped>,
    /// Entries `1..used` are in use.
    used: u32,
}

impl IdxFile {
    #[inline]
    fn entry(&self, geometry: IndexGeometry, n: u32) -> Option<IndexEntry> {
        let at = usize::try_from(geometry.entry_pos(n)).ok()?;
        IndexEntry::from_prefix(self.file.bytes().get(at..)?)
    }
}

struct IndexStream {
    files: Vec<IdxFile>,
    geometry: IndexGeometry,
    /// Offset ranges of index files that could not be opened: records there are not checked.
    unreadable: Vec<(i64, i64)>,
    /// Largest offset any entry points at (records after it are not indexed yet).
    coverage_end: Option<i64>,
    first_offset: Option<i64>,
}

#[derive(Debug, Clone, Copy)]
struct Cursor {
    f: usize,
    n: u32,
}

impl IndexStream {
    #[inline]
    fn entry(&self, c: Cursor) -> Option<IndexEntry> {
        let f = self.files.get(c.f)?;
        if c.n >= f.used {
            return None;
        }
        f.entry(self.geometry, c.n)
    }

    /// Start loading the entries a few places after `c` (the next records read them).
    fn prefetch_ahead(&self, c: Cursor) {
        if let Some(f) = self.files.get(c.f) {
            if let Ok(at) = usize::try_from(self.geometry.entry_pos(c.n.saturating_add(16))) {
                crate::format::mapped::prefetch(f.file.bytes(), at);
            }
        }
    }

    fn normalize(&self, mut c: Cursor) -> Cursor {
        while let Some(f) = self.files.get(c.f) {
            if c.n >= 1 && c.n < f.used {
                break;
            }
            c.f += 1;
            c.n = 1;
        }
        c
    }

    fn advance(&self, c: Cursor) -> Cursor {
        self.normalize(Cursor { f: c.f, n: c.n + 1 })
    }

    /// The first entry (in file order) whose offset is at least `offset`.
    fn seek(&self, offset: u64) -> Cursor {
        let offset = offset as i64;
        for (i, f) in self.files.iter().enumerate() {
            if f.used <= 1 {
                continue;
            }
            let last = f.file.entry(f.used - 1).map_or(i64::MIN, |e| e.phy_offset);
            if last < offset {
                continue;
            }
            let (mut lo, mut hi) = (1u32, f.used);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let v = f.file.entry(mid).map_or(i64::MAX, |e| e.phy_offset);
                if v >= offset {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            return self.normalize(Cursor { f: i, n: lo });
        }
        Cursor {
            f: self.files.len(),
            n: 1,
        }
    }

    fn entry_pos(&self, c: Cursor) -> u64 {
        self.geometry.entry_pos(c.n)
    }

    fn path(&self, c: Cursor) -> &Path {
        self.files
            .get(c.f)
            .map_or(Path::new(""), |f| f.path.as_path())
    }

    fn begin_timestamp(&self, c: Cursor) -> i64 {
        self.files
            .get(c.f)
            .map_or(0, |f| f.file.header().begin_timestamp)
    }

    fn is_unreadable_range(&self, offset: u64) -> bool {
        let o = offset as i64;
        self.unreadable.iter().any(|&(b, e)| o >= b && o <= e)
    }
}

// ---------------------------------------------------------------------------------------------
// Per-queue runs in the commitlog.

#[derive(Debug, Clone)]
struct QueueRun {
    first_q: i64,
    first_pos: u64,
    /// Commitlog offset of the queue's last record so far.
    last_pos: u64,
    next_q: i64,
    count: u64,
    /// The consume queue's end (recovery's view), looked up once.
    cq_end: u64,
    /// Records with a queue offset at or beyond `cq_end`.
    beyond: u64,
    first_beyond: Option<(u64, i64)>,
    /// Records whose consume queue unit points back at them, and their queue offsets as ranges.
    matched: u64,
    ranges: Vec<(u64, u64)>,
    ranges_overflow: bool,
}

impl QueueRun {
    fn add_matched(&mut self, q: u64) {
        self.matched += 1;
        add_range(&mut self.ranges, &mut self.ranges_overflow, q, q + 1);
    }
}

const MAX_RANGES: usize = 1024;

/// Append `[a, b)` to sorted, disjoint ranges (merging with the last one when adjacent).
fn add_range(ranges: &mut Vec<(u64, u64)>, overflow: &mut bool, a: u64, b: u64) {
    if let Some(last) = ranges.last_mut() {
        if last.1 == a {
            last.1 = b;
            return;
        }
    }
    if ranges.len() < MAX_RANGES {
        ranges.push((a, b));
    } else {
        *overflow = true;
    }
}

/// A queue as one worker sees it: the run so far and the consume queue file it last read.
struct SegQueue<'a> {
    topic: Box<str>,
    /// The topic's queue count in topics.json when this queue id is not below it and the queue
    /// has no consume queue folder: every record of it is set aside (a damaged QUEUEID).
    out_of_range: Option<i32>,
    run: QueueRun,
    cq: Option<&'a ConsumeQueue>,
    map: Option<(u64, u64, Arc<Mapped>)>,
}

/// The queues a worker met, by the topic's number in the worker's [`TopicCache`] and queue id:
/// ids below [`DIRECT_QUEUE_IDS`] through a table per topic, others through a map.
#[derive(Default)]
struct QueueRuns<'a> {
    /// Per topic number, per queue id: 0, or `n` for `queues[n - 1]`.
    direct: Vec<Vec<u32>>,
    other: FastMap<(u32, i32), u32>,
    queues: Vec<(i32, SegQueue<'a>)>,
}

/// Queue ids a worker finds through a table (a topic has 4 or 8 queues by default, 1024 at most
/// in practice).
const DIRECT_QUEUE_IDS: usize = 1024;

impl<'a> QueueRuns<'a> {
    /// The queue `queue_id` of topic number `topic`, made by `make` when it is new.
    #[inline]
    fn get_or_insert_with(
        &mut self,
        topic: u32,
        queue_id: i32,
        make: impl FnOnce() -> SegQueue<'a>,
    ) -> Option<&mut SegQueue<'a>> {
        let direct = usize::try_from(queue_id)
            .ok()
            .filter(|&q| q < DIRECT_QUEUE_IDS);
        let found = match direct {
            Some(q) => self
                .direct
                .get(topic as usize)
                .and_then(|t| t.get(q))
                .copied()
                .unwrap_or(0),
            None => self.other.get(&(topic, queue_id)).copied().unwrap_or(0),
        };
        let n = if found != 0 {
            found
        } else {
            self.queues.push((queue_id, make()));
            let n = self.queues.len() as u32;
            match direct {
                Some(q) => {
                    let t = topic as usize;
                    if self.direct.len() <= t {
                        self.direct.resize_with(t + 1, Vec::new);
                    }
                    let per = self.direct.get_mut(t)?;
                    if per.len() <= q {
                        per.resize(q + 1, 0);
                    }
                    *per.get_mut(q)? = n;
                }
                None => {
                    self.other.insert((topic, queue_id), n);
                }
            }
            n
        };
        let i = n.checked_sub(1)? as usize;
        self.queues.get_mut(i).map(|(_, sq)| sq)
    }
}

/// Per topic and queue id: the queue end recovery finds and the consume queue.
type CqIndex<'a> = FastMap<&'a str, FastMap<i32, (u64, &'a ConsumeQueue)>>;

// ---------------------------------------------------------------------------------------------
// The commitlog pass.

/// The commitlog files, each mapped on first use, for the phases after the walk that read single
/// records (units no record matched, duplicate keys).
struct LazyMaps<'a> {
    segs: &'a [Segment],
    maps: Vec<OnceLock<Option<Mapped>>>,
}

impl<'a> LazyMaps<'a> {
    fn new(segs: &'a [Segment]) -> Self {
        LazyMaps {
            segs,
            maps: segs.iter().map(|_| OnceLock::new()).collect(),
        }
    }

    /// The map of file `i`; `None` when it cannot be mapped.
    fn get(&self, i: usize) -> Option<&Mapped> {
        let seg = self.segs.get(i)?;
        self.maps.get(i)?.get_or_init(|| seg.map().ok()).as_ref()
    }
}

struct Ctx<'a> {
    store: &'a Store,
    opts: &'a VerifyOptions,
    walk_opts: recovery::WalkOptions,
    index: Option<&'a IndexStream>,
    cq_index: &'a CqIndex<'a>,
    dups: DupWindow,
    done: AtomicU64,
    total: u64,
    progress: Option<Progress<'a>>,
    /// Records at or after this offset are dispatched again by the broker.
    redispatch_from: u64,
    track_queues: bool,
    /// Queue count per topic in topics.json (`max(readQueueNums, writeQueueNums)`).
    topic_queues: FastMap<String, i32>,
    /// Consume queue files mapped during the scan, shared by the workers (at most
    /// [`MAX_CQ_MAPS`]; the cache starts over above that).
    cq_maps: Mutex<FastMap<PathBuf, Arc<Mapped>>>,
}

#[derive(Default)]
struct IndexTally {
    checked: u64,
    missing: u64,
    lag: u64,
    first_lag: Option<u64>,
    dangling: u64,
    duplicates: u64,
    time_mismatch: u64,
}

/// Queue runs of one file, without the worker's file caches.
type Runs = FastMap<Box<str>, FastMap<i32, QueueRun>>;

struct SegScan {
    /// The commitlog file.
    index: usize,
    /// File positions the piece was walked from (`None`: no piece starts near its nominal
    /// start, the piece before covers it) and to, and the file's mapped length.
    from: Option<u64>,
    to: u64,
    file_len: u64,
    walk: Option<FileWalk>,
    sink: Sink,
    queues: Runs,
    idx: IndexTally,
    records: u64,
    bytes: u64,
    data_end: u64,
    max_store_ts: i64,
    suspects: Vec<Suspect>,
    gaps: Vec<Gap>,
}

struct SegState<'c, 'a> {
    ctx: &'c Ctx<'a>,
    path: &'c Path,
    seg_start: u64,
    sink: Sink,
    queues: QueueRuns<'a>,
    idx: IndexTally,
    cursor: Option<Cursor>,
    keys: Vec<i32>,
    /// The hashes of the last record's topic (records of one topic often come in runs).
    topics: TopicCache,
    dup_batch: Vec<(u64, u64)>,
    /// Records to skip before the next sampled one.
    until_sample: u64,
    records: u64,
    bytes: u64,
    data_end: u64,
    max_store_ts: i64,
    unreported: u64,
    open_maps: usize,
    /// Records set aside by a header rule, and breaks in queue offset sequences (both bounded by
    /// [`MAX_HEADER_EVIDENCE`]): what [`headers::judge`] works from.
    suspects: Vec<Suspect>,
    gaps: Vec<Gap>,
}

/// At most this many suspects and gaps are kept per piece and per run.
const MAX_HEADER_EVIDENCE: usize = 4096;

/// What the per-record checks need of a topic.
#[derive(Clone, Copy)]
struct TopicHashes {
    /// Number of the topic in its worker's [`TopicCache`] (key of the worker's queue map).
    id: u32,
    /// Why the topic cannot name a consume queue folder, if it cannot.
    bad_name: Option<crate::format::layout::NameError>,
    /// [`topic_prefix_hash`], where index key hashes start.
    prefix_hash: i32,
    /// [`is_system_topic`].
    system: bool,
}

/// [`TopicHashes`] of every topic a worker met: records of several topics interleave in the
/// commitlog, so each record's topic is looked up once here and then known by its number.
#[derive(Default)]
struct TopicCache {
    known: NameTable<TopicHashes>,
}

impl TopicCache {
    #[inline]
    fn of(&mut self, topic: &str) -> TopicHashes {
        self.known
            .get_or_insert_with(topic.as_bytes(), |id| TopicHashes {
                id,
                bad_name: crate::format::layout::check_topic(topic).err(),
                prefix_hash: topic_prefix_hash(topic),
                system: is_system_topic(topic),
            })
    }
}

/// Above this many mapped consume queue files, a worker drops its cached maps (they are dropped
/// with each commitlog file's state anyway).
const MAX_CQ_MAPS: usize = 2048;

/// The unit at queue offset `q` of a queue, reading through the worker's cached map of the
/// consume queue file that holds it.
fn sq_unit(
    sq: &mut SegQueue<'_>,
    q: u64,
    opened: &mut usize,
    shared: &Mutex<FastMap<PathBuf, Arc<Mapped>>>,
) -> Option<CqUnit> {
    let pos = q.checked_mul(UNIT_SIZE as u64)?;
    let hit = matches!(&sq.map, Some((start, len, _)) if pos >= *start && pos < start + len);
    if !hit {
        let cq = sq.cq?;
        let i = cq
            .files
            .partition_point(|f| f.start <= pos)
            .checked_sub(1)?;
        let f = cq.files.get(i)?;
        if pos >= f.start.saturating_add(f.len) {
            return None;
        }
        let map = {
            let mut maps = shared.lock().ok()?;
            match maps.get(&f.path) {
                Some(m) => m.clone(),
                None => {
                    if maps.len() >= MAX_CQ_MAPS {
                        maps.clear();
                    }
                    let m = Arc::new(Mapped::open(&f.path).ok()?);
                    maps.insert(f.path.clone(), m.clone());
                    m
                }
            }
        };
        sq.map = Some((f.start, f.len, map));
        *opened += 1;
    }
    let (start, _, map) = sq.map.as_ref()?;
    let at = usize::try_from(pos - start).ok()?;
    // The queue's later records read the units after this one. Not much further on: a queue's
    // next record comes some twenty records later among several queues, and a line loaded long
    // before that has been pushed out of the cache by the records read meanwhile.
    crate::format::mapped::prefetch(map, at + 4 * UNIT_SIZE);
    CqUnit::from_bytes(map.get(at..)?)
}

/// What is wrong with the `__CRC32#` property of a record (5.2+, FORMAT.md 2.5), if anything: it
/// must be the last 20 bytes (`__CRC32#` 0x01, ten digits least significant first, 0x02) and hold
/// the masked CRC-32 of the bytes before them.
fn prop_crc_problem(raw: &[u8]) -> Option<String> {
    let split = raw.len().checked_sub(20)?;
    let (head, tail) = raw.split_at(split);
    let ok_shape = tail.starts_with(b"__CRC32#\x01") && tail.last() == Some(&0x02);
    let digits = tail.get(9..19).unwrap_or(&[]);
    let stored = if ok_shape && digits.iter().all(u8::is_ascii_digit) {
        let rev: Vec<u8> = digits.iter().rev().copied().collect();
        parse_digits(&rev)
    } else {
        None
    };
    let computed = masked_crc32(head) as i64;
    match stored {
        None => Some("__CRC32# is present but not as the record's last 20 bytes".to_string()),
        Some(s) if s != computed => {
            Some(format!("__CRC32# says {s}, the record's CRC is {computed}"))
        }
        _ => None,
    }
}

fn parse_digits(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

impl<'c, 'a> SegState<'c, 'a> {
    fn flush_dups(&mut self) {
        if self.dup_batch.is_empty() {
            return;
        }
        self.ctx.dups.add(&self.dup_batch);
        self.dup_batch.clear();
    }

    fn report_progress(&mut self, force: bool) {
        if self.unreported >= 8 << 20 || (force && self.unreported > 0) {
            let done =
                self.ctx.done.fetch_add(self.unreported, Ordering::Relaxed) + self.unreported;
            self.unreported = 0;
            if let Some(p) = self.ctx.progress {
                p(Phase::Commitlog, done.min(self.ctx.total), self.ctx.total);
            }
        }
    }

    fn finding(&mut self, code: &'static str, pos: u64, msg: String) -> &mut Self {
        self.sink.push(Finding::new(code, self.path, pos, msg));
        self
    }

    fn visit(&mut self, m: &MessageRef<'_>, _place: RecordPlace) {
        let ctx = self.ctx;
        let o = ctx.opts;
        let size = m.raw.len() as u64;
        self.records += 1;
        self.bytes += size;
        self.unreported += size;
        self.data_end = self.data_end.max(m.position.saturating_add(size));
        self.max_store_ts = self.max_store_ts.max(m.store_timestamp);
        let pos = m.position - self.seg_start;
        let in_topic = o.in_topic(&m.topic);
        // Every `sample`-th record (counted down: no division per record).
        let sampled = self.until_sample == 0;
        self.until_sample = if sampled {
            o.sample.max(1) - 1
        } else {
            self.until_sample - 1
        };
        let p = Props::of(m);
        let topic = self.topics.of(&m.topic);
        if in_topic && self.suspects.len() < MAX_HEADER_EVIDENCE {
            // PHYSICALOFFSET apart from the rest: one record can break both.
            let physical =
                (m.physical_offset != m.position as i64).then_some(Rule::PhysicalOffset {
                    found: m.physical_offset,
                });
            let queue = if let Some(e) = topic.bad_name {
                Some(Rule::Topic(e))
            } else if m.queue_id < 0 {
                Some(Rule::NegativeQueueId)
            } else if !queue_offset_fits(m.queue_offset) && m.transaction_type().is_queued() {
                Some(Rule::QueueOffsetOutOfRange)
            } else {
                None
            };
            for rule in physical.into_iter().chain(queue) {
                self.suspects.push(Suspect {
                    offset: m.position,
                    slot: QueueSlot::of(m),
                    rule,
                });
            }
        }

        if o.strict && in_topic && o.wants(Part::Commitlog) {
            self.strict_checks(m, &p, pos);
        }

        let tx = m.transaction_type();
        let inner_batch = m.sys_flag & sysflag::INNER_BATCH != 0;
        if ctx.track_queues && in_topic && tx.is_queued() && !inner_batch {
            self.queue_record(m, &p, topic.id, sampled && o.wants(Part::ConsumeQueue));
        }

        if ctx.index.is_none()
            && in_topic
            && tx != TransactionType::Rollback
            && (p.uniq.is_some() || p.keys.is_some_and(|k| k.iter().any(|&b| b != b' ')))
        {
            // No index to compare with: count what the broker would have indexed.
            self.idx.lag += 1;
        }
        if let Some(ix) = ctx.index {
            let mut keys = std::mem::take(&mut self.keys);
            expected_index_keys(m, &p, topic.prefix_hash, &mut keys);
            self.index_record(
                ix,
                m,
                &p,
                &keys,
                in_topic && sampled && o.wants(Part::Index),
            );
            self.keys = keys;
        }

        if in_topic && o.wants(Part::Commitlog) {
            if let Some(u) = p.uniq {
                if !is_reput(m, &p, topic.system) {
                    self.dup_batch.push((key_hash64(u), m.position));
                    if self.dup_batch.len() >= 1024 {
                        self.flush_dups();
                    }
                }
            }
        }
        self.report_progress(false);
    }

    fn strict_checks(&mut self, m: &MessageRef<'_>, p: &Props<'_>, pos: u64) {
        if m.body.is_empty() && m.body_crc != 0 {
            self.sink.push(
                Finding::new(
                    "commitlog.crc_mismatch",
                    self.path,
                    pos,
                    format!(
                        "record at commitlog offset {} has no body but BODYCRC {} (an empty body's CRC is 0)",
                        m.position, m.body_crc
                    ),
                )
                .with_severity(Severity::Warning)
                .with_action("the broker checks the CRC only when the body is not empty"),
            );
        }
        if p.crc32 {
            self.prop_crc(m, pos);
        }
        let mut odd = Vec::new();
        if m.sys_flag & !0x7FF != 0 {
            odd.push(format!("SYSFLAG {:#x} has bits above 0x7ff", m.sys_flag));
        }
        if m.store_timestamp <= 0 {
            odd.push(format!("STORETIMESTAMP is {}", m.store_timestamp));
        }
        let t = m.topic.as_bytes();
        match m.version {
            MessageVersion::V1 if t.len() > 127 => {
                odd.push(format!("a version 1 record with a {}-byte topic", t.len()))
            }
            MessageVersion::V2 if t.len() <= 127 => odd.push(format!(
                "a version 2 record for a {}-byte topic (the broker uses V2 only above 127)",
                t.len()
            )),
            _ => {}
        }
        if !odd.is_empty() {
            self.finding(
                "commitlog.odd_field",
                pos,
                format!(
                    "record at commitlog offset {}: {}",
                    m.position,
                    odd.join("; ")
                ),
            );
        }
    }

    /// `__CRC32#` (5.2+): the last 20 bytes are `__CRC32#` 0x01, ten digits least significant
    /// first, 0x02; the CRC covers the record before them.
    fn prop_crc(&mut self, m: &MessageRef<'_>, pos: u64) {
        if let Some(what) = prop_crc_problem(m.raw) {
            self.sink.push(
                Finding::new(
                    "commitlog.prop_crc_mismatch",
                    self.path,
                    pos,
                    format!("record at commitlog offset {}: {what}", m.position),
                )
                .with_action(
                    "checked only with forceVerifyPropCRC=true; then recovery truncates here",
                ),
            );
        }
    }

    fn queue_record(&mut self, m: &MessageRef<'_>, p: &Props<'_>, topic_id: u32, check_unit: bool) {
        let step = if m.sys_flag & sysflag::INNER_BATCH != 0 {
            p.inner_num.and_then(parse_digits).unwrap_or(1).max(1)
        } else {
            1
        };
        let q = m.queue_offset;
        let ctx = self.ctx;
        let topic: &str = &m.topic;
        let Some(sq) = self.queues.get_or_insert_with(topic_id, m.queue_id, || {
            let found = ctx
                .cq_index
                .get(topic)
                .and_then(|m2| m2.get(&m.queue_id))
                .copied();
            let out_of_range = ctx
                .topic_queues
                .get(topic)
                .copied()
                .filter(|&n| m.queue_id >= n && found.is_none());
            SegQueue {
                topic: topic.into(),
                out_of_range,
                run: QueueRun {
                    first_q: q,
                    first_pos: m.position,
                    last_pos: m.position,
                    next_q: q,
                    count: 0,
                    cq_end: found.map_or(0, |(e, _)| e),
                    beyond: 0,
                    first_beyond: None,
                    matched: 0,
                    ranges: Vec::new(),
                    ranges_overflow: false,
                },
                cq: found.map(|(_, cq)| cq),
                map: None,
            }
        }) else {
            return;
        };
        if let Some(queues) = sq.out_of_range {
            if self.suspects.len() < MAX_HEADER_EVIDENCE {
                self.suspects.push(Suspect {
                    offset: m.position,
                    slot: QueueSlot::of(m),
                    rule: Rule::QueueIdOutOfRange { queues },
                });
            }
        }
        let run = &mut sq.run;
        if run.count > 0 && q != run.next_q && self.gaps.len() < MAX_HEADER_EVIDENCE {
            self.gaps.push(Gap {
                topic: topic.to_string(),
                queue_id: m.queue_id,
                expected: run.next_q,
                found: q,
                offset: m.position,
                prev_offset: run.last_pos,
            });
        }
        run.next_q = q.saturating_add(step);
        run.last_pos = m.position;
        run.count += 1;
        if q >= 0 && q as u64 >= run.cq_end {
            run.beyond += 1;
            if run.first_beyond.is_none() {
                run.first_beyond = Some((m.position, q));
            }
        } else if check_unit && q >= 0 {
            // The unit at this queue offset must point back at this record.
            if let Some(u) = sq_unit(sq, q as u64, &mut self.open_maps, &ctx.cq_maps) {
                let tags_ok = u.has_ext_addr()
                    || fast_tags_code(m, p, &ctx.store.geometry) == Some(u.tags_code);
                if u.offset == m.position as i64 && u.size == m.total_size && tags_ok {
                    sq.run.add_matched(q as u64);
                }
            }
        }
        if self.open_maps > MAX_CQ_MAPS {
            for (_, sq) in self.queues.queues.iter_mut() {
                sq.map = None;
            }
            self.open_maps = 0;
        }
    }

    fn index_record(
        &mut self,
        ix: &IndexStream,
        m: &MessageRef<'_>,
        p: &Props<'_>,
        keys: &[i32],
        check: bool,
    ) {
        let x = m.position as i64;
        let mut c = match self.cursor {
            Some(c) => c,
            None => return,
        };
        ix.prefetch_ahead(c);
        let mut matched = KeyBits::new(keys.len());
        while let Some(e) = ix.entry(c) {
            if e.phy_offset > x {
                break;
            }
            if e.phy_offset < x {
                // Before this record: inside the previous record or between records.
                if e.phy_offset >= self.seg_start as i64 {
                    self.dangling(ix, c, &e, "where no record starts");
                }
            } else if check {
                self.idx.checked += 1;
                let free = keys
                    .iter()
                    .enumerate()
                    .position(|(i, h)| *h == e.key_hash && !matched.get(i));
                match free {
                    Some(i) => {
                        matched.set(i);
                        self.time_check(ix, c, &e, m);
                    }
                    None if keys.contains(&e.key_hash) => self.idx.duplicates += 1,
                    None => {
                        let what = if keys.is_empty() {
                            "a record that is not indexed (no keys, or ROLLBACK)".to_string()
                        } else {
                            format!("a record of topic {} whose keys do not hash to it", m.topic)
                        };
                        self.dangling(ix, c, &e, &what);
                    }
                }
            }
            c = ix.advance(c);
        }
        self.cursor = Some(c);
        if !check || keys.is_empty() || ix.is_unreadable_range(m.position) {
            return;
        }
        let covered = match (ix.first_offset, ix.coverage_end) {
            (Some(_), Some(end)) => x <= end,
            _ => false,
        };
        let mut texts: Option<Vec<String>> = None;
        for i in 0..keys.len() {
            if matched.get(i) {
                continue;
            }
            if !covered {
                self.idx.lag += 1;
                if self.idx.first_lag.is_none() {
                    self.idx.first_lag = Some(m.position);
                }
                continue;
            }
            self.idx.missing += 1;
            let key = texts
                .get_or_insert_with(|| index_key_texts(p))
                .get(i)
                .cloned()
                .unwrap_or_default();
            let action = if m.position >= self.ctx.redispatch_from {
                "the broker re-indexes it on its next start (re-dispatch)"
            } else {
                "queries by this key do not find the message; the broker never re-indexes old records"
            };
            self.sink.push(
                Finding::new(
                    "index.missing_key",
                    self.path,
                    m.position - self.seg_start,
                    format!(
                        "record at commitlog offset {} has key {}#{} but no index entry",
                        m.position, m.topic, key
                    ),
                )
                .about_record(m.position)
                .with_action(action),
            );
        }
    }

    fn time_check(&mut self, ix: &IndexStream, c: Cursor, e: &IndexEntry, m: &MessageRef<'_>) {
        if c.n < 2 {
            return;
        }
        let begin = ix.begin_timestamp(c);
        let want = if begin <= 0 {
            0
        } else {
            (m.store_timestamp.wrapping_sub(begin) / 1000).clamp(0, i32::MAX as i64) as i32
        };
        if e.time_diff != want {
            self.idx.time_mismatch += 1;
            self.sink.push(
                Finding::new(
                    "index.time_mismatch",
                    ix.path(c),
                    ix.entry_pos(c) + 12,
                    format!(
                        "entry {} has time diff {} s, but the record at offset {} was stored {} s after the file's beginTimestamp",
                        c.n, e.time_diff, m.position, want
                    ),
                )
                .with_action("time-bounded queries may miss this entry"),
            );
        }
    }

    fn dangling(&mut self, ix: &IndexStream, c: Cursor, e: &IndexEntry, what: &str) {
        self.idx.dangling += 1;
        if !self.ctx.opts.in_topic_any() || !self.ctx.opts.wants(Part::Index) {
            return;
        }
        self.sink.push(
            Finding::new(
                "index.dangling_entry",
                ix.path(c),
                ix.entry_pos(c),
                format!(
                    "entry {} (hash {}) points at commitlog offset {}, {what}",
                    c.n, e.key_hash, e.phy_offset
                ),
            )
            .about_record(e.phy_offset.max(0) as u64)
            .with_action(
                "a query that reaches this entry reads the wrong bytes; clients drop records \
                 whose key differs, so the answer is only incomplete",
            ),
        );
    }

    /// Entries left in this file's range after its last record.
    fn finish_index(&mut self, ix: &IndexStream, seg_end: u64) {
        let Some(mut c) = self.cursor else { return };
        while let Some(e) = ix.entry(c) {
            if e.phy_offset >= seg_end as i64 {
                break;
            }
            self.dangling(ix, c, &e, "past the last record of its file");
            c = ix.advance(c);
        }
        self.cursor = Some(c);
    }
}

/// The default [`VerifyOptions::piece_size`].
pub const PIECE: u64 = 64 << 20;

/// How far past a piece's nominal start the record it starts with is looked for (more than the
/// largest record a broker accepts).
const PIECE_SEARCH: usize = 8 << 20;

/// Each commitlog file's map while pieces of it are walked: the first piece maps the file and
/// the last one to finish drops the map, so a file is mapped and unmapped once.
struct PieceMaps {
    maps: Vec<Mutex<Option<Arc<Mapped>>>>,
    left: Vec<AtomicUsize>,
}

impl PieceMaps {
    fn new(segs: &[Segment], piece: u64) -> Self {
        PieceMaps {
            maps: segs.iter().map(|_| Mutex::new(None)).collect(),
            left: segs
                .iter()
                .enumerate()
                .map(|(i, s)| AtomicUsize::new(piece_count(s.len, file_piece_size(piece, segs, i))))
                .collect(),
        }
    }

    fn get(&self, i: usize, seg: &Segment) -> Option<Arc<Mapped>> {
        let mut slot = self.maps.get(i)?.lock().ok()?;
        if slot.is_none() {
            *slot = Some(Arc::new(seg.map().ok()?));
        }
        slot.clone()
    }

    /// A piece of file `i` is done: the last one lets the map go.
    fn done(&self, i: usize) {
        let last = self
            .left
            .get(i)
            .is_some_and(|n| n.fetch_sub(1, Ordering::AcqRel) == 1);
        if last {
            if let Some(Ok(mut slot)) = self.maps.get(i).map(|m| m.lock()) {
                *slot = None;
            }
        }
    }
}

/// The piece size for commitlog file `i`: a quarter of `piece` for the last file (where the
/// data usually ends, part way in), so that the workers run out of pieces at about the same
/// time.
fn file_piece_size(piece: u64, segs: &[Segment], i: usize) -> u64 {
    let piece = piece.max(1);
    if i + 1 == segs.len() {
        (piece / 4).max(1 << 20).min(piece)
    } else {
        piece
    }
}

/// How many pieces a file `len` bytes long is walked in.
fn piece_count(len: u64, piece: u64) -> usize {
    usize::try_from(len.div_ceil(piece.max(1)))
        .unwrap_or(usize::MAX)
        .max(1)
}

/// Where the piece nominally starting at `nominal` starts: the first record at or after it (as
/// recovery resynchronises), unless the page there is zero (the end of the data, or a hole the
/// walk will report). Every worker finds the same place for the same bytes.
fn piece_start(buf: &[u8], nominal: u64, file_start: u64) -> Option<usize> {
    let nominal = usize::try_from(nominal).ok()?;
    let page = buf.get(nominal..nominal.checked_add(4096)?)?;
    if page.iter().all(|&b| b == 0) {
        return None;
    }
    let window = buf.get(..nominal.saturating_add(PIECE_SEARCH).min(buf.len()))?;
    recovery::resync(window, nominal, file_start).filter(|&p| p > 0)
}

/// Which bytes of a commitlog file a scan walks.
enum Span<'m> {
    /// Piece `j`, located by [`piece_start`], on the file's shared map.
    Piece(usize, &'m PieceMaps),
    /// From file position `from` to the end in one go, on a map of its own, continuing the walk
    /// of the bytes before `from` (none when `from` is 0).
    Rest(usize, Option<FileWalk>),
}

/// Walk a span of commitlog file `i` and check its records.
fn scan_piece(ctx: &Ctx<'_>, i: usize, span: Span<'_>) -> SegScan {
    let store = ctx.store;
    let mut sink = Sink::new(ctx.opts.max_per_code);
    let empty = |sink, from| SegScan {
        index: i,
        from,
        to: 0,
        file_len: 0,
        walk: None,
        sink,
        queues: Runs::default(),
        idx: IndexTally::default(),
        records: 0,
        bytes: 0,
        data_end: 0,
        max_store_ts: 0,
        suspects: Vec::new(),
        gaps: Vec::new(),
    };
    let Some(seg) = store.commitlog.segments.get(i) else {
        return empty(sink, None);
    };
    // The workers' map, unmapped when the file is done (in parallel with the other workers);
    // the later phases map a file again only if they must read a record in it.
    let map = match &span {
        Span::Piece(_, maps) => maps.get(i, seg),
        Span::Rest(..) => seg.map().ok().map(Arc::new),
    };
    let Some(map) = map else {
        if matches!(span, Span::Piece(j, _) if j > 0) {
            return empty(sink, None);
        }
        sink.push(Finding::new(
            "store.unreadable",
            &seg.path,
            0,
            "the commitlog file cannot be mapped or read".to_string(),
        ));
        return empty(sink, Some(0));
    };
    let piece_size = file_piece_size(ctx.opts.piece_size, &store.commitlog.segments, i);
    let nominal = |j: usize| (j as u64).saturating_mul(piece_size);
    let (from, to, before) = match span {
        Span::Piece(piece, _) => {
            let from = match piece {
                0 => 0,
                j => match piece_start(&map, nominal(j), seg.start) {
                    Some(p) => p,
                    None => return empty(sink, None),
                },
            };
            let to = (piece + 1..piece_count(seg.len, piece_size))
                .find_map(|j| piece_start(&map, nominal(j), seg.start))
                .unwrap_or(map.len());
            (from, to, None)
        }
        Span::Rest(from, before) => (from, map.len(), before),
    };
    let mut st = SegState {
        ctx,
        path: &seg.path,
        seg_start: seg.start,
        sink,
        queues: QueueRuns::default(),
        idx: IndexTally::default(),
        cursor: ctx
            .index
            .map(|ix| ix.seek(seg.start.saturating_add(from as u64))),
        keys: Vec::new(),
        topics: TopicCache::default(),
        dup_batch: Vec::new(),
        until_sample: 0,
        records: 0,
        bytes: 0,
        data_end: 0,
        max_store_ts: 0,
        unreported: 0,
        open_maps: 0,
        suspects: Vec::new(),
        gaps: Vec::new(),
    };
    let bytes = map.get(..to).unwrap_or(&map);
    let walk = recovery::walk_on(before, bytes, from, seg, &ctx.walk_opts, |m, place| {
        st.visit(m, place)
    });
    if let Some(ix) = ctx.index {
        st.finish_index(ix, seg.start.saturating_add(to as u64));
    }
    map.release(from, to);
    st.flush_dups();
    // Count the whole piece as done (blank space and zeros included).
    st.unreported += ((to - from.min(to)) as u64).saturating_sub(st.bytes);
    st.report_progress(true);
    SegScan {
        index: i,
        from: Some(from as u64),
        to: to as u64,
        file_len: map.len() as u64,
        walk: Some(walk),
        sink: st.sink,
        queues: {
            let mut runs = Runs::default();
            for (q, sq) in st.queues.queues {
                runs.entry(sq.topic).or_default().insert(q, sq.run);
            }
            runs
        },
        idx: st.idx,
        records: st.records,
        bytes: st.bytes,
        data_end: st.data_end,
        max_store_ts: st.max_store_ts,
        suspects: st.suspects,
        gaps: st.gaps,
    }
}

/// The pieces of one file, joined as far as they join: each piece but the last must end
/// cleanly where the next one starts, and nothing may be wrong in any (what follows a stop
/// depends on what came before it). From the first piece that does not join on, the file is
/// walked again in one go, continuing the walk of the pieces before it.
struct Joined {
    scans: Vec<SegScan>,
    /// Where the walk must start again, with the walk of the bytes before it.
    again: Option<(usize, Option<FileWalk>)>,
}

fn join_pieces(pieces: Vec<SegScan>) -> Joined {
    let mut pieces: Vec<SegScan> = pieces.into_iter().filter(|p| p.from.is_some()).collect();
    let n = pieces.len();
    let starts: Vec<Option<u64>> = pieces.iter().map(|p| p.from).collect();
    let joins = |k: usize, p: &SegScan| {
        let Some(w) = p.walk.as_ref() else {
            return false;
        };
        match starts.get(k + 1) {
            Some(&next) => w.ends_cleanly_at(p.to) && next == Some(p.to),
            None => w.is_clean() && p.to == p.file_len,
        }
    };
    let good = match starts.first() {
        Some(Some(0)) => pieces
            .iter()
            .enumerate()
            .position(|(k, p)| !joins(k, p))
            .unwrap_or(n),
        _ => 0,
    };
    let mut walk: Option<FileWalk> = None;
    for p in pieces.iter_mut().take(good) {
        walk = match (walk, p.walk.take()) {
            (Some(w), Some(next)) => Some(w.join(next)),
            (w, next) => w.or(next),
        };
    }
    if good == n {
        if let Some(last) = pieces.last_mut() {
            last.walk = walk;
        }
        return Joined {
            scans: pieces,
            again: None,
        };
    }
    let from = pieces
        .get(good)
        .and_then(|p| p.from)
        .and_then(|f| usize::try_from(f).ok())
        .filter(|_| good > 0)
        .unwrap_or(0);
    pieces.truncate(good);
    Joined {
        scans: pieces,
        again: Some((from, walk.filter(|_| from > 0))),
    }
}

/// What the commitlog pass leaves for the later phases.
struct Merged {
    sink: Sink,
    walks: Vec<Option<FileWalk>>,
    suspects: Vec<Suspect>,
    gaps: Vec<Gap>,
    queues: HashMap<(String, i32), QueueRun>,
    idx: IndexTally,
    records: u64,
    bytes: u64,
    data_end: u64,
    max_store_ts: i64,
    /// The next file to merge, the pieces of each file (numbered across files) and the pieces
    /// waiting for the ones before them.
    next: usize,
    pieces: Vec<std::ops::Range<usize>>,
    pending: BTreeMap<usize, SegScan>,
}

impl Merged {
    /// Take piece number `piece`; merge, in file order, every file whose pieces are all in.
    /// `again` walks the rest of a file whose pieces do not all join, from a file position on
    /// and continuing a walk.
    fn take(
        &mut self,
        piece: usize,
        s: SegScan,
        again: &dyn Fn(usize, usize, Option<FileWalk>) -> SegScan,
    ) {
        self.pending.insert(piece, s);
        while let Some(range) = self.pieces.get(self.next).cloned() {
            if !range.clone().all(|p| self.pending.contains_key(&p)) {
                break;
            }
            let file = self.next;
            self.next += 1;
            let group: Vec<SegScan> = range.filter_map(|p| self.pending.remove(&p)).collect();
            let joined = join_pieces(group);
            for s in joined.scans {
                self.merge(s);
            }
            if let Some((from, before)) = joined.again {
                let s = again(file, from, before);
                self.merge(s);
            }
        }
    }

    fn merge(&mut self, s: SegScan) {
        self.sink.absorb(s.sink);
        for x in s.suspects {
            if self.suspects.len() < MAX_HEADER_EVIDENCE {
                self.suspects.push(x);
            }
        }
        for g in s.gaps {
            if self.gaps.len() < MAX_HEADER_EVIDENCE {
                self.gaps.push(g);
            }
        }
        if let Some(w) = self.walks.get_mut(s.index) {
            *w = s.walk;
        }
        self.records += s.records;
        self.bytes += s.bytes;
        self.data_end = self.data_end.max(s.data_end);
        self.max_store_ts = self.max_store_ts.max(s.max_store_ts);
        let t = &mut self.idx;
        t.checked += s.idx.checked;
        t.missing += s.idx.missing;
        t.lag += s.idx.lag;
        t.first_lag = t.first_lag.or(s.idx.first_lag);
        t.dangling += s.idx.dangling;
        t.duplicates += s.idx.duplicates;
        t.time_mismatch += s.idx.time_mismatch;
        for (topic, per) in s.queues {
            for (qid, run) in per {
                match self.queues.get_mut(&(topic.to_string(), qid)) {
                    None => {
                        self.queues.insert((topic.to_string(), qid), run);
                    }
                    Some(acc) => {
                        if run.first_q != acc.next_q && self.gaps.len() < MAX_HEADER_EVIDENCE {
                            self.gaps.push(Gap {
                                topic: topic.to_string(),
                                queue_id: qid,
                                expected: acc.next_q,
                                found: run.first_q,
                                offset: run.first_pos,
                                prev_offset: acc.last_pos,
                            });
                        }
                        acc.next_q = run.next_q;
                        acc.last_pos = run.last_pos;
                        acc.count += run.count;
                        acc.matched += run.matched;
                        acc.ranges_overflow |= run.ranges_overflow;
                        for (a, b) in run.ranges {
                            add_range(&mut acc.ranges, &mut acc.ranges_overflow, a, b);
                        }
                        acc.beyond += run.beyond;
                        if acc.first_beyond.is_none() {
                            acc.first_beyond = run.first_beyond;
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Consume queues.

#[derive(Default)]
struct CqResult {
    units: u64,
    /// Units matched here (by reading their record) that no record matched during the scan.
    matched: u64,
    ranges: Vec<(u64, u64)>,
    ranges_overflow: bool,
    findings: Vec<Finding>,
    /// Units that point at a record with its size and tags code while the record names another
    /// topic, queue or queue offset (one field apart): evidence for [`headers::judge`], with the
    /// finding reported if the judgement does not take it.
    claims: Vec<(Claim, Finding)>,
}

const MAX_CQ_FINDINGS: usize = 64;

impl CqResult {
    fn matched_q(&mut self, q: u64) {
        self.matched += 1;
        add_range(&mut self.ranges, &mut self.ranges_overflow, q, q + 1);
    }

    fn push(&mut self, f: Finding) {
        if self.findings.len() < MAX_CQ_FINDINGS {
            self.findings.push(f);
        }
    }
}

/// Ranges sorted and merged.
fn normalized(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// First queue offset in `[lo, hi)` not covered by `ranges` (sorted and merged).
fn first_unmatched(ranges: &[(u64, u64)], lo: u64, hi: u64) -> Option<u64> {
    let mut q = lo;
    for &(a, b) in ranges {
        if b <= q {
            continue;
        }
        if a > q {
            break;
        }
        q = b;
    }
    (q < hi).then_some(q)
}

struct CqCtx<'a> {
    store: &'a Store,
    opts: &'a VerifyOptions,
    maps: &'a LazyMaps<'a>,
    data_end: u64,
    cl_min: u64,
    plan: Option<&'a RecoveryPlan>,
    /// Consume queue files the commitlog pass mapped (their pages are mapped already).
    cq_maps: Option<&'a FastMap<PathBuf, Arc<Mapped>>>,
}

fn record_at<'m>(c: &'m CqCtx<'_>, offset: u64) -> std::result::Result<MessageRef<'m>, String> {
    let segs = &c.store.commitlog.segments;
    let i = segs
        .partition_point(|s| s.start <= offset)
        .checked_sub(1)
        .ok_or_else(|| "below the first commitlog file".to_string())?;
    let seg = segs.get(i).ok_or_else(|| "no commitlog file".to_string())?;
    let map = c
        .maps
        .get(i)
        .ok_or_else(|| format!("{} cannot be read", seg.path.display()))?;
    let pos = usize::try_from(offset - seg.start).map_err(|e| e.to_string())?;
    match parse_record(map, pos, seg.start, false) {
        Ok(Record::Message(m)) => Ok(m),
        Ok(Record::Blank { .. }) => Err("a blank record is there".to_string()),
        Ok(Record::EndOfData) => Err("only zeros are there".to_string()),
        Err(e) => Err(format!("no record parses there ({})", e.kind)),
    }
}

/// A [`Claim`] when the unit at queue offset `q` of `cq` and the record it points at agree on
/// everything but one of topic, queue id and queue offset (size, tags code, a queued transaction
/// type and an intact body): the record's header may have changed after it was dispatched.
fn unit_claim(
    cq: &ConsumeQueue,
    q: u64,
    u: &CqUnit,
    m: &MessageRef<'_>,
    g: &crate::format::geometry::Geometry,
    path: &Path,
    pos: u64,
) -> Option<Claim> {
    let tags_ok = u.has_ext_addr() || record_tags_code(m, g).ok() == Some(u.tags_code);
    if m.total_size != u.size || !tags_ok {
        return None;
    }
    if !m.body.is_empty() && !m.body_crc_ok() {
        return None;
    }
    let unit = QueueSlot {
        topic: cq.topic.clone(),
        queue_id: cq.queue_id,
        queue_offset: i64::try_from(q).ok()?,
    };
    let found = QueueSlot::of(m);
    if !m.transaction_type().is_queued() {
        // Only the type differs: the type it had is COMMIT for a transactional message.
        let committed = m.property(prop::TRAN_MSG).is_some_and(|v| v == "true");
        let right = (m.sys_flag & !sysflag::TRANSACTION_MASK)
            | if committed {
                sysflag::TRANSACTION_COMMIT
            } else {
                sysflag::TRANSACTION_NOT
            };
        return (found == unit).then(|| Claim {
            offset: m.position,
            unit,
            found,
            sys_flag: Some((m.sys_flag, right)),
            unit_file: path.display().to_string(),
            unit_pos: pos,
        });
    }
    let differing = [
        unit.topic != found.topic,
        unit.queue_id != found.queue_id,
        unit.queue_offset != found.queue_offset,
    ];
    (differing.iter().filter(|d| **d).count() == 1).then(|| Claim {
        offset: m.position,
        unit,
        found,
        sys_flag: None,
        unit_file: path.display().to_string(),
        unit_pos: pos,
    })
}

fn check_queue(c: &CqCtx<'_>, cq: &ConsumeQueue, run: Option<&QueueRun>) -> Result<CqResult> {
    let mut r = CqResult::default();
    // Units the scan already matched with their record need no second look.
    let done = match run {
        Some(run) if !run.ranges_overflow => normalized(run.ranges.clone()),
        _ => Vec::new(),
    };
    let mut done_at = 0usize;
    let fs = cq.file_size;
    let g = &c.store.geometry;
    let name = format!("{}/{}", cq.topic, cq.queue_id);
    let mut expected_start: Option<u64> = None;
    let mut ended: Option<u64> = None;
    let mut torn: (u64, Option<(PathBuf, u64)>) = (0, None);
    let mut seen_real = false;
    let mut prev_offset: Option<i64> = None;
    let mut stale = 0u64;
    let mut past_end: (u64, Option<(PathBuf, u64, u64)>) = (0, None);
    let sample = c.opts.sample.max(1);
    for f in &cq.files {
        if f.len != fs {
            r.push(
                Finding::new(
                    "consumequeue.file_size",
                    &f.path,
                    f.len.min(fs),
                    format!(
                        "consume queue file of {name} is {} bytes, expected {fs}",
                        f.len
                    ),
                )
                .with_action("MappedFileQueue.load fails: the broker does not start"),
            );
        } else if fs > 0 && f.start % fs != 0 {
            r.push(Finding::new(
                "consumequeue.file_size",
                &f.path,
                0,
                format!(
                    "consume queue file name {} of {name} is not a multiple of {fs}",
                    f.start
                ),
            ));
        }
        if let Some(e) = expected_start {
            if f.start > e {
                r.push(
                    Finding::new(
                        "consumequeue.gap",
                        &f.path,
                        0,
                        format!(
                            "{name}: no file holds queue offsets {}..{}",
                            e / UNIT_SIZE as u64,
                            f.start / UNIT_SIZE as u64
                        ),
                    )
                    .with_action(
                        "reads of those queue offsets find nothing; the broker only logs the gap",
                    ),
                );
            }
        }
        expected_start = Some(f.start.saturating_add(fs.max(f.len)));
        let cached = c.cq_maps.and_then(|m| m.get(&f.path)).cloned();
        let map = match cached.map_or_else(|| Mapped::open(&f.path).map(Arc::new), Ok) {
            Ok(m) => m,
            Err(e) => {
                r.push(Finding::new("store.unreadable", &f.path, 0, e.to_string()));
                continue;
            }
        };
        let chunks = map.chunks_exact(UNIT_SIZE);
        let rem = chunks.remainder().len();
        let mut tail_from = None;
        for (i, chunk) in chunks.enumerate() {
            let fpos = (i * UNIT_SIZE) as u64;
            let q = f.start.saturating_add(fpos) / UNIT_SIZE as u64;
            let Some(u) = CqUnit::from_bytes(chunk) else {
                continue;
            };
            if ended.is_some() {
                tail_from = Some(i * UNIT_SIZE);
                break;
            }
            if !u.is_valid() {
                ended = Some(q);
                if chunk.iter().any(|&b| b != 0) {
                    torn.0 += 1;
                    torn.1.get_or_insert((f.path.clone(), fpos));
                }
                continue;
            }
            if u.is_pre_blank() {
                if seen_real {
                    r.push(Finding::new(
                        "consumequeue.torn",
                        &f.path,
                        fpos,
                        format!("{name}: pre-blank unit at queue offset {q} after real units"),
                    ));
                }
                continue;
            }
            seen_real = true;
            r.units += 1;
            if let Some(p) = prev_offset {
                if u.offset <= p {
                    r.push(Finding::new(
                        "consumequeue.unit_mismatch",
                        &f.path,
                        fpos,
                        format!(
                            "{name}: unit at queue offset {q} points at commitlog offset {}, not after the previous unit's {p}",
                            u.offset
                        ),
                    ));
                }
            }
            prev_offset = Some(u.offset);
            let uoff = u.offset as u64;
            if uoff < c.cl_min {
                stale += 1;
                continue;
            }
            if uoff.saturating_add(u.size as u64) > c.data_end {
                past_end.0 += 1;
                if past_end.1.is_none() {
                    past_end.1 = Some((f.path.clone(), fpos, q));
                }
                continue;
            }
            if sample > 1 && !q.is_multiple_of(sample) {
                continue;
            }
            while done.get(done_at).is_some_and(|&(_, b)| b <= q) {
                done_at += 1;
            }
            if done.get(done_at).is_some_and(|&(a, _)| a <= q) {
                continue;
            }
            let mut diffs = Vec::new();
            let mut claim = None;
            match record_at(c, uoff) {
                Err(why) => diffs.push(why),
                Ok(m) => {
                    claim = unit_claim(cq, q, &u, &m, g, &f.path, fpos);
                    if m.topic != cq.topic {
                        diffs.push(format!("topic {}", m.topic));
                    }
                    if m.queue_id != cq.queue_id {
                        diffs.push(format!("queue id {}", m.queue_id));
                    }
                    if m.queue_offset != q as i64 {
                        diffs.push(format!("queue offset {}", m.queue_offset));
                    }
                    if m.total_size != u.size {
                        diffs.push(format!("size {} (the unit says {})", m.total_size, u.size));
                    }
                    if !m.transaction_type().is_queued() {
                        diffs.push(format!("transaction type {:?}", m.transaction_type()));
                    }
                    if !u.has_ext_addr() {
                        match record_tags_code(&m, g) {
                            Ok(t) if t != u.tags_code => {
                                diffs.push(format!("tags code {t} (the unit says {})", u.tags_code))
                            }
                            Ok(_) => {}
                            Err(e) => diffs.push(e.to_string()),
                        }
                    }
                }
            }
            if diffs.is_empty() {
                r.matched_q(q);
            } else {
                let finding = Finding::new(
                    "consumequeue.unit_mismatch",
                    &f.path,
                    fpos,
                    format!(
                        "{name}: unit at queue offset {q} points at commitlog offset {uoff} (size {}), but there: {}",
                        u.size,
                        diffs.join(", ")
                    ),
                )
                .about_record(uoff)
                .with_action(format!(
                    "consumers of {name} at queue offset {q} get the bytes at offset {uoff} \
                     (a wrong message, or a pull error); the broker never rewrites the unit"
                ));
                match claim {
                    Some(cl) if r.claims.len() < MAX_CQ_FINDINGS => r.claims.push((cl, finding)),
                    _ => r.push(finding),
                }
            }
        }
        if let Some(from) = tail_from {
            count_torn_units(&map, from, &f.path, &mut torn);
        }
        if rem != 0 {
            r.push(Finding::new(
                "consumequeue.torn",
                &f.path,
                map.len() as u64 - rem as u64,
                format!("{name}: the file ends with a partial unit of {rem} bytes"),
            ));
        }
    }
    if torn.0 > 0 {
        if let Some((p, pos)) = torn.1 {
            r.push(
                Finding::new(
                    "consumequeue.torn",
                    &p,
                    pos,
                    format!(
                        "{name}: {} non-zero units after the first invalid unit (queue offset {})",
                        torn.0,
                        ended.unwrap_or(0)
                    ),
                )
                .with_action(
                    "recovery ends the queue at the first invalid unit (within its last three \
                     files); later units are ignored and overwritten",
                ),
            );
        }
    }
    if stale > 0 {
        if let Some(f) = cq.files.first() {
            r.push(Finding::new(
                "consumequeue.stale_unit",
                &f.path,
                0,
                format!(
                    "{name}: {stale} units point below the commitlog's first offset {} (expired data)",
                    c.cl_min
                ),
            ));
        }
    }
    if let (n, Some((p, pos, q))) = past_end {
        if n > 0 {
            let action = match c.plan.and_then(|pl| pl.cut.as_ref()) {
                Some(cut) => format!(
                    "recovery drops the units pointing at or after offset {} (truncateDirtyLogicFiles)",
                    cut.offset
                ),
                None => "recovery drops them (truncateDirtyLogicFiles)".to_string(),
            };
            r.push(
                Finding::new(
                    "consumequeue.past_end",
                    &p,
                    pos,
                    format!(
                        "{name}: {n} units from queue offset {q} point past the commitlog's end of data ({})",
                        c.data_end
                    ),
                )
                .with_action(action),
            );
        }
    }
    Ok(r)
}

/// File and position of queue offset `q` in a queue (the file may not exist).
/// Count the units from byte `from` on that are not all zero (written after the queue ended),
/// noting the first. The search for the first one skips the holes of a pre-allocated file.
fn count_torn_units(
    map: &[u8],
    from: usize,
    path: &Path,
    torn: &mut (u64, Option<(PathBuf, u64)>),
) {
    let units_end = map.len() - map.len() % UNIT_SIZE;
    let Some(first) = recovery::first_nonzero_from(map, from, path).filter(|&p| p < units_end)
    else {
        return;
    };
    let start = first - first % UNIT_SIZE;
    for (i, unit) in map
        .get(start..units_end)
        .unwrap_or(&[])
        .chunks_exact(UNIT_SIZE)
        .enumerate()
    {
        if unit.iter().any(|&b| b != 0) {
            torn.0 += 1;
            torn.1
                .get_or_insert_with(|| (path.to_path_buf(), (start + i * UNIT_SIZE) as u64));
        }
    }
}

fn unit_location(cq: &ConsumeQueue, q: u64) -> (PathBuf, u64) {
    let pos = q.saturating_mul(UNIT_SIZE as u64);
    let fs = cq.file_size.max(UNIT_SIZE as u64);
    let start = pos - pos % fs;
    (
        cq.dir.join(crate::format::filename::offset_to_name(start)),
        pos - start,
    )
}

// ---------------------------------------------------------------------------------------------
// The run.

/// Check the store. Read-only; safe on a live store (the tail may move while it is read).
pub fn verify(
    store: &Store,
    opts: &VerifyOptions,
    progress: Option<Progress<'_>>,
) -> Result<Report> {
    let mut sink = Sink::new(opts.max_per_code.max(1));
    let want_cl = opts.wants(Part::Commitlog);
    let want_cq = opts.wants(Part::ConsumeQueue);
    let want_ix = opts.wants(Part::Index);
    let want_conf = opts.wants(Part::Config);
    let scan = want_cl || want_cq || want_ix;

    // Index stream. Its files' structure checks and the config files run on one more thread
    // beside the recovery plan and the workers (neither needs the commitlog); the workers take
    // the commitlog in pieces, so the one that shares its core with it takes fewer.
    let index_stream = if scan && !store.index_files.is_empty() {
        open_index(store, want_ix, &mut sink)
    } else {
        None
    };
    let n_idx = match (&index_stream, want_ix) {
        (Some(ix), true) => ix.files.len(),
        _ => 0,
    };
    let check_index_files = || -> Vec<Vec<Finding>> {
        let Some(ix) = index_stream.as_ref().filter(|_| n_idx > 0) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(n_idx);
        for (j, f) in ix.files.iter().enumerate() {
            if opts.interrupted() {
                break;
            }
            let mut found = index_file_findings(ix, f);
            found.extend(entries_outside_commitlog(store, ix, f));
            out.push(found);
            if let Some(p) = progress {
                p(Phase::Index, j as u64 + 1, n_idx as u64);
            }
        }
        out
    };
    let side = || {
        let structure = if scan {
            check_index_files()
        } else {
            Vec::new()
        };
        let mut config = Sink::new(opts.max_per_code.max(1));
        if want_conf {
            config_findings(store, opts, &mut config);
        }
        if opts.wants(Part::Timer) && opts.topic.is_none() {
            for f in timer::timer_findings(store) {
                config.push(f);
            }
        }
        (structure, config)
    };
    std::thread::scope(|scope| {
        let side_thread = scope.spawn(side);
        verify_with_side(
            store,
            opts,
            progress,
            sink,
            index_stream.as_ref(),
            side_thread,
        )
    })
}

/// What the side thread found: each index file's structure findings, and the config files'.
type SideResult = (Vec<Vec<Finding>>, Sink);

/// [`verify`] after the index stream is open and its file checks have started on `side_thread`.
fn verify_with_side(
    store: &Store,
    opts: &VerifyOptions,
    progress: Option<Progress<'_>>,
    mut sink: Sink,
    index_stream: Option<&IndexStream>,
    side_thread: std::thread::ScopedJoinHandle<'_, SideResult>,
) -> Result<Report> {
    let want_cl = opts.wants(Part::Commitlog);
    let want_cq = opts.wants(Part::ConsumeQueue);
    let want_ix = opts.wants(Part::Index);
    let scan = want_cl || want_cq || want_ix;

    let prep = recovery::prepare(store)?;
    let segs = &store.commitlog.segments;
    let file_size = store.geometry.commitlog_file_size.value;

    if want_cl {
        layout_findings(store, file_size, &prep, &mut sink);
    }
    entry_findings(store, &prep, (want_cl, want_cq, want_ix), &mut sink);

    let maps = LazyMaps::new(segs);

    let mut cq_index: CqIndex<'_> = FastMap::default();
    for ((t, q), cq) in &store.queues {
        let end = prep.queue_ends.get(&(t.clone(), *q)).map_or(0, |e| e.0);
        cq_index
            .entry(t.as_str())
            .or_default()
            .insert(*q, (end, cq));
    }
    let start_offset = prep
        .start_index
        .and_then(|i| segs.get(i))
        .map_or(0, |s| s.start);
    let redispatch_from = match prep.mode {
        RecoveryMode::Abnormal => start_offset,
        RecoveryMode::Normal => prep
            .max_phy_offset_of_consume_queue
            .max(store.commitlog.min_offset()),
    };
    let mut walk_opts = prep.walk_options(store, opts.check_crc);
    walk_opts.check_crc = opts.check_crc;
    let total: u64 = segs.iter().map(|s| s.len).sum();
    let ctx = Ctx {
        store,
        opts,
        walk_opts,
        index: index_stream,
        cq_index: &cq_index,
        dups: DupWindow::new(opts.max_per_code),
        done: AtomicU64::new(0),
        total,
        progress,
        redispatch_from,
        track_queues: want_cq || want_cl,
        topic_queues: topic_queue_counts(store),
        cq_maps: Mutex::new(FastMap::default()),
    };

    let merged = Mutex::new(Merged {
        sink: Sink::new(opts.max_per_code.max(1)),
        walks: (0..segs.len()).map(|_| None).collect(),
        suspects: Vec::new(),
        gaps: Vec::new(),
        queues: HashMap::new(),
        idx: IndexTally::default(),
        records: 0,
        bytes: 0,
        data_end: 0,
        max_store_ts: 0,
        next: 0,
        pieces: {
            let mut at = 0;
            segs.iter()
                .enumerate()
                .map(|(i, seg)| {
                    let n = piece_count(seg.len, file_piece_size(opts.piece_size, segs, i));
                    at += n;
                    at - n..at
                })
                .collect()
        },
        pending: BTreeMap::new(),
    });
    let threads = rayon::current_num_threads().max(1);
    if scan {
        // Pieces in file order, so neighbouring ones are read at the same time (the duplicate
        // window and the merge buffer stay small).
        let pieces: Vec<(usize, usize)> = segs
            .iter()
            .enumerate()
            .flat_map(|(i, seg)| {
                let n = piece_count(seg.len, file_piece_size(opts.piece_size, segs, i));
                (0..n).map(move |j| (i, j))
            })
            .collect();
        let again = |i: usize, from: usize, before: Option<FileWalk>| {
            scan_piece(&ctx, i, Span::Rest(from, before))
        };
        let piece_maps = PieceMaps::new(segs, opts.piece_size);
        let next = AtomicUsize::new(0);
        rayon::scope(|s| {
            for _ in 0..threads {
                s.spawn(|_| loop {
                    if opts.interrupted() {
                        break;
                    }
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(i, j)) = pieces.get(k) else { break };
                    let r = scan_piece(&ctx, i, Span::Piece(j, &piece_maps));
                    piece_maps.done(i);
                    if let Ok(mut m) = merged.lock() {
                        m.take(k, r, &again);
                    }
                });
            }
        });
    }
    let (structure, config) = side_thread
        .join()
        .map_err(|_| crate::format::Error::layout(&store.root, "a verify worker panicked"))?;
    if opts.interrupted() {
        return Err(crate::format::Error::layout(
            &store.root,
            "verify interrupted",
        ));
    }
    let mut merged = merged
        .into_inner()
        .map_err(|_| crate::format::Error::layout(&store.root, "a verify worker panicked"))?;
    let dups = ctx.dups.finish();

    mark_blanks_in_place(&mut merged.walks);

    let plan = if scan {
        let refs: Vec<Option<&FileWalk>> = merged.walks.iter().map(Option::as_ref).collect();
        Some(recovery::finish(store, &prep, &refs, opts.check_crc)?)
    } else {
        None
    };

    if want_cl {
        walk_findings(store, &merged.walks, plan.as_ref(), opts, &mut sink);
        dup_findings(store, &maps, &dups, &mut sink, opts);
        marker_findings(store, &prep, plan.as_ref(), &mut sink);
        checkpoint_findings(store, &prep, &merged, index_stream, &mut sink);
    }
    let merged_sink = std::mem::take(&mut merged.sink);
    sink.absorb(merged_sink);

    // Consume queues: each checked on its own, then the headers judged with what all of them
    // and the walk saw, then the findings of each.
    let mut cq_units = 0u64;
    let mut queues_checked = 0u64;
    let mut checked: Vec<(&ConsumeQueue, CqResult)> = Vec::new();
    if want_cq {
        let cq_maps = std::mem::take(&mut *ctx.cq_maps.lock().unwrap_or_else(|e| e.into_inner()));
        let cctx = CqCtx {
            store,
            opts,
            maps: &maps,
            data_end: merged.data_end,
            cl_min: store.commitlog.min_offset(),
            plan: plan.as_ref(),
            cq_maps: Some(&cq_maps),
        };
        let list: Vec<&ConsumeQueue> = store
            .queues
            .values()
            .filter(|q| opts.in_topic(&q.topic))
            .collect();
        let n = list.len() as u64;
        let done = AtomicU64::new(0);
        use rayon::prelude::*;
        let results: Vec<(usize, Result<CqResult>)> = list
            .par_iter()
            .enumerate()
            .map(|(i, cq)| {
                if opts.interrupted() {
                    return (
                        i,
                        Err(crate::format::Error::layout(
                            &store.root,
                            "verify interrupted",
                        )),
                    );
                }
                let r = check_queue(
                    &cctx,
                    cq,
                    merged.queues.get(&(cq.topic.clone(), cq.queue_id)),
                );
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(p) = progress {
                    p(Phase::ConsumeQueues, d, n);
                }
                (i, r)
            })
            .collect();
        for (i, r) in results {
            let Some(cq) = list.get(i) else { continue };
            checked.push((cq, r?));
        }
    }
    let mut claims = Vec::new();
    let mut claim_findings = Vec::new();
    for (_, r) in checked.iter_mut() {
        for (c, f) in std::mem::take(&mut r.claims) {
            claims.push(c);
            claim_findings.push(f);
        }
    }
    let lone: Vec<(u64, QueueSlot)> = merged
        .queues
        .iter()
        .filter(|((t, q), run)| run.count == 1 && !store.queues.contains_key(&(t.clone(), *q)))
        .map(|((t, q), run)| {
            (
                run.first_pos,
                QueueSlot {
                    topic: t.clone(),
                    queue_id: *q,
                    queue_offset: run.first_q,
                },
            )
        })
        .collect();
    let ends: Vec<headers::QueueEnds> = merged
        .queues
        .iter()
        .map(|((t, q), run)| headers::QueueEnds {
            topic: t.clone(),
            queue_id: *q,
            first_q: run.first_q,
            first_offset: run.first_pos,
            next_q: run.next_q,
            last_offset: run.last_pos,
        })
        .collect();
    let judgement = headers::judge(&merged.suspects, &claims, &merged.gaps, &lone, &ends);
    if want_cl {
        header_findings(store, &judgement, &mut sink);
        gap_findings(store, &merged.gaps, &judgement, &mut sink);
    }
    // Breaks in queue offset sequences that no damaged header explains: the broker's dispatch
    // misplaces (or, for a repeat, skips) the units from there on.
    let queue_breaks: Vec<u64> = merged
        .gaps
        .iter()
        .enumerate()
        .filter(|(i, _)| !judgement.explained_gaps.contains(i))
        .map(|(_, g)| g.offset)
        .collect();
    for (i, f) in claim_findings.into_iter().enumerate() {
        if !judgement.accepted_claims.contains(&i) {
            sink.push(f);
        }
    }
    // Index entries of a record whose topic changed do not hash to it: one damage, one finding.
    sink.list.retain(|f| {
        !(matches!(f.code, "index.dangling_entry" | "index.missing_key")
            && f.record.is_some_and(|o| judgement.is_damaged(o)))
    });
    // What damaged records were counted as in the queues they name.
    let mut miscounted: HashMap<(String, i32), Vec<i64>> = HashMap::new();
    for d in &judgement.damaged {
        if d.field != headers::Field::PhysicalOffset {
            let v = miscounted
                .entry((d.named.topic.clone(), d.named.queue_id))
                .or_default();
            if !v.contains(&d.named.queue_offset) {
                v.push(d.named.queue_offset);
            }
        }
    }
    let corrected = |key: &(String, i32), run: Option<&QueueRun>| -> Option<QueueRun> {
        let mut run = run?.clone();
        for &q in miscounted.get(key).map(Vec::as_slice).unwrap_or(&[]) {
            run.count = run.count.saturating_sub(1);
            if q >= 0 && q as u64 >= run.cq_end {
                run.beyond = run.beyond.saturating_sub(1);
            }
        }
        (run.count > 0).then_some(run)
    };
    if want_cq {
        let mut seen_queues = std::collections::HashSet::new();
        for (cq, r) in checked {
            queues_checked += 1;
            cq_units += r.units;
            let key = (cq.topic.clone(), cq.queue_id);
            let run = corrected(&key, merged.queues.get(&key));
            seen_queues.insert(key);
            missing_findings(cq, run.as_ref(), &r, redispatch_from, opts, &mut sink);
            for f in r.findings {
                sink.push(f);
            }
        }
        // Queues with records but no consume queue folder at all.
        let mut orphan: Vec<(&(String, i32), &QueueRun)> = merged
            .queues
            .iter()
            .filter(|(k, _)| !seen_queues.contains(*k))
            .collect();
        orphan.sort_by(|a, b| a.0.cmp(b.0));
        for ((t, q), run) in orphan {
            let key = (t.clone(), *q);
            let Some(run) = corrected(&key, Some(run)) else {
                continue;
            };
            let dir = store
                .root
                .join(paths::CONSUMEQUEUE)
                .join(t)
                .join(q.to_string());
            let cq = ConsumeQueue {
                topic: t.clone(),
                queue_id: *q,
                dir,
                files: Vec::new(),
                foreign: Vec::new(),
                odd: Vec::new(),
                file_size: store.geometry.cq_file_size(),
            };
            missing_findings(
                &cq,
                Some(&run),
                &CqResult::default(),
                redispatch_from,
                opts,
                &mut sink,
            );
        }
    }

    // Index files: structure and headers.
    let mut index_files = 0u64;
    if want_ix {
        index_files = store.index_files.len() as u64;
        index_findings(store, index_stream, &merged, structure, &mut sink);
    }

    sink.absorb(config);

    let mut findings = std::mem::take(&mut sink.list);
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.file.cmp(&b.file))
            .then_with(|| a.offset.cmp(&b.offset))
    });
    let mut counts = sink.dropped;
    for f in &findings {
        counts[sev_index(f.severity)] += 1;
    }
    let not_listed = sink.dropped.iter().sum();
    let healthy = counts[2] == 0 && !(opts.strict && counts[1] > 0);
    let parts = Part::ALL
        .iter()
        .filter(|p| opts.wants(**p))
        .map(|p| p.name())
        .collect();
    let summary = Summary {
        errors: counts[2],
        warnings: counts[1],
        infos: counts[0],
        messages: merged.records,
        bytes: merged.bytes,
        commitlog_files: segs.len() as u64,
        consume_queues: queues_checked,
        cq_units,
        index_files,
        index_entries_checked: merged.idx.checked,
        duplicate_uniq_keys: dups.found,
        findings_not_listed: not_listed,
        healthy,
        strict: opts.strict,
        crc_checked: opts.check_crc,
        parts,
        topic: opts.topic.clone(),
        sample: opts.sample.max(1),
        store_version: format!(
            "{}{}",
            prep.version.version,
            if prep.version.from_evidence {
                ""
            } else {
                " (assumed)"
            }
        ),
        clean_shutdown: !store.abort.present,
        refuses_to_start: prep.refuses_to_start.clone(),
        recovery_mode: plan.as_ref().map(|p| p.mode),
        recovery_cut: plan.as_ref().and_then(|p| p.cut.as_ref()).map(|c| c.offset),
        recovery_drops_messages: plan.as_ref().map_or(0, |p| p.messages_dropped()),
        duplicate_window: format!(
            "every repeat of a UNIQ_KEY within {DUP_WINDOW} keyed records of its first copy is \
             found (re-puts by the broker excluded){}",
            if dups.forgotten > 0 {
                format!("; {} older keys were forgotten", dups.forgotten)
            } else {
                String::new()
            }
        ),
    };
    Ok(Report {
        findings,
        summary,
        recovery: plan,
        damaged_headers: judgement.damaged,
        walks: merged.walks,
        queue_breaks: {
            let mut v = queue_breaks;
            v.sort_unstable();
            v
        },
    })
}

/// One `commitlog.bad_header` finding per damaged field.
fn header_findings(store: &Store, j: &headers::Judgement, sink: &mut Sink) {
    for d in &j.damaged {
        let Some(seg) = store.commitlog.segment_for(d.offset) else {
            continue;
        };
        let proven = match &d.fix {
            Some(p) => format!("; it was {}: {}", p.value, p.evidence),
            None => "; nothing in the store proves what it was".to_string(),
        };
        let action = match d.field {
            headers::Field::PhysicalOffset => format!(
                "the broker does not check it: units and index entries dispatched from this \
                 record point at offset {}, and its offset message id names that offset",
                d.found
            ),
            headers::Field::SysFlag => "the broker does not check it: its transaction type \
                gets no unit on a dispatch, and the units after it in its queue are misplaced"
                .to_string(),
            headers::Field::QueueOffset => format!(
                "the broker does not check it: a dispatch puts this record at queue offset {} of \
                 {}/{}, and misplaces the units after it",
                d.found, d.named.topic, d.named.queue_id
            ),
            headers::Field::Topic | headers::Field::QueueId => {
                match crate::format::layout::check_topic(&d.named.topic)
                    .and_then(|_| crate::format::layout::check_queue_id(d.named.queue_id))
                {
                    Ok(()) => format!(
                        "the broker does not check it: a dispatch puts this record into \
                         consumequeue/{}/{}/ at queue offset {}, not into its own queue{}",
                        d.named.topic,
                        d.named.queue_id,
                        d.named.queue_offset,
                        if store
                            .queues
                            .contains_key(&(d.named.topic.clone(), d.named.queue_id))
                        {
                            ""
                        } else {
                            " (a queue the store never had)"
                        }
                    ),
                    Err(e) => format!(
                        "the broker does not check it: a dispatch makes a consume queue path of \
                         it ({e})"
                    ),
                }
            }
        };
        sink.push(
            Finding::new(
                "commitlog.bad_header",
                &seg.path,
                d.offset - seg.start,
                format!("{}: {}{proven}", d.title(), d.why),
            )
            .about_record(d.offset)
            .with_action(action),
        );
    }
}

/// Breaks in queue offset sequences that no damaged header explains.
fn gap_findings(store: &Store, gaps: &[Gap], j: &headers::Judgement, sink: &mut Sink) {
    for (i, g) in gaps.iter().enumerate() {
        if j.explained_gaps.contains(&i) {
            continue;
        }
        let Some(seg) = store.commitlog.segment_for(g.offset) else {
            continue;
        };
        let (code, what) = if g.found > g.expected {
            ("commitlog.queue_offset_gap", "jumps")
        } else {
            ("commitlog.queue_offset_repeat", "goes back")
        };
        sink.push(
            Finding::new(
                code,
                &seg.path,
                g.offset - seg.start,
                format!(
                    "queue {}/{}: QUEUEOFFSET {what} from {} to {} at commitlog offset {}",
                    g.topic,
                    g.queue_id,
                    g.expected.wrapping_sub(1),
                    g.found,
                    g.offset
                ),
            )
            .about_record(g.offset)
            .with_action(if g.found > g.expected {
                "the broker does not check it; its consume queue writer appends at its own \
                 position, so this and later units of the queue are misplaced"
            } else {
                "the broker does not check it; its consume queue writer takes this record for a \
                 repeat and gives it no unit (or, at queue offset 0, appends it at its own \
                 position): consumers miss it or read the queue misplaced"
            }),
        );
    }
}

/// Queue count per topic in topics.json (`max(readQueueNums, writeQueueNums)`); empty when it
/// does not load.
fn topic_queue_counts(store: &Store) -> FastMap<String, i32> {
    match crate::format::config::load::<TopicConfigs>(&store.config_dir()) {
        Ok(l) => l
            .value
            .iter()
            .map(|c| {
                (
                    c.topic_name.clone(),
                    c.read_queue_nums.max(c.write_queue_nums),
                )
            })
            .collect(),
        Err(_) => FastMap::default(),
    }
}

/// `NoBlank` problems for files whose data ends without a blank record while a later file holds
/// data (pre-allocated, all-zero later files are what the broker leaves after a crash).
fn mark_blanks_in_place(walks: &mut [Option<FileWalk>]) {
    let has_data = |w: &Option<FileWalk>| {
        w.as_ref()
            .is_some_and(|w| w.records + w.after_records > 0 || !w.problems.is_empty())
    };
    let n = walks.len();
    for i in 0..n {
        let later_data = walks.iter().skip(i + 1).any(has_data);
        if let Some(Some(w)) = walks.get_mut(i) {
            if later_data && w.stop != StopReason::Blank && !w.stop.is_damage() {
                let pos = w.stop_pos;
                if !w
                    .problems
                    .iter()
                    .any(|p| matches!(p, WalkProblem::NoBlank { .. }))
                {
                    w.problems.push(WalkProblem::NoBlank { pos });
                }
            }
        }
    }
}

/// The loader's answer to an entry of a mapped file folder that is not a regular file: 4.9
/// compares every entry's length with the file size and refuses to start; 5.x skips folders.
fn loader_action(e: &Entry, v5: bool) -> &'static str {
    if v5 && e.kind == Kind::Dir {
        "5.x skips folders here; the data a file of this name would hold is missing"
    } else {
        "MappedFileQueue.load fails on it (its length is not the file size): the broker does not start"
    }
}

/// Entries of the store that are not what the broker can load: never opened, reported.
fn entry_findings(store: &Store, prep: &Prepared, parts: (bool, bool, bool), sink: &mut Sink) {
    let (cl, cq, ix) = parts;
    let v5 = prep.version.version == BrokerVersion::V5;
    let what = |e: &Entry| {
        format!(
            "{}{}",
            if e.symlink { "a symlink to " } else { "" },
            e.kind.describe()
        )
    };
    if cl {
        for e in &store.commitlog.odd {
            sink.push(
                Finding::new(
                    "commitlog.not_a_file",
                    &e.path,
                    0,
                    format!(
                        "{} in commitlog/, where only commitlog files belong",
                        what(e)
                    ),
                )
                .with_action(loader_action(e, v5)),
            );
        }
        for name in [paths::CHECKPOINT, paths::ABORT, paths::LOCK] {
            let e = crate::format::entry::probe(&store.root.join(name));
            if !matches!(e.kind, Kind::File { .. } | Kind::Missing) {
                sink.push(
                    Finding::new(
                        "store.not_a_file",
                        &e.path,
                        0,
                        format!("{name} is {}", what(&e)),
                    )
                    .with_action(match name {
                        paths::CHECKPOINT => "the broker cannot map it: it does not start",
                        paths::ABORT => {
                            "the broker takes it for an unclean shutdown and fails to replace it"
                        }
                        _ => "the broker cannot open it to take its lock: it does not start",
                    }),
                );
            }
        }
    }
    if cq {
        for q in store.queues.values() {
            for p in &q.foreign {
                sink.push(
                    Finding::new(
                        "consumequeue.foreign_file",
                        p,
                        0,
                        format!(
                            "a file in the queue folder of {}/{} whose name is not a 20-digit offset",
                            q.topic, q.queue_id
                        ),
                    )
                    .with_action("Long.parseLong fails on its name: the broker does not start"),
                );
            }
            for e in &q.odd {
                sink.push(
                    Finding::new(
                        "consumequeue.not_a_file",
                        &e.path,
                        0,
                        format!(
                            "{} in the queue folder of {}/{}",
                            what(e),
                            q.topic,
                            q.queue_id
                        ),
                    )
                    .with_action(loader_action(e, v5)),
                );
            }
        }
        for e in &store.consumequeue_odd {
            sink.push(
                Finding::new(
                    "consumequeue.foreign_entry",
                    &e.path,
                    0,
                    format!("{} under consumequeue/ that is not a queue folder", what(e)),
                )
                .with_action("the broker skips it"),
            );
        }
        for (p, e) in &store.bad_topic_dirs {
            sink.push(
                Finding::new(
                    "consumequeue.bad_topic_dir",
                    p,
                    0,
                    format!("the folder name is no topic the broker accepts: {e}"),
                )
                .with_action("the broker loads it as a topic; no client can name it"),
            );
        }
    }
    if ix {
        for e in &store.index_odd {
            sink.push(
                Finding::new(
                    "index.not_a_file",
                    &e.path,
                    0,
                    format!("{} in index/, where only index files belong", what(e)),
                )
                .with_action("IndexService.load cannot open it: the broker does not start"),
            );
        }
    }
}

fn layout_findings(store: &Store, file_size: u64, prep: &Prepared, sink: &mut Sink) {
    use crate::format::commitlog::read::LayoutIssue;
    let refuse = "MappedFileQueue.load fails: the broker does not start";
    for issue in store.commitlog.layout_issues(file_size) {
        match issue {
            LayoutIssue::Foreign { path } => sink.push(
                Finding::new(
                    "commitlog.foreign_file",
                    &path,
                    0,
                    "a file in commitlog/ whose name is not a 20-digit offset".to_string(),
                )
                .with_action(refuse),
            ),
            LayoutIssue::OddSize {
                path,
                len,
                expected,
            } => {
                let last_empty = prep.version.version == BrokerVersion::V5
                    && len == 0
                    && store
                        .commitlog
                        .segments
                        .last()
                        .is_some_and(|s| s.path == path);
                sink.push(
                    Finding::new(
                        "commitlog.file_size",
                        &path,
                        len.min(expected),
                        format!("commitlog file is {len} bytes, expected {expected}"),
                    )
                    .with_action(if last_empty {
                        "5.x deletes an empty last file before loading"
                    } else {
                        refuse
                    }),
                );
            }
            LayoutIssue::Gap { from, to } => {
                let path = store
                    .commitlog
                    .segments
                    .iter()
                    .find(|s| s.start == to)
                    .map_or_else(|| store.commitlog.dir.clone(), |s| s.path.clone());
                sink.push(
                    Finding::new(
                        "commitlog.gap",
                        &path,
                        0,
                        format!("no commitlog file holds offsets {from}..{to}"),
                    )
                    .with_action("checkSelf only logs it; messages in the gap are lost"),
                );
            }
            LayoutIssue::Overlap { first, second } => sink.push(Finding::new(
                "commitlog.overlap",
                &second,
                0,
                format!("starts before {} ends", first.display()),
            )),
        }
    }
    if file_size > 0 {
        for s in &store.commitlog.segments {
            if s.start % file_size != 0 {
                sink.push(Finding::new(
                    "commitlog.misnamed",
                    &s.path,
                    0,
                    format!(
                        "start offset {} is not a multiple of the file size {file_size}",
                        s.start
                    ),
                ));
            }
        }
    }
}

fn open_index(store: &Store, report: bool, sink: &mut Sink) -> Option<IndexStream> {
    let g = &store.geometry;
    let geometry = IndexGeometry::new(g.index_slots.value, g.index_entries.value);
    let dir = store.root.join(paths::INDEX);
    if geometry.validate().is_err() {
        if report {
            sink.push(Finding::new(
                "index.geometry",
                &dir,
                0,
                format!("index geometry {geometry} is not possible; index entries not checked"),
            ));
        }
        return None;
    }
    let mut files = Vec::new();
    let mut unreadable = Vec::new();
    let mut mismatched = 0usize;
    for p in &store.index_files {
        let opened =
            Mapped::open(p).and_then(|m| IndexFile::new(m, geometry).map_err(|e| e.in_file(p, 0)));
        match opened {
            Ok(f) => {
                let used = (f.header().effective_index_count().max(1) as u32).min(geometry.entries);
                files.push(IdxFile {
                    path: p.clone(),
                    file: f,
                    used,
                });
            }
            Err(e) => {
                mismatched += 1;
                if let Ok(m) = Mapped::open(p) {
                    if let Ok(h) = IndexHeader::from_bytes(&m) {
                        unreadable.push((h.begin_phy_offset, h.end_phy_offset));
                    }
                }
                if report {
                    sink.push(
                        Finding::new(
                            "index.bad_file",
                            p,
                            0,
                            format!("does not open as an index file of {geometry}: {e}"),
                        )
                        .with_action("IndexService.load maps it with the configured size anyway; lookups in it read garbage"),
                    );
                }
            }
        }
    }
    if mismatched > 0 && matches!(g.index_slots.source, Source::Default) && report {
        sink.push(Finding::new(
            "index.geometry",
            &dir,
            0,
            format!(
                "{mismatched} index files do not match the default geometry {geometry}; pass \
                 --index-slots/--index-entries or --broker-conf"
            ),
        ));
    }
    let mut first_offset = None;
    let mut coverage_end = None;
    for f in &files {
        if f.used > 1 {
            if let Ok(e) = f.file.entry(1) {
                first_offset =
                    Some(first_offset.map_or(e.phy_offset, |o: i64| o.min(e.phy_offset)));
            }
            if let Ok(e) = f.file.entry(f.used - 1) {
                coverage_end =
                    Some(coverage_end.map_or(e.phy_offset, |o: i64| o.max(e.phy_offset)));
            }
        }
    }
    Some(IndexStream {
        files,
        geometry,
        unreadable,
        coverage_end,
        first_offset,
    })
}

/// The broker's action for a commitlog problem at `pos` of file `i`.
fn commitlog_action(
    store: &Store,
    plan: Option<&RecoveryPlan>,
    i: usize,
    pos: u64,
    on_chain: bool,
    at_record: bool,
) -> Option<String> {
    let plan = plan?;
    let seg = store.commitlog.segments.get(i)?;
    let abs = seg.start.saturating_add(pos);
    let start = plan.start_file.as_ref()?;
    let mode = match plan.mode {
        RecoveryMode::Normal => "normal",
        RecoveryMode::Abnormal => "abnormal",
    };
    if seg.start < start.start {
        return Some(format!(
            "outside the {mode} recovery scan (it starts at {}): the broker keeps this file as it \
             is and serves its records without checking them",
            start.path.display()
        ));
    }
    let cut = plan.cut.as_ref()?;
    if on_chain && abs == cut.offset {
        let mut s = format!(
            "{mode} recovery truncates the commitlog here (offset {abs}): {}{} later messages ({} bytes) would be dropped",
            if at_record { "this record and " } else { "" },
            cut.messages_dropped, cut.bytes_dropped
        );
        if !plan.deleted_files.is_empty() {
            s.push_str(&format!(
                ", {} later files deleted",
                plan.deleted_files.len()
            ));
        }
        if !plan.queue_truncations.is_empty() {
            let units: u64 = plan.queue_truncations.iter().map(|q| q.units).sum();
            s.push_str(&format!(", {units} consume queue units dropped"));
        }
        return Some(s);
    }
    if abs > cut.offset {
        return Some(format!(
            "after the recovery cut at offset {}: dropped with everything after it",
            cut.offset
        ));
    }
    Some("the recovery scan passes over it".to_string())
}

fn walk_findings(
    store: &Store,
    walks: &[Option<FileWalk>],
    plan: Option<&RecoveryPlan>,
    opts: &VerifyOptions,
    sink: &mut Sink,
) {
    for (i, w) in walks.iter().enumerate() {
        let Some(w) = w else { continue };
        let path = &w.path;
        for p in &w.problems {
            let pos = p.pos();
            let abs = w.start.saturating_add(pos);
            let no_blank = matches!(p, WalkProblem::NoBlank { .. });
            let first_stop = pos == w.stop_pos && (w.stop.is_damage() || no_blank);
            let at_record = !no_blank && !matches!(p, WalkProblem::ZeroHole { .. });
            let action = commitlog_action(store, plan, i, pos, first_stop, at_record);
            let f = match p {
                WalkProblem::BadRecord { detail, .. } => Finding::new(
                    "commitlog.bad_record",
                    path,
                    pos,
                    format!("record at commitlog offset {abs} does not parse: {detail}"),
                ),
                WalkProblem::BadDelay { value, .. } => Finding::new(
                    "commitlog.bad_delay",
                    path,
                    pos,
                    format!(
                        "{SCHEDULE_TOPIC} record at commitlog offset {abs} has DELAY {value:?}; Java rejects the record"
                    ),
                ),
                WalkProblem::CrcMismatch {
                    stored, computed, ..
                } => Finding::new(
                    "commitlog.crc_mismatch",
                    path,
                    pos,
                    format!(
                        "record at commitlog offset {abs}: BODYCRC is {stored} but the body's CRC (masked to 31 bits) is {computed}"
                    ),
                ),
                WalkProblem::ZeroHole { len, .. } => Finding::new(
                    "commitlog.hole",
                    path,
                    pos,
                    format!(
                        "{len} zero bytes at commitlog offset {abs} where a record should start; records follow"
                    ),
                ),
                WalkProblem::BlankSize {
                    found, expected, ..
                } => Finding::new(
                    "commitlog.blank_size",
                    path,
                    pos,
                    format!("blank record says {found} bytes left, the file has {expected}"),
                ),
                WalkProblem::DirtyTail { end, stale, .. } => {
                    if opts.strict && *stale > 0 {
                        sink.push(
                            Finding::new(
                                "commitlog.stale_records",
                                path,
                                pos,
                                format!(
                                    "{stale} records older than the end of the data lie after it (left behind by an earlier truncation)"
                                ),
                            )
                            .with_action(
                                "never read; if new data ever ends exactly at one of them, a later recovery would take them for live records",
                            ),
                        );
                    }
                    let no_data = w.stop_pos == 0 && w.records == 0 && w.after_records == 0;
                    let f = Finding::new(
                        "commitlog.dirty_tail",
                        path,
                        pos,
                        if no_data {
                            format!(
                                "the file holds no record, yet {} of its bytes are not zero (up \
                                 to position {end}): they are not commitlog data",
                                end.saturating_sub(pos)
                            )
                        } else {
                            format!(
                                "{} bytes after the end of the data are not zero (up to position {end})",
                                end.saturating_sub(pos)
                            )
                        },
                    );
                    if no_data {
                        f.with_severity(Severity::Error)
                    } else {
                        f
                    }
                }
                WalkProblem::NoBlank { .. } => Finding::new(
                    "commitlog.no_blank",
                    path,
                    pos,
                    format!(
                        "the data ends at commitlog offset {abs} without a blank record, but a later file exists"
                    ),
                ),
            };
            let f = match (p, action) {
                (WalkProblem::DirtyTail { .. }, _) => {
                    f.with_action("recovery ends the data before it; new messages overwrite it")
                }
                (WalkProblem::BlankSize { .. }, _) => f.with_action(
                    "the broker does not check a blank's size; it moves to the next file",
                ),
                (_, Some(a)) => f.with_action(a),
                (_, None) => f,
            };
            sink.push(f);
        }
        if w.problems_not_listed > 0 {
            sink.push(Finding::new(
                "commitlog.bad_record",
                path,
                w.stop_pos,
                format!(
                    "{} more problems in this file not listed",
                    w.problems_not_listed
                ),
            ));
        }
    }
}

fn dup_findings(
    store: &Store,
    maps: &LazyMaps<'_>,
    dups: &dups::Sealed,
    sink: &mut Sink,
    opts: &VerifyOptions,
) {
    let cctx = CqCtx {
        store,
        opts,
        maps,
        data_end: u64::MAX,
        cl_min: 0,
        plan: None,
        cq_maps: None,
    };
    let uniq = |off: u64| -> Option<String> {
        record_at(&cctx, off)
            .ok()
            .and_then(|m| m.property(prop::UNIQ_KEY).map(|u| u.into_owned()))
    };
    for &(first, dup) in &dups.pairs {
        let (Some(a), Some(b)) = (uniq(first), uniq(dup)) else {
            continue;
        };
        if a != b {
            continue;
        }
        if let Some(seg) = store.commitlog.segment_for(dup) {
            sink.push(Finding::new(
                "commitlog.duplicate_uniq_key",
                &seg.path,
                dup - seg.start,
                format!(
                    "UNIQ_KEY {b} at commitlog offset {dup} is also stored at offset {first} \
                     (a producer retry, or a message sent again after a failover or recovery)"
                ),
            ));
        }
    }
}

fn marker_findings(store: &Store, prep: &Prepared, plan: Option<&RecoveryPlan>, sink: &mut Sink) {
    let live = match crate::engine::store::safedir::liveness(&store.root) {
        Ok(crate::engine::store::safedir::Liveness::LockHeld { pid }) => {
            Some(format!("process {pid} holds the lock file"))
        }
        Ok(crate::engine::store::safedir::Liveness::AbortPidAlive { pid }) => {
            Some(format!("process {pid} named in abort is running"))
        }
        _ => None,
    };
    if let Some(who) = live {
        sink.push(Finding::new(
            "store.live",
            &store.root.join(paths::LOCK),
            0,
            format!(
                "{who}: a broker seems to be writing this store; verify only reads, but the tail \
                 may move while it is read (findings at the end of the data may be transient)"
            ),
        ));
    }
    if !store.abort.present {
        return;
    }
    let path = store.root.join(paths::ABORT);
    let action = plan.map(|p| {
        let mut s = format!(
            "abnormal recovery: scan from {}",
            p.start_file
                .as_ref()
                .map_or_else(|| "nothing".to_string(), |f| f.path.display().to_string())
        );
        if let Some(c) = &p.cut {
            s.push_str(&format!(
                ", cut at offset {} ({} messages dropped)",
                c.offset, c.messages_dropped
            ));
        }
        if !p.index_files_deleted.is_empty() {
            s.push_str(&format!(
                ", delete {} index files",
                p.index_files_deleted.len()
            ));
        }
        if p.redispatched_messages > 0 {
            s.push_str(&format!(
                ", dispatch {} messages again",
                p.redispatched_messages
            ));
        }
        s
    });
    let mut f = Finding::new(
        "store.abort_present",
        &path,
        0,
        format!(
            "the abort file exists{}: the last shutdown was unclean, or a broker is running now \
             (then the tail may move while this runs)",
            store
                .abort
                .pid
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default()
        ),
    );
    if let Some(a) = action {
        f = f.with_action(a);
    }
    sink.push(f);
    for d in &prep.index_files_deleted {
        let lost = plan.map_or(0, |p| p.index_records_lost);
        sink.push(
            Finding::new(
                "index.dropped_on_restart",
                &d.path,
                0,
                format!(
                    "endTimestamp {} is after the checkpoint's indexMsgTimestamp: an unclean start deletes this file ({} entries)",
                    d.end_timestamp, d.entries
                ),
            )
            .with_action(format!(
                "deleted on the next start; records from the recovery scan on are indexed again{}",
                if lost > 0 {
                    format!(", {lost} earlier records lose their index entries")
                } else {
                    String::new()
                }
            )),
        );
    }
}

fn checkpoint_findings(
    store: &Store,
    prep: &Prepared,
    merged: &Merged,
    ix: Option<&IndexStream>,
    sink: &mut Sink,
) {
    let path = store.checkpoint_path();
    if let Some(e) = &prep.checkpoint_error {
        sink.push(
            Finding::new("checkpoint.bad_file", &path, 0, e.clone())
                .with_action("StoreCheckpoint maps it anyway; times read as garbage or 0"),
        );
        return;
    }
    let Some(c): Option<Checkpoint> = prep.checkpoint else {
        if !store.commitlog.segments.is_empty() {
            sink.push(
                Finding::new(
                    "checkpoint.missing",
                    &path,
                    0,
                    "no checkpoint file".to_string(),
                )
                .with_action("the broker starts with all checkpoint times 0"),
            );
        }
        return;
    };
    let max = merged.max_store_ts;
    if merged.records > 0 {
        for (name, v, off) in [
            ("physicMsgTimestamp", c.physic_msg_timestamp, 0u64),
            ("logicsMsgTimestamp", c.logics_msg_timestamp, 8),
        ] {
            if v > max {
                sink.push(
                    Finding::new(
                        "checkpoint.ahead",
                        &path,
                        off,
                        format!(
                            "{name} {v} is later than the newest record's store time {max}: the log lost its tail after the checkpoint was written"
                        ),
                    )
                    .with_action("abnormal recovery may start its scan too late to rebuild what the queues lost"),
                );
            }
        }
    }
    if let Some(ix) = ix {
        let full_end = ix
            .files
            .iter()
            .filter(|f| f.used >= ix.geometry.entries)
            .map(|f| f.file.header().end_timestamp)
            .max();
        let bad = match full_end {
            Some(e) => c.index_msg_timestamp > e,
            None => false,
        };
        if bad {
            sink.push(Finding::new(
                "checkpoint.ahead",
                &path,
                16,
                format!(
                    "indexMsgTimestamp {} is later than the endTimestamp of the newest full index file",
                    c.index_msg_timestamp
                ),
            ));
        }
    }
    if c.confirm_phy_offset > 0 && merged.records > 0 {
        let o = c.confirm_phy_offset as u64;
        let boundary = o == merged.data_end || {
            store.commitlog.segment_for(o).is_some_and(|s| {
                Mapped::open(&s.path).is_ok_and(|m| {
                    matches!(
                        parse_record(&m, (o - s.start) as usize, s.start, false),
                        Ok(Record::Message(_))
                    )
                })
            })
        };
        if o > merged.data_end {
            sink.push(Finding::new(
                "checkpoint.ahead",
                &path,
                32,
                format!(
                    "confirmPhyOffset {o} is past the commitlog's end of data {}",
                    merged.data_end
                ),
            ));
        } else if !boundary {
            sink.push(Finding::new(
                "checkpoint.confirm_offset",
                &path,
                32,
                format!("confirmPhyOffset {o} is not on a record boundary"),
            ));
        }
    }
}

fn missing_findings(
    cq: &ConsumeQueue,
    run: Option<&QueueRun>,
    r: &CqResult,
    redispatch_from: u64,
    opts: &VerifyOptions,
    sink: &mut Sink,
) {
    let Some(run) = run else { return };
    let name = format!("{}/{}", cq.topic, cq.queue_id);
    let cq_end = run.cq_end;
    let below = run.count - run.beyond;
    let matched = run.matched + r.matched;
    if opts.sample.max(1) == 1 && below > matched {
        let missing = below - matched;
        let lo = run.first_q.max(0) as u64;
        let hi = (run.next_q.max(0) as u64).min(cq_end);
        let first = if run.ranges_overflow || r.ranges_overflow {
            None
        } else {
            let mut all = run.ranges.clone();
            all.extend_from_slice(&r.ranges);
            first_unmatched(&normalized(all), lo, hi)
        };
        let (path, pos) = unit_location(cq, first.unwrap_or(lo));
        sink.push(
            Finding::new(
                "consumequeue.missing_unit",
                &path,
                pos,
                format!(
                    "{name}: {missing} records below the queue's end ({cq_end}) have no unit pointing at them{}",
                    first
                        .map(|q| format!("; the first at queue offset {q}"))
                        .unwrap_or_default()
                ),
            )
            .with_action(format!(
                "never dispatched again: the broker re-dispatches only from offset {redispatch_from}; \
                 consumers of {name} cannot read these messages"
            )),
        );
    }
    if run.beyond > 0 {
        let (first_pos, first_q) = run.first_beyond.unwrap_or((0, 0));
        let (path, pos) = unit_location(cq, first_q.max(0) as u64);
        let lag = first_pos >= redispatch_from;
        let msg = format!(
            "{name}: {} records (queue offsets {first_q}.., from commitlog offset {first_pos}) are past the queue's end {cq_end}",
            run.beyond
        );
        if lag {
            sink.push(
                Finding::new("consumequeue.lag", &path, pos, msg)
                    .with_action("dispatch lag: the broker dispatches them on its next start"),
            );
        } else {
            sink.push(
                Finding::new("consumequeue.missing_unit", &path, pos, msg).with_action(format!(
                    "never dispatched again: the broker re-dispatches only from offset \
                     {redispatch_from}"
                )),
            );
        }
    }
}

/// The structure of one index file (`check_file`: header, slots, chains, zeros).
fn index_file_findings(ix: &IndexStream, f: &IdxFile) -> Vec<Finding> {
    let bytes = f.file.bytes();
    check_file_with(bytes, ix.geometry, |from| {
        recovery::first_nonzero_from(bytes, from, &f.path)
    })
    .into_iter()
    .map(|p| {
        let code = if p.offset < 40 {
            "index.header_mismatch"
        } else {
            "index.bad_chain"
        };
        Finding::new(code, &f.path, p.offset, p.what)
            .with_action("the broker trusts the file: lookups through this part miss or loop")
    })
    .collect()
}

/// Entries of one index file outside the commitlog: below its first offset (expired) or past
/// the end of its last file.
fn entries_outside_commitlog(store: &Store, ix: &IndexStream, f: &IdxFile) -> Vec<Finding> {
    let mut out = Vec::new();
    let cl_min = store.commitlog.min_offset() as i64;
    let cl_end = store
        .commitlog
        .segments
        .last()
        .map_or(0, |s| s.start.saturating_add(s.len)) as i64;
    let mut stale = 0u64;
    let mut past: Option<(u32, i64)> = None;
    let mut past_n = 0u64;
    for n in 1..f.used {
        let Some(e) = f.entry(ix.geometry, n) else {
            break;
        };
        if e.phy_offset < cl_min {
            stale += 1;
        } else if e.phy_offset >= cl_end {
            past_n += 1;
            past.get_or_insert((n, e.phy_offset));
        }
    }
    if stale > 0 {
        out.push(Finding::new(
            "index.stale_entry",
            &f.path,
            0,
            format!(
                "{stale} entries point below the commitlog's first offset {cl_min} (expired data)"
            ),
        ));
    }
    if let Some((n, o)) = past {
        out.push(
            Finding::new(
                "index.dangling_entry",
                &f.path,
                ix.geometry.entry_pos(n),
                format!("{past_n} entries from entry {n} point past the commitlog's end of data (first: offset {o})"),
            )
            .with_action("queries that reach them read nothing"),
        );
    }
    out
}

/// Which of a record's index keys an entry was found for: a word for the usual few keys, and a
/// list only for records with more than 64 (a trace message carries every traced id and key).
struct KeyBits {
    low: u64,
    high: Vec<bool>,
}

impl KeyBits {
    fn new(n: usize) -> Self {
        KeyBits {
            low: 0,
            high: vec![false; n.saturating_sub(64)],
        }
    }

    fn get(&self, i: usize) -> bool {
        match i.checked_sub(64) {
            None => self.low & (1 << i) != 0,
            Some(j) => self.high.get(j).copied().unwrap_or(false),
        }
    }

    fn set(&mut self, i: usize) {
        match i.checked_sub(64) {
            None => self.low |= 1 << i,
            Some(j) => {
                if let Some(b) = self.high.get_mut(j) {
                    *b = true;
                }
            }
        }
    }
}

fn index_findings(
    store: &Store,
    ix: Option<&IndexStream>,
    merged: &Merged,
    structure: Vec<Vec<Finding>>,
    sink: &mut Sink,
) {
    let dir = store.root.join(paths::INDEX);
    let Some(ix) = ix else {
        if store.index_files.is_empty() && merged.idx.lag > 0 {
            sink.push(
                Finding::new(
                    "index.missing_key",
                    &dir,
                    0,
                    format!(
                        "there are no index files, but {} records carry keys the broker indexes (messageIndexEnable=false, or the index was removed)",
                        merged.idx.lag
                    ),
                )
                .with_severity(Severity::Info),
            );
        }
        return;
    };
    for v in structure {
        for f in v {
            sink.push(f);
        }
    }
    let names: Vec<(String, IndexHeader)> = ix
        .files
        .iter()
        .map(|f| {
            (
                f.path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                *f.file.header(),
            )
        })
        .collect();
    let refs: Vec<(&str, IndexHeader)> = names.iter().map(|(n, h)| (n.as_str(), *h)).collect();
    for p in check_sequence(&refs) {
        let file = ix
            .files
            .iter()
            .find(|f| {
                f.path
                    .file_name()
                    .is_some_and(|n| p.what.starts_with(&*n.to_string_lossy()))
            })
            .map_or(dir.clone(), |f| f.path.clone());
        sink.push(Finding::new(
            "index.header_mismatch",
            &file,
            p.offset,
            p.what,
        ));
    }
    if merged.idx.lag > 0 {
        if let Some(first) = merged.idx.first_lag {
            if let Some(seg) = store.commitlog.segment_for(first) {
                sink.push(
                    Finding::new(
                        "index.lag",
                        &seg.path,
                        first - seg.start,
                        format!(
                            "{} record keys from commitlog offset {first} on are not indexed yet (the index ends at offset {})",
                            merged.idx.lag,
                            ix.coverage_end.unwrap_or(0)
                        ),
                    )
                    .with_action("dispatch lag: the broker indexes them when it dispatches them again on its next start"),
                );
            }
        }
    }
}

/// Byte offset of a parse error in a config file, 0 when it parses or cannot be read.
fn parse_error_offset<T: ConfigFile>(path: &Path) -> u64 {
    match crate::format::config::read_config_bytes(path) {
        Ok(Some(b)) => T::from_bytes(&b).err().map_or(0, |e| e.offset),
        _ => 0,
    }
}

/// A config file (or its `.bak`) that is not a regular file, or too large to read.
fn config_kind_findings(path: &Path, backup: bool, sink: &mut Sink) {
    let e = crate::format::entry::probe(path);
    match e.kind {
        Kind::File { len } if len > crate::format::config::MAX_CONFIG_BYTES => {
            let f = Finding::new(
                "config.too_large",
                path,
                0,
                format!(
                    "{len} bytes: larger than any config file the broker writes (not read; the \
                     limit is {} bytes)",
                    crate::format::config::MAX_CONFIG_BYTES
                ),
            );
            sink.push(if backup {
                f.with_severity(Severity::Warning).with_action(
                    "read only when the main file fails; the broker overwrites it on its next persist",
                )
            } else {
                f.with_action("the broker cannot read it whole: loading fails and it uses the .bak")
            })
        }
        Kind::File { .. } | Kind::Missing => {}
        k => sink.push(
            Finding::new(
                "config.not_a_file",
                path,
                0,
                format!(
                    "{}{}, not a regular file (not read)",
                    if e.symlink { "a symlink to " } else { "" },
                    k.describe()
                ),
            )
            .with_action(if k == Kind::Fifo {
                "the broker blocks reading it at start (no writer): it hangs"
            } else {
                "the broker cannot read it: loading fails"
            }),
        ),
    }
}

fn load_checked<T: ConfigFile>(store: &Store, name: &str, sink: &mut Sink) -> Option<T> {
    let main = store.config_dir().join(name);
    let bak = crate::format::config::with_suffix(&main, ".bak");
    config_kind_findings(&main, false, sink);
    config_kind_findings(&bak, true, sink);
    match load_file::<T>(&main) {
        Ok(l) => {
            match &l.source {
                ConfigSource::Main => {
                    if let Ok(Some(b)) = crate::format::config::read_config_bytes(&bak) {
                        if !b.iter().all(|c| c.is_ascii_whitespace()) {
                            if let Err(e) = T::from_bytes(&b) {
                                sink.push(
                                    Finding::new(
                                        "config.bad_backup",
                                        &bak,
                                        e.offset,
                                        format!("{name}.bak does not parse: {}", e.kind),
                                    )
                                    .with_action(format!(
                                        "harmless while {name} parses; the broker writes a new .bak on its next persist"
                                    )),
                                );
                            }
                        }
                    }
                }
                ConfigSource::Backup { reason } => sink.push(
                    Finding::new(
                        "config.from_backup",
                        &main,
                        parse_error_offset::<T>(&main),
                        format!("{name} is {reason}; its .bak parses"),
                    )
                    .with_action(format!(
                        "the broker silently loads {name}.bak (the previous generation) and \
                         overwrites {name} on its next persist"
                    )),
                ),
                ConfigSource::Missing => {}
                ConfigSource::Empty { reason } => sink.push(
                    Finding::new(
                        "config.unparsable",
                        &main,
                        parse_error_offset::<T>(&main),
                        format!("no usable content: {reason}"),
                    )
                    .with_action("the broker starts with an empty table (its contents are lost)"),
                ),
            }
            Some(l.value)
        }
        Err(e) => {
            sink.push(
                Finding::new(
                    "config.unparsable",
                    &main,
                    parse_error_offset::<T>(&main),
                    e.to_string(),
                )
                .with_action("ConfigManager.load fails: the broker does not start"),
            );
            None
        }
    }
}

/// Byte offset of the first occurrence of `needle` in a file, 0 when absent.
fn text_offset(path: &Path, needle: &str) -> u64 {
    crate::format::config::read_config_bytes(path)
        .ok()
        .flatten()
        .and_then(|b| {
            b.windows(needle.len().max(1))
                .position(|w| w == needle.as_bytes())
        })
        .map_or(0, |p| p as u64)
}

fn config_findings(store: &Store, opts: &VerifyOptions, sink: &mut Sink) {
    use crate::format::config::{
        CONSUMER_OFFSET_FILE, DELAY_OFFSET_FILE, SUBSCRIPTION_GROUP_FILE, TOPICS_FILE,
    };
    let cl_min = store.commitlog.min_offset();
    let bounds = |topic: &str, q: i32| -> (u64, u64) {
        match store.queue(topic, q) {
            Some(cq) => (
                cq.min_offset(cl_min).unwrap_or(0),
                cq.max_offset().unwrap_or(0),
            ),
            None => (0, 0),
        }
    };
    let co_path = store.config_dir().join(CONSUMER_OFFSET_FILE);
    if let Some(co) = load_checked::<ConsumerOffsets>(store, CONSUMER_OFFSET_FILE, sink) {
        for (topic, group, queues) in co.iter() {
            if !opts.in_topic(topic) {
                continue;
            }
            if topic.is_empty() || group.is_empty() || group.contains('@') {
                // Java's split("@") does not give two parts: no consumer ever reads this entry.
                sink.push(
                    Finding::new(
                        "config.bad_offset_key",
                        &co_path,
                        text_offset(&co_path, topic),
                        format!("offsetTable key {topic:?}@{group:?} is not topic@group"),
                    )
                    .with_action("ignored: no consumer group and topic name it"),
                );
                continue;
            }
            let at = text_offset(&co_path, &format!("\"{topic}@{group}\""));
            for &(qid, off) in queues {
                let (min, max) = bounds(topic, qid);
                if off > max as i64 {
                    sink.push(
                        Finding::new(
                            "config.offset_above_max",
                            &co_path,
                            at,
                            format!(
                                "group {group} on {topic}/{qid} is at offset {off}, above the queue's max offset {max}"
                            ),
                        )
                        .with_action(format!(
                            "pulls from it answer OFFSET_OVERFLOW_BADLY; the consumer is moved back to {max}"
                        )),
                    );
                } else if off >= 0 && (off as u64) < min {
                    sink.push(
                        Finding::new(
                            "config.offset_below_min",
                            &co_path,
                            at,
                            format!(
                                "group {group} on {topic}/{qid} is at offset {off}, below the queue's min offset {min}"
                            ),
                        )
                        .with_action(format!("messages {off}..{min} expired; pulls are moved to {min}")),
                    );
                }
            }
        }
    }
    let d_path = store.config_dir().join(DELAY_OFFSET_FILE);
    if opts.in_topic(SCHEDULE_TOPIC) {
        if let Some(d) = load_checked::<DelayOffsets>(store, DELAY_OFFSET_FILE, sink) {
            let max_level = store.geometry.max_delay_level();
            for (level, off) in d.iter() {
                let at = text_offset(&d_path, &format!("{level}:"));
                if level < 1 || level > max_level {
                    sink.push(Finding::new(
                        "config.delay_offset",
                        &d_path,
                        at,
                        format!("delay level {level} is outside 1..={max_level}"),
                    ));
                    continue;
                }
                let (min, max) = bounds(SCHEDULE_TOPIC, level - 1);
                if off < min as i64 || off > max as i64 {
                    sink.push(
                        Finding::new(
                            "config.delay_offset",
                            &d_path,
                            at,
                            format!(
                                "delay level {level} is at offset {off}, outside {SCHEDULE_TOPIC} queue {}'s {min}..={max}",
                                level - 1
                            ),
                        )
                        .with_action("the broker clamps it on load (correctDelayOffset)"),
                    );
                }
            }
        }
    }
    let t_path = store.config_dir().join(TOPICS_FILE);
    let topics_present =
        t_path.exists() || crate::format::config::with_suffix(&t_path, ".bak").exists();
    if let Some(t) = load_checked::<TopicConfigs>(store, TOPICS_FILE, sink) {
        if topics_present {
            for ((topic, qid), cq) in &store.queues {
                // System topics (retry, DLQ, transactions, schedule) are created on the fly and
                // not always persisted.
                if !opts.in_topic(topic) || crate::engine::store::dispatch::is_system_topic(topic) {
                    continue;
                }
                match t.get(topic) {
                    None => sink.push(Finding::new(
                        "config.unknown_topic",
                        &cq.dir,
                        0,
                        format!("topic {topic} has a consume queue but is not in topics.json"),
                    )),
                    Some(c) if *qid >= c.read_queue_nums.max(c.write_queue_nums) => {
                        sink.push(Finding::new(
                            "config.unknown_topic",
                            &cq.dir,
                            0,
                            format!(
                                "queue {qid} of {topic} is beyond its {} read / {} write queues in topics.json",
                                c.read_queue_nums, c.write_queue_nums
                            ),
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
    }
    let _ = load_checked::<SubscriptionGroups>(store, SUBSCRIPTION_GROUP_FILE, sink);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::store::dispatch::index_keys;
    use crate::format::commitlog::RecordIter;
    use crate::format::indexfile::key_hash;

    fn fixture(name: &str) -> Store {
        crate::engine::store::test_fixture(name)
    }

    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let dest = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_tree(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), &dest).unwrap();
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644)).unwrap();
            }
        }
    }

    /// The report of a store with its commitlog walked whole and in small pieces.
    fn reports_by_piece_size(root: &Path) -> Vec<serde_json::Value> {
        let store = Store::open(root, &crate::format::geometry::GeometryInputs::default()).unwrap();
        [u64::MAX, 4096, 20_000, 300_000]
            .iter()
            .map(|&piece_size| {
                let opts = VerifyOptions {
                    piece_size,
                    ..VerifyOptions::default()
                };
                serde_json::to_value(verify(&store, &opts, None).unwrap()).unwrap()
            })
            .collect()
    }

    /// Walking the commitlog files in pieces changes nothing: healthy stores, a crashed one and
    /// damaged copies (a changed body byte, a zeroed page, a broken size field, in the middle
    /// of a file) get the report they get with whole files.
    #[test]
    fn pieces_give_the_report_of_whole_files() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut roots: Vec<PathBuf> = ["store-4.9", "store-5x"]
            .iter()
            .map(|n| base.join("fixtures").join(n))
            .collect();
        roots.extend(
            ["basic-4.9", "basic-5.x", "crashed-4.9"]
                .iter()
                .map(|n| base.join("../shared/oracle").join(n).join("store"))
                .filter(|p| p.is_dir()),
        );
        for root in &roots {
            let reports = reports_by_piece_size(root);
            for r in &reports[1..] {
                assert_eq!(r, &reports[0], "{}", root.display());
            }
            // The first record at or after a fraction of the file: (position, body position,
            // body length).
            fn record_after(b: &[u8], num: usize, den: usize) -> (usize, usize, usize) {
                let mut pos = 0;
                while let Ok(Record::Message(m)) = parse_record(b, pos, 0, false) {
                    if pos >= b.len() * num / den && !m.body.is_empty() {
                        return (pos, pos + m.body_len_pos + 4, m.body.len());
                    }
                    pos += m.raw.len();
                }
                (pos, pos, 0)
            }
            type Damage = (&'static str, fn(&mut [u8]));
            let damages: [Damage; 3] = [
                ("a changed body byte", |b| {
                    let (_, body, len) = record_after(b, 1, 3);
                    b[body + len / 2] ^= 0x40;
                }),
                ("a zeroed page", |b| {
                    let at = b.len() / 2 / 4096 * 4096;
                    b[at..at + 4096].fill(0);
                }),
                ("a broken size field", |b| {
                    let (pos, _, _) = record_after(b, 2, 3);
                    b[pos..pos + 4].copy_from_slice(&7i32.to_be_bytes());
                }),
            ];
            for (what, damage) in damages {
                let tmp = tempfile::tempdir().unwrap();
                let copy = tmp.path().join("store");
                copy_tree(root, &copy);
                let first = std::fs::read_dir(copy.join("commitlog"))
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .min()
                    .unwrap();
                let mut bytes = std::fs::read(&first).unwrap();
                damage(&mut bytes);
                std::fs::write(&first, &bytes).unwrap();
                let reports = reports_by_piece_size(&copy);
                assert!(
                    reports[0]["summary"]["healthy"] == false
                        || reports[0]["summary"]["warnings"] != 0,
                    "{what} in {} went unnoticed",
                    root.display()
                );
                for r in &reports[1..] {
                    assert_eq!(r, &reports[0], "{what} in {}", root.display());
                }
            }
        }
    }

    #[test]
    fn has_space_sees_a_space_anywhere() {
        for len in 0..40usize {
            let clean = vec![b'k'; len];
            assert!(!has_space(&clean), "len {len}");
            for at in 0..len {
                let mut b = clean.clone();
                b[at] = b' ';
                assert!(has_space(&b), "len {len} at {at}");
                // Bytes next to a space in value are not spaces.
                b[at] = b' ' - 1;
                assert!(!has_space(&b), "len {len} at {at}");
                b[at] = b' ' + 1;
                assert!(!has_space(&b), "len {len} at {at}");
                b[at] = b' ' | 0x80;
                assert!(!has_space(&b), "len {len} at {at}");
            }
        }
    }

    #[test]
    fn fast_index_keys_agree_with_dispatch() {
        for name in ["store-4.9", "store-5x"] {
            let store = fixture(name);
            for seg in &store.commitlog.segments {
                let map = Mapped::open(&seg.path).unwrap();
                for m in RecordIter::new(&map, &seg.path, seg.start, true) {
                    let m = m.unwrap();
                    let d = index_keys(&m);
                    let p = Props::of(&m);
                    let mut keys = Vec::new();
                    expected_index_keys(&m, &p, topic_prefix_hash(&m.topic), &mut keys);
                    let want: Vec<i32> = d
                        .iter()
                        .map(|k| {
                            let (t, key) = k.split_once('#').unwrap();
                            key_hash(t, key)
                        })
                        .collect();
                    let got: Vec<i32> = keys.clone();
                    assert_eq!(got, want, "{name} @{}", m.position);
                    assert_eq!(
                        fast_tags_code(&m, &p, &store.geometry),
                        record_tags_code(&m, &store.geometry).ok(),
                        "{name} @{}",
                        m.position
                    );
                }
            }
        }
    }

    #[test]
    fn fast_property_scan_and_hash_agree_with_the_reference() {
        let mut x: u64 = 0x1234_5678;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u32
        };
        for _ in 0..5000 {
            // names (ours, near misses, others), separators and short runs of bytes close to
            // the separators in value (0, 3, 0x81, 0x82), over several 64-byte blocks
            let pieces: [&[u8]; 22] = [
                b"TAGS",
                b"KEYS",
                b"UNIQ_KEY",
                b"DELAY",
                b"REAL_TOPIC",
                b"RETRY_TOPIC",
                b"TRANSACTION_CHECK_TIMES",
                b"INNER_NUM",
                b"__CRC32#",
                b"TAGSX",
                b"TAG",
                b"traceId",
                b"\x01",
                b"\x02",
                b"\x01",
                b"\x02",
                b"a K=",
                b"\xC3\xA9",
                b"\x00\x03",
                b"\x81\x82\xFF",
                b" ",
                b"7",
            ];
            let mut b = Vec::new();
            let target = (next() % 300) as usize;
            while b.len() < target {
                b.extend_from_slice(pieces[(next() % pieces.len() as u32) as usize]);
            }
            // Props::of against the same fields picked from the reference property parser
            let props = crate::format::commitlog::Properties(&b);
            let mut want = Props::default();
            for (k, v) in props.iter_raw() {
                match k {
                    b"TAGS" => want.tags = Some(v),
                    b"DELAY" => want.delay = Some(v),
                    b"KEYS" => want.keys = Some(v),
                    b"UNIQ_KEY" => {
                        want.uniq = Some(v);
                        want.uniq_count += 1;
                    }
                    b"REAL_TOPIC" => want.real_topic = true,
                    b"RETRY_TOPIC" => want.retry_topic = true,
                    b"TRANSACTION_CHECK_TIMES" => want.tx_check = true,
                    b"INNER_NUM" => want.inner_num = Some(v),
                    b"__CRC32#" => want.crc32 = true,
                    _ => {}
                }
            }
            let got = Props::of_block(&b);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{b:?}");
            let s = String::from_utf8_lossy(&b);
            assert_eq!(
                bytes_hash_extend(7, &b),
                crate::format::java::utf16_hash_extend(7, &s),
                "{b:?}"
            );
        }
    }

    #[test]
    fn an_interrupt_stops_the_run_between_pieces() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let store = fixture("store-4.9");
        let flag = Arc::new(AtomicBool::new(true));
        let opts = VerifyOptions {
            interrupt: Some(flag.clone()),
            ..Default::default()
        };
        let e = verify(&store, &opts, None).unwrap_err();
        assert!(e.to_string().contains("verify interrupted"), "{e}");
        // set during the walk: the workers stop before the last piece
        flag.store(false, Ordering::Relaxed);
        let opts = VerifyOptions {
            piece_size: 16 << 10,
            ..opts
        };
        let seen = AtomicU64::new(0);
        let stop = |_p: Phase, done: u64, _t: u64| {
            seen.store(done, Ordering::Relaxed);
            flag.store(true, Ordering::Relaxed);
        };
        assert!(verify(&store, &opts, Some(&stop)).is_err());
        let total: u64 = store.commitlog.segments.iter().map(|s| s.len).sum();
        assert!(seen.load(Ordering::Relaxed) < total);
        flag.store(false, Ordering::Relaxed);
        assert!(verify(&store, &opts, None).unwrap().summary.healthy);
    }

    #[test]
    fn healthy_fixtures_have_no_errors() {
        for name in ["store-4.9", "store-5x"] {
            let store = fixture(name);
            let r = verify(&store, &VerifyOptions::default(), None).unwrap();
            let bad: Vec<_> = r
                .findings
                .iter()
                .filter(|f| f.severity >= Severity::Warning)
                .collect();
            assert!(bad.is_empty(), "{name}: {bad:#?}");
            assert!(r.summary.healthy);
            assert!(r.summary.messages > 0);
        }
    }

    #[test]
    fn every_code_used_is_in_the_table() {
        let src = include_str!("verify.rs");
        let known: std::collections::HashSet<&str> = crate::format::finding::CODES
            .iter()
            .map(|(c, _, _)| *c)
            .collect();
        let mut n = 0;
        for part in src.split('"').skip(1).step_by(2) {
            let Some((head, tail)) = part.split_once('.') else {
                continue;
            };
            let is_code = [
                "commitlog",
                "consumequeue",
                "index",
                "checkpoint",
                "config",
                "store",
            ]
            .contains(&head)
                && !tail.is_empty()
                && tail.chars().all(|c| c.is_ascii_lowercase() || c == '_');
            if is_code {
                n += 1;
                assert!(known.contains(part), "{part} is not in CODES");
            }
        }
        assert!(n > 30);
    }

    #[test]
    fn crc32_property() {
        // A record image: anything, then the 20 reserved bytes with the CRC of what precedes.
        let mut raw = b"some record bytes before the property....".to_vec();
        let crc = masked_crc32(&raw);
        let digits: String = format!("{crc:010}").chars().rev().collect();
        raw.extend_from_slice(b"__CRC32#\x01");
        raw.extend_from_slice(digits.as_bytes());
        raw.push(2);
        assert_eq!(prop_crc_problem(&raw), None);
        // FORMAT.md 2.5: CRC 123 is stored as 3210000000
        assert_eq!(
            format!("{:010}", 123).chars().rev().collect::<String>(),
            "3210000000"
        );
        let mut bad = raw.clone();
        bad[3] ^= 1;
        assert!(prop_crc_problem(&bad).unwrap().contains("says"));
        let mut moved = raw.clone();
        moved.push(b'x');
        assert!(prop_crc_problem(&moved).unwrap().contains("last 20 bytes"));
    }
}
