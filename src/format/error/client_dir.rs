//! A broadcasting client's offsets folder (`<localOffsetStoreDir>/<clientId>/<group>`) that does
//! not have that shape.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::format::entry::Kind;

/// A `--client-dir` that is not a client's offsets folder.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: {problem} (--client-dir is <localOffsetStoreDir>/<clientId>/<group>)",
    path.display()
)]
pub struct ClientDirError {
    pub path: PathBuf,
    pub problem: ClientDirProblem,
}

impl ClientDirError {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What is wrong with a client's offsets folder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientDirProblem {
    #[error("no such directory")]
    NoSuchDirectory,
    #[error("{}, not a directory", found.describe())]
    NotADirectory { found: Kind },
    /// A folder name on the way that is not UTF-8.
    #[error("{name:?} is not UTF-8")]
    NotUtf8 { name: OsString },
    /// The path has fewer than two folder names.
    #[error("no group and client id folders in this path")]
    TooShort,
    #[error(transparent)]
    Name(#[from] ClientNameError),
}

/// A consumer group or client id that breaks the client's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientNameError {
    /// Not 1 to 255 of `a-z A-Z 0-9 % | _ -` (`Validators.checkGroup`).
    #[error("group {name:?}: a group name is 1 to 255 of the characters a-z A-Z 0-9 % | _ -")]
    Group { name: String },
    /// Not `<ip>@<instanceName>[@<unitName>]` (`buildMQClientId`).
    #[error("client id {id:?}: expected <clientIP>@<instanceName> (e.g. 10.0.0.5@DEFAULT)")]
    ClientId { id: String },
}
