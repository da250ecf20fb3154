//! A table from names (topic names, as bytes) to values, for the per-record lookups of
//! `verify`'s workers: each name gets a number (0, 1, ... in the order names are first met).

use rustc_hash::FxHashMap;

/// Values by name.
pub(super) struct NameTable<V> {
    map: FxHashMap<Box<[u8]>, V>,
}

impl<V> Default for NameTable<V> {
    fn default() -> Self {
        NameTable {
            map: FxHashMap::default(),
        }
    }
}

impl<V: Copy> NameTable<V> {
    /// The value of `name`, made by `make` from the name's number when it is new.
    #[inline]
    pub fn get_or_insert_with(&mut self, name: &[u8], make: impl FnOnce(u32) -> V) -> V {
        if let Some(v) = self.map.get(name) {
            return *v;
        }
        let value = make(self.map.len() as u32);
        self.map.insert(name.into(), value);
        value
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
