//! Data file entries (`DLedgerEntryCoder.encode`): a 48-byte header, then the body, one complete
//! commitlog record whose PHYSICALOFFSET is the entry's pos + 48. Where the next entry does not
//! fit with 8 bytes to spare, the writer leaves a file-end marker (magic -1, then the bytes left)
//! and goes on in the next file; after the last entry of the last file the bytes are zero.

use serde::Serialize;

use super::{BLANK_LEN, BLANK_MAGIC, HEADER_SIZE, MAGIC};
use crate::format::bytes::{i32_at, i64_at};
use crate::format::error::{ErrorKind, ParseError};

/// The fixed header of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EntryHeader {
    pub magic: i32,
    /// Whole entry: header + body.
    pub size: i32,
    /// Raft log index: 0, 1, 2, ... without gaps.
    pub index: i64,
    /// Leader term that appended it.
    pub term: i64,
    /// Absolute byte position of the entry (file start + position in the file).
    pub pos: i64,
    /// Reserved, 0.
    pub channel: i32,
    /// Never computed by DLedger 0.3.1.x: 0.
    pub chain_crc: i32,
    /// Never computed by DLedger 0.3.1.x: 0.
    pub body_crc: i32,
    pub body_size: i32,
}

impl EntryHeader {
    /// Decode the 48 header bytes at the start of `b`; `None` when fewer are given.
    pub fn from_bytes(b: &[u8]) -> Option<EntryHeader> {
        Some(EntryHeader {
            magic: i32_at(b, 0)?,
            size: i32_at(b, 4)?,
            index: i64_at(b, 8)?,
            term: i64_at(b, 16)?,
            pos: i64_at(b, 24)?,
            channel: i32_at(b, 32)?,
            chain_crc: i32_at(b, 36)?,
            body_crc: i32_at(b, 40)?,
            body_size: i32_at(b, 44)?,
        })
    }

    /// The 48 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..4].copy_from_slice(&self.magic.to_be_bytes());
        b[4..8].copy_from_slice(&self.size.to_be_bytes());
        b[8..16].copy_from_slice(&self.index.to_be_bytes());
        b[16..24].copy_from_slice(&self.term.to_be_bytes());
        b[24..32].copy_from_slice(&self.pos.to_be_bytes());
        b[32..36].copy_from_slice(&self.channel.to_be_bytes());
        b[36..40].copy_from_slice(&self.chain_crc.to_be_bytes());
        b[40..44].copy_from_slice(&self.body_crc.to_be_bytes());
        b[44..48].copy_from_slice(&self.body_size.to_be_bytes());
        b
    }

    /// Where the wrapped record starts: the commitlog offset consume queues point at.
    pub fn record_offset(&self) -> i64 {
        self.pos.saturating_add(HEADER_SIZE as i64)
    }
}

/// What is found at a position of a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// An entry; its body is `buf[at + 48 .. at + size]`.
    Entry(EntryHeader),
    /// The file-end marker: `left` as written (the bytes from the marker to the end of the file).
    FileEnd { left: i32 },
    /// Zero magic and size, or nothing left: no more data in this file.
    EndOfData,
}

/// Parse what is at `at` of `buf` (one data file starting at `file_start`), as the broker's
/// recovery checks it: magic 1, a size that holds the header and fits in the file, body size +
/// 48 == size, pos == file start + `at`. Error offsets are positions inside `buf`.
pub fn parse_slot(buf: &[u8], at: usize, file_start: u64) -> Result<Slot, ParseError> {
    let left = buf.len().saturating_sub(at);
    let Some(magic) = i32_at(buf, at) else {
        return Ok(Slot::EndOfData);
    };
    if magic == BLANK_MAGIC {
        let left =
            i32_at(buf, at + 4).ok_or_else(|| truncated(at, "file-end marker", BLANK_LEN, left))?;
        return Ok(Slot::FileEnd { left });
    }
    let size = i32_at(buf, at + 4);
    if magic == 0 && matches!(size, Some(0) | None) {
        return Ok(Slot::EndOfData);
    }
    if magic != MAGIC {
        return Err(ParseError::new(
            at as u64,
            ErrorKind::Unexpected {
                what: "DLedger entry magic",
                expected: "1 (entry) or -1 (file end)".into(),
                found: magic.to_string(),
            },
        ));
    }
    if left < HEADER_SIZE {
        return Err(truncated(at, "DLedger entry header", HEADER_SIZE, left));
    }
    let h = EntryHeader::from_bytes(&buf[at..])
        .ok_or_else(|| truncated(at, "DLedger entry header", HEADER_SIZE, left))?;
    if h.size < HEADER_SIZE as i32 || h.size as usize > left {
        return Err(ParseError::new(
            at as u64 + 4,
            ErrorKind::BadSize {
                found: h.size.into(),
                min: HEADER_SIZE as i64,
                max: left as i64,
            },
        ));
    }
    if i64::from(h.body_size) + HEADER_SIZE as i64 != i64::from(h.size) {
        return Err(ParseError::new(
            at as u64 + 44,
            ErrorKind::SizeMismatch {
                stored: h.size,
                computed: i64::from(h.body_size) + HEADER_SIZE as i64,
            },
        ));
    }
    let here = file_start.saturating_add(at as u64);
    if h.pos as u64 != here || h.pos < 0 {
        return Err(ParseError::new(
            at as u64 + 24,
            ErrorKind::Unexpected {
                what: "DLedger entry pos",
                expected: here.to_string(),
                found: h.pos.to_string(),
            },
        ));
    }
    Ok(Slot::Entry(h))
}

fn truncated(at: usize, what: &'static str, needed: usize, left: usize) -> ParseError {
    ParseError::new(
        at as u64,
        ErrorKind::Truncated {
            what,
            needed: needed as u64,
            left: left as u64,
        },
    )
}

/// One entry's bytes as `DLedgerEntryCoder.encode` writes them (CRCs and channel 0).
pub fn encode_entry(index: i64, term: i64, pos: i64, body: &[u8]) -> Vec<u8> {
    let size = (HEADER_SIZE + body.len()) as i32;
    let h = EntryHeader {
        magic: MAGIC,
        size,
        index,
        term,
        pos,
        channel: 0,
        chain_crc: 0,
        body_crc: 0,
        body_size: body.len() as i32,
    };
    let mut v = Vec::with_capacity(size as usize);
    v.extend_from_slice(&h.to_bytes());
    v.extend_from_slice(body);
    v
}

/// The file-end marker for `left` bytes left in the file (`MmapFileList.preAppend`).
pub fn encode_file_end(left: i32) -> [u8; BLANK_LEN] {
    let mut b = [0u8; BLANK_LEN];
    b[0..4].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&left.to_be_bytes());
    b
}

/// What follows one entry in the log, against the one before it, as the recovery walk demands:
/// index one more, term not lower, pos right after it (or at the start of the next file).
#[derive(Debug, Default, Clone, Copy)]
pub struct Continuity {
    last: Option<EntryHeader>,
}

/// A break between two consecutive entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Break {
    pub what: &'static str,
    pub expected: i64,
    pub found: i64,
}

impl Continuity {
    /// Take the next entry; `next_file` when it is the first entry of a later file (its pos is
    /// then not checked against the previous entry's end).
    pub fn next(&mut self, h: &EntryHeader, next_file: bool) -> Option<Break> {
        let prev = self.last.replace(*h)?;
        if h.index != prev.index.saturating_add(1) {
            return Some(Break {
                what: "index",
                expected: prev.index.saturating_add(1),
                found: h.index,
            });
        }
        if h.term < prev.term {
            return Some(Break {
                what: "term (not lower than the previous entry's)",
                expected: prev.term,
                found: h.term,
            });
        }
        let end = prev.pos.saturating_add(prev.size.into());
        if !next_file && h.pos != end {
            return Some(Break {
                what: "pos",
                expected: end,
                found: h.pos,
            });
        }
        None
    }

    /// The last entry taken.
    pub fn last(&self) -> Option<&EntryHeader> {
        self.last.as_ref()
    }
}
