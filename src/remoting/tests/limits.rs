//! Hostile headers: many extFields in either form are refused in linear time, a header over the
//! codec's limit is refused from the frame's first 8 bytes, and a receive buffer made of frames
//! with mangled headers never panics the decoder nor yields more than the limits allow.

use proptest::prelude::*;

use super::frame_bytes;
use crate::remoting::command::{binary, json, MAX_EXT_FIELDS};
use crate::remoting::frame::{DEFAULT_MAX_HEADER, MAX_HEADER_LEN};
use crate::remoting::*;

/// A binary header whose extFields map holds `n` entries `k<i> = v`.
fn binary_header(n: usize, key: impl Fn(usize) -> String) -> Vec<u8> {
    let mut ext = Vec::new();
    for i in 0..n {
        let k = key(i);
        ext.extend_from_slice(&(k.len() as i16).to_be_bytes());
        ext.extend_from_slice(k.as_bytes());
        ext.extend_from_slice(&1i32.to_be_bytes());
        ext.push(b'v');
    }
    let mut h = vec![0, 11, 0, 1, 0x99, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    h.extend_from_slice(&(ext.len() as i32).to_be_bytes());
    h.extend_from_slice(&ext);
    h
}

/// A JSON header whose extFields object holds `n` entries.
fn json_header(n: usize) -> Vec<u8> {
    let mut h = String::from(r#"{"code":11,"extFields":{"#);
    for i in 0..n {
        if i > 0 {
            h.push(',');
        }
        h.push_str(&format!(r#""k{i}":"v""#));
    }
    h.push_str(r#"},"flag":0,"opaque":1}"#);
    h.into_bytes()
}

#[test]
fn two_hundred_thousand_ext_fields_are_refused_in_either_form() {
    // the quadratic map took minutes over this many; the limit stops the binary walk early and
    // the JSON form is refused once parsed, in one pass
    let n = 200_000;
    let err = binary::decode(&binary_header(n, |i| format!("k{i}"))).unwrap_err();
    assert!(
        matches!(
            err,
            HeaderError::TooManyFields {
                max: MAX_EXT_FIELDS,
                ..
            }
        ),
        "{err}"
    );
    let err = json::decode(&json_header(n)).unwrap_err();
    assert!(
        matches!(
            err,
            HeaderError::TooManyFields {
                max: MAX_EXT_FIELDS,
                ..
            }
        ),
        "{err}"
    );
    // at the limit both forms are read, every key kept once, in order
    for cmd in [
        binary::decode(&binary_header(MAX_EXT_FIELDS, |i| format!("k{i}"))).unwrap(),
        json::decode(&json_header(MAX_EXT_FIELDS)).unwrap(),
    ] {
        assert_eq!(cmd.ext_fields.len(), MAX_EXT_FIELDS);
        assert_eq!(cmd.ext_fields.iter().next(), Some(("k0", "v")));
        assert_eq!(cmd.ext_fields.get("k1023"), Some("v"));
    }
}

#[test]
fn a_repeated_key_keeps_its_first_place_and_its_last_value() {
    let ext = ExtFields::from_entries(vec![
        ("a".into(), "1".into()),
        ("b".into(), "2".into()),
        ("a".into(), "3".into()),
    ]);
    assert_eq!(ext.iter().collect::<Vec<_>>(), [("a", "3"), ("b", "2")]);
    // the same key over and over is one entry
    let cmd = binary::decode(&binary_header(MAX_EXT_FIELDS, |_| "k".into())).unwrap();
    assert_eq!(cmd.ext_fields.iter().collect::<Vec<_>>(), [("k", "v")]);
}

#[test]
fn a_header_over_the_limit_is_refused_from_the_first_eight_bytes() {
    let codec = FrameCodec::default();
    assert_eq!(codec.max_header(), DEFAULT_MAX_HEADER);
    let header = vec![b' '; DEFAULT_MAX_HEADER + 1];
    let frame = frame_bytes(0, &header, b"");
    assert_eq!(
        codec.decode(&frame[..8]),
        Err(FrameError::HeaderOverLimit {
            header_len: DEFAULT_MAX_HEADER + 1,
            max: DEFAULT_MAX_HEADER
        })
    );
    // a codec with the 24-bit field's limit reads it (and finds no JSON in it)
    let wide = codec.with_max_header(MAX_HEADER_LEN);
    assert!(matches!(
        decode(&wide, &frame),
        Err(Error::Header(HeaderError::Json(_)))
    ));
}

/// One frame of a hostile stream: a binary or JSON header of `n` entries (keys may repeat), with
/// `flips` bytes of it overwritten, and a body.
fn hostile_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        0usize..2 * MAX_EXT_FIELDS,
        1usize..64,
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        proptest::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(|(is_binary, n, keys, flips, body)| {
            let mut header = if is_binary {
                binary_header(n, |i| format!("k{}", i % keys))
            } else {
                json_header(n)
            };
            for (at, b) in flips {
                let i = at.index(header.len());
                header[i] = b;
            }
            frame_bytes(u8::from(is_binary), &header, &body)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The server's loop over a receive buffer: a decoded command never holds more than the
    /// limit nor a key twice; a header error comes with a whole frame (skipped by its length).
    #[test]
    fn hostile_streams_decode_within_the_limits(
        frames in proptest::collection::vec(hostile_frame(), 1..4),
        cut in any::<prop::sample::Index>(),
        max_header in prop_oneof![Just(DEFAULT_MAX_HEADER), 16usize..4096],
    ) {
        let stream = frames.concat();
        let stream = &stream[..cut.index(stream.len() + 1)];
        let codec = FrameCodec::default().with_max_header(max_header);
        let mut rest = stream;
        loop {
            match decode(&codec, rest) {
                Ok(Some((p, used))) => {
                    prop_assert!(p.command.ext_fields.len() <= MAX_EXT_FIELDS);
                    let keys: std::collections::HashSet<_> =
                        p.command.ext_fields.iter().map(|(k, _)| k).collect();
                    prop_assert_eq!(keys.len(), p.command.ext_fields.len());
                    prop_assert!(used <= rest.len());
                    rest = &rest[used..];
                }
                Ok(None) => break,
                Err(Error::Header(_)) => {
                    let n = codec.frame_len(rest).unwrap().unwrap();
                    prop_assert!(n <= rest.len());
                    rest = &rest[n..];
                }
                Err(Error::Frame(e)) => {
                    if let FrameError::HeaderOverLimit { header_len, max } = e {
                        prop_assert!(header_len > max);
                    }
                    break;
                }
            }
        }
    }
}
