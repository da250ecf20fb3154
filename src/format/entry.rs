//! What is at a path of a store, found without opening it: a regular file (directly or through a
//! symlink), a directory, a FIFO, a socket, a device, a symlink loop or a dangling symlink.
//!
//! Opening a FIFO for reading blocks until a writer comes, and reading a device or a huge file
//! whole can take unbounded memory, so nothing in rmqstore opens a store file except through
//! [`open_regular`]: it opens without blocking and refuses anything that is not a regular file.
//! Symlinks are followed only to regular files and directories; their sizes are the target's.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};

use super::error::{Error, Result};

/// The kind of a directory entry, after following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file of `len` bytes.
    File {
        len: u64,
    },
    Dir,
    Fifo,
    Socket,
    BlockDevice,
    CharDevice,
    /// A symlink chain that never ends (`ELOOP`).
    SymlinkLoop,
    /// A symlink to nothing.
    DanglingSymlink,
    /// The entry's metadata cannot be read (permissions, I/O error).
    Unreadable,
    /// Nothing is there.
    Missing,
}

impl Kind {
    /// A few words for messages: "a FIFO", "a directory", ...
    pub fn describe(self) -> &'static str {
        match self {
            Kind::File { .. } => "a regular file",
            Kind::Dir => "a directory",
            Kind::Fifo => "a FIFO",
            Kind::Socket => "a socket",
            Kind::BlockDevice => "a block device",
            Kind::CharDevice => "a character device",
            Kind::SymlinkLoop => "a symlink loop",
            Kind::DanglingSymlink => "a dangling symlink",
            Kind::Unreadable => "an entry whose metadata cannot be read",
            Kind::Missing => "missing",
        }
    }

    pub fn is_file(self) -> bool {
        matches!(self, Kind::File { .. })
    }

    /// The length of a regular file, 0 for anything else.
    pub fn file_len(self) -> u64 {
        match self {
            Kind::File { len } => len,
            _ => 0,
        }
    }

    fn of(meta: &Metadata) -> Kind {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_file() {
            Kind::File { len: meta.len() }
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_fifo() {
            Kind::Fifo
        } else if t.is_socket() {
            Kind::Socket
        } else if t.is_block_device() {
            Kind::BlockDevice
        } else if t.is_char_device() {
            Kind::CharDevice
        } else {
            Kind::Unreadable
        }
    }
}

/// One entry of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: PathBuf,
    /// The entry's name, when it is UTF-8 (names that are not are kept as `None`).
    pub name: Option<String>,
    pub kind: Kind,
    /// The entry itself is a symlink (`kind` is what it points at).
    pub symlink: bool,
}

/// What is at `path`, following symlinks.
pub fn probe(path: &Path) -> Entry {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string);
    let (kind, symlink) = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Kind::Missing, false),
        Err(_) => (Kind::Unreadable, false),
        Ok(m) if m.file_type().is_symlink() => (
            match std::fs::metadata(path) {
                Ok(t) => Kind::of(&t),
                Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => Kind::SymlinkLoop,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Kind::DanglingSymlink,
                Err(_) => Kind::Unreadable,
            },
            true,
        ),
        Ok(m) => (Kind::of(&m), false),
    };
    Entry {
        path: path.to_path_buf(),
        name,
        kind,
        symlink,
    }
}

/// The entries of `dir`, sorted by path.
pub fn list(dir: &Path) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        out.push(probe(&e.path()));
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Open `path` for reading, refusing anything but a regular file. The open never blocks (a FIFO
/// is opened with `O_NONBLOCK`, then refused), and what is checked is the opened file itself, so
/// the entry cannot change kind between the check and the read.
pub fn open_regular(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => Error::NotAFile {
                path: path.to_path_buf(),
                found: Kind::SymlinkLoop,
            },
            _ => Error::io(path, e),
        })?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    match Kind::of(&meta) {
        Kind::File { .. } => Ok(file),
        found => Err(Error::NotAFile {
            path: path.to_path_buf(),
            found,
        }),
    }
}

/// Read a whole regular file of at most `max` bytes. A larger file is an error naming its size,
/// and nothing of it is read.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    let mut f = open_regular(path)?;
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    if len > max {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            len,
            max,
        });
    }
    let mut out = Vec::with_capacity(len as usize);
    // `take` also bounds a file that grows while it is read.
    f.by_ref()
        .take(max.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| Error::io(path, e))?;
    if out.len() as u64 > max {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            len: out.len() as u64,
            max,
        });
    }
    Ok(out)
}

/// The first `max` bytes of a regular file (all of it when shorter).
pub fn read_prefix(path: &Path, max: u64) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    open_regular(path)?
        .take(max)
        .read_to_end(&mut out)
        .map_err(|e| Error::io(path, e))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_apart_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(d.join("file"), b"12345").unwrap();
        std::fs::create_dir(d.join("dir")).unwrap();
        nix::unistd::mkfifo(&d.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::os::unix::fs::symlink(d.join("file"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("loop2"), d.join("loop1")).unwrap();
        std::os::unix::fs::symlink(d.join("loop1"), d.join("loop2")).unwrap();
        std::os::unix::fs::symlink(d.join("nothing"), d.join("dangling")).unwrap();
        let kinds: Vec<(String, Kind, bool)> = list(d)
            .unwrap()
            .into_iter()
            .map(|e| (e.name.unwrap(), e.kind, e.symlink))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("dangling".into(), Kind::DanglingSymlink, true),
                ("dir".into(), Kind::Dir, false),
                ("fifo".into(), Kind::Fifo, false),
                ("file".into(), Kind::File { len: 5 }, false),
                ("link".into(), Kind::File { len: 5 }, true),
                ("loop1".into(), Kind::SymlinkLoop, true),
                ("loop2".into(), Kind::SymlinkLoop, true),
            ]
        );
        // Opening: the FIFO is refused at once (no writer needed), a symlink to a file reads.
        let e = open_regular(&d.join("fifo")).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        assert!(open_regular(&d.join("dir")).is_err());
        assert!(open_regular(&d.join("loop1"))
            .unwrap_err()
            .to_string()
            .contains("symlink loop"));
        assert_eq!(read_bounded(&d.join("link"), 5).unwrap(), b"12345");
        let e = read_bounded(&d.join("file"), 4).unwrap_err();
        assert!(e.to_string().contains("5 bytes"), "{e}");
    }
}
