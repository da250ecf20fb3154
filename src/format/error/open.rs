//! Opening a store: a root that is not a store, a path given on the command line that names no
//! store file.

use std::path::{Path, PathBuf};

/// Why a path could not be opened as a store root or as one file of a store.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{}: no such directory", path.display())]
    NoSuchDirectory { path: PathBuf },
    /// The root's metadata cannot be read (`kind` is why).
    #[error("{}: cannot be read", path.display())]
    RootUnreadable {
        path: PathBuf,
        kind: std::io::ErrorKind,
    },
    /// Not a folder; `root` is the store root it lies in, when it is a part of one.
    #[error("{}: not a directory{}", path.display(), root_hint(.root))]
    NotADirectory {
        path: PathBuf,
        root: Option<PathBuf>,
    },
    /// A folder with neither `commitlog/` nor `consumequeue/` in it; `root` is the store root
    /// it lies in, when it is a part of one (`commitlog/`, `consumequeue/<topic>`, `config/`).
    #[error(
        "{}: not a RocketMQ store root: neither commitlog/ nor consumequeue/ found{}",
        path.display(),
        root_hint(.root)
    )]
    NotAStoreRoot {
        path: PathBuf,
        root: Option<PathBuf>,
    },
    #[error("{}: no such file or directory", path.display())]
    NoSuchFile { path: PathBuf },
    /// A file whose name and folders are not those of a store file.
    #[error(
        "{}: not a store root nor a known store file (commitlog/, consumequeue/<topic>/<queue>/, \
         index/, config/, checkpoint)",
        path.display()
    )]
    NotAStoreFile { path: PathBuf },
    /// A folder that holds the stage marker: a writer (rebuild, repair, export, gen) was
    /// stopped while it wrote it, or before it finished switching it in.
    #[error(
        "{}: holds {marker}: an rmqstore writer was stopped before it finished this folder, so it \
         may be incomplete; remove the folder and run the command that wrote it again (for a \
         store switched in by `repair --in-place` or `rebuild --in-place`, run that command \
         again: it finishes the switch)",
        path.display()
    )]
    Staged { path: PathBuf, marker: &'static str },
}

impl OpenError {
    /// The root or file that could not be opened.
    pub fn path(&self) -> &Path {
        match self {
            OpenError::NoSuchDirectory { path }
            | OpenError::RootUnreadable { path, .. }
            | OpenError::NotADirectory { path, .. }
            | OpenError::NotAStoreRoot { path, .. }
            | OpenError::NoSuchFile { path }
            | OpenError::NotAStoreFile { path }
            | OpenError::Staged { path, .. } => path,
        }
    }
}

/// `; it is inside the store root R (give R)`, or nothing.
fn root_hint(root: &Option<PathBuf>) -> String {
    match root {
        Some(r) => format!(
            "; it is part of the store root {} (give that folder)",
            r.display()
        ),
        None => String::new(),
    }
}
