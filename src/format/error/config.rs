//! Config files: a broker config value that is not what the key needs, and a config file that is
//! unusable with a backup that is no better.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{Error, ParseError};

/// A value of a broker config file (`broker.conf`) that the store geometry cannot use.
#[derive(Debug, thiserror::Error)]
pub enum BrokerConfError {
    #[error("{}: {key}={value} is not a number", path.display())]
    NotANumber {
        path: PathBuf,
        key: &'static str,
        value: String,
    },
    /// `messageDelayLevel` is not a list of durations (`1s 5s 10s 1m ...`).
    #[error("{}: bad messageDelayLevel {value:?}", path.display())]
    BadDelayLevels { path: PathBuf, value: String },
}

impl BrokerConfError {
    /// The broker config file.
    pub fn path(&self) -> &Path {
        match self {
            BrokerConfError::NotANumber { path, .. }
            | BrokerConfError::BadDelayLevels { path, .. } => path,
        }
    }
}

/// Why the contents of a config file (or a client's `offsets.json`) were not used. Shown as the
/// broker's config loading would put it: `missing`, `empty`, `unreadable: ...` (the reason
/// without the path), `fifo, not a regular file`, `too large ...`, `unparsable: at byte ...`.
#[derive(Debug)]
pub enum Unusable {
    Missing,
    Empty,
    /// Not read: an I/O error, not a regular file, too large.
    Unreadable(Box<Error>),
    /// Read, but it does not parse as the file's type.
    Unparsable(ParseError),
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::Missing => f.write_str("missing"),
            Unusable::Empty => f.write_str("empty"),
            Unusable::Unreadable(e) => match &**e {
                Error::Io { source, .. } => write!(f, "unreadable: {source}"),
                Error::NotAFile { found, .. } => {
                    write!(f, "{}, not a regular file", found.describe())
                }
                Error::TooLarge { len, .. } => {
                    write!(f, "too large to be a config file ({len} bytes)")
                }
                other => write!(f, "unreadable: {other}"),
            },
            Unusable::Unparsable(e) => write!(f, "unparsable: {e}"),
        }
    }
}

impl Unusable {
    /// As a broadcasting client's `readLocalOffset` reports it: an unreadable file with the
    /// whole error, path included.
    pub fn as_client_reads(&self) -> impl fmt::Display + '_ {
        struct ClientForm<'a>(&'a Unusable);
        impl fmt::Display for ClientForm<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Unusable::Unreadable(e) => write!(f, "unreadable: {e}"),
                    other => other.fmt(f),
                }
            }
        }
        ClientForm(self)
    }
}

/// A config file that could not be loaded: its main file unusable and its `.bak` no better
/// (the broker refuses to start then; a client reads no offsets).
#[derive(Debug, thiserror::Error)]
pub enum ConfigLoadError {
    /// A store config file (`config/*.json`) at `path` is `main`, and its `.bak` cannot be read
    /// or parsed (`backup` names it).
    #[error("{}: {main}; and the backup is unusable: {backup}", path.display())]
    BackupUnusable {
        path: PathBuf,
        main: Unusable,
        #[source]
        backup: Box<Error>,
    },
    /// A broadcasting client's `offsets.json` (`main`) is `main_state`, and its `.bak` at `path`
    /// does not parse.
    #[error(
        "{}: readLocalOffset: {} is {}, and the backup is unparsable: {source}",
        path.display(),
        main.display(),
        main_state.as_client_reads()
    )]
    ClientBackupUnparsable {
        path: PathBuf,
        main: PathBuf,
        main_state: Unusable,
        #[source]
        source: ParseError,
    },
    /// As [`ConfigLoadError::ClientBackupUnparsable`], with a `.bak` that cannot be read.
    #[error(
        "{}: readLocalOffset: {} is {}, and the backup is unreadable: {source}",
        path.display(),
        main.display(),
        main_state.as_client_reads()
    )]
    ClientBackupUnreadable {
        path: PathBuf,
        main: PathBuf,
        main_state: Unusable,
        #[source]
        source: Box<Error>,
    },
}

impl ConfigLoadError {
    /// The main file of a store config; the `.bak` of a client's offsets (the file that failed
    /// last).
    pub fn path(&self) -> &Path {
        match self {
            ConfigLoadError::BackupUnusable { path, .. }
            | ConfigLoadError::ClientBackupUnparsable { path, .. }
            | ConfigLoadError::ClientBackupUnreadable { path, .. } => path,
        }
    }
}
