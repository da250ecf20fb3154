//! The only code that writes store files: appends records to commitlog files, dispatches consume
//! queue units and index entries as the broker does, writes checkpoint and config files.
//!
//! [`StoreWriter`] always writes into a directory of its own; switching a rebuilt or repaired
//! directory into place is done by `SafeDir` (atomic rename after fsync, old files kept).
//!
//! With [`WriterOptions::dledger`] the records go into a DLedger-mode store instead
//! (`dledger-<selfId>/`, DLEDGER.md): each record wrapped in an entry as `DLedgerCommitLog` appends
//! it (PHYSICALOFFSET = entry pos + 48, which the consume queues and index files point at), the
//! DLedger index unit of each entry, and the `checkpoint` and `currterm` properties files;
//! [`StoreWriter::convert_to_dledger`] switches a normal store to that mode as a broker's first
//! start in DLedger mode does (the converted layout).
//!
//! A process killed while appending leaves a torn record at the end of the last file; before a
//! store is continued, [`torn_tail`] finds it with recovery's walk and [`cut_torn_tail`] cuts it,
//! as the broker's recovery does.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::engine::store::dispatch::{dispatch, Dispatch};
use crate::engine::store::index_builder::{IndexBuilder, IndexNaming};
use crate::engine::store::paths;
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::write::blank_record;
use crate::format::commitlog::{prop, Message, MessageRef, END_FILE_MIN_BLANK_LENGTH};
use crate::format::config::{persist, ConfigFile};
use crate::format::consumequeue::write::QueueWriter;
use crate::format::dledger::entry::{encode_file_end, EntryHeader};
use crate::format::dledger::index::IndexFileWriter;
use crate::format::dledger::{DledgerCheckpoint, IndexUnit, TermFile};
use crate::format::error::{Error, ErrorKind, Result, WriterError};
use crate::format::filename::offset_to_name;
use crate::format::geometry::Geometry;
use crate::format::layout::queue_dir;

/// What the writer produces.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    pub geometry: Geometry,
    /// Build consume queues.
    pub consumequeue: bool,
    /// Build index files (`messageIndexEnable`).
    pub index: bool,
    /// How new index files are named.
    pub index_naming: IndexNaming,
    /// Write a DLedger-mode store (the commitlog as DLedger entries).
    pub dledger: Option<DledgerOutput>,
}

/// The DLedger member a writer in DLedger mode plays: a single-replica group that elected
/// itself, so every entry it appends is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DledgerOutput {
    /// `dLegerSelfId`: the folder is `dledger-<self_id>`.
    pub self_id: String,
    /// The leader term every entry is appended in (`currterm`'s `currTerm`).
    pub term: i64,
    /// `mappedFileSizeForEntryIndex` (a multiple of 32).
    pub index_file_size: u64,
}

impl DledgerOutput {
    /// Member `n0` in term 0 with DLedger's default index file size.
    pub fn single() -> Self {
        DledgerOutput {
            self_id: "n0".into(),
            term: 0,
            index_file_size: crate::format::dledger::DEFAULT_INDEX_FILE_SIZE,
        }
    }
}

/// A writer's DLedger state: the next entry index and the index files being written.
struct DledgerState {
    out: DledgerOutput,
    dir: PathBuf,
    next_index: i64,
    index: IndexFileWriter,
    /// `dividedCommitlogOffset` of a converted store.
    divide: Option<u64>,
}

/// What one append did, as the broker's `AppendMessageResult` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub wrote_offset: u64,
    pub wrote_bytes: usize,
    pub queue_offset: i64,
    pub msg_id: String,
}

struct SegmentWriter {
    path: PathBuf,
    start: u64,
    pos: u64,
    out: BufWriter<File>,
}

impl SegmentWriter {
    fn new(path: PathBuf, start: u64, pos: u64, f: File) -> Self {
        SegmentWriter {
            path,
            start,
            pos,
            out: BufWriter::with_capacity(1 << 20, f),
        }
    }
}

/// A torn record at the end of a store's data: what a crash during an append leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    pub path: PathBuf,
    /// File position of the cut: the end of the last whole record.
    pub pos: u64,
    /// The same as a commitlog offset.
    pub offset: u64,
    /// Bytes from the cut to the last non-zero byte of the file: what is cut.
    pub bytes: u64,
    /// The file's length.
    pub file_len: u64,
    /// Why recovery's walk stops there.
    pub detail: String,
}

impl std::fmt::Display for TornTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: cut {} bytes of a torn record at byte {} (commitlog offset {}): {}",
            self.path.display(),
            self.bytes,
            self.pos,
            self.offset,
            self.detail
        )
    }
}

/// The torn tail of `commitlog`, if its data ends in one: recovery's walk of the last file that
/// holds data stops at a damaged record with nothing intact after it (no record found by
/// resynchronising, no file after it with data). Damage with records after it is not a torn
/// tail (`None`): continuing such a store is refused by [`StoreWriter::resume`].
pub fn torn_tail(commitlog: &crate::format::commitlog::Commitlog) -> Result<Option<TornTail>> {
    use crate::engine::check::recovery::{walk_file, WalkOptions, WalkProblem};
    let mut last = None;
    for (i, seg) in commitlog.segments.iter().enumerate().rev() {
        let map = seg.map()?;
        if !matches!(
            parse_record(&map, 0, seg.start, false),
            Ok(Record::EndOfData)
        ) {
            last = Some((i, map));
            break;
        }
    }
    let Some((i, map)) = last else {
        return Ok(None);
    };
    let seg = &commitlog.segments[i];
    let walk = walk_file(&map, seg, &WalkOptions::default(), |_, _| {});
    if !walk.stop.is_damage() || walk.after_records > 0 || walk.stale_records > 0 {
        return Ok(None);
    }
    let detail = walk
        .problems
        .iter()
        .find(|p| p.pos() == walk.stop_pos)
        .map(|p| match p {
            WalkProblem::BadRecord { detail, .. } => detail.clone(),
            other => format!("{other:?}"),
        })
        .unwrap_or_else(|| format!("{:?}", walk.stop));
    Ok(Some(TornTail {
        path: seg.path.clone(),
        pos: walk.stop_pos,
        offset: walk.stop_offset(),
        bytes: map
            .get(walk.stop_pos as usize..)
            .and_then(|rest| rest.iter().rposition(|&b| b != 0))
            .map_or(0, |p| p as u64 + 1),
        file_len: walk.len,
        detail,
    }))
}

/// Cut `tail` off its file and sync it: the bytes from the cut on become zeros (the end of the
/// data), and the file keeps its length.
pub fn cut_torn_tail(tail: &TornTail) -> Result<()> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&tail.path)
        .map_err(|e| Error::io(&tail.path, e))?;
    f.set_len(tail.pos)
        .and_then(|()| f.set_len(tail.file_len))
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::io(&tail.path, e))
}

/// Appends messages and dispatches them, as the broker's put path and reput service do.
pub struct StoreWriter {
    root: PathBuf,
    options: WriterOptions,
    segment: Option<SegmentWriter>,
    next_offset: u64,
    queue_offsets: HashMap<(String, i32), i64>,
    cqs: HashMap<(String, i32), QueueWriter>,
    index: Option<IndexBuilder>,
    last_store_timestamp: i64,
    last_cq_timestamp: i64,
    buf: Vec<u8>,
    dledger: Option<DledgerState>,
}

impl StoreWriter {
    /// Start writing a new store in `root` (created if missing; it must not hold a commitlog,
    /// nor DLedger data).
    pub fn create(root: &Path, options: WriterOptions) -> Result<Self> {
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        let cl = root.join(paths::COMMITLOG);
        let non_empty = |d: &Path| -> Result<bool> {
            Ok(d.is_dir()
                && std::fs::read_dir(d)
                    .map_err(|e| Error::io(d, e))?
                    .next()
                    .is_some())
        };
        if non_empty(&cl)? {
            return Err(WriterError::ExistingCommitlog { path: cl }.into());
        }
        for member in crate::format::dledger::layout::member_dirs(root) {
            let data = root.join(member).join(crate::format::dledger::DATA_DIR);
            if non_empty(&data)? {
                return Err(WriterError::ExistingCommitlog { path: data }.into());
            }
        }
        let dledger_out = options.dledger.clone();
        let index = options
            .index
            .then(|| {
                IndexBuilder::new(
                    root.join(paths::INDEX),
                    &options.geometry,
                    options.index_naming,
                )
            })
            .transpose()?;
        Ok(StoreWriter {
            root: root.to_path_buf(),
            options,
            segment: None,
            next_offset: 0,
            queue_offsets: HashMap::new(),
            cqs: HashMap::new(),
            index,
            last_store_timestamp: 0,
            last_cq_timestamp: 0,
            buf: Vec::new(),
            dledger: None,
        })
        .and_then(|mut w| {
            if let Some(out) = dledger_out {
                w.start_dledger(out, None)?;
            }
            Ok(w)
        })
    }

    /// Go on in DLedger mode from here: a broker's first start with `enableDLegerCommitLog`
    /// over a normal store (`DLedgerCommitLog.recover`). The last commitlog file gets a blank
    /// record at its write position (unless it is full), and the DLedger data begin at the end
    /// of that file (`dividedCommitlogOffset`); entry indexes begin at 0. Queue offsets and
    /// index files go on across the divide.
    pub fn convert_to_dledger(&mut self, out: DledgerOutput) -> Result<()> {
        if self.dledger.is_some() {
            return Ok(());
        }
        let file_size = self.options.geometry.commitlog_file_size.value;
        if let Some(s) = self.segment.as_mut() {
            let left = file_size - s.pos;
            if left > 0 {
                s.out
                    .write_all(&blank_record(left as i32))
                    .map_err(|e| Error::io(&s.path, e))?;
            }
        }
        self.close_segment()?;
        let divide = self.next_offset;
        self.start_dledger(out, Some(divide))
    }

    fn start_dledger(&mut self, out: DledgerOutput, divide: Option<u64>) -> Result<()> {
        let dir = self.root.join(format!(
            "{}{}",
            crate::format::dledger::DIR_PREFIX,
            out.self_id
        ));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let index = IndexFileWriter::create(
            &dir.join(crate::format::dledger::INDEX_DIR),
            out.index_file_size,
        )?;
        self.dledger = Some(DledgerState {
            out,
            dir,
            next_index: 0,
            index,
            divide,
        });
        Ok(())
    }

    /// `dividedCommitlogOffset` when the writer converted the store to DLedger mode.
    pub fn divide(&self) -> Option<u64> {
        self.dledger.as_ref().and_then(|d| d.divide)
    }

    /// DLedger entries appended so far (0 in normal mode).
    pub fn dledger_entries(&self) -> u64 {
        self.dledger.as_ref().map_or(0, |d| d.next_index as u64)
    }

    /// Reopen a store this writer (or a broker) wrote, to append after its last record.
    ///
    /// The commitlog is walked as the broker's recovery walks it (a blank record moves on to the
    /// next file); the file holding the end of data is continued at that position. Consume
    /// queues and index files are derived data: they are removed and dispatched again from
    /// every record, so they come out as a fresh dispatch would make them. Queue offsets continue
    /// from the last record of each queue. A root without commitlog files starts like
    /// [`StoreWriter::create`]. A bad record, or data after the end of data, is refused: repair
    /// the store first. A live store is refused (`LiveGuard`).
    pub fn resume(root: &Path, options: WriterOptions) -> Result<Self> {
        use crate::format::commitlog::{Commitlog, RecordIter, SegmentEnd};
        crate::engine::store::safedir::ensure_not_live(root)?;
        if crate::format::dledger::layout::is_dledger_root(root) || options.dledger.is_some() {
            return Err(Error::data(
                root,
                0,
                ErrorKind::Invalid {
                    what: "store to continue",
                    detail:
                        "a DLedger-mode store is not continued: its log belongs to a raft group"
                            .into(),
                },
            ));
        }
        let cl_dir = root.join(paths::COMMITLOG);
        let commitlog = if cl_dir.is_dir() {
            Commitlog::open(&cl_dir)?
        } else {
            return Self::create(root, options);
        };
        if commitlog.segments.is_empty() {
            return Self::create(root, options);
        }
        for d in [paths::CONSUMEQUEUE, paths::INDEX] {
            let p = root.join(d);
            if p.is_dir() {
                std::fs::remove_dir_all(&p).map_err(|e| Error::io(&p, e))?;
            }
        }
        let file_size = options.geometry.commitlog_file_size.value;
        let index = options
            .index
            .then(|| {
                IndexBuilder::new(
                    root.join(paths::INDEX),
                    &options.geometry,
                    options.index_naming,
                )
            })
            .transpose()?;
        let mut w = StoreWriter {
            root: root.to_path_buf(),
            options,
            segment: None,
            next_offset: commitlog.segments.first().map(|s| s.start).unwrap_or(0),
            queue_offsets: HashMap::new(),
            cqs: HashMap::new(),
            index,
            last_store_timestamp: 0,
            last_cq_timestamp: 0,
            buf: Vec::new(),
            dledger: None,
        };
        let last = commitlog.segments.len() - 1;
        for (i, seg) in commitlog.segments.iter().enumerate() {
            let map = seg.map()?;
            let mut it = RecordIter::new(&map, seg, true);
            for r in it.by_ref() {
                let m = r?;
                w.dispatch_record(&m)?;
                if m.transaction_type().is_queued() {
                    let n = batch_count(m.property(prop::INNER_NUM).as_deref(), m.sys_flag);
                    w.queue_offsets.insert(
                        (m.topic.to_string(), m.queue_id),
                        m.queue_offset.saturating_add(n),
                    );
                }
            }
            let later_empty = || {
                commitlog.segments[i + 1..].iter().all(|s| {
                    s.map().is_ok_and(|m| {
                        matches!(parse_record(&m, 0, s.start, false), Ok(Record::EndOfData))
                    })
                })
            };
            match it.end().clone() {
                SegmentEnd::Blank { .. } => w.next_offset = seg.start.saturating_add(file_size),
                SegmentEnd::EndOfData { pos } if i == last || later_empty() => {
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .open(&seg.path)
                        .map_err(|e| Error::io(&seg.path, e))?;
                    use std::io::Seek;
                    f.seek(std::io::SeekFrom::Start(pos as u64))
                        .map_err(|e| Error::io(&seg.path, e))?;
                    w.segment = Some(SegmentWriter::new(
                        seg.path.clone(),
                        seg.start,
                        pos as u64,
                        f,
                    ));
                    break;
                }
                end => {
                    return Err(WriterError::CannotResume {
                        path: seg.path.clone(),
                        end,
                    }
                    .into())
                }
            }
        }
        Ok(w)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn geometry(&self) -> &Geometry {
        &self.options.geometry
    }

    /// Start the commitlog at `offset` (a multiple of the file size), as after old files expired.
    pub fn set_start_offset(&mut self, offset: u64) {
        if self.segment.is_none() {
            self.next_offset = offset;
        }
    }

    /// The next queue offset the broker would assign in (topic, queue).
    pub fn next_queue_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.queue_offsets
            .get(&(topic.to_string(), queue_id))
            .copied()
            .unwrap_or(0)
    }

    pub fn set_next_queue_offset(&mut self, topic: &str, queue_id: i32, next: i64) {
        self.queue_offsets
            .insert((topic.to_string(), queue_id), next);
    }

    /// The commitlog offset the next record would get (if it fits the current file).
    pub fn next_offset(&self) -> u64 {
        self.segment
            .as_ref()
            .map(|s| s.start + s.pos)
            .unwrap_or(self.next_offset)
    }

    fn open_segment(&mut self, start: u64) -> Result<()> {
        let dir = match &self.dledger {
            Some(d) => d.dir.join(crate::format::dledger::DATA_DIR),
            None => self.root.join(paths::COMMITLOG),
        };
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let path = dir.join(offset_to_name(start));
        let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
        self.segment = Some(SegmentWriter::new(path, start, 0, f));
        Ok(())
    }

    fn close_segment(&mut self) -> Result<()> {
        if let Some(mut s) = self.segment.take() {
            let size = self.options.geometry.commitlog_file_size.value;
            s.out.flush().map_err(|e| Error::io(&s.path, e))?;
            let f = s.out.get_ref();
            f.set_len(size)
                .and_then(|_| f.sync_all())
                .map_err(|e| Error::io(&s.path, e))?;
            self.next_offset = s.start + size;
        }
        Ok(())
    }

    /// Append a message as the broker's `CommitLog.putMessage` does: assign the physical offset
    /// and (for NOT/COMMIT records) the next queue offset, end the file with a blank record when
    /// the message does not fit, then dispatch it.
    pub fn append(&mut self, msg: Message) -> Result<Appended> {
        self.buf.clear();
        msg.encode_into(&mut self.buf)
            .map_err(|source| WriterError::Encode {
                path: self.root.clone(),
                source,
            })?;
        let n = batch_count(msg.property(prop::INNER_NUM).as_deref(), msg.sys_flag);
        let queued = msg.transaction_type().is_queued();
        let (wrote_offset, queue_offset) =
            self.put_buffered(&msg.topic, msg.queue_id, queued, n)?;
        let buf = std::mem::take(&mut self.buf);
        let res = self.dispatch_bytes(&buf, wrote_offset);
        self.buf = buf;
        res?;
        Ok(Appended {
            wrote_offset,
            wrote_bytes: self.buf.len(),
            queue_offset,
            msg_id: crate::format::msgid::offset_msg_id(&msg.store_host, wrote_offset as i64),
        })
    }

    /// Append a record as it was stored elsewhere (salvage): its bytes unchanged but for
    /// QUEUEOFFSET and PHYSICALOFFSET, which this store assigns (BODYCRC covers the body only).
    pub fn append_record(&mut self, m: &MessageRef<'_>) -> Result<Appended> {
        self.buf.clear();
        self.buf.extend_from_slice(m.raw);
        let n = batch_count(m.property(prop::INNER_NUM).as_deref(), m.sys_flag);
        let queued = m.transaction_type().is_queued();
        let (wrote_offset, queue_offset) = self.put_buffered(&m.topic, m.queue_id, queued, n)?;
        // Dispatched as written: the same record at its new offsets.
        let mut here = m.clone();
        here.position = wrote_offset;
        here.physical_offset = wrote_offset as i64;
        here.queue_offset = queue_offset;
        self.dispatch_record(&here)?;
        Ok(Appended {
            wrote_offset,
            wrote_bytes: m.raw.len(),
            queue_offset,
            msg_id: crate::format::msgid::offset_msg_id(&m.store_host, wrote_offset as i64),
        })
    }

    /// The record encoded in `self.buf` gets its offsets and goes into the commitlog (after a
    /// blank record ending the file when it does not fit). Returns its offset and queue offset.
    fn put_buffered(
        &mut self,
        topic: &str,
        queue_id: i32,
        queued: bool,
        batch: i64,
    ) -> Result<(u64, i64)> {
        let file_size = self.options.geometry.commitlog_file_size.value;
        let len = self.buf.len();
        // In DLedger mode each record is wrapped in an entry (`MmapFileList.preAppend` keeps 8
        // bytes for the file-end marker, as the commitlog does for its blank record).
        let header = if self.dledger.is_some() {
            crate::format::dledger::HEADER_SIZE
        } else {
            0
        };
        let stored = len + header;
        if (stored + END_FILE_MIN_BLANK_LENGTH) as u64 > file_size || len < PHYSICAL_OFFSET_END {
            return Err(WriterError::RecordDoesNotFit {
                path: self.root.clone(),
                len,
                file_size,
            }
            .into());
        }
        if self.segment.is_none() {
            self.open_segment(self.next_offset)?;
        }
        let needs_roll = self
            .segment
            .as_ref()
            .is_some_and(|s| (stored + END_FILE_MIN_BLANK_LENGTH) as u64 > file_size - s.pos);
        if needs_roll {
            let dledger = self.dledger.is_some();
            if let Some(s) = self.segment.as_mut() {
                let left = (file_size - s.pos) as i32;
                let end = if dledger {
                    encode_file_end(left)
                } else {
                    blank_record(left)
                };
                s.out.write_all(&end).map_err(|e| Error::io(&s.path, e))?;
            }
            self.close_segment()?;
            self.open_segment(self.next_offset)?;
        }
        let Some(seg) = self.segment.as_mut() else {
            return Err(WriterError::NoFileOpen {
                path: self.root.clone(),
            }
            .into());
        };
        let entry_pos = seg.start + seg.pos;
        let wrote_offset = entry_pos + header as u64;
        let queue_offset = if queued {
            let next = self
                .queue_offsets
                .entry((topic.to_string(), queue_id))
                .or_insert(0);
            let at = *next;
            *next = at + batch;
            at
        } else {
            0
        };
        self.buf[QUEUE_OFFSET_AT..PHYSICAL_OFFSET_AT].copy_from_slice(&queue_offset.to_be_bytes());
        self.buf[PHYSICAL_OFFSET_AT..PHYSICAL_OFFSET_END]
            .copy_from_slice(&(wrote_offset as i64).to_be_bytes());
        if let Some(d) = self.dledger.as_mut() {
            let h = EntryHeader {
                magic: crate::format::dledger::MAGIC,
                size: stored as i32,
                index: d.next_index,
                term: d.out.term,
                pos: entry_pos as i64,
                channel: 0,
                chain_crc: 0,
                body_crc: 0,
                body_size: len as i32,
            };
            seg.out
                .write_all(&h.to_bytes())
                .map_err(|e| Error::io(&seg.path, e))?;
            d.index.push(&IndexUnit::of(&h))?;
            d.next_index += 1;
        }
        seg.out
            .write_all(&self.buf)
            .map_err(|e| Error::io(&seg.path, e))?;
        seg.pos += stored as u64;
        Ok((wrote_offset, queue_offset))
    }

    fn dispatch_bytes(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        let path = self
            .segment
            .as_ref()
            .map(|s| s.path.clone())
            .unwrap_or_default();
        match parse_record(buf, 0, offset, false) {
            Ok(Record::Message(m)) => self.dispatch_record(&m),
            Ok(_) => Err(Error::data(
                &path,
                offset,
                ErrorKind::Invalid {
                    what: "encoded record",
                    detail: "did not parse back".into(),
                },
            )),
            Err(e) => Err(e.in_file(&path, offset)),
        }
    }

    /// Dispatch an existing record (rebuild): consume queue unit and index entries.
    pub fn dispatch_record(&mut self, m: &MessageRef<'_>) -> Result<()> {
        let d: Dispatch = dispatch(m, &self.options.geometry).map_err(|e| {
            let size = self.options.geometry.commitlog_file_size.value.max(1);
            let start = m.position - m.position % size;
            Error::data(
                &self.root.join(paths::COMMITLOG).join(offset_to_name(start)),
                m.position - start,
                ErrorKind::Invalid {
                    what: "record",
                    detail: e.to_string(),
                },
            )
        })?;
        self.last_store_timestamp = m.store_timestamp;
        if self.options.consumequeue {
            if let Some(cq) = &d.cq {
                let file_size = self.options.geometry.cq_file_size();
                let key = (cq.topic.clone(), cq.queue_id);
                let w = match self.cqs.entry(key) {
                    std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        let dir = queue_dir(&self.root, &cq.topic, cq.queue_id)?;
                        v.insert(QueueWriter::new(dir, file_size))
                    }
                };
                w.put(cq.unit, cq.queue_offset)?;
                self.last_cq_timestamp = m.store_timestamp;
            }
        }
        if let Some(ix) = self.index.as_mut() {
            ix.add(m)?;
        }
        Ok(())
    }

    /// Write a config file in the broker's form (`config/<name>`, the previous one kept as `.bak`).
    pub fn write_config<T: ConfigFile>(&self, value: &T) -> Result<()> {
        let dir = self.root.join(paths::CONFIG);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        persist(&dir.join(T::FILE_NAME), &value.to_pretty())
    }

    /// Finish: pad the last commitlog file to full size, write consume queues, index files and
    /// the checkpoint. Returns the checkpoint written.
    pub fn finish(mut self) -> Result<Checkpoint> {
        self.close_segment()?;
        for cq in self.cqs.values_mut() {
            cq.finish()?;
        }
        let index_ts = match self.index.take() {
            Some(ix) => ix.finish()?,
            None => 0,
        };
        let cp = Checkpoint {
            physic_msg_timestamp: self.last_store_timestamp,
            logics_msg_timestamp: self.last_cq_timestamp,
            index_msg_timestamp: index_ts,
            ..Default::default()
        };
        let p = self.root.join(paths::CHECKPOINT);
        write_synced(&p, &cp.to_bytes())?;
        if let Some(d) = self.dledger.take() {
            d.index.finish()?;
            // A single member commits all it has; the checkpoint as the flush service and the
            // shutdown leave it (the previous, equal content in `.bak`), the term it voted itself.
            let end = d.next_index - 1;
            let text = DledgerCheckpoint {
                end_index: Some(end),
                committed_index: Some(end),
            }
            .to_text();
            for name in [
                crate::format::dledger::CHECKPOINT_FILE.to_string(),
                format!("{}.bak", crate::format::dledger::CHECKPOINT_FILE),
            ] {
                write_synced(&d.dir.join(name), text.as_bytes())?;
            }
            let term = TermFile {
                curr_term: Some(d.out.term),
                vote_leader: Some(d.out.self_id.clone()),
            };
            write_synced(
                &d.dir.join(crate::format::dledger::CURRTERM_FILE),
                term.to_text().as_bytes(),
            )?;
        }
        Ok(cp)
    }
}

/// Where QUEUEOFFSET and PHYSICALOFFSET are in every record (v1 and v2 alike).
const QUEUE_OFFSET_AT: usize = 20;
const PHYSICAL_OFFSET_AT: usize = 28;
const PHYSICAL_OFFSET_END: usize = 36;

/// The queue offsets a queued record takes: INNER_NUM of an inner batch, else 1.
fn batch_count(inner_num: Option<&str>, sys_flag: i32) -> i64 {
    inner_num
        .and_then(crate::format::java::parse_int)
        .filter(|_| sys_flag & crate::format::commitlog::sysflag::INNER_BATCH != 0)
        .unwrap_or(1) as i64
}

/// Write a whole file and fsync it.
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let mut f = File::create(path).map_err(|e| Error::io(path, e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::commitlog::{Host, MessageVersion};
    use crate::format::geometry::{Source, Sourced};

    fn message(body_len: usize) -> Message {
        let host = Host::v4([127, 0, 0, 1], 10911);
        Message {
            topic: "T".to_string(),
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: host,
            store_timestamp: 1,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: vec![b'x'; body_len],
            properties: Vec::new(),
            version: MessageVersion::V1,
        }
    }

    fn options(commitlog_file_size: u64) -> WriterOptions {
        WriterOptions {
            geometry: Geometry {
                commitlog_file_size: Sourced::new(commitlog_file_size, Source::Flag),
                ..Geometry::default()
            },
            consumequeue: true,
            index: false,
            index_naming: IndexNaming::Utc,
            dledger: None,
        }
    }

    #[test]
    fn a_record_larger_than_a_file_names_its_size_and_the_file_size() {
        let t = tempfile::tempdir().unwrap();
        let mut w = StoreWriter::create(t.path(), options(4096)).unwrap();
        w.append(message(100)).unwrap();
        let e = w.append(message(5000)).unwrap_err();
        match &e {
            Error::Writer(WriterError::RecordDoesNotFit {
                path,
                len,
                file_size,
            }) => {
                assert_eq!(path, t.path());
                assert!(*len > 5000, "{len}");
                assert_eq!(*file_size, 4096);
            }
            other => panic!("{other}"),
        }
        assert!(e
            .to_string()
            .ends_with("does not fit commitlog files of 4096 bytes"));
    }

    #[test]
    fn a_new_store_is_not_written_over_a_commitlog() {
        let t = tempfile::tempdir().unwrap();
        let mut w = StoreWriter::create(t.path(), options(4096)).unwrap();
        w.append(message(10)).unwrap();
        w.finish().unwrap();
        let e = StoreWriter::create(t.path(), options(4096)).err().unwrap();
        assert!(
            matches!(&e, Error::Writer(WriterError::ExistingCommitlog { path }) if *path == t.path().join("commitlog")),
            "{e}"
        );
    }
}
