//! The invariants of a DLedger log, as [`Finding`]s with file and byte offset: file names and
//! sizes of `data/` and `index/`, every entry as `DLedgerMmapFileStore.recover` checks it
//! (magic, size, pos, index one more than the last, term not lower), every index unit against
//! its entry, zeros after the last entry, the checkpoint within the ledger, `currterm` readable.
//!
//! One walk over the data, one data file and one index file mapped at a time; findings go to the
//! caller's sink as they are found. The body CRC of the wrapped record is the commitlog record
//! check's (the data files are segments of the commitlog), not repeated here.

use std::ops::ControlFlow;
use std::path::Path;

use super::walk::{walk, IndexReader, WalkEnd};
use super::{DledgerLayout, INDEX_UNIT};
use crate::format::error::{Error, ErrorKind, Result};
use crate::format::filename::Listing;
use crate::format::finding::{Code, Finding, Severity};
use crate::format::mapped::Mapped;

/// What the check saw, for the caller's summary and the recovery explanation.
#[derive(Debug, Default)]
pub struct Checked {
    pub entries: u64,
    /// The last entry of the chain (index, term).
    pub last: Option<(i64, i64)>,
    /// Where the last entry ends (the DLedger max wrote position).
    pub end_pos: u64,
}

/// Where recovery cuts, for the broker action of an entry finding.
fn cut_action(end: u64) -> String {
    format!(
        "recovery stops here: the data is cut at position {end} and this entry and every later \
         one are dropped (a replica is then caught up from the group's leader)"
    )
}

/// Check `layout`, sending each finding to `out`. Only a file that cannot be read is an error.
pub fn check(layout: &DledgerLayout, out: &mut dyn FnMut(Finding)) -> Result<Checked> {
    files(
        &layout.data,
        layout.geometry.data_file_size.value,
        "data",
        1,
        out,
    );
    files(
        &layout.index,
        layout.geometry.index_file_size.value,
        "index",
        INDEX_UNIT as u64,
        out,
    );

    let mut index = IndexReader::new(layout);
    let mut index_failed = false;
    let mut chain_end = None;
    let end = walk(layout, |v| {
        let h = &v.header;
        if let Some(b) = &v.gap {
            let code = match b.what {
                "index" => Code::DledgerIndexGap,
                "pos" => Code::DledgerPosMismatch,
                _ => Code::DledgerTermDecrease,
            };
            let field = match code {
                Code::DledgerIndexGap => 8,
                Code::DledgerPosMismatch => 24,
                _ => 16,
            };
            let cut = *chain_end.get_or_insert(h.pos.max(0) as u64);
            out(Finding::new(
                code,
                v.file,
                (v.at + field) as u64,
                format!(
                    "entry at pos {}: {} expected {}, found {}",
                    h.pos, b.what, b.expected, b.found
                ),
            )
            .with_action(cut_action(cut)));
        }
        // The unit of every entry, as recovery compares them (only the first disagreement:
        // recovery rebuilds the index from there, so later units follow from it).
        if !index_failed {
            match index.unit(h.index) {
                Ok(Some(u)) => {
                    if let Some((what, unit, entry)) = u.disagreement(h) {
                        index_failed = true;
                        let (file, at) = unit_place(layout, h.index);
                        out(Finding::new(
                            Code::DledgerIndexMismatch,
                            &file,
                            at,
                            format!(
                                "index unit of entry {}: {what} is {unit}, the entry's is {entry}",
                                h.index
                            ),
                        )
                        .with_action(
                            "recovery truncates the index at this unit and rebuilds it from the \
                             data (no entry is lost)",
                        ));
                    }
                }
                Ok(None) => {
                    index_failed = true;
                    let (file, at) = unit_place(layout, h.index);
                    out(Finding::new(
                        Code::DledgerIndexMismatch,
                        &file,
                        at,
                        format!("no index file holds the unit of entry {}", h.index),
                    )
                    .with_action("recovery rebuilds the index from the data from this entry on"));
                }
                Err(e) => {
                    index_failed = true;
                    out(error_finding(Code::DledgerIndexMismatch, &e, &layout.dir));
                }
            }
        }
        ControlFlow::Continue(())
    })?;
    if let Some(e) = &end.stopped {
        let code = match e {
            Error::Data {
                kind: ErrorKind::Unexpected { what, .. },
                ..
            } if what.contains("magic") => Code::DledgerEntryMagic,
            Error::Data {
                kind: ErrorKind::Unexpected { what, .. },
                ..
            } if what.contains("pos") => Code::DledgerPosMismatch,
            _ => Code::DledgerEntrySize,
        };
        let cut = chain_end.unwrap_or(end.end_pos);
        out(error_finding(code, e, &layout.dir).with_action(cut_action(cut)));
    } else {
        tail(layout, &end, out)?;
    }
    props(layout, &end, out);
    Ok(Checked {
        entries: end.entries,
        last: end.last.map(|h| (h.index, h.term)),
        end_pos: end.end_pos,
    })
}

/// A finding for a read error: its file and offset when it names them.
fn error_finding(code: Code, e: &Error, dir: &Path) -> Finding {
    match e {
        Error::Data { path, offset, .. } => Finding::new(code, path, *offset, e.to_string()),
        _ => Finding::new(code, dir, 0, e.to_string()),
    }
}

/// The index file and offset in it of entry `index`'s unit (the folder when no file holds it).
fn unit_place(layout: &DledgerLayout, index: i64) -> (std::path::PathBuf, u64) {
    let off = (index.max(0) as u64).saturating_mul(INDEX_UNIT as u64);
    layout
        .index
        .files
        .iter()
        .find(|f| f.start <= off && off < f.start.saturating_add(f.len))
        .map_or((layout.dir.join(super::INDEX_DIR), off), |f| {
            (f.path.clone(), off - f.start)
        })
}

/// Names and sizes of one folder's files: 20-digit names, each a multiple of the file size and
/// where the previous file ends; every file of the same size (a multiple of `unit`).
fn files(l: &Listing, size: u64, what: &str, unit: u64, out: &mut dyn FnMut(Finding)) {
    for p in &l.foreign {
        out(Finding::new(
            Code::DledgerFileName,
            p,
            0,
            format!("a file in the DLedger {what} folder whose name is not a 20-digit offset"),
        )
        .with_action("DLedger's file list fails to load it; the broker does not start"));
    }
    for e in &l.odd {
        out(Finding::new(
            Code::DledgerFileName,
            &e.path,
            0,
            format!("an entry of the DLedger {what} folder that is not a regular file"),
        ));
    }
    let mut prev_end: Option<u64> = None;
    for f in &l.files {
        if size > 0 && f.start % size != 0 {
            out(Finding::new(
                Code::DledgerFileName,
                &f.path,
                0,
                format!(
                    "DLedger {what} file starts at {}, not a multiple of the file size {size}",
                    f.start
                ),
            ));
        } else if let Some(p) = prev_end.filter(|&p| p != f.start) {
            out(Finding::new(
                Code::DledgerFileName,
                &f.path,
                0,
                format!(
                    "DLedger {what} file starts at {}, the previous one ends at {p}",
                    f.start
                ),
            )
            .with_action("checkSelf fails: the files are not consecutive"));
        }
        if f.len != size || f.len % unit != 0 {
            out(Finding::new(
                Code::DledgerFileSize,
                &f.path,
                f.len.min(size),
                format!("DLedger {what} file is {} bytes, expected {size}", f.len),
            ));
        }
        prev_end = Some(f.start.saturating_add(size));
    }
}

/// Zeros after the last entry, and no bytes in data files after the one where the data ends.
fn tail(layout: &DledgerLayout, end: &WalkEnd, out: &mut dyn FnMut(Finding)) -> Result<()> {
    let files = &layout.data.files;
    let Some((n, at)) = end.stop_at else {
        return Ok(());
    };
    for (i, f) in files.iter().enumerate().skip(n) {
        let from = if i == n { at } else { 0 };
        let map = Mapped::open(&f.path)?;
        let rest = map.get(from..).unwrap_or_default();
        if let Some(k) = rest.iter().position(|&b| b != 0) {
            let offset = (from + k) as u64;
            // After the last entry: a warning (the next append overwrites the bytes); a whole
            // file after the end of the data: an error (recovery deletes it).
            let severity = if i == n {
                Severity::Warning
            } else {
                Severity::Error
            };
            out(Finding::new(
                Code::DledgerBlankTail,
                &f.path,
                offset,
                if i == n {
                    format!(
                        "non-zero bytes at {offset}, after the last entry (the data ends at {})",
                        end.end_pos
                    )
                } else {
                    format!(
                        "data file after the end of the data (it ends at {}) holds bytes at {offset}",
                        end.end_pos
                    )
                },
            )
            .with_severity(severity)
            .with_action(if i == n {
                "recovery stops at the last entry; the next append overwrites these bytes"
            } else {
                "recovery deletes this file"
            }));
        }
    }
    Ok(())
}

/// The checkpoint within the ledger, `currterm` readable.
fn props(layout: &DledgerLayout, end: &WalkEnd, out: &mut dyn FnMut(Finding)) {
    let cp_path = layout.dir.join(super::CHECKPOINT_FILE);
    let last = end.last.map(|h| h.index);
    match layout.checkpoint() {
        Err(e) => out(error_finding(
            Code::DledgerCheckpointUnreadable,
            &e,
            &cp_path,
        )),
        Ok(None) => {}
        Ok(Some(cp)) => {
            let last = last.unwrap_or(-1);
            for (key, v) in [
                ("committedIndex", cp.committed_index),
                ("endIndex", cp.end_index),
            ] {
                if let Some(v) = v.filter(|&v| v > last) {
                    out(Finding::new(
                        Code::DledgerCheckpointBeyond,
                        &cp_path,
                        0,
                        format!(
                            "checkpoint {key}={v} is past the last entry of the data ({last}): \
                             entries {}..={v} are missing",
                            last + 1
                        ),
                    )
                    .with_action(format!(
                        "recovery clamps the committed index to the ledger end {last}"
                    )));
                }
            }
        }
    }
    let term_path = layout.dir.join(super::CURRTERM_FILE);
    match layout.term() {
        Err(e) => out(error_finding(
            Code::DledgerCurrtermUnreadable,
            &e,
            &term_path,
        )),
        Ok(None) if end.entries > 0 => out(Finding::new(
            Code::DledgerCurrtermUnreadable,
            &term_path,
            0,
            "currterm is missing while the log holds entries",
        )),
        Ok(Some(t)) if t.curr_term.is_none() && end.entries > 0 => out(Finding::new(
            Code::DledgerCurrtermUnreadable,
            &term_path,
            0,
            "currterm has no currTerm",
        )),
        _ => {}
    }
}
