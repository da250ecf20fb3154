//! The store writer: a commitlog it must not write into or cannot continue, a record it cannot
//! place.

use std::path::{Path, PathBuf};

use crate::format::commitlog::walk::SegmentEnd;
use crate::format::commitlog::write::EncodeError;

/// Why the store writer stopped.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// A new store was to be written where a commitlog already has files.
    #[error("{}: refusing to write into an existing commitlog", path.display())]
    ExistingCommitlog { path: PathBuf },
    /// Appending to an existing store: the data of commitlog file `path` ends as `end` says,
    /// but later files exist or the file is damaged.
    #[error(
        "{}: cannot resume: the data ends here ({end:?}) but later commitlog files exist or the \
         file is damaged; repair the store first",
        path.display()
    )]
    CannotResume { path: PathBuf, end: SegmentEnd },
    /// A record of `len` bytes that no commitlog file of `file_size` bytes can hold (with the
    /// blank record that ends a file), or too short to be a record.
    #[error(
        "{}: a record of {len} bytes does not fit commitlog files of {file_size} bytes",
        path.display()
    )]
    RecordDoesNotFit {
        path: PathBuf,
        len: usize,
        file_size: u64,
    },
    /// No commitlog file to append to (a bug: one is opened before each append).
    #[error("{}: no commitlog file open", path.display())]
    NoFileOpen { path: PathBuf },
    /// The message could not be encoded as a record.
    #[error("{}: {source}", path.display())]
    Encode {
        path: PathBuf,
        #[source]
        source: EncodeError,
    },
}

impl WriterError {
    /// The commitlog folder or file, or the store root being written.
    pub fn path(&self) -> &Path {
        match self {
            WriterError::ExistingCommitlog { path }
            | WriterError::CannotResume { path, .. }
            | WriterError::RecordDoesNotFit { path, .. }
            | WriterError::NoFileOpen { path }
            | WriterError::Encode { path, .. } => path,
        }
    }
}
