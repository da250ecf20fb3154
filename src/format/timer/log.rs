//! `timerlog/`: a mapped file queue (20-digit offset names, like the commitlog) of 52-byte
//! units (`TimerLog.UNIT_SIZE`), one per enqueued timer message, and a 16-byte blank where a
//! unit no longer fits at the end of a file (`TimerLog.append`). After the last unit the file is
//! zero.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::format::bytes::{i32_at, i64_at};
use crate::format::entry::Entry;
use crate::format::error::{Error, ErrorKind, ParseError, Result};
use crate::format::filename::{list_queue_dir, QueueFile};
use crate::format::mapped::Mapped;

/// `TimerLog.UNIT_SIZE`.
pub const UNIT_SIZE: usize = 52;
/// `TimerLog.BLANK_MAGIC_CODE` (`0xBBCCDDEE ^ 1880681586 + 8`).
pub const BLANK_MAGIC: i32 = 0xCBD4_3194_u32 as i32;
/// `TimerLog.MIN_BLANK_LEN`: size, prevPos and magic of a blank.
pub const MIN_BLANK_LEN: usize = 16;

/// Bits of a unit's magic (`TimerMessageStore.MAGIC_*`).
pub mod magic {
    pub const DEFAULT: i32 = 1;
    /// The unit sits in a roll slot: at that second the message goes back to the timer topic.
    pub const ROLL: i32 = 2;
    /// A delete marker: it cancels the message it names.
    pub const DELETE: i32 = 4;
}

/// One unit of the timer log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimerUnit {
    /// Always [`UNIT_SIZE`].
    pub size: i32,
    /// The previous unit of the same slot, -1 for the first.
    pub prev_pos: i64,
    /// [`magic`] bits.
    pub magic: i32,
    /// The enqueue time floored to the precision (`currWriteTimeMs`).
    pub write_time_ms: i64,
    /// Slot time minus `write_time_ms` (ms). For a rolled unit the slot is the roll slot.
    pub delay_delta_ms: i32,
    /// Commitlog offset of the `rmq_sys_wheel_timer` record.
    pub commitlog_offset: i64,
    /// Size of that record.
    pub record_size: i32,
    /// Java `String.hashCode` of the real topic (0 when it had none).
    pub real_topic_hash: i32,
    /// Reserved, 0.
    pub reserved: i64,
}

impl TimerUnit {
    /// Decode a unit from its 52 bytes; `None` when fewer are given.
    pub fn from_bytes(b: &[u8]) -> Option<TimerUnit> {
        Some(TimerUnit {
            size: i32_at(b, 0)?,
            prev_pos: i64_at(b, 4)?,
            magic: i32_at(b, 12)?,
            write_time_ms: i64_at(b, 16)?,
            delay_delta_ms: i32_at(b, 24)?,
            commitlog_offset: i64_at(b, 28)?,
            record_size: i32_at(b, 36)?,
            real_topic_hash: i32_at(b, 40)?,
            reserved: i64_at(b, 44)?,
        })
    }

    /// The unit's 52 bytes.
    pub fn to_bytes(&self) -> [u8; UNIT_SIZE] {
        let mut b = [0u8; UNIT_SIZE];
        b[0..4].copy_from_slice(&self.size.to_be_bytes());
        b[4..12].copy_from_slice(&self.prev_pos.to_be_bytes());
        b[12..16].copy_from_slice(&self.magic.to_be_bytes());
        b[16..24].copy_from_slice(&self.write_time_ms.to_be_bytes());
        b[24..28].copy_from_slice(&self.delay_delta_ms.to_be_bytes());
        b[28..36].copy_from_slice(&self.commitlog_offset.to_be_bytes());
        b[36..40].copy_from_slice(&self.record_size.to_be_bytes());
        b[40..44].copy_from_slice(&self.real_topic_hash.to_be_bytes());
        b[44..52].copy_from_slice(&self.reserved.to_be_bytes());
        b
    }

    /// The slot time the unit is linked into (`write_time_ms + delay_delta_ms`).
    pub fn slot_time_ms(&self) -> i64 {
        self.write_time_ms
            .saturating_add(self.delay_delta_ms as i64)
    }

    pub fn is_roll(&self) -> bool {
        self.magic & magic::ROLL != 0
    }

    pub fn is_delete(&self) -> bool {
        self.magic & magic::DELETE != 0
    }
}

/// The 16-byte blank that ends a file with `len` bytes left.
pub fn blank_bytes(len: i32) -> [u8; MIN_BLANK_LEN] {
    let mut b = [0u8; MIN_BLANK_LEN];
    b[0..4].copy_from_slice(&len.to_be_bytes());
    b[12..16].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
    b
}

/// What is at a position of a timer log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEntry {
    Unit(TimerUnit),
    /// The end-of-file blank: the rest of the file (`len` bytes) is unused.
    Blank {
        len: u64,
    },
    /// Zero: the end of the written data.
    End,
}

/// Parse the entry at `pos` of one file's bytes.
pub fn parse_entry(file: &[u8], pos: usize) -> std::result::Result<LogEntry, ParseError> {
    let left = file.len().saturating_sub(pos);
    let Some(size) = i32_at(file, pos) else {
        return if left == 0 {
            Ok(LogEntry::End)
        } else {
            Err(ParseError::new(
                pos as u64,
                ErrorKind::Truncated {
                    what: "timer log unit size",
                    needed: 4,
                    left: left as u64,
                },
            ))
        };
    };
    if size == 0 {
        return Ok(LogEntry::End);
    }
    if size as usize == UNIT_SIZE && left >= UNIT_SIZE {
        if let Some(u) = TimerUnit::from_bytes(&file[pos..]) {
            return Ok(LogEntry::Unit(u));
        }
    }
    if size > 0 && size as usize == left && i32_at(file, pos + 12) == Some(BLANK_MAGIC) {
        return Ok(LogEntry::Blank { len: left as u64 });
    }
    Err(ParseError::new(
        pos as u64,
        ErrorKind::Unexpected {
            what: "timer log entry",
            expected: format!(
                "a {UNIT_SIZE}-byte unit, zero, or a blank (magic {BLANK_MAGIC:#x}) of the \
                 {left} bytes left"
            ),
            found: format!("size {size}"),
        },
    ))
}

/// How a walk over the timer log ended.
#[derive(Debug)]
pub enum LogStop {
    /// Zero after the last unit of the last file.
    End,
    /// Zero in a file that is not the last: the files after it were never reached.
    EndBeforeLastFile { file: PathBuf, file_offset: u64 },
    /// Bytes that are not an entry.
    Bad(Error),
}

/// The `timerlog/` folder: its files, mapped.
pub struct TimerLog {
    pub dir: PathBuf,
    /// Files named by a 20-digit offset, by offset.
    pub files: Vec<QueueFile>,
    /// Regular files with other names.
    pub foreign: Vec<PathBuf>,
    /// Entries that are not regular files.
    pub odd: Vec<Entry>,
    maps: Vec<Mapped>,
}

impl TimerLog {
    /// Open `dir` (a store's `timerlog/`). `Ok(None)` when the folder does not exist.
    pub fn open(dir: &Path) -> Result<Option<TimerLog>> {
        if !dir.exists() {
            return Ok(None);
        }
        let listing = list_queue_dir(dir)?;
        let maps = listing
            .files
            .iter()
            .map(|f| Mapped::open(&f.path))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(TimerLog {
            dir: dir.to_path_buf(),
            files: listing.files,
            foreign: listing.foreign,
            odd: listing.odd,
            maps,
        }))
    }

    /// The size of the log's files (the first file's length; every file is created full).
    pub fn file_size(&self) -> u64 {
        self.files.first().map(|f| f.len).unwrap_or(0)
    }

    /// The unit at timer log position `pos`, if a whole unit is there.
    pub fn unit_at(&self, pos: i64) -> Option<TimerUnit> {
        let pos = u64::try_from(pos).ok()?;
        let i = self
            .files
            .partition_point(|f| f.start <= pos)
            .checked_sub(1)?;
        let at = usize::try_from(pos - self.files[i].start).ok()?;
        let bytes = self.maps[i].get(at..)?;
        TimerUnit::from_bytes(bytes).filter(|u| u.size as usize == UNIT_SIZE)
    }

    /// Whether any byte at timer log position `pos` or after it is not zero (a stale tail or
    /// later files with data; an end-of-file blank is not data), read a page at a time.
    pub fn has_data_from(&self, pos: u64) -> bool {
        self.files.iter().zip(&self.maps).any(|(f, m)| {
            if f.start + m.len() as u64 <= pos {
                return false;
            }
            let from = pos.saturating_sub(f.start) as usize;
            !matches!(parse_entry(m, from), Ok(LogEntry::Blank { .. }))
                && m[from..].chunks(4096).any(|c| c.iter().any(|&b| b != 0))
        })
    }

    /// Every unit in log order with its position, then how the walk stopped, and the position
    /// after the last unit (the data end).
    pub fn units(&self) -> Units<'_> {
        Units {
            log: self,
            file: 0,
            pos: 0,
            end: self.files.first().map(|f| f.start).unwrap_or(0),
            stop: None,
        }
    }
}

/// The iterator of [`TimerLog::units`].
pub struct Units<'a> {
    log: &'a TimerLog,
    file: usize,
    pos: usize,
    end: u64,
    stop: Option<LogStop>,
}

impl Units<'_> {
    /// The position after the last unit read so far.
    pub fn data_end(&self) -> u64 {
        self.end
    }

    /// How the walk stopped (once the iterator returned `None`).
    pub fn stop(&self) -> Option<&LogStop> {
        self.stop.as_ref()
    }
}

impl Iterator for Units<'_> {
    type Item = (u64, TimerUnit);

    fn next(&mut self) -> Option<(u64, TimerUnit)> {
        loop {
            if self.stop.is_some() {
                return None;
            }
            let Some(f) = self.log.files.get(self.file) else {
                self.stop = Some(LogStop::End);
                return None;
            };
            let bytes: &[u8] = &self.log.maps[self.file];
            match parse_entry(bytes, self.pos) {
                Ok(LogEntry::Unit(u)) => {
                    let at = f.start + self.pos as u64;
                    self.pos += UNIT_SIZE;
                    self.end = at + UNIT_SIZE as u64;
                    return Some((at, u));
                }
                Ok(LogEntry::Blank { .. }) => {
                    self.file += 1;
                    self.pos = 0;
                    if let Some(next) = self.log.files.get(self.file) {
                        self.end = next.start;
                    }
                }
                Ok(LogEntry::End) => {
                    self.stop = Some(if self.file + 1 < self.log.files.len() {
                        LogStop::EndBeforeLastFile {
                            file: f.path.clone(),
                            file_offset: self.pos as u64,
                        }
                    } else {
                        LogStop::End
                    });
                }
                Err(e) => self.stop = Some(LogStop::Bad(e.in_file(&f.path, 0))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(prev: i64) -> TimerUnit {
        TimerUnit {
            size: UNIT_SIZE as i32,
            prev_pos: prev,
            magic: magic::DEFAULT | magic::ROLL,
            write_time_ms: 1_796_074_382_000,
            delay_delta_ms: 86_401_000,
            commitlog_offset: 27_588,
            record_size: 600,
            real_topic_hash: crate::format::java::string_hash("TopicC"),
            reserved: 0,
        }
    }

    #[test]
    fn unit_round_trip() {
        let u = unit(-1);
        assert_eq!(TimerUnit::from_bytes(&u.to_bytes()), Some(u));
        assert!(u.is_roll() && !u.is_delete());
        assert_eq!(u.slot_time_ms(), 1_796_160_783_000);
    }

    #[test]
    fn entries_units_blank_end_and_garbage() {
        let mut file = Vec::new();
        file.extend_from_slice(&unit(-1).to_bytes());
        file.extend_from_slice(&unit(0).to_bytes());
        let used = file.len();
        file.resize(used + 30, 0);
        assert_eq!(parse_entry(&file, 0), Ok(LogEntry::Unit(unit(-1))));
        assert_eq!(parse_entry(&file, used), Ok(LogEntry::End));
        file[used..used + 16].copy_from_slice(&blank_bytes(30));
        assert_eq!(parse_entry(&file, used), Ok(LogEntry::Blank { len: 30 }));
        file[used] = 9;
        let e = parse_entry(&file, used).unwrap_err();
        assert_eq!(e.offset, used as u64);
        assert!(e.to_string().contains("52-byte unit"), "{e}");
        // a unit cut by the end of the file is not a unit
        assert!(parse_entry(&file[..40], 0).is_err());
        assert_eq!(parse_entry(&file, file.len()), Ok(LogEntry::End));
    }
}
