//! The next start of a DLedger-mode broker (DLEDGER.md 6-8): `DLedgerCommitLog.recover` runs
//! the same for a clean and an unclean start. It loads the DLedger files and runs
//! `DLedgerMmapFileStore.recover` (entries checked from the third-to-last data file, or the
//! nearest earlier one whose first entry agrees with its index unit; the first bad entry ends
//! the walk; data cut after the last good entry, index at `(last + 1) * 32`,
//! rebuilt from the data where a unit disagrees; committed index from the checkpoint, at most
//! the ledger end), then truncates consume queue units at or past the data end. Nothing is
//! dispatched during recovery: the reput service starts at the consume queues' max offset
//! (apache/rocketmq#7355, fixed in 5.2.0), so a queue whose tail was lost below it, and the keys
//! of an index file the unclean start deleted, stay lost until `rmqstore rebuild`.

use serde::Serialize;

use super::plan::{Prepared, RecoveryPlan};
use crate::engine::store::Store;
use crate::format::dledger::CommitRule;

/// What the DLedger layer does at the next start.
#[derive(Debug, Clone, Serialize)]
pub struct DledgerRecovery {
    pub ledger_begin_index: Option<i64>,
    /// `ledgerEndIndex`, `ledgerEndTerm` after recovery.
    pub ledger_end_index: Option<i64>,
    pub ledger_end_term: Option<i64>,
    /// Data and index max wrote positions after the cut.
    pub data_cut_pos: u64,
    pub index_cut_pos: u64,
    pub checkpoint_committed_index: Option<i64>,
    /// The committed index and position the store has after load.
    pub committed_index_at_load: Option<i64>,
    pub committed_pos_at_load: Option<u64>,
    pub commit_rule: CommitRule,
    /// The committed index once the group has settled (single replica: its ledger end).
    pub committed_index_after_start: Option<i64>,
    /// Records below this commitlog offset are served and dispatched.
    pub served_end: u64,
    /// The reput service's start: the consume queues' max offset.
    pub dispatch_from: u64,
    /// Where the data does not hold what the recovery expects.
    pub notes: Vec<String>,
    /// Keyed records whose index file is deleted and never rebuilt.
    pub index_records_lost: u64,
}

/// Work out the DLedger recovery of `store` (one in DLedger mode).
pub fn explain(
    store: &Store,
    prep: &Prepared,
    dispatch_from: u64,
    index_records_lost: u64,
) -> DledgerRecovery {
    // A checkpoint or currterm that does not read is verify's finding, not a failure here.
    let (info, unread) = match crate::engine::store::dledger::summary(store) {
        Ok(i) => (i, None),
        Err(e) => (None, Some(format!("the DLedger files do not read: {e}"))),
    };
    let Some(i) = info else {
        return DledgerRecovery {
            ledger_begin_index: None,
            ledger_end_index: None,
            ledger_end_term: None,
            data_cut_pos: 0,
            index_cut_pos: 0,
            checkpoint_committed_index: None,
            committed_index_at_load: None,
            committed_pos_at_load: None,
            commit_rule: CommitRule::SingleReplica,
            committed_index_after_start: None,
            served_end: 0,
            dispatch_from,
            notes: unread.into_iter().collect(),
            index_records_lost,
        };
    };
    let _ = prep;
    DledgerRecovery {
        ledger_begin_index: i.ledger_begin_index,
        ledger_end_index: i.ledger_end_index,
        ledger_end_term: i.ledger_end_term,
        data_cut_pos: i.data_end_pos,
        index_cut_pos: i.index_end_pos,
        checkpoint_committed_index: i.checkpoint_committed_index,
        committed_index_at_load: i.committed_index,
        committed_pos_at_load: i.committed_pos,
        commit_rule: i.commit_rule,
        committed_index_after_start: match i.commit_rule {
            CommitRule::SingleReplica => i.ledger_end_index,
            CommitRule::Checkpoint => i.committed_index,
        },
        served_end: i.served_end,
        dispatch_from,
        notes: i.notes,
        index_records_lost,
    }
}

impl DledgerRecovery {
    /// The steps as sentences, in the order the broker takes them.
    pub fn steps(&self, plan: &RecoveryPlan) -> Vec<String> {
        let opt = |v: Option<i64>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
        let mut s = vec![format!(
            "{}: a DLedger-mode broker runs the same recovery either way \
             (DLedgerCommitLog.recover; no commitlog scan, nothing dispatched during recovery)",
            if plan.abort_present {
                "abort file present, the last shutdown was unclean"
            } else {
                "no abort file, the last shutdown was clean"
            }
        )];
        for r in &plan.refuses_to_start {
            s.push(format!("the broker refuses to start: {r}"));
        }
        for d in &plan.index_files_deleted {
            s.push(format!(
                "IndexService.load deletes index file {} ({} entries, commitlog offsets {}..={}): \
                 its endTimestamp {} is after the checkpoint's indexMsgTimestamp{}",
                d.path.display(),
                d.entries,
                d.begin_phy_offset,
                d.end_phy_offset,
                d.end_timestamp,
                plan.checkpoint
                    .map(|c| format!(" {}", c.index_msg_timestamp))
                    .unwrap_or_default()
            ));
        }
        s.push(format!(
            "DLedgerMmapFileStore.recover checks the entries from {} on ({}; magic, size, pos, \
             index + 1, term not lower, index unit): ledger {}..={}, end term {}",
            plan.start_file.as_ref().map_or_else(
                || "the first data file".into(),
                |f| f.path.display().to_string()
            ),
            plan.start_reason
                .trim_start_matches("DLedgerMmapFileStore.recover: "),
            opt(self.ledger_begin_index),
            opt(self.ledger_end_index),
            opt(self.ledger_end_term)
        ));
        for n in &self.notes {
            s.push(n.clone());
        }
        let dropped = plan.messages_dropped();
        s.push(format!(
            "cut the data at position {} (after the last good entry) and the index at {} \
             ((ledgerEndIndex + 1) * 32); {}",
            self.data_cut_pos,
            self.index_cut_pos,
            if dropped == 0 {
                "nothing is dropped".to_string()
            } else {
                format!("{dropped} later records dropped (a replica is then caught up from the group's leader)")
            }
        ));
        s.push(format!(
            "committed index after load: {} (checkpoint committedIndex {}, at most the ledger \
             end), committed position {}: until the group commits more, records are served \
             below it",
            opt(self.committed_index_at_load),
            opt(self.checkpoint_committed_index),
            self.committed_pos_at_load
                .map_or_else(|| "none".to_string(), |p| p.to_string())
        ));
        s.push(format!(
            "then {}: committed index {}, records served and dispatched below commitlog offset {}",
            self.commit_rule.describe(),
            opt(self.committed_index_after_start),
            self.served_end
        ));
        for q in &plan.queue_truncations {
            s.push(format!(
                "truncate consume queue {}/{} at queue offset {}: {} units at or past the data \
                 end dropped",
                q.topic, q.queue_id, q.from_queue_offset, q.units
            ));
        }
        s.push(format!(
            "the reput service dispatches from the consume queues' max offset {} ({} records); \
             records below it are never dispatched again: a consume queue whose tail was lost \
             below it (an unflushed queue after a host crash, apache/rocketmq#7355, fixed in \
             5.2.0) keeps the hole until `rmqstore rebuild` writes the queues again",
            self.dispatch_from, plan.redispatched_messages
        ));
        if !plan.index_files_deleted.is_empty() {
            let from = plan
                .index_files_deleted
                .iter()
                .map(|d| d.begin_phy_offset)
                .min()
                .unwrap_or(0);
            s.push(format!(
                "the deleted index files are not rebuilt (the reput starts at {}): key lookups \
                 find nothing after commitlog offset {from} ({} keyed records) until \
                 `rmqstore rebuild` writes the index again",
                self.dispatch_from, self.index_records_lost
            ));
        }
        s
    }
}
