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

/// What [`write_index`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IndexWritten {
    /// Units written, one per entry from the ledger's first to its last.
    pub units: u64,
    pub files: u64,
}

/// Writes index units into a new folder as `DLedgerMmapFileStore` appends them: the unit of
/// entry `i` at byte `i * 32` of the file list, files of `file_size` bytes named by their start
/// offset (zeros after the last unit, as the broker's pre-allocated file). Units are given in
/// index order; the first may be any index (a log whose first files were deleted).
pub struct IndexFileWriter {
    dir: std::path::PathBuf,
    file_size: u64,
    current: Option<(u64, std::path::PathBuf, std::io::BufWriter<std::fs::File>)>,
    written: IndexWritten,
}

impl IndexFileWriter {
    /// Start writing into `dir`, which is created and must not exist yet.
    pub fn create(dir: &std::path::Path, file_size: u64) -> crate::format::error::Result<Self> {
        use crate::format::error::Error;
        std::fs::create_dir(dir).map_err(|e| Error::io(dir, e))?;
        Ok(IndexFileWriter {
            dir: dir.to_path_buf(),
            file_size: file_size.max(INDEX_UNIT as u64) / INDEX_UNIT as u64 * INDEX_UNIT as u64,
            current: None,
            written: IndexWritten::default(),
        })
    }

    /// Write the unit of one entry at `unit.index * 32`.
    pub fn push(&mut self, unit: &IndexUnit) -> crate::format::error::Result<()> {
        use crate::format::error::Error;
        use std::io::{Seek, SeekFrom, Write};
        let i = u64::try_from(unit.index).map_err(|_| {
            Error::data(
                &self.dir,
                0,
                ErrorKind::Invalid {
                    what: "DLedger entry index",
                    detail: format!("{} is negative", unit.index),
                },
            )
        })?;
        let at = i.saturating_mul(INDEX_UNIT as u64);
        let start = at / self.file_size * self.file_size;
        if self.current.as_ref().map(|c| c.0) != Some(start) {
            if let Some((_, p, w)) = self.current.take() {
                finish(&p, w)?;
            }
            let path = self
                .dir
                .join(crate::format::filename::offset_to_name(start));
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            f.set_len(self.file_size).map_err(|e| Error::io(&path, e))?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
            w.seek(SeekFrom::Start(at - start))
                .map_err(|e| Error::io(&path, e))?;
            self.written.files += 1;
            self.current = Some((start, path, w));
        }
        if let Some((_, p, w)) = self.current.as_mut() {
            w.write_all(&unit.to_bytes()).map_err(|e| Error::io(p, e))?;
        }
        self.written.units += 1;
        Ok(())
    }

    /// Flush and fsync the last file.
    pub fn finish(mut self) -> crate::format::error::Result<IndexWritten> {
        if let Some((_, p, w)) = self.current.take() {
            finish(&p, w)?;
        }
        Ok(self.written)
    }
}

/// Write the index of the entries of `layout`'s data into `dir` (a new folder) with
/// [`IndexFileWriter`]. One walk over the data ([`super::walk::walk`]): it ends where the
/// recovery's would, at the first entry that breaks the chain.
pub fn write_index(
    layout: &super::DledgerLayout,
    dir: &std::path::Path,
    file_size: u64,
) -> crate::format::error::Result<IndexWritten> {
    use std::ops::ControlFlow;
    let mut w = IndexFileWriter::create(dir, file_size)?;
    let mut failed = None;
    super::walk::walk(layout, |v| {
        if v.gap.is_some() || v.header.index < 0 {
            return ControlFlow::Break(());
        }
        match w.push(&IndexUnit::of(&v.header)) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    w.finish()
}

/// Flush and fsync one written index file.
fn finish(
    path: &std::path::Path,
    w: std::io::BufWriter<std::fs::File>,
) -> crate::format::error::Result<()> {
    use crate::format::error::Error;
    let f = w
        .into_inner()
        .map_err(|e| Error::io(path, e.into_error()))?;
    f.sync_all().map_err(|e| Error::io(path, e))
}
