//! Reading records: one record at a position, all records of one file, the files of a folder.
//!
//! The walk follows the broker's recovery scan (`CommitLog.checkMessageAndReturnSize`): a message
//! magic is a record, the BLANK magic ends the file, a zero size and magic (or fewer than 8 bytes)
//! is the end of data, anything else is corruption and stops the walk.

use std::path::{Path, PathBuf};

use super::walk::{RecordIter, SegmentEnd};
use super::{sysflag, Host, MessageRef, MessageVersion, Properties, BLANK_MAGIC};
use crate::format::bytes::{i32_at, Cursor};
use crate::format::error::{ErrorKind, ParseError, Result};
use crate::format::filename::{list_queue_dir, QueueFile};
use crate::format::java::masked_crc32;
use crate::format::mapped::Mapped;

/// Smallest possible message record: IPv4 hosts, V1, empty body, topic and properties.
pub const MIN_RECORD_LEN: usize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2;

/// What is found at a position of a commitlog file.
// Messages are the common case on the hot path: keep them unboxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Record<'a> {
    Message(MessageRef<'a>),
    /// The end-of-file blank: TOTALSIZE (the bytes left, as the broker writes it) and BLANK magic.
    Blank {
        size: i32,
    },
    /// Zero size and magic, or fewer than 8 bytes left: no more data in this file.
    EndOfData,
}

/// The message record that `raw` holds alone, as read at commitlog offset `phy` (its
/// [`MessageRef::position`]); `None` for a blank record, bytes that do not parse or a negative
/// offset. CRC not checked.
pub fn message_in(raw: &[u8], phy: i64) -> Option<MessageRef<'_>> {
    let phy = u64::try_from(phy).ok()?;
    match parse_record(raw, 0, phy, false) {
        Ok(Record::Message(m)) => Some(m),
        _ => None,
    }
}

/// Parse the record at `pos` of `buf` (one commitlog file). `file_start` is the file's start
/// offset, used for [`MessageRef::position`]. Error offsets are positions inside `buf`.
/// With `check_crc`, a body CRC mismatch is an error, as in the broker's recovery.
#[inline(always)]
pub fn parse_record(
    buf: &[u8],
    pos: usize,
    file_start: u64,
    check_crc: bool,
) -> Result<Record<'_>, ParseError> {
    let left = buf.len().saturating_sub(pos);
    let (Some(size), Some(magic)) = (i32_at(buf, pos), i32_at(buf, pos.saturating_add(4))) else {
        return Ok(Record::EndOfData);
    };
    if size == 0 && magic == 0 {
        return Ok(Record::EndOfData);
    }
    if magic == BLANK_MAGIC {
        return Ok(Record::Blank { size });
    }
    let at = |kind| ParseError::new(pos as u64, kind);
    let version = MessageVersion::from_magic(magic).ok_or(at(ErrorKind::BadMagic {
        found: magic as u32,
    }))?;
    if size < MIN_RECORD_LEN as i32 {
        return Err(at(ErrorKind::BadSize {
            found: size as i64,
            min: MIN_RECORD_LEN as i64,
            max: left as i64,
        }));
    }
    if size as usize > left {
        return Err(at(ErrorKind::Truncated {
            what: "message record",
            needed: size as u64,
            left: left as u64,
        }));
    }
    let raw = &buf[pos..pos + size as usize];
    let msg = parse_message(
        raw,
        pos as u64,
        file_start.saturating_add(pos as u64),
        version,
    )?;
    if check_crc && !msg.body.is_empty() && !msg.body_crc_ok() {
        return Err(at(ErrorKind::BodyCrc {
            stored: msg.body_crc as u32,
            computed: masked_crc32(msg.body),
        }));
    }
    Ok(Record::Message(msg))
}

/// The start of the next record whose magic code lies at or after `from + 4`: a message magic
/// (and, with `with_blank`, the blank magic). One forward pass over the bytes (SIMD byte search
/// for the magics' first bytes), so a scan that resumes after each candidate is linear.
pub fn next_magic(buf: &[u8], from: usize, with_blank: bool) -> Option<usize> {
    let mut at = from.checked_add(4)?;
    loop {
        let hay = buf.get(at..)?;
        let i = if with_blank {
            memchr::memchr2(0xDA, 0xCB, hay)?
        } else {
            memchr::memchr(0xDA, hay)?
        };
        let p = at + i;
        match buf.get(p..p + 4)? {
            [0xDA, 0xA3, 0x20, 0xA7 | 0xAB] => return Some(p - 4),
            [0xCB, 0xD4, 0x31, 0x94] if with_blank => return Some(p - 4),
            _ => at = p + 1,
        }
    }
}

fn parse_host(c: &mut Cursor<'_>, v6: bool, what: &'static str) -> Result<Host, ParseError> {
    if v6 {
        let a: [u8; 16] = c.array(what)?;
        Ok(Host::from_v6_bytes(a, c.i32(what)?))
    } else {
        let a: [u8; 4] = c.array(what)?;
        Ok(Host::v4(a, c.i32(what)?))
    }
}

/// Decode one message record whose bytes are exactly `raw` (TOTALSIZE long). `err_base` is the
/// offset reported in errors for `raw[0]`; `position` is its commitlog offset.
#[inline(always)]
pub fn parse_message(
    raw: &[u8],
    err_base: u64,
    position: u64,
    version: MessageVersion,
) -> Result<MessageRef<'_>, ParseError> {
    match parse_ipv4_message(raw, position, version) {
        Some(m) => Ok(m),
        None => parse_message_by_fields(raw, err_base, position, version),
    }
}

/// [`parse_message`] one field after the other, for every layout; errors name the field.
pub(super) fn parse_message_by_fields(
    raw: &[u8],
    err_base: u64,
    position: u64,
    version: MessageVersion,
) -> Result<MessageRef<'_>, ParseError> {
    let mut c = Cursor::new(raw, err_base);
    let total_size = c.i32("TOTALSIZE")?;
    let _magic = c.i32("MAGICCODE")?;
    let body_crc = c.i32("BODYCRC")?;
    let queue_id = c.i32("QUEUEID")?;
    let flag = c.i32("FLAG")?;
    let queue_offset = c.i64("QUEUEOFFSET")?;
    let physical_offset = c.i64("PHYSICALOFFSET")?;
    let sys_flag = c.i32("SYSFLAG")?;
    let born_timestamp = c.i64("BORNTIMESTAMP")?;
    let born_host = parse_host(&mut c, sys_flag & sysflag::BORNHOST_V6 != 0, "BORNHOST")?;
    let store_timestamp = c.i64("STORETIMESTAMP")?;
    let store_host = parse_host(
        &mut c,
        sys_flag & sysflag::STOREHOST_V6 != 0,
        "STOREHOSTADDRESS",
    )?;
    let reconsume_times = c.i32("RECONSUMETIMES")?;
    let prepared_transaction_offset = c.i64("PREPARED TRANSACTION OFFSET")?;
    let body_len_pos = c.pos();
    let body_len = c.i32("BODY length")?;
    let body = if body_len > 0 {
        c.bytes(body_len as usize, "BODY")?
    } else {
        &[][..]
    };
    let topic_len_pos = c.pos();
    let topic_len = match version {
        MessageVersion::V1 => c.i8("TOPIC length")? as i64,
        MessageVersion::V2 => c.i16("TOPIC length")? as i64,
    };
    if topic_len < 0 {
        return Err(ParseError::new(
            err_base + topic_len_pos as u64,
            ErrorKind::NegativeLength {
                what: "TOPIC",
                found: topic_len,
            },
        ));
    }
    let topic = c.bytes(topic_len as usize, "TOPIC")?;
    let props_len = c.i16("PROPERTIES length")?;
    let properties = if props_len > 0 {
        c.bytes(props_len as usize, "PROPERTIES")?
    } else {
        &[][..]
    };
    let computed = super::record_len(
        version,
        born_host.encoded_len(),
        store_host.encoded_len(),
        body.len(),
        topic.len(),
        properties.len(),
    ) as i64;
    if computed != total_size as i64 {
        return Err(ParseError::new(
            err_base,
            ErrorKind::SizeMismatch {
                stored: total_size,
                computed,
            },
        ));
    }
    Ok(MessageRef {
        raw,
        position,
        version,
        total_size,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic: super::text(topic),
        properties: Properties(properties),
        body_len_pos,
    })
}

/// Bytes before BODY when both hosts are IPv4 (8 bytes each).
const IPV4_HEAD_LEN: usize = 88;

/// [`parse_message`] for the usual layout, both hosts IPv4, read at fixed offsets. `None` when
/// the record has another layout or anything does not add up: the field-by-field decoder then
/// decides, and names the problem.
#[inline(always)]
fn parse_ipv4_message(
    raw: &[u8],
    position: u64,
    version: MessageVersion,
) -> Option<MessageRef<'_>> {
    let (head, rest) = raw.split_first_chunk::<IPV4_HEAD_LEN>()?;
    let i32_at =
        |at: usize| i32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let i64_at = |at: usize| (i64::from(i32_at(at)) << 32) | i64::from(i32_at(at + 4) as u32);
    let host_at = |at: usize| {
        Host::v4(
            [head[at], head[at + 1], head[at + 2], head[at + 3]],
            i32_at(at + 4),
        )
    };
    let sys_flag = i32_at(36);
    if sys_flag & (sysflag::BORNHOST_V6 | sysflag::STOREHOST_V6) != 0 {
        return None;
    }
    let body_len = usize::try_from(i32_at(84)).ok()?;
    let (body, rest) = rest.split_at_checked(body_len)?;
    let (topic_len, rest) = match version {
        MessageVersion::V1 => {
            let (&[n], rest) = rest.split_first_chunk::<1>()?;
            (usize::try_from(n as i8).ok()?, rest)
        }
        MessageVersion::V2 => {
            let (&n, rest) = rest.split_first_chunk::<2>()?;
            (usize::try_from(i16::from_be_bytes(n)).ok()?, rest)
        }
    };
    let (topic, rest) = rest.split_at_checked(topic_len)?;
    let (&props_len, rest) = rest.split_first_chunk::<2>()?;
    let props_len = usize::try_from(i16::from_be_bytes(props_len)).ok()?;
    let total_size = i32_at(0);
    // The properties end the record, and TOTALSIZE says where.
    if rest.len() != props_len || usize::try_from(total_size).ok()? != raw.len() {
        return None;
    }
    Some(MessageRef {
        raw,
        position,
        version,
        total_size,
        body_crc: i32_at(8),
        queue_id: i32_at(12),
        flag: i32_at(16),
        queue_offset: i64_at(20),
        physical_offset: i64_at(28),
        sys_flag,
        born_timestamp: i64_at(40),
        born_host: host_at(48),
        store_timestamp: i64_at(56),
        store_host: host_at(64),
        reconsume_times: i32_at(72),
        prepared_transaction_offset: i64_at(76),
        body,
        topic: super::text(topic),
        properties: Properties(rest),
        body_len_pos: 84,
    })
}

/// Where a commitlog file's records sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SegmentKind {
    /// A `commitlog/` file: records one after another.
    #[default]
    Commitlog,
    /// A DLedger data file (`dledger-<selfId>/data/`): entries, each a 48-byte header and one
    /// record at the entry's pos + 48, the commitlog offset consume queues and index files use
    /// (DLEDGER.md 2 and 5). A walk's positions in such a file are entry positions.
    Dledger,
}

/// One commitlog file: where it is, the offset its name gives, its length on disk, its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub path: PathBuf,
    pub start: u64,
    pub len: u64,
    pub kind: SegmentKind,
    /// DLedger: the commitlog offset where the committed entries end. The broker serves no
    /// record of an entry at or after it (`DLedgerCommitLog.getMaxOffset` is the committed
    /// position), so walks end there as at the end of the data. `None`: every entry is served.
    pub served_end: Option<u64>,
}

impl Segment {
    /// A `commitlog/` file.
    pub fn commitlog(path: PathBuf, start: u64, len: u64) -> Self {
        Segment {
            path,
            start,
            len,
            kind: SegmentKind::Commitlog,
            served_end: None,
        }
    }

    /// Bytes before each record that are not part of it: the DLedger entry header.
    pub fn header_len(&self) -> usize {
        match self.kind {
            SegmentKind::Commitlog => 0,
            SegmentKind::Dledger => crate::format::dledger::HEADER_SIZE,
        }
    }

    /// The part of this file's bytes `buf` that the broker serves: all of it, or for a DLedger
    /// file the bytes before [`Segment::served_end`].
    pub fn served<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        match self.served_end {
            Some(e) => {
                let n = usize::try_from(e.saturating_sub(self.start)).unwrap_or(usize::MAX);
                &buf[..n.min(buf.len())]
            }
            None => buf,
        }
    }

    /// This file with every entry served, the uncommitted ones too (to show them).
    pub fn with_uncommitted(&self) -> Segment {
        Segment {
            served_end: None,
            ..self.clone()
        }
    }

    /// True when the record at commitlog offset `offset` of this file is not served (its
    /// DLedger entry is past the committed position).
    pub fn uncommitted(&self, offset: u64) -> bool {
        self.served_end
            .is_some_and(|e| offset.saturating_sub(self.header_len() as u64) >= e)
    }

    /// The walk position of the record at file position `record_pos`: the same in a
    /// `commitlog/` file, its entry's position in a DLedger file.
    pub fn walk_pos(&self, record_pos: usize) -> usize {
        record_pos.saturating_sub(self.header_len())
    }

    /// What is at walk position `at` of `buf` (this file's bytes): for a DLedger file, the
    /// entry there read as its record (an entry whose body is not one whole record is an
    /// error), the file-end marker as a blank (its size the bytes left) or the end of data.
    /// Error offsets are positions inside `buf`.
    #[inline(always)]
    pub fn record_at<'b>(
        &self,
        buf: &'b [u8],
        at: usize,
        check_crc: bool,
    ) -> Result<Record<'b>, ParseError> {
        match self.kind {
            SegmentKind::Commitlog => parse_record(buf, at, self.start, check_crc),
            SegmentKind::Dledger => dledger_record(buf, at, self.start, check_crc),
        }
    }

    /// Where the walk goes on after `m`, read at walk position `at`.
    pub fn after(&self, at: usize, m: &MessageRef<'_>) -> usize {
        at + self.header_len() + m.raw.len()
    }

    /// Map the file read-only for a walk over all of it. Pages are faulted in as the walk reaches
    /// them (the kernel maps several per fault and reads ahead): populating the map up front
    /// would also fill the holes of a sparse, pre-allocated file with zeroed pages.
    pub fn map(&self) -> Result<Mapped> {
        let m = Mapped::open(&self.path)?;
        m.advise_sequential();
        Ok(m)
    }
}

impl From<QueueFile> for Segment {
    fn from(f: QueueFile) -> Self {
        Segment::commitlog(f.path, f.start, f.len)
    }
}

/// The DLedger entry at `at` of `buf` read as the record it wraps (see [`Segment::record_at`]).
#[inline(always)]
fn dledger_record(
    buf: &[u8],
    at: usize,
    file_start: u64,
    check_crc: bool,
) -> Result<Record<'_>, ParseError> {
    use crate::format::dledger::entry::{parse_slot, Slot};
    use crate::format::dledger::HEADER_SIZE;
    let h = match parse_slot(buf, at, file_start)? {
        Slot::Entry(h) => h,
        Slot::FileEnd { left } => return Ok(Record::Blank { size: left }),
        Slot::EndOfData => return Ok(Record::EndOfData),
    };
    // `parse_slot` checked that the entry fits in `buf`.
    let entry = &buf[..at + h.size as usize];
    let body_at = at + HEADER_SIZE;
    match parse_record(entry, body_at, file_start, check_crc)? {
        Record::Message(m) if m.raw.len() == h.body_size as usize => Ok(Record::Message(m)),
        Record::Message(m) => Err(ParseError::new(
            body_at as u64,
            ErrorKind::Unexpected {
                what: "DLedger entry body",
                expected: format!("one record of the body's {} bytes", h.body_size),
                found: format!("a record of {} bytes", m.raw.len()),
            },
        )),
        _ => Err(ParseError::new(
            body_at as u64,
            ErrorKind::Unexpected {
                what: "DLedger entry body",
                expected: "a message record".into(),
                found: "a blank or zeros".into(),
            },
        )),
    }
}

/// A problem with how the commitlog files fit together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutIssue {
    /// Bytes `from..to` are covered by no file.
    Gap { from: u64, to: u64 },
    /// `second` starts before `first` ends.
    Overlap { first: PathBuf, second: PathBuf },
    /// A file whose length differs from the others' (`expected`).
    OddSize {
        path: PathBuf,
        len: u64,
        expected: u64,
    },
    /// A file whose name is not 20 digits.
    Foreign { path: PathBuf },
}

/// The commitlog folder: its files in offset order. Opening lists the folder, it reads no data.
#[derive(Debug, Clone)]
pub struct Commitlog {
    pub dir: PathBuf,
    pub segments: Vec<Segment>,
    pub foreign: Vec<PathBuf>,
    /// Entries that are not regular files (see [`crate::format::filename::Listing`]).
    pub odd: Vec<crate::format::entry::Entry>,
}

impl Commitlog {
    pub fn open(dir: &Path) -> Result<Self> {
        let l = list_queue_dir(dir)?;
        Ok(Commitlog {
            dir: dir.to_path_buf(),
            segments: l.files.into_iter().map(Segment::from).collect(),
            foreign: l.foreign,
            odd: l.odd,
        })
    }

    /// The file size most files have (the configured `mappedFileSizeCommitLog` on a healthy store).
    pub fn common_file_size(&self) -> Option<u64> {
        let mut counts: Vec<(u64, usize)> = Vec::new();
        for s in &self.segments {
            match counts.iter_mut().find(|(l, _)| *l == s.len) {
                Some((_, n)) => *n += 1,
                None => counts.push((s.len, 1)),
            }
        }
        counts
            .into_iter()
            .max_by_key(|&(l, n)| (n, l))
            .map(|(l, _)| l)
    }

    /// Gaps, overlaps, odd sizes and foreign names, given the configured file size.
    pub fn layout_issues(&self, file_size: u64) -> Vec<LayoutIssue> {
        let mut out: Vec<LayoutIssue> = self
            .foreign
            .iter()
            .map(|p| LayoutIssue::Foreign { path: p.clone() })
            .collect();
        for s in &self.segments {
            if s.len != file_size {
                out.push(LayoutIssue::OddSize {
                    path: s.path.clone(),
                    len: s.len,
                    expected: file_size,
                });
            }
        }
        for w in self.segments.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            let a_end = a.start.saturating_add(file_size.max(a.len));
            if b.start < a.start.saturating_add(a.len) {
                out.push(LayoutIssue::Overlap {
                    first: a.path.clone(),
                    second: b.path.clone(),
                });
            } else if b.start > a_end {
                out.push(LayoutIssue::Gap {
                    from: a_end,
                    to: b.start,
                });
            }
        }
        out
    }

    /// Where the broker stops serving records: the committed position of a DLedger log whose
    /// committed entries end before its data does (see [`Segment::served_end`]).
    pub fn served_end(&self) -> Option<u64> {
        self.segments.iter().find_map(|s| s.served_end)
    }

    /// Smallest commitlog offset (the first file's start), as `getMinPhyOffset`.
    pub fn min_offset(&self) -> u64 {
        self.segments.first().map(|s| s.start).unwrap_or(0)
    }

    /// The segment holding commitlog offset `offset`.
    pub fn segment_for(&self, offset: u64) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.start <= offset);
        let s = self.segments.get(i.checked_sub(1)?)?;
        (offset < s.start.saturating_add(s.len)).then_some(s)
    }

    /// End of data as the broker's recovery finds it (`recoverNormally`, then `getMaxPhyOffset`):
    /// walk from the third-to-last file; a blank record moves on to the next file, anything else
    /// (zeros, a bad record, the end of the last file) ends the data there. In a DLedger log the
    /// walk ends at the committed position if that comes first (`getMaxOffset`).
    pub fn max_offset(&self) -> Result<u64> {
        let first = self.segments.len().saturating_sub(3);
        let mut end = self.segments.get(first).map(|s| s.start).unwrap_or(0);
        for seg in &self.segments[first..] {
            let map = seg.map()?;
            let mut it = RecordIter::new(&map, seg, true);
            for r in it.by_ref() {
                if r.is_err() {
                    break;
                }
            }
            end = seg.start + it.valid_pos() as u64;
            if !matches!(it.end(), SegmentEnd::Blank { .. }) {
                break;
            }
        }
        Ok(end)
    }
}
