//! The duplicate UNIQ_KEY window of `verify`.
//!
//! Keyed records are cut into generations of [`DUP_WINDOW`] keys in the order the workers read
//! them. Each full generation is compared with itself and the generation before it: a repeat
//! inside a generation or across two neighbouring ones is found, so every repeat fewer than
//! [`DUP_WINDOW`] keyed records after its first copy is. A key that repeats is carried on with
//! its first offset, so a third copy further on still names the first one; other keys are
//! forgotten two generations on.
//!
//! Repeats are rare, so a generation is first run through two bit filters (its own hashes so
//! far, and the previous generation's): a filter can say "seen" wrongly but never "not seen"
//! wrongly. Only the hashes a filter has seen (the repeats, and about 2% more) are then looked
//! up exactly, in one pass over each of the two generations. Each key costs a probe of two
//! 1 MiB filters instead of a sort.
//!
//! Memory: the generation being filled, the one being compared and the previous one, 16 bytes
//! per key each, and the two filters: about 24 MB, whatever the store's size. The buffers are
//! handed on from generation to generation rather than allocated for each (a fresh one costs a
//! page fault every 4 KiB).

use std::collections::BTreeMap;
use std::collections::HashMap;
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

    /// An empty buffer with room for a generation.
    fn take(&self) -> Vec<Key> {
        let kept = self.0.lock().ok().and_then(|mut v| v.pop());
        let mut v = kept.unwrap_or_default();
        v.clear();
        v.reserve(DUP_WINDOW);
        v
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
#[derive(Default)]
pub(super) struct Sealed {
    /// The last generation compared, its keys in the order they came.
    prev: Vec<Key>,
    /// The hashes of `prev`.
    prev_filter: Filter,
    /// The first offset of each hash that `prev` holds more than once or that was carried
    /// into it; the others have a single copy in `prev`.
    prev_first: HashMap<u64, u64>,
    /// Distinct hashes in `prev`.
    prev_distinct: u64,
    /// The filter of the generation being compared (kept to reuse its table).
    filter: Filter,
    /// Generations compared so far.
    merged: u64,
    /// Full generations that must wait for an earlier one still being filled in.
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

    /// Add keys in the order they were read. The worker whose keys fill a generation compares
    /// it; the other workers only wait for the short append.
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
                    (n, std::mem::replace(&mut f.keys, self.spare.take()))
                })
            };
            if let Some((n, keys)) = full {
                self.seal(n, keys);
            }
        }
    }

    /// Compare the last, partial generation and return what was found.
    pub fn finish(self) -> Sealed {
        let Filling { keys, generation } = self.filling.into_inner().unwrap_or_default();
        let mut sealed = self.sealed.into_inner().unwrap_or_default();
        if !keys.is_empty() {
            sealed.waiting.insert(generation, keys);
        }
        // Every generation taken was handed in: compare what still waits, in order.
        while let Some((_, keys)) = sealed.waiting.pop_first() {
            sealed.merge(keys, self.cap, &self.spare);
        }
        sealed
    }

    fn seal(&self, n: u64, keys: Vec<Key>) {
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
    /// Compare generation `keys` (in the order they came) with itself and the previous one,
    /// and make it the previous one.
    fn merge(&mut self, keys: Vec<Key>, cap: usize, spare: &Spares) {
        // Hashes met before, in this generation or the last (and a few the filters mistake).
        self.filter.clear();
        let mut maybe = Vec::new();
        for (i, &(hash, _)) in keys.iter().enumerate() {
            if let Some(&(ahead, _)) = keys.get(i + 8) {
                self.filter.prefetch(ahead);
                self.prev_filter.prefetch(ahead);
            }
            let seen_here = self.filter.insert(hash);
            if seen_here || self.prev_filter.contains(hash) {
                maybe.push(hash);
            }
        }
        let mut carried = 0u64;
        let mut repeats_inside = 0u64;
        let mut first_of = HashMap::new();
        if !maybe.is_empty() {
            let wanted = HashSet64::of(&mut maybe);
            // Every copy of those hashes in both generations, by hash (in arrival order within
            // a hash: the sort is stable).
            let mut here: Vec<Key> = keys.iter().copied().filter(|k| wanted.has(k.0)).collect();
            let mut before: Vec<Key> = self
                .prev
                .iter()
                .copied()
                .filter(|k| wanted.has(k.0))
                .collect();
            here.sort_by_key(|k| k.0);
            before.sort_by_key(|k| k.0);
            let mut b = 0;
            let mut rest = here.as_slice();
            while let Some(&(hash, _)) = rest.first() {
                let run = rest.iter().take_while(|k| k.0 == hash).count();
                let (group, after) = rest.split_at(run);
                rest = after;
                while before.get(b).is_some_and(|k| k.0 < hash) {
                    b += 1;
                }
                let earlier = self
                    .prev_first
                    .get(&hash)
                    .copied()
                    .or_else(|| before.get(b).filter(|k| k.0 == hash).map(|k| k.1));
                if run == 1 && earlier.is_none() {
                    // A key met once so far (the filters were wrong about it).
                    continue;
                }
                repeats_inside += run as u64 - 1;
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
                first_of.insert(hash, first);
            }
        }
        self.forgotten += self.prev_distinct - carried;
        self.prev_distinct = keys.len() as u64 - repeats_inside;
        self.prev_first = first_of;
        std::mem::swap(&mut self.prev_filter, &mut self.filter);
        spare.give(std::mem::replace(&mut self.prev, keys));
        self.merged += 1;
    }
}

/// Odd multiplier that spreads a hash's bits into the high bits of the product.
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// A set of 64-bit hashes as a bit filter: two bits of one word per hash. `contains` may say
/// yes for a hash never put in (about 1% of them at a generation's size), never no for one
/// that was.
struct Filter {
    words: Vec<u64>,
}

impl Default for Filter {
    fn default() -> Self {
        // Written now rather than calloc'd: the first write to a page the filter had only read
        // (the shared zero page) would cost a copy and a TLB flush on every core.
        #[allow(clippy::slow_vector_initialization)]
        let mut words = Vec::with_capacity(Self::WORDS);
        words.resize(Self::WORDS, 0);
        Filter { words }
    }
}

impl Filter {
    /// 1 MiB: about 18 bits per key of a generation.
    const WORDS: usize = 1 << 17;

    /// The word and the two bits of `hash`, from the high bits of a multiplication (which
    /// depend on every bit of the hash).
    fn place(hash: u64) -> (usize, u64) {
        let m = hash.wrapping_mul(MIX);
        let word = (m >> (64 - Self::WORDS.trailing_zeros())) as usize;
        let bits = (1u64 << ((m >> 35) & 63)) | (1u64 << ((m >> 41) & 63));
        (word, bits)
    }

    fn clear(&mut self) {
        self.words.fill(0);
    }

    fn prefetch(&self, hash: u64) {
        crate::format::mapped::prefetch(&self.words, Self::place(hash).0);
    }

    fn contains(&self, hash: u64) -> bool {
        let (word, bits) = Self::place(hash);
        self.words.get(word).is_some_and(|w| w & bits == bits)
    }

    /// Put `hash` in; true when the filter held it already.
    fn insert(&mut self, hash: u64) -> bool {
        let (word, bits) = Self::place(hash);
        match self.words.get_mut(word) {
            Some(w) => {
                let had = *w & bits == bits;
                *w |= bits;
                had
            }
            None => false,
        }
    }
}

/// A small exact set of hashes (open addressing, linear probing) for the lookups of a
/// generation's pass; a hash of 0 is stored as 1, which only lets one more hash through
/// (the caller compares full hashes afterwards).
struct HashSet64 {
    slots: Vec<u64>,
    /// One bit per value of a hash's top 16 bits: most hashes not in the set are turned away
    /// here, in 8 KiB that stay in the first-level cache.
    near: Vec<u64>,
}

impl HashSet64 {
    /// The set of `hashes` (sorted and deduplicated in place).
    fn of(hashes: &mut Vec<u64>) -> Self {
        hashes.sort_unstable();
        hashes.dedup();
        let mut set = HashSet64 {
            slots: vec![0; (hashes.len() * 2).next_power_of_two().max(16)],
            near: vec![0; 1 << 10],
        };
        for &h in hashes.iter() {
            set.put(h.max(1));
        }
        set
    }

    /// The word and bit of `near` for `h`.
    fn near_bit(h: u64) -> (usize, u64) {
        let top = (h.wrapping_mul(MIX) >> 48) as usize;
        (top >> 6, 1 << (top & 63))
    }

    fn home(&self, h: u64) -> usize {
        let bits = self.slots.len().trailing_zeros();
        (h.wrapping_mul(MIX) >> (64 - bits)) as usize
    }

    fn put(&mut self, h: u64) {
        let (w, bit) = Self::near_bit(h);
        if let Some(w) = self.near.get_mut(w) {
            *w |= bit;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        while let Some(s) = self.slots.get_mut(i) {
            if *s == 0 || *s == h {
                *s = h;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    fn has(&self, h: u64) -> bool {
        let h = h.max(1);
        let (w, bit) = Self::near_bit(h);
        if self.near.get(w).is_none_or(|w| w & bit == 0) {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        while let Some(&s) = self.slots.get(i) {
            if s == h {
                return true;
            }
            if s == 0 {
                return false;
            }
            i = (i + 1) & mask;
        }
        false
    }
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

    /// The window's rules written plainly, generation by generation with ordered maps.
    fn reference(keys: &[Key], cap: usize) -> (u64, Vec<(u64, u64)>, u64) {
        let mut prev: BTreeMap<u64, u64> = BTreeMap::new();
        let (mut found, mut pairs, mut forgotten) = (0u64, Vec::new(), 0u64);
        for generation in keys.chunks(DUP_WINDOW) {
            let mut groups: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
            for &(hash, offset) in generation {
                groups.entry(hash).or_default().push(offset);
            }
            let mut next = BTreeMap::new();
            let mut carried = 0;
            for (hash, offsets) in groups {
                let earlier = prev.get(&hash).copied();
                carried += u64::from(earlier.is_some());
                let copies = || offsets.iter().copied().chain(earlier);
                let first = copies().min().unwrap_or(u64::MAX);
                for pos in copies().filter(|&p| p != first) {
                    found += 1;
                    if pairs.len() < cap {
                        pairs.push((first, pos));
                    }
                }
                next.insert(hash, first);
            }
            forgotten += prev.len() as u64 - carried;
            prev = next;
        }
        (found, pairs, forgotten)
    }

    #[test]
    fn agrees_with_the_plain_rules_over_several_generations() {
        // Hashes drawn from a space about twice the number of keys: many repeat, inside a
        // generation, in the next one and further on; some are 0 and 1 (the exact set's
        // stand-in for 0). Offsets come in no order.
        let n = DUP_WINDOW * 3 + DUP_WINDOW / 3;
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let keys: Vec<Key> = (0..n as u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let hash = match x % 1000 {
                    0 => 0,
                    1 => 1,
                    _ => (x >> 20) % (2 * n as u64),
                };
                (hash, i.wrapping_mul(0x9E37_79B1) % (1 << 40))
            })
            .collect();
        let cap = 50_000;
        let d = DupWindow::new(cap);
        // As workers add them: batches of uneven sizes.
        let mut rest = keys.as_slice();
        let mut size = 1;
        while !rest.is_empty() {
            let (now, later) = rest.split_at(size.min(rest.len()));
            d.add(now);
            rest = later;
            size = size * 7 % 3001 + 1;
        }
        let got = found(d);
        let want = reference(&keys, cap);
        assert!(
            want.0 > 100_000 && want.2 > 0,
            "the test has repeats and forgets"
        );
        assert_eq!(got.0, want.0, "repeats found");
        assert_eq!(got.2, want.2, "keys forgotten");
        assert_eq!(got.1, want.1, "pairs, in order");
    }

    #[test]
    fn filter_never_misses_and_rarely_errs() {
        let mut f = Filter::default();
        let hashes: Vec<u64> = (0..DUP_WINDOW as u64)
            .map(|i| i.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ (i << 3))
            .collect();
        for &h in &hashes {
            f.insert(h);
        }
        assert!(hashes.iter().all(|&h| f.contains(h)));
        let wrong = (0..100_000u64)
            .map(|i| !i.wrapping_mul(0xA076_1D64_78BD_642F))
            .filter(|&h| f.contains(h))
            .count();
        assert!(
            wrong < 3_000,
            "{wrong} of 100000 absent hashes reported as seen"
        );
        f.clear();
        assert!(!hashes.iter().any(|&h| f.contains(h)));
    }

    #[test]
    fn exact_set_holds_what_it_was_given() {
        let mut hashes: Vec<u64> = (0..5_000u64).map(|i| i * 7919).collect();
        hashes.extend([0, u64::MAX, 1 << 63]);
        let set = HashSet64::of(&mut hashes.clone());
        assert!(hashes.iter().all(|&h| set.has(h)));
        assert!(set.has(1), "0 is stored as 1");
        assert!(!(1..5_000u64).any(|i| set.has(i * 7919 + 1)));
    }
}
