//! The 5.x batch consume queue (FORMAT.md 6.3): 46-byte units under `batchconsumequeue/`, for
//! topics with `queue.type=BatchCQ`. Logical offsets come from `msgBaseOffset`, not positions.

use serde::Serialize;

use crate::format::bytes::{i16_at, i32_at, i64_at};

/// `BatchConsumeQueue.CQ_STORE_UNIT_SIZE`.
pub const BATCH_UNIT_SIZE: usize = 46;
/// Default `mapperFileSizeBatchConsumeQueue` (300000 units).
pub const DEFAULT_BATCH_FILE_SIZE: u64 = 300_000 * BATCH_UNIT_SIZE as u64;

/// One batch consume queue unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BatchCqUnit {
    pub offset: i64,
    pub size: i32,
    pub tags_code: i64,
    pub store_timestamp: i64,
    /// Logical offset of the first message in the record.
    pub msg_base_offset: i64,
    pub batch_size: i16,
    pub compacted_offset: i32,
}

impl BatchCqUnit {
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        Some(BatchCqUnit {
            offset: i64_at(b, 0)?,
            size: i32_at(b, 8)?,
            tags_code: i64_at(b, 12)?,
            store_timestamp: i64_at(b, 20)?,
            msg_base_offset: i64_at(b, 28)?,
            batch_size: i16_at(b, 36)?,
            compacted_offset: i32_at(b, 38)?,
        })
    }

    pub fn to_bytes(&self) -> [u8; BATCH_UNIT_SIZE] {
        let mut b = [0u8; BATCH_UNIT_SIZE];
        b[0..8].copy_from_slice(&self.offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..20].copy_from_slice(&self.tags_code.to_be_bytes());
        b[20..28].copy_from_slice(&self.store_timestamp.to_be_bytes());
        b[28..36].copy_from_slice(&self.msg_base_offset.to_be_bytes());
        b[36..38].copy_from_slice(&self.batch_size.to_be_bytes());
        b[38..42].copy_from_slice(&self.compacted_offset.to_be_bytes());
        b
    }

    /// The broker's `recover` test for a written unit.
    pub fn is_valid(&self) -> bool {
        self.offset >= 0 && self.size > 0 && self.msg_base_offset >= 0 && self.batch_size > 0
    }
}

/// Valid units of one batch consume queue file, up to the first invalid one.
pub fn batch_units(buf: &[u8]) -> impl Iterator<Item = BatchCqUnit> + '_ {
    buf.chunks_exact(BATCH_UNIT_SIZE)
        .map(BatchCqUnit::from_bytes)
        .take_while(|u| u.is_some_and(|u| u.is_valid()))
        .flatten()
}

/// The unit holding logical offset `q` among `units` (sorted by `msg_base_offset`), by binary
/// search as the broker does.
pub fn find_unit(units: &[BatchCqUnit], q: i64) -> Option<&BatchCqUnit> {
    let i = units.partition_point(|u| u.msg_base_offset <= q);
    let u = units.get(i.checked_sub(1)?)?;
    // q >= base here; compare the distance so that a base near i64::MAX cannot overflow
    let distance = q.wrapping_sub(u.msg_base_offset) as u64;
    u64::try_from(u.batch_size)
        .is_ok_and(|n| distance < n)
        .then_some(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_round_trip_and_lookup() {
        let mk = |base, n| BatchCqUnit {
            offset: base * 1000,
            size: 500,
            tags_code: 7,
            store_timestamp: 1_700_000_000_000,
            msg_base_offset: base,
            batch_size: n,
            compacted_offset: -1,
        };
        let units = vec![mk(0, 1), mk(1, 10), mk(11, 5)];
        let mut buf = Vec::new();
        for u in &units {
            let b = u.to_bytes();
            assert_eq!(b[42..], [0, 0, 0, 0]);
            assert_eq!(BatchCqUnit::from_bytes(&b), Some(*u));
            buf.extend_from_slice(&b);
        }
        buf.extend_from_slice(&[0u8; BATCH_UNIT_SIZE]);
        let read: Vec<_> = batch_units(&buf).collect();
        assert_eq!(read, units);
        assert_eq!(find_unit(&read, 5).map(|u| u.msg_base_offset), Some(1));
        assert_eq!(find_unit(&read, 15).map(|u| u.msg_base_offset), Some(11));
        assert!(find_unit(&read, 16).is_none());
        assert!(find_unit(&read, -1).is_none());
        // a damaged unit's negative batch size holds no offset, not a huge range
        let damaged = [mk(0, -3)];
        assert!(find_unit(&damaged, 0).is_none());
        assert!(find_unit(&damaged, 1).is_none());
    }
}
