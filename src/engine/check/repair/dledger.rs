//! Repair of a DLedger-mode store's log: one replica of a raft group, so no entry a peer may
//! hold is renumbered, re-termed or rewritten. Damage is never bridged: the data is cut where
//! the chain of entries breaks (the bytes after it saved, the rest of the file zeroed), the
//! DLedger index rebuilt from the kept entries, the checkpoint's indexes clamped into them. The
//! group's leader sends the replica what was cut when it runs again.

use std::ops::ControlFlow;
use std::path::Path;

use serde::Serialize;

use super::stage::Staging;
use super::{rel, Action, Cut, Fate, Plan};
use crate::engine::check::rebuild::dledger_index_dir;
use crate::engine::check::verify::Report;
use crate::engine::store::safedir::{link_or_copy, write_copy, write_new};
use crate::engine::store::Store;
use crate::format::commitlog::read::SegmentKind;
use crate::format::dledger::index::IndexFileWriter;
use crate::format::dledger::props::MAX_PROPS_LEN;
use crate::format::dledger::walk::walk;
use crate::format::dledger::{
    DledgerCheckpoint, DledgerLayout, IndexUnit, CHECKPOINT_FILE, DATA_DIR, INDEX_DIR,
};
use crate::format::entry::{self, Kind};
use crate::format::error::{DledgerError, Error, Result};
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
    /// The data was cut: the group's leader sends this replica the entries from the cut on.
    pub caught_up_from_leader: bool,
}

/// The stores this repair does not handle: a converted store (records below the divide in
/// `commitlog/`) and a replica whose committed position the checkpoint decides (a group with
/// peers: its uncommitted entries are neither served nor damage).
pub fn refuse_unhandled(store: &Store) -> Result<()> {
    let Some(l) = &store.dledger else {
        return Ok(());
    };
    let why = if l.converted {
        Some("a converted store (records below the divide in commitlog/)")
    } else if store
        .commitlog
        .segments
        .iter()
        .any(|s| s.served_end.is_some())
    {
        Some("a replica of a group with peers (its committed position decides what is served)")
    } else {
        None
    };
    match why {
        Some(why) => Err(DledgerError::NotRepaired {
            root: store.root.clone(),
            why: why.into(),
        }
        .into()),
        None => Ok(()),
    }
}

/// Where the chain of entries breaks (an index not one more than the last, a term going down, a
/// pos that is not the entry's place): the data file number, the entry's position, why.
pub fn chain_break(store: &Store, l: &DledgerLayout) -> Result<Option<(usize, u64, String)>> {
    let mut found = None;
    walk(l, |v| {
        if let Some(b) = &v.gap {
            found = Some((
                v.file.to_path_buf(),
                v.at as u64,
                format!(
                    "a DLedger entry that breaks the chain: {} expected {}, found {}",
                    b.what, b.expected, b.found
                ),
            ));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })?;
    Ok(found.and_then(|(p, at, why)| {
        let i = store.commitlog.segments.iter().position(|s| s.path == p)?;
        Some((i, at, why))
    }))
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
    let checkpoint = DledgerCheckpoint {
        end_index: Some(last_index),
        committed_index: Some(old.committed_index.unwrap_or(last_index).min(last_index)),
    };
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
            action: "rebuild the DLedger index from the kept entries; old files that differ are \
                     kept in the repair folder"
                .into(),
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
        caught_up_from_leader: caught_up,
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
