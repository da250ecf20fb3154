//! Where a DLedger-mode store keeps its log: `dledger-<selfId>/` under the store root with
//! `data/` and `index/` (20-digit start offsets, as the commitlog), `checkpoint` and `currterm`.
//! The mode is told by the files: a root with `dledger-<selfId>/data` is in DLedger mode.
//!
//! Sizes: data files are `mappedFileSizeCommitLog` (`DLedgerCommitLog` hands it to DLedger), so
//! a flag or `--broker-conf` giving the commitlog file size gives it; otherwise the files' own
//! length. Index files cannot be set from broker.conf: their length, else DLedger's default.
//!
//! A converted store (normal mode first) still has `commitlog/` below the divide:
//! `DLedgerCommitLog.recover` sets `dividedCommitlogOffset` to the start of the first data file,
//! where the old commitlog ended.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{
    DledgerCheckpoint, TermFile, CHECKPOINT_FILE, CURRTERM_FILE, DATA_DIR, DEFAULT_DATA_FILE_SIZE,
    DEFAULT_INDEX_FILE_SIZE, DIR_PREFIX, INDEX_DIR,
};
use crate::format::entry::{self, Kind};
use crate::format::error::{DledgerError, Result};
use crate::format::filename::{list_queue_dir, Listing};
use crate::format::geometry::{GeometryInputs, Source, Sourced};

/// File sizes of the DLedger log, each with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DledgerGeometry {
    pub data_file_size: Sourced<u64>,
    pub index_file_size: Sourced<u64>,
}

/// Which entries the broker serves after its next start: those it will find committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitRule {
    /// A group of one (no broker config, or `dLegerPeers` naming no other member): the member
    /// elects itself and commits its whole log (`DLedgerEntryPusher.QuorumAckChecker`).
    SingleReplica,
    /// A group with other members: only what the checkpoint's `committedIndex` proves; the
    /// rest waits for a quorum or the leader's commit index.
    Checkpoint,
}

impl CommitRule {
    /// The rule in words, for notes.
    pub fn describe(self) -> &'static str {
        match self {
            CommitRule::SingleReplica => {
                "single-replica group (no other member in dLegerPeers, or no --broker-conf): \
                 the member elects itself at its next start and commits its whole log"
            }
            CommitRule::Checkpoint => {
                "group with other members (dLegerPeers): committed is what the checkpoint's \
                 committedIndex proves; later entries are uncommitted"
            }
        }
    }
}

/// One member's DLedger folder as found on disk.
#[derive(Debug, Clone)]
pub struct DledgerLayout {
    /// `dledger-<selfId>`.
    pub dir: PathBuf,
    pub self_id: String,
    /// `data/`, files sorted by start offset.
    pub data: Listing,
    /// `index/`, files sorted by start offset (empty when the folder is missing).
    pub index: Listing,
    pub geometry: DledgerGeometry,
    /// Converted store: `commitlog/` holds files; the divide is the first data file's start.
    pub converted: bool,
    /// The other members of the group `dLegerPeers` names (ids), empty without a broker config.
    pub other_peers: Vec<String>,
    pub commit_rule: CommitRule,
}

/// The member ids `dLegerPeers` (`id-host:port;...`) names other than `self_id`.
pub fn other_peers(peers: &str, self_id: &str) -> Vec<String> {
    peers
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('-').map_or(p, |(id, _)| id).to_string())
        .filter(|id| id != self_id)
        .collect()
}

/// The `dledger-<id>` folders with a `data/` folder directly under `root`, by name.
pub fn member_dirs(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.len() > DIR_PREFIX.len() && n.starts_with(DIR_PREFIX))
        .filter(|n| {
            std::fs::symlink_metadata(root.join(n).join(DATA_DIR)).is_ok_and(|m| m.is_dir())
        })
        .collect();
    v.sort();
    v
}

/// True when `root` holds a DLedger member folder.
pub fn is_dledger_root(root: &Path) -> bool {
    !member_dirs(root).is_empty()
}

impl DledgerLayout {
    /// The DLedger folder of `root`, `Ok(None)` when the store is not in DLedger mode. Lists
    /// folders only; reads no data.
    pub fn find(root: &Path, inputs: &GeometryInputs) -> Result<Option<DledgerLayout>> {
        let dirs = member_dirs(root);
        let name = match dirs.as_slice() {
            [] => return Ok(None),
            [one] => one.clone(),
            _ => {
                return Err(DledgerError::SeveralMembers {
                    root: root.to_path_buf(),
                    dirs,
                }
                .into())
            }
        };
        let dir = root.join(&name);
        let data = list_queue_dir(&dir.join(DATA_DIR))?;
        let index_dir = dir.join(INDEX_DIR);
        let index = if entry::probe(&index_dir).kind == Kind::Dir {
            list_queue_dir(&index_dir)?
        } else {
            Listing::default()
        };
        let pick = |given: [Option<u64>; 2], files: &Listing, default: u64| {
            given
                .into_iter()
                .zip([Source::Flag, Source::BrokerConf])
                .find_map(|(v, s)| v.map(|v| Sourced::new(v, s)))
                .or_else(|| {
                    files
                        .files
                        .iter()
                        .map(|f| f.len)
                        .max()
                        .filter(|&l| l > 0)
                        .map(|l| Sourced::new(l, Source::Inferred))
                })
                .unwrap_or(Sourced::new(default, Source::Default))
        };
        let geometry = DledgerGeometry {
            data_file_size: pick(
                [
                    inputs.flags.commitlog_file_size,
                    inputs.broker_conf.commitlog_file_size,
                ],
                &data,
                DEFAULT_DATA_FILE_SIZE,
            ),
            index_file_size: pick(
                [inputs.flags.dledger_index_file_size, None],
                &index,
                DEFAULT_INDEX_FILE_SIZE,
            ),
        };
        let converted = list_queue_dir(&root.join("commitlog")).is_ok_and(|l| !l.files.is_empty());
        let self_id = name[DIR_PREFIX.len()..].to_string();
        let other_peers = inputs
            .broker_conf
            .dledger_peers
            .as_deref()
            .map(|p| other_peers(p, &self_id))
            .unwrap_or_default();
        let commit_rule = if other_peers.is_empty() {
            CommitRule::SingleReplica
        } else {
            CommitRule::Checkpoint
        };
        Ok(Some(DledgerLayout {
            self_id,
            other_peers,
            commit_rule,
            dir,
            data,
            index,
            geometry,
            converted,
        }))
    }

    /// `dividedCommitlogOffset`: the first data file's start (0 without data files). Records
    /// below it are read from `commitlog/` in a converted store.
    pub fn divide(&self) -> u64 {
        self.data.files.first().map_or(0, |f| f.start)
    }

    pub fn checkpoint(&self) -> Result<Option<DledgerCheckpoint>> {
        DledgerCheckpoint::read(&self.dir.join(CHECKPOINT_FILE))
    }

    pub fn term(&self) -> Result<Option<TermFile>> {
        TermFile::read(&self.dir.join(CURRTERM_FILE))
    }
}
