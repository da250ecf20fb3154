//! Writing consume queue files.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;

use super::{CqUnit, PRE_BLANK_SIZE, UNIT_SIZE};
use crate::format::error::{Error, Result};
use crate::format::filename::offset_to_name;

/// Writes the files of one consume queue as `ConsumeQueue.putMessagePositionInfo` does: units
/// at QUEUEOFFSET*20, repeats skipped, pre-blank units before a queue that starts after 0, and
/// every file extended to its full size at the end.
pub struct QueueWriter {
    dir: PathBuf,
    file_size: u64,
    /// Stream position of the next unit; `None` before the first unit.
    pos: Option<u64>,
    /// Units not yet written to disk and the stream position of the first of them.
    pending: Vec<u8>,
    pending_start: u64,
    max_physic_offset: i64,
    /// Files touched, by start offset, to extend to full size at the end.
    files: Vec<u64>,
}

const CQ_FLUSH_BYTES: usize = 256 * 1024;

impl QueueWriter {
    pub fn new(dir: PathBuf, file_size: u64) -> Self {
        QueueWriter {
            dir,
            file_size,
            pos: None,
            pending: Vec::new(),
            pending_start: 0,
            max_physic_offset: -1,
            files: Vec::new(),
        }
    }

    /// Put the unit of the record whose QUEUEOFFSET is `queue_offset`.
    pub fn put(&mut self, unit: CqUnit, queue_offset: i64) -> Result<()> {
        if unit.offset + unit.size as i64 <= self.max_physic_offset {
            return Ok(()); // a repeat of a dispatched record
        }
        let expected = (queue_offset.max(0) as u64).saturating_mul(UNIT_SIZE as u64);
        let pos = match self.pos {
            Some(p) => p,
            None => {
                // First unit: the file holding it is created and, if the queue does not start
                // at 0, filled with pre-blank units up to it (`fillPreBlank`).
                let file_start = expected - expected % self.file_size;
                self.pending_start = file_start;
                let blank = CqUnit {
                    offset: 0,
                    size: PRE_BLANK_SIZE,
                    tags_code: 0,
                }
                .to_bytes();
                for _ in 0..(expected - file_start) / UNIT_SIZE as u64 {
                    self.pending.extend_from_slice(&blank);
                }
                self.files.push(file_start);
                expected
            }
        };
        if queue_offset != 0 && expected < pos {
            return Ok(()); // behind the write position: a repeat
        }
        // Ahead of the write position the broker logs "[BUG]logic queue order maybe wrong" and
        // still appends at the write position; so do we.
        self.pending.extend_from_slice(&unit.to_bytes());
        let next = pos + UNIT_SIZE as u64;
        self.pos = Some(next);
        self.max_physic_offset = unit.offset + unit.size as i64;
        if next % self.file_size == 0 {
            self.flush()?;
            self.pending_start = next;
            self.files.push(next);
        } else if self.pending.len() >= CQ_FLUSH_BYTES {
            self.flush()?;
            self.pending_start = next;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        let file_start = self.pending_start - self.pending_start % self.file_size;
        let path = self.dir.join(offset_to_name(file_start));
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        f.seek(SeekFrom::Start(self.pending_start - file_start))
            .and_then(|_| f.write_all(&self.pending))
            .map_err(|e| Error::io(&path, e))?;
        self.pending.clear();
        Ok(())
    }

    /// Write what is pending and give every file its full size (pre-allocated zeros).
    pub fn finish(&mut self) -> Result<()> {
        self.flush()?;
        for &start in &self.files {
            let path = self.dir.join(offset_to_name(start));
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
