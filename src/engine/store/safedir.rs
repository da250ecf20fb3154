//! Safe writes into a store: the live-store guard, fsync helpers, and switching a freshly built
//! folder into place so that a crash at any moment leaves either the old or the new folder
//! complete (an atomic `renameat2(RENAME_EXCHANGE)`), with the old folder kept in a dated backup.
//!
//! Crash tests set `RMQSTORE_FAILPOINT=<name>` to make the process abort at a named step.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::engine::store::paths;
use crate::format::error::{Error, Holder, Result, WritePathError};

pub use crate::format::failpoint::failpoint;

/// Why a store is considered live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    NotLive,
    /// Another process holds the POSIX lock on `lock` (the broker's `FileChannel.tryLock`).
    LockHeld {
        pid: i32,
    },
    /// The pid written in `abort` (5.x) is a running process.
    AbortPidAlive {
        pid: u32,
    },
}

/// The lock files this process holds through a [`StoreLock`], by (device, inode).
static HELD: std::sync::Mutex<Vec<(u64, u64)>> = std::sync::Mutex::new(Vec::new());

fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

fn held_by_us(meta: &std::fs::Metadata) -> bool {
    HELD.lock()
        .map(|h| h.contains(&file_id(meta)))
        .unwrap_or(false)
}

fn whole_file_write_lock() -> nix::libc::flock {
    nix::libc::flock {
        l_type: nix::libc::F_WRLCK as nix::libc::c_short,
        l_whence: nix::libc::SEEK_SET as nix::libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// Check whether a broker seems to run on `root`, without taking any lock. A lock held by this
/// process's own [`StoreLock`] does not count.
pub fn liveness(root: &Path) -> Result<Liveness> {
    let lock = root.join(paths::LOCK);
    if crate::format::entry::probe(&lock).kind.is_file() {
        let f = crate::format::entry::open_regular(&lock)?;
        let meta = f.metadata().map_err(|e| Error::io(&lock, e))?;
        if !held_by_us(&meta) {
            let mut fl = whole_file_write_lock();
            nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_GETLK(&mut fl))
                .map_err(|e| Error::io(&lock, e.into()))?;
            if fl.l_type != nix::libc::F_UNLCK as nix::libc::c_short {
                return Ok(Liveness::LockHeld { pid: fl.l_pid });
            }
        }
    }
    let abort = crate::format::checkpoint::AbortMarker::read(root);
    if let Some(pid) = abort.pid.filter(|_| abort.present) {
        if pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists() {
            return Ok(Liveness::AbortPidAlive { pid });
        }
    }
    Ok(Liveness::NotLive)
}

/// Refuse to write into a live store.
pub fn ensure_not_live(root: &Path) -> Result<()> {
    match liveness(root)? {
        Liveness::NotLive => Ok(()),
        Liveness::LockHeld { pid } => Err(held_error(root, pid)),
        Liveness::AbortPidAlive { pid } => Err(Error::StoreInUse {
            path: root.join(paths::ABORT),
            holder: Holder::AbortPid { pid },
        }),
    }
}

fn held_error(root: &Path, pid: i32) -> Error {
    Error::StoreInUse {
        path: root.join(paths::LOCK),
        holder: Holder::Lock { pid },
    }
}

/// The broker's own lock on a store, held by this process for as long as the value lives: a
/// write lock on the whole of `<root>/lock`, which conflicts with the lock a broker takes at
/// start (`FileChannel.tryLock`, an `F_SETLK` write lock on byte 0), so a broker starting while
/// rmqstore writes is refused instead of racing it, and rmqstore is refused while a broker
/// runs. It is taken as an open file description lock (`F_OFD_SETLK`): unlike a classic POSIX
/// lock it is not dropped when some other descriptor of the same file is closed in this process
/// (a copy of the store, a liveness check), and it conflicts with POSIX locks both ways.
/// Dropping the value releases it.
pub struct StoreLock {
    files: Vec<(File, (u64, u64))>,
    root: PathBuf,
}

impl StoreLock {
    /// Lock `root` (creating an empty `lock` file if there is none, as a broker's start would),
    /// or say who holds it. A 5.x `abort` naming a running pid is refused too.
    pub fn acquire(root: &Path) -> Result<StoreLock> {
        let mut l = StoreLock {
            files: Vec::new(),
            root: root.to_path_buf(),
        };
        l.add(root)?;
        ensure_not_live(root)?;
        Ok(l)
    }

    /// Also hold the lock of another store root (a staged copy about to be switched in), unless
    /// its `lock` is the same file as one already held.
    pub fn add(&mut self, root: &Path) -> Result<()> {
        let path = root.join(paths::LOCK);
        let found = crate::format::entry::probe(&path);
        let usable = matches!(
            found.kind,
            crate::format::entry::Kind::File { .. } | crate::format::entry::Kind::Missing
        );
        if found.symlink || !usable {
            return Err(WritePathError::LockNotAFile {
                path,
                symlink: found.symlink,
                found: found.kind,
            }
            .into());
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let id = file_id(&f.metadata().map_err(|e| Error::io(&path, e))?);
        if self.files.iter().any(|(_, i)| *i == id) {
            return Ok(());
        }
        let fl = whole_file_write_lock();
        match nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_OFD_SETLK(&fl)) {
            Ok(_) => {}
            Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EACCES) => {
                let mut probe = whole_file_write_lock();
                let pid = nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_GETLK(&mut probe))
                    .map(|_| probe.l_pid)
                    .unwrap_or(0);
                return Err(held_error(root, pid));
            }
            Err(e) => return Err(Error::io(&path, e.into())),
        }
        if let Ok(mut h) = HELD.lock() {
            h.push(id);
        }
        self.files.push((f, id));
        Ok(())
    }

    /// The store root the lock was first taken for.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// For a run that writes elsewhere but reads the whole store: hold the store's lock when
    /// it has a `lock` file (so no broker starts on it meanwhile), without creating one; a live
    /// store is refused either way.
    pub fn acquire_existing(root: &Path) -> Result<Option<StoreLock>> {
        let found = crate::format::entry::probe(&root.join(paths::LOCK));
        if found.kind.is_file() && !found.symlink {
            StoreLock::acquire(root).map(Some)
        } else {
            ensure_not_live(root).map(|_| None)
        }
    }
}

/// Marker file inside a stage folder: present while it is built, and in the store after an
/// exchange until the run that made it finishes.
pub const STAGE_MARKER: &str = ".rmqstore-stage";

/// Mark `dir` (made when missing) as a writer's unfinished output: every read command refuses a
/// folder that holds the marker, so what a killed writer leaves never looks like a store.
pub fn mark_stage(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    write_new(&dir.join(STAGE_MARKER), b"")?;
    sync_dir(dir)
}

/// The writer finished `dir` (its files synced): the marker goes.
pub fn unmark_stage(dir: &Path) -> Result<()> {
    let m = dir.join(STAGE_MARKER);
    std::fs::remove_file(&m).map_err(|e| Error::io(&m, e))?;
    sync_dir(dir)
}

/// Remove a stage this run made, if it is still marked as one; says on stderr when it cannot.
pub fn remove_stage(dir: &Path) {
    if !dir.join(STAGE_MARKER).exists() {
        return;
    }
    if let Err(e) = std::fs::remove_dir_all(dir) {
        eprintln!(
            "rmqstore: could not remove {} ({e}); it is marked as unfinished ({STAGE_MARKER}): \
             remove it",
            dir.display()
        );
    }
}

/// Hard-link the tree `from` to `to` exactly as it is: folders are made, every other entry
/// (files, symlinks, FIFOs) is linked as itself; symlinked folders are not followed.
pub fn link_all(from: &Path, to: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(from).map_err(|e| Error::io(from, e))?;
    if !meta.is_dir() {
        return std::fs::hard_link(from, to).map_err(|e| Error::io(to, e));
    }
    std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    for e in std::fs::read_dir(from).map_err(|e| Error::io(from, e))? {
        let e = e.map_err(|e| Error::io(from, e))?;
        link_all(&e.path(), &to.join(e.file_name()))?;
    }
    Ok(())
}

/// Remove from the tree `old` every entry that is a link of the same file at the same place in
/// `new` (same device and inode), and folders left empty: no byte goes, only a second name.
/// Returns what stays (anything that is not such a link).
pub fn drop_links(old: &Path, new: &Path) -> Result<Vec<PathBuf>> {
    let mut left = Vec::new();
    drop_links_in(old, new, &mut left)?;
    if std::fs::remove_dir(old).is_err() {
        left.push(old.to_path_buf());
    }
    Ok(left)
}

fn drop_links_in(old: &Path, new: &Path, left: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(old).map_err(|e| Error::io(old, e))? {
        let e = e.map_err(|e| Error::io(old, e))?;
        let (a, b) = (e.path(), new.join(e.file_name()));
        let ma = std::fs::symlink_metadata(&a).map_err(|x| Error::io(&a, x))?;
        if ma.is_dir() {
            drop_links_in(&a, &b, left)?;
            if std::fs::remove_dir(&a).is_err() {
                left.push(a);
            }
            continue;
        }
        match std::fs::symlink_metadata(&b) {
            Ok(mb) if file_id(&ma) == file_id(&mb) => {
                std::fs::remove_file(&a).map_err(|x| Error::io(&a, x))?
            }
            _ => left.push(a),
        }
    }
    Ok(())
}

/// Switch `stage`, a complete and synced store folder beside `root` (same parent), in as
/// `root` by one atomic exchange (`renameat2(RENAME_EXCHANGE)`); the old store ends at
/// `before`. At every moment `root` is either the old store or the new one, complete. The
/// new store keeps the stage marker until [`finish_switch`].
pub fn switch_root(root: &Path, stage: &Path, before: &Path) -> Result<()> {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        stage,
        nix::fcntl::AT_FDCWD,
        root,
        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
    )
    .map_err(|e| Error::io(root, e.into()))?;
    failpoint("root-exchanged");
    std::fs::rename(stage, before).map_err(|e| Error::io(before, e))?;
    finish_switch(root)
}

/// The last step of a switch: the marker goes, the parent folder is synced.
pub fn finish_switch(root: &Path) -> Result<()> {
    match std::fs::remove_file(root.join(STAGE_MARKER)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(root, e)),
    }
    sync_dir(root)?;
    if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Finish or undo what an interrupted switch left beside `root`: stage folders named
/// `<stage_prefix><t>` that still hold the marker were never switched in (only links to the
/// store's files and derived data: removed); one without it is the old store, switched out
/// before the run ended: renamed to `<before_prefix><t>`. A marker in `root` itself means the
/// switch happened: it is removed.
pub fn finish_interrupted(root: &Path, stage_prefix: &str, before_prefix: &str) -> Result<()> {
    let parent = root
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    finish_switch(root)?;
    for e in std::fs::read_dir(parent).map_err(|e| Error::io(parent, e))? {
        let e = e.map_err(|e| Error::io(parent, e))?;
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = n.strip_prefix(stage_prefix) else {
            continue;
        };
        let p = e.path();
        if crate::format::entry::probe(&p).kind != crate::format::entry::Kind::Dir {
            continue;
        }
        if p.join(STAGE_MARKER).exists() {
            std::fs::remove_dir_all(&p).map_err(|x| Error::io(&p, x))?;
        } else {
            let to = parent.join(format!("{before_prefix}{rest}"));
            std::fs::rename(&p, &to).map_err(|x| Error::io(&to, x))?;
        }
    }
    sync_dir(parent)
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        if let Ok(mut h) = HELD.lock() {
            for (_, id) in &self.files {
                if let Some(i) = h.iter().position(|x| x == id) {
                    h.swap_remove(i);
                }
            }
        }
        // Closing each file releases its lock.
    }
}

/// fsync every file below `dir` and every folder, then `dir` itself. Symlinks are not
/// followed (the tree is one this process wrote).
pub fn sync_tree(dir: &Path) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let p = e.path();
        let t = e.file_type().map_err(|x| Error::io(&p, x))?;
        if t.is_dir() {
            sync_tree(&p)?;
        } else if t.is_file() {
            File::open(&p)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(&p, e))?;
        }
    }
    sync_dir(dir)
}

/// The ranges of `f` inside `0..limit` that hold data, holes of a sparse file skipped
/// (`SEEK_DATA`/`SEEK_HOLE`); the whole range when the file system cannot say.
pub fn data_ranges(f: &File, limit: u64) -> Vec<(u64, u64)> {
    use nix::unistd::{lseek, Whence};
    let Ok(end) = i64::try_from(limit) else {
        return vec![(0, limit)];
    };
    let mut out = Vec::new();
    let mut at = 0i64;
    while at < end {
        let d = match lseek(f, at, Whence::SeekData) {
            Ok(d) => d,
            Err(nix::errno::Errno::ENXIO) => break,
            Err(_) => return vec![(0, limit)],
        };
        if d >= end {
            break;
        }
        let h = match lseek(f, d, Whence::SeekHole) {
            Ok(h) => h.min(end),
            Err(_) => return vec![(0, limit)],
        };
        if h <= d {
            return vec![(0, limit)];
        }
        out.push((d as u64, h as u64));
        at = h;
    }
    out
}

/// One side of a copy, for errors that name the file at fault.
pub struct Side<'a> {
    pub file: &'a File,
    pub path: &'a Path,
    pub at: u64,
}

/// Copy `len` bytes from `src` to `dst` (in the kernel where it can, else through a buffer),
/// without reading them into memory whole. An error names the file that failed: the source
/// when it cannot be read, the destination when it cannot be written.
pub fn copy_bytes(src: Side<'_>, dst: Side<'_>, len: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let (mut a, mut b, mut left) = (src.at, dst.at, len);
    while left > 0 {
        let n = left.min(1 << 30) as usize;
        let (mut ia, mut ib) = (a as i64, b as i64);
        match nix::fcntl::copy_file_range(src.file, Some(&mut ia), dst.file, Some(&mut ib), n) {
            Ok(k) if k > 0 => {
                a += k as u64;
                b += k as u64;
                left -= k as u64;
            }
            // Not possible here, or an error: the plain way says which side failed.
            _ => {
                let mut buf = vec![0u8; (1 << 20).min(left as usize)];
                while left > 0 {
                    let n = buf.len().min(left as usize);
                    src.file
                        .read_exact_at(&mut buf[..n], a)
                        .map_err(|e| Error::io(src.path, e))?;
                    dst.file
                        .write_all_at(&buf[..n], b)
                        .map_err(|e| Error::io(dst.path, e))?;
                    a += n as u64;
                    b += n as u64;
                    left -= n as u64;
                }
            }
        }
    }
    Ok(())
}

/// Make `dst` (which must not exist) a copy of the first `keep` bytes of `src`, its holes kept
/// as holes, zero-extended to `len`, with each `(position, bytes)` patch written over it; fsynced.
pub fn write_copy(
    src: &Path,
    dst: &Path,
    keep: u64,
    len: u64,
    patches: &[(u64, Vec<u8>)],
) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let from = crate::format::entry::open_regular(src)?;
    let src_len = from.metadata().map_err(|e| Error::io(src, e))?.len();
    let keep = keep.min(src_len);
    let to = create_new(dst)?;
    for (a, b) in data_ranges(&from, keep) {
        copy_bytes(
            Side {
                file: &from,
                path: src,
                at: a,
            },
            Side {
                file: &to,
                path: dst,
                at: a,
            },
            b - a,
        )?;
    }
    to.set_len(len.max(keep)).map_err(|e| Error::io(dst, e))?;
    for (at, bytes) in patches {
        to.write_all_at(bytes, *at).map_err(|e| Error::io(dst, e))?;
    }
    to.sync_all().map_err(|e| Error::io(dst, e))
}

/// Create a new file (its folder too); an existing one is an error, never overwritten.
pub fn create_new(p: &Path) -> Result<File> {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)
        .map_err(|e| Error::io(p, e))
}

/// Write a small new file whole and fsync it.
pub fn write_new(p: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f = create_new(p)?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(p, e))
}

/// Hard-link `from` to `to` (a symlink is linked as the symlink itself), copying a regular file
/// when linking is not possible (another file system).
pub fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(d) = to.parent() {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    let e = crate::format::entry::probe(from);
    if e.symlink {
        let target = std::fs::read_link(from).map_err(|x| Error::io(from, x))?;
        return std::os::unix::fs::symlink(target, to).map_err(|x| Error::io(to, x));
    }
    let len = e.kind.file_len();
    write_copy(from, to, len, len, &[])
}

/// fsync a folder (makes renames and new names inside it durable).
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// A timestamp for folder names: `YYYYmmdd-HHMMSS` (UTC) plus the process id.
pub fn stamp() -> String {
    format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S"),
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_that_is_not_a_plain_file_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir(root.join("lock")).unwrap();
        let e = StoreLock::acquire(root).err().expect("a folder named lock");
        assert!(
            matches!(
                e,
                Error::WritePath(WritePathError::LockNotAFile {
                    symlink: false,
                    found: crate::format::entry::Kind::Dir,
                    ..
                })
            ),
            "{e}"
        );
        assert_eq!(e.path(), root.join("lock"));
        std::fs::remove_dir(root.join("lock")).unwrap();
        std::fs::write(root.join("elsewhere"), b"").unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("lock")).unwrap();
        let e = StoreLock::acquire(root).err().expect("a symlinked lock");
        assert!(
            matches!(
                e,
                Error::WritePath(WritePathError::LockNotAFile { symlink: true, .. })
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .ends_with(": lock is a symlink to a regular file: refusing to lock through it"),
            "{e}"
        );
    }

    #[test]
    fn liveness_sees_a_held_lock_and_a_running_abort_pid() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        assert_eq!(liveness(root).unwrap(), Liveness::NotLive);
        std::fs::write(root.join("lock"), b"lock").unwrap();
        assert_eq!(liveness(root).unwrap(), Liveness::NotLive);
        // a child process holding a POSIX lock, as a broker's FileChannel.lock() does
        let mut child = std::process::Command::new("python3")
            .arg("-c")
            .arg("import fcntl,sys,time; f=open(sys.argv[1],'r+'); fcntl.lockf(f, fcntl.LOCK_EX); print('ok', flush=True); time.sleep(30)")
            .arg(root.join("lock"))
            .stdout(std::process::Stdio::piped())
            .spawn();
        if let Ok(c) = child.as_mut() {
            use std::io::BufRead;
            let mut line = String::new();
            if let Some(out) = c.stdout.as_mut() {
                let _ = std::io::BufReader::new(out).read_line(&mut line);
            }
            if line.trim() == "ok" {
                assert!(matches!(liveness(root).unwrap(), Liveness::LockHeld { .. }));
                let e = ensure_not_live(root).unwrap_err();
                assert!(
                    matches!(
                        e,
                        Error::StoreInUse {
                            holder: Holder::Lock { .. },
                            ..
                        }
                    ),
                    "{e}"
                );
                assert!(e.to_string().contains("holds the store lock"), "{e}");
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        // 5.x writes the broker pid into abort
        let sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        std::fs::write(root.join("abort"), sleeper.id().to_string()).unwrap();
        assert_eq!(
            liveness(root).unwrap(),
            Liveness::AbortPidAlive { pid: sleeper.id() }
        );
        let e = ensure_not_live(root).unwrap_err();
        assert!(
            matches!(e, Error::StoreInUse { holder: Holder::AbortPid { pid }, .. } if pid == sleeper.id()),
            "{e}"
        );
        assert_eq!(e.path(), root.join("abort"));
        let mut sleeper = sleeper;
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        assert_eq!(liveness(root).unwrap(), Liveness::NotLive);
    }
}
