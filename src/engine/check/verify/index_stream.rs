//! The index files as one stream of entries in commitlog order, walked beside the records by a
//! cursor, and the findings about index files and their entries.

use std::path::{Path, PathBuf};

use super::scan::Merged;
use super::Sink;
use crate::engine::check::recovery;
use crate::engine::store::{paths, Store};
use crate::format::finding::{Code, Finding, Severity};
use crate::format::geometry::Source;
use crate::format::indexfile::{
    check_file_with, check_sequence, IndexEntry, IndexFile, IndexGeometry, IndexHeader,
};
use crate::format::mapped::Mapped;

pub(super) struct IdxFile {
    path: PathBuf,
    pub(super) file: IndexFile<Mapped>,
    /// Entries `1..used` are in use.
    pub(super) used: u32,
}

impl IdxFile {
    #[inline]
    fn entry(&self, geometry: IndexGeometry, n: u32) -> Option<IndexEntry> {
        let at = usize::try_from(geometry.entry_pos(n)).ok()?;
        IndexEntry::from_prefix(self.file.bytes().get(at..)?)
    }
}

pub(super) struct IndexStream {
    pub(super) files: Vec<IdxFile>,
    pub(super) geometry: IndexGeometry,
    /// Offset ranges of index files that could not be opened: records there are not checked.
    unreadable: Vec<(i64, i64)>,
    /// Largest offset any entry points at (records after it are not indexed yet).
    pub(super) coverage_end: Option<i64>,
    pub(super) first_offset: Option<i64>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Cursor {
    f: usize,
    pub(super) n: u32,
}

impl IndexStream {
    #[inline]
    pub(super) fn entry(&self, c: Cursor) -> Option<IndexEntry> {
        let f = self.files.get(c.f)?;
        if c.n >= f.used {
            return None;
        }
        f.entry(self.geometry, c.n)
    }

    /// Start loading the entries a few places after `c` (the next records read them).
    pub(super) fn prefetch_ahead(&self, c: Cursor) {
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

    pub(super) fn advance(&self, c: Cursor) -> Cursor {
        self.normalize(Cursor { f: c.f, n: c.n + 1 })
    }

    /// The first entry (in file order) whose offset is at least `offset`.
    pub(super) fn seek(&self, offset: u64) -> Cursor {
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

    pub(super) fn entry_pos(&self, c: Cursor) -> u64 {
        self.geometry.entry_pos(c.n)
    }

    pub(super) fn path(&self, c: Cursor) -> &Path {
        self.files
            .get(c.f)
            .map_or(Path::new(""), |f| f.path.as_path())
    }

    pub(super) fn begin_timestamp(&self, c: Cursor) -> i64 {
        self.files
            .get(c.f)
            .map_or(0, |f| f.file.header().begin_timestamp)
    }

    pub(super) fn is_unreadable_range(&self, offset: u64) -> bool {
        let o = offset as i64;
        self.unreadable.iter().any(|&(b, e)| o >= b && o <= e)
    }
}

pub(super) fn open_index(store: &Store, report: bool, sink: &mut Sink) -> Option<IndexStream> {
    let g = &store.geometry;
    let geometry = IndexGeometry::new(g.index_slots.value, g.index_entries.value);
    let dir = store.root.join(paths::INDEX);
    if geometry.validate().is_err() {
        if report {
            sink.push(Finding::new(
                Code::IndexGeometry,
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
                            Code::IndexBadFile,
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
            Code::IndexGeometry,
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

/// The structure of one index file (`check_file`: header, slots, chains, zeros).
pub(super) fn index_file_findings(ix: &IndexStream, f: &IdxFile) -> Vec<Finding> {
    let bytes = f.file.bytes();
    check_file_with(bytes, ix.geometry, |from| {
        recovery::first_nonzero_from(bytes, from, &f.path)
    })
    .into_iter()
    .map(|p| {
        let code = if p.offset < 40 {
            Code::IndexHeaderMismatch
        } else {
            Code::IndexBadChain
        };
        Finding::new(code, &f.path, p.offset, p.what)
            .with_action("the broker trusts the file: lookups through this part miss or loop")
    })
    .collect()
}

/// Entries of one index file outside the commitlog: below its first offset (expired) or past
/// the end of its last file.
pub(super) fn entries_outside_commitlog(
    store: &Store,
    ix: &IndexStream,
    f: &IdxFile,
) -> Vec<Finding> {
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
            Code::IndexStaleEntry,
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
                Code::IndexDanglingEntry,
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
pub(super) struct KeyBits {
    low: u64,
    high: Vec<bool>,
}

impl KeyBits {
    pub(super) fn new(n: usize) -> Self {
        KeyBits {
            low: 0,
            high: vec![false; n.saturating_sub(64)],
        }
    }

    pub(super) fn get(&self, i: usize) -> bool {
        match i.checked_sub(64) {
            None => self.low & (1 << i) != 0,
            Some(j) => self.high.get(j).copied().unwrap_or(false),
        }
    }

    pub(super) fn set(&mut self, i: usize) {
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

pub(super) fn index_findings(
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
                    Code::IndexMissingKey,
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
            Code::IndexHeaderMismatch,
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
                        Code::IndexLag,
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
