//! Safe writes into a store: the live-store guard, fsync helpers, and switching a freshly built
//! folder into place so that a crash at any moment leaves either the old or the new folder
//! complete (an atomic `renameat2(RENAME_EXCHANGE)`), with the old folder kept in a dated backup.
//!
//! Crash tests set `RMQSTORE_FAILPOINT=<name>` to make the process abort at a named step.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::store::paths;
use crate::format::error::{Error, Result};

/// Abort the process here when `RMQSTORE_FAILPOINT` names this point (crash tests only).
pub fn failpoint(name: &str) {
    if std::env::var("RMQSTORE_FAILPOINT").is_ok_and(|v| v == name) {
        std::process::abort();
    }
}

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

/// Check whether a broker seems to run on `root`, without taking any lock.
pub fn liveness(root: &Path) -> Result<Liveness> {
    let lock = root.join(paths::LOCK);
    if lock.exists() {
        let f = File::open(&lock).map_err(|e| Error::io(&lock, e))?;
        let mut fl = nix::libc::flock {
            l_type: nix::libc::F_WRLCK as nix::libc::c_short,
            l_whence: nix::libc::SEEK_SET as nix::libc::c_short,
            l_start: 0,
            l_len: 0,
            l_pid: 0,
        };
        nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_GETLK(&mut fl))
            .map_err(|e| Error::io(&lock, e.into()))?;
        if fl.l_type != nix::libc::F_UNLCK as nix::libc::c_short {
            return Ok(Liveness::LockHeld { pid: fl.l_pid });
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
        Liveness::LockHeld { pid } => Err(Error::layout(
            &root.join(paths::LOCK),
            format!(
                "a broker (pid {pid}) holds the store lock: stop it before writing to the store"
            ),
        )),
        Liveness::AbortPidAlive { pid } => Err(Error::layout(
            &root.join(paths::ABORT),
            format!("the abort file names pid {pid}, which is running: stop the broker first"),
        )),
    }
}

/// fsync every file below `dir` and every folder, then `dir` itself.
pub fn sync_tree(dir: &Path) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let p = e.map_err(|e| Error::io(dir, e))?.path();
        if p.is_dir() {
            sync_tree(&p)?;
        } else {
            File::open(&p)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(&p, e))?;
        }
    }
    sync_dir(dir)
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

/// Switch `new` (a complete, synced folder on the same file system) in as `root/<name>`.
/// The old `root/<name>`, if any, ends in `backup/<name>`. At every moment `root/<name>` is
/// either the old or the new folder, complete.
pub fn swap_in(root: &Path, name: &str, new: &Path, backup: &Path) -> Result<()> {
    let target = root.join(name);
    let root_fd = File::open(root).map_err(|e| Error::io(root, e))?;
    let new_parent = new.parent().unwrap_or(root);
    let new_fd = File::open(new_parent).map_err(|e| Error::io(new_parent, e))?;
    let new_name = new.file_name().map(PathBuf::from).unwrap_or_default();
    if target.exists() {
        nix::fcntl::renameat2(
            &new_fd,
            new_name.as_path(),
            &root_fd,
            Path::new(name),
            nix::fcntl::RenameFlags::RENAME_EXCHANGE,
        )
        .map_err(|e| Error::io(&target, e.into()))?;
        failpoint("swap-exchanged");
        // `new` now holds the old folder.
        std::fs::create_dir_all(backup).map_err(|e| Error::io(backup, e))?;
        let dst = backup.join(name);
        std::fs::rename(new, &dst).map_err(|e| Error::io(&dst, e))?;
        sync_dir(backup)?;
    } else {
        std::fs::rename(new, &target).map_err(|e| Error::io(&target, e))?;
    }
    sync_dir(new_parent)?;
    sync_dir(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_keeps_old_in_backup() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("consumequeue")).unwrap();
        std::fs::write(root.join("consumequeue/old"), b"old").unwrap();
        let work = root.join(".work");
        std::fs::create_dir_all(work.join("consumequeue")).unwrap();
        std::fs::write(work.join("consumequeue/new"), b"new").unwrap();
        swap_in(
            root,
            "consumequeue",
            &work.join("consumequeue"),
            &root.join("bak"),
        )
        .unwrap();
        assert!(root.join("consumequeue/new").exists());
        assert!(root.join("bak/consumequeue/old").exists());
        assert!(!work.join("consumequeue").exists());
        // no old folder: a plain rename
        std::fs::create_dir_all(work.join("index")).unwrap();
        swap_in(root, "index", &work.join("index"), &root.join("bak")).unwrap();
        assert!(root.join("index").is_dir());
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
                assert!(ensure_not_live(root).is_err());
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
        let mut sleeper = sleeper;
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        assert_eq!(liveness(root).unwrap(), Liveness::NotLive);
    }
}
