//! ConsumeQueueExt (FORMAT.md 6.2): when `enableConsumeQueueExt=true`, a unit's tags code is an
//! address into `consumequeue_ext/<topic>/<queueId>/`, where the real tags code lives.

use std::path::Path;

use serde::Serialize;

use crate::format::bytes::{i16_at, i64_at};
use crate::format::error::{ErrorKind, ParseError, Result};
use crate::format::filename::list_queue_dir;
use crate::format::mapped::Mapped;

/// Default `mappedFileSizeConsumeQueueExt` (48 MiB).
pub const DEFAULT_EXT_FILE_SIZE: u64 = 48 << 20;
/// `CqExtUnit.MIN_EXT_UNIT_SIZE`: size, tags code, store time, bitmap size.
pub const MIN_EXT_UNIT_SIZE: usize = 2 + 8 + 8 + 2;

/// File offset in the ext stream for an ext address (`unDecorate`).
pub fn ext_addr_to_offset(addr: i64) -> u64 {
    addr.wrapping_sub(i64::MIN) as u64
}

/// Ext address for a file offset in the ext stream (`decorate`).
pub fn offset_to_ext_addr(offset: u64) -> i64 {
    (offset as i64).wrapping_add(i64::MIN)
}

/// One ext unit: the real tags code, the store time and the filter bit map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CqExtUnit {
    pub size: i16,
    pub tags_code: i64,
    pub msg_store_time: i64,
    pub filter_bit_map: Vec<u8>,
}

impl CqExtUnit {
    /// Parse the unit at `pos` of an ext file.
    pub fn parse(buf: &[u8], pos: usize) -> Result<Self, ParseError> {
        let bad = |what: &'static str| {
            ParseError::new(
                pos as u64,
                ErrorKind::Truncated {
                    what,
                    needed: MIN_EXT_UNIT_SIZE as u64,
                    left: buf.len().saturating_sub(pos) as u64,
                },
            )
        };
        let size = i16_at(buf, pos).ok_or_else(|| bad("ext unit size"))?;
        if (size as i64) < MIN_EXT_UNIT_SIZE as i64 {
            return Err(ParseError::new(
                pos as u64,
                ErrorKind::BadSize {
                    found: size as i64,
                    min: MIN_EXT_UNIT_SIZE as i64,
                    max: i16::MAX as i64,
                },
            ));
        }
        let tags_code = i64_at(buf, pos + 2).ok_or_else(|| bad("ext unit tags code"))?;
        let msg_store_time = i64_at(buf, pos + 10).ok_or_else(|| bad("ext unit store time"))?;
        let bm = i16_at(buf, pos + 18).ok_or_else(|| bad("ext unit bitmap size"))?;
        let bm_len = bm.max(0) as usize;
        let filter_bit_map = buf
            .get(pos + 20..pos + 20 + bm_len)
            .ok_or_else(|| bad("ext unit bitmap"))?
            .to_vec();
        Ok(CqExtUnit {
            size,
            tags_code,
            msg_store_time,
            filter_bit_map,
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MIN_EXT_UNIT_SIZE + self.filter_bit_map.len());
        let size = (MIN_EXT_UNIT_SIZE + self.filter_bit_map.len()) as i16;
        v.extend_from_slice(&size.to_be_bytes());
        v.extend_from_slice(&self.tags_code.to_be_bytes());
        v.extend_from_slice(&self.msg_store_time.to_be_bytes());
        v.extend_from_slice(&(self.filter_bit_map.len() as i16).to_be_bytes());
        v.extend_from_slice(&self.filter_bit_map);
        v
    }
}

/// Resolve an ext address against the ext folder of one queue.
pub fn read_ext_unit(dir: &Path, addr: i64, file_size: u64) -> Result<Option<CqExtUnit>> {
    if file_size == 0 {
        return Ok(None);
    }
    let off = ext_addr_to_offset(addr);
    let start = off - off % file_size;
    let files = list_queue_dir(dir)?.files;
    let Some(f) = files.iter().find(|f| f.start == start) else {
        return Ok(None);
    };
    let map = Mapped::open(&f.path)?;
    CqExtUnit::parse(&map, (off - start) as usize)
        .map(Some)
        .map_err(|e| e.in_file(&f.path, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_units() {
        assert_eq!(offset_to_ext_addr(0), i64::MIN);
        assert_eq!(ext_addr_to_offset(i64::MIN + 12345), 12345);
        assert!(offset_to_ext_addr(1 << 40) <= super::super::EXT_MAX_ADDR);
        let u = CqExtUnit {
            size: 28,
            tags_code: 2598919,
            msg_store_time: 1700000000123,
            filter_bit_map: vec![1, 2, 3, 4, 5, 6, 7, 8],
        };
        let b = u.to_bytes();
        assert_eq!(b.len(), 28);
        assert_eq!(CqExtUnit::parse(&b, 0).unwrap(), u);
        assert!(CqExtUnit::parse(&b[..20], 0).is_err());
        assert!(CqExtUnit::parse(&[0, 3], 0).is_err());
    }
}
