//! The send journal: which messages of a source the cluster acknowledged, so that a send killed
//! at any moment and started again sends every message not yet acknowledged and never one that
//! was.
//!
//! A text file, one record per line, each line `<payload>\t<crc32 of the payload, 8 hex>\n`:
//!
//! ```text
//! rmqstore-send-journal 1 {"source":...,"kind":...,"fingerprint":...,"selection":...,"target":...}
//! S 0-255@0-261120 300@305000        the messages of a batch about to be sent
//! A 0-255@0-261120                   the messages the broker stored (SEND_OK)
//! N 300@305000                       a batch the broker refused (not stored)
//! ```
//!
//! Messages are named by `seq@key`: their place among the selected messages of the source and
//! their [`SourceKey`] (commitlog offset or line number); consecutive places are written as one
//! run `first-last@first_key-last_key`. The header names the source (its path, a fingerprint of
//! its files' sizes and modification times, the selection) and the target: a journal is only
//! continued for the same ones ([`JournalError::OtherRun`]).
//!
//! Memory stays small however many messages are acknowledged: the acknowledged places are kept
//! as ranges, and sends go in source order, so they are few. `A` records are written as each
//! batch is acknowledged and fsynced at most every `sync_interval` (a killed process loses no
//! write; a machine that crashes loses at most that interval, sent again as possible
//! duplicates). `S` records are written before a batch is sent and never fsynced on their own:
//! the places an `S` names and no `A` does are the messages that may have reached the cluster
//! without being recorded (the in-flight window at a kill), counted as possible duplicates when
//! they are sent again. A last line cut short by a kill is cut off when the journal is opened;
//! damage before the last line is an error. Nothing is recorded acknowledged that the broker did
//! not store.
//!
//! Failpoints (`RMQSTORE_FAILPOINT`): `send-journal-before-write` before an `A` record is
//! written, `send-journal-written` after it is written and before it is fsynced,
//! `send-journal-synced` after the fsync.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::outgoing::SourceKey;
use crate::format::failpoint::failpoint;

/// The first word of a journal.
pub const MAGIC: &str = "rmqstore-send-journal";
/// The format version written.
pub const VERSION: u32 = 1;
/// The name a default journal ends with.
pub const SUFFIX: &str = ".send-journal";
/// How many `seq@key` pairs are kept to check the source against (the first ones read).
const SAMPLES: usize = 4096;
/// Longest run an `S` record may name (a batch is far shorter).
const MAX_BATCH_RUN: u64 = 1 << 16;

/// What a journal is for: its first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalHeader {
    /// The source path (a store root or a file).
    pub source: String,
    pub kind: String,
    /// What changes when the source's files change.
    pub fingerprint: String,
    /// The selection, as [`super::source::Selection::describe`] writes it.
    pub selection: String,
    /// Where messages are sent (`namesrv ...` or `broker ...`).
    pub target: String,
}

/// Why a journal cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{}: this journal is of another send: its {field} is {recorded:?}, this run's is \
         {now:?}. Give another --journal, or remove it to send everything again",
        path.display()
    )]
    OtherRun {
        path: PathBuf,
        field: &'static str,
        recorded: String,
        now: String,
    },
    #[error("{}: not a send journal (its first line is not a journal header)", path.display())]
    NotAJournal { path: PathBuf },
    #[error(
        "{}: damaged at byte {offset} (line {line}): {what}; records follow it, so it was not cut \
         off. Give another --journal, or remove it to send everything again",
        path.display()
    )]
    Damaged {
        path: PathBuf,
        offset: u64,
        line: u64,
        what: String,
    },
    #[error(
        "{}: the journal records key {recorded} at place {seq}, the source has key {found} there: \
         the source or the selection changed",
        path.display()
    )]
    KeyMismatch {
        path: PathBuf,
        seq: u64,
        recorded: SourceKey,
        found: SourceKey,
    },
    #[error(transparent)]
    Path(#[from] crate::format::error::Error),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Sets of places kept as inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    /// start -> end (inclusive), disjoint and not adjacent.
    ranges: BTreeMap<u64, u64>,
    len: u64,
}

impl RangeSet {
    /// Add `first..=last`, merging with the ranges it overlaps or touches.
    pub fn insert(&mut self, first: u64, last: u64) {
        let (mut start, mut end) = (first.min(last), first.max(last));
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e.saturating_add(1) >= start {
                start = s;
                end = end.max(e);
                self.ranges.remove(&s);
                self.len -= e - s + 1;
            }
        }
        while let Some((&s, &e)) = self.ranges.range(start..).next() {
            if s > end.saturating_add(1) {
                break;
            }
            end = end.max(e);
            self.ranges.remove(&s);
            self.len -= e - s + 1;
        }
        self.ranges.insert(start, end);
        self.len += end - start + 1;
    }

    pub fn contains(&self, x: u64) -> bool {
        self.ranges
            .range(..=x)
            .next_back()
            .is_some_and(|(_, &e)| x <= e)
    }

    /// How many places.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many ranges hold them.
    pub fn ranges(&self) -> usize {
        self.ranges.len()
    }
}

/// `seq@key` pairs sorted and cut into runs of consecutive places: `(first, last, first key,
/// last key)`.
fn runs(pairs: &[(u64, SourceKey)]) -> Vec<(u64, u64, SourceKey, SourceKey)> {
    let mut sorted = pairs.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<(u64, u64, SourceKey, SourceKey)> = Vec::new();
    for (seq, key) in sorted {
        match out.last_mut() {
            Some(r) if r.1.checked_add(1) == Some(seq) => {
                r.1 = seq;
                r.3 = key;
            }
            _ => out.push((seq, seq, key, key)),
        }
    }
    out
}

fn format_runs(tag: char, pairs: &[(u64, SourceKey)]) -> String {
    let mut s = String::with_capacity(2 + pairs.len() * 8);
    s.push(tag);
    for (a, b, ka, kb) in runs(pairs) {
        if a == b {
            s.push_str(&format!(" {a}@{ka}"));
        } else {
            s.push_str(&format!(" {a}-{b}@{ka}-{kb}"));
        }
    }
    s
}

fn parse_runs(rest: &str) -> Option<Vec<(u64, u64, SourceKey, SourceKey)>> {
    rest.split(' ')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (seqs, keys) = p.split_once('@')?;
            let pair = |s: &str| -> Option<(u64, u64)> {
                match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => {
                        let v = s.parse().ok()?;
                        Some((v, v))
                    }
                }
            };
            let (a, b) = pair(seqs)?;
            let (ka, kb) = pair(keys)?;
            (a <= b).then_some((a, b, ka, kb))
        })
        .collect()
}

/// `payload\tcrc\n`.
fn line(payload: &str) -> String {
    format!("{payload}\t{:08x}\n", crc32fast::hash(payload.as_bytes()))
}

/// The payload of a line whose CRC holds.
fn payload(line: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(line).ok()?;
    let (p, crc) = text.rsplit_once('\t')?;
    (crc.len() == 8 && u32::from_str_radix(crc, 16).ok()? == crc32fast::hash(p.as_bytes()))
        .then_some(p)
}

/// How a journal is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Created or continued; records are appended.
    Write,
    /// Read only (a dry run): a missing journal is an empty one, a torn tail is left as it is.
    Read,
}

/// An open journal.
pub struct Journal {
    path: PathBuf,
    file: Option<std::fs::File>,
    acked: RangeSet,
    /// Places an `S` record names and no `A` record does: maybe sent, not proved.
    in_doubt: BTreeSet<u64>,
    /// `seq -> key` of the first runs read, to check the source against.
    samples: BTreeMap<u64, SourceKey>,
    /// Acknowledged at open.
    acked_before: u64,
    /// Bytes cut off at open (a torn last record).
    cut: u64,
    sync_interval: Duration,
    last_sync: Instant,
    unsynced: bool,
}

impl Journal {
    /// Open `path` for `header`: created when missing (with `Access::Write`), else checked to be
    /// of the same source and target, read, and its torn last record cut off.
    pub fn open(
        path: &Path,
        header: &JournalHeader,
        access: Access,
        sync_interval: Duration,
    ) -> Result<Journal, JournalError> {
        crate::format::layout::ensure_outside_stores(path, "--journal", false)?;
        let mut j = Journal {
            path: path.to_path_buf(),
            file: None,
            acked: RangeSet::default(),
            in_doubt: BTreeSet::new(),
            samples: BTreeMap::new(),
            acked_before: 0,
            cut: 0,
            sync_interval,
            last_sync: Instant::now(),
            unsynced: false,
        };
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(path)(e)),
        };
        let good = j.load(&bytes, header)?;
        if access == Access::Read {
            return Ok(j);
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(io(path))?;
        if good < bytes.len() as u64 || bytes.is_empty() {
            j.cut = if bytes.is_empty() {
                0
            } else {
                bytes.len() as u64 - good
            };
            f.set_len(good).map_err(io(path))?;
        }
        use std::io::Seek;
        f.seek(std::io::SeekFrom::End(0)).map_err(io(path))?;
        if good == 0 {
            let h = serde_json::to_string(header).unwrap_or_default();
            f.write_all(line(&format!("{MAGIC} {VERSION} {h}")).as_bytes())
                .map_err(io(path))?;
            f.sync_all().map_err(io(path))?;
            if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                if let Ok(d) = std::fs::File::open(dir) {
                    let _ = d.sync_all();
                }
            }
        } else if j.cut > 0 {
            f.sync_all().map_err(io(path))?;
        }
        j.file = Some(f);
        Ok(j)
    }

    /// Read the records of `bytes`; returns how many bytes hold good records (where a torn
    /// tail starts).
    fn load(&mut self, bytes: &[u8], header: &JournalHeader) -> Result<u64, JournalError> {
        let mut pos = 0usize;
        let mut n = 0u64;
        let mut bad: Option<(usize, u64, String)> = None;
        while pos < bytes.len() {
            let Some(len) = memchr::memchr(b'\n', &bytes[pos..]) else {
                bad.get_or_insert((pos, n + 1, "a record without its end".into()));
                break;
            };
            n += 1;
            let text = &bytes[pos..pos + len];
            let start = pos;
            pos += len + 1;
            let Some(p) = payload(text) else {
                if n == 1 {
                    return Err(JournalError::NotAJournal {
                        path: self.path.clone(),
                    });
                }
                bad.get_or_insert((start, n, "a record whose checksum does not hold".into()));
                continue;
            };
            if let Some((at, line, what)) = bad.take() {
                return Err(JournalError::Damaged {
                    path: self.path.clone(),
                    offset: at as u64,
                    line,
                    what,
                });
            }
            if n == 1 {
                self.check_header(p, header)?;
                continue;
            }
            let (tag, rest) = p.split_at(1.min(p.len()));
            let Some(rs) = parse_runs(rest) else {
                return Err(JournalError::Damaged {
                    path: self.path.clone(),
                    offset: start as u64,
                    line: n,
                    what: "a record that does not read".into(),
                });
            };
            match tag {
                "S" => {
                    if rs.iter().any(|(a, b, ..)| b - a > MAX_BATCH_RUN) {
                        return Err(JournalError::Damaged {
                            path: self.path.clone(),
                            offset: start as u64,
                            line: n,
                            what: "a batch longer than any sent".into(),
                        });
                    }
                    for (a, b, ..) in &rs {
                        for s in *a..=*b {
                            if !self.acked.contains(s) {
                                self.in_doubt.insert(s);
                            }
                        }
                    }
                }
                "N" => {
                    for (a, b, ..) in rs {
                        let gone: Vec<u64> = self.in_doubt.range(a..=b).copied().collect();
                        for s in gone {
                            self.in_doubt.remove(&s);
                        }
                    }
                }
                "A" => {
                    for (a, b, ka, kb) in rs {
                        self.acked.insert(a, b);
                        let gone: Vec<u64> = self.in_doubt.range(a..=b).copied().collect();
                        for s in gone {
                            self.in_doubt.remove(&s);
                        }
                        if self.samples.len() < SAMPLES {
                            self.samples.insert(a, ka);
                            self.samples.insert(b, kb);
                        }
                    }
                }
                _ => {
                    return Err(JournalError::Damaged {
                        path: self.path.clone(),
                        offset: start as u64,
                        line: n,
                        what: format!("an unknown record {tag:?}"),
                    })
                }
            }
        }
        self.acked_before = self.acked.len();
        if bad.as_ref().is_some_and(|b| b.1 == 1) {
            // the header itself torn (a journal that was never started), or another file
            let head = &bytes[..bytes.len().min(MAGIC.len())];
            if !MAGIC.as_bytes().starts_with(head) {
                return Err(JournalError::NotAJournal {
                    path: self.path.clone(),
                });
            }
            return Ok(0);
        }
        Ok(bad.map_or(bytes.len(), |b| b.0) as u64)
    }

    fn check_header(&self, p: &str, now: &JournalHeader) -> Result<(), JournalError> {
        let not = || JournalError::NotAJournal {
            path: self.path.clone(),
        };
        let rest = p
            .strip_prefix(MAGIC)
            .and_then(|r| r.strip_prefix(' '))
            .ok_or_else(not)?;
        let (version, json) = rest.split_once(' ').ok_or_else(not)?;
        if version.parse::<u32>().ok() != Some(VERSION) {
            return Err(JournalError::OtherRun {
                path: self.path.clone(),
                field: "format version",
                recorded: version.to_string(),
                now: VERSION.to_string(),
            });
        }
        let was: JournalHeader = serde_json::from_str(json).map_err(|_| not())?;
        for (field, recorded, current) in [
            ("source", &was.source, &now.source),
            ("source kind", &was.kind, &now.kind),
            ("source fingerprint", &was.fingerprint, &now.fingerprint),
            ("selection", &was.selection, &now.selection),
            ("target", &was.target, &now.target),
        ] {
            if recorded != current {
                return Err(JournalError::OtherRun {
                    path: self.path.clone(),
                    field,
                    recorded: recorded.clone(),
                    now: current.clone(),
                });
            }
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the message at place `seq` was acknowledged.
    pub fn is_acked(&self, seq: u64) -> bool {
        self.acked.contains(seq)
    }

    /// Whether the message at `seq` was being sent when an earlier run stopped, unacknowledged.
    pub fn in_doubt(&self, seq: u64) -> bool {
        self.in_doubt.contains(&seq)
    }

    /// Check the source's key at `seq` against the journal's, where it recorded one.
    pub fn check_key(&self, seq: u64, key: SourceKey) -> Result<(), JournalError> {
        match self.samples.get(&seq) {
            Some(&recorded) if recorded != key => Err(JournalError::KeyMismatch {
                path: self.path.clone(),
                seq,
                recorded,
                found: key,
            }),
            _ => Ok(()),
        }
    }

    /// Acknowledged messages, all runs together.
    pub fn acked(&self) -> u64 {
        self.acked.len()
    }

    /// Acknowledged when the journal was opened.
    pub fn acked_before(&self) -> u64 {
        self.acked_before
    }

    /// Places an earlier run was sending and did not see acknowledged.
    pub fn in_doubt_before(&self) -> usize {
        self.in_doubt.len()
    }

    /// Bytes of a torn last record cut off at open.
    pub fn cut(&self) -> u64 {
        self.cut
    }

    /// Ranges in memory.
    pub fn ranges(&self) -> usize {
        self.acked.ranges()
    }

    fn append(&mut self, text: &str) -> Result<(), JournalError> {
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        f.write_all(text.as_bytes()).map_err(io(&self.path))
    }

    /// Record that a batch is about to be sent (written, not fsynced).
    pub fn sending(&mut self, batch: &[(u64, SourceKey)]) -> Result<(), JournalError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.append(&line(&format_runs('S', batch)))
    }

    /// Record that the broker refused a batch: it did not store it (written, not fsynced).
    pub fn not_stored(&mut self, batch: &[(u64, SourceKey)]) -> Result<(), JournalError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.append(&line(&format_runs('N', batch)))
    }

    /// Record the messages the broker stored: written now, fsynced when the last fsync is older
    /// than the sync interval (or by [`Journal::sync`]).
    pub fn record_acked(&mut self, acked: &[(u64, SourceKey)]) -> Result<(), JournalError> {
        if acked.is_empty() {
            return Ok(());
        }
        for (a, b, ..) in runs(acked) {
            self.acked.insert(a, b);
        }
        failpoint("send-journal-before-write");
        self.append(&line(&format_runs('A', acked)))?;
        failpoint("send-journal-written");
        self.unsynced = true;
        if self.last_sync.elapsed() >= self.sync_interval {
            self.sync()?;
        }
        Ok(())
    }

    /// Fsync what was written.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if !self.unsynced {
            return Ok(());
        }
        if let Some(f) = &self.file {
            f.sync_data().map_err(io(&self.path))?;
        }
        self.unsynced = false;
        self.last_sync = Instant::now();
        failpoint("send-journal-synced");
        Ok(())
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        let _ = self.sync();
    }
}

/// The default journal of a source: beside it, outside every store. A file's is
/// `<file>.send-journal`; a store's is beside the outermost store that holds it, named after the
/// path from there (`/data/store` gives `/data/store.send-journal`,
/// `/data/out/repair-x/salvaged` gives `/data/out.repair-x.salvaged.send-journal`).
pub fn default_path(source: &Path) -> Result<PathBuf, JournalError> {
    let resolved = crate::format::layout::resolve(source)?;
    let outer = resolved
        .ancestors()
        .filter(|a| crate::format::layout::is_store_root(a))
        .last()
        .map(Path::to_path_buf);
    let (base, rest) = match &outer {
        Some(o) => (o.clone(), resolved.strip_prefix(o).unwrap_or(Path::new(""))),
        None => (resolved.clone(), Path::new("")),
    };
    let mut name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "source".into());
    for c in rest.components() {
        name.push('.');
        name.push_str(&c.as_os_str().to_string_lossy());
    }
    name.push_str(SUFFIX);
    let dir = base.parent().unwrap_or(Path::new("/"));
    Ok(dir.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(fingerprint: &str) -> JournalHeader {
        JournalHeader {
            source: "/data/store".into(),
            kind: "store".into(),
            fingerprint: fingerprint.into(),
            selection: "all".into(),
            target: "namesrv 127.0.0.1:9876".into(),
        }
    }

    fn open(p: &Path, h: &JournalHeader) -> Result<Journal, JournalError> {
        Journal::open(p, h, Access::Write, Duration::ZERO)
    }

    #[test]
    fn ranges_merge_and_count() {
        let mut r = RangeSet::default();
        for (a, b) in [(5, 7), (10, 10), (8, 9), (1, 2), (20, 30), (25, 26), (3, 3)] {
            r.insert(a, b);
        }
        assert_eq!(r.ranges(), 3, "{r:?}");
        assert_eq!(r.len(), 3 + 6 + 11);
        assert!(!r.contains(4));
        r.insert(4, 4);
        assert_eq!((r.ranges(), r.len()), (2, 21));
        for x in [1, 5, 10, 20, 30] {
            assert!(r.contains(x), "{x}");
        }
        for x in [0, 11, 19, 31] {
            assert!(!r.contains(x), "{x}");
        }
        r.insert(11, 19);
        assert_eq!((r.ranges(), r.len()), (1, 30));
        r.insert(u64::MAX, u64::MAX);
        assert!(r.contains(u64::MAX));
    }

    /// A million messages acknowledged in batches of interleaved queues, out of order within a
    /// window, keep a handful of ranges.
    #[test]
    fn a_million_acknowledged_keep_few_ranges() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("j");
        let mut j =
            Journal::open(&p, &header("f"), Access::Write, Duration::from_secs(3600)).unwrap();
        let queues = 8u64;
        let per_batch = 256u64;
        let round = queues * per_batch;
        for r in 0..(1_000_000 / round + 1) {
            // the queues' batches of a round, acknowledged last queue first
            for q in (0..queues).rev() {
                let batch: Vec<(u64, u64)> = (0..per_batch)
                    .map(|i| r * round + i * queues + q)
                    .map(|s| (s, s * 1000))
                    .collect();
                j.record_acked(&batch).unwrap();
            }
            assert!(j.ranges() <= queues as usize, "{}", j.ranges());
        }
        assert_eq!(j.ranges(), 1);
        drop(j);
        let j = open(&p, &header("f")).unwrap();
        assert_eq!(j.ranges(), 1);
        assert!(j.is_acked(999_999) && j.acked() >= 1_000_000);
        assert!(j.check_key(0, 0).is_ok());
        assert!(matches!(
            j.check_key(0, 7),
            Err(JournalError::KeyMismatch { .. })
        ));
    }

    #[test]
    fn resume_skips_what_was_acknowledged_and_counts_what_is_in_doubt() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("j");
        let h = header("f");
        let mut j = open(&p, &h).unwrap();
        j.sending(&[(0, 100), (1, 200), (2, 300)]).unwrap();
        j.sending(&[(3, 400)]).unwrap();
        j.record_acked(&[(0, 100), (1, 200), (2, 300)]).unwrap();
        j.sending(&[(4, 500), (6, 700)]).unwrap();
        drop(j);
        let j = open(&p, &h).unwrap();
        assert_eq!(j.acked_before(), 3);
        assert!((0..3).all(|s| j.is_acked(s)));
        assert!(!j.is_acked(3) && !j.is_acked(5));
        assert_eq!(j.in_doubt_before(), 3);
        assert!(j.in_doubt(3) && j.in_doubt(4) && j.in_doubt(6) && !j.in_doubt(5));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("\nA 0-2@100-300\t"), "{text}");
        assert!(text.contains("\nS 4@500 6@700\t"), "{text}");
    }

    #[test]
    fn a_torn_last_record_is_cut_off() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("j");
        let h = header("f");
        let mut j = open(&p, &h).unwrap();
        j.record_acked(&[(0, 10)]).unwrap();
        j.record_acked(&[(1, 20)]).unwrap();
        drop(j);
        let whole = std::fs::read(&p).unwrap();
        // killed in the middle of the last record: every cut of it
        let last = whole[..whole.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .unwrap()
            + 1;
        for cut in last + 1..whole.len() {
            std::fs::write(&p, &whole[..cut]).unwrap();
            let mut j = open(&p, &h).unwrap();
            assert_eq!(j.cut(), (cut - last) as u64, "cut at {cut}");
            assert!(j.is_acked(0) && !j.is_acked(1), "cut at {cut}");
            j.record_acked(&[(1, 20)]).unwrap();
            drop(j);
            assert_eq!(std::fs::read(&p).unwrap(), whole, "cut at {cut}");
        }
        // a changed byte in the last record: cut off as well
        let mut b = whole.clone();
        b[last + 2] ^= 1;
        std::fs::write(&p, &b).unwrap();
        let j = open(&p, &h).unwrap();
        assert!(j.is_acked(0) && !j.is_acked(1));
        drop(j);
        // damage before the last record is not cut off
        let mut b = whole.clone();
        b[last - 3] ^= 1;
        std::fs::write(&p, &b).unwrap();
        assert!(matches!(
            open(&p, &h),
            Err(JournalError::Damaged { line: 2, .. })
        ));
        // a torn header: a journal never started
        std::fs::write(&p, &whole[..10]).unwrap();
        let j = open(&p, &h).unwrap();
        assert_eq!(j.acked(), 0);
        drop(j);
        assert!(open(&p, &h).is_ok());
    }

    #[test]
    fn another_source_or_target_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("j");
        drop(open(&p, &header("f1")).unwrap());
        let e = open(&p, &header("f2")).err().unwrap();
        assert!(
            matches!(
                &e,
                JournalError::OtherRun {
                    field: "source fingerprint",
                    ..
                }
            ),
            "{e}"
        );
        let mut other = header("f1");
        other.target = "broker 10.0.0.1:10911".into();
        assert!(matches!(
            open(&p, &other),
            Err(JournalError::OtherRun {
                field: "target",
                ..
            })
        ));
        let mut other = header("f1");
        other.selection = "topic=TopicA".into();
        assert!(matches!(
            open(&p, &other),
            Err(JournalError::OtherRun {
                field: "selection",
                ..
            })
        ));
        // another file is never taken for a journal (nor cut)
        for other in ["hello\n", "hello", "{\"type\":\"message\"}\n"] {
            std::fs::write(&p, other).unwrap();
            assert!(
                matches!(
                    open(&p, &header("f1")),
                    Err(JournalError::NotAJournal { .. })
                ),
                "{other}"
            );
            assert_eq!(std::fs::read_to_string(&p).unwrap(), other);
        }
        // read only: a missing journal is empty and is not made
        let q = t.path().join("none");
        let j = Journal::open(&q, &header("f1"), Access::Read, Duration::ZERO).unwrap();
        assert_eq!(j.acked(), 0);
        assert!(!q.exists());
    }

    #[test]
    fn default_paths_are_beside_the_source_and_outside_stores() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let store = root.join("out");
        std::fs::create_dir_all(store.join("commitlog")).unwrap();
        let salvaged = store.join("repair-1").join("salvaged");
        std::fs::create_dir_all(salvaged.join("commitlog")).unwrap();
        assert_eq!(default_path(&store).unwrap(), root.join("out.send-journal"));
        assert_eq!(
            default_path(&salvaged).unwrap(),
            root.join("out.repair-1.salvaged.send-journal")
        );
        let file = root.join("x.jsonl");
        assert_eq!(
            default_path(&file).unwrap(),
            root.join("x.jsonl.send-journal")
        );
        let inside = store.join("j");
        assert!(matches!(
            open(&inside, &header("f")),
            Err(JournalError::Path(_))
        ));
    }
}
