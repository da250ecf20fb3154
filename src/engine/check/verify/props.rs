//! The properties verify reads once per record ([`Props`]), the tags code and index key hashes
//! worked out from them, and the fast hasher for short keys.

use crate::engine::store::dispatch::SCHEDULE_TOPIC;
use crate::format::commitlog::{MessageRef, TransactionType};
use crate::format::java::bytes_hash_extend;

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Props<'a> {
    pub(super) tags: Option<&'a [u8]>,
    pub(super) delay: Option<&'a [u8]>,
    pub(super) keys: Option<&'a [u8]>,
    pub(super) uniq: Option<&'a [u8]>,
    pub(super) uniq_count: u8,
    pub(super) real_topic: bool,
    pub(super) retry_topic: bool,
    pub(super) tx_check: bool,
    pub(super) inner_num: Option<&'a [u8]>,
    pub(super) crc32: bool,
    /// The markers of a repair's tombstone and filler records.
    pub(super) tombstone: bool,
    pub(super) filler: bool,
}

/// Each `name 0x01 value` segment of a properties block, split at 0x02
/// (`MessageDecoder.string2messageProperties`). The 0x02 bytes of up to 64 bytes at a time are
/// found first (16 at a time with SIMD compares) as one bit mask, and the segments are then
/// taken from the mask: the branches depend on the number of segments, not on where each one
/// ends.
#[inline]
fn for_each_segment<'a>(b: &'a [u8], mut f: impl FnMut(&'a [u8])) {
    use wide::u8x16;
    let twos = u8x16::splat(2);
    let mut start = 0;
    for (g, group) in b.chunks(64).enumerate() {
        let mut mask = 0u64;
        let mut blocks = group.chunks_exact(16);
        for (i, c) in blocks.by_ref().enumerate() {
            if let Ok(c) = <[u8; 16]>::try_from(c) {
                let m = u8x16::new(c).cmp_eq(twos).move_mask() as u16;
                mask |= u64::from(m) << (16 * i);
            }
        }
        let base = 64 * g;
        let rest = blocks.remainder().len();
        let done = group.len() - rest;
        if rest > 0 {
            // The last bytes: from the block's last 16 bytes (overlapping bytes already seen)
            // when it has that many.
            let tail = match b.last_chunk::<16>() {
                Some(c) => u32::from(u8x16::new(*c).cmp_eq(twos).move_mask() as u16) >> (16 - rest),
                None => (blocks.remainder().iter().enumerate())
                    .fold(0, |m, (i, &c)| m | (u32::from(c == 2) << i)),
            };
            mask |= u64::from(tail) << done;
        }
        while mask != 0 {
            let end = base + mask.trailing_zeros() as usize;
            f(b.get(start..end).unwrap_or(&[]));
            start = end + 1;
            mask &= mask - 1;
        }
    }
    if let Some(last) = b.get(start..).filter(|l| !l.is_empty()) {
        f(last);
    }
}

/// The value of a segment whose name is `name`: the name must end at the segment's first 0x01
/// and the value after it must not be empty, as `Properties::iter_raw` decides.
#[inline]
fn value_of<'a>(segment: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let value = segment.strip_prefix(name)?.strip_prefix(&[1])?;
    (!value.is_empty()).then_some(value)
}

impl<'a> Props<'a> {
    /// The properties verify needs, in one pass; a segment is looked at only when its first
    /// byte can start one of their names.
    pub(super) fn of(m: &MessageRef<'a>) -> Self {
        Self::of_block(m.properties.0)
    }

    pub(super) fn of_block(block: &'a [u8]) -> Self {
        /// The first eight bytes of a name followed by 0x01, as a little-endian word.
        const fn word(name: &[u8]) -> u64 {
            let mut w = 0u64;
            let mut i = 0;
            while i < 8 && i <= name.len() {
                let c = if i < name.len() { name[i] } else { 1 };
                w |= (c as u64) << (8 * i);
                i += 1;
            }
            w
        }
        const FIVE: u64 = (1 << 40) - 1;
        const TAGS: u64 = word(b"TAGS");
        const KEYS: u64 = word(b"KEYS");
        const UNIQ_KEY: u64 = word(b"UNIQ_KEY");
        let mut p = Props::default();
        for_each_segment(block, |seg| {
            // The segment's first eight bytes (zero-padded): the usual names are told apart by
            // one compare each.
            let (w, _) = end_words(seg);
            let value = |at: usize| seg.get(at..).filter(|v| !v.is_empty());
            if w & FIVE == TAGS {
                p.tags = value(5).or(p.tags);
            } else if w & FIVE == KEYS {
                p.keys = value(5).or(p.keys);
            } else if w == UNIQ_KEY {
                if let Some(v) = value(9).filter(|_| seg.get(8) == Some(&1)) {
                    p.uniq = Some(v);
                    p.uniq_count = p.uniq_count.saturating_add(1);
                }
            } else if matches!(seg.first(), Some(b'T' | b'D' | b'R' | b'I' | b'_')) {
                p.rare(seg);
            }
        });
        p
    }

    /// The properties verify needs besides TAGS, KEYS and UNIQ_KEY.
    #[cold]
    fn rare(&mut self, seg: &'a [u8]) {
        match seg.first() {
            Some(b'T') => self.tx_check |= value_of(seg, b"TRANSACTION_CHECK_TIMES").is_some(),
            Some(b'D') => {
                if let Some(v) = value_of(seg, b"DELAY") {
                    self.delay = Some(v);
                }
            }
            Some(b'R') => {
                self.real_topic |= value_of(seg, b"REAL_TOPIC").is_some();
                self.retry_topic |= value_of(seg, b"RETRY_TOPIC").is_some();
                self.tombstone |= seg.starts_with(b"RMQSTORE_TOMBSTONE\x01");
                self.filler |= seg.starts_with(b"RMQSTORE_FILLER\x01");
            }
            Some(b'I') => {
                if let Some(v) = value_of(seg, b"INNER_NUM") {
                    self.inner_num = Some(v);
                }
            }
            Some(b'_') => self.crc32 |= value_of(seg, b"__CRC32#").is_some(),
            _ => {}
        }
    }
}

/// The tags code of a record (FORMAT.md 3.3), as [`record_tags_code`] states it, from the
/// properties already read: `None` when a SCHEDULE_TOPIC_XXXX DELAY is not a number.
pub(super) fn fast_tags_code(
    m: &MessageRef<'_>,
    p: &Props<'_>,
    g: &crate::format::geometry::Geometry,
) -> Option<i64> {
    let mut code = match p.tags {
        Some(t) if !t.is_empty() => bytes_hash_extend(0, t) as i64,
        _ => 0,
    };
    if let Some(d) = p.delay.filter(|_| m.topic == SCHEDULE_TOPIC) {
        let level = crate::format::java::parse_int(&String::from_utf8_lossy(d))?;
        let level = level.min(g.max_delay_level());
        if level > 0 {
            code = crate::engine::store::dispatch::deliver_timestamp(g, level, m.store_timestamp);
        }
    }
    Some(code)
}

/// A name's first and last eight bytes as words (they overlap for names of 9 to 15 bytes); a
/// name shorter than eight bytes is one zero-padded word.
#[inline]
fn end_words(name: &[u8]) -> (u64, u64) {
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

/// The maps of `verify`'s per-record lookups (topic names, queue ids, paths).
pub(super) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// The index hash of `topic#key` (`IndexFile.indexKeyHashMethod`) from the hash of `topic#`.
fn index_hash(prefix: i32, key: &[u8]) -> i32 {
    let h = bytes_hash_extend(prefix, key).wrapping_abs();
    if h < 0 {
        0
    } else {
        h
    }
}

/// The Java hash of `topic#`, from which the index hash of each key of the topic continues.
pub(super) fn topic_prefix_hash(topic: &str) -> i32 {
    bytes_hash_extend(0, topic.as_bytes())
        .wrapping_mul(31)
        .wrapping_add('#' as i32)
}

/// The index key hashes of a record in the broker's order (UNIQ_KEY, then each KEYS element);
/// empty for ROLLBACK records. `prefix` is [`topic_prefix_hash`] of the record's topic.
pub(super) fn expected_index_keys(
    m: &MessageRef<'_>,
    p: &Props<'_>,
    prefix: i32,
    out: &mut Vec<i32>,
) {
    out.clear();
    if m.transaction_type() == TransactionType::Rollback {
        return;
    }
    if let Some(u) = p.uniq {
        out.push(index_hash(prefix, u));
    }
    match p.keys {
        // Usually a single key.
        Some(k) if !k.is_empty() && !has_space(k) => out.push(index_hash(prefix, k)),
        Some(k) => {
            for key in k.split(|&b| b == b' ').filter(|s| !s.is_empty()) {
                out.push(index_hash(prefix, key));
            }
        }
        None => {}
    }
}

/// True when `b` holds a space (the KEYS separator). Up to 16 bytes are tested as two
/// overlapping words, without a loop.
pub(super) fn has_space(b: &[u8]) -> bool {
    const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const TOPS: u64 = u64::from_ne_bytes([0x80; 8]);
    // A byte of `w` is zero exactly when this has its top bit set somewhere.
    let any_zero = |w: u64| w.wrapping_sub(ONES) & !w & TOPS != 0;
    match (b.first_chunk::<8>(), b.last_chunk::<8>()) {
        (Some(f), Some(l)) if b.len() <= 16 => {
            any_zero(u64::from_ne_bytes(*f) ^ SPACES) || any_zero(u64::from_ne_bytes(*l) ^ SPACES)
        }
        _ => b.contains(&b' '),
    }
}

/// The index keys of a record as text, in the order of [`expected_index_keys`].
pub(super) fn index_key_texts(p: &Props<'_>) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(u) = p.uniq {
        v.push(String::from_utf8_lossy(u).into_owned());
    }
    if let Some(k) = p.keys {
        for key in k.split(|&b| b == b' ').filter(|s| !s.is_empty()) {
            v.push(String::from_utf8_lossy(key).into_owned());
        }
    }
    v
}

/// True for records that a broker re-put (delayed delivery, retries, transactions, 5.x batch
/// properties): their UNIQ_KEY repeats by design. `system_topic` is [`is_system_topic`] of the
/// record's topic.
pub(super) fn is_reput(m: &MessageRef<'_>, p: &Props<'_>, system_topic: bool) -> bool {
    system_topic
        || p.real_topic
        || p.retry_topic
        || p.tx_check
        || p.uniq_count > 1
        || m.transaction_type() != TransactionType::Not
}

// ---------------------------------------------------------------------------------------------
// Duplicate UNIQ_KEY window: see [`dups`].

/// A 64-bit hash of a UNIQ_KEY.
pub(super) fn key_hash64(key: &[u8]) -> u64 {
    /// The high and low halves of the 128-bit product, folded.
    fn fold(a: u64, b: u64) -> u64 {
        let p = u128::from(a) * u128::from(b);
        (p >> 64) as u64 ^ p as u64
    }
    // The usual UNIQ_KEY is 32 hex digits: its four words in two independent products.
    if let Ok(w) = <&[u8; 32]>::try_from(key) {
        let word = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(w.get(i * 8..i * 8 + 8).unwrap_or(&[0; 8]));
            u64::from_le_bytes(a)
        };
        let x = fold(
            word(0) ^ 0xA076_1D64_78BD_642F,
            word(1) ^ 0xE703_7ED1_A0B4_28DB,
        );
        let y = fold(
            word(2) ^ 0x8EBC_6AF0_9C88_C6E3,
            word(3) ^ 0x5899_65CC_7537_4CC3,
        );
        return fold(x ^ 0x1D8E_4E27_C47D_124F, y ^ 32);
    }
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(key)
}
