//! DLedger-mode stores: a root with more than one DLedger member folder, a command that reads
//! DLedger data given a store without it, a command that does not read DLedger data given one.

use std::path::{Path, PathBuf};

/// Why a DLedger store (or the lack of one) stops a command.
#[derive(Debug, thiserror::Error)]
pub enum DledgerError {
    /// More than one `dledger-<selfId>/data` under the root: which member's log is meant is
    /// not for rmqstore to guess.
    #[error(
        "{}: {} DLedger member folders ({}); a store root holds one member's log",
        root.display(), dirs.len(), dirs.join(", ")
    )]
    SeveralMembers { root: PathBuf, dirs: Vec<String> },
    /// The root has no `dledger-<selfId>/data` folder.
    #[error("{}: not a DLedger-mode store: no dledger-<selfId>/data folder", root.display())]
    NotDledger { root: PathBuf },
    /// A command that does not handle DLedger data yet (repair, the recovery explanation) was
    /// given a DLedger-mode store; `command`
    /// names it (the command line fills it in).
    #[error(
        "{}: DLedger-mode store: {command} does not read DLedger data yet \
         (`info`, `dump`, `query`, `pull`, `verify`, `rebuild` and the other read commands do)",
        root.display()
    )]
    NotRead { root: PathBuf, command: String },
    /// A DLedger-mode store repair does not handle (`why` says what it has).
    #[error("{}: DLedger-mode store: repair does not handle {why} yet", root.display())]
    NotRepaired { root: PathBuf, why: String },
}

impl DledgerError {
    pub fn path(&self) -> &Path {
        match self {
            DledgerError::SeveralMembers { root, .. }
            | DledgerError::NotDledger { root }
            | DledgerError::NotRead { root, .. }
            | DledgerError::NotRepaired { root, .. } => root,
        }
    }
}
