//! Errors from reading and writing stores: every one names the file it is about; bad bytes also
//! the offset and what was expected. Each operation that can refuse or fail in its own ways has
//! its own enum in a submodule, nested in [`Error`].

mod check;
mod client_dir;
mod config;
mod dledger;
mod open;
mod queue_file;
mod write_path;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use check::{RebuildError, RepairError};
pub use client_dir::{ClientDirError, ClientDirProblem, ClientNameError};
pub use config::{BrokerConfError, ConfigLoadError, Unusable};
pub use dledger::DledgerError;
pub use open::OpenError;
pub use queue_file::QueueFileError;
pub use write_path::WritePathError;
pub use writer::WriterError;

/// What was wrong with the bytes at some offset. Carries expected-versus-found where it helps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("expected {needed} bytes for {what}, only {left} left")]
    Truncated {
        what: &'static str,
        needed: u64,
        left: u64,
    },
    #[error("bad magic code {found:#010x}, expected a message (0xdaa320a7/0xdaa320ab) or blank (0xcbd43194) magic")]
    BadMagic { found: u32 },
    #[error("record size {found} is out of bounds (expected {min}..={max})")]
    BadSize { found: i64, min: i64, max: i64 },
    #[error("record size field says {stored} but the fields add up to {computed}")]
    SizeMismatch { stored: i32, computed: i64 },
    #[error("negative {what} length {found}")]
    NegativeLength { what: &'static str, found: i64 },
    #[error("body CRC stored {stored} but computed {computed}")]
    BodyCrc { stored: u32, computed: u32 },
    #[error("{what}: expected {expected}, found {found}")]
    Unexpected {
        what: &'static str,
        expected: String,
        found: String,
    },
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
}

/// A parse failure inside one buffer: `offset` is relative to the start of the buffer handed to
/// the parser. [`ParseError::in_file`] turns it into an [`Error`] with the path and absolute offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub offset: u64,
    pub kind: ErrorKind,
}

impl ParseError {
    pub fn new(offset: u64, kind: ErrorKind) -> Self {
        ParseError { offset, kind }
    }

    /// Attach the file path; `base` is added to the offset (use 0 for offsets inside the file).
    pub fn in_file(self, path: &Path, base: u64) -> Error {
        Error::Data {
            path: path.to_path_buf(),
            offset: base.saturating_add(self.offset),
            kind: self.kind,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.kind)
    }
}

impl std::error::Error for ParseError {}

/// An error from the store: bad data in a named file at a byte offset, or an I/O failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: at byte {offset}: {kind}", path.display())]
    Data {
        path: PathBuf,
        offset: u64,
        kind: ErrorKind,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Something other than a regular file where a store file belongs (it is never opened).
    #[error("{}: {}, not a regular file", path.display(), found.describe())]
    NotAFile {
        path: PathBuf,
        found: super::entry::Kind,
    },
    /// A file larger than anything the broker writes there (it is not read).
    #[error("{}: {len} bytes, larger than the {max} bytes such a file can hold", path.display())]
    TooLarge { path: PathBuf, len: u64, max: u64 },
    /// A broker (or another process) holds the store that was to be written: nothing is.
    #[error("{}: {holder}", path.display())]
    StoreInUse { path: PathBuf, holder: Holder },
    /// The run stopped because its interrupt flag was set (Ctrl-C, Esc in the browser).
    #[error("{}: {what} interrupted", path.display())]
    Interrupted { path: PathBuf, what: &'static str },
    /// A worker thread panicked: a bug, said rather than passed on as a panic.
    #[error("{}: {what} panicked", path.display())]
    WorkerPanicked { path: PathBuf, what: &'static str },
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    WritePath(#[from] WritePathError),
    #[error(transparent)]
    Writer(#[from] WriterError),
    #[error(transparent)]
    BrokerConf(#[from] BrokerConfError),
    /// Boxed: it holds the errors of two files.
    #[error(transparent)]
    ConfigLoad(Box<ConfigLoadError>),
    #[error(transparent)]
    QueueFile(#[from] QueueFileError),
    #[error(transparent)]
    ClientDir(#[from] ClientDirError),
    #[error(transparent)]
    Rebuild(#[from] RebuildError),
    #[error(transparent)]
    Repair(#[from] RepairError),
    #[error(transparent)]
    Dledger(#[from] DledgerError),
    /// A commitlog file the reader could not map when it opened the store: the error met then,
    /// handed out again on each read of that file.
    #[error(transparent)]
    Unmapped(Arc<Error>),
}

impl From<ConfigLoadError> for Error {
    fn from(e: ConfigLoadError) -> Self {
        Error::ConfigLoad(Box::new(e))
    }
}

/// Who holds a store that was to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// A process holds the POSIX lock on `lock` (the broker's `FileChannel.tryLock`); its pid
    /// when the lock says (0 or less when it does not).
    Lock { pid: i32 },
    /// The pid written in `abort` (5.x) is a running process.
    AbortPid { pid: u32 },
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Holder::Lock { pid } if pid > 0 => write!(
                f,
                "a broker (pid {pid}) holds the store lock: stop it before writing to the store"
            ),
            Holder::Lock { .. } => f.write_str(
                "another process holds the store lock: stop it before writing to the store",
            ),
            Holder::AbortPid { pid } => write!(
                f,
                "the abort file names pid {pid}, which is running: stop the broker first"
            ),
        }
    }
}

impl Error {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn data(path: &Path, offset: u64, kind: ErrorKind) -> Self {
        Error::Data {
            path: path.to_path_buf(),
            offset,
            kind,
        }
    }

    pub fn interrupted(path: &Path, what: &'static str) -> Self {
        Error::Interrupted {
            path: path.to_path_buf(),
            what,
        }
    }

    pub fn worker_panicked(path: &Path, what: &'static str) -> Self {
        Error::WorkerPanicked {
            path: path.to_path_buf(),
            what,
        }
    }

    /// The file this error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Data { path, .. }
            | Error::Io { path, .. }
            | Error::NotAFile { path, .. }
            | Error::TooLarge { path, .. }
            | Error::StoreInUse { path, .. }
            | Error::Interrupted { path, .. }
            | Error::WorkerPanicked { path, .. } => path,
            Error::Open(e) => e.path(),
            Error::WritePath(e) => e.path(),
            Error::Writer(e) => e.path(),
            Error::BrokerConf(e) => e.path(),
            Error::ConfigLoad(e) => e.path(),
            Error::QueueFile(e) => e.path(),
            Error::ClientDir(e) => e.path(),
            Error::Rebuild(e) => e.path(),
            Error::Repair(e) => e.path(),
            Error::Dledger(e) => e.path(),
            Error::Unmapped(e) => e.path(),
        }
    }

    /// The byte offset in [`Error::path`] the error is about, when it is about bytes.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Error::Data { offset, .. } => Some(*offset),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
