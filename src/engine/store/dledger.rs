//! What a DLedger-mode store's log holds, as the broker's `DLedgerMmapFileStore.recover` would
//! find it at its next start: the ledger's first and last entry, the committed index and the
//! position the broker serves up to, the divide of a converted store. Reads the first entry,
//! walks the data from where the recovery starts (the third-to-last file, or the nearest earlier
//! one whose first entry agrees with its index unit) to the first entry that breaks the chain,
//! and reads the committed entry's index unit.

use std::ops::ControlFlow;

use serde::Serialize;

use super::Store;
use crate::format::dledger::entry::{parse_slot, Slot};
use crate::format::dledger::start::recovery_start;
use crate::format::dledger::walk::{walk_from, IndexReader};
use crate::format::dledger::{CommitRule, DledgerGeometry, DledgerLayout};
use crate::format::error::Result;
use crate::format::mapped::Mapped;

/// A file of the log: name, start offset, length.
#[derive(Debug, Clone, Serialize)]
pub struct LogFile {
    pub name: String,
    pub start: u64,
    pub size: u64,
}

/// The DLedger part of `info`.
#[derive(Debug, Clone, Serialize)]
pub struct DledgerInfo {
    pub self_id: String,
    /// `currterm`: the member's term and vote (null when the file is missing).
    pub current_term: Option<i64>,
    pub vote_leader: Option<String>,
    /// Index of the first entry of the first data file (`ledgerBeginIndex`).
    pub ledger_begin_index: Option<i64>,
    /// The last entry the walk keeps (`ledgerEndIndex`, `ledgerEndTerm`).
    pub ledger_end_index: Option<i64>,
    pub ledger_end_term: Option<i64>,
    /// `checkpoint` as written: `committedIndex` and `endIndex`.
    pub checkpoint_committed_index: Option<i64>,
    pub checkpoint_end_index: Option<i64>,
    /// The committed index the broker starts with (the checkpoint's, at most the ledger end).
    pub committed_index: Option<i64>,
    /// Where the committed entry ends: the broker serves records below it (`getMaxOffset`).
    pub committed_pos: Option<u64>,
    /// Where the last entry ends (`dataMaxWrotePosition`).
    pub data_end_pos: u64,
    /// Where the index ends when cut at the ledger end (`indexMaxWrotePosition`).
    pub index_end_pos: u64,
    /// `dividedCommitlogOffset`: the first data file's start.
    pub divided_commitlog_offset: u64,
    /// Converted store: records below the divide are in `commitlog/`.
    pub converted: bool,
    /// Which entries count as committed at the broker's next start (`--broker-conf`'s
    /// `dLegerPeers`), and where the records it then serves end (a commitlog offset).
    pub commit_rule: CommitRule,
    pub served_end: u64,
    pub geometry: DledgerGeometry,
    pub data_files: Vec<LogFile>,
    pub index_files: Vec<LogFile>,
    /// Where the data is not what the recovery expects (it stops there).
    pub notes: Vec<String>,
}

fn files(l: &crate::format::filename::Listing) -> Vec<LogFile> {
    l.files
        .iter()
        .map(|f| LogFile {
            name: f
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            start: f.start,
            size: f.len,
        })
        .collect()
}

/// Where the broker stops serving records after its next start, by the layout's
/// [`CommitRule`]: `None` for a single-replica group (its whole log is committed); else the end
/// of the entry the checkpoint's `committedIndex` names, found through its index unit (or, when
/// the unit does not name it, by walking the data), at most the end of the log. Without a
/// committed index nothing of the DLedger log is served: the divide.
pub fn served_end(layout: &DledgerLayout) -> Result<Option<u64>> {
    if layout.commit_rule == CommitRule::SingleReplica {
        return Ok(None);
    }
    let cp = layout.checkpoint()?.unwrap_or_default();
    let Some(c) = cp.committed_index.filter(|&c| c >= 0) else {
        return Ok(Some(layout.divide()));
    };
    if let Some(u) = IndexReader::new(layout).unit(c)? {
        if u.index == c && u.magic == crate::format::dledger::MAGIC {
            if let Some(f) = layout
                .data
                .files
                .iter()
                .find(|f| f.start as i64 <= u.pos && u.pos < (f.start + f.len) as i64)
            {
                let m = Mapped::open(&f.path)?;
                if let Ok(Slot::Entry(h)) =
                    parse_slot(&m, (u.pos as u64 - f.start) as usize, f.start)
                {
                    if h.index == c {
                        return Ok(Some((h.pos + i64::from(h.size)) as u64));
                    }
                }
            }
        }
    }
    let mut found = None;
    walk_from(layout, 0, |v| {
        if v.header.index == c {
            found = Some((v.header.pos + i64::from(v.header.size)) as u64);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })?;
    // A committed index past the log is clamped to its end (`DLedgerMmapFileStore.recover`).
    Ok(found)
}

/// For a command reading a DLedger-mode store: where its records come from and which commit
/// rule decided what is served. `None` for a store in normal mode.
pub fn reading_note(store: &Store) -> Option<String> {
    let layout = store.dledger.as_ref()?;
    let served = match store.commitlog.served_end() {
        Some(e) => format!("records below commitlog offset {e} are served"),
        None => "every entry is served".into(),
    };
    Some(format!(
        "DLedger-mode store (member {}{}): records are read from the DLedger entries at entry \
         pos + 48; {served}, by the commit rule for a {}",
        layout.self_id,
        if layout.converted {
            ", converted: commitlog/ below the divide"
        } else {
            ""
        },
        layout.commit_rule.describe()
    ))
}

/// The summary of `store`'s DLedger log; `None` for a store in normal mode.
pub fn summary(store: &Store) -> Result<Option<DledgerInfo>> {
    let Some(layout) = &store.dledger else {
        return Ok(None);
    };
    summarize(layout, store.commitlog.served_end()).map(Some)
}

fn summarize(layout: &DledgerLayout, served_end: Option<u64>) -> Result<DledgerInfo> {
    let mut notes = Vec::new();
    let term = layout.term()?.unwrap_or_default();
    let cp = layout.checkpoint()?.unwrap_or_default();
    let data = &layout.data.files;
    let first_entry = |n: usize| -> Result<Option<i64>> {
        let f = &data[n];
        let m = Mapped::open(&f.path)?;
        Ok(match parse_slot(&m, 0, f.start) {
            Ok(Slot::Entry(h)) => Some(h.index),
            _ => None,
        })
    };
    let begin = match data.first() {
        Some(_) => first_entry(0)?,
        None => None,
    };
    // The recovery walks from near the end (see `recovery_start`), and stops at the first entry
    // that breaks the chain.
    let start = recovery_start(layout)?;
    for (p, why) in start.iter().flat_map(|s| &s.passed_over) {
        notes.push(format!(
            "DLedgerMmapFileStore.recover does not start at {}: {why}",
            p.display()
        ));
    }
    let mut last = None;
    let mut broken = None;
    let end = walk_from(layout, start.as_ref().map_or(0, |s| s.file), |v| {
        if let Some(b) = &v.gap {
            broken = Some((v.header.pos, b.clone()));
            return ControlFlow::Break(());
        }
        last = Some(v.header);
        ControlFlow::Continue(())
    })?;
    let data_end_pos = match &broken {
        Some((pos, b)) => {
            notes.push(format!(
                "the entry at pos {pos} breaks the chain ({} expected {}, found {}): the walk \
                 stops there",
                b.what, b.expected, b.found
            ));
            (*pos).max(0) as u64
        }
        None => {
            if let Some(e) = &end.stopped {
                notes.push(format!("the data stops being a chain of entries: {e}"));
            }
            for p in &end.files_after_end {
                notes.push(format!("{} lies after the end of the data", p.display()));
            }
            end.end_pos
        }
    };
    let committed_index = match (cp.committed_index, last) {
        (Some(c), Some(l)) => Some(c.min(l.index)),
        _ => None,
    };
    let mut committed_pos = None;
    if let Some(c) = committed_index.filter(|&c| c >= 0) {
        match IndexReader::new(layout).unit(c)? {
            Some(u) if u.index == c => {
                committed_pos = Some((u.pos.saturating_add(u.size.into())).max(0) as u64)
            }
            other => notes.push(format!(
                "the index unit of the committed entry {c} is {}",
                match other {
                    Some(u) => format!("for entry {}", u.index),
                    None => "missing".into(),
                }
            )),
        }
    }
    Ok(DledgerInfo {
        self_id: layout.self_id.clone(),
        current_term: term.curr_term,
        vote_leader: term.vote_leader,
        ledger_begin_index: begin,
        ledger_end_index: last.map(|h| h.index),
        ledger_end_term: last.map(|h| h.term),
        checkpoint_committed_index: cp.committed_index,
        checkpoint_end_index: cp.end_index,
        committed_index,
        committed_pos,
        data_end_pos,
        index_end_pos: last.map_or(0, |h| (h.index.max(-1) + 1) as u64 * 32),
        divided_commitlog_offset: layout.divide(),
        converted: layout.converted,
        commit_rule: layout.commit_rule,
        served_end: served_end.unwrap_or(data_end_pos),
        geometry: layout.geometry.clone(),
        data_files: files(&layout.data),
        index_files: files(&layout.index),
        notes,
    })
}
