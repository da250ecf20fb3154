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
    /// Where the data ended (zeros) or the walk stopped: data file number and position in it.
    pub stop_at: Option<(usize, usize)>,
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
    let mut c = EntryCursor::new(layout, first);
    while c.step()? {
        if let Some(v) = c.visit() {
            if f(&v).is_break() {
                break;
            }
        }
    }
    Ok(c.into_end())
}

/// The entries of the data files one at a time, driven by the caller (a walk over several
/// replicas steps each as it needs): the walk of [`walk`], one data file mapped at a time.
pub struct EntryCursor<'l> {
    layout: &'l DledgerLayout,
    /// The data file being walked.
    n: usize,
    map: Option<Mapped>,
    /// Where the next entry starts in the mapped file.
    at: usize,
    first_in_file: bool,
    chain: Continuity,
    /// The current entry: its position in the file, header and break of the chain.
    current: Option<(usize, EntryHeader, Option<Break>)>,
    end: WalkEnd,
    done: bool,
}

impl<'l> EntryCursor<'l> {
    /// A cursor before the first entry of data file number `first`.
    pub fn new(layout: &'l DledgerLayout, first: usize) -> Self {
        let files = &layout.data.files;
        EntryCursor {
            layout,
            n: first,
            map: None,
            at: 0,
            first_in_file: true,
            chain: Continuity::default(),
            current: None,
            end: WalkEnd {
                end_pos: files.get(first).map_or(layout.divide(), |f| f.start),
                ..WalkEnd::default()
            },
            done: false,
        }
    }

    /// A cursor before the entry at absolute position `pos` (an entry's start, as an index unit
    /// gives it); `None` when no data file holds `pos`.
    pub fn at_pos(layout: &'l DledgerLayout, pos: u64) -> Option<Self> {
        let files = &layout.data.files;
        let n = files
            .iter()
            .position(|f| f.start <= pos && pos < f.start.saturating_add(f.len))?;
        let mut c = EntryCursor::new(layout, n);
        c.at = usize::try_from(pos - files[n].start).ok()?;
        c.end.end_pos = pos;
        Some(c)
    }

    /// Move to the next entry; `Ok(false)` at the end of the data ([`EntryCursor::into_end`]
    /// says how it ended). Only a file that cannot be mapped is an error.
    pub fn step(&mut self) -> Result<bool> {
        self.current = None;
        let files = &self.layout.data.files;
        while !self.done {
            let Some(file) = files.get(self.n) else {
                self.done = true;
                break;
            };
            if self.map.is_none() {
                let map = Mapped::open(&file.path)?;
                map.advise_sequential();
                self.map = Some(map);
                self.first_in_file = true;
            }
            let Some(map) = &self.map else { break };
            match parse_slot(map, self.at, file.start) {
                Ok(Slot::Entry(h)) => {
                    let gap = self.chain.next(&h, self.first_in_file);
                    self.current = Some((self.at, h, gap));
                    self.end.entries += 1;
                    self.end.last = Some(h);
                    self.end.end_pos = file.start + (self.at + h.size as usize) as u64;
                    self.first_in_file = false;
                    self.at += h.size as usize;
                    return Ok(true);
                }
                Ok(Slot::FileEnd { .. }) => {
                    self.n += 1;
                    self.at = 0;
                    self.map = None;
                }
                Ok(Slot::EndOfData) => {
                    self.end.stop_at = Some((self.n, self.at));
                    self.end.files_after_end =
                        files[self.n + 1..].iter().map(|f| f.path.clone()).collect();
                    self.done = true;
                }
                Err(e) => {
                    self.end.stop_at = Some((self.n, self.at));
                    self.end.stopped = Some(e.in_file(&file.path, 0));
                    self.end.files_after_end =
                        files[self.n + 1..].iter().map(|f| f.path.clone()).collect();
                    self.done = true;
                }
            }
        }
        self.map = None;
        Ok(false)
    }

    /// The current entry.
    pub fn visit(&self) -> Option<Visit<'_>> {
        let (at, header, gap) = self.current.clone()?;
        let file = self.layout.data.files.get(self.n)?;
        let map = self.map.as_ref()?;
        Some(Visit {
            file: &file.path,
            at,
            header,
            body: map.get(at + super::HEADER_SIZE..at + header.size as usize)?,
            gap,
        })
    }

    /// The whole current entry: header and body, as written.
    pub fn entry_bytes(&self) -> Option<&[u8]> {
        let (at, header, _) = self.current.as_ref()?;
        self.map.as_ref()?.get(*at..*at + header.size as usize)
    }

    /// How the walk ended, so far.
    pub fn into_end(self) -> WalkEnd {
        self.end
    }

    /// How the walk ended, so far.
    pub fn end(&self) -> &WalkEnd {
        &self.end
    }
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
