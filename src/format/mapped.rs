//! Read-only access to a whole file: a memory map, or the bytes read into memory.
//!
//! This module holds the crate's only `unsafe` block. The contract it accepts: the file is not
//! truncated while mapped. A live broker never truncates a commitlog file it is writing, but a
//! broker restarting into recovery can; stop the broker (or work on a copy) before running
//! commands that read a whole store, or a SIGBUS can end the process.

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use super::error::{Error, Result};

enum Bytes {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

/// A file's bytes, mapped read-only (or read whole when mapping is not possible).
pub struct Mapped {
    path: PathBuf,
    bytes: Bytes,
}

impl Mapped {
    /// Map `path` read-only. Empty files and files that cannot be mapped are read instead.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Ok(Mapped {
                path: path.to_path_buf(),
                bytes: Bytes::Owned(Vec::new()),
            });
        }
        #[allow(unsafe_code)]
        // SAFETY: the map is read-only and private to this process. The file must not shrink
        // while mapped (module doc); everything reading the map checks bounds against its length.
        let map = unsafe { memmap2::MmapOptions::new().map(&file) };
        match map {
            Ok(map) => Ok(Mapped {
                path: path.to_path_buf(),
                bytes: Bytes::Map(map),
            }),
            Err(_) => Self::read(path),
        }
    }

    /// Map `path` read-only with every page faulted in up front (`MAP_POPULATE`): for walks that
    /// read the whole file, one batched fault is much cheaper than one per page.
    pub fn open_populated(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Self::read(path);
        }
        #[allow(unsafe_code)]
        // SAFETY: as in `open`: read-only, private, bounds checked by every reader.
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) };
        match map {
            Ok(map) => Ok(Mapped {
                path: path.to_path_buf(),
                bytes: Bytes::Map(map),
            }),
            Err(_) => Self::read(path),
        }
    }

    /// Read `path` whole into memory (for small files, and where mapping is not wanted).
    pub fn read(path: &Path) -> Result<Self> {
        let v = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Ok(Mapped {
            path: path.to_path_buf(),
            bytes: Bytes::Owned(v),
        })
    }

    /// Bytes that did not come from a file (tests, fuzzing); `path` is only used in errors.
    pub fn from_vec(path: impl Into<PathBuf>, v: Vec<u8>) -> Self {
        Mapped {
            path: path.into(),
            bytes: Bytes::Owned(v),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tell the kernel the map will be read front to back.
    pub fn advise_sequential(&self) {
        #[cfg(unix)]
        if let Bytes::Map(m) = &self.bytes {
            let _ = m.advise(memmap2::Advice::Sequential);
        }
    }
}

impl Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self
    }
}
