//! The duplicate UNIQ_KEY window of `verify`.
//!
//! Keyed records are cut into generations of [`DUP_WINDOW`] keys in the order the workers read
//! them. A full generation is sorted by key hash (outside every lock) and then compared with
//! the generation before it in one merge pass: a repeat inside a generation or across two
//! neighbouring ones is found, so every repeat fewer than [`DUP_WINDOW`] keyed records after its
//! first copy is. A key that repeats is carried on with its first offset, so a third copy
//! further on still names the first one; other keys are forgotten two generations on.
//!
//! Memory: the generation being filled, the one being sorted (and its radix scratch) and the
//! previous one, 16 bytes per key each: about 30 MB, whatever the store's size. The buffers
//! are handed on from generation to generation rather than allocated for each (a fresh one
//! costs a page fault every 4 KiB).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Keys per generation of the duplicate UNIQ_KEY window (two generations are compared).
pub const DUP_WINDOW: usize = 458_752;

/// A keyed record: the 64-bit hash of its UNIQ_KEY and its commitlog offset.
pub(super) type Key = (u64, u64);

/// Repeated key hashes, found generation by generation. Shared by the workers.
pub(super) struct DupWindow {
    filling: Mutex<Filling>,
    sealed: Mutex<Sealed>,
    /// Buffers of a generation's size no longer in use.
    spare: Spares,
    /// Pairs kept for findings (all of them are counted).
    cap: usize,
}

/// Buffers of [`DUP_WINDOW`] keys kept for the next generation, at most [`Spares::KEPT`].
#[derive(Default)]
struct Spares(Mutex<Vec<Vec<Key>>>);

impl Spares {
    const KEPT: usize = 4;

    /// A buffer with room for a generation, holding whatever it held before (the radix sort's
    /// scratch is overwritten without clearing it first).
    fn take(&self) -> Vec<Key> {
        let kept = self.0.lock().ok().and_then(|mut v| v.pop());
        kept.unwrap_or_else(|| Vec::with_capacity(DUP_WINDOW))
    }

    fn give(&self, keys: Vec<Key>) {
        if let Ok(mut v) = self.0.lock() {
            if v.len() < Self::KEPT {
                v.push(keys);
            }
        }
    }
}

#[derive(Default)]
struct Filling {
    keys: Vec<Key>,
    /// Number of the generation `keys` will be.
    generation: u64,
}

/// What the sealed generations found.
#[derive(Debug, Default)]
pub(super) struct Sealed {
    /// The last generation merged: sorted by hash, one entry per hash with its first offset.
    prev: Vec<Key>,
    /// Generations merged so far.
    merged: u64,
    /// Sorted generations that must wait for an earlier one still being sorted.
    waiting: BTreeMap<u64, Vec<Key>>,
    /// `(first offset, repeat offset)` of repeated hashes, at most `cap` of them.
    pub pairs: Vec<(u64, u64)>,
    /// Repeats found (a repeated hash may still be two different keys: findings compare them).
    pub found: u64,
    /// Keys forgotten before the end (no longer compared with later ones).
    pub forgotten: u64,
}

impl DupWindow {
    pub fn new(cap: usize) -> Self {
        DupWindow {
            filling: Mutex::new(Filling {
                keys: Vec::with_capacity(DUP_WINDOW),
                generation: 0,
            }),
            sealed: Mutex::new(Sealed::default()),
            spare: Spares::default(),
            cap,
        }
    }

    /// Add keys in the order they were read. The worker whose keys fill a generation sorts and
    /// merges it; the other workers only wait for the short append.
    pub fn add(&self, keys: &[Key]) {
        let mut rest = keys;
        while !rest.is_empty() {
            let full = {
                let Ok(mut f) = self.filling.lock() else {
                    return;
                };
                let room = DUP_WINDOW.saturating_sub(f.keys.len()).max(1);
                let (now, later) = rest.split_at(room.min(rest.len()));
                f.keys.extend_from_slice(now);
                rest = later;
                (f.keys.len() >= DUP_WINDOW).then(|| {
                    let n = f.generation;
                    f.generation += 1;
                    let mut empty = self.spare.take();
                    empty.clear();
                    (n, std::mem::replace(&mut f.keys, empty))
                })
            };
            if let Some((n, keys)) = full {
                self.seal(n, keys);
            }
        }
    }

    /// Seal the last, partial generation and return what was found.
    pub fn finish(self) -> Sealed {
        let Filling { keys, generation } = self.filling.into_inner().unwrap_or_default();
        let mut sealed = self.sealed.into_inner().unwrap_or_default();
        if !keys.is_empty() {
            let sorted = sort_by_hash(keys, &self.spare);
            sealed.waiting.insert(generation, sorted);
        }
        // Every generation taken was handed back, sorted: merge what still waits, in order.
        while let Some((_, keys)) = sealed.waiting.pop_first() {
            sealed.merge(keys, self.cap, &self.spare);
        }
        sealed
    }

    fn seal(&self, n: u64, keys: Vec<Key>) {
        let keys = sort_by_hash(keys, &self.spare);
        let Ok(mut s) = self.sealed.lock() else {
            return;
        };
        s.waiting.insert(n, keys);
        loop {
            let next = s.merged;
            let Some(keys) = s.waiting.remove(&next) else {
                break;
            };
            s.merge(keys, self.cap, &self.spare);
        }
    }
}

impl Sealed {
    /// Compare generation `keys` (sorted by hash) with itself and the previous one, and make it
    /// the previous one.
    fn merge(&mut self, keys: Vec<Key>, cap: usize, spare: &Spares) {
        let mut next = spare.take();
        next.clear();
        let mut carried = 0u64;
        let mut p = 0;
        let mut rest = keys.as_slice();
        while let Some(&(hash, offset)) = rest.first() {
            while self.prev.get(p).is_some_and(|k| k.0 < hash) {
                p += 1;
            }
            let earlier = self.prev.get(p).filter(|k| k.0 == hash).map(|k| k.1);
            let single = rest.get(1).is_none_or(|k| k.0 != hash);
            if single && earlier.is_none() {
                // The usual case: a key met once so far.
                next.push((hash, offset));
                rest = rest.get(1..).unwrap_or(&[]);
                continue;
            }
            let run = rest.iter().take_while(|k| k.0 == hash).count();
            let (group, after) = rest.split_at(run);
            rest = after;
            carried += u64::from(earlier.is_some());
            let group_first = group.iter().map(|k| k.1).min().unwrap_or(u64::MAX);
            let first = earlier.map_or(group_first, |e| e.min(group_first));
            let copies = group.iter().map(|k| k.1).chain(earlier);
            for pos in copies.filter(|&pos| pos != first) {
                self.found += 1;
                if self.pairs.len() < cap {
                    self.pairs.push((first, pos));
                }
            }
            next.push((hash, first));
        }
        self.forgotten += self.prev.len() as u64 - carried;
        spare.give(std::mem::replace(&mut self.prev, next));
        spare.give(keys);
        self.merged += 1;
    }
}

/// Sort keys by hash, stably: a radix sort on the hash's top 22 bits (two passes of 11 bits,
/// whose counters fit the first-level cache; both counts are taken in one read), then each run
/// of keys that share those bits (short ones: a generation has about one key per nine values of
/// them) by the full hash.
fn sort_by_hash(mut keys: Vec<Key>, spare: &Spares) -> Vec<Key> {
    const BITS: u32 = 11;
    const BUCKETS: usize = 1 << BITS;
    const PASSES: usize = 2;
    // Pass 0 sorts on the lowest of the three digits.
    let digit = |h: u64, pass: usize| {
        ((h >> (64 - BITS as usize * (PASSES - pass))) as usize) & (BUCKETS - 1)
    };
    let mut other = spare.take();
    other.resize(keys.len(), (0, 0));
    let mut counts = [[0usize; BUCKETS]; PASSES];
    for k in &keys {
        for (pass, c) in counts.iter_mut().enumerate() {
            if let Some(c) = c.get_mut(digit(k.0, pass)) {
                *c += 1;
            }
        }
    }
    for (pass, starts) in counts.iter_mut().enumerate() {
        let mut sum = 0;
        for c in starts.iter_mut() {
            let n = *c;
            *c = sum;
            sum += n;
        }
        for &k in &keys {
            if let Some(c) = starts.get_mut(digit(k.0, pass)) {
                if let Some(slot) = other.get_mut(*c) {
                    *slot = k;
                }
                *c += 1;
            }
        }
        std::mem::swap(&mut keys, &mut other);
    }
    // Keys that share the top bits are next to each other: order each such run by full hash.
    let top = |k: &Key| k.0 >> (64 - PASSES as u32 * BITS);
    let mut rest = keys.as_mut_slice();
    while let Some(first) = rest.first() {
        let t = top(first);
        let run = rest.iter().take_while(|k| top(k) == t).count();
        let (same, after) = rest.split_at_mut(run);
        if run > 1 {
            same.sort_by_key(|k| k.0);
        }
        rest = after;
    }
    spare.give(other);
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(d: DupWindow) -> (u64, Vec<(u64, u64)>, u64) {
        let s = d.finish();
        (s.found, s.pairs, s.forgotten)
    }

    #[test]
    fn repeats_name_the_first_copy() {
        let d = DupWindow::new(10);
        d.add(&[(1, 100), (2, 200), (1, 300)]);
        // an earlier copy read later (another worker's file) still becomes the first
        d.add(&[(1, 50)]);
        let (n, mut pairs, _) = found(d);
        pairs.sort();
        assert_eq!(n, 2);
        assert_eq!(pairs, vec![(50, 100), (50, 300)]);
    }

    #[test]
    fn keeps_two_generations_and_carries_repeated_keys() {
        let d = DupWindow::new(10);
        let first: Vec<Key> = (0..DUP_WINDOW as u64).map(|k| (k * 7919, k)).collect();
        d.add(&first);
        // the second generation repeats key 5 once
        let mut second: Vec<Key> = (0..DUP_WINDOW as u64)
            .map(|k| (u64::MAX - k, 1_000_000 + k))
            .collect();
        second[10] = (5 * 7919, 1_500_000);
        d.add(&second);
        // the third repeats key 5 again (carried) and key 9 (forgotten two generations on)
        d.add(&[(5 * 7919, 3_000_000), (9 * 7919, 3_000_001)]);
        let (n, pairs, forgotten) = found(d);
        assert_eq!(n, 2);
        assert_eq!(pairs, vec![(5, 1_500_000), (5, 3_000_000)]);
        assert_eq!(forgotten, DUP_WINDOW as u64 - 1 + DUP_WINDOW as u64 - 1);
    }

    #[test]
    fn sort_orders_full_hashes_that_share_their_top_bits() {
        let mut keys: Vec<Key> = Vec::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // many keys share their top bits and differ below them
            let h = if i % 3 == 0 {
                (x & !0x7FFF_FFFF) | (i as u64 % 97)
            } else {
                x
            };
            keys.push((h, i as u64));
        }
        let mut want = keys.clone();
        want.sort_by_key(|k| k.0);
        assert_eq!(
            sort_by_hash(keys, &Spares::default()),
            want,
            "stable by hash"
        );
    }
}
