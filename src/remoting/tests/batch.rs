//! The SEND_BATCH_MESSAGE body against bytes worked out by hand from `MessageDecoder.encodeMessage`
//! (TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLEN + BODY, PROPLEN (i16) + PROPERTIES), and
//! bodies that lie about their lengths.

use super::hex;
use crate::remoting::batch::*;

fn items() -> [BatchItem<'static>; 2] {
    [
        BatchItem {
            flag: 0,
            body: b"ab",
            properties: b"UNIQ_KEY\x01X",
        },
        BatchItem {
            flag: 7,
            body: b"",
            properties: b"",
        },
    ]
}

/// 22 fixed bytes + 2 body + 10 properties = 34, then 22 bytes of an empty message.
const BYTES: &str = "
    00000022 00000000 00000000 00000000 00000002 6162 000a 554e49515f4b4559 01 58
    00000016 00000000 00000000 00000007 00000000 0000";

#[test]
fn a_batch_body_is_the_messages_as_encode_message_writes_them() {
    let body = encode(&items()).unwrap();
    assert_eq!(body, hex(BYTES));
    assert_eq!(body.capacity(), body.len(), "allocated once, at its size");
    assert_eq!(decode(&body).unwrap(), items().to_vec());
    assert_eq!(item_len(2, 10), 34);
}

#[test]
fn properties_over_32767_bytes_cannot_be_batched() {
    let long = vec![b'p'; MAX_PROPERTIES_LEN + 1];
    let mut v = items().to_vec();
    v[1].properties = &long;
    assert_eq!(
        encode(&v).unwrap_err(),
        BatchError::PropertiesTooLong {
            index: 1,
            len: 32768
        }
    );
    v[1].properties = &long[..MAX_PROPERTIES_LEN];
    let body = encode(&v).unwrap();
    assert_eq!(
        decode(&body).unwrap()[1].properties.len(),
        MAX_PROPERTIES_LEN
    );
}

#[test]
fn a_batch_body_that_lies_about_its_lengths_is_refused_where_it_lies() {
    let good = hex(BYTES);
    // cut inside the second message's properties length
    let e = decode(&good[..good.len() - 1]).unwrap_err();
    assert_eq!(
        e,
        BatchError::Truncated {
            field: "PROPLEN",
            offset: 54,
            need: 2,
            have: 1
        }
    );
    // a body length past the end
    let mut bad = good.clone();
    bad[16..20].copy_from_slice(&1000i32.to_be_bytes());
    assert!(matches!(
        decode(&bad).unwrap_err(),
        BatchError::Truncated {
            field: "BODY",
            offset: 20,
            need: 1000,
            ..
        }
    ));
    // a negative body length
    bad[16..20].copy_from_slice(&(-1i32).to_be_bytes());
    assert!(matches!(
        decode(&bad).unwrap_err(),
        BatchError::Negative {
            field: "BODYLEN",
            offset: 16,
            value: -1
        }
    ));
    // TOTALSIZE that disagrees with the fields
    let mut bad = good;
    bad[34..38].copy_from_slice(&23i32.to_be_bytes());
    assert_eq!(
        decode(&bad).unwrap_err(),
        BatchError::SizeMismatch {
            offset: 34,
            total: 23,
            actual: 22
        }
    );
}
