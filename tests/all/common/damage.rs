//! Copies of stores to damage, and what tells whether a byte was written or kept: trees,
//! snapshots, sparse data ranges, the repair manifest's accounting.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Copy a directory tree (to damage or write into a copy of an oracle store).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            copy_sparse(&e.path(), &dst);
            let mut perm = std::fs::metadata(&dst).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&dst, perm).unwrap();
        }
    }
}

/// Copy one file, leaving its runs of zeros as holes: stores at the broker's geometry hold
/// 1 GiB commitlog files that are mostly zeros (a plain copy writes them all).
fn copy_sparse(from: &Path, to: &Path) {
    use std::io::{Read, Seek, SeekFrom, Write};
    const BLOCK: usize = 1 << 20;
    let mut src = std::fs::File::open(from).unwrap();
    let len = src.metadata().unwrap().len();
    let mut dst = std::fs::File::create(to).unwrap();
    let mut buf = vec![0u8; BLOCK];
    let mut at = 0u64;
    while at < len {
        let n = BLOCK.min((len - at) as usize);
        src.read_exact(&mut buf[..n]).unwrap();
        if buf[..n].iter().all(|b| *b == 0) {
            dst.seek(SeekFrom::Current(n as i64)).unwrap();
        } else {
            dst.write_all(&buf[..n]).unwrap();
        }
        at += n as u64;
    }
    dst.set_len(len).unwrap();
}

/// Every file below `dir` (none when it does not exist): relative path and bytes, sorted.
pub fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

/// The `repair-<time>` folder a repair left in `dir`.
pub fn repair_folder(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("repair-")
        })
}

/// What is at each path below `dir` (symlinks not followed): a listing of names and kinds, and
/// the bytes of regular files (sparse files read through their data ranges only). Comparing
/// two snapshots tells whether anything was written.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            let r = p.strip_prefix(dir).unwrap().to_path_buf();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let t = m.file_type();
            let what = if t.is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else if t.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else if t.is_file() {
                format!("file {}", sha256_hex(&sparse_bytes(&p)))
            } else {
                "other".to_string()
            };
            out.push((r, what));
        }
    }
    out.sort();
    out
}

/// The data ranges of a file (holes skipped), as `SEEK_DATA`/`SEEK_HOLE` give them.
pub fn data_ranges(p: &Path) -> Vec<(u64, u64)> {
    use nix::unistd::{lseek, Whence};
    let f = std::fs::File::open(p).unwrap();
    let len = f.metadata().unwrap().len() as i64;
    let mut out = Vec::new();
    let mut at = 0i64;
    while at < len {
        let Ok(d) = lseek(&f, at, Whence::SeekData) else {
            break;
        };
        let h = lseek(&f, d, Whence::SeekHole).unwrap_or(len).min(len);
        out.push((d as u64, h as u64));
        at = h.max(d + 1);
    }
    out
}

/// A regular file's length and its runs of non-zero bytes, each with its offset: the same for
/// any two files of the same bytes, whichever of their zeros are holes (for hashing sparse files
/// without reading gigabytes of zeros; a filesystem may turn a hole into data when it is read).
pub fn sparse_bytes(p: &Path) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(p).unwrap();
    let mut out = Vec::new();
    out.extend_from_slice(&f.metadata().unwrap().len().to_be_bytes());
    for (a, b) in data_ranges(p) {
        let mut buf = vec![0u8; (b - a) as usize];
        f.read_exact_at(&mut buf, a).unwrap();
        let mut at = 0;
        while let Some(s) = buf[at..].iter().position(|&x| x != 0).map(|s| at + s) {
            let e = buf[s..]
                .iter()
                .position(|&x| x == 0)
                .map_or(buf.len(), |e| s + e);
            out.extend_from_slice(&(a + s as u64).to_be_bytes());
            out.extend_from_slice(&buf[s..e]);
            at = e;
        }
    }
    out
}

/// Every byte of every regular file of `original` is in `repaired` at the same place, or in a
/// `removed` entry of the repair manifest (its saved copy, or zeros for an entry saved as none);
/// every entry that is not a regular file or folder is listed in the manifest. Sparse holes
/// count as zeros.
pub fn assert_every_byte_kept(
    original: &Path,
    repaired: &Path,
    repair: &Path,
    manifest: &serde_json::Value,
    ctx: &str,
) {
    use std::collections::HashMap;
    use std::os::unix::fs::FileExt;
    // (offset, length, saved as, offset in the saved file) of each listed range, per file
    type Piece = (u64, u64, Option<PathBuf>, u64);
    let mut pieces: HashMap<PathBuf, Vec<Piece>> = HashMap::new();
    let mut listed = std::collections::HashSet::new();
    let mut saved_dirs: Vec<(PathBuf, PathBuf)> = Vec::new();
    for x in manifest["removed"].as_array().unwrap() {
        let file = PathBuf::from(x["file"].as_str().unwrap());
        listed.insert(file.clone());
        let off = x["offset"].as_u64().unwrap();
        let len = x["length"].as_u64().unwrap();
        let saved = x["saved_as"].as_str().map(|s| repair.join(s));
        let saved_off = x["saved_offset"].as_u64().unwrap();
        // Saved regular files hold the bytes listed from saved_offset on (links and folders are
        // themselves).
        let saved_file = saved
            .as_ref()
            .filter(|s| std::fs::symlink_metadata(s).is_ok_and(|m| m.is_file()));
        if let Some(s) = saved_file {
            assert!(
                std::fs::metadata(s).map(|m| m.len()).unwrap_or(0) >= saved_off + len,
                "{ctx}: saved copy {} is too short",
                s.display()
            );
        }
        if let Some(dir) = saved.as_ref().filter(|s| s.is_dir()) {
            saved_dirs.push((file.clone(), dir.clone()));
        }
        pieces
            .entry(file)
            .or_default()
            .push((off, len, saved, saved_off));
    }
    let mut stack = vec![original.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let r = p.strip_prefix(original).unwrap().to_path_buf();
            let lm = std::fs::symlink_metadata(&p).unwrap();
            if lm.is_dir() {
                stack.push(p);
                continue;
            }
            let regular = std::fs::metadata(&p).is_ok_and(|m| m.is_file());
            if !regular {
                let there = std::fs::symlink_metadata(repaired.join(&r))
                    .is_ok_and(|m| m.file_type() == lm.file_type());
                assert!(
                    there || listed.contains(&r),
                    "{ctx}: {} ({:?}) is neither in the repaired store nor in the manifest",
                    r.display(),
                    lm.file_type()
                );
                continue;
            }
            let orig = std::fs::File::open(&p).unwrap();
            // A file inside a folder that was set aside whole is in the saved folder.
            let in_saved = saved_dirs
                .iter()
                .find_map(|(d, s)| r.strip_prefix(d).ok().map(|inner| s.join(inner)));
            let new = match &in_saved {
                Some(s) => std::fs::File::open(s).ok(),
                None => std::fs::File::open(repaired.join(&r)).ok(),
            };
            let new_len = new.as_ref().map_or(0, |f| f.metadata().unwrap().len());
            let mine = pieces.get(&r).cloned().unwrap_or_default();
            for (a, b) in data_ranges(&p) {
                let mut at = a;
                while at < b {
                    let n = (b - at).min(1 << 20);
                    let mut want = vec![0u8; n as usize];
                    orig.read_exact_at(&mut want, at).unwrap();
                    let mut have = vec![0u8; n as usize];
                    if let Some(f) = &new {
                        let upto = new_len.saturating_sub(at).min(n) as usize;
                        if upto > 0 {
                            f.read_exact_at(&mut have[..upto], at).unwrap();
                        }
                    }
                    for (off, len, saved, saved_off) in &mine {
                        let (s, e) = ((*off).max(at), (off + len).min(at + n));
                        if s >= e {
                            continue;
                        }
                        let dst = &mut have[(s - at) as usize..(e - at) as usize];
                        match saved {
                            Some(sp) => std::fs::File::open(sp)
                                .unwrap()
                                .read_exact_at(dst, s - off + saved_off)
                                .unwrap(),
                            None => dst.fill(0),
                        }
                    }
                    assert!(
                        have == want,
                        "{ctx}: bytes {at}..{} of {} are neither kept nor saved",
                        at + n,
                        r.display()
                    );
                    at += n;
                }
            }
        }
    }
}

/// A temporary folder for tests that write many stores: in memory (`/dev/shm`) when the machine
/// has it, so that the fsyncs of every repair do not wait for a disk.
pub fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(t) = tempfile::tempdir_in(shm) {
            return t;
        }
    }
    tempfile::tempdir().unwrap()
}
