//! Index files for a store as a whole: building them while records are dispatched, and
//! inferring the slot and entry counts from existing files.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use crate::engine::store::dispatch::DispatchProps;
use crate::format::commitlog::MessageRef;
use crate::format::error::{Error, Result};
use crate::format::geometry::Geometry;
use crate::format::indexfile::infer::{infer_geometry, InferResult};
use crate::format::indexfile::write::{
    name_by_store_time, AddOutcome, HashedRecord, IndexRecord, Indexer, NamedIndexFile,
    NewFileContext,
};
use crate::format::indexfile::{format_file_name_in, parse_file_name_in, IndexGeometry};
use crate::format::mapped::Mapped;

type NameFn = fn(&NewFileContext<'_>) -> String;

/// How new index files are named: by the store time of the record that opens them, in the local
/// time zone as the broker does, or in UTC so that generated stores do not depend on the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexNaming {
    Local,
    Utc,
}

fn name_by_store_time_utc(ctx: &NewFileContext<'_>) -> String {
    let mut t = ctx.trigger_store_timestamp;
    if let Some(prev) = ctx
        .prev_name
        .and_then(|n| parse_file_name_in(n, &chrono::Utc))
    {
        t = t.max(prev.saturating_add(1));
    }
    format_file_name_in(t, &chrono::Utc).unwrap_or_else(|| format!("{:017}", t.max(0)))
}

/// Entries an index file being built holds before they are written to it: memory stays the slot
/// table and this many entries, however many the file gets.
const DRAIN_AT: usize = 1 << 16;

/// Builds the index files of a store as the broker's `IndexService.buildIndex` does, writing
/// each file to `dir` when it is full (its entries go out as they gather). Files are named by the store time of the record that
/// opened them (the broker uses its wall clock then), so the output is reproducible.
pub struct IndexBuilder {
    dir: PathBuf,
    indexer: Indexer<NameFn>,
    /// endTimestamp of the last full file written: the checkpoint's indexMsgTimestamp.
    last_full_end: i64,
    /// Entries the current file holds before they are written out ([`DRAIN_AT`]).
    drain_at: usize,
}

impl IndexBuilder {
    pub fn new(dir: PathBuf, g: &Geometry, naming: IndexNaming) -> Result<Self> {
        let geometry = IndexGeometry {
            slots: g.index_slots.value,
            entries: g.index_entries.value,
        };
        let name_fn: NameFn = match naming {
            IndexNaming::Local => name_by_store_time,
            IndexNaming::Utc => name_by_store_time_utc,
        };
        let indexer = Indexer::new(geometry, name_fn).map_err(|kind| Error::data(&dir, 0, kind))?;
        Ok(IndexBuilder {
            dir,
            indexer,
            last_full_end: 0,
            drain_at: DRAIN_AT,
        })
    }

    /// Index one record (UNIQ_KEY, then KEYS; ROLLBACK and already-indexed records skipped).
    pub fn add(&mut self, m: &MessageRef<'_>) -> Result<AddOutcome> {
        let (uniq, keys) = uniq_key_and_keys(&DispatchProps::of(m));
        self.add_record(&index_record(m, uniq.as_deref(), keys.as_deref()))
    }

    /// Index what the indexer needs of one record.
    pub fn add_record(&mut self, rec: &IndexRecord<'_>) -> Result<AddOutcome> {
        let outcome = self.indexer.add(rec);
        self.write_out()?;
        Ok(outcome)
    }

    /// Index a record whose keys are hashed already ([`IndexRecord::key_hashes`]).
    pub fn add_hashed(&mut self, rec: &HashedRecord, hashes: &[i32]) -> Result<AddOutcome> {
        let outcome = self.indexer.add_hashed(rec, hashes);
        self.write_out()?;
        Ok(outcome)
    }

    /// See [`Indexer::prefetch`].
    pub fn prefetch(&self, hash: i32) {
        self.indexer.prefetch(hash);
    }

    /// Write the files that are full, and the current file's entries once there are enough.
    fn write_out(&mut self) -> Result<()> {
        for f in self.indexer.take_finished() {
            self.last_full_end = f.file.header().end_timestamp;
            self.write(&f)?;
        }
        if let Some(cur) = self.indexer.current_mut() {
            if cur.file.entries().len() >= self.drain_at {
                std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
                cur.file.drain_to(&self.dir.join(&cur.name))?;
            }
        }
        Ok(())
    }

    fn write(&self, f: &NamedIndexFile) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        f.file.write_to(&self.dir.join(&f.name))
    }

    /// Write the remaining files; returns the checkpoint's indexMsgTimestamp.
    pub fn finish(mut self) -> Result<i64> {
        let rest = std::mem::replace(
            &mut self.indexer,
            Indexer::new(
                IndexGeometry {
                    slots: 1,
                    entries: 2,
                },
                name_by_store_time as NameFn,
            )
            .map_err(|kind| Error::data(&self.dir, 0, kind))?,
        )
        .finish();
        for f in &rest {
            self.write(f)?;
        }
        Ok(self.last_full_end)
    }
}

/// The UNIQ_KEY and KEYS values of a record, from its properties found in one pass.
pub fn uniq_key_and_keys<'a>(
    p: &DispatchProps<'a>,
) -> (Option<Cow<'a, str>>, Option<Cow<'a, str>>) {
    (
        p.uniq_key.map(crate::format::commitlog::text),
        p.keys.map(crate::format::commitlog::text),
    )
}

/// What the indexer needs of `m`, given its [`uniq_key_and_keys`].
pub fn index_record<'a>(
    m: &'a MessageRef<'_>,
    uniq_key: Option<&'a str>,
    keys: Option<&'a str>,
) -> IndexRecord<'a> {
    IndexRecord {
        topic: &m.topic,
        uniq_key,
        keys,
        phy_offset: m.physical_offset,
        store_timestamp: m.store_timestamp,
        is_rollback: IndexRecord::is_rollback_sys_flag(m.sys_flag),
    }
}

/// Slots and entries inferred from the first index file whose contents fix them.
pub fn infer_index_geometry(files: &[PathBuf]) -> Option<(u32, u32)> {
    files.iter().rev().find_map(|p| infer_one(p))
}

fn infer_one(p: &Path) -> Option<(u32, u32)> {
    let m = Mapped::open(p).ok()?;
    // A broker-default-size file is checked against the default geometry on a sample of its
    // slots first: reading all 420 MB to rule out the other candidates takes a second.
    let default = IndexGeometry::DEFAULT;
    if m.len() as u64 == default.file_size() && sampled_fit(&m, default) {
        return Some((default.slots, default.entries));
    }
    match infer_geometry(&m).result {
        InferResult::Unique(g) => Some((g.slots, g.entries)),
        _ => None,
    }
}

/// Does `g` fit on a sample of the slot table? Each sampled non-empty slot must name an entry
/// below indexCount whose hash falls in that slot and whose previous pointer goes backwards.
/// Needs at least 16 non-empty sampled slots to say yes: 64 slots are sampled first, then 4096,
/// then every slot (a sparsely used index has few non-empty slots; reading its slot table is
/// still far less than reading the whole file).
fn sampled_fit(b: &[u8], g: IndexGeometry) -> bool {
    use crate::format::bytes::i32_at;
    let Some(count) = i32_at(b, 36) else {
        return false;
    };
    if count <= 1 || count as u64 > g.entries as u64 {
        return false;
    }
    let slots = g.slots as usize;
    for samples in [64, 4096, slots] {
        let step = (slots / samples.max(1)).max(1);
        let mut seen = 0;
        for i in (0..slots).step_by(step) {
            let Some(v) = i32_at(b, 40 + 4 * i) else {
                return false;
            };
            if v == 0 {
                continue;
            }
            if !(1..count).contains(&v) {
                return false;
            }
            let e = 40 + 4 * slots + 20 * v as usize;
            let (Some(h), Some(prev)) = (i32_at(b, e), i32_at(b, e + 16)) else {
                return false;
            };
            if h < 0 || h as usize % slots != i || !(0..v).contains(&prev) {
                return false;
            }
            seen += 1;
        }
        if seen >= 16 {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Index files written as entries gather are the files written whole at the end.
    #[test]
    fn draining_entries_writes_the_same_files() {
        let g = Geometry {
            index_slots: crate::format::geometry::Sourced::new(
                7,
                crate::format::geometry::Source::Flag,
            ),
            index_entries: crate::format::geometry::Sourced::new(
                40,
                crate::format::geometry::Source::Flag,
            ),
            ..Geometry::default()
        };
        let dirs = tempfile::tempdir().unwrap();
        let build = |name: &str, drain_at: usize| {
            let dir = dirs.path().join(name);
            let mut b = IndexBuilder::new(dir.clone(), &g, IndexNaming::Utc).unwrap();
            b.drain_at = drain_at;
            for i in 0..100i64 {
                let (u, k) = (format!("U{i}"), format!("k{} k{}", i % 9, i % 4));
                b.add_record(&IndexRecord {
                    topic: if i % 3 == 0 { "A" } else { "B" },
                    uniq_key: Some(&u),
                    keys: (i % 5 != 0).then_some(k.as_str()),
                    phy_offset: 100 * i,
                    store_timestamp: 1_700_000_000_000 + 1500 * i,
                    is_rollback: i % 17 == 0,
                })
                .unwrap();
            }
            b.finish().unwrap();
            let mut files: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            files
                .iter()
                .map(|p| (p.file_name().unwrap().to_owned(), std::fs::read(p).unwrap()))
                .collect::<Vec<_>>()
        };
        let whole = build("whole", usize::MAX);
        assert!(whole.len() >= 5, "{} files", whole.len());
        for drain_at in [1, 3, 39] {
            assert!(
                build(&format!("drained-{drain_at}"), drain_at) == whole,
                "{drain_at}"
            );
        }
    }

    /// A broker-default-size index file holding `n` entries, put in as the broker does.
    fn default_file(n: i32) -> Vec<u8> {
        let g = IndexGeometry::DEFAULT;
        let slots = g.slots as usize;
        let mut b = vec![0u8; g.file_size() as usize];
        b[36..40].copy_from_slice(&(n + 1).to_be_bytes());
        for k in 1..=n {
            let hash = k.wrapping_mul(2_654_435).wrapping_abs();
            let slot = 40 + 4 * (hash as usize % slots);
            let prev = i32::from_be_bytes(b[slot..slot + 4].try_into().unwrap());
            let e = 40 + 4 * slots + 20 * k as usize;
            b[e..e + 4].copy_from_slice(&hash.to_be_bytes());
            b[e + 4..e + 12].copy_from_slice(&(i64::from(k) * 100).to_be_bytes());
            b[e + 16..e + 20].copy_from_slice(&prev.to_be_bytes());
            b[slot..slot + 4].copy_from_slice(&k.to_be_bytes());
        }
        b
    }

    #[test]
    fn a_sparsely_used_default_file_fits_on_its_slot_table() {
        // 200 entries in 5,000,000 slots: no sample of 64 or 4096 slots meets 16 used ones,
        // the whole slot table does.
        let mut b = default_file(200);
        assert!(sampled_fit(&b, IndexGeometry::DEFAULT));
        // A slot naming an entry of another slot is caught.
        let g = IndexGeometry::DEFAULT;
        let slot = (40..40 + 4 * g.slots as usize)
            .step_by(4)
            .find(|&p| b[p..p + 4] != [0; 4])
            .unwrap();
        let other = if b[slot..slot + 4] == 1i32.to_be_bytes() {
            2i32
        } else {
            1
        };
        b[slot..slot + 4].copy_from_slice(&other.to_be_bytes());
        assert!(!sampled_fit(&b, IndexGeometry::DEFAULT));
        // Too few entries to say.
        assert!(!sampled_fit(&default_file(10), IndexGeometry::DEFAULT));
    }
}
