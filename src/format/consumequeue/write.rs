//! Writing consume queue files.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;

use super::{queue_offset_fits, CqUnit, PRE_BLANK_SIZE, UNIT_SIZE};
use crate::format::error::{Error, Result};
use crate::format::filename::offset_to_name;

/// Writes the files of one consume queue as `ConsumeQueue.putMessagePositionInfo` does: units
/// at QUEUEOFFSET*20, repeats skipped, pre-blank units before a queue that starts after 0, and
/// every file extended to its full size at the end.
pub struct QueueWriter {
    /// `None`: count only (where the units would go), write nothing.
    dir: Option<PathBuf>,
    file_size: u64,
    /// Stream position of the next unit; `None` before the first unit.
    pos: Option<u64>,
    /// Units not yet written to disk and the stream position of the first of them.
    pending: Vec<u8>,
    pending_start: u64,
    max_physic_offset: i64,
    /// Files touched, by start offset, to extend to full size at the end.
    files: Vec<u64>,
    /// Queue offset of the first unit put.
    first: Option<u64>,
}

const CQ_FLUSH_BYTES: usize = 256 * 1024;

impl QueueWriter {
    pub fn new(dir: PathBuf, file_size: u64) -> Self {
        Self::with_dir(Some(dir), file_size)
    }

    /// A writer that only works out where each unit would go ([`Self::min_offset`],
    /// [`Self::max_offset`]) and writes nothing.
    pub fn counting(file_size: u64) -> Self {
        Self::with_dir(None, file_size)
    }

    fn with_dir(dir: Option<PathBuf>, file_size: u64) -> Self {
        QueueWriter {
            dir,
            file_size: file_size.max(UNIT_SIZE as u64),
            pos: None,
            pending: Vec::new(),
            pending_start: 0,
            max_physic_offset: -1,
            files: Vec::new(),
            first: None,
        }
    }

    /// The queue's min offset as the broker would find it: the first real unit.
    pub fn min_offset(&self) -> u64 {
        self.first.unwrap_or(0)
    }

    /// The queue's max offset: one past the last unit.
    pub fn max_offset(&self) -> u64 {
        self.pos.map_or(0, |p| p / UNIT_SIZE as u64)
    }

    /// Bytes put but not yet written.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }

    /// Put the unit of the record whose QUEUEOFFSET is `queue_offset`.
    pub fn put(&mut self, unit: CqUnit, queue_offset: i64) -> Result<()> {
        if unit.offset + unit.size as i64 <= self.max_physic_offset {
            return Ok(()); // a repeat of a dispatched record
        }
        if !queue_offset_fits(queue_offset) {
            // Negative: below every write position, the broker takes it for a repeat and writes
            // nothing. Too large: its unit position is past what a Java long holds.
            return Ok(());
        }
        let expected = queue_offset as u64 * UNIT_SIZE as u64;
        let pos = match self.pos {
            Some(p) => p,
            None => {
                // First unit: the file holding it is created and, if the queue does not start
                // at 0, filled with pre-blank units up to it (`fillPreBlank`).
                let file_start = expected - expected % self.file_size;
                self.pending_start = file_start;
                if self.dir.is_some() {
                    let blank = CqUnit {
                        offset: 0,
                        size: PRE_BLANK_SIZE,
                        tags_code: 0,
                    }
                    .to_bytes();
                    for _ in 0..(expected - file_start) / UNIT_SIZE as u64 {
                        self.pending.extend_from_slice(&blank);
                    }
                }
                self.files.push(file_start);
                self.first = Some(expected / UNIT_SIZE as u64);
                expected
            }
        };
        if queue_offset != 0 && expected < pos {
            return Ok(()); // behind the write position: a repeat
        }
        // Ahead of the write position the broker logs "[BUG]logic queue order maybe wrong" and
        // still appends at the write position; so do we.
        if self.dir.is_some() {
            self.pending.extend_from_slice(&unit.to_bytes());
        }
        let next = pos + UNIT_SIZE as u64;
        self.pos = Some(next);
        self.max_physic_offset = unit.offset + unit.size as i64;
        if next.is_multiple_of(self.file_size) {
            self.flush()?;
            self.pending_start = next;
            self.files.push(next);
        } else if self.pending.len() >= CQ_FLUSH_BYTES {
            self.flush()?;
            self.pending_start = next;
        }
        Ok(())
    }

    /// Write what is pending (the writer goes on after it).
    pub fn flush(&mut self) -> Result<()> {
        let Some(dir) = self.dir.as_ref().filter(|_| !self.pending.is_empty()) else {
            return Ok(());
        };
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let file_start = self.pending_start - self.pending_start % self.file_size;
        let path = dir.join(offset_to_name(file_start));
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        f.seek(SeekFrom::Start(self.pending_start - file_start))
            .and_then(|_| f.write_all(&self.pending))
            .map_err(|e| Error::io(&path, e))?;
        self.pending_start += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// Write what is pending and give every file its full size (pre-allocated zeros).
    pub fn finish(&mut self) -> Result<()> {
        self.flush()?;
        let Some(dir) = self.dir.as_ref() else {
            return Ok(());
        };
        for &start in &self.files {
            let path = dir.join(offset_to_name(start));
            let f = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            f.set_len(self.file_size)
                .and_then(|_| f.sync_all())
                .map_err(|e| Error::io(&path, e))?;
        }
        Ok(())
    }
}
