//! A store directory as a whole: finds every part, resolves the geometry, maps files on demand.
//! Opening lists folders and reads small files only; it never scans the commitlog.

pub mod dispatch;
pub mod dledger;
pub mod generate;
pub mod index_builder;
pub mod message_json;
pub mod reader;
pub mod render_walk;
pub mod safedir;
pub mod scan;
pub mod summary;
pub mod timer_files;
pub mod version;
pub mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::format::checkpoint::{AbortMarker, Checkpoint};
use crate::format::commitlog::{Commitlog, Segment, SegmentKind};
use crate::format::consumequeue::ConsumeQueue;
use crate::format::dledger::layout::is_dledger_root;
use crate::format::dledger::DledgerLayout;
use crate::format::entry::{self, Entry, Kind};
use crate::format::error::{Error, OpenError, Result};
use crate::format::geometry::{resolve, Geometry, GeometryInputs};
use crate::format::layout::{check_topic, NameError};

/// Folder and file names under a store root (`StorePathConfigHelper`).
pub mod paths {
    pub const COMMITLOG: &str = "commitlog";
    pub const CONSUMEQUEUE: &str = "consumequeue";
    pub const CONSUMEQUEUE_EXT: &str = "consumequeue_ext";
    pub const BATCH_CONSUMEQUEUE: &str = "batchconsumequeue";
    pub const INDEX: &str = "index";
    pub const CHECKPOINT: &str = "checkpoint";
    pub const ABORT: &str = "abort";
    pub const LOCK: &str = "lock";
    pub const CONFIG: &str = "config";
}

/// The store: its root, geometry and parts.
#[derive(Debug, Clone)]
pub struct Store {
    pub root: PathBuf,
    pub geometry: Geometry,
    pub commitlog: Commitlog,
    /// Consume queues by (topic, queue id), topics sorted by name, queues by id.
    pub queues: BTreeMap<(String, i32), ConsumeQueue>,
    /// Index files sorted by name (creation time).
    pub index_files: Vec<PathBuf>,
    pub abort: AbortMarker,
    /// True when a `lock` file exists (it exists after any broker run; see `LiveGuard`).
    pub lock_file: bool,
    /// Entries under `consumequeue/` that are not a queue folder or a file in one: files at the
    /// topic level, folders whose name is not a queue id, FIFOs, symlink loops. The broker
    /// skips them.
    pub consumequeue_odd: Vec<Entry>,
    /// Topic folders whose name breaks the broker's topic rule (they are still read).
    pub bad_topic_dirs: Vec<(PathBuf, NameError)>,
    /// Entries of `index/` that are not regular files.
    pub index_odd: Vec<Entry>,
    /// The DLedger log of a DLedger-mode store; its data files are in [`Store::commitlog`].
    pub dledger: Option<DledgerLayout>,
}

/// A folder with `commitlog/`, `consumequeue/` or a DLedger member folder in it.
fn is_root(dir: &Path) -> bool {
    dir.join(paths::COMMITLOG).is_dir()
        || dir.join(paths::CONSUMEQUEUE).is_dir()
        || is_dledger_root(dir)
}

/// The store root `path` is a part of (a folder or file at most four levels below it, as
/// `consumequeue/<topic>/<queue>/<file>`), for the hint of an open that was given the part.
fn root_above(path: &Path) -> Option<PathBuf> {
    let path = std::path::absolute(path).ok()?;
    path.ancestors()
        .skip(1)
        .take(4)
        .find(|a| is_root(a))
        .map(Path::to_path_buf)
}

/// A folder that holds the stage marker is a writer's unfinished output: refused.
fn refuse_stage(root: &Path) -> Result<()> {
    if root.is_dir() && root.join(safedir::STAGE_MARKER).exists() {
        return Err(OpenError::Staged {
            path: root.to_path_buf(),
            marker: safedir::STAGE_MARKER,
        }
        .into());
    }
    Ok(())
}

impl Store {
    /// Open a store root. Values missing from `inputs.flags`/`broker_conf` are inferred from
    /// the files (commitlog and consume queue file sizes, index slots and entries).
    /// A folder that holds the stage marker (a writer's unfinished output) is refused. A
    /// DLedger-mode store's data files are segments of its commitlog ([`Store::dledger`]).
    pub fn open(root: &Path, inputs: &GeometryInputs) -> Result<Self> {
        refuse_stage(root)?;
        Self::load(root, inputs)
    }

    /// [`Store::open`] that also opens a folder marked as a stage: for the writer that made it,
    /// to check what it wrote before it removes the marker.
    pub fn open_staged(root: &Path, inputs: &GeometryInputs) -> Result<Self> {
        Self::load(root, inputs)
    }

    fn load(root: &Path, inputs: &GeometryInputs) -> Result<Self> {
        let commitlog_dir = root.join(paths::COMMITLOG);
        if !root.is_dir() {
            let path = root.to_path_buf();
            return Err(match std::fs::symlink_metadata(root) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    OpenError::NoSuchDirectory { path }
                }
                Err(e) => OpenError::RootUnreadable {
                    path,
                    kind: e.kind(),
                },
                Ok(_) => OpenError::NotADirectory {
                    root: root_above(root),
                    path,
                },
            }
            .into());
        }
        if !is_root(root) {
            return Err(OpenError::NotAStoreRoot {
                path: root.to_path_buf(),
                root: root_above(root),
            }
            .into());
        }
        let mut commitlog = if commitlog_dir.is_dir() {
            Commitlog::open(&commitlog_dir)?
        } else {
            Commitlog {
                dir: commitlog_dir,
                segments: Vec::new(),
                foreign: Vec::new(),
                odd: Vec::new(),
            }
        };
        let dledger = DledgerLayout::find(root, inputs)?;
        if let Some(layout) = &dledger {
            add_dledger_segments(&mut commitlog, layout)?;
        }
        let queue_dirs = list_queue_dirs(&root.join(paths::CONSUMEQUEUE))?;
        let (index_files, index_odd) = list_index_files(&root.join(paths::INDEX))?;

        let mut inputs = inputs.clone();
        inputs.inferred = infer(&commitlog, &queue_dirs.queues, &index_files);
        let geometry = resolve(&inputs);

        let mut queues = BTreeMap::new();
        for (topic, qid, dir) in queue_dirs.queues {
            let cq = ConsumeQueue::open(&dir, &topic, qid, geometry.cq_file_size())?;
            queues.insert((topic, qid), cq);
        }
        Ok(Store {
            root: root.to_path_buf(),
            geometry,
            commitlog,
            queues,
            index_files,
            abort: AbortMarker::read(root),
            lock_file: root.join(paths::LOCK).exists(),
            consumequeue_odd: queue_dirs.odd,
            bad_topic_dirs: queue_dirs.bad_topics,
            index_odd,
            dledger,
        })
    }

    pub fn config_dir(&self) -> PathBuf {
        self.root.join(paths::CONFIG)
    }

    pub fn checkpoint_path(&self) -> PathBuf {
        self.root.join(paths::CHECKPOINT)
    }

    /// Read the checkpoint; `Ok(None)` when the file does not exist.
    pub fn checkpoint(&self) -> Result<Option<Checkpoint>> {
        crate::format::checkpoint::read_file(&self.checkpoint_path())
    }

    /// Topic names with consume queues, sorted.
    pub fn topics(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.queues.keys().map(|(t, _)| t.as_str()).collect();
        v.dedup();
        v
    }

    /// The consume queues of one topic, by queue id.
    pub fn topic_queues<'a>(&'a self, topic: &'a str) -> impl Iterator<Item = &'a ConsumeQueue> {
        self.queues
            .range((topic.to_string(), i32::MIN)..=(topic.to_string(), i32::MAX))
            .map(|(_, q)| q)
    }

    pub fn queue(&self, topic: &str, queue_id: i32) -> Option<&ConsumeQueue> {
        self.queues.get(&(topic.to_string(), queue_id))
    }
}

/// What a path given on the command line is: a store root or one file of a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorePath {
    Root(PathBuf),
    /// `commitlog/<20 digits>`.
    CommitlogFile {
        path: PathBuf,
        start: u64,
    },
    /// `consumequeue/<topic>/<queueId>/<20 digits>`.
    ConsumeQueueFile {
        path: PathBuf,
        topic: String,
        queue_id: i32,
        start: u64,
    },
    /// `index/<yyyyMMddHHmmssSSS>`.
    IndexFile(PathBuf),
    Checkpoint(PathBuf),
    /// `config/*.json` (or `.bak`).
    ConfigFile(PathBuf),
}

impl StorePath {
    /// Classify `path` by its name and the names of its parent folders.
    pub fn classify(path: &Path) -> Result<StorePath> {
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => OpenError::NoSuchFile {
                path: path.to_path_buf(),
            }
            .into(),
            _ => Error::io(path, e),
        })?;
        if meta.is_dir() {
            return Ok(StorePath::Root(path.to_path_buf()));
        }
        let name_of = |p: Option<&Path>| {
            p.and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let name = name_of(Some(path));
        let parent = path.parent();
        let start = crate::format::filename::name_to_offset(&name);
        let grand = parent.and_then(Path::parent);
        let great = grand.and_then(Path::parent);
        match (name_of(parent).as_str(), start) {
            (paths::COMMITLOG, Some(start)) => {
                return Ok(StorePath::CommitlogFile {
                    path: path.to_path_buf(),
                    start,
                })
            }
            (qid, Some(start)) if name_of(great) == paths::CONSUMEQUEUE => {
                if let Some(queue_id) = crate::format::java::parse_int(qid) {
                    return Ok(StorePath::ConsumeQueueFile {
                        path: path.to_path_buf(),
                        topic: name_of(grand),
                        queue_id,
                        start,
                    });
                }
            }
            (paths::INDEX, _) => return Ok(StorePath::IndexFile(path.to_path_buf())),
            (paths::CONFIG, _) => return Ok(StorePath::ConfigFile(path.to_path_buf())),
            _ => {}
        }
        if name == paths::CHECKPOINT {
            return Ok(StorePath::Checkpoint(path.to_path_buf()));
        }
        Err(OpenError::NotAStoreFile {
            path: path.to_path_buf(),
        }
        .into())
    }
}

/// A DLedger-mode store's commitlog: the `commitlog/` files below the divide (a converted
/// store), then the DLedger data files, each record at its entry's pos + 48, served up to the
/// committed position ([`dledger::served_end`]).
fn add_dledger_segments(commitlog: &mut Commitlog, layout: &DledgerLayout) -> Result<()> {
    let served_end = dledger::served_end(layout)?;
    let divide = layout.divide();
    commitlog.segments.retain(|s| s.start < divide);
    commitlog
        .segments
        .extend(layout.data.files.iter().map(|f| Segment {
            path: f.path.clone(),
            start: f.start,
            len: f.len,
            kind: SegmentKind::Dledger,
            served_end,
        }));
    commitlog
        .foreign
        .extend(layout.data.foreign.iter().cloned());
    commitlog.odd.extend(layout.data.odd.iter().cloned());
    Ok(())
}

/// The queue folders under `consumequeue/`, and what else is there.
#[derive(Default)]
struct QueueDirs {
    queues: Vec<(String, i32, PathBuf)>,
    odd: Vec<Entry>,
    bad_topics: Vec<(PathBuf, NameError)>,
}

/// `consumequeue/<topic>/<queueId>/` folders (symlinks to folders followed, as Java's
/// `listFiles` does); other entries are set aside, and folders whose name is not a queue id are
/// ignored, as the broker's `loadConsumeQueue` does. Two levels deep, never further.
fn list_queue_dirs(dir: &Path) -> Result<QueueDirs> {
    let mut out = QueueDirs::default();
    if !dir.is_dir() {
        return Ok(out);
    }
    for t in entry::list(dir)? {
        if t.kind != Kind::Dir {
            out.odd.push(t);
            continue;
        }
        let Some(topic) = t.name.clone() else {
            out.bad_topics.push((t.path.clone(), NameError::EmptyTopic));
            out.odd.push(t);
            continue;
        };
        if let Err(e) = check_topic(&topic) {
            out.bad_topics.push((t.path.clone(), e));
        }
        for q in entry::list(&t.path)? {
            match (
                q.kind,
                q.name.as_deref().and_then(crate::format::java::parse_int),
            ) {
                (Kind::Dir, Some(id)) => out.queues.push((topic.clone(), id, q.path)),
                _ => out.odd.push(q),
            }
        }
    }
    out.queues.sort();
    Ok(out)
}

/// Index files (every regular file of `index/`, as `IndexService.load` takes them), sorted by
/// name (their creation time), and the entries that are not regular files.
fn list_index_files(dir: &Path) -> Result<(Vec<PathBuf>, Vec<Entry>)> {
    if !dir.is_dir() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut v = Vec::new();
    let mut odd = Vec::new();
    for e in entry::list(dir)? {
        if e.kind.is_file() {
            v.push(e.path);
        } else {
            odd.push(e);
        }
    }
    Ok((v, odd))
}

fn most_common(sizes: impl Iterator<Item = u64>) -> Option<u64> {
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for s in sizes {
        *counts.entry(s).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(s, n)| (n, s))
        .map(|(s, _)| s)
}

/// Geometry from the files: the common commitlog file size, the common consume queue file size
/// (in units), and index slots/entries from the index files' contents.
fn infer(
    commitlog: &Commitlog,
    queue_dirs: &[(String, i32, PathBuf)],
    index_files: &[PathBuf],
) -> crate::format::geometry::GeometryOverrides {
    let mut o = crate::format::geometry::GeometryOverrides {
        // `mappedFileSizeCommitLog` is a Java int: a larger file cannot be the configured size.
        commitlog_file_size: commitlog
            .common_file_size()
            .filter(|&s| s > 0 && s <= i32::MAX as u64),
        ..Default::default()
    };
    let cq_sizes = queue_dirs.iter().flat_map(|(_, _, d)| {
        crate::format::filename::list_queue_dir(d)
            .map(|l| l.files.into_iter().map(|f| f.len).collect::<Vec<_>>())
            .unwrap_or_default()
    });
    o.cq_file_units = most_common(cq_sizes)
        .filter(|&s| s > 0 && s % 20 == 0 && s <= i32::MAX as u64)
        .map(|s| s / 20);
    if let Some((slots, entries)) =
        crate::engine::store::index_builder::infer_index_geometry(index_files)
    {
        o.index_slots = Some(slots);
        o.index_entries = Some(entries);
    }
    o
}

/// A committed fixture store (`fixtures/<name>`), for unit tests.
#[cfg(test)]
pub(crate) fn test_fixture(name: &str) -> Store {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    match Store::open(&root, &GeometryInputs::default()) {
        Ok(s) => s,
        Err(e) => panic!("fixture {name}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_store_paths() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/store-4.9");
        assert_eq!(
            StorePath::classify(&root).unwrap(),
            StorePath::Root(root.clone())
        );
        let cl = root.join("commitlog/00000000000000262144");
        assert_eq!(
            StorePath::classify(&cl).unwrap(),
            StorePath::CommitlogFile {
                path: cl.clone(),
                start: 262144
            }
        );
        let cq = root.join("consumequeue/OrderTopic/2/00000000000000000000");
        assert_eq!(
            StorePath::classify(&cq).unwrap(),
            StorePath::ConsumeQueueFile {
                path: cq.clone(),
                topic: "OrderTopic".into(),
                queue_id: 2,
                start: 0
            }
        );
        let cp = root.join("checkpoint");
        assert_eq!(
            StorePath::classify(&cp).unwrap(),
            StorePath::Checkpoint(cp.clone())
        );
        let conf = root.join("config/consumerOffset.json");
        assert_eq!(
            StorePath::classify(&conf).unwrap(),
            StorePath::ConfigFile(conf.clone())
        );
        let e = StorePath::classify(&root.join("nope")).unwrap_err();
        assert!(
            matches!(e, Error::Open(OpenError::NoSuchFile { .. })),
            "{e}"
        );
        assert_eq!(e.path(), root.join("nope"));
        let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/README.md");
        let e = StorePath::classify(&readme).unwrap_err();
        assert!(
            matches!(e, Error::Open(OpenError::NotAStoreFile { ref path }) if *path == readme),
            "{e}"
        );
        // a store opens; a folder that is not one is refused with a reason
        let s = Store::open(&root, &GeometryInputs::default()).unwrap();
        assert_eq!(s.topics().len(), 8);
        assert_eq!(s.topic_queues("OrderTopic").count(), 4);
        let not = Store::open(&root.join("config"), &GeometryInputs::default()).unwrap_err();
        assert!(
            matches!(not, Error::Open(OpenError::NotAStoreRoot { .. })),
            "{not}"
        );
        assert!(not.to_string().contains("not a RocketMQ store root"));
        // a part of a store names the root it is in
        for part in [
            "config",
            "commitlog",
            "consumequeue/OrderTopic",
            "commitlog/00000000000000000000",
        ] {
            let e = Store::open(&root.join(part), &GeometryInputs::default()).unwrap_err();
            let root_is = |r: &Option<PathBuf>| {
                r.as_deref().map(std::path::absolute).and_then(Result::ok)
                    == Some(std::path::absolute(&root).unwrap())
            };
            assert!(
                matches!(&e, Error::Open(OpenError::NotAStoreRoot { root: r, .. }
                    | OpenError::NotADirectory { root: r, .. }) if root_is(r)),
                "{part}: {e}"
            );
            assert!(e.to_string().contains("give that folder"), "{e}");
        }
        let missing = Store::open(&root.join("nope"), &GeometryInputs::default()).unwrap_err();
        assert!(
            matches!(missing, Error::Open(OpenError::NoSuchDirectory { .. })),
            "{missing}"
        );
    }
}
