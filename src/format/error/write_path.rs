//! Paths refused for writing: a name read from disk that cannot become a path, an output inside
//! a store, something already where a new folder goes, a symlink where a plain file must be.

use std::path::{Path, PathBuf};

use crate::format::entry::Kind;
use crate::format::layout::NameError;

/// Why nothing was written at a path.
#[derive(Debug, thiserror::Error)]
pub enum WritePathError {
    /// A topic or queue id read from the store that cannot be a consume queue folder.
    #[error(
        "{}: refusing to make a consume queue path of topic {topic:?} queue {queue_id}: {source}",
        root.display()
    )]
    BadQueueName {
        root: PathBuf,
        topic: String,
        queue_id: i32,
        #[source]
        source: NameError,
    },
    /// Not even the first component of the path exists, so it cannot be resolved.
    #[error("{}: no part of this path exists", path.display())]
    NothingExists { path: PathBuf },
    /// An output path inside the store at `store`; `option` names where the path came from
    /// (`--out`, "the overlay", ...).
    #[error(
        "{}: {option} lies inside the store {}: refusing to write into a store (choose a path \
         outside it)",
        path.display(),
        store.display()
    )]
    InsideStore {
        path: PathBuf,
        option: &'static str,
        store: PathBuf,
    },
    /// A folder a run makes afresh is already there.
    #[error("{}: already exists: refusing to write over it", path.display())]
    AlreadyExists { path: PathBuf },
    /// The store's `lock` is a symlink or not a regular file.
    #[error(
        "{}: lock is {}{}: refusing to lock through it",
        path.display(),
        if *symlink { "a symlink to " } else { "" },
        found.describe()
    )]
    LockNotAFile {
        path: PathBuf,
        symlink: bool,
        found: Kind,
    },
    /// A broadcasting client's `offsets.json` (or its `.tmp` or `.bak`) is a symlink.
    #[error(
        "{}: a symlink: refusing to write through it (offsets.json and its .tmp and .bak must be \
         regular files inside the client directory)",
        path.display()
    )]
    ClientFileSymlink { path: PathBuf },
}

impl WritePathError {
    /// The path refused (the store root for a queue name).
    pub fn path(&self) -> &Path {
        match self {
            WritePathError::BadQueueName { root: path, .. }
            | WritePathError::NothingExists { path }
            | WritePathError::InsideStore { path, .. }
            | WritePathError::AlreadyExists { path }
            | WritePathError::LockNotAFile { path, .. }
            | WritePathError::ClientFileSymlink { path } => path,
        }
    }
}
