//! Walking the data files in order, one file mapped at a time, as the broker's recovery walks
//! them: a file-end marker moves on to the next file, zeros end the data, the first bad entry
//! stops the walk (it is handed back, not thrown). The index is read beside it, unit by unit.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use super::entry::{parse_slot, Break, Continuity, EntryHeader, Slot};
use super::index::IndexUnit;
use super::{DledgerLayout, INDEX_UNIT};
use crate::format::error::{Error, Result};
use crate::format::filename::QueueFile;
use crate::format::mapped::Mapped;

/// One entry met by [`walk`].
#[derive(Debug)]
pub struct Visit<'a> {
    /// The data file and the entry's position in it.
    pub file: &'a Path,
    pub at: usize,
    pub header: EntryHeader,
    /// The wrapped commitlog record.
    pub body: &'a [u8],
    /// How it breaks the chain of entries before it, if it does.
    pub gap: Option<Break>,
}

/// How a walk ended.
#[derive(Debug, Default)]
pub struct WalkEnd {
    pub entries: u64,
    /// The last entry walked.
    pub last: Option<EntryHeader>,
    /// The byte position after the last entry (the DLedger max wrote position).
    pub end_pos: u64,
    /// Bad bytes where the walk stopped (file, offset, what was expected).
    pub stopped: Option<Error>,
    /// Data files after the one where the data ended.
    pub files_after_end: Vec<PathBuf>,
}

/// Walk every entry of the data files, calling `f` for each; `f` may stop the walk early.
/// I/O errors (a file that cannot be mapped) are errors; bad bytes end the walk in
/// [`WalkEnd::stopped`].
pub fn walk(
    layout: &DledgerLayout,
    f: impl FnMut(&Visit<'_>) -> ControlFlow<()>,
) -> Result<WalkEnd> {
    walk_from(layout, 0, f)
}

/// [`walk`] from the start of data file number `first` on.
pub fn walk_from(
    layout: &DledgerLayout,
    first: usize,
    mut f: impl FnMut(&Visit<'_>) -> ControlFlow<()>,
) -> Result<WalkEnd> {
    let files = &layout.data.files;
    let mut end = WalkEnd {
        end_pos: files.get(first).map_or(layout.divide(), |f| f.start),
        ..WalkEnd::default()
    };
    let mut chain = Continuity::default();
    for (n, file) in files.iter().enumerate().skip(first) {
        let map = Mapped::open(&file.path)?;
        map.advise_sequential();
        let buf: &[u8] = &map;
        let mut at = 0usize;
        let mut first = true;
        loop {
            match parse_slot(buf, at, file.start) {
                Ok(Slot::Entry(h)) => {
                    let size = h.size as usize;
                    let gap = chain.next(&h, first);
                    let v = Visit {
                        file: &file.path,
                        at,
                        header: h,
                        body: &buf[at + super::HEADER_SIZE..at + size],
                        gap,
                    };
                    end.entries += 1;
                    end.last = Some(h);
                    end.end_pos = file.start + (at + size) as u64;
                    if f(&v).is_break() {
                        return Ok(end);
                    }
                    first = false;
                    at += size;
                }
                Ok(Slot::FileEnd { .. }) => break,
                Ok(Slot::EndOfData) => {
                    end.files_after_end = files[n + 1..].iter().map(|f| f.path.clone()).collect();
                    return Ok(end);
                }
                Err(e) => {
                    end.stopped = Some(e.in_file(&file.path, 0));
                    end.files_after_end = files[n + 1..].iter().map(|f| f.path.clone()).collect();
                    return Ok(end);
                }
            }
        }
    }
    Ok(end)
}

/// Reads index units in ascending order, one index file mapped at a time.
pub struct IndexReader<'a> {
    files: &'a [QueueFile],
    current: Option<(usize, Mapped)>,
}

impl<'a> IndexReader<'a> {
    pub fn new(layout: &'a DledgerLayout) -> Self {
        IndexReader {
            files: &layout.index.files,
            current: None,
        }
    }

    /// The unit of entry `index`: `Ok(None)` when no index file holds its bytes. A unit cut by
    /// the end of its file is an error naming the file and offset.
    pub fn unit(&mut self, index: i64) -> Result<Option<IndexUnit>> {
        let Some(off) = u64::try_from(index)
            .ok()
            .and_then(|i| i.checked_mul(INDEX_UNIT as u64))
        else {
            return Ok(None);
        };
        let Some(n) = self
            .files
            .iter()
            .position(|f| f.start <= off && off < f.start.saturating_add(f.len))
        else {
            return Ok(None);
        };
        if self.current.as_ref().map(|(i, _)| *i) != Some(n) {
            let map = Mapped::open(&self.files[n].path)?;
            self.current = Some((n, map));
        }
        let Some((_, map)) = &self.current else {
            return Ok(None);
        };
        let file = &self.files[n];
        let at = (off - file.start) as usize;
        IndexUnit::parse(map, at)
            .map(Some)
            .map_err(|e| e.in_file(&file.path, 0))
    }

    /// The first index past the units the files hold.
    pub fn capacity(&self) -> i64 {
        self.files
            .last()
            .map_or(0, |f| ((f.start + f.len) / INDEX_UNIT as u64) as i64)
    }
}
