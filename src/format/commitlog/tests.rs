//! Golden bytes from FORMAT.md and round trips over random messages.

use proptest::prelude::*;

use super::read::{message_in, parse_message, parse_message_by_fields, parse_record, Record};
use super::write::blank_record;
use super::*;

/// The worked example of FORMAT.md 2.9, byte for byte.
const EXAMPLE_HEX: &str = "0000008BDAA320A769C865ED00000001\
0000000000000000000000000000000000000000000000000000018BCFE56800\
C0A8000A0000D431000001 8BCFE5687B\
C0A8001400002A9F0000000000000000\
000000000000000E48656C6C6F20526F\
636B65744D51095"; // continued below

fn example_bytes() -> Vec<u8> {
    let hex = "0000008B DAA320A7 69C865ED 00000001\
               00000000 00000000 00000000 00000000\
               00000000 00000000 0000018B CFE56800\
               C0A8000A 0000D431 0000018B CFE5687B\
               C0A80014 00002A9F 00000000 00000000\
               00000000 0000000E 48656C6C 6F20526F\
               636B6574 4D510954 6F706963 54657374\
               00194B45 5953014F 72646572 49443138\
               38025441 47530154 616741";
    let clean: String = hex.chars().filter(|c| !c.is_whitespace()).collect();
    crate::format::msgid::from_hex(&clean).unwrap()
}

fn example_message() -> Message {
    Message {
        topic: "TopicTest".into(),
        queue_id: 1,
        flag: 0,
        queue_offset: 0,
        physical_offset: 0,
        sys_flag: 0,
        born_timestamp: 1700000000000,
        born_host: Host::v4([192, 168, 0, 10], 54321),
        store_timestamp: 1700000000123,
        store_host: Host::v4([192, 168, 0, 20], 10911),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: b"Hello RocketMQ".to_vec(),
        properties: encode_properties(&[("KEYS", "OrderID188"), ("TAGS", "TagA")], false),
        version: MessageVersion::V1,
    }
}

#[test]
fn worked_example_encodes_to_golden_bytes() {
    let _ = EXAMPLE_HEX;
    let golden = example_bytes();
    assert_eq!(golden.len(), 139);
    let m = example_message();
    assert_eq!(m.encoded_len(), 139);
    assert_eq!(m.encode().unwrap(), golden);
}

#[test]
fn a_record_read_alone_is_a_message_at_its_offset() {
    let golden = example_bytes();
    let m = message_in(&golden, 4096).unwrap();
    assert_eq!((m.position, m.topic.as_ref()), (4096, "TopicTest"));
    assert!(message_in(&golden, -1).is_none());
    assert!(message_in(&blank_record(64), 0).is_none());
    assert!(message_in(&golden[..100], 0).is_none());
}

#[test]
fn worked_example_decodes() {
    let golden = example_bytes();
    let Record::Message(r) = parse_record(&golden, 0, 0, true).unwrap() else {
        panic!("not a message");
    };
    assert_eq!(r.total_size, 139);
    assert_eq!(r.body_crc, 0x69C865ED);
    assert_eq!(r.topic, "TopicTest");
    assert_eq!(r.queue_id, 1);
    assert_eq!(r.body, b"Hello RocketMQ");
    assert_eq!(r.tags().as_deref(), Some("TagA"));
    assert_eq!(r.keys(), vec!["OrderID188".to_string()]);
    assert_eq!(r.born_host.to_string(), "192.168.0.10:54321");
    assert_eq!(r.store_timestamp, 1700000000123);
    assert_eq!(r.offset_msg_id(), "C0A8001400002A9F0000000000000000");
    assert_eq!(crate::format::java::tags_code("TagA"), 2598919);
    assert_eq!(r.to_owned_message(), example_message());
}

#[test]
fn ipv6_hosts_shift_fields_and_set_flags() {
    let mut m = example_message();
    m.born_host = Host::new("fd00::21".parse().unwrap(), 50000);
    m.store_host = Host::new("fd00::1".parse().unwrap(), 10911);
    let b = m.encode().unwrap();
    assert_eq!(b.len(), 139 + 24);
    let sys = i32::from_be_bytes(b[36..40].try_into().unwrap());
    assert_eq!(sys, sysflag::BORNHOST_V6 | sysflag::STOREHOST_V6);
    // born host: 16 address bytes then the port, at 48
    assert_eq!(b[48], 0xFD);
    assert_eq!(&b[64..68], &50000i32.to_be_bytes());
    // store timestamp moved by 12
    assert_eq!(&b[68..76], &1700000000123i64.to_be_bytes());
    let Record::Message(r) = parse_record(&b, 0, 0, true).unwrap() else {
        panic!()
    };
    assert_eq!(r.born_host, m.born_host);
    assert_eq!(r.store_host, m.store_host);
    assert_eq!(r.offset_msg_id().len(), 56);
    assert_eq!(r.raw, &b[..]);
}

#[test]
fn version_2_topic_length() {
    let mut m = example_message();
    m.topic = format!("%RETRY%{}", "g".repeat(150));
    assert!(matches!(
        m.encode(),
        Err(write::EncodeError::TopicTooLong(157))
    ));
    m.version = MessageVersion::for_topic(&m.topic);
    assert_eq!(m.version, MessageVersion::V2);
    let b = m.encode().unwrap();
    assert_eq!(&b[4..8], &[0xDA, 0xA3, 0x20, 0xAB]);
    assert_eq!(b.len(), 139 - 9 + 157 + 1);
    let Record::Message(r) = parse_record(&b, 0, 0, true).unwrap() else {
        panic!()
    };
    assert_eq!(r.version, MessageVersion::V2);
    assert_eq!(r.topic, m.topic);
}

#[test]
fn blank_and_end_of_data() {
    let mut file = example_bytes();
    let left = 200 - file.len();
    file.extend_from_slice(&blank_record(left as i32));
    file.resize(200, 0);
    assert_eq!(&blank_record(61), &[0, 0, 0, 61, 0xCB, 0xD4, 0x31, 0x94]);
    let p = std::path::Path::new("00000000000000000000");
    let s = Segment::commitlog(p.into(), 0, 0);
    let mut it = RecordIter::new(&file, &s, true);
    assert_eq!(it.by_ref().count(), 1);
    assert_eq!(it.end(), &SegmentEnd::Blank { pos: 139, size: 61 });

    let mut zeros = example_bytes();
    zeros.resize(300, 0);
    let s = Segment::commitlog(p.into(), 0, 0);
    let mut it = RecordIter::new(&zeros, &s, true);
    assert_eq!(it.by_ref().count(), 1);
    assert_eq!(it.end(), &SegmentEnd::EndOfData { pos: 139 });
    // fewer than 8 bytes left is also end of data
    let s = Segment::commitlog(p.into(), 0, 0);
    let mut it = RecordIter::new(&zeros[..143], &s, true);
    assert_eq!(it.by_ref().count(), 1);
    assert_eq!(it.end(), &SegmentEnd::EndOfData { pos: 139 });
}

#[test]
fn corruption_is_reported_with_offsets() {
    let p = std::path::Path::new("commitlog/00000000000000001000");
    let mut two = example_bytes();
    two.extend_from_slice(&example_bytes());
    // flip a body bit of the second record
    let mut b = two.clone();
    b[139 + 90] ^= 1;
    let s = Segment::commitlog(p.into(), 1000, 0);
    let mut it = RecordIter::new(&b, &s, true);
    assert!(it.next().unwrap().is_ok());
    let e = it.next().unwrap().unwrap_err().to_string();
    assert!(e.contains("at byte 139") && e.contains("CRC"), "{e}");
    assert!(e.contains("commitlog/00000000000000001000"), "{e}");
    assert_eq!(it.end(), &SegmentEnd::Corrupt { pos: 139 });
    // without CRC checking the record reads
    assert_eq!(
        RecordIter::new(&b, &Segment::commitlog(p.into(), 1000, 0), false).count(),
        2
    );
    // bad magic
    let mut b = two.clone();
    b[139 + 5] = 0;
    let e = RecordIter::new(&b, &Segment::commitlog(p.into(), 0, 0), true)
        .nth(1)
        .unwrap()
        .unwrap_err();
    assert!(e.to_string().contains("bad magic"), "{e}");
    // a size past the end of the file
    let mut b = two.clone();
    b[139 + 2] = 0x7F;
    let e = RecordIter::new(&b, &Segment::commitlog(p.into(), 0, 0), true)
        .nth(1)
        .unwrap()
        .unwrap_err();
    assert!(e.to_string().contains("expected"), "{e}");
    // a size that disagrees with the fields
    let mut b = two.clone();
    b.extend_from_slice(&[0; 4]);
    b[139 + 3] += 4;
    let e = RecordIter::new(&b, &Segment::commitlog(p.into(), 0, 0), true)
        .nth(1)
        .unwrap()
        .unwrap_err();
    assert!(e.to_string().contains("add up to 139"), "{e}");
    // a negative topic length (byte 0x80)
    let mut b = example_bytes();
    b[0x66] = 0x80;
    let e = RecordIter::new(&b, &Segment::commitlog(p.into(), 0, 0), false)
        .next()
        .unwrap()
        .unwrap_err();
    assert!(e.to_string().contains("at byte 102"), "{e}");
}

#[test]
fn properties_parse_like_java() {
    let p = Properties(b"A\x01x\x02\x01y\x02B\x01\x02C\x01v\x01w\x02A\x01z");
    let pairs: Vec<(String, String)> = p
        .iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            ("A".into(), "x".into()),
            ("C".into(), "v\x01w".into()),
            ("A".into(), "z".into())
        ]
    );
    assert_eq!(p.get("A").as_deref(), Some("z"));
    assert_eq!(p.get("B"), None);
    assert!(!p.has_trailing_separator());
    assert_eq!(split_keys(Some(" a  b ")), vec!["a", "b"]);
    assert_eq!(
        encode_properties(&[("a", "1"), ("b", "2")], true),
        b"a\x011\x02b\x012\x02"
    );
}

fn arb_host() -> impl Strategy<Value = Host> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<i32>()).prop_map(|(a, p)| Host::v4(a, p)),
        (any::<[u8; 16]>(), any::<i32>()).prop_map(|(a, p)| Host::from_v6_bytes(a, p)),
    ]
}

prop_compose! {
    fn arb_message()(
        topic in "[A-Za-z0-9%|_-]{1,200}",
        queue_id in any::<i32>(), flag in any::<i32>(), queue_offset in any::<i64>(),
        physical_offset in any::<i64>(), sys_flag in any::<i32>(),
        born_timestamp in any::<i64>(), born_host in arb_host(),
        store_timestamp in any::<i64>(), store_host in arb_host(),
        reconsume_times in any::<i32>(), pto in any::<i64>(),
        body in proptest::collection::vec(any::<u8>(), 0..300),
        props in proptest::collection::vec(("[a-zA-Z_]{1,10}", "[^\u{1}\u{2}]{1,20}"), 0..6),
        trailing in any::<bool>(),
    ) -> Message {
        Message {
            version: MessageVersion::for_topic(&topic),
            topic, queue_id, flag, queue_offset, physical_offset, sys_flag, born_timestamp,
            born_host, store_timestamp, store_host, reconsume_times,
            prepared_transaction_offset: pto, body,
            properties: encode_properties(&props, trailing),
        }
    }
}

proptest! {
    #[test]
    fn encode_decode_round_trip(m in arb_message()) {
        let b = m.encode().unwrap();
        prop_assert_eq!(b.len(), m.encoded_len());
        let Ok(Record::Message(r)) = parse_record(&b, 0, 0, true) else {
            return Err(TestCaseError::fail("does not parse"));
        };
        let back = r.to_owned_message();
        prop_assert_eq!(back.stored_sys_flag(), m.stored_sys_flag());
        prop_assert_eq!(Message { sys_flag: m.stored_sys_flag(), ..m.clone() }, back.clone());
        prop_assert_eq!(back.encode().unwrap(), b);
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400), start in 0usize..64) {
        let p = std::path::Path::new("x");
        let s = Segment::commitlog(p.into(), 0, 0);
        let it = RecordIter::starting_at(&bytes, &s, start.min(bytes.len()), true);
        for r in it { let _ = r; }
    }

    /// The fixed-offset decoder of the usual layout says what the field-by-field one says, for
    /// every record, damaged or not (a changed byte, a cut, any version and host kind).
    #[test]
    fn fixed_offset_decoder_agrees_with_the_field_by_field_one(
        m in arb_message(), at in any::<usize>(), val in any::<u8>(), cut in any::<usize>(),
        damage in 0u8..3,
    ) {
        let mut b = m.encode().unwrap();
        if damage > 0 {
            let i = at % b.len();
            b[i] = val;
        }
        if damage > 1 {
            b.truncate(cut % (b.len() + 1));
        }
        let fast = format!("{:?}", parse_message(&b, 7, 1000, m.version));
        let slow = format!("{:?}", parse_message_by_fields(&b, 7, 1000, m.version));
        prop_assert_eq!(fast, slow);
    }

    #[test]
    fn mutated_records_never_panic(m in arb_message(), at in any::<usize>(), val in any::<u8>(), cut in any::<usize>()) {
        let mut b = m.encode().unwrap();
        let i = at % b.len();
        b[i] = val;
        b.truncate(cut % (b.len() + 1));
        let _ = parse_record(&b, 0, 0, true);
    }
}

/// `Properties::iter_raw` is the split-based definition, found with memchr.
#[test]
fn property_pairs_are_the_split_definition() {
    fn plain(b: &[u8]) -> Vec<(&[u8], &[u8])> {
        b.split(|&c| c == 2)
            .filter_map(|seg| {
                let i = seg.iter().position(|&c| c == 1)?;
                (i > 0 && i + 1 < seg.len()).then(|| (&seg[..i], &seg[i + 1..]))
            })
            .collect()
    }
    let bytes = proptest::collection::vec(prop_oneof![Just(1u8), Just(2u8), 97u8..100], 0..40);
    proptest!(ProptestConfig::with_cases(4096), |(b in bytes)| {
        let fast: Vec<_> = Properties(&b).iter_raw().collect();
        prop_assert_eq!(fast, plain(&b));
    });
}
