//! Consume queues: per topic and queue id, a mapped file queue of 20-byte units pointing into the
//! commitlog (`ConsumeQueue`, FORMAT.md 6.1), plus the optional ext files (6.2) and the 5.x batch
//! consume queue (6.3).

pub mod batch;
pub mod check;
pub mod ext;
pub mod write;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::format::bytes::{i32_at, i64_at};
use crate::format::error::{Error, QueueFileError, Result};
use crate::format::filename::{list_queue_dir, QueueFile};
use crate::format::mapped::Mapped;

/// `ConsumeQueue.CQ_STORE_UNIT_SIZE`.
pub const UNIT_SIZE: usize = 20;
/// Default `mappedFileSizeConsumeQueue` in units (300000 x 20 = 6000000 bytes).
pub const DEFAULT_FILE_UNITS: u64 = 300_000;
/// Size field of the units `fillPreBlank` writes before the first real unit of a queue.
pub const PRE_BLANK_SIZE: i32 = i32::MAX;
/// The largest queue offset whose unit position (offset x 20) is a Java long: above it the
/// broker's `cqOffset * CQ_STORE_UNIT_SIZE` overflows.
pub const MAX_QUEUE_OFFSET: i64 = i64::MAX / UNIT_SIZE as i64;
/// `ConsumeQueueExt.MAX_ADDR`: tags codes at or below this are ext addresses.
pub const EXT_MAX_ADDR: i64 = i32::MIN as i64 - 1;

/// Whether a record's QUEUEOFFSET can name a consume queue unit (0 to `MAX_QUEUE_OFFSET`).
pub fn queue_offset_fits(queue_offset: i64) -> bool {
    (0..=MAX_QUEUE_OFFSET).contains(&queue_offset)
}

/// One consume queue unit: commitlog offset, record size, tags code (or ext address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CqUnit {
    pub offset: i64,
    pub size: i32,
    pub tags_code: i64,
}

impl CqUnit {
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        Some(CqUnit {
            offset: i64_at(b, 0)?,
            size: i32_at(b, 8)?,
            tags_code: i64_at(b, 12)?,
        })
    }

    pub fn to_bytes(&self) -> [u8; UNIT_SIZE] {
        let mut b = [0u8; UNIT_SIZE];
        b[..8].copy_from_slice(&self.offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..].copy_from_slice(&self.tags_code.to_be_bytes());
        b
    }

    /// The commitlog offset the unit points at; `None` when it is negative (no record has it).
    pub fn commitlog_offset(&self) -> Option<u64> {
        u64::try_from(self.offset).ok()
    }

    /// `offset >= 0 && size > 0`: the broker's test for a written unit.
    pub fn is_valid(&self) -> bool {
        self.offset >= 0 && self.size > 0
    }

    /// A unit written by `fillPreBlank`: `(0, i32::MAX, 0)`. Never a message.
    pub fn is_pre_blank(&self) -> bool {
        self.offset == 0 && self.size == PRE_BLANK_SIZE && self.tags_code == 0
    }

    /// True when the tags code is a ConsumeQueueExt address (`isExtAddr`).
    pub fn has_ext_addr(&self) -> bool {
        self.tags_code <= EXT_MAX_ADDR
    }
}

/// The units of one file (`buf`), up to the first invalid one: `(position, unit)` pairs.
pub fn valid_units(buf: &[u8]) -> impl Iterator<Item = (usize, CqUnit)> + '_ {
    buf.chunks_exact(UNIT_SIZE)
        .enumerate()
        .map(|(i, c)| (i * UNIT_SIZE, CqUnit::from_bytes(c)))
        .take_while(|(_, u)| u.is_some_and(|u| u.is_valid()))
        .filter_map(|(p, u)| u.map(|u| (p, u)))
}

/// The consume queue of one topic and queue id: its files, in logical order.
#[derive(Debug, Clone)]
pub struct ConsumeQueue {
    pub topic: String,
    pub queue_id: i32,
    pub dir: PathBuf,
    pub files: Vec<QueueFile>,
    pub foreign: Vec<PathBuf>,
    /// Entries that are not regular files (see [`crate::format::filename::Listing`]).
    pub odd: Vec<crate::format::entry::Entry>,
    /// Configured file size in bytes (`mappedFileSizeConsumeQueue`, a multiple of 20).
    pub file_size: u64,
}

impl ConsumeQueue {
    pub fn open(dir: &Path, topic: &str, queue_id: i32, file_size: u64) -> Result<Self> {
        let l = list_queue_dir(dir)?;
        Ok(ConsumeQueue {
            topic: topic.to_string(),
            queue_id,
            dir: dir.to_path_buf(),
            files: l.files,
            foreign: l.foreign,
            odd: l.odd,
            file_size,
        })
    }

    /// The file holding byte `pos` of the queue's stream, by start offset.
    fn file_for(&self, pos: u64) -> Option<&QueueFile> {
        let i = self.files.partition_point(|f| f.start <= pos);
        let f = self.files.get(i.checked_sub(1)?)?;
        (pos < f.start.saturating_add(f.len)).then_some(f)
    }

    /// The unit at queue offset `q`, or `None` when no file holds it.
    pub fn unit_at(&self, q: u64) -> Result<Option<CqUnit>> {
        let pos = q.saturating_mul(UNIT_SIZE as u64);
        let Some(f) = self.file_for(pos) else {
            return Ok(None);
        };
        let map = Mapped::open(&f.path)?;
        let at = (pos - f.start) as usize;
        Ok(map.get(at..).and_then(CqUnit::from_bytes))
    }

    /// End of the queue as the broker's recovery finds it (`ConsumeQueue.recover`): scanning from
    /// the third-to-last file, the stream position of the first invalid unit (or the end of the
    /// last file). `getMaxOffsetInQueue` is this divided by 20.
    pub fn end_pos(&self) -> Result<u64> {
        let first = self.files.len().saturating_sub(3);
        let mut end = self.files.get(first).map(|f| f.start).unwrap_or(0);
        for f in &self.files[first..] {
            let map = Mapped::open(&f.path)?;
            let n = valid_units(&map).count() as u64;
            end = f.start + n * UNIT_SIZE as u64;
            if (n * UNIT_SIZE as u64) < self.file_size.min(map.len() as u64) || map.is_empty() {
                break;
            }
        }
        Ok(end)
    }

    /// The max offset found without scanning: a binary search of the last file for its first
    /// invalid unit (valid units are a prefix of a healthy file). Equal to [`Self::max_offset`]
    /// on a healthy queue; for browsing, where opening must not read whole files.
    pub fn max_offset_fast(&self) -> Result<u64> {
        let Some(last) = self.files.last() else {
            return Ok(0);
        };
        let map = Mapped::open(&last.path)?;
        let n = map.len() / UNIT_SIZE;
        let valid = |i: usize| {
            map.get(i * UNIT_SIZE..)
                .and_then(CqUnit::from_bytes)
                .is_some_and(|u| u.is_valid())
        };
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if valid(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok((last.start + (lo * UNIT_SIZE) as u64) / UNIT_SIZE as u64)
    }

    /// `getMaxOffsetInQueue`: the next queue offset to be written.
    pub fn max_offset(&self) -> Result<u64> {
        Ok(self.end_pos()? / UNIT_SIZE as u64)
    }

    /// `getMinOffsetInQueue` after `correctMinOffset(commitlog_min)`: the first unit of the first
    /// file that points at or past the commitlog's minimum offset. When none does, the queue is
    /// empty and the max offset is returned (as 5.x does).
    pub fn min_offset(&self, commitlog_min: u64) -> Result<u64> {
        let Some(f) = self.files.first() else {
            return Ok(0);
        };
        let map = Mapped::open(&f.path)?;
        for (pos, u) in valid_units(&map) {
            if !u.is_pre_blank() && u.offset as u64 >= commitlog_min {
                return Ok((f.start + pos as u64) / UNIT_SIZE as u64);
            }
        }
        self.max_offset()
    }

    /// Visit every valid unit in order with its queue offset, file by file, until the first
    /// invalid unit. Stops early when `f` returns false.
    pub fn for_each_unit(&self, mut f: impl FnMut(u64, CqUnit) -> bool) -> Result<()> {
        for file in &self.files {
            let map = Mapped::open(&file.path)?;
            let mut n = 0u64;
            for (pos, u) in valid_units(&map) {
                n += 1;
                if !f((file.start + pos as u64) / UNIT_SIZE as u64, u) {
                    return Ok(());
                }
            }
            if n * (UNIT_SIZE as u64) < map.len() as u64 {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Check that a file name is a multiple of the file size and that the file has that size.
    pub fn file_size_issue(&self, f: &QueueFile) -> Option<Error> {
        if f.len != self.file_size {
            Some(
                QueueFileError::WrongSize {
                    path: f.path.clone(),
                    len: f.len,
                    expected: self.file_size,
                }
                .into(),
            )
        } else if self.file_size > 0 && !f.start.is_multiple_of(self.file_size) {
            Some(
                QueueFileError::NameNotMultiple {
                    path: f.path.clone(),
                    start: f.start,
                    file_size: self.file_size,
                }
                .into(),
            )
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_golden_bytes() {
        // FORMAT.md 2.9: offset 0, size 139, tags code of "TagA".
        let u = CqUnit {
            offset: 0,
            size: 139,
            tags_code: 2598919,
        };
        let b = u.to_bytes();
        assert_eq!(
            b,
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x8B, 0, 0, 0, 0, 0, 0x27, 0xA8, 0x07]
        );
        assert_eq!(CqUnit::from_bytes(&b), Some(u));
        assert!(u.is_valid() && !u.is_pre_blank() && !u.has_ext_addr());
        assert_eq!(CqUnit::from_bytes(&b[..19]), None);
        let pre = CqUnit {
            offset: 0,
            size: i32::MAX,
            tags_code: 0,
        };
        assert!(pre.is_valid() && pre.is_pre_blank());
        let ext = CqUnit {
            tags_code: i64::MIN + 40,
            ..u
        };
        assert!(ext.has_ext_addr());
    }

    #[test]
    fn valid_units_stop_at_first_invalid() {
        let mut buf = Vec::new();
        for i in 0..3 {
            buf.extend_from_slice(
                &CqUnit {
                    offset: i * 100,
                    size: 100,
                    tags_code: 0,
                }
                .to_bytes(),
            );
        }
        buf.extend_from_slice(&[0u8; 20]);
        buf.extend_from_slice(
            &CqUnit {
                offset: 500,
                size: 1,
                tags_code: 0,
            }
            .to_bytes(),
        );
        buf.extend_from_slice(&[1, 2, 3]);
        assert_eq!(valid_units(&buf).count(), 3);
    }
}
