//! Arbitrary bytes as one commitlog file: walk it with and without CRC checks. Every record that
//! parses must encode again (`to_owned_message().encode()`) into a record that parses to the same
//! message, byte for byte the same when the original was in canonical form.
#![no_main]

use std::borrow::Cow;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rmqstore::engine::store::dispatch::dispatch;
use rmqstore::format::commitlog::write::EncodeError;
use rmqstore::format::commitlog::{parse_record, MessageRef, Record, RecordIter, SegmentEnd};
use rmqstore::format::error::Error;
use rmqstore::format::geometry::Geometry;
use rmqstore::format::msgid::decode_uniq_key;

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn check_round_trip(m: &MessageRef<'_>) {
    assert_eq!(m.raw.len() as i64, m.total_size as i64);
    let owned = m.to_owned_message();
    let enc = match owned.encode() {
        Ok(enc) => enc,
        Err(e) => {
            // Only a topic that was not UTF-8 (decoded lossily, as Java does) can grow past
            // what its length field holds.
            assert!(matches!(m.topic, Cow::Owned(_)), "{e}: {m:?}");
            assert!(matches!(e, EncodeError::TopicTooLong(_)), "{e}");
            return;
        }
    };
    assert_eq!(enc.len(), owned.encoded_len());
    let again = match parse_record(&enc, 0, m.position, true) {
        Ok(Record::Message(r)) => r,
        other => panic!("re-encoded record does not parse: {other:?}\n{m:?}"),
    };
    assert_eq!(again.to_owned_message(), owned);
    assert_eq!(again.raw, &enc[..]);
    assert!(again.body_crc_ok());
    // Canonical records come back byte for byte: valid UTF-8 topic, right CRC, no negative
    // length fields.
    let body_len = i32_at(m.raw, m.body_len_pos);
    let props_len_pos = m.raw.len() - m.properties.0.len() - 2;
    let props_len = i16::from_be_bytes(m.raw[props_len_pos..props_len_pos + 2].try_into().unwrap());
    if matches!(m.topic, Cow::Borrowed(_)) && m.body_crc_ok() && body_len >= 0 && props_len >= 0 {
        assert_eq!(enc, m.raw, "canonical record changed on re-encode: {m:?}");
    }
}

fn exercise(m: &MessageRef<'_>) {
    let _ = m.tags();
    let _ = m.keys();
    let _ = m.properties.to_map();
    let _ = m.transaction_type();
    let _ = m.offset_msg_id();
    let _ = format!("{} {}", m.born_host, m.store_host);
    if let Some(u) = m.uniq_key() {
        if let Some(k) = decode_uniq_key(&u) {
            let _ = k.nearly_time(m.store_timestamp, &chrono::Utc);
        }
    }
    let _ = dispatch(m, &Geometry::default());
}

fn walk(data: &[u8], start: u64, pos: usize, check_crc: bool) -> usize {
    let path = Path::new("fuzz/00000000000000000000");
    let mut it = RecordIter::starting_at(data, path, start, pos, check_crc);
    let mut n = 0;
    let mut last = pos;
    for r in it.by_ref() {
        match r {
            Ok(m) => {
                assert_eq!(m.position, start + last as u64);
                last += m.raw.len();
                n += 1;
                exercise(&m);
                check_round_trip(&m);
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("fuzz/00000000000000000000: at byte "), "{msg}");
                let Error::Data { offset, .. } = e else {
                    panic!("{e:?}")
                };
                assert!(
                    offset as usize >= last && offset as usize <= data.len(),
                    "{msg}"
                );
            }
        }
    }
    assert_eq!(it.valid_pos(), last);
    match it.end() {
        SegmentEnd::Running => panic!("walk ended while running"),
        SegmentEnd::Corrupt { pos }
        | SegmentEnd::EndOfData { pos }
        | SegmentEnd::Blank { pos, .. } => {
            assert_eq!(*pos, last)
        }
    }
    n
}

fuzz_target!(|data: &[u8]| {
    let with_crc = walk(data, 0, 0, true);
    let without = walk(data, 0, 0, false);
    assert!(with_crc <= without);
    // A file further along the log, and a walk that starts off a record boundary.
    walk(data, 1 << 30, 0, false);
    if !data.is_empty() {
        walk(data, 0, data[0] as usize % 16, false);
    }
});
