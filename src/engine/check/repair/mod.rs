//! Repair: make a damaged store one that `verify` passes and a broker starts on, keeping every
//! byte.
//!
//! [`plan`] reads the store and decides, writing nothing: it runs `verify` and takes its
//! judgement as it is (the walks of the commitlog files, the damaged headers, the entries that
//! are not files), so repair plans from exactly what verify reports. [`apply`] carries a plan out
//! into a new folder (the stage): unchanged files no broker writes again (full commitlog files,
//! older index files) are hard-linked, the ones a broker writes in place copied, changed ones
//! written anew, and every byte that does not reach the stage is saved under `repair-<time>/removed/` and
//! listed in `repair-<time>/manifest.json`. Records that still validate past the cut are
//! salvaged to `repair-<time>/salvaged/` (a store) and `repair-<time>/salvaged.jsonl`. The same
//! stage serves `--out` (it is the output) and `--in-place` (it is switched in by one atomic
//! exchange of folders).
//!
//! Damage between intact records (a body that fails its CRC, a zeroed page, garbage) is bridged
//! in place ([`bridge`]): tombstones where the store proves a destroyed record, fillers for the
//! rest, so every intact record keeps its commitlog and queue offsets and stays in service; each
//! record that leaves service is named in the output and the manifest. The commitlog is cut only
//! where the chain cannot be bridged (a torn tail, a missing or misnamed file, a header nothing
//! can mend, data ending before the last file), or at the first damage with [`Mode::Cut`].
//! Header fields the store proves (see [`crate::engine::check::headers`]) are mended in place,
//! keeping the record. Bytes after the end of the data are zeroed (saved first).
//! The 5.x timer files are repaired by [`timer`]: the timer log cut after its last valid unit,
//! the wheel rebuilt from it, `config/timercheck` derived from both.

mod bridge;
mod dledger;
mod dropped;
mod plan;
mod stage;
mod timer;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::engine::check::rebuild::{Patch, RebuildOptions};
use crate::engine::check::verify::Report;
use crate::engine::store::dispatch::record_tags_code;
use crate::engine::store::Store;
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{next_magic, parse_record, Record};
use crate::format::entry::Entry;
use crate::format::error::Result;
use crate::format::geometry::{GeometryInputs, GeometryOverrides};

pub use crate::engine::store::safedir::STAGE_MARKER;
pub use bridge::{Bridge, LostRecord, FILLER, FILLER_TOPIC, TOMBSTONE};
pub use dledger::DledgerRepair;
pub use dropped::CUT;
pub use plan::{plan, plan_mode, plan_with};
pub use stage::apply;

/// How repair treats a damaged range between intact records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Replace it in place by tombstones and fillers: every intact record stays in service at
    /// its own offsets.
    #[default]
    Bridge,
    /// Cut the commitlog there as the broker's recovery would, and salvage the records after it.
    Cut,
}

/// One step of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct Action {
    pub problem: String,
    pub action: String,
    /// Messages affected (dropped from the store, salvaged, re-pointed...).
    pub messages: u64,
    /// Bytes moved out of the store into the repair folder.
    pub bytes: u64,
}

/// Where the kept commitlog ends.
#[derive(Debug, Clone, Serialize)]
pub struct Cut {
    /// The file the cut is in (relative to the store root).
    pub file: String,
    /// Position in that file.
    pub position: u64,
    /// Commitlog offset where service ends: `position` in `file`, or, for a cut at the start of a
    /// file named out of sequence, the end of the file before it.
    pub offset: u64,
    pub reason: String,
}

/// A header field mended in place.
#[derive(Debug, Clone, Serialize)]
pub struct HeaderRepair {
    /// The commitlog file (relative) and the position of the field's bytes in it.
    pub file: String,
    pub position: u64,
    /// Commitlog offset of the record.
    pub record: u64,
    pub field: &'static str,
    pub was: String,
    pub now: String,
    pub evidence: String,
    /// The field's bytes before and after, in hex.
    pub old_bytes: String,
    pub new_bytes: String,
}

/// A byte range that left the store, and where it was saved.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    /// Path relative to the store root.
    pub file: String,
    pub offset: u64,
    pub length: u64,
    /// Path relative to the repair folder; `None` when the range held only zeros (nothing to
    /// keep) or the entry has no bytes (a FIFO, a folder).
    pub saved_as: Option<String>,
    /// Where the range starts in `saved_as`: 0 for a file saved whole, `offset` for a range of a
    /// rewritten commitlog file (saved whole, as it was, and named by each of its ranges).
    pub saved_offset: u64,
    pub why: String,
}

/// The repair folder's `manifest.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub store: String,
    pub created: String,
    pub cut: Option<Cut>,
    /// Damaged ranges replaced in place, and the records they held.
    pub bridges: Vec<Bridge>,
    /// Messages that left service at the cut, their records gone (the consume queues' units
    /// name them; the salvaged ones are in `salvaged.jsonl`).
    pub cut_lost: Vec<LostRecord>,
    pub actions: Vec<Action>,
    pub headers: Vec<HeaderRepair>,
    pub removed: Vec<Removed>,
    pub salvaged_records: u64,
    pub salvaged_bytes: u64,
    /// Messages of the repaired store's commitlog.
    pub messages_kept: u64,
    pub checkpoint: Option<Checkpoint>,
    /// A DLedger-mode store: what became of its log (the replica is caught up from the group's
    /// leader when it was cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dledger: Option<DledgerRepair>,
}

/// The bytes a repair moved to its repair folder, told apart.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RemovedBytes {
    /// Commitlog data: records, damaged bytes, non-zero bytes after the data.
    pub data: u64,
    /// The rest: whole files saved as they were (consume queue and index files the rebuild
    /// replaced, config), at their full preallocated sizes, and the unused space of commitlog
    /// files saved whole.
    pub files: u64,
}

impl Manifest {
    /// [`RemovedBytes`] of this repair: for a commitlog file saved whole, its data is what its
    /// walk in `report` found.
    pub fn removed_bytes(&self, report: &Report) -> RemovedBytes {
        let mut r = RemovedBytes::default();
        for x in self.removed.iter().filter(|x| x.saved_as.is_some()) {
            let walk = report
                .walks
                .iter()
                .flatten()
                .find(|w| w.path.ends_with(&x.file));
            match walk {
                Some(w)
                    if x.offset == 0 && x.length == w.len && x.file.starts_with("commitlog") =>
                {
                    let data = match w.end {
                        crate::engine::check::recovery::StopReason::Blank => w.end_pos + 8,
                        _ => w.end_pos,
                    }
                    .max(w.stop_pos)
                    .min(w.len);
                    r.data += data;
                    r.files += x.length - data;
                }
                Some(_) => r.data += x.length,
                None => r.files += x.length,
            }
        }
        r
    }
}

/// What happens to one commitlog file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fate {
    /// Linked unchanged.
    Keep,
    /// Written anew: bytes `0..keep`, zeros to the file size, patches over it; what lies at
    /// `keep..` and is not zero is saved.
    Rewrite { keep: u64 },
    /// Moved whole to the repair folder.
    Out,
}

/// A config file to write, and the action that says why.
#[derive(Debug, Clone)]
struct ConfigWrite {
    name: &'static str,
    /// The new file (fastjson text, or the binary timer checkpoint).
    bytes: Vec<u8>,
}

/// Everything a repair would do, worked out without writing anything.
pub struct Plan {
    pub report: Report,
    pub cut: Option<Cut>,
    /// Damaged ranges replaced in place by tombstones and fillers.
    pub bridges: Vec<Bridge>,
    /// Messages the consume queues hold past the kept commitlog that salvage does not keep.
    pub cut_lost: Vec<LostRecord>,
    pub headers: Vec<HeaderRepair>,
    pub actions: Vec<Action>,
    /// Records found after the cut that validate, and their bytes (what salvage keeps).
    pub salvage_records: u64,
    pub salvage_bytes: u64,
    /// Messages the repaired commitlog keeps.
    pub messages_kept: u64,
    /// A DLedger-mode store: what becomes of its log.
    pub dledger: Option<DledgerRepair>,
    fates: Vec<Fate>,
    /// Per commitlog file: (position, bytes) patches of the rewrite.
    file_patches: BTreeMap<usize, Vec<(u64, Vec<u8>)>>,
    patches: Vec<Patch>,
    /// Entries set aside (not regular files, foreign names), relative path and why.
    set_aside: Vec<(Entry, String)>,
    config: Vec<ConfigWrite>,
    /// The timer log and wheel to write, when they change.
    timer: Option<timer::TimerPlan>,
    rebuild: RebuildOptions,
}

impl Plan {
    /// True when the store needs nothing.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

fn rel(store: &Store, p: &Path) -> String {
    p.strip_prefix(&store.root)
        .unwrap_or(p)
        .display()
        .to_string()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The geometry of `store` as explicit values (the staged store is read with the same sizes,
/// and a DLedger log by the same commit rule: the members `dLegerPeers` named).
pub fn fixed_geometry(store: &Store) -> GeometryInputs {
    let g = &store.geometry;
    let peers = store
        .dledger
        .as_ref()
        .filter(|l| !l.other_peers.is_empty())
        .map(|l| {
            std::iter::once(&l.self_id)
                .chain(&l.other_peers)
                .cloned()
                .collect::<Vec<_>>()
                .join(";")
        });
    GeometryInputs {
        flags: GeometryOverrides {
            commitlog_file_size: Some(g.commitlog_file_size.value),
            cq_file_units: Some(g.cq_file_units.value),
            index_slots: Some(g.index_slots.value),
            index_entries: Some(g.index_entries.value),
            delay_levels: Some(g.delay_levels.value.clone()),
            dledger_peers: None,
            dledger_index_file_size: store
                .dledger
                .as_ref()
                .map(|l| l.geometry.index_file_size.value),
        },
        broker_conf: GeometryOverrides {
            dledger_peers: peers,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Call `f` with every record from file `from_seg` position `from_pos` on that validates as a
/// record of its place (a message magic, sizes that add up, PHYSICALOFFSET equal to its position
/// from where the file's first record says the file starts,
/// the body CRC, a DELAY the broker's dispatch reads), in one forward pass; returns (records,
/// bytes). A record the broker would reject stays in the removed bytes only.
fn salvage_scan(
    store: &Store,
    from_seg: usize,
    from_pos: u64,
    mut f: impl FnMut(usize, &crate::format::commitlog::MessageRef<'_>) -> Result<()>,
) -> Result<(u64, u64)> {
    let (mut n, mut bytes) = (0u64, 0u64);
    for i in from_seg..store.commitlog.segments.len() {
        let from = if i == from_seg { from_pos } else { 0 };
        let (a, b) = salvage_file(store, i, from, &mut f)?;
        n += a;
        bytes += b;
    }
    Ok((n, bytes))
}

/// What [`salvage_scan`] would find, (records, bytes), the files read in parallel (no record
/// spans two files, so each is scanned on its own).
fn salvage_count(store: &Store, from_seg: usize, from_pos: u64) -> Result<(u64, u64)> {
    use rayon::prelude::*;
    (from_seg..store.commitlog.segments.len())
        .into_par_iter()
        .map(|i| {
            let from = if i == from_seg { from_pos } else { 0 };
            salvage_file(store, i, from, &mut |_, _| Ok(()))
        })
        .try_reduce(|| (0, 0), |a, b| Ok((a.0 + b.0, a.1 + b.1)))
}

/// [`salvage_scan`] over one file, from `from`.
pub(super) fn salvage_file(
    store: &Store,
    i: usize,
    from: u64,
    f: &mut impl FnMut(usize, &crate::format::commitlog::MessageRef<'_>) -> Result<()>,
) -> Result<(u64, u64)> {
    let (mut n, mut bytes) = (0u64, 0u64);
    let seg = &store.commitlog.segments[i];
    let map = seg.map()?;
    // Where the file's own records say it starts: its name, unless the file was renamed (past a
    // gap in the names, its records keep the offsets they were written at).
    let base = match parse_record(&map, 0, seg.start, false) {
        Ok(Record::Message(m)) if m.physical_offset >= 0 => m.physical_offset,
        _ => seg.start as i64,
    };
    // The record at the cut itself is a candidate too.
    let mut next = Some(from as usize);
    while let Some(start) = next {
        match parse_record(&map, start, seg.start, false) {
            Ok(Record::Message(m))
                if m.physical_offset == base.wrapping_add(start as i64)
                    && (m.body.is_empty() || m.body_crc_ok())
                    && record_tags_code(&m, &store.geometry).is_ok() =>
            {
                f(i, &m)?;
                n += 1;
                bytes += m.raw.len() as u64;
                next = Some(start + m.raw.len());
                continue;
            }
            Ok(Record::EndOfData) => {
                // Zeros (or a hole): go on from the next byte that is not zero.
                next = crate::engine::check::recovery::first_nonzero_from(&map, start, &seg.path)
                    .and_then(|z| next_magic(&map, z.saturating_sub(4).max(start + 1), false));
                continue;
            }
            _ => {}
        }
        next = next_magic(&map, start + 1, false);
    }
    map.release(0, map.len());
    Ok((n, bytes))
}
