//! Arbitrary bytes as a consume queue file, a batch consume queue file and an ext file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmqstore::format::consumequeue::batch::{batch_units, find_unit, BatchCqUnit, BATCH_UNIT_SIZE};
use rmqstore::format::consumequeue::ext::{
    ext_addr_to_offset, offset_to_ext_addr, CqExtUnit, MIN_EXT_UNIT_SIZE,
};
use rmqstore::format::consumequeue::{valid_units, CqUnit, UNIT_SIZE};

fn i64_at(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fuzz_target!(|data: &[u8]| {
    // 20-byte units up to the first invalid one.
    let mut n = 0;
    for (pos, u) in valid_units(data) {
        assert_eq!(pos, n * UNIT_SIZE);
        assert!(u.is_valid());
        assert_eq!(&u.to_bytes()[..], &data[pos..pos + UNIT_SIZE]);
        assert_eq!(CqUnit::from_bytes(&u.to_bytes()), Some(u));
        let _ = (u.is_pre_blank(), u.has_ext_addr());
        n += 1;
    }
    assert!(n <= data.len() / UNIT_SIZE);
    if let Some(u) = data.get(n * UNIT_SIZE..).and_then(CqUnit::from_bytes) {
        assert!(!u.is_valid());
    }

    // 46-byte batch units, and the broker's binary search over them.
    let units: Vec<BatchCqUnit> = batch_units(data).collect();
    assert!(units.len() <= data.len() / BATCH_UNIT_SIZE);
    for (i, u) in units.iter().enumerate() {
        assert!(u.is_valid());
        let b = u.to_bytes();
        assert_eq!(BatchCqUnit::from_bytes(&b), Some(*u));
        assert_eq!(
            &b[..42],
            &data[i * BATCH_UNIT_SIZE..i * BATCH_UNIT_SIZE + 42]
        );
    }
    let mut queries: Vec<i64> = vec![0, -1, i64::MAX, i64::MIN];
    queries.extend(i64_at(data, 0));
    for u in &units {
        queries.push(u.msg_base_offset);
        queries.push(u.msg_base_offset.saturating_add(u.batch_size as i64 - 1));
    }
    for q in queries {
        if let Some(u) = find_unit(&units, q) {
            assert!(u.msg_base_offset <= q);
        }
    }

    // Ext units at a few positions.
    for pos in [
        0,
        1,
        data.len() / 2,
        data.len().saturating_sub(MIN_EXT_UNIT_SIZE),
    ] {
        match CqExtUnit::parse(data, pos) {
            Ok(u) => {
                assert!(u.size as usize >= MIN_EXT_UNIT_SIZE);
                // A unit whose size field agrees with its (non-negative) bitmap size comes back byte
                // for byte.
                let bm_field = i16::from_be_bytes([data[pos + 18], data[pos + 19]]);
                if bm_field >= 0 && u.size as usize == MIN_EXT_UNIT_SIZE + u.filter_bit_map.len() {
                    let b = u.to_bytes();
                    assert_eq!(&b[..], &data[pos..pos + b.len()]);
                    assert_eq!(CqExtUnit::parse(&b, 0), Ok(u));
                }
            }
            Err(e) => {
                assert_eq!(e.offset, pos as u64);
                let _ = e.to_string();
            }
        }
    }
    if let Some(a) = i64_at(data, 0) {
        assert_eq!(offset_to_ext_addr(ext_addr_to_offset(a)), a);
    }
});
