//! Findings about what the broker's next start does: the problems in the walk of each commitlog
//! file with recovery's action on each, the abort and lock files, and the checkpoint against the
//! data and the index files (the file alone is judged beside its format, [`checkpoint::check`]).

use super::index_stream::IndexStream;
use super::scan::Merged;
use super::{Sink, VerifyOptions};
use crate::engine::check::recovery::{
    FileWalk, Prepared, RecoveryMode, RecoveryPlan, StopReason, WalkProblem,
};
use crate::engine::store::dispatch::SCHEDULE_TOPIC;
use crate::engine::store::{paths, Store};
use crate::format::checkpoint;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::finding::{Code, Finding, Severity};
use crate::format::mapped::Mapped;

/// `NoBlank` problems for files whose data ends without a blank record while a later file holds
/// data (pre-allocated, all-zero later files are what the broker leaves after a crash).
pub(super) fn mark_blanks_in_place(walks: &mut [Option<FileWalk>]) {
    let has_data = |w: &Option<FileWalk>| {
        w.as_ref()
            .is_some_and(|w| w.records + w.after_records > 0 || !w.problems.is_empty())
    };
    let n = walks.len();
    for i in 0..n {
        let later_data = walks.iter().skip(i + 1).any(has_data);
        if let Some(Some(w)) = walks.get_mut(i) {
            if later_data && w.stop != StopReason::Blank && !w.stop.is_damage() {
                let pos = w.stop_pos;
                if !w
                    .problems
                    .iter()
                    .any(|p| matches!(p, WalkProblem::NoBlank { .. }))
                {
                    w.problems.push(WalkProblem::NoBlank { pos });
                }
            }
        }
    }
}

/// The broker's action for a commitlog problem at `pos` of file `i`.
fn commitlog_action(
    store: &Store,
    plan: Option<&RecoveryPlan>,
    i: usize,
    pos: u64,
    on_chain: bool,
    at_record: bool,
) -> Option<String> {
    let plan = plan?;
    let seg = store.commitlog.segments.get(i)?;
    let abs = seg.start.saturating_add(pos);
    let start = plan.start_file.as_ref()?;
    let mode = match plan.mode {
        RecoveryMode::Normal => "normal",
        RecoveryMode::Abnormal => "abnormal",
    };
    if seg.start < start.start {
        return Some(format!(
            "outside the {mode} recovery scan (it starts at {}): the broker keeps this file as it \
             is and serves its records without checking them",
            start.path.display()
        ));
    }
    let cut = plan.cut.as_ref()?;
    if on_chain && abs == cut.offset {
        let mut s = format!(
            "{mode} recovery truncates the commitlog here (offset {abs}): {}{} later messages ({} bytes) would be dropped",
            if at_record { "this record and " } else { "" },
            cut.messages_dropped, cut.bytes_dropped
        );
        if !plan.deleted_files.is_empty() {
            s.push_str(&format!(
                ", {} later files deleted",
                plan.deleted_files.len()
            ));
        }
        if !plan.queue_truncations.is_empty() {
            let units: u64 = plan.queue_truncations.iter().map(|q| q.units).sum();
            s.push_str(&format!(", {units} consume queue units dropped"));
        }
        return Some(s);
    }
    if abs > cut.offset {
        return Some(format!(
            "after the recovery cut at offset {}: dropped with everything after it",
            cut.offset
        ));
    }
    Some("the recovery scan passes over it".to_string())
}

pub(super) fn walk_findings(
    store: &Store,
    walks: &[Option<FileWalk>],
    plan: Option<&RecoveryPlan>,
    opts: &VerifyOptions,
    sink: &mut Sink,
) {
    for (i, w) in walks.iter().enumerate() {
        let Some(w) = w else { continue };
        let path = &w.path;
        for p in &w.problems {
            let pos = p.pos();
            let abs = w.start.saturating_add(pos);
            let no_blank = matches!(p, WalkProblem::NoBlank { .. });
            let first_stop = pos == w.stop_pos && (w.stop.is_damage() || no_blank);
            let at_record = !no_blank && !matches!(p, WalkProblem::ZeroHole { .. });
            let action = commitlog_action(store, plan, i, pos, first_stop, at_record);
            let f = match p {
                WalkProblem::BadRecord { detail, .. } => Finding::new(
                    Code::CommitlogBadRecord,
                    path,
                    pos,
                    format!("record at commitlog offset {abs} does not parse: {detail}"),
                ),
                WalkProblem::BadDelay { value, .. } => Finding::new(
                    Code::CommitlogBadDelay,
                    path,
                    pos,
                    format!(
                        "{SCHEDULE_TOPIC} record at commitlog offset {abs} has DELAY {value:?}; Java rejects the record"
                    ),
                ),
                WalkProblem::CrcMismatch {
                    stored, computed, ..
                } => Finding::new(
                    Code::CommitlogCrcMismatch,
                    path,
                    pos,
                    format!(
                        "record at commitlog offset {abs}: BODYCRC is {stored} but the body's CRC (masked to 31 bits) is {computed}"
                    ),
                ),
                WalkProblem::ZeroHole { len, .. } => Finding::new(
                    Code::CommitlogHole,
                    path,
                    pos,
                    format!(
                        "{len} zero bytes at commitlog offset {abs} where a record should start; records follow"
                    ),
                ),
                WalkProblem::BlankSize {
                    found, expected, ..
                } => Finding::new(
                    Code::CommitlogBlankSize,
                    path,
                    pos,
                    format!("blank record says {found} bytes left, the file has {expected}"),
                ),
                WalkProblem::DirtyTail { end, stale, .. } => {
                    if opts.strict && *stale > 0 {
                        sink.push(
                            Finding::new(
                                Code::CommitlogStaleRecords,
                                path,
                                pos,
                                format!(
                                    "{stale} records older than the end of the data lie after it (left behind by an earlier truncation)"
                                ),
                            )
                            .with_action(
                                "never read; if new data ever ends exactly at one of them, a later recovery would take them for live records",
                            ),
                        );
                    }
                    let no_data = w.stop_pos == 0 && w.records == 0 && w.after_records == 0;
                    let f = Finding::new(
                        Code::CommitlogDirtyTail,
                        path,
                        pos,
                        if no_data {
                            format!(
                                "the file holds no record, yet {} of its bytes are not zero (up \
                                 to position {end}): they are not commitlog data",
                                end.saturating_sub(pos)
                            )
                        } else {
                            format!(
                                "{} bytes after the end of the data are not zero (up to position {end})",
                                end.saturating_sub(pos)
                            )
                        },
                    );
                    if no_data {
                        f.with_severity(Severity::Error)
                    } else {
                        f
                    }
                }
                WalkProblem::NoBlank { .. } => Finding::new(
                    Code::CommitlogNoBlank,
                    path,
                    pos,
                    format!(
                        "the data ends at commitlog offset {abs} without a blank record, but a later file exists"
                    ),
                ),
            };
            let f = match (p, action) {
                (WalkProblem::DirtyTail { .. }, _) => {
                    f.with_action("recovery ends the data before it; new messages overwrite it")
                }
                (WalkProblem::BlankSize { .. }, _) => f.with_action(
                    "the broker does not check a blank's size; it moves to the next file",
                ),
                (_, Some(a)) => f.with_action(a),
                (_, None) => f,
            };
            sink.push(f);
        }
        if w.problems_not_listed > 0 {
            sink.push(Finding::new(
                Code::CommitlogBadRecord,
                path,
                w.stop_pos,
                format!(
                    "{} more problems in this file not listed",
                    w.problems_not_listed
                ),
            ));
        }
    }
}

pub(super) fn marker_findings(
    store: &Store,
    prep: &Prepared,
    plan: Option<&RecoveryPlan>,
    sink: &mut Sink,
) {
    let live = match crate::engine::store::safedir::liveness(&store.root) {
        Ok(crate::engine::store::safedir::Liveness::LockHeld { pid }) => {
            Some(format!("process {pid} holds the lock file"))
        }
        Ok(crate::engine::store::safedir::Liveness::AbortPidAlive { pid }) => {
            Some(format!("process {pid} named in abort is running"))
        }
        _ => None,
    };
    if let Some(who) = live {
        sink.push(Finding::new(
            Code::StoreLive,
            &store.root.join(paths::LOCK),
            0,
            format!(
                "{who}: a broker seems to be writing this store; verify only reads, but the tail \
                 may move while it is read (findings at the end of the data may be transient)"
            ),
        ));
    }
    if !store.abort.present {
        return;
    }
    let path = store.root.join(paths::ABORT);
    let action = plan.map(|p| {
        if let Some(d) = &p.dledger {
            let mut s = format!(
                "DLedger recovery: data cut at {}, ledger end {}, committed index {} at load",
                d.data_cut_pos,
                d.ledger_end_index
                    .map_or_else(|| "none".into(), |v| v.to_string()),
                d.committed_index_at_load
                    .map_or_else(|| "none".into(), |v| v.to_string())
            );
            if !p.index_files_deleted.is_empty() {
                s.push_str(&format!(
                    ", delete {} index files (not rebuilt: the dispatch starts at {})",
                    p.index_files_deleted.len(),
                    d.dispatch_from
                ));
            }
            return s;
        }
        let mut s = format!(
            "abnormal recovery: scan from {}",
            p.start_file
                .as_ref()
                .map_or_else(|| "nothing".to_string(), |f| f.path.display().to_string())
        );
        if let Some(c) = &p.cut {
            s.push_str(&format!(
                ", cut at offset {} ({} messages dropped)",
                c.offset, c.messages_dropped
            ));
        }
        if !p.index_files_deleted.is_empty() {
            s.push_str(&format!(
                ", delete {} index files",
                p.index_files_deleted.len()
            ));
        }
        if p.redispatched_messages > 0 {
            s.push_str(&format!(
                ", dispatch {} messages again",
                p.redispatched_messages
            ));
        }
        s
    });
    let mut f = Finding::new(
        Code::StoreAbortPresent,
        &path,
        0,
        format!(
            "the abort file exists{}: the last shutdown was unclean, or a broker is running now \
             (then the tail may move while this runs)",
            store
                .abort
                .pid
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default()
        ),
    );
    if let Some(a) = action {
        f = f.with_action(a);
    }
    sink.push(f);
    for d in &prep.index_files_deleted {
        let lost = plan.map_or(0, |p| p.index_records_lost);
        sink.push(
            Finding::new(
                Code::IndexDroppedOnRestart,
                &d.path,
                0,
                format!(
                    "endTimestamp {} is after the checkpoint's indexMsgTimestamp: an unclean start deletes this file ({} entries)",
                    d.end_timestamp, d.entries
                ),
            )
            .with_action(format!(
                "deleted on the next start; records from the recovery scan on are indexed again{}",
                if lost > 0 {
                    format!(", {lost} earlier records lose their index entries")
                } else {
                    String::new()
                }
            )),
        );
    }
}

/// The checkpoint file judged alone ([`checkpoint::check`]), then its times and confirm offset
/// against the commitlog's data and the index files.
pub(super) fn checkpoint_findings(
    store: &Store,
    prep: &Prepared,
    merged: &Merged,
    ix: Option<&IndexStream>,
    sink: &mut Sink,
) {
    let path = store.checkpoint_path();
    let read = match &prep.checkpoint_error {
        Some(e) => Err(e.as_str()),
        None => Ok(prep.checkpoint.as_ref()),
    };
    for f in checkpoint::check(&path, read, !store.commitlog.segments.is_empty()) {
        sink.push(f);
    }
    // The comparisons with the data need a checkpoint that reads.
    let Some(c) = prep.checkpoint.filter(|_| prep.checkpoint_error.is_none()) else {
        return;
    };
    let max = merged.max_store_ts;
    if merged.records > 0 {
        for (name, v, off) in [
            ("physicMsgTimestamp", c.physic_msg_timestamp, 0u64),
            ("logicsMsgTimestamp", c.logics_msg_timestamp, 8),
        ] {
            if v > max {
                sink.push(
                    Finding::new(
                        Code::CheckpointAhead,
                        &path,
                        off,
                        format!(
                            "{name} {v} is later than the newest record's store time {max}: the log lost its tail after the checkpoint was written"
                        ),
                    )
                    .with_action("abnormal recovery may start its scan too late to rebuild what the queues lost"),
                );
            }
        }
    }
    if let Some(ix) = ix {
        let full_end = ix
            .files
            .iter()
            .filter(|f| f.used >= ix.geometry.entries)
            .map(|f| f.file.header().end_timestamp)
            .max();
        let bad = match full_end {
            Some(e) => c.index_msg_timestamp > e,
            None => false,
        };
        if bad {
            sink.push(Finding::new(
                Code::CheckpointAhead,
                &path,
                16,
                format!(
                    "indexMsgTimestamp {} is later than the endTimestamp of the newest full index file",
                    c.index_msg_timestamp
                ),
            ));
        }
    }
    if c.confirm_phy_offset > 0 && merged.records > 0 {
        let o = c.confirm_phy_offset as u64;
        let boundary = o == merged.data_end || {
            store.commitlog.segment_for(o).is_some_and(|s| {
                Mapped::open(&s.path).is_ok_and(|m| {
                    matches!(
                        parse_record(&m, (o - s.start) as usize, s.start, false),
                        Ok(Record::Message(_))
                    )
                })
            })
        };
        if o > merged.data_end {
            sink.push(Finding::new(
                Code::CheckpointAhead,
                &path,
                32,
                format!(
                    "confirmPhyOffset {o} is past the commitlog's end of data {}",
                    merged.data_end
                ),
            ));
        } else if !boundary {
            sink.push(Finding::new(
                Code::CheckpointConfirmOffset,
                &path,
                32,
                format!("confirmPhyOffset {o} is not on a record boundary"),
            ));
        }
    }
}
