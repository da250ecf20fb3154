//! JSON strings as serde_json writes them, sixteen bytes at a time (see [`string`]). [`string_plain`] is the byte-at-a-time version
//! and the tests hold the two to serde_json's own output. What the word test buys: on the text
//! bodies of a generated store, `dump commitlog --json` spends about a quarter of its time here
//! byte at a time (see `scripts/bench.sh`).

/// What each byte becomes in a JSON string: 0 for itself, `u` for `\u00XX`, else the letter
/// after the backslash.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = b'u';
        b += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const LOWER_HEX: &[u8; 16] = b"0123456789abcdef";

/// `\u00XX` for a control byte, as serde_json writes it (lowercase hex).
fn unicode_escape(b: u8) -> [u8; 6] {
    [
        b'\\',
        b'u',
        b'0',
        b'0',
        LOWER_HEX[(b >> 4) as usize],
        LOWER_HEX[(b & 15) as usize],
    ]
}

/// `s` as a quoted JSON string, byte at a time.
#[cfg(test)]
pub fn string_plain(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for &b in s.as_bytes() {
        match ESCAPE[b as usize] {
            0 => out.push(b),
            b'u' => out.extend_from_slice(&unicode_escape(b)),
            e => out.extend_from_slice(&[b'\\', e]),
        }
    }
    out.push(b'"');
}

/// Bits `i` set when byte `i` of `c` is to be escaped (below 0x20, `"` or `\\`), and when it is
/// below 0x20: three SIMD compares.
fn escape_masks(c: [u8; 16]) -> (u16, u16) {
    use wide::u8x16;
    let v = u8x16::new(c);
    let control = v.min(u8x16::splat(0x1f)).cmp_eq(v);
    let quote = v.cmp_eq(u8x16::splat(b'"'));
    let backslash = v.cmp_eq(u8x16::splat(b'\\'));
    (
        (control | quote | backslash).move_mask() as u16,
        control.move_mask() as u16,
    )
}

/// Bytes an escape adds to its byte.
fn added(e: u8) -> usize {
    match e {
        0 => 0,
        b'u' => 5,
        _ => 1,
    }
}

/// Write `b` (escaped as `e`) at `w` of `dst`; returns where the next byte goes.
#[inline(always)]
fn put(dst: &mut [u8], w: usize, b: u8, e: u8) -> usize {
    match e {
        0 => {
            dst[w] = b;
            w + 1
        }
        b'u' => {
            dst[w..w + 6].copy_from_slice(&unicode_escape(b));
            w + 6
        }
        _ => {
            dst[w] = b'\\';
            dst[w + 1] = e;
            w + 2
        }
    }
}

/// `s` as a quoted JSON string. A first pass counts what the escapes add (16 bytes a compare);
/// the second writes into that exact room, 16 bytes at a time: each block is copied whole, then
/// for each `"` or `\\` in it, the bytes from it on are copied again one place further on, after
/// the backslash put in its place (a block with a control byte goes byte by byte). No branch
/// depends on where in a block the escapes are.
pub fn string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let chunks = bytes.chunks_exact(16);
    let mut extra: usize = chunks
        .remainder()
        .iter()
        .map(|&b| added(ESCAPE[b as usize]))
        .sum();
    for c in chunks {
        let c: [u8; 16] = c.try_into().unwrap_or_default();
        extra += match escape_masks(c) {
            (all, 0) => all.count_ones() as usize,
            _ => c.iter().map(|&b| added(ESCAPE[b as usize])).sum(),
        };
    }
    if extra == 0 {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let base = out.len();
    out.resize(base + bytes.len() + extra + 2, 0);
    let dst = &mut out[base..];
    dst[0] = b'"';
    // `w - r` is 1 plus what the escapes so far added, so the copies below stay inside the
    // room counted while 32 bytes from `r` are left to read
    let (mut r, mut w) = (0, 1);
    while r + 32 <= bytes.len() {
        let c: [u8; 16] = bytes[r..r + 16].try_into().unwrap_or_default();
        dst[w..w + 16].copy_from_slice(&c);
        match escape_masks(c) {
            (0, _) => w += 16,
            (mut all, 0) => {
                let mut shift = 0;
                while all != 0 {
                    let t = all.trailing_zeros() as usize;
                    let at = w + shift + t;
                    dst[at + 1..at + 17].copy_from_slice(&bytes[r + t..r + t + 16]);
                    dst[at] = b'\\';
                    shift += 1;
                    all &= all - 1;
                }
                w += 16 + shift;
            }
            _ => {
                for b in c {
                    w = put(dst, w, b, ESCAPE[b as usize]);
                }
            }
        }
        r += 16;
    }
    for &b in &bytes[r..] {
        w = put(dst, w, b, ESCAPE[b as usize]);
    }
    dst[w] = b'"';
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_mask_is_the_table_for_every_byte_in_every_place() {
        for b in 0..=255u8 {
            for place in 0..16 {
                let mut c = [b'a'; 16];
                c[place] = b;
                let bit = |yes: bool| if yes { 1 << place } else { 0 };
                assert_eq!(
                    escape_masks(c),
                    (bit(ESCAPE[b as usize] != 0), bit(b < 0x20)),
                    "{b:#x} at {place}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]
        #[test]
        fn both_write_what_serde_json_writes(s in "\\PC{0,40}|[\\x00-\\x7f]{0,100}|[ab\"\\\\]{0,100}|[a\"\\\\\\n]{0,70}") {
            let serde = serde_json::to_vec(&s).unwrap();
            let (mut fast, mut plain) = (Vec::new(), Vec::new());
            string(&mut fast, &s);
            string_plain(&mut plain, &s);
            prop_assert_eq!(&plain, &serde);
            prop_assert_eq!(&fast, &serde);
        }
    }
}
