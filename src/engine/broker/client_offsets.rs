//! A broadcasting consumer's own progress (`MessageModel.BROADCASTING`, ENGINE.md 4.3), taken in
//! place of the broker's `consumerOffset.json` for its group.
//!
//! The client keeps it in `<localOffsetStoreDir>/<clientId>/<group>/offsets.json`
//! (`LocalFileOffsetStore`). A [`ClientDir`] is that last folder: the group is its name, the
//! client id the name of the folder above. [`ClientOffsets`] reads the file as the client does
//! (`.bak` when the file is missing, empty or broken, and says so), answers for the queues of one
//! broker (the store's `brokerName`; entries of other brokers are kept and counted), takes new
//! offsets in memory, and [`ClientOffsets::persist`] writes them the way `persistAll` does: the
//! file is read again, only the queues set are overwritten (every other entry survives), and the
//! whole map is written in fastjson's pretty form through `MixAll.string2File`'s `.tmp`, `.bak`
//! and rename, with fsyncs, after a dated copy of the old file beside it.
//!
//! Every file written is one of four names inside the folder (`offsets.json`, `.tmp`, `.bak`, the
//! dated copy), none of which may be a symlink or anything but a regular file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::engine::broker::offsets::{read_local_offset, OffsetFile, OffsetFileSource};
use crate::engine::broker::rebalance::MessageQueue;
use crate::engine::store::dispatch::RETRY_PREFIX;
use crate::engine::store::safedir::stamp;
use crate::format::config::persist::dated_copy;
use crate::format::config::{persist, with_suffix, ConsumerOffsets};
use crate::format::entry::{probe, Kind};
use crate::format::error::{
    ClientDirError, ClientDirProblem, ClientNameError, Error, Result, WritePathError,
};

/// The file's name inside a client folder.
pub const FILE_NAME: &str = "offsets.json";

/// `<localOffsetStoreDir>/<clientId>/<group>`: a broadcasting client's folder for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientDir {
    pub dir: PathBuf,
    pub client_id: String,
    pub group: String,
}

/// The client's rule for a group name (`Validators.checkGroup`): 1 to 255 of `a-z A-Z 0-9 % | _ -`.
pub fn check_group_name(name: &str) -> std::result::Result<(), ClientNameError> {
    let legal = !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'));
    if legal {
        Ok(())
    } else {
        Err(ClientNameError::Group {
            name: name.to_string(),
        })
    }
}

/// A client id as `buildMQClientId` makes it: `<ip>@<instanceName>[@<unitName>]`.
pub fn check_client_id(id: &str) -> std::result::Result<(), ClientNameError> {
    let parts: Vec<&str> = id.split('@').collect();
    let ok = (2..=3).contains(&parts.len())
        && parts.iter().all(|p| !p.is_empty())
        && id.chars().all(|c| !c.is_control());
    if ok {
        Ok(())
    } else {
        Err(ClientNameError::ClientId { id: id.to_string() })
    }
}

impl ClientDir {
    /// Check `dir`: an existing folder whose name passes the group rule, inside a folder whose
    /// name is a client id.
    pub fn open(dir: &Path) -> Result<ClientDir> {
        let bad = |problem: ClientDirProblem| -> Error {
            ClientDirError {
                path: dir.to_path_buf(),
                problem,
            }
            .into()
        };
        match probe(dir).kind {
            Kind::Dir => {}
            Kind::Missing => return Err(bad(ClientDirProblem::NoSuchDirectory)),
            found => return Err(bad(ClientDirProblem::NotADirectory { found })),
        }
        // the named folder and its parent, not what `..` or a trailing `.` resolve to
        let abs = std::path::absolute(dir).map_err(|e| Error::io(dir, e))?;
        let mut names = abs
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir));
        let mut parts: Vec<String> = Vec::new();
        for c in names.by_ref() {
            match c {
                std::path::Component::ParentDir => {
                    parts.pop();
                }
                std::path::Component::Normal(n) => parts.push(
                    n.to_str()
                        .ok_or_else(|| bad(ClientDirProblem::NotUtf8 { name: n.to_owned() }))?
                        .to_string(),
                ),
                _ => {}
            }
        }
        let (Some(group), Some(client_id)) = (parts.pop(), parts.pop()) else {
            return Err(bad(ClientDirProblem::TooShort));
        };
        check_group_name(&group).map_err(|e| bad(e.into()))?;
        check_client_id(&client_id).map_err(|e| bad(e.into()))?;
        Ok(ClientDir {
            dir: dir.to_path_buf(),
            client_id,
            group,
        })
    }

    /// `<dir>/offsets.json`.
    pub fn file(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }
}

/// A client's offsets as read, plus the ones set since, for the queues of one broker.
#[derive(Debug, Clone)]
pub struct ClientOffsets {
    pub dir: ClientDir,
    /// The broker whose queues this table answers for.
    pub broker_name: String,
    /// The file as read.
    pub file: OffsetFile,
    pub source: OffsetFileSource,
    /// Offsets set since the file was read: (topic, queue) -> offset.
    changed: BTreeMap<(String, i32), i64>,
}

impl ClientOffsets {
    /// Read `dir`'s `offsets.json` (or its `.bak`) for the queues of `broker_name`.
    pub fn load(dir: ClientDir, broker_name: &str) -> Result<ClientOffsets> {
        let r = read_local_offset(&dir.file())?;
        Ok(ClientOffsets {
            dir,
            broker_name: broker_name.to_string(),
            file: r.file.unwrap_or_default(),
            source: r.source,
            changed: BTreeMap::new(),
        })
    }

    pub fn group(&self) -> &str {
        &self.dir.group
    }

    /// Whether this table answers for `group` on `topic`: a broadcasting consumer has no retry
    /// topic, so `%RETRY%` queues stay the broker's.
    pub fn covers(&self, group: &str, topic: &str) -> bool {
        group == self.dir.group && !topic.starts_with(RETRY_PREFIX)
    }

    fn mq(&self, topic: &str, queue_id: i32) -> MessageQueue {
        MessageQueue::new(topic, self.broker_name.clone(), queue_id)
    }

    /// The offset of a queue of this broker: set since, else the file's.
    pub fn get(&self, topic: &str, queue_id: i32) -> Option<i64> {
        self.changed
            .get(&(topic.to_string(), queue_id))
            .copied()
            .or_else(|| self.file.get(&self.mq(topic, queue_id)))
    }

    /// `updateOffset` (not increase-only): held in memory until [`ClientOffsets::persist`].
    pub fn set(&mut self, topic: &str, queue_id: i32, offset: i64) {
        self.changed.insert((topic.to_string(), queue_id), offset);
    }

    /// True when offsets were set that differ from the file's.
    pub fn is_dirty(&self) -> bool {
        self.changed
            .iter()
            .any(|((t, q), v)| self.file.get(&self.mq(t, *q)) != Some(*v))
    }

    /// Every queue of this broker with its offset, sorted by topic and queue.
    pub fn queues(&self) -> Vec<(String, i32, i64)> {
        let mut m: BTreeMap<(String, i32), i64> = self
            .file
            .table
            .iter()
            .filter(|(mq, _)| mq.broker_name == self.broker_name)
            .map(|(mq, v)| ((mq.topic.clone(), mq.queue_id), *v))
            .collect();
        m.extend(self.changed.iter().map(|(k, v)| (k.clone(), *v)));
        m.into_iter().map(|((t, q), v)| (t, q, v)).collect()
    }

    /// The topics with an offset for this broker.
    pub fn topics(&self) -> BTreeSet<String> {
        self.queues().into_iter().map(|(t, _, _)| t).collect()
    }

    /// Entries of other brokers: broker name -> how many.
    pub fn other_brokers(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for (mq, _) in &self.file.table {
            if mq.broker_name != self.broker_name {
                *m.entry(mq.broker_name.clone()).or_insert(0) += 1;
            }
        }
        m
    }

    /// This broker's offsets as a `consumerOffset.json` table of the group (for planning).
    pub fn as_table(&self) -> ConsumerOffsets {
        let mut t = ConsumerOffsets::new();
        for (topic, q, v) in self.queues() {
            t.set(&topic, &self.dir.group, q, v);
        }
        t
    }

    /// Words for stderr when the offsets did not come from `offsets.json` itself, or when the
    /// file holds queues of other brokers.
    pub fn notes(&self) -> Vec<String> {
        let file = self.dir.file();
        let mut out = Vec::new();
        match &self.source {
            OffsetFileSource::Main => {}
            OffsetFileSource::Backup { reason } => out.push(format!(
                "{} is {reason}: the offsets were read from {} (as the client reads them)",
                file.display(),
                with_suffix(&file, ".bak").display()
            )),
            OffsetFileSource::Empty { reason } => out.push(format!(
                "no offsets for group {} ({reason}): the client starts as a new consumer",
                self.dir.group
            )),
        }
        let others = self.other_brokers();
        if !others.is_empty() {
            let list: Vec<String> = others
                .iter()
                .map(|(b, n)| format!("{n} of broker {b:?}"))
                .collect();
            out.push(format!(
                "{} holds queues of other brokers than this store's {:?} ({}): they are not \
                 used and are kept as they are (--broker-name NAME reads a broker's queues)",
                file.display(),
                self.broker_name,
                list.join(", ")
            ));
        }
        out
    }

    /// `persistAll`: read the file again, overwrite the queues set since, write the whole map
    /// back (see the module doc). Returns the dated copy of the old file (`None` when there was
    /// none); writes nothing when nothing changed (`Ok(None)`).
    pub fn persist(&mut self, what: &str) -> Result<Option<PathBuf>> {
        if !self.is_dirty() {
            return Ok(None);
        }
        let main = self.dir.file();
        let tmp = with_suffix(&main, ".tmp");
        let bak = with_suffix(&main, ".bak");
        for p in [&main, &tmp, &bak] {
            ensure_plain(p)?;
        }
        // what the file holds now (another process of the client may have written since)
        let mut merged = read_local_offset(&main)?.file.unwrap_or_default();
        for ((t, q), v) in &self.changed {
            merged.set(&self.mq(t, *q), *v);
        }
        let backup = dated_copy(&main, what, &stamp())?;
        // a `.tmp` an interrupted write left behind is not ours to append to: start afresh
        if probe(&tmp).kind != Kind::Missing {
            std::fs::remove_file(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        persist(&main, &merged.to_pretty())?;
        self.file = merged;
        self.source = OffsetFileSource::Main;
        self.changed.clear();
        Ok(backup)
    }
}

/// Refuse to write through a symlink or over anything but a regular file.
fn ensure_plain(p: &Path) -> Result<()> {
    let e = probe(p);
    if e.symlink {
        return Err(WritePathError::ClientFileSymlink {
            path: p.to_path_buf(),
        }
        .into());
    }
    match e.kind {
        Kind::Missing | Kind::File { .. } => Ok(()),
        k => Err(Error::NotAFile {
            path: p.to_path_buf(),
            found: k,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_dir(root: &Path) -> ClientDir {
        let d = root.join("10.0.0.1@DEFAULT").join("BroadcastGroup");
        std::fs::create_dir_all(&d).unwrap();
        ClientDir::open(&d).unwrap()
    }

    #[test]
    fn names_are_checked() {
        let t = tempfile::tempdir().unwrap();
        let c = client_dir(t.path());
        assert_eq!(
            (c.client_id.as_str(), c.group.as_str()),
            ("10.0.0.1@DEFAULT", "BroadcastGroup")
        );
        // `.` and `..` are resolved before the names are taken
        let dotted = c.dir.join("../BroadcastGroup/.");
        assert_eq!(ClientDir::open(&dotted).unwrap().group, "BroadcastGroup");
        let bad = t.path().join("no-at-sign").join("G");
        std::fs::create_dir_all(&bad).unwrap();
        let e = ClientDir::open(&bad).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::ClientDir(ClientDirError {
                    problem: ClientDirProblem::Name(ClientNameError::ClientId { id }),
                    ..
                }) if id == "no-at-sign"
            ),
            "{e}"
        );
        assert_eq!(e.path(), bad);
        let e = e.to_string();
        assert!(e.contains("client id \"no-at-sign\""), "{e}");
        let bad = t.path().join("1.2.3.4@X").join("bad.group");
        std::fs::create_dir_all(&bad).unwrap();
        let e = ClientDir::open(&bad).unwrap_err().to_string();
        assert!(e.contains("group \"bad.group\""), "{e}");
        assert!(
            e.ends_with(" (--client-dir is <localOffsetStoreDir>/<clientId>/<group>)"),
            "{e}"
        );
        let e = ClientDir::open(&t.path().join("1.2.3.4@X/missing")).unwrap_err();
        assert!(
            matches!(
                e,
                Error::ClientDir(ClientDirError {
                    problem: ClientDirProblem::NoSuchDirectory,
                    ..
                })
            ),
            "{e}"
        );
        assert!(e.to_string().contains("no such directory"), "{e}");
    }

    #[test]
    fn persist_merges_and_keeps_other_brokers() {
        let t = tempfile::tempdir().unwrap();
        let dir = client_dir(t.path());
        let mut f = OffsetFile::default();
        f.set(&MessageQueue::new("T", "broker-a", 0), 5);
        f.set(&MessageQueue::new("T", "broker-b", 0), 7);
        std::fs::write(dir.file(), f.to_pretty()).unwrap();
        let mut c = ClientOffsets::load(dir.clone(), "broker-a").unwrap();
        assert_eq!(c.get("T", 0), Some(5));
        assert_eq!(c.other_brokers().get("broker-b"), Some(&1));
        c.set("T", 1, 9);
        // meanwhile the client itself wrote queue 2
        let mut now = f.clone();
        now.set(&MessageQueue::new("T", "broker-a", 2), 11);
        std::fs::write(dir.file(), now.to_pretty()).unwrap();
        let backup = c.persist("test").unwrap().unwrap();
        assert_eq!(std::fs::read(&backup).unwrap(), now.to_pretty().as_bytes());
        assert_eq!(
            std::fs::read(with_suffix(&dir.file(), ".bak")).unwrap(),
            now.to_pretty().as_bytes()
        );
        let back = ClientOffsets::load(dir.clone(), "broker-a").unwrap();
        assert_eq!(back.source, OffsetFileSource::Main);
        let got: Vec<(String, i32, i64)> = back.queues();
        assert_eq!(
            got,
            vec![("T".into(), 0, 5), ("T".into(), 1, 9), ("T".into(), 2, 11)]
        );
        assert_eq!(
            back.file.get(&MessageQueue::new("T", "broker-b", 0)),
            Some(7)
        );
        // nothing changed: nothing written
        let mut same = back.clone();
        same.set("T", 1, 9);
        assert_eq!(same.persist("test").unwrap(), None);
    }

    #[test]
    fn a_symlinked_bak_or_a_stale_tmp() {
        let t = tempfile::tempdir().unwrap();
        let dir = client_dir(t.path());
        let outside = t.path().join("outside");
        let keep = b"{\"offsetTable\":{}}";
        std::fs::write(&outside, keep).unwrap();
        let bak = with_suffix(&dir.file(), ".bak");
        std::os::unix::fs::symlink(&outside, &bak).unwrap();
        let mut c = ClientOffsets::load(dir.clone(), "broker-a").unwrap();
        c.set("T", 0, 1);
        let e = c.persist("test").unwrap_err();
        assert!(
            matches!(&e, Error::WritePath(WritePathError::ClientFileSymlink { path }) if *path == bak),
            "{e}"
        );
        let e = e.to_string();
        assert!(
            e.contains("offsets.json.bak") && e.contains("symlink"),
            "{e}"
        );
        assert_eq!(std::fs::read(&outside).unwrap(), keep);
        std::fs::remove_file(&bak).unwrap();
        // a torn .tmp of an interrupted write is ignored by readers and replaced by the writer
        let tmp = with_suffix(&dir.file(), ".tmp");
        std::fs::write(&tmp, b"{\"offsetTable\":{{\"brokerName\":\"bro").unwrap();
        assert!(ClientOffsets::load(dir.clone(), "broker-a")
            .unwrap()
            .file
            .table
            .is_empty());
        assert_eq!(
            c.persist("test").unwrap(),
            None,
            "no old file, no dated copy"
        );
        assert!(!tmp.exists());
        let back = ClientOffsets::load(dir, "broker-a").unwrap();
        assert_eq!(back.get("T", 0), Some(1));
    }
}
