//! Writing index files with the broker's algorithm: [`IndexFileBuilder`] is one file
//! (`IndexFile` constructor and `putKey`), [`Indexer`] is `IndexService.buildIndex` over a
//! sequence of files, rolling to a new file when the current one is full.
//!
//! Memory is the slot table plus the entries not yet written out: a writer that hands entries
//! to the file as it goes ([`IndexFileBuilder::drain_to`]) holds the slot table alone. The
//! zero tail of a file is only produced by [`IndexFileBuilder::to_bytes`] or by `set_len` in
//! [`IndexFileBuilder::write_to`].

use std::io::{BufWriter, Write};
use std::path::Path;

use super::read::IndexFile;
use super::{
    abs_hash, format_file_name, index_key_hash, parse_file_name, slot_of, IndexEntry,
    IndexGeometry, IndexHeader, INDEX_SIZE, INVALID_INDEX, KEY_SEPARATOR, TOPIC_KEY_SEPARATOR,
    TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK,
};
use crate::format::error::{Error, ErrorKind};
use crate::format::java::{string_hash, string_hash_extend};

/// One index file being written, kept in memory: header, slot table, entries `1..`.
#[derive(Debug, Clone)]
pub struct IndexFileBuilder {
    geometry: IndexGeometry,
    /// Header as the broker holds it in memory; `index_count` is derived from `entries`.
    header: IndexHeader,
    /// indexCount on disk while no entry was written: 0 for a new file (the broker only writes
    /// the field when it increments it), or what a loaded file said.
    empty_index_count: i32,
    slots: Vec<i32>,
    /// Entries written out by [`IndexFileBuilder::drain_to`]: numbers `1..=drained`, already
    /// in the file.
    drained: u32,
    /// `entries[k]` is entry number `drained + k + 1`.
    entries: Vec<IndexEntry>,
}

impl IndexFileBuilder {
    /// A new empty file, as the `IndexFile` constructor makes it: begin and end offsets start at
    /// `prev_end_phy_offset` and begin and end timestamps at `prev_end_timestamp` (the previous
    /// file's end values), each only when `> 0`. The geometry needs at least 2 entries (entry 0 is
    /// never used, so a 1-entry file is always full).
    pub fn new(
        geometry: IndexGeometry,
        prev_end_phy_offset: i64,
        prev_end_timestamp: i64,
    ) -> Result<Self, ErrorKind> {
        geometry.validate()?;
        if geometry.entries < 2 {
            return Err(ErrorKind::Invalid {
                what: "index geometry",
                detail: format!("{geometry}: a writable file needs at least 2 entries"),
            });
        }
        let mut header = IndexHeader::default();
        if prev_end_phy_offset > 0 {
            header.begin_phy_offset = prev_end_phy_offset;
            header.end_phy_offset = prev_end_phy_offset;
        }
        if prev_end_timestamp > 0 {
            header.begin_timestamp = prev_end_timestamp;
            header.end_timestamp = prev_end_timestamp;
        }
        Ok(IndexFileBuilder {
            geometry,
            header,
            empty_index_count: 0,
            slots: vec![0; geometry.slots as usize],
            drained: 0,
            entries: Vec::new(),
        })
    }

    /// Continue an existing file (as `IndexService.load` then `putKey` would): copies its header,
    /// slot table and entries `1..indexCount`. Fails when indexCount exceeds the geometry.
    pub fn from_file<B: AsRef<[u8]>>(
        file: &IndexFile<B>,
    ) -> Result<Self, crate::format::ParseError> {
        let geometry = file.geometry();
        let mut b = IndexFileBuilder::new(geometry, 0, 0)
            .map_err(|k| crate::format::ParseError::new(0, k))?;
        b.header = *file.header();
        let count = file.header().effective_index_count();
        if count as u32 > geometry.entries {
            return Err(crate::format::ParseError::new(
                super::header_pos::INDEX_COUNT as u64,
                ErrorKind::Unexpected {
                    what: "indexCount",
                    expected: format!("at most {} for {geometry}", geometry.entries),
                    found: count.to_string(),
                },
            ));
        }
        if count <= 1 {
            b.empty_index_count = file.header().index_count;
        }
        for (i, s) in b.slots.iter_mut().enumerate() {
            *s = file.slot(i as u32)?;
        }
        b.entries.reserve(count as usize - 1);
        for e in file.entries() {
            b.entries.push(e?.1);
        }
        b.sync_count();
        Ok(b)
    }

    pub fn geometry(&self) -> IndexGeometry {
        self.geometry
    }

    /// The header as it would be written now.
    pub fn header(&self) -> IndexHeader {
        let mut h = self.header;
        h.index_count = self.disk_index_count();
        h
    }

    /// Entries held (entry numbers `drained + 1..`; all of them when nothing was drained).
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    pub fn slots(&self) -> &[i32] {
        &self.slots
    }

    /// In-memory indexCount: the next entry number.
    fn count(&self) -> i32 {
        (self.written() as i32).saturating_add(1)
    }

    fn disk_index_count(&self) -> i32 {
        if self.written() == 0 {
            self.empty_index_count
        } else {
            self.count()
        }
    }

    fn sync_count(&mut self) {
        self.header.index_count = self.count();
    }

    /// `IndexFile.isWriteFull`: `indexCount >= indexNum`.
    pub fn is_full(&self) -> bool {
        self.count() as i64 >= self.geometry.entries as i64
    }

    /// `IndexFile.putKey(key, phyOffset, storeTimestamp)` for a built key (`topic#key`).
    /// Returns false, changing nothing, when the file is full.
    pub fn put_key(&mut self, built_key: &str, phy_offset: i64, store_timestamp: i64) -> bool {
        self.put_hash(index_key_hash(built_key), phy_offset, store_timestamp)
    }

    /// See [`Indexer::prefetch`].
    pub fn prefetch_slot(&self, hash: i32) {
        crate::format::mapped::prefetch(&self.slots, slot_of(hash, self.geometry.slots) as usize);
    }

    /// [`IndexFileBuilder::put_key`] for a key whose [`index_key_hash`] is `hash`.
    pub fn put_hash(&mut self, hash: i32, phy_offset: i64, store_timestamp: i64) -> bool {
        if self.is_full() {
            return false;
        }
        let count = self.count();
        let slot = slot_of(hash, self.geometry.slots) as usize;
        let Some(slot_ref) = self.slots.get_mut(slot) else {
            return false;
        };
        let mut slot_value = *slot_ref;
        if slot_value <= INVALID_INDEX || slot_value > count {
            slot_value = INVALID_INDEX;
        }
        let begin = self.header.begin_timestamp;
        let time_diff = if begin <= 0 {
            0
        } else {
            let d = store_timestamp.wrapping_sub(begin) / 1000;
            d.clamp(0, i32::MAX as i64) as i32
        };
        *slot_ref = count;
        self.entries.push(IndexEntry {
            key_hash: hash,
            phy_offset,
            time_diff,
            prev: slot_value,
        });
        if count <= 1 {
            self.header.begin_phy_offset = phy_offset;
            self.header.begin_timestamp = store_timestamp;
        }
        if slot_value == INVALID_INDEX {
            self.header.hash_slot_count = self.header.hash_slot_count.wrapping_add(1);
        }
        self.sync_count();
        self.header.end_phy_offset = phy_offset;
        self.header.end_timestamp = store_timestamp;
        true
    }

    /// Write header, slot table and the entries in use (entry 0 included) to `w`; the zero tail is
    /// not written. Returns the bytes written. A builder that drained entries has not got them
    /// all: that is an error here ([`IndexFileBuilder::write_to`] completes such a file).
    pub fn write_used<W: Write>(&self, w: &mut W) -> std::io::Result<u64> {
        if self.drained > 0 {
            return Err(std::io::Error::other(
                "index entries were drained to the file: write_to completes it",
            ));
        }
        self.write_head(w)?;
        w.write_all(&[0u8; INDEX_SIZE])?;
        write_entries(w, &self.entries)?;
        Ok(self.used_len())
    }

    /// Header and slot table.
    fn write_head<W: Write>(&self, w: &mut W) -> std::io::Result<()> {
        w.write_all(&self.header().to_bytes())?;
        let mut chunk = Vec::with_capacity(64 * 1024);
        for s in &self.slots {
            chunk.extend_from_slice(&s.to_be_bytes());
            if chunk.len() >= 64 * 1024 {
                w.write_all(&chunk)?;
                chunk.clear();
            }
        }
        w.write_all(&chunk)
    }

    /// Bytes up to the end of the last entry in use.
    pub fn used_len(&self) -> u64 {
        self.geometry.entry_pos(self.written() + 1)
    }

    /// Entries put so far, drained or held.
    fn written(&self) -> u32 {
        self.drained + self.entries.len() as u32
    }

    /// Write the entries held to `path` (created if missing) where they belong and forget them:
    /// memory stays the slot table however many entries are put. [`IndexFileBuilder::write_to`]
    /// on the same path completes the file. Puts go on as before: they only read the slot table
    /// and the header.
    pub fn drain_to(&mut self, path: &Path) -> Result<(), Error> {
        use std::io::{Seek, SeekFrom};
        if self.entries.is_empty() {
            return Ok(());
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        file.seek(SeekFrom::Start(self.geometry.entry_pos(self.drained + 1)))
            .map_err(|e| Error::io(path, e))?;
        let mut w = BufWriter::new(file);
        write_entries(&mut w, &self.entries)
            .and_then(|_| w.flush())
            .map_err(|e| Error::io(path, e))?;
        self.drained = self.written();
        self.entries = Vec::new();
        Ok(())
    }

    /// The whole file, zero tail included (`geometry.file_size()` bytes; 420 MB with the
    /// broker's defaults, prefer [`IndexFileBuilder::write_to`] there).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.geometry.file_size() as usize);
        // Writing to a Vec cannot fail.
        let _ = self.write_used(&mut v);
        v.resize(self.geometry.file_size() as usize, 0);
        v
    }

    /// Create (or truncate) `path`, write the used part and extend it to the full size with
    /// `set_len`, which leaves the tail as zeros (sparse where the filesystem allows).
    /// After [`IndexFileBuilder::drain_to`] the file is completed instead: header, slot table
    /// and the entries held since.
    pub fn write_to(&self, path: &Path) -> Result<(), Error> {
        let mut w = if self.drained == 0 {
            let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
            let mut w = BufWriter::new(file);
            self.write_used(&mut w).map_err(|e| Error::io(path, e))?;
            w
        } else {
            use std::io::{Seek, SeekFrom};
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            let mut w = BufWriter::new(file);
            self.write_head(&mut w)
                .and_then(|_| w.seek(SeekFrom::Start(self.geometry.entry_pos(self.drained + 1))))
                .and_then(|_| write_entries(&mut w, &self.entries))
                .map_err(|e| Error::io(path, e))?;
            w
        };
        w.flush().map_err(|e| Error::io(path, e))?;
        let file = w
            .into_inner()
            .map_err(|e| Error::io(path, e.into_error()))?;
        file.set_len(self.geometry.file_size())
            .map_err(|e| Error::io(path, e))?;
        file.sync_all().map_err(|e| Error::io(path, e))
    }
}

/// Entries in their on-disk form, one after another.
fn write_entries<W: Write>(w: &mut W, entries: &[IndexEntry]) -> std::io::Result<()> {
    let mut chunk = Vec::with_capacity(64 * 1024);
    for e in entries {
        chunk.extend_from_slice(&e.to_bytes());
        if chunk.len() >= 64 * 1024 {
            w.write_all(&chunk)?;
            chunk.clear();
        }
    }
    w.write_all(&chunk)
}

/// What the indexer needs of one commitlog record (`DispatchRequest` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexRecord<'a> {
    /// The stored topic (`SCHEDULE_TOPIC_XXXX` for a delayed message still waiting).
    pub topic: &'a str,
    /// The `UNIQ_KEY` property, if present (an empty value is indexed, as in Java).
    pub uniq_key: Option<&'a str>,
    /// The `KEYS` property, if present: keys separated by single spaces.
    pub keys: Option<&'a str>,
    pub phy_offset: i64,
    pub store_timestamp: i64,
    /// Transaction type ROLLBACK (`sysFlag & 0xC == 0xC`): not indexed.
    pub is_rollback: bool,
}

impl IndexRecord<'_> {
    /// `MessageSysFlag.getTransactionValue(sysFlag) == TRANSACTION_ROLLBACK_TYPE`.
    pub fn is_rollback_sys_flag(sys_flag: i32) -> bool {
        sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE
    }

    /// Append the [`index_key_hash`] of each key this record is indexed under, in order:
    /// `topic#UNIQ_KEY`, then `topic#k` for each non-empty KEYS element. Each is the hash of
    /// `topic#` continued over the key (Java's hash is a running sum), no key string built.
    pub fn key_hashes(&self, out: &mut Vec<i32>) {
        let prefix = string_hash(self.topic)
            .wrapping_mul(31)
            .wrapping_add(TOPIC_KEY_SEPARATOR as i32);
        let hash_of = |key: &str| abs_hash(string_hash_extend(prefix, key));
        out.extend(self.uniq_key.map(hash_of));
        if let Some(keys) = self.keys {
            out.extend(
                keys.split(KEY_SEPARATOR)
                    .filter(|k| !k.is_empty())
                    .map(hash_of),
            );
        }
    }

    /// What the indexer needs besides the key hashes.
    pub fn hashed(&self) -> HashedRecord {
        HashedRecord {
            phy_offset: self.phy_offset,
            store_timestamp: self.store_timestamp,
            is_rollback: self.is_rollback,
        }
    }
}

/// A record for [`Indexer::add_hashed`]: its keys are given as hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashedRecord {
    pub phy_offset: i64,
    pub store_timestamp: i64,
    pub is_rollback: bool,
}

/// What [`Indexer::add`] did with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// This many entries were written (possibly spread over two files).
    Indexed(usize),
    /// The offset is below the current file's endPhyOffset: already indexed.
    SkippedAlreadyIndexed,
    /// Transaction type ROLLBACK.
    SkippedRollback,
    /// Neither UNIQ_KEY nor a non-empty KEYS element.
    SkippedNoKeys,
}

/// Facts available when the broker creates a new index file and names it
/// (`getAndCreateLastIndexFile` uses the wall clock: `timeMillisToHumanString(now)`).
#[derive(Debug, Clone, Copy)]
pub struct NewFileContext<'a> {
    /// 0 for the first file this indexer creates.
    pub sequence: usize,
    /// The record being indexed when the file was created.
    pub trigger_phy_offset: i64,
    pub trigger_store_timestamp: i64,
    /// The file being replaced, if any.
    pub prev_name: Option<&'a str>,
    pub prev_end_phy_offset: i64,
    pub prev_end_timestamp: i64,
}

/// A name for a new file from the data alone: the store time of the record that caused it, in
/// local time, moved 1 ms past the previous file's name when needed so names stay unique and
/// sorted. The broker used the wall clock, a little after the store time.
pub fn name_by_store_time(ctx: &NewFileContext<'_>) -> String {
    let prev = ctx.prev_name.and_then(parse_file_name);
    let mut t = ctx.trigger_store_timestamp;
    if format_file_name(t).is_none() {
        // A store time no name can hold (a damaged header): go on from the previous name, so a
        // far-future time does not take the last name and make the files after it collide.
        t = prev.map_or(0, |p| p.saturating_add(1));
    }
    if let Some(prev) = prev {
        if t <= prev {
            t = prev.saturating_add(1);
        }
    }
    format_file_name(t).unwrap_or_else(|| format!("{:017}", t.clamp(0, 99_999_999_999_999_999)))
}

/// A finished or current file with its name.
#[derive(Debug, Clone)]
pub struct NamedIndexFile {
    pub name: String,
    pub file: IndexFileBuilder,
}

/// `IndexService.buildIndex` over a sequence of files: feed records in commitlog order with
/// [`Indexer::add`]; full files are replaced by new ones named by `name_fn`.
pub struct Indexer<F> {
    geometry: IndexGeometry,
    name_fn: F,
    current: Option<NamedIndexFile>,
    finished: Vec<NamedIndexFile>,
    created: usize,
}

impl<F> Indexer<F>
where
    F: FnMut(&NewFileContext<'_>) -> String,
{
    /// An indexer with no files yet (an empty `index/` directory).
    pub fn new(geometry: IndexGeometry, name_fn: F) -> Result<Self, ErrorKind> {
        IndexFileBuilder::new(geometry, 0, 0)?;
        Ok(Indexer {
            geometry,
            name_fn,
            current: None,
            finished: Vec::new(),
            created: 0,
        })
    }

    /// An indexer continuing after loaded files, `last` being the newest one: records go into it
    /// until it is full (records below its endPhyOffset are skipped).
    pub fn resume(name_fn: F, last: NamedIndexFile) -> Self {
        Indexer {
            geometry: last.file.geometry(),
            name_fn,
            current: Some(last),
            finished: Vec::new(),
            created: 0,
        }
    }

    /// The file records currently go into.
    pub fn current(&self) -> Option<&NamedIndexFile> {
        self.current.as_ref()
    }

    /// The same, to drain its entries ([`IndexFileBuilder::drain_to`]).
    pub fn current_mut(&mut self) -> Option<&mut NamedIndexFile> {
        self.current.as_mut()
    }

    /// Files replaced so far (full), oldest first, handed over once.
    pub fn take_finished(&mut self) -> Vec<NamedIndexFile> {
        std::mem::take(&mut self.finished)
    }

    /// All remaining files, oldest first, the current one last.
    pub fn finish(mut self) -> Vec<NamedIndexFile> {
        let mut out = std::mem::take(&mut self.finished);
        out.extend(self.current.take());
        out
    }

    /// `getAndCreateLastIndexFile`: the current file, or a new one when there is none or it is
    /// full (the full one moves to the finished list). `None` only if a new file cannot be made,
    /// which the geometry check in [`Indexer::new`] rules out.
    fn current_or_new(&mut self, rec: &HashedRecord) -> Option<&mut NamedIndexFile> {
        let need_new = self.current.as_ref().is_none_or(|c| c.file.is_full());
        if need_new {
            let (prev_phy, prev_ts) = self.current.as_ref().map_or((0, 0), |p| {
                let h = p.file.header();
                (h.end_phy_offset, h.end_timestamp)
            });
            let file = IndexFileBuilder::new(self.geometry, prev_phy, prev_ts).ok()?;
            let ctx = NewFileContext {
                sequence: self.created,
                trigger_phy_offset: rec.phy_offset,
                trigger_store_timestamp: rec.store_timestamp,
                prev_name: self.current.as_ref().map(|p| p.name.as_str()),
                prev_end_phy_offset: prev_phy,
                prev_end_timestamp: prev_ts,
            };
            let name = (self.name_fn)(&ctx);
            self.created += 1;
            self.finished.extend(self.current.take());
            self.current = Some(NamedIndexFile { name, file });
        }
        self.current.as_mut()
    }

    /// `IndexService.putKey`: put, and on a full file roll to a new one and put there.
    fn put(&mut self, rec: &HashedRecord, hash: i32) -> bool {
        for _ in 0..2 {
            match self.current_or_new(rec) {
                Some(cur) => {
                    if cur.file.put_hash(hash, rec.phy_offset, rec.store_timestamp) {
                        return true;
                    }
                }
                None => return false,
            }
        }
        false
    }

    /// Index one record the way `IndexService.buildIndex` does: (create a file if needed,) skip
    /// it when its offset is below the current file's endPhyOffset or it is a ROLLBACK, then put
    /// `topic#UNIQ_KEY` and `topic#k` for each non-empty space-separated KEYS element, in order.
    pub fn add(&mut self, rec: &IndexRecord<'_>) -> AddOutcome {
        let mut hashes = Vec::with_capacity(4);
        rec.key_hashes(&mut hashes);
        self.add_hashed(&rec.hashed(), &hashes)
    }

    /// [`Indexer::add`] for a record whose keys are hashed already ([`IndexRecord::key_hashes`]).
    pub fn add_hashed(&mut self, rec: &HashedRecord, hashes: &[i32]) -> AddOutcome {
        let end_phy_offset = match self.current_or_new(rec) {
            Some(cur) => cur.file.header().end_phy_offset,
            None => i64::MAX,
        };
        if rec.phy_offset < end_phy_offset {
            return AddOutcome::SkippedAlreadyIndexed;
        }
        if rec.is_rollback {
            return AddOutcome::SkippedRollback;
        }
        let mut n = 0;
        for &hash in hashes {
            if self.put(rec, hash) {
                n += 1;
            }
        }
        if n == 0 {
            AddOutcome::SkippedNoKeys
        } else {
            AddOutcome::Indexed(n)
        }
    }

    /// Ask for the slot `hash` goes to in the current file to be in the cache by the time it is
    /// put (slots are read in random order: a miss each, without this).
    pub fn prefetch(&self, hash: i32) {
        if let Some(cur) = &self.current {
            cur.file.prefetch_slot(hash);
        }
    }
}
