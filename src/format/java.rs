//! Java semantics the formats depend on: `String.hashCode`, the masked body CRC, `parseInt`.

/// Java `String.hashCode()`: over UTF-16 code units, wrapping `h = 31*h + unit`.
pub fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// Java `String.hashCode()` of bytes decoded as UTF-8 the way Java's decoder does
/// (malformed sequences become U+FFFD).
pub fn bytes_hash(b: &[u8]) -> i32 {
    string_hash(&String::from_utf8_lossy(b))
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
