//! One consume queue file whose size or name is not what the queue's file size makes.

use std::path::{Path, PathBuf};

/// A consume queue file that is not `file_size` bytes, or whose name is not a multiple of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueFileError {
    #[error("{}: consume queue file is {len} bytes, expected {expected}", path.display())]
    WrongSize {
        path: PathBuf,
        len: u64,
        expected: u64,
    },
    /// The file's name (its first byte's offset in the queue) is `start`.
    #[error("{}: name {start} is not a multiple of {file_size}", path.display())]
    NameNotMultiple {
        path: PathBuf,
        start: u64,
        file_size: u64,
    },
}

impl QueueFileError {
    pub fn path(&self) -> &Path {
        match self {
            QueueFileError::WrongSize { path, .. }
            | QueueFileError::NameNotMultiple { path, .. } => path,
        }
    }
}
