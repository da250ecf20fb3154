//! Geometry inference: the header does not record `maxHashSlotNum`/`maxIndexNum`, so find every
//! `(slots, entries)` with `40 + 4*slots + 20*entries == file size` that the file's slot table and
//! chains are consistent with. No ratio between the two is assumed.
//!
//! Two necessary conditions bound the slot count cheaply before any candidate is checked in
//! detail: every slot value is in `[0, indexCount)`, so the slot table cannot extend past the
//! first 4-byte word after the header outside that range; and everything after entry
//! `indexCount - 1` is zero, so the entry area cannot start too early for the last non-zero byte.
//! Only candidates between the two bounds get the full check ([`check_geometry`]).

use super::{
    first_nonzero, last_nonzero, slot_of, IndexEntry, IndexGeometry, IndexHeader, HASH_SLOT_SIZE,
    INDEX_HEADER_SIZE, INDEX_SIZE,
};
use crate::format::bytes::i32_at;
use crate::format::error::{ErrorKind, ParseError};

/// At most this many candidates are listed in [`InferResult::Ambiguous`].
pub const MAX_LISTED: usize = 32;

/// The outcome of [`infer_geometry`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum InferResult {
    /// Exactly one geometry fits.
    Unique(IndexGeometry),
    /// Several fit: `total` of them, the first [`MAX_LISTED`] (smallest slot counts) listed.
    Ambiguous {
        candidates: Vec<IndexGeometry>,
        total: u64,
    },
    /// None fits (a corrupt file, a foreign file, or one that is not an index file).
    None,
}

/// [`InferResult`] with a sentence saying why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Inference {
    pub result: InferResult,
    pub reason: String,
}

fn none(reason: String) -> Inference {
    Inference {
        result: InferResult::None,
        reason,
    }
}

/// Infer the geometry of the index file `bytes`.
pub fn infer_geometry(bytes: &[u8]) -> Inference {
    let len = bytes.len() as u64;
    let header = match IndexHeader::from_bytes(bytes) {
        Ok(h) => h,
        Err(_) => {
            return none(format!(
                "the file has {len} bytes, less than the 40-byte header"
            ))
        }
    };
    if len > i32::MAX as u64 {
        return none(format!(
            "the file has {len} bytes; the broker computes the size as a Java int"
        ));
    }
    let body = len - INDEX_HEADER_SIZE as u64;
    if !body.is_multiple_of(HASH_SLOT_SIZE as u64) {
        return none(format!(
            "size - 40 = {body} is not a multiple of 4, so no 40 + 4*slots + 20*entries equals it"
        ));
    }
    let c = header.index_count;
    if c < 0 {
        return none(format!("indexCount is negative ({c})"));
    }
    // Candidates: slots s >= 1, entries e = (body - 4s) / 20 >= max(1, indexCount).
    // 4s must have the remainder of body modulo 20, i.e. s = body/4 (mod 5).
    let e_min = u64::from(c.max(1) as u32);
    if body < INDEX_SIZE as u64 * e_min + HASH_SLOT_SIZE as u64 {
        return none(format!(
            "{len} bytes leave no room for 1 slot and {e_min} entries (indexCount {c})"
        ));
    }
    let s_max_size = (body - INDEX_SIZE as u64 * e_min) / HASH_SLOT_SIZE as u64;
    let residue = (body / HASH_SLOT_SIZE as u64) % 5;
    let first_s = if residue == 0 { 5 } else { residue };
    let total = if s_max_size >= first_s {
        (s_max_size - first_s) / 5 + 1
    } else {
        0
    };
    if total == 0 {
        return none(format!(
            "no (slots, entries) pair gives {len} bytes with room for indexCount {c}"
        ));
    }
    let geometry_of = |s: u64| {
        IndexGeometry::new(
            s as u32,
            ((body - HASH_SLOT_SIZE as u64 * s) / INDEX_SIZE as u64) as u32,
        )
    };
    let after_header = bytes.get(INDEX_HEADER_SIZE..).unwrap_or(&[]);
    let last_nonzero = last_nonzero(after_header).map(|p| (p + INDEX_HEADER_SIZE) as u64);

    if c <= 1 {
        if let Some(p) = last_nonzero {
            return none(format!(
                "indexCount {c} says no entry was written, but byte {p} after the header is not zero"
            ));
        }
        let candidates: Vec<IndexGeometry> = (0..total.min(MAX_LISTED as u64))
            .map(|i| geometry_of(first_s + 5 * i))
            .collect();
        if total == 1 {
            return Inference {
                result: InferResult::Unique(geometry_of(first_s)),
                reason: format!("the only (slots, entries) pair that gives {len} bytes"),
            };
        }
        let default_note = if len == IndexGeometry::DEFAULT.file_size() {
            "; the broker default (5000000, 20000000) is one of them"
        } else {
            ""
        };
        return Inference {
            result: InferResult::Ambiguous { candidates, total },
            reason: format!(
                "no entry was written (indexCount {c}) and the slot table and entries are all \
                 zero, so all {total} (slots, entries) pairs that give {len} bytes fit{default_note}"
            ),
        };
    }

    // Upper bound: the slot table holds only values in [0, c).
    let mut k: u64 = 0;
    while let Some(v) = i32_at(bytes, INDEX_HEADER_SIZE + k as usize * HASH_SLOT_SIZE) {
        if !(0..c).contains(&v) {
            break;
        }
        k += 1;
    }
    // Lower bound: bytes from entry c on are zero, so 40 + 4s + 20c > last non-zero byte.
    let tail_start_min = last_nonzero.map_or(0, |p| p + 1);
    let fixed = INDEX_HEADER_SIZE as u64 + INDEX_SIZE as u64 * c as u64;
    let s_lo = if tail_start_min > fixed {
        (tail_start_min - fixed).div_ceil(HASH_SLOT_SIZE as u64)
    } else {
        1
    }
    .max(1);
    let s_hi = s_max_size.min(k);

    let mut fits = Vec::new();
    let mut checked = 0u64;
    let mut first_failures: Vec<String> = Vec::new();
    if s_lo <= s_hi {
        // First s >= s_lo with the right residue.
        let mut s = s_lo + (5 + residue - s_lo % 5) % 5;
        while s <= s_hi {
            checked += 1;
            let g = geometry_of(s);
            match check_geometry(bytes, g) {
                Ok(()) => fits.push(g),
                Err(why) => {
                    if first_failures.len() < 3 {
                        first_failures.push(format!("({}, {}): {why}", g.slots, g.entries));
                    }
                }
            }
            s += 5;
        }
    }
    let bounds = format!(
        "of {total} size-compatible pairs, the slot values (all in [0, {c}) only up to slot {k}) \
         and the zero tail (last non-zero byte {}) leave slots in [{s_lo}, {s_hi}]; {checked} \
         checked in detail",
        last_nonzero.map_or("none".to_string(), |p| p.to_string())
    );
    match fits.as_slice() {
        [] => {
            let why = if first_failures.is_empty() {
                String::new()
            } else {
                format!(": {}", first_failures.join("; "))
            };
            none(format!("no geometry fits: {bounds}{why}"))
        }
        [only] => Inference {
            result: InferResult::Unique(*only),
            reason: format!(
                "({}, {}) is the only fit: {bounds}",
                only.slots, only.entries
            ),
        },
        many => Inference {
            result: InferResult::Ambiguous {
                total: many.len() as u64,
                candidates: many.iter().take(MAX_LISTED).copied().collect(),
            },
            reason: format!("{} geometries fit: {bounds}", many.len()),
        },
    }
}

/// The first thing found in an index file that `geometry` cannot explain ([`check_geometry`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryMismatch {
    /// The geometry itself is not one a broker can have.
    #[error("{0}")]
    Invalid(ErrorKind),
    #[error("{len} bytes, but {geometry} makes {expected} bytes")]
    Size {
        len: u64,
        geometry: IndexGeometry,
        expected: u64,
    },
    /// The header or an entry does not read at the place the geometry puts it.
    #[error("{0}")]
    Unreadable(ParseError),
    #[error("indexCount is negative ({0})")]
    NegativeCount(i32),
    #[error("indexCount {count} exceeds {entries} entries")]
    CountOverEntries { count: i32, entries: u32 },
    #[error("entry 0 (never used) has a non-zero byte {at}")]
    EntryZeroUsed { at: usize },
    #[error("byte {at} after the last entry ({last}) is not zero")]
    TailNotZero { at: usize, last: i32 },
    #[error("slot table truncated")]
    SlotTableTruncated,
    #[error("slot {slot} (byte {at}) holds {value}, not 0 or in [1, {count})")]
    SlotOutOfRange {
        slot: u32,
        at: u64,
        value: i32,
        count: i32,
    },
    #[error("slot {slot} names entry {entry} whose hash {hash} belongs to another slot")]
    SlotOtherBucket { slot: u32, entry: i32, hash: i32 },
    #[error("entry {entry} (byte {at}) is all zero")]
    EntryAllZero { entry: i32, at: u64 },
    #[error("entry {entry} (byte {at}) has negative hash {hash}")]
    NegativeHash { entry: i32, at: u64, hash: i32 },
    #[error("entry {entry} (byte {at}) has prev {prev}, not 0 or below its own number")]
    PrevOutOfRange { entry: i32, at: u64, prev: i32 },
    #[error("entry {entry} (byte {at}) chains to entry {prev} of another bucket")]
    PrevOtherBucket { entry: i32, at: u64, prev: i32 },
    #[error("entry {entry} is referenced {refs} times, not once, by slots and prev fields")]
    NotReferencedOnce { entry: usize, refs: u8 },
}

/// Is `bytes` consistent with `geometry`? Checks, stopping at the first failure: the size; entry
/// 0 and everything after entry `indexCount - 1` zero; every slot 0 or in `[1, indexCount)` and
/// naming an entry of its own bucket (`hash % slots == slot`); entries `1..indexCount` non-zero,
/// with a non-negative hash and a prev that is 0 or a smaller entry of the same bucket; and every
/// entry referenced exactly once (by its slot or by the next entry of its bucket).
pub fn check_geometry(bytes: &[u8], geometry: IndexGeometry) -> Result<(), GeometryMismatch> {
    geometry.validate().map_err(GeometryMismatch::Invalid)?;
    if bytes.len() as u64 != geometry.file_size() {
        return Err(GeometryMismatch::Size {
            len: bytes.len() as u64,
            geometry,
            expected: geometry.file_size(),
        });
    }
    let header = IndexHeader::from_bytes(bytes).map_err(GeometryMismatch::Unreadable)?;
    let raw = header.index_count;
    if raw < 0 {
        return Err(GeometryMismatch::NegativeCount(raw));
    }
    let c = raw.max(1);
    if c as u64 > geometry.entries as u64 {
        return Err(GeometryMismatch::CountOverEntries {
            count: c,
            entries: geometry.entries,
        });
    }
    let s = geometry.slots;
    let pos = |p: u64| usize::try_from(p).unwrap_or(usize::MAX);
    let entry = |n: u32| {
        IndexEntry::read_at(bytes, pos(geometry.entry_pos(n))).map_err(GeometryMismatch::Unreadable)
    };

    // Zero entry 0 and zero tail.
    let e0 = pos(geometry.entry_pos(0));
    if let Some(z) = bytes.get(e0..e0 + INDEX_SIZE).and_then(first_nonzero) {
        return Err(GeometryMismatch::EntryZeroUsed { at: e0 + z });
    }
    let tail = pos(geometry.entry_pos(c as u32));
    if let Some(z) = bytes.get(tail..).and_then(first_nonzero) {
        return Err(GeometryMismatch::TailNotZero {
            at: tail + z,
            last: c - 1,
        });
    }

    // Each entry 1..c must be referenced exactly once.
    let mut refs = vec![0u8; c as usize];
    let mut bump = |n: i32| {
        if let Some(r) = refs.get_mut(n as usize) {
            *r = r.saturating_add(1);
        }
    };
    for i in 0..s {
        let p = geometry.slot_pos(i);
        let v = i32_at(bytes, pos(p)).ok_or(GeometryMismatch::SlotTableTruncated)?;
        if v == 0 {
            continue;
        }
        if v < 0 || v >= c {
            return Err(GeometryMismatch::SlotOutOfRange {
                slot: i,
                at: p,
                value: v,
                count: c,
            });
        }
        let e = entry(v as u32)?;
        if e.key_hash < 0 || slot_of(e.key_hash, s) != i {
            return Err(GeometryMismatch::SlotOtherBucket {
                slot: i,
                entry: v,
                hash: e.key_hash,
            });
        }
        bump(v);
    }
    for n in 1..c {
        let e = entry(n as u32)?;
        let p = geometry.entry_pos(n as u32);
        if e.is_zero() {
            return Err(GeometryMismatch::EntryAllZero { entry: n, at: p });
        }
        if e.key_hash < 0 {
            return Err(GeometryMismatch::NegativeHash {
                entry: n,
                at: p,
                hash: e.key_hash,
            });
        }
        if e.prev < 0 || e.prev >= n {
            return Err(GeometryMismatch::PrevOutOfRange {
                entry: n,
                at: p,
                prev: e.prev,
            });
        }
        if e.prev > 0 {
            let pe = entry(e.prev as u32)?;
            if pe.key_hash < 0 || slot_of(pe.key_hash, s) != slot_of(e.key_hash, s) {
                return Err(GeometryMismatch::PrevOtherBucket {
                    entry: n,
                    at: p,
                    prev: e.prev,
                });
            }
            bump(e.prev);
        }
    }
    if let Some((n, &r)) = refs.iter().enumerate().skip(1).find(|(_, &r)| r != 1) {
        return Err(GeometryMismatch::NotReferencedOnce { entry: n, refs: r });
    }
    Ok(())
}
