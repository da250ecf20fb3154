//! Repair of a DLedger-mode store's log: one replica of a raft group, so no entry a peer may
//! hold is renumbered, re-termed or rewritten. Damage is never bridged: the data is cut where
//! the chain of entries breaks (the bytes after it saved, the rest of the file zeroed), the
//! DLedger index rebuilt from the kept entries, the checkpoint's indexes clamped into them. The
//! group's leader sends the replica what was cut when it runs again.
//!
//! What is cut follows `DLedgerMmapFileStore.recover` (openmessaging DLedger 0.3.1.x): it walks
//! the entries and keeps every one up to the first it rejects (a magic, size, pos, index or term
//! that breaks the chain), then truncates the data and index there. It never looks at the
//! checkpoint to decide what to keep: `committedIndex` is read afterwards and only clamped to the
//! kept end. So in a group with peers (`dLegerPeers` naming other members, the checkpoint rule)
//! the entries past the committed index are not damage: a peer may hold them, and the leader
//! decides (after an election it compares this replica's log with its own and truncates only
//! where they differ). Repair keeps them as they are, cuts only where the recovery would, and
//! keeps the checkpoint's committed index (a missing one stays -1, the broker's value, instead of
//! claiming the whole log committed as a single replica may). The consume queues and index are
//! rebuilt from the committed records only, as the broker dispatches; its reput service adds the
//! rest from the consume queues' end once the group commits them.
//!
//! A converted store's `commitlog/` files below the divide belong to this broker alone (no peer
//! holds them): they are repaired by the normal rules of [`super`] (damage bridged, headers
//! mended), in the same plan and switch as the log above the divide. A break there that cannot be
//! bridged is refused: cutting the store at it would take the DLedger log after it.

use std::ops::ControlFlow;
use std::path::Path;

use serde::Serialize;

use super::stage::Staging;
use super::{rel, Action, Cut, Fate, Plan};
use crate::engine::check::rebuild::dledger_index_dir;
use crate::engine::check::verify::Report;
use crate::engine::store::safedir::{link_or_copy, write_copy, write_new};
use crate::engine::store::Store;
use crate::format::bytes::i32_at;
use crate::format::commitlog::read::SegmentKind;
use crate::format::dledger::entry::{parse_slot, Slot};
use crate::format::dledger::index::IndexFileWriter;
use crate::format::dledger::props::MAX_PROPS_LEN;
use crate::format::dledger::walk::walk;
use crate::format::dledger::{
    CommitRule, DledgerCheckpoint, DledgerLayout, IndexUnit, CHECKPOINT_FILE, DATA_DIR, INDEX_DIR,
    MAGIC,
};
use crate::format::entry::{self, Kind};
use crate::format::error::{Error, Result};
use crate::format::filename::QueueFile;
use crate::format::finding::Code;

/// What a repair does to the DLedger log (in the plan, the manifest and the JSON summary).
#[derive(Debug, Clone, Serialize)]
pub struct DledgerRepair {
    pub self_id: String,
    /// The last entry kept (index, term); `None` when no entry is kept.
    pub last_index: Option<i64>,
    pub last_term: Option<i64>,
    /// The first index this replica no longer holds (the leader sends it and every later one);
    /// `None` when nothing is cut.
    pub first_cut_index: Option<i64>,
    /// The checkpoint as it was, and as the repaired store has it.
    pub checkpoint_was: Option<DledgerCheckpoint>,
    pub checkpoint: DledgerCheckpoint,
    /// The DLedger index is rewritten from the kept entries.
    pub index_rebuilt: bool,
    /// The size of each DLedger index file the rebuild writes, and where it comes from (a flag,
    /// the index files there were, or DLedger's default).
    pub index_file_size: Option<u64>,
    pub index_file_size_source: Option<String>,
    /// The data was cut: the group's leader sends this replica the entries from the cut on.
    pub caught_up_from_leader: bool,
    /// The rule that says which entries are committed (`--broker-conf`'s `dLegerPeers`).
    pub commit_rule: CommitRule,
    /// Kept entries past the committed index (a group with peers): (first, last) index. Kept
    /// as they are; the group's leader decides whether they stay.
    pub uncommitted_kept: Option<(i64, i64)>,
}

/// What the repair must do to the replica's log beyond what the commitlog walks report.
#[derive(Debug, Default)]
pub struct LogDamage {
    /// Where the log is cut: data file number, position in it, why.
    pub cut: Option<(usize, u64, String)>,
    /// Where non-zero bytes after the end of the data start (data file number, position): they
    /// are zeroed, nothing is cut.
    pub tail: Option<(usize, u64)>,
}

/// Where the replica's log is cut: the first entry that breaks the chain (an index not one more
/// than the last, a term going down, a pos that is not the entry's place). Past the committed
/// position of a group with peers, which the commitlog walks do not read, also: the first entry
/// whose record is damaged (this replica's copy only: its peers hold their own, and the leader
/// sends it again once it is cut), an entry the recovery rejects with entries after it, a data
/// file after the end of the data that holds bytes (recovery deletes it); bytes after the last
/// entry with no entry after them are a tail to zero.
pub fn log_damage(store: &Store, l: &DledgerLayout) -> Result<LogDamage> {
    let served = store.commitlog.served_end();
    let mut found = None;
    let end = walk(l, |v| {
        let why = if let Some(b) = &v.gap {
            format!(
                "a DLedger entry that breaks the chain: {} expected {}, found {}",
                b.what, b.expected, b.found
            )
        } else if served.is_some_and(|e| v.header.pos >= 0 && v.header.pos as u64 >= e) {
            match damaged_record(v) {
                Some(e) => format!(
                    "an uncommitted DLedger entry (index {}) whose record is damaged ({e}): \
                     peers hold their own copy",
                    v.header.index
                ),
                None => return ControlFlow::Continue(()),
            }
        } else {
            return ControlFlow::Continue(());
        };
        found = Some((v.file.to_path_buf(), v.at as u64, why));
        ControlFlow::Break(())
    })?;
    let mut tail = None;
    if let (None, Some(_), Some((n, at))) = (&found, served, end.stop_at) {
        let f = &l.data.files[n];
        let m = crate::format::mapped::Mapped::open(&f.path)?;
        let rest = m.get(at..).unwrap_or_default();
        if rest.iter().any(|&b| b != 0) {
            let last = end.last.map_or(-1, |h| h.index);
            let later = (at + 1..m.len()).find(|&p| {
                i32_at(&m, p) == Some(MAGIC)
                    && matches!(parse_slot(&m, p, f.start), Ok(Slot::Entry(h)) if h.index > last)
            });
            match (&end.stopped, later) {
                (Some(e), Some(_)) => {
                    found = Some((
                        f.path.clone(),
                        at as u64,
                        format!("a DLedger entry the recovery rejects, entries after it: {e}"),
                    ))
                }
                _ => tail = Some((f.path.clone(), at as u64)),
            }
        }
        m.release(0, m.len());
        for f in l.data.files.iter().skip(n + 1) {
            if found.is_some() {
                break;
            }
            let m = crate::format::mapped::Mapped::open(&f.path)?;
            if m.iter().any(|&b| b != 0) {
                found = Some((
                    f.path.clone(),
                    0,
                    format!(
                        "a DLedger data file after the end of the data ({}) holds bytes",
                        end.end_pos
                    ),
                ));
            }
            m.release(0, m.len());
        }
    }
    let segment = |p: &Path| store.commitlog.segments.iter().position(|s| s.path == p);
    Ok(LogDamage {
        cut: found.and_then(|(p, at, why)| Some((segment(&p)?, at, why))),
        tail: tail.and_then(|(p, at)| Some((segment(&p)?, at))),
    })
}

/// Why the record an entry wraps is not one the broker dispatches (it does not parse, fills
/// not the entry's body, names another PHYSICALOFFSET, or fails its body CRC).
fn damaged_record(v: &crate::format::dledger::walk::Visit<'_>) -> Option<String> {
    use crate::format::commitlog::read::{parse_record, Record};
    let offset = v.header.record_offset();
    match parse_record(v.body, 0, offset.max(0) as u64, true) {
        Ok(Record::Message(m)) if m.raw.len() == v.body.len() && m.physical_offset == offset => {
            None
        }
        Ok(Record::Message(m)) if m.raw.len() != v.body.len() => Some(format!(
            "a record of {} bytes in a body of {}",
            m.raw.len(),
            v.body.len()
        )),
        Ok(Record::Message(m)) => Some(format!(
            "PHYSICALOFFSET {}, expected {offset}",
            m.physical_offset
        )),
        Ok(_) => Some("no message record".into()),
        Err(e) => Some(e.to_string()),
    }
}

/// The DLedger part of the plan: the kept entries (those before `cut`), the checkpoint clamped
/// into them, and the actions.
pub fn plan(
    l: &DledgerLayout,
    report: &Report,
    cut: Option<&Cut>,
    actions: &mut Vec<Action>,
) -> Result<DledgerRepair> {
    let end = cut.map(|c| c.offset);
    let mut last = None;
    walk(l, |v| {
        if v.gap.is_some() || end.is_some_and(|e| v.header.pos.max(0) as u64 >= e) {
            return ControlFlow::Break(());
        }
        last = Some((v.header.index, v.header.term));
        ControlFlow::Continue(())
    })?;
    let was = l.checkpoint().ok().flatten();
    let last_index = last.map_or(-1, |(i, _)| i);
    let old = was.clone().unwrap_or_default();
    // The committed index the broker loads, at most the kept end. A single replica commits its
    // whole log at its next start, so a missing one is its end; with peers only the checkpoint
    // proves anything, so a missing one stays -1 (the broker's value when it reads none).
    let committed = match l.commit_rule {
        CommitRule::SingleReplica => old.committed_index.unwrap_or(last_index),
        CommitRule::Checkpoint => old.committed_index.unwrap_or(-1),
    }
    .min(last_index);
    let checkpoint = DledgerCheckpoint {
        end_index: Some(last_index),
        committed_index: Some(committed),
    };
    let uncommitted_kept = (l.commit_rule == CommitRule::Checkpoint && committed < last_index)
        .then_some((committed.max(-1) + 1, last_index));
    let count = |code: Code| report.summary.findings_per_code.get(code.as_str()).copied();
    let index_findings = count(Code::DledgerIndexMismatch).unwrap_or(0);
    let index_rebuilt = cut.is_some() || index_findings > 0;
    // Committed entries this log does not hold: the leader has them.
    let missing_committed = old.committed_index.is_some_and(|c| c > last_index);
    let caught_up = cut.is_some() || missing_committed;
    if let Some(c) = cut {
        actions.push(Action {
            problem: format!(
                "the DLedger log of {} breaks at {} byte {} (entry position {})",
                l.self_id, c.file, c.position, c.offset
            ),
            action: format!(
                "keep entries up to index {last_index} as they are (no index, term or byte of \
                 them changes); entries from index {} on leave this replica: the group's leader \
                 sends them again (this replica will be caught up from the leader); their \
                 records are salvaged as messages that can be re-sent",
                last_index + 1
            ),
            messages: 0,
            bytes: 0,
        });
    }
    if index_rebuilt {
        actions.push(Action {
            problem: if index_findings > 0 {
                format!("verify has {index_findings} DLedger index finding(s)")
            } else {
                "the DLedger data is cut".into()
            },
            action: format!(
                "rebuild the DLedger index from the kept entries, in files of {} bytes ({}); \
                 old files that differ are kept in the repair folder",
                l.geometry.index_file_size.value, l.geometry.index_file_size.source
            ),
            messages: 0,
            bytes: 0,
        });
    }
    if was.as_ref() != Some(&checkpoint) && (was.is_some() || last.is_some()) {
        actions.push(Action {
            problem: format!(
                "the DLedger checkpoint says endIndex {}, committedIndex {}; the kept log ends \
                 at index {last_index}",
                opt(old.end_index),
                opt(old.committed_index)
            ),
            action: format!(
                "write endIndex={last_index}, committedIndex={} (the old file is kept){}",
                opt(checkpoint.committed_index),
                if missing_committed {
                    format!(
                        "; entries {}..={} were committed but this log does not hold them: this \
                         replica will be caught up from the group's leader",
                        last_index + 1,
                        opt(old.committed_index)
                    )
                } else {
                    String::new()
                }
            ),
            messages: 0,
            bytes: 0,
        });
    }
    Ok(DledgerRepair {
        self_id: l.self_id.clone(),
        last_index: last.map(|x| x.0),
        last_term: last.map(|x| x.1),
        first_cut_index: caught_up.then_some(last_index + 1),
        checkpoint_was: was,
        checkpoint,
        index_rebuilt,
        index_file_size: index_rebuilt.then_some(l.geometry.index_file_size.value),
        index_file_size_source: index_rebuilt
            .then(|| l.geometry.index_file_size.source.to_string()),
        caught_up_from_leader: caught_up,
        commit_rule: l.commit_rule,
        uncommitted_kept,
    })
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "(none)".into(), |v| v.to_string())
}

/// Stage `dledger-<selfId>/` but its data files (staged with the commitlog): the index rebuilt
/// from the staged data when the plan says so, the checkpoint written, the rest copied.
pub(super) fn stage(
    store: &Store,
    l: &DledgerLayout,
    plan: &Plan,
    d: &DledgerRepair,
    stage: &Path,
    st: &mut Staging<'_>,
) -> Result<()> {
    let dir = stage.join(rel(store, &l.dir));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let cp_text = d.checkpoint.to_text();
    for e in entry::list(&l.dir)? {
        let Some(name) = e.name.clone() else { continue };
        if st.is_aside(&e.path) || name == DATA_DIR {
            continue;
        }
        let dst = dir.join(&name);
        if name == INDEX_DIR && d.index_rebuilt {
            continue;
        }
        if (name == CHECKPOINT_FILE || name == format!("{CHECKPOINT_FILE}.bak")) && e.kind.is_file()
        {
            let same = entry::read_prefix(&e.path, MAX_PROPS_LEN)
                .ok()
                .and_then(|b| DledgerCheckpoint::from_bytes(&b).ok())
                .is_some_and(|c| c == d.checkpoint);
            if same {
                write_copy(&e.path, &dst, e.kind.file_len(), e.kind.file_len(), &[])?;
            } else {
                st.save_whole(&e.path, "replaced by a checkpoint within the kept entries")?;
                write_new(&dst, cp_text.as_bytes())?;
            }
            continue;
        }
        if e.symlink {
            link_or_copy(&e.path, &dst)?;
        } else if e.kind.is_file() {
            let len = e.kind.file_len();
            write_copy(&e.path, &dst, len, len, &[])?;
        } else if e.kind == Kind::Dir {
            st.link_tree(&e.path, &dst, true)?;
        }
    }
    if !dir.join(CHECKPOINT_FILE).exists() {
        write_new(&dir.join(CHECKPOINT_FILE), cp_text.as_bytes())?;
    }
    if d.index_rebuilt {
        // The staged data files, as the walk reads them.
        let mut staged = l.clone();
        staged.data.files = store
            .commitlog
            .segments
            .iter()
            .zip(&plan.fates)
            .filter(|(s, f)| s.kind == SegmentKind::Dledger && **f != Fate::Out)
            .map(|(s, _)| {
                let path = stage.join(rel(store, &s.path));
                let len = entry::probe(&path).kind.file_len();
                QueueFile {
                    path,
                    start: s.start,
                    len,
                }
            })
            .collect();
        let index_dir = stage.join(dledger_index_dir(l));
        let mut w = IndexFileWriter::create(&index_dir, l.geometry.index_file_size.value)?;
        let mut failed = None;
        walk(&staged, |v| {
            if v.gap.is_some() {
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
        w.finish()?;
        st.compare_tree(
            &l.dir.join(INDEX_DIR),
            &index_dir,
            "the DLedger index was rebuilt from the kept entries",
        )?;
    }
    Ok(())
}
