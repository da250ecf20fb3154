//! A small table from names (topic names, as bytes) to values, for the per-record lookups of
//! `verify`'s workers. Every record's topic is looked up, so a lookup hashes and compares the
//! name a word at a time: a name of at most 16 bytes is fully known by its first and last eight
//! bytes and its length, and only longer names are compared byte by byte.

/// Values by name; each name gets a number (0, 1, ... in the order names are first met).
pub(super) struct NameTable<V> {
    /// Open addressing: 0 is an empty slot, `n` names `entries[n - 1]`. Never more than half
    /// full, and its length is a power of two.
    slots: Vec<u32>,
    entries: Vec<Entry<V>>,
}

struct Entry<V> {
    first: u64,
    last: u64,
    name: Box<[u8]>,
    value: V,
}

impl<V> Default for NameTable<V> {
    fn default() -> Self {
        NameTable {
            slots: Vec::new(),
            entries: Vec::new(),
        }
    }
}

/// A name's first and last eight bytes as words (they overlap for names of 9 to 15 bytes); a
/// name shorter than eight bytes is one zero-padded word.
#[inline]
pub(super) fn end_words(name: &[u8]) -> (u64, u64) {
    match (name.first_chunk::<8>(), name.last_chunk::<8>()) {
        (Some(f), Some(l)) => (u64::from_le_bytes(*f), u64::from_le_bytes(*l)),
        _ => {
            let w = name
                .iter()
                .rev()
                .fold(0u64, |w, &c| (w << 8) | u64::from(c));
            (w, w)
        }
    }
}

#[inline]
fn slot_hash(first: u64, last: u64, len: usize) -> usize {
    use super::props::FAST_K as K;
    let h = (first.wrapping_mul(K) ^ last.rotate_left(29) ^ len as u64).wrapping_mul(K);
    (h >> 32) as usize
}

impl<V: Copy> NameTable<V> {
    /// The value of `name`, made by `make` from the name's number when it is new.
    #[inline]
    pub fn get_or_insert_with(&mut self, name: &[u8], make: impl FnOnce(u32) -> V) -> V {
        let (first, last) = end_words(name);
        let mask = self.slots.len().wrapping_sub(1);
        let mut at = slot_hash(first, last, name.len());
        while let Some(&n) = self.slots.get(at & mask) {
            let Some(e) = n.checked_sub(1).and_then(|i| self.entries.get(i as usize)) else {
                break;
            };
            if e.first == first
                && e.last == last
                && e.name.len() == name.len()
                && (name.len() <= 16 || *e.name == *name)
            {
                return e.value;
            }
            at = (at & mask) + 1;
        }
        self.insert(name, first, last, make)
    }

    #[cold]
    fn insert(&mut self, name: &[u8], first: u64, last: u64, make: impl FnOnce(u32) -> V) -> V {
        let value = make(self.entries.len() as u32);
        self.entries.push(Entry {
            first,
            last,
            name: name.into(),
            value,
        });
        if self.slots.len() < 2 * self.entries.len() {
            let len = (4 * self.entries.len()).next_power_of_two().max(16);
            self.slots = vec![0; len];
            for n in 1..=self.entries.len() {
                self.place(n);
            }
        } else {
            self.place(self.entries.len());
        }
        value
    }

    /// Put entry number `n` (counted from 1) into the first free slot from its hash on.
    fn place(&mut self, n: usize) {
        let Some(e) = n.checked_sub(1).and_then(|i| self.entries.get(i)) else {
            return;
        };
        let mask = self.slots.len().wrapping_sub(1);
        let mut at = slot_hash(e.first, e.last, e.name.len());
        while let Some(slot) = self.slots.get_mut(at & mask) {
            if *slot == 0 {
                *slot = n as u32;
                return;
            }
            at = (at & mask) + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_get_their_own_values_and_numbers() {
        // Short, 8-byte, overlapping and long names, some differing only in the middle (which
        // the end words do not see) or only in length.
        let mut names: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"TopicA".to_vec(),
            b"TopicAB".to_vec(),
            b"TopicABC".to_vec(),
            b"PaymentTopic".to_vec(),
            b"%RETRY%OrderGroupX".to_vec(),
            b"%RETRY%OrderGroupY".to_vec(),
            b"%RETRY%OrdxrGroupX".to_vec(),
            "cn-上海-topic".as_bytes().to_vec(),
        ];
        for i in 0..200 {
            names.push(format!("%DLQ%group-{i:03}-suffix").into_bytes());
        }
        let mut t = NameTable::default();
        for round in 0..2 {
            for (i, n) in names.iter().enumerate() {
                let got = t.get_or_insert_with(n, |id| (id, i));
                assert_eq!(got, (i as u32, i), "round {round}, name {:?}", n);
            }
        }
    }
}
