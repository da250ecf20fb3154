//! Index units (`DLedgerEntryCoder.encodeIndex`): 32 bytes per entry at byte `index * 32` of the
//! index file list: magic, pos, size, index, term. No blank markers: the file size is a multiple
//! of 32.

use serde::Serialize;

use super::entry::EntryHeader;
use super::INDEX_UNIT;
use crate::format::bytes::{i32_at, i64_at};
use crate::format::error::{ErrorKind, ParseError};

/// One index unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IndexUnit {
    pub magic: i32,
    /// The entry's position in the data files.
    pub pos: i64,
    /// The entry's size.
    pub size: i32,
    pub index: i64,
    pub term: i64,
}

impl IndexUnit {
    /// Parse the unit at `at` of `buf`; the error names the offset when fewer than 32 bytes are
    /// left.
    pub fn parse(buf: &[u8], at: usize) -> Result<IndexUnit, ParseError> {
        let b = buf.get(at..).unwrap_or_default();
        Self::from_bytes(b).ok_or_else(|| {
            ParseError::new(
                at as u64,
                ErrorKind::Truncated {
                    what: "DLedger index unit",
                    needed: INDEX_UNIT as u64,
                    left: b.len() as u64,
                },
            )
        })
    }

    /// Decode the 32 bytes at the start of `b`; `None` when fewer are given.
    pub fn from_bytes(b: &[u8]) -> Option<IndexUnit> {
        Some(IndexUnit {
            magic: i32_at(b, 0)?,
            pos: i64_at(b, 4)?,
            size: i32_at(b, 12)?,
            index: i64_at(b, 16)?,
            term: i64_at(b, 24)?,
        })
    }

    /// The unit `encodeIndex` writes for an entry.
    pub fn of(h: &EntryHeader) -> IndexUnit {
        IndexUnit {
            magic: h.magic,
            pos: h.pos,
            size: h.size,
            index: h.index,
            term: h.term,
        }
    }

    pub fn to_bytes(&self) -> [u8; INDEX_UNIT] {
        let mut b = [0u8; INDEX_UNIT];
        b[0..4].copy_from_slice(&self.magic.to_be_bytes());
        b[4..12].copy_from_slice(&self.pos.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..24].copy_from_slice(&self.index.to_be_bytes());
        b[24..32].copy_from_slice(&self.term.to_be_bytes());
        b
    }

    /// An all-zero unit: never written.
    pub fn is_empty(&self) -> bool {
        *self == IndexUnit::from_bytes(&[0; INDEX_UNIT]).unwrap_or(*self)
    }

    /// The first field where this unit and the entry disagree (the recovery's comparison:
    /// magic, pos, size, index, term), with the unit's and the entry's values.
    pub fn disagreement(&self, h: &EntryHeader) -> Option<(&'static str, i64, i64)> {
        [
            ("magic", self.magic.into(), h.magic.into()),
            ("pos", self.pos, h.pos),
            ("size", self.size.into(), h.size.into()),
            ("index", self.index, h.index),
            ("term", self.term, h.term),
        ]
        .into_iter()
        .find(|(_, u, e)| u != e)
    }
}
