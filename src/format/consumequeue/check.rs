//! Checks of a consume queue without its records: the files as files (each one's size and name,
//! the files missing between two others), and what each unit says by itself, read in queue order
//! ([`check_unit`]: where the queue ends, pre-blank units, commitlog offsets that do not grow,
//! units pointing outside the commitlog's data). Whether a unit points at its record is checked
//! by the store-level verify, which judges each unit here in the same pass as it matches them.

use std::path::Path;

use super::{ConsumeQueue, CqUnit, UNIT_SIZE};
use crate::format::finding::{Code, Finding};

/// Findings about the files of `cq`: a size other than the configured one (the broker does not
/// start), a name that is not a multiple of it, and queue offsets no file holds.
pub fn check_files(cq: &ConsumeQueue) -> Vec<Finding> {
    let mut out = Vec::new();
    let fs = cq.file_size;
    let name = format!("{}/{}", cq.topic, cq.queue_id);
    let mut expected_start: Option<u64> = None;
    for f in &cq.files {
        if f.len != fs {
            out.push(
                Finding::new(
                    Code::ConsumequeueFileSize,
                    &f.path,
                    f.len.min(fs),
                    format!(
                        "consume queue file of {name} is {} bytes, expected {fs}",
                        f.len
                    ),
                )
                .with_action("MappedFileQueue.load fails: the broker does not start"),
            );
        } else if fs > 0 && f.start % fs != 0 {
            out.push(Finding::new(
                Code::ConsumequeueFileSize,
                &f.path,
                0,
                format!(
                    "consume queue file name {} of {name} is not a multiple of {fs}",
                    f.start
                ),
            ));
        }
        if let Some(e) = expected_start.filter(|&e| f.start > e) {
            out.push(
                Finding::new(
                    Code::ConsumequeueGap,
                    &f.path,
                    0,
                    format!(
                        "{name}: no file holds queue offsets {}..{}",
                        e / UNIT_SIZE as u64,
                        f.start / UNIT_SIZE as u64
                    ),
                )
                .with_action(
                    "reads of those queue offsets find nothing; the broker only logs the gap",
                ),
            );
        }
        expected_start = Some(f.start.saturating_add(fs.max(f.len)));
    }
    out
}

/// The commitlog a queue's units point into, as two numbers: judging a unit reads no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitlogBounds {
    /// The commitlog's first offset: units below it point at expired data.
    pub min_offset: u64,
    /// The end of the commitlog's data: a unit's record must end at or before it.
    pub data_end: u64,
}

/// What one unit says by itself, read in queue order ([`check_unit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitVerdict {
    /// `offset < 0` or `size <= 0`: the broker's recovery ends the queue at this unit. `torn`:
    /// its bytes are not all zero, so something was written where the queue ends.
    End { torn: bool },
    /// A unit `fillPreBlank` writes, never a message; `misplaced` after real units.
    PreBlank { misplaced: bool },
    /// A unit pointing at a record.
    Real {
        /// The previous real unit's commitlog offset, when this one does not point after it.
        not_after: Option<i64>,
        /// Where it points against the commitlog's bounds.
        place: UnitPlace,
    },
}

/// Where a real unit points against the commitlog's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitPlace {
    /// Below the commitlog's first offset: expired data, nothing to read.
    Expired,
    /// Its record would end past the commitlog's end of data.
    PastEnd,
    /// Inside the data: the record there can be read and compared with the unit.
    InData,
}

/// Judge unit `u` of a queue by itself, without reading its record: `previous` is the commitlog
/// offset of the last real unit before it in queue order (`None` before the first).
#[inline]
pub fn check_unit(u: &CqUnit, previous: Option<i64>, bounds: CommitlogBounds) -> UnitVerdict {
    if !u.is_valid() {
        // The three fields cover the unit's 20 bytes: all zero exactly when the bytes are.
        let zero = u.offset == 0 && u.size == 0 && u.tags_code == 0;
        return UnitVerdict::End { torn: !zero };
    }
    if u.is_pre_blank() {
        return UnitVerdict::PreBlank {
            misplaced: previous.is_some(),
        };
    }
    let offset = u.offset as u64;
    let place = if offset < bounds.min_offset {
        UnitPlace::Expired
    } else if offset.saturating_add(u.size as u64) > bounds.data_end {
        UnitPlace::PastEnd
    } else {
        UnitPlace::InData
    };
    UnitVerdict::Real {
        not_after: previous.filter(|&p| u.offset <= p),
        place,
    }
}

impl UnitVerdict {
    /// The finding about this unit alone, if it has one: a pre-blank unit after real units, or a
    /// unit that does not point after the previous one. `u` is at byte `pos` of `path`, queue
    /// offset `q` of the queue named `queue` (`topic/queueId`). Where a queue ends, and units
    /// outside the commitlog's data, are counted by the caller and reported once per queue.
    pub fn finding(
        &self,
        queue: &str,
        q: u64,
        u: &CqUnit,
        path: &Path,
        pos: u64,
    ) -> Option<Finding> {
        match *self {
            UnitVerdict::PreBlank { misplaced: true } => Some(Finding::new(
                Code::ConsumequeueTorn,
                path,
                pos,
                format!("{queue}: pre-blank unit at queue offset {q} after real units"),
            )),
            UnitVerdict::Real {
                not_after: Some(p), ..
            } => Some(Finding::new(
                Code::ConsumequeueUnitMismatch,
                path,
                pos,
                format!(
                    "{queue}: unit at queue offset {q} points at commitlog offset {}, not after the previous unit's {p}",
                    u.offset
                ),
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::format::filename::QueueFile;

    fn queue(files: &[(u64, u64)]) -> ConsumeQueue {
        ConsumeQueue {
            topic: "T".into(),
            queue_id: 1,
            dir: PathBuf::from("consumequeue/T/1"),
            files: files
                .iter()
                .map(|&(start, len)| QueueFile {
                    path: PathBuf::from(format!("consumequeue/T/1/{start:020}")),
                    start,
                    len,
                })
                .collect(),
            foreign: Vec::new(),
            odd: Vec::new(),
            file_size: 200,
        }
    }

    #[test]
    fn sizes_names_and_gaps_of_queue_files() {
        assert!(check_files(&queue(&[(0, 200), (200, 200)])).is_empty());
        let f = check_files(&queue(&[(0, 180)]));
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].code, f[0].offset), (Code::ConsumequeueFileSize, 180));
        assert!(f[0].broker_action.is_some());
        let f = check_files(&queue(&[(100, 200)]));
        assert_eq!(f[0].code, Code::ConsumequeueFileSize);
        assert!(f[0].message.contains("not a multiple"), "{}", f[0].message);
        // a missing file between two: queue offsets 10..20 (bytes 200..400) are in no file
        let f = check_files(&queue(&[(0, 200), (400, 200)]));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].code, Code::ConsumequeueGap);
        assert!(
            f[0].message.ends_with("queue offsets 10..20"),
            "{}",
            f[0].message
        );
        assert!(f[0].file.ends_with("00000000000000000400"));
    }

    #[test]
    fn units_judged_by_themselves_in_queue_order() {
        let bounds = CommitlogBounds {
            min_offset: 1000,
            data_end: 5000,
        };
        let unit = |offset, size| CqUnit {
            offset,
            size,
            tags_code: 7,
        };
        let real = |not_after, place| UnitVerdict::Real { not_after, place };
        let judge = |u: CqUnit, previous| check_unit(&u, previous, bounds);
        // where the queue ends: never written, or written with an invalid offset or size
        let zero = CqUnit {
            offset: 0,
            size: 0,
            tags_code: 0,
        };
        assert_eq!(judge(zero, None), UnitVerdict::End { torn: false });
        assert_eq!(judge(unit(-1, 100), None), UnitVerdict::End { torn: true });
        assert_eq!(judge(unit(2000, 0), None), UnitVerdict::End { torn: true });
        assert_eq!(
            judge(
                CqUnit {
                    tags_code: 9,
                    ..zero
                },
                Some(1)
            ),
            UnitVerdict::End { torn: true }
        );
        // pre-blank units belong before the first real unit only
        let pre = CqUnit {
            offset: 0,
            size: crate::format::consumequeue::PRE_BLANK_SIZE,
            tags_code: 0,
        };
        assert_eq!(judge(pre, None), UnitVerdict::PreBlank { misplaced: false });
        assert_eq!(
            judge(pre, Some(1000)),
            UnitVerdict::PreBlank { misplaced: true }
        );
        // real units: after the previous one, inside the data
        assert_eq!(judge(unit(1000, 100), None), real(None, UnitPlace::InData));
        assert_eq!(
            judge(unit(4900, 100), Some(1000)),
            real(None, UnitPlace::InData)
        );
        assert_eq!(
            judge(unit(1000, 100), Some(1000)),
            real(Some(1000), UnitPlace::InData)
        );
        assert_eq!(judge(unit(999, 1), None), real(None, UnitPlace::Expired));
        assert_eq!(
            judge(unit(4901, 100), Some(5000)),
            real(Some(5000), UnitPlace::PastEnd)
        );
        assert_eq!(
            judge(unit(i64::MAX, i32::MAX), None),
            real(None, UnitPlace::PastEnd)
        );
        // the findings about one unit alone
        let path = PathBuf::from("consumequeue/T/1/00000000000000000000");
        let found = |v: UnitVerdict, u: &CqUnit| v.finding("T/1", 3, u, &path, 60);
        let f = found(judge(pre, Some(1000)), &pre).unwrap();
        assert_eq!((f.code, f.offset), (Code::ConsumequeueTorn, 60));
        assert_eq!(
            f.message,
            "T/1: pre-blank unit at queue offset 3 after real units"
        );
        let u = unit(1000, 100);
        let f = found(judge(u, Some(1200)), &u).unwrap();
        assert_eq!((f.code, f.offset), (Code::ConsumequeueUnitMismatch, 60));
        assert_eq!(
            f.message,
            "T/1: unit at queue offset 3 points at commitlog offset 1000, not after the previous unit's 1200"
        );
        for (u, previous) in [(zero, None), (unit(-1, 1), None), (pre, None), (u, None)] {
            assert!(found(judge(u, previous), &u).is_none());
        }
    }
}
