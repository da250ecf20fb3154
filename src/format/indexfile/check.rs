//! Structural checks of index files without the commitlog (FORMAT.md 12: check 23, the
//! single-file parts of 25, and 26 over a directory's file sequence). Every problem is reported
//! with a byte offset; checking goes on after each one.

use super::{
    first_nonzero, header_pos, parse_file_name_naive, slot_of, IndexEntry, IndexGeometry,
    IndexHeader, INDEX_SIZE,
};
use crate::format::bytes::i32_at;
use crate::format::mapped::prefetch;

/// At most this many problems are listed per file; a last one says how many were left out.
pub const MAX_PROBLEMS: usize = 100;

/// One thing wrong with an index file: where (byte offset in the file) and what.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    pub offset: u64,
    pub what: String,
}

pub(super) struct Sink {
    problems: Vec<Problem>,
    dropped: u64,
}

impl Sink {
    pub(super) fn new() -> Self {
        Sink {
            problems: Vec::new(),
            dropped: 0,
        }
    }

    fn push(&mut self, offset: u64, what: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(Problem { offset, what });
        } else {
            self.dropped += 1;
        }
    }

    pub(super) fn finish(mut self) -> Vec<Problem> {
        if self.dropped > 0 {
            self.problems.push(Problem {
                offset: 0,
                what: format!("{} more problems not listed", self.dropped),
            });
        }
        self.problems
    }
}

/// Check one index file's bytes against `geometry`: size, header counts, slots and chains (check
/// 23), header against its entries (check 25: begin/end offsets equal the first and last entries,
/// the last entry's time diff matches `(end - begin) / 1000`), offsets non-decreasing by entry
/// number, hashSlotCount equal to the number of used slots, and zeros everywhere the broker never
/// wrote.
pub fn check_file(bytes: &[u8], geometry: IndexGeometry) -> Vec<Problem> {
    check_file_with(bytes, geometry, |from| {
        first_nonzero(bytes.get(from..)?).map(|z| from + z)
    })
}

/// [`check_file`] with the search for the first non-zero byte at or after a position given by
/// the caller (which may know where a sparse file's holes are and skip them).
pub fn check_file_with(
    bytes: &[u8],
    geometry: IndexGeometry,
    first_nonzero_from: impl Fn(usize) -> Option<usize>,
) -> Vec<Problem> {
    let mut out = Sink::new();
    if let Err(k) = geometry.validate() {
        out.push(0, k.to_string());
        return out.finish();
    }
    let len = bytes.len() as u64;
    let size = geometry.file_size();
    if len != size {
        out.push(
            len.min(size),
            format!("file has {len} bytes, {geometry} makes {size}"),
        );
    }
    let header = match IndexHeader::from_bytes(bytes) {
        Ok(h) => h,
        Err(e) => {
            out.push(e.offset, e.kind.to_string());
            return out.finish();
        }
    };
    let raw = header.index_count;
    let ic_pos = header_pos::INDEX_COUNT as u64;
    if raw < 0 {
        out.push(ic_pos, format!("indexCount is negative ({raw})"));
    }
    let c = raw.max(1);
    if c as u64 > geometry.entries as u64 {
        out.push(
            ic_pos,
            format!(
                "indexCount {c} exceeds the {} entries of the file",
                geometry.entries
            ),
        );
    }
    // Entries that exist in the bytes and are in use.
    let present = if len > geometry.entry_pos(0) {
        ((len - geometry.entry_pos(0)) / INDEX_SIZE as u64).min(geometry.entries as u64)
    } else {
        0
    };
    let used_end = (c as u64).min(present) as u32;
    let pos = |p: u64| usize::try_from(p).unwrap_or(usize::MAX);
    let entry = |n: u32| IndexEntry::read_at(bytes, pos(geometry.entry_pos(n))).ok();

    if let Some(e0) = entry(0) {
        if !e0.is_zero() {
            out.push(
                geometry.entry_pos(0),
                "entry 0 is not zero (the broker never writes it)".into(),
            );
        }
    }

    let mut prev_offset: Option<i64> = None;
    let mut last: Option<IndexEntry> = None;
    let first = pos(geometry.entry_pos(1));
    let in_use = bytes
        .get(first..)
        .unwrap_or(&[])
        .chunks_exact(INDEX_SIZE)
        .take(used_end.saturating_sub(1) as usize);
    for (n, raw) in (1u32..).zip(in_use) {
        let p = geometry.entry_pos(n);
        let Some(e) = IndexEntry::from_prefix(raw) else {
            break;
        };
        if e.is_zero() {
            out.push(p, format!("entry {n} is all zero but indexCount is {c}"));
        }
        if e.key_hash < 0 {
            out.push(p, format!("entry {n} has negative hash {}", e.key_hash));
        }
        if e.time_diff < 0 {
            out.push(
                p + 12,
                format!("entry {n} has negative time diff {}", e.time_diff),
            );
        }
        if let Some(po) = prev_offset {
            if e.phy_offset < po {
                out.push(
                    p + 4,
                    format!(
                        "entry {n} offset {} is below the previous entry's {po}",
                        e.phy_offset
                    ),
                );
            }
        }
        prev_offset = Some(e.phy_offset);
        last = Some(e);
    }

    let used_slots = match chains_as_written(bytes, geometry, used_end) {
        Some(used) => used,
        None => check_chains(bytes, geometry, used_end, c, &mut out),
    };

    // Everything after the entries in use is zero.
    let tail = pos(geometry.entry_pos(c.max(1) as u32));
    if let Some(rest) = bytes.get(tail..) {
        if let Some(z) = first_nonzero_from(tail).and_then(|p| p.checked_sub(tail)) {
            // Count the non-zero 20-byte slots from the first one on (zero blocks are skipped
            // by the fast scan).
            let mut nonzero = 0u64;
            let mut at = z - z % INDEX_SIZE;
            while let Some(next) = rest.get(at..).and_then(first_nonzero) {
                let start = at + next - next % INDEX_SIZE;
                nonzero += 1;
                at = start + INDEX_SIZE;
            }
            out.push(
                (tail + z) as u64,
                format!(
                    "{nonzero} entries after entry {} (the last in use) are not zero",
                    c - 1
                ),
            );
        }
    }

    // Header against the entries (check 25, single-file part).
    let hs_pos = header_pos::HASH_SLOT_COUNT as u64;
    if i64::from(header.hash_slot_count) != used_slots {
        out.push(
            hs_pos,
            format!(
                "hashSlotCount is {} but {used_slots} slots are in use",
                header.hash_slot_count
            ),
        );
    }
    if header.end_timestamp < header.begin_timestamp {
        out.push(
            header_pos::END_TIMESTAMP as u64,
            format!(
                "endTimestamp {} is before beginTimestamp {}",
                header.end_timestamp, header.begin_timestamp
            ),
        );
    }
    if used_end <= 1 {
        if header.begin_phy_offset != header.end_phy_offset {
            out.push(
                header_pos::BEGIN_PHY_OFFSET as u64,
                format!(
                    "no entries, yet beginPhyOffset {} differs from endPhyOffset {}",
                    header.begin_phy_offset, header.end_phy_offset
                ),
            );
        }
        return out.finish();
    }
    if let Some(first) = entry(1) {
        if first.phy_offset != header.begin_phy_offset {
            out.push(
                header_pos::BEGIN_PHY_OFFSET as u64,
                format!(
                    "beginPhyOffset {} but entry 1 has offset {}",
                    header.begin_phy_offset, first.phy_offset
                ),
            );
        }
    }
    if let Some(last) = last {
        let n = used_end - 1;
        if last.phy_offset != header.end_phy_offset {
            out.push(
                header_pos::END_PHY_OFFSET as u64,
                format!(
                    "endPhyOffset {} but entry {n} (the last) has offset {}",
                    header.end_phy_offset, last.phy_offset
                ),
            );
        }
        // The last entry's diff was computed from the final beginTimestamp when it is entry 2 or
        // later, and its store time is endTimestamp.
        if n >= 2 {
            let want = if header.begin_timestamp <= 0 {
                0
            } else {
                (header.end_timestamp.wrapping_sub(header.begin_timestamp) / 1000)
                    .clamp(0, i32::MAX as i64) as i32
            };
            if last.time_diff != want {
                out.push(
                    geometry.entry_pos(n) + 12,
                    format!(
                        "entry {n} (the last) has time diff {} s, but (endTimestamp - \
                         beginTimestamp) / 1000 = {want}",
                        last.time_diff
                    ),
                );
            }
        }
    }
    out.finish()
}

/// The number of used slots when every chain is exactly as the broker builds it, else `None`.
///
/// The broker puts entry `n` into slot `s` by writing the slot's current value as the entry's
/// prev and then `n` into the slot. So in an intact file each entry's prev is the entry put last
/// before it into the same slot (0 for the first), and each slot names the last entry put into
/// it. One sequential pass over the entries with a table of the last entry per slot, and one over
/// the slots, prove every chain stays in its bucket and every entry is referenced exactly once,
/// without the random reads of following each prev.
pub(super) fn chains_as_written(
    bytes: &[u8],
    geometry: IndexGeometry,
    used_end: u32,
) -> Option<i64> {
    let slots = usize::try_from(geometry.slots).ok()?;
    // The table costs four bytes a slot: above 16 Mi slots (four times the broker's default)
    // the entry-by-entry check, whose memory grows with the entries instead, does the work.
    if slots > 1 << 24 {
        return None;
    }
    // `NONE` for a slot no entry was put into yet. Not zero on purpose: a `vec!` of zeros comes
    // from calloc, whose pages are the shared zero page until written, and each first write
    // then costs a copy and a TLB flush on every core.
    const NONE: u32 = u32::MAX;
    let last_of = |v: u32| if v == NONE { 0 } else { v };
    let mut last_in_slot = vec![NONE; slots];
    let start = usize::try_from(geometry.entry_pos(1)).ok()?;
    let end = usize::try_from(geometry.entry_pos(used_end.max(1))).ok()?;
    let entries = bytes.get(start..end)?;
    // The table is too big for the caches: the slot of the entry `AHEAD` places on is
    // prefetched, so these reads overlap instead of waiting one after the other.
    const AHEAD: usize = 64;
    for (n, e) in (1u32..).zip(entries.chunks_exact(INDEX_SIZE)) {
        let ahead = (n as usize + AHEAD - 1) * INDEX_SIZE;
        if let Some(h) = entries.get(ahead..).and_then(|a| i32_at(a, 0)) {
            prefetch(&last_in_slot, slot_of(h, geometry.slots) as usize);
        }
        let hash = i32_at(e, 0)?;
        let prev = i32_at(e, 16)?;
        let slot = last_in_slot.get_mut(slot_of(hash, geometry.slots) as usize)?;
        if i64::from(prev) != i64::from(last_of(*slot)) {
            return None;
        }
        *slot = n;
    }
    let table_start = usize::try_from(geometry.slot_pos(0)).ok()?;
    let table = bytes.get(table_start..table_start.checked_add(slots.checked_mul(4)?)?)?;
    let mut used = 0i64;
    for (v, want) in table.chunks_exact(4).zip(&last_in_slot) {
        let v = i32_at(v, 0)?;
        if i64::from(v) != i64::from(last_of(*want)) {
            return None;
        }
        used += i64::from(v != 0);
    }
    Some(used)
}

/// Chains entry by entry (for a file whose chains are not as written): prev fields in range and
/// in the same bucket, slots in range and naming an entry of their bucket, every entry in use
/// referenced exactly once. Returns the number of used slots.
pub(super) fn check_chains(
    bytes: &[u8],
    geometry: IndexGeometry,
    used_end: u32,
    c: i32,
    out: &mut Sink,
) -> i64 {
    let pos = |p: u64| usize::try_from(p).unwrap_or(usize::MAX);
    let entry = |n: u32| IndexEntry::read_at(bytes, pos(geometry.entry_pos(n))).ok();
    let mut refs = vec![0u8; used_end as usize];
    for n in 1..used_end {
        let p = geometry.entry_pos(n);
        let Some(e) = entry(n) else { break };
        if e.prev < 0 || e.prev >= n as i32 {
            out.push(
                p + 16,
                format!(
                    "entry {n} has prev {}, not 0 or below its own number",
                    e.prev
                ),
            );
        } else if e.prev > 0 {
            if let Some(pe) = entry(e.prev as u32) {
                if slot_of(pe.key_hash, geometry.slots) != slot_of(e.key_hash, geometry.slots) {
                    out.push(
                        p + 16,
                        format!("entry {n} chains to entry {} of another bucket", e.prev),
                    );
                }
            }
            if let Some(r) = refs.get_mut(e.prev as usize) {
                *r = r.saturating_add(1);
            }
        }
    }

    let mut used_slots: i64 = 0;
    for i in 0..geometry.slots {
        let p = geometry.slot_pos(i);
        let Some(v) = i32_at(bytes, pos(p)) else {
            break;
        };
        if v == 0 {
            continue;
        }
        used_slots += 1;
        if v < 0 || v >= c {
            out.push(p, format!("slot {i} holds {v}, not 0 or in [1, {c})"));
            continue;
        }
        if let Some(e) = entry(v as u32) {
            if slot_of(e.key_hash, geometry.slots) != i {
                out.push(
                    p,
                    format!(
                        "slot {i} names entry {v} whose hash {} belongs to slot {}",
                        e.key_hash,
                        slot_of(e.key_hash, geometry.slots)
                    ),
                );
            }
        }
        if let Some(r) = refs.get_mut(v as usize) {
            *r = r.saturating_add(1);
        }
    }
    for (n, &r) in refs.iter().enumerate().skip(1) {
        if r != 1 {
            out.push(
                geometry.entry_pos(n as u32),
                format!("entry {n} is referenced {r} times by slots and prev fields, not once"),
            );
        }
    }
    used_slots
}

/// Check the headers of a directory's files in load (name) order: names are
/// `yyyyMMddHHmmssSSS` and distinct (check 26), and each file's end offset and end timestamp are
/// at most the next file's begin values (check 25). Offsets are header field positions; the
/// description names the file.
pub fn check_sequence(files: &[(&str, IndexHeader)]) -> Vec<Problem> {
    let mut out = Sink::new();
    let mut prev: Option<(&str, IndexHeader)> = None;
    for &(name, h) in files {
        if parse_file_name_naive(name).is_none() {
            out.push(
                0,
                format!(
                    "{name}: name is not a yyyyMMddHHmmssSSS time (the broker loads it anyway)"
                ),
            );
        }
        if let Some((pname, ph)) = prev {
            if pname >= name {
                out.push(0, format!("{name}: does not sort after {pname}"));
            }
            if ph.end_phy_offset > h.begin_phy_offset {
                out.push(
                    header_pos::BEGIN_PHY_OFFSET as u64,
                    format!(
                        "{name}: beginPhyOffset {} is below the endPhyOffset {} of {pname}",
                        h.begin_phy_offset, ph.end_phy_offset
                    ),
                );
            }
            if ph.end_timestamp > h.begin_timestamp {
                out.push(
                    header_pos::BEGIN_TIMESTAMP as u64,
                    format!(
                        "{name}: beginTimestamp {} is before the endTimestamp {} of {pname}",
                        h.begin_timestamp, ph.end_timestamp
                    ),
                );
            }
        }
        prev = Some((name, h));
    }
    out.finish()
}
