//! Java's `Double.valueOf(String)`, for the parser's float literals and the evaluation's
//! coercions.

/// Java `Double.valueOf(String)`: surrounding characters up to U+0020 trimmed, an optional sign,
/// `NaN`, `Infinity`, decimal (`1`, `1.`, `.5`, `1e5`) or hexadecimal (`0x1.8p3`) forms, and an
/// optional `f`/`F`/`d`/`D` suffix.
pub fn java_parse_double(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let v = if body == "NaN" {
        f64::NAN
    } else if body == "Infinity" {
        f64::INFINITY
    } else if body.starts_with("0x") || body.starts_with("0X") {
        parse_hex_double(&body[2..])?
    } else {
        let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
        let b = body.as_bytes();
        let int = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut i = int;
        let mut frac = 0;
        if b.get(i) == Some(&b'.') {
            i += 1;
            frac = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            i += frac;
        }
        if int + frac == 0 {
            return None;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let d = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            if d == 0 {
                return None;
            }
            i += d;
        }
        if i != b.len() {
            return None;
        }
        body.parse::<f64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// The part of a Java hexadecimal float after `0x`: `h[.h]p[+-]d` with an optional suffix.
pub(super) fn parse_hex_double(s: &str) -> Option<f64> {
    let s = s.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(s);
    let (mant, exp) = s.split_once(['p', 'P'])?;
    let exp: i32 = {
        let d = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        if d.is_empty() || !d.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        exp.parse().unwrap_or(if exp.starts_with('-') {
            -100_000
        } else {
            100_000
        })
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.len() + frac.len() == 0 {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars().chain(frac.chars()) {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let shift = exp.saturating_sub(4 * frac.len() as i32);
    Some(v * 2f64.powi(shift))
}
