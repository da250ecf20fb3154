//! Java semantics the formats depend on: `String.hashCode`, the masked body CRC, `parseInt`.

/// Java `String.hashCode()`: over UTF-16 code units, wrapping `h = 31*h + unit`.
pub fn string_hash(s: &str) -> i32 {
    string_hash_extend(0, s)
}

/// Java `String.hashCode` continued from `h` over `s` (the hash of a concatenation).
pub fn string_hash_extend(h: i32, s: &str) -> i32 {
    ascii_hash_extend(h, s.as_bytes()).unwrap_or_else(|| utf16_hash_extend(h, s))
}

/// The plain definition: `h * 31 + unit` over the UTF-16 units (the reference the ASCII fast
/// path is tested against).
pub fn utf16_hash_extend(h: i32, s: &str) -> i32 {
    s.encode_utf16()
        .fold(h, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// Java `String.hashCode()` of bytes decoded as UTF-8 the way Java's decoder does
/// (malformed sequences become U+FFFD).
pub fn bytes_hash(b: &[u8]) -> i32 {
    bytes_hash_extend(0, b)
}

/// [`bytes_hash`] continued from `h`.
pub fn bytes_hash_extend(h: i32, b: &[u8]) -> i32 {
    ascii_hash_extend(h, b).unwrap_or_else(|| string_hash_extend(h, &String::from_utf8_lossy(b)))
}

/// Java `String.hashCode` continued from `h` over `b`, when `b` is ASCII (one UTF-16 unit per
/// byte); `None` otherwise. Sixteen bytes a step: `h * 31^16 + c0 * 31^15 + ... + c15`, the
/// sixteen products independent of each other.
pub fn ascii_hash_extend(h: i32, b: &[u8]) -> Option<i32> {
    let mut h = h;
    let mut blocks = b.chunks_exact(16);
    for block in blocks.by_ref() {
        h = hash16(h, block.first_chunk::<16>()?, 16)?;
    }
    let rest = blocks.remainder();
    if b.len() >= 16 {
        // The last bytes as the end of a 16-byte block whose first bytes (already hashed) are
        // zeroed: zeros add nothing, so the block is worth the bytes alone.
        let last = b.last_chunk::<16>()?;
        let mut block = [0u8; 16];
        let keep = 16 - rest.len();
        for (i, (d, s)) in block.iter_mut().zip(last).enumerate() {
            *d = if i >= keep { *s } else { 0 };
        }
        return hash16(h, &block, rest.len());
    }
    if let (Some(lo), Some(hi)) = (rest.first_chunk::<8>(), rest.last_chunk::<8>()) {
        // 8 to 15 bytes, from two overlapping words, moved to the end of the block.
        let pad = 8 * (16 - rest.len() as u32);
        let bytes = u128::from(u64::from_le_bytes(*lo))
            | u128::from(u64::from_le_bytes(*hi).checked_shr(pad).unwrap_or(0)) << 64;
        return hash16(h, &(bytes << pad).to_le_bytes(), rest.len());
    }
    rest.iter().try_fold(h, |h, &c| {
        c.is_ascii()
            .then(|| h.wrapping_mul(31).wrapping_add(i32::from(c)))
    })
}

/// 31^15 .. 31^0 (wrapping, as Java's int arithmetic).
const POWERS16: [i32; 16] = {
    let mut p = [1i32; 16];
    let mut i = 15;
    while i > 0 {
        p[i - 1] = p[i].wrapping_mul(31);
        i -= 1;
    }
    p
};

/// 31^n for n in 0..=16.
const POWER_OF: [i32; 17] = {
    let mut p = [1i32; 17];
    let mut i = 1;
    while i <= 16 {
        p[i] = p[i - 1].wrapping_mul(31);
        i += 1;
    }
    p
};

/// `h * 31^n + sum(block[i] * 31^(15 - i))`, where the block's first `16 - n` bytes are zero;
/// `None` when a byte is not ASCII.
///
/// Each power is split as `hi * 2^16 + lo` with both halves i16 (`lo` sign-extended), so that
/// `c * p = c * lo + 2^16 * (c * hi)` modulo 2^32; the bytes widened to i16 are then multiplied
/// with the halves and added in pairs exactly (PMADDWD on x86_64).
#[inline]
fn hash16(h: i32, block: &[u8; 16], n: usize) -> Option<i32> {
    use wide::{i16x8, u8x16};
    const fn halves(first: usize, high: bool) -> [i16; 8] {
        let mut out = [0i16; 8];
        let mut i = 0;
        while i < 8 {
            let p = POWERS16[first + i];
            let lo = p as i16;
            out[i] = if high {
                (p.wrapping_sub(lo as i32) >> 16) as i16
            } else {
                lo
            };
            i += 1;
        }
        out
    }
    const LO_A: [i16; 8] = halves(0, false);
    const HI_A: [i16; 8] = halves(0, true);
    const LO_B: [i16; 8] = halves(8, false);
    const HI_B: [i16; 8] = halves(8, true);

    let v = u8x16::new(*block);
    if v.move_mask() != 0 {
        return None;
    }
    let a = i16x8::from_u8x16_low(v);
    let b = i16x8::from_u8x16_high(v);
    let low = a.dot(i16x8::new(LO_A)) + b.dot(i16x8::new(LO_B));
    let high = a.dot(i16x8::new(HI_A)) + b.dot(i16x8::new(HI_B));
    let sum = (low + (high << 16i32)).reduce_add();
    Some(h.wrapping_mul(*POWER_OF.get(n)?).wrapping_add(sum))
}

/// The tags code of a TAGS value: its hash sign-extended to i64; empty gives 0
/// (`MessageExtBrokerInner.tagsString2tagsCode`).
pub fn tags_code(tags: &str) -> i64 {
    if tags.is_empty() {
        0
    } else {
        string_hash(tags) as i64
    }
}

/// `UtilAll.crc32`: CRC-32 (zlib) masked to 31 bits, as stored in BODYCRC.
pub fn masked_crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data) & 0x7FFF_FFFF
}

/// Java `Integer.parseInt`: optional sign, ASCII digits only, no whitespace, must fit an i32.
pub fn parse_int(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i32>().ok()
}

/// Java `Long.parseLong`, same rules as [`parse_int`] for i64.
pub fn parse_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_hash_vectors() {
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("TagA"), 2598919);
        assert_eq!(string_hash("TopicTest#OrderID188"), -1231271670);
        assert_eq!(string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(string_hash("😀"), 1772899);
    }

    #[test]
    fn ascii_hash_continues_string_hash() {
        let text: Vec<u8> = (0..100u32).map(|i| b' ' + (i * 37 % 95) as u8).collect();
        for len in 0..text.len() {
            for start in [0i32, 7, -123_456_789] {
                let b = &text[..len];
                let s = std::str::from_utf8(b).unwrap();
                let want = s
                    .chars()
                    .flat_map(|c| c.encode_utf16(&mut [0; 2]).to_vec())
                    .fold(start, |h, u| h.wrapping_mul(31).wrapping_add(u as i32));
                assert_eq!(ascii_hash_extend(start, b), Some(want), "{len} bytes");
            }
        }
        for len in 1..40 {
            for at in 0..len {
                let mut b = vec![b'k'; len];
                b[at] = 0xC3;
                assert_eq!(ascii_hash_extend(0, &b), None, "{len} bytes, {at}");
            }
        }
        assert_eq!(
            ascii_hash_extend(0, b"TopicTest#OrderID188"),
            Some(-1231271670)
        );
        assert_eq!(ascii_hash_extend(0, b"polygenelubricants"), Some(i32::MIN));
    }

    #[test]
    fn crc_vectors() {
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF43926);
        assert_eq!(masked_crc32(b"123456789"), 1274296614);
        assert_eq!(masked_crc32(b""), 0);
        assert_eq!(masked_crc32(b"Hello RocketMQ"), 0x69C865ED);
    }

    #[test]
    fn parse_int_like_java() {
        assert_eq!(parse_int("3"), Some(3));
        assert_eq!(parse_int("+3"), Some(3));
        assert_eq!(parse_int("-1"), Some(-1));
        assert_eq!(parse_int(" 3"), None);
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_int("+"), None);
        assert_eq!(parse_int("99999999999"), None);
        assert_eq!(tags_code(""), 0);
        assert_eq!(tags_code("TagA"), 2598919);
    }
}
