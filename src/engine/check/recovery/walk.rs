//! Walking one commitlog file the way recovery does (`CommitLog.recoverNormally` and
//! `recoverAbnormally`): where the walk stops and why, the problems met on the way, the dirty
//! tail after the data, and the resync past a damaged record that finds what follows it. The
//! records are read by the one record walk (`format::commitlog::RecordIter`); this module adds
//! recovery's checks of each record and decides where a new walk takes up after the last ends.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::store::dispatch::SCHEDULE_TOPIC;
use crate::format::bytes::i32_at;
use crate::format::commitlog::read::{parse_record, Record, Segment, SegmentKind};
use crate::format::commitlog::walk::{RecordIter, SegmentEnd};
use crate::format::commitlog::{prop, MessageRef, TransactionType, MAGIC_V1, MAGIC_V2};
use crate::format::error::Error;
use crate::format::indexfile::first_nonzero;
use crate::format::java::parse_int;

/// At most this many problems are kept per commitlog file; the rest are counted.
pub const MAX_PROBLEMS_PER_FILE: usize = 64;

/// Why the broker's walk of a file stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A blank record: the walk goes on at the next file.
    Blank,
    /// Zeros, or too few bytes for a record header: the end of the data.
    EndOfData,
    /// A record that does not parse (magic, sizes, lengths, a bad DELAY).
    BadRecord,
    /// A body CRC mismatch (`checkCRCOnRecover`).
    CrcMismatch,
    /// Zeros where a record should start, with records after them.
    ZeroHole,
}

impl StopReason {
    /// True when the walk ends in this file (anything but a blank).
    pub fn ends_scan(self) -> bool {
        self != StopReason::Blank
    }
    /// True when the stop is damage rather than the normal end of the data.
    pub fn is_damage(self) -> bool {
        matches!(
            self,
            StopReason::BadRecord | StopReason::CrcMismatch | StopReason::ZeroHole
        )
    }
}

/// One thing wrong in a commitlog file, at a file position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WalkProblem {
    /// A record that does not parse; `detail` says why.
    BadRecord { pos: u64, detail: String },
    /// A SCHEDULE_TOPIC_XXXX record whose DELAY is not a number (Java rejects the record).
    BadDelay { pos: u64, value: String },
    /// Stored BODYCRC differs from the CRC of the body.
    CrcMismatch {
        pos: u64,
        stored: i32,
        computed: u32,
    },
    /// `len` zero bytes where a record should start, followed by a record.
    ZeroHole { pos: u64, len: u64 },
    /// A blank record whose TOTALSIZE is not the bytes left in the file.
    BlankSize { pos: u64, found: i32, expected: u64 },
    /// Non-zero bytes from `pos` to `end` after the end of the data (or after a blank's 8
    /// bytes); `stale` records from an earlier generation of the file were found in them.
    DirtyTail { pos: u64, end: u64, stale: u64 },
    /// A file that is not the last one and does not end with a blank record.
    NoBlank { pos: u64 },
}

impl WalkProblem {
    pub fn pos(&self) -> u64 {
        match self {
            WalkProblem::BadRecord { pos, .. }
            | WalkProblem::BadDelay { pos, .. }
            | WalkProblem::CrcMismatch { pos, .. }
            | WalkProblem::ZeroHole { pos, .. }
            | WalkProblem::BlankSize { pos, .. }
            | WalkProblem::DirtyTail { pos, .. }
            | WalkProblem::NoBlank { pos } => *pos,
        }
    }
}

/// What to do while walking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkOptions {
    /// Check body CRCs as recovery does (`checkCRCOnRecover`, default true).
    pub check_crc: bool,
    /// Count records with index keys at or after this commitlog offset (before the stop).
    pub keyed_from: u64,
    /// ... and before this one.
    pub keyed_to: u64,
    /// Count records at or after this commitlog offset (before the stop).
    pub counted_from: u64,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            check_crc: true,
            keyed_from: u64::MAX,
            keyed_to: u64::MAX,
            counted_from: u64::MAX,
        }
    }
}

/// Where a visited record lies relative to the broker's walk of its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPlace {
    /// Before the walk's stop: the broker's scan reads it.
    Chain,
    /// After a damaged spot, found by resynchronising: recovery would drop it if it cut here.
    AfterStop,
}

/// The result of walking one commitlog file.
#[derive(Debug, Clone, Serialize)]
pub struct FileWalk {
    #[serde(serialize_with = "path_str")]
    pub path: PathBuf,
    pub start: u64,
    pub len: u64,
    /// File position where the broker's walk leaves the file, and why.
    pub stop_pos: u64,
    pub stop: StopReason,
    /// Where the walk resynchronised past every damaged spot ends: a blank
    /// ([`StopReason::Blank`]) or the end of the data ([`StopReason::EndOfData`]), and its file
    /// position. Equal to the stop when nothing is damaged.
    pub end_pos: u64,
    pub end: StopReason,
    /// Records and bytes before the stop.
    pub records: u64,
    pub bytes: u64,
    /// Records and bytes found after the stop by resynchronising (PHYSICALOFFSET equal to the
    /// position), not counting stale ones.
    pub after_records: u64,
    pub after_bytes: u64,
    /// Records in a dirty tail that are older than the last good record: left behind by an
    /// earlier truncation and never read by the broker.
    pub stale_records: u64,
    /// Start of the last record before the stop.
    pub last_record_pos: Option<u64>,
    /// STORETIMESTAMP of the last record before the stop, and the largest seen in the file.
    pub last_store_timestamp: i64,
    pub max_store_timestamp: i64,
    /// Records before the stop with index keys at or after [`WalkOptions::keyed_from`].
    pub keyed_from_count: u64,
    /// Records before the stop at or after [`WalkOptions::counted_from`].
    pub counted_from_count: u64,
    pub problems: Vec<WalkProblem>,
    pub problems_not_listed: u64,
}

pub(super) fn path_str<S: serde::Serializer>(
    p: &Path,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(&p.display())
}

impl FileWalk {
    fn new(seg: &Segment, len: usize) -> Self {
        FileWalk {
            path: seg.path.clone(),
            start: seg.start,
            len: len as u64,
            stop_pos: 0,
            stop: StopReason::EndOfData,
            end_pos: 0,
            end: StopReason::EndOfData,
            records: 0,
            bytes: 0,
            after_records: 0,
            after_bytes: 0,
            stale_records: 0,
            last_record_pos: None,
            last_store_timestamp: 0,
            max_store_timestamp: 0,
            keyed_from_count: 0,
            counted_from_count: 0,
            problems: Vec::new(),
            problems_not_listed: 0,
        }
    }

    fn problem(&mut self, p: WalkProblem) {
        if self.problems.len() < MAX_PROBLEMS_PER_FILE {
            self.problems.push(p);
        } else {
            self.problems_not_listed += 1;
        }
    }

    /// Commitlog offset where the broker's walk leaves this file.
    pub fn stop_offset(&self) -> u64 {
        self.start.saturating_add(self.stop_pos)
    }

    /// True for the walk of a piece of a file that ran out of bytes exactly at `end` (file
    /// position) with nothing wrong on the way: the walk of the next piece carries on from there
    /// as if the file had been walked in one go.
    pub fn ends_cleanly_at(&self, end: u64) -> bool {
        self.stop == StopReason::EndOfData && self.stop_pos == end && self.is_clean()
    }

    /// Nothing wrong found: no problem, nothing after the stop.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
            && self.problems_not_listed == 0
            && self.after_records == 0
            && self.stale_records == 0
    }

    /// Join the walk of the next piece of the same file to this one, which must
    /// [end cleanly](Self::ends_cleanly_at) where `next` starts.
    pub fn join(self, next: FileWalk) -> FileWalk {
        let (last_record_pos, last_store_timestamp) = match next.last_record_pos {
            Some(p) => (Some(p), next.last_store_timestamp),
            None => (self.last_record_pos, self.last_store_timestamp),
        };
        FileWalk {
            records: self.records + next.records,
            bytes: self.bytes + next.bytes,
            last_record_pos,
            last_store_timestamp,
            max_store_timestamp: self.max_store_timestamp.max(next.max_store_timestamp),
            keyed_from_count: self.keyed_from_count + next.keyed_from_count,
            counted_from_count: self.counted_from_count + next.counted_from_count,
            ..next
        }
    }
}

/// True when a record carries index keys: not ROLLBACK, and a UNIQ_KEY or a non-empty KEYS
/// element (`IndexService.buildIndex`).
pub fn has_index_keys(m: &MessageRef<'_>) -> bool {
    if m.transaction_type() == TransactionType::Rollback {
        return false;
    }
    m.properties.iter_raw().any(|(k, v)| {
        k == prop::UNIQ_KEY.as_bytes()
            || (k == prop::KEYS.as_bytes() && v.iter().any(|&b| b != b' '))
    })
}

/// The walk position of the next record (or of a blank that fills the file) at or after `from`
/// in `buf`, the bytes of `seg`: a message magic whose record parses and whose PHYSICALOFFSET
/// is its position, or a blank magic whose TOTALSIZE is exactly the bytes left. In a DLedger
/// file, the next entry whose header and wrapped record both say where they are.
pub fn resync(buf: &[u8], from: usize, seg: &Segment) -> Option<usize> {
    if seg.kind == SegmentKind::Dledger {
        return resync_entry(buf, from, seg);
    }
    let file_start = seg.start;
    let mut q = from;
    loop {
        let cand = crate::format::commitlog::read::next_magic(buf, q, true)?;
        match parse_record(buf, cand, file_start, false) {
            Ok(Record::Message(m)) if m.physical_offset == (file_start + cand as u64) as i64 => {
                return Some(cand)
            }
            Ok(Record::Blank { size }) if size as i64 == (buf.len() - cand) as i64 => {
                return Some(cand)
            }
            _ => q = cand + 1,
        }
    }
}

/// [`resync`] in a DLedger data file: found by the wrapped record's magic, one forward pass.
fn resync_entry(buf: &[u8], from: usize, seg: &Segment) -> Option<usize> {
    let header = seg.header_len();
    let mut q = from.checked_add(header)?;
    loop {
        let cand = crate::format::commitlog::read::next_magic(buf, q, false)?;
        let at = cand - header;
        if let Ok(Record::Message(m)) = seg.record_at(buf, at, false) {
            if m.physical_offset == (seg.start + cand as u64) as i64 {
                return Some(at);
            }
        }
        q = cand + 1;
    }
}

/// Walk one commitlog file (`buf` is its bytes) the way recovery does, and go on past the first
/// failure by resynchronising, so the caller learns what a cut there would drop. `visit` sees
/// every record found (not stale ones), with where it lies.
pub fn walk_file<F>(buf: &[u8], seg: &Segment, o: &WalkOptions, visit: F) -> FileWalk
where
    F: FnMut(&MessageRef<'_>, RecordPlace),
{
    walk_on(None, buf, 0, seg, o, visit)
}

/// [`walk_file`] from file position `from`, a record boundary, continuing `before`, the walk
/// of the bytes before `from` (which must be [clean](FileWalk::is_clean)). Walking a file in
/// pieces (`buf` cut at the end of each piece but the last) gives the walk of the whole file by
/// [`FileWalk::join`] when every piece but the last [ends cleanly](FileWalk::ends_cleanly_at).
pub fn walk_on<F>(
    before: Option<FileWalk>,
    buf: &[u8],
    from: usize,
    seg: &Segment,
    o: &WalkOptions,
    mut visit: F,
) -> FileWalk
where
    F: FnMut(&MessageRef<'_>, RecordPlace),
{
    // A DLedger log's uncommitted entries are not the broker's data: the walk ends before them.
    let buf = seg.served(buf);
    let len = buf.len();
    let from = from.min(len);
    let mut w = match before {
        Some(w) => FileWalk {
            len: len as u64,
            ..w
        },
        None => FileWalk::new(seg, len),
    };
    let mut stopped: Option<(usize, StopReason)> = None;
    let mut end = StopReason::EndOfData;
    let mut pos = from;
    // The broker's record walk from `pos`; where it ends (a blank, zeros, a record that does not
    // parse) recovery's own rules decide whether and where a new walk takes up again.
    loop {
        let mut records = RecordIter::starting_at(buf, seg, pos, false);
        let mut error = None;
        for r in records.by_ref() {
            match r {
                Ok(m) => on_record(&m, seg, o, &mut w, &mut stopped, &mut visit),
                Err(e) => error = Some(e),
            }
        }
        match *records.end() {
            SegmentEnd::Blank { pos: at, size } => {
                let left = (len - at) as u64;
                if size as i64 != left as i64 {
                    w.problem(WalkProblem::BlankSize {
                        pos: at as u64,
                        found: size,
                        expected: left,
                    });
                }
                if stopped.is_none() {
                    stopped = Some((at, StopReason::Blank));
                }
                end = StopReason::Blank;
                let tail = at + crate::format::commitlog::END_FILE_MIN_BLANK_LENGTH;
                dirty_tail(buf, tail.min(len), seg, &mut w);
                pos = at;
                break;
            }
            SegmentEnd::EndOfData { pos: at } => {
                pos = at;
                let Some(z) = first_nonzero_from(buf, at, &seg.path).map(|p| p - at) else {
                    if stopped.is_none() {
                        stopped = Some((at, StopReason::EndOfData));
                    }
                    break;
                };
                match resync(buf, at + z.saturating_sub(3), seg) {
                    // Records follow the zeros: a hole, not the end.
                    Some(next) if !is_stale(buf, next, seg, &w) => {
                        w.problem(WalkProblem::ZeroHole {
                            pos: at as u64,
                            len: (next - at) as u64,
                        });
                        if stopped.is_none() {
                            stopped = Some((at, StopReason::ZeroHole));
                        }
                        pos = next;
                    }
                    _ => {
                        if stopped.is_none() {
                            stopped = Some((at, StopReason::EndOfData));
                        }
                        dirty_tail(buf, at, seg, &mut w);
                        break;
                    }
                }
            }
            SegmentEnd::Corrupt { pos: at } => {
                pos = at;
                let next = resync(buf, at + 1, seg);
                let live_after = next.is_some_and(|n| !is_stale(buf, n, seg, &w));
                let magic = i32_at(buf, at + seg.header_len() + 4);
                let looks_like_record = magic == Some(MAGIC_V1) || magic == Some(MAGIC_V2);
                if !live_after && !looks_like_record {
                    // Bytes that are not a record, with nothing live after them: the end of the
                    // data followed by leftovers (a dirty tail), not damage to a record.
                    if stopped.is_none() {
                        stopped = Some((at, StopReason::EndOfData));
                    }
                    dirty_tail(buf, at, seg, &mut w);
                    break;
                }
                let detail = match error {
                    Some(Error::Data { kind, .. }) => kind.to_string(),
                    Some(e) => e.to_string(),
                    None => String::new(),
                };
                w.problem(WalkProblem::BadRecord {
                    pos: at as u64,
                    detail,
                });
                if stopped.is_none() {
                    stopped = Some((at, StopReason::BadRecord));
                }
                match next {
                    Some(n) if live_after => pos = n,
                    Some(n) => {
                        dirty_tail(buf, n, seg, &mut w);
                        break;
                    }
                    None => break,
                }
            }
            SegmentEnd::Running => break,
        }
    }
    let (stop_pos, stop) = stopped.unwrap_or((pos.min(len), StopReason::EndOfData));
    w.stop_pos = stop_pos as u64;
    w.stop = stop;
    w.end_pos = pos.min(len) as u64;
    w.end = end;
    w
}

/// One record the broker's walk read: the checks recovery adds (a SCHEDULE_TOPIC_XXXX DELAY that
/// is not a number, the body CRC), the counts, and where it lies relative to the stop.
fn on_record<F>(
    m: &MessageRef<'_>,
    seg: &Segment,
    o: &WalkOptions,
    w: &mut FileWalk,
    stopped: &mut Option<(usize, StopReason)>,
    visit: &mut F,
) where
    F: FnMut(&MessageRef<'_>, RecordPlace),
{
    let pos = seg.walk_pos((m.position - seg.start) as usize);
    let size = seg.header_len() + m.raw.len();
    let mut bad = None;
    if m.topic == SCHEDULE_TOPIC {
        if let Some(d) = m.property(prop::DELAY) {
            if parse_int(&d).is_none() {
                w.problem(WalkProblem::BadDelay {
                    pos: pos as u64,
                    value: d.into_owned(),
                });
                bad = Some(StopReason::BadRecord);
            }
        }
    }
    if o.check_crc && bad.is_none() && !m.body.is_empty() && !m.body_crc_ok() {
        w.problem(WalkProblem::CrcMismatch {
            pos: pos as u64,
            stored: m.body_crc,
            computed: m.computed_body_crc(),
        });
        bad = Some(StopReason::CrcMismatch);
    }
    let stops_here = stopped.is_none() && bad.is_some();
    if let (None, Some(r)) = (*stopped, bad) {
        *stopped = Some((pos, r));
    }
    w.max_store_timestamp = w.max_store_timestamp.max(m.store_timestamp);
    if stops_here {
        // The record at the stop: dropped with the cut, but not "after" it.
        visit(m, RecordPlace::AfterStop);
    } else if stopped.is_none() {
        w.records += 1;
        w.bytes += size as u64;
        w.last_record_pos = Some(pos as u64);
        w.last_store_timestamp = m.store_timestamp;
        let at = m.position;
        if at >= o.keyed_from && at < o.keyed_to && has_index_keys(m) {
            w.keyed_from_count += 1;
        }
        if at >= o.counted_from {
            w.counted_from_count += 1;
        }
        visit(m, RecordPlace::Chain);
    } else {
        w.after_records += 1;
        w.after_bytes += size as u64;
        visit(m, RecordPlace::AfterStop);
    }
}

/// True when the record at `at` is older than the last good record of the walk so far: left
/// behind by an earlier truncation rather than live data.
fn is_stale(buf: &[u8], at: usize, seg: &Segment, w: &FileWalk) -> bool {
    match seg.record_at(buf, at, false) {
        Ok(Record::Message(m)) => w.records > 0 && m.store_timestamp < w.last_store_timestamp,
        _ => false,
    }
}

/// Record non-zero bytes from `from` to the end of `buf`, counting stale records in them.
fn dirty_tail(buf: &[u8], from: usize, seg: &Segment, w: &mut FileWalk) {
    let Some(rest) = buf.get(from..) else { return };
    let Some(z) = first_nonzero_from(buf, from, &seg.path).map(|p| p - from) else {
        return;
    };
    let end = crate::format::indexfile::last_nonzero(rest).map_or(z, |l| l + 1);
    let mut stale = 0u64;
    let mut q = from + z.saturating_sub(3);
    while let Some(n) = resync(buf, q, seg) {
        match seg.record_at(buf, n, false) {
            Ok(Record::Message(m)) => {
                stale += 1;
                q = seg.after(n, &m);
            }
            _ => break,
        }
    }
    w.stale_records += stale;
    w.problem(WalkProblem::DirtyTail {
        pos: (from + z) as u64,
        end: (from + end) as u64,
        stale,
    });
}

/// Position of the first non-zero byte at or after `from`, skipping the holes of a sparse file
/// (`SEEK_DATA`/`SEEK_HOLE`) instead of faulting them in through the map: a broker's
/// pre-allocated file is mostly hole.
pub(crate) fn first_nonzero_from(buf: &[u8], from: usize, path: &Path) -> Option<usize> {
    #[cfg(target_os = "linux")]
    if let Some(r) = sparse_first_nonzero(buf, from, path) {
        return r;
    }
    #[cfg(not(target_os = "linux"))]
    let _ = path;
    first_nonzero(buf.get(from..)?).map(|z| from + z)
}

/// `None` when the file system cannot say where the data is.
#[cfg(target_os = "linux")]
fn sparse_first_nonzero(buf: &[u8], from: usize, path: &Path) -> Option<Option<usize>> {
    use nix::unistd::{lseek, Whence};
    let f = crate::format::entry::open_regular(path).ok()?;
    let len = i64::try_from(buf.len()).ok()?;
    let mut at = i64::try_from(from).ok()?;
    loop {
        if at >= len {
            return Some(None);
        }
        let d = match lseek(&f, at, Whence::SeekData) {
            Ok(d) => d,
            Err(nix::errno::Errno::ENXIO) => return Some(None),
            Err(_) => return None,
        };
        if d >= len {
            return Some(None);
        }
        let h = lseek(&f, d, Whence::SeekHole).ok()?.clamp(d, len);
        let region = buf.get(usize::try_from(d).ok()?..usize::try_from(h).ok()?)?;
        if let Some(z) = first_nonzero(region) {
            return Some(Some(usize::try_from(d).ok()? + z));
        }
        if h <= at {
            return None;
        }
        at = h;
    }
}

/// A blank at the end of every file that has data after it (`CommitLog.doAppend` always leaves
/// room for one): adds a `NoBlank` problem where such a file lacks one. All-zero later files
/// (pre-allocated by the broker) do not count as data.
pub fn mark_missing_blanks(walks: &mut [FileWalk]) {
    let n = walks.len();
    for i in 0..n {
        let later_data = walks
            .iter()
            .skip(i + 1)
            .any(|w| w.records + w.after_records > 0 || !w.problems.is_empty());
        if let Some(w) = walks.get_mut(i) {
            if later_data && w.stop != StopReason::Blank && !w.stop.is_damage() {
                let pos = w.stop_pos;
                w.problem(WalkProblem::NoBlank { pos });
            }
        }
    }
}
