//! Rebuild and repair: a walk that found nothing to hand over, a salvaged record that changed
//! under the run. Both mean the store changed while it was read, or a bug.

use std::path::{Path, PathBuf};

/// Why a rebuild of consume queues and index files stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RebuildError {
    /// The pieces of commitlog file `path` were taken in order, but none was walked.
    #[error("{}: no piece of the file was walked", path.display())]
    NoPieceWalked { path: PathBuf },
}

impl RebuildError {
    pub fn path(&self) -> &Path {
        match self {
            RebuildError::NoPieceWalked { path } => path,
        }
    }
}

/// Why staging a repaired store stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepairError {
    /// The record the plan salvaged at byte `at` of commitlog file `path` does not parse now.
    #[error("{}: the record salvaged at byte {at} no longer reads", path.display())]
    SalvagedRecordUnreadable { path: PathBuf, at: u64 },
}

impl RepairError {
    pub fn path(&self) -> &Path {
        match self {
            RepairError::SalvagedRecordUnreadable { path, .. } => path,
        }
    }
}
