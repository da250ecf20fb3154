//! The walk over one commitlog file, as the broker's recovery scan walks it
//! (`CommitLog.checkMessageAndReturnSize`): borrowed records one after another, the position
//! after the last good one (the broker's process offset) and how the walk ended: a blank record
//! ends the file, zeros (or fewer than 8 bytes) are the end of data, anything else is corruption
//! and stops the walk. [`walk_map`] runs it over a file's map, releasing the pages behind it.
//!
//! Every sequential read of the commitlog goes through [`RecordIter`]. What recovery adds on top
//! (its own checks of each record, going on past damage by resynchronising, to learn what a cut
//! there would drop) is `engine::check::recovery::walk_on`: it reads the records through this
//! walk and starts a new one where its rules go on past the end of the last.

use std::ops::ControlFlow;
use std::path::Path;

use super::read::{Record, Segment};
use super::MessageRef;
use crate::format::error::{Error, Result};
use crate::format::mapped::Mapped;

/// Bytes read at a time by [`walk_segment`].
pub const WALK_CHUNK: usize = 8 << 20;

/// How the walk over one file ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentEnd {
    /// Not finished yet.
    Running,
    /// A blank record at `pos` (file position) with the TOTALSIZE it carries.
    Blank { pos: usize, size: i32 },
    /// Zeros (or fewer than 8 bytes) from `pos`: the end of written data.
    EndOfData { pos: usize },
    /// A record that does not parse at `pos`; the error was yielded.
    Corrupt { pos: usize },
}

/// Iterator over the message records of one commitlog file: a `commitlog/` file's records one
/// after another, or a DLedger data file's entries each read as the record it wraps (positions
/// are then entry positions; a file-end marker is the blank). The walk ends where the broker
/// stops serving ([`Segment::served`]): after the last committed entry it ends as at the end
/// of the data.
pub struct RecordIter<'a> {
    buf: &'a [u8],
    seg: &'a Segment,
    pos: usize,
    check_crc: bool,
    end: SegmentEnd,
    ahead: crate::format::mapped::ReadAhead,
}

impl<'a> RecordIter<'a> {
    /// Walk `buf`, the bytes of `seg`, from its start.
    pub fn new(buf: &'a [u8], seg: &'a Segment, check_crc: bool) -> Self {
        Self::starting_at(buf, seg, 0, check_crc)
    }

    /// Start the walk at walk position `pos` (a record boundary; in a DLedger file an entry's
    /// position, see [`Segment::walk_pos`]).
    pub fn starting_at(buf: &'a [u8], seg: &'a Segment, pos: usize, check_crc: bool) -> Self {
        RecordIter {
            buf: seg.served(buf),
            seg,
            pos,
            check_crc,
            end: SegmentEnd::Running,
            ahead: Default::default(),
        }
    }

    /// How the walk ended (after the iterator returned `None`).
    pub fn end(&self) -> &SegmentEnd {
        &self.end
    }

    /// Position after the last good record: the broker's "process offset" within this file.
    pub fn valid_pos(&self) -> usize {
        self.pos
    }

    /// Go on with the read-ahead of an earlier walk over the same buffer (a walk taken up again
    /// where it paused does not prefetch what that one already did).
    pub fn with_read_ahead(mut self, ahead: crate::format::mapped::ReadAhead) -> Self {
        self.ahead = ahead;
        self
    }

    /// How far this walk has read ahead.
    pub fn read_ahead(&self) -> crate::format::mapped::ReadAhead {
        self.ahead
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<MessageRef<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.end != SegmentEnd::Running {
            return None;
        }
        self.ahead.touch(self.buf, self.pos);
        match self.seg.record_at(self.buf, self.pos, self.check_crc) {
            Ok(Record::Message(m)) => {
                self.pos = self.seg.after(self.pos, &m);
                Some(Ok(m))
            }
            Ok(Record::Blank { size }) => {
                self.end = SegmentEnd::Blank {
                    pos: self.pos,
                    size,
                };
                None
            }
            Ok(Record::EndOfData) => {
                self.end = SegmentEnd::EndOfData { pos: self.pos };
                None
            }
            Err(e) => {
                self.end = SegmentEnd::Corrupt { pos: self.pos };
                Some(Err(e.in_file(&self.seg.path, 0)))
            }
        }
    }
}

/// How a walk over one commitlog file ended.
#[derive(Debug)]
pub struct WalkEnd {
    pub end: SegmentEnd,
    /// The callback asked to stop.
    pub stopped: bool,
    pub error: Option<Error>,
    pub records: u64,
    pub bytes: u64,
}

/// Walk the records of one commitlog file from file position `from` (a record boundary), through
/// the file's map: no record is copied, a size field however large allocates nothing, and the
/// pages walked are released every [`WALK_CHUNK`] bytes, so resident memory stays small whatever
/// the file size. Same end rules as [`RecordIter`]. `f` returns
/// `Break` to stop.
pub fn walk_segment(
    seg: &Segment,
    from: u64,
    check_crc: bool,
    f: impl FnMut(&MessageRef<'_>) -> ControlFlow<()>,
) -> Result<WalkEnd> {
    let map = seg.map()?;
    Ok(walk_map(&map, seg, from, check_crc, true, f))
}

/// [`walk_segment`] over a map the caller holds (and may share with threads reading the records
/// walked); with `release`, the pages walked are released as the walk goes.
pub fn walk_map(
    map: &Mapped,
    seg: &Segment,
    from: u64,
    check_crc: bool,
    release: bool,
    mut f: impl FnMut(&MessageRef<'_>) -> ControlFlow<()>,
) -> WalkEnd {
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(map.len());
    let mut it = RecordIter::starting_at(map, seg, from, check_crc);
    let mut out = WalkEnd {
        end: SegmentEnd::Running,
        stopped: false,
        error: None,
        records: 0,
        bytes: 0,
    };
    let mut released = from;
    loop {
        match it.next() {
            Some(Ok(m)) => {
                out.records += 1;
                out.bytes += m.raw.len() as u64;
                if f(&m).is_break() {
                    out.stopped = true;
                    return out;
                }
                let at = it.valid_pos();
                if release && at - released >= WALK_CHUNK {
                    map.release(released, at);
                    released = at;
                }
            }
            Some(Err(e)) => {
                out.end = it.end().clone();
                out.error = Some(e);
                return out;
            }
            None => {
                out.end = it.end().clone();
                return out;
            }
        }
    }
}

/// How a [`LogCursor`] ended.
#[derive(Debug)]
pub enum LogEnd {
    /// Still walking.
    Running,
    /// The data ends at `offset`: zeros, the end of the last file, or a file after a blank record
    /// that holds nothing (the broker's recovery ends the data there).
    EndOfData { offset: u64 },
    /// Bytes at `offset` that are not a record: the walk stops there, as the recovery does.
    Corrupt { offset: u64, error: Error },
}

/// The records of a whole commitlog, one at a time, driven by the caller: a merge walk over
/// several logs steps each as it needs. One file is mapped at a time and read through
/// [`RecordIter`] (same end rules: a blank record moves on to the next file, zeros end the data,
/// a bad record stops the walk); the pages walked are released as it goes.
pub struct LogCursor<'a> {
    segments: &'a [Segment],
    seg: usize,
    map: Option<Mapped>,
    /// Where the next record starts in the mapped file.
    pos: usize,
    /// The current record: file position and length.
    current: Option<(usize, usize)>,
    released: usize,
    ahead: crate::format::mapped::ReadAhead,
    end: LogEnd,
    check_crc: bool,
    /// Where to start in the first file mapped ([`LogCursor::starting_at`]).
    pending_pos: Option<usize>,
}

impl<'a> LogCursor<'a> {
    /// A cursor before the first record of `segments` (in offset order).
    pub fn new(segments: &'a [Segment], check_crc: bool) -> Self {
        LogCursor {
            segments,
            seg: 0,
            map: None,
            pos: 0,
            current: None,
            released: 0,
            ahead: Default::default(),
            end: if segments.is_empty() {
                LogEnd::EndOfData { offset: 0 }
            } else {
                LogEnd::Running
            },
            check_crc,
            pending_pos: None,
        }
    }

    /// A cursor before the record at commitlog offset `offset` (which must be a record's start,
    /// as a walk found it); at the end when no file holds it.
    pub fn starting_at(segments: &'a [Segment], offset: u64, check_crc: bool) -> Self {
        let mut c = LogCursor::new(segments, check_crc);
        match segments
            .iter()
            .position(|s| s.start <= offset && offset < s.start.saturating_add(s.len))
        {
            Some(n) => {
                c.seg = n;
                c.pending_pos = Some((offset - segments[n].start) as usize);
            }
            None => c.end = LogEnd::EndOfData { offset },
        }
        c
    }

    /// Move to the next record; `Ok(false)` when there is none ([`LogCursor::end`] says why).
    /// Only a file that cannot be mapped is an error.
    pub fn step(&mut self) -> Result<bool> {
        self.current = None;
        while matches!(self.end, LogEnd::Running) {
            let Some(seg) = self.segments.get(self.seg) else {
                let offset = self
                    .segments
                    .last()
                    .map_or(0, |s| s.start.saturating_add(s.len));
                self.end = LogEnd::EndOfData { offset };
                break;
            };
            if self.map.is_none() {
                self.map = Some(seg.map()?);
                self.pos = self.pending_pos.take().unwrap_or(0);
                self.released = self.pos;
                self.ahead = Default::default();
            }
            let Some(map) = &self.map else { break };
            let mut it = RecordIter::starting_at(map, seg, self.pos, self.check_crc)
                .with_read_ahead(self.ahead);
            let next = it.next();
            self.ahead = it.read_ahead();
            let file_end = it.end().clone();
            match next {
                Some(Ok(m)) => {
                    // In a DLedger file the record sits after its entry's header.
                    let at = usize::try_from(m.position.saturating_sub(seg.start)).unwrap_or(0);
                    self.current = Some((at, m.raw.len()));
                    self.pos = it.valid_pos();
                    if self.pos - self.released >= WALK_CHUNK {
                        map.release(self.released, self.pos);
                        self.released = self.pos;
                    }
                    return Ok(true);
                }
                Some(Err(error)) => {
                    self.end = LogEnd::Corrupt {
                        offset: seg.start + self.pos as u64,
                        error,
                    };
                }
                None => match file_end {
                    SegmentEnd::Blank { .. } => {
                        self.seg += 1;
                        self.map = None;
                    }
                    _ => {
                        self.end = LogEnd::EndOfData {
                            offset: seg.start + self.pos as u64,
                        }
                    }
                },
            }
        }
        self.map = None;
        Ok(false)
    }

    /// The commitlog offset of the current record.
    pub fn offset(&self) -> Option<u64> {
        let (pos, _) = self.current?;
        Some(self.segments.get(self.seg)?.start + pos as u64)
    }

    /// The bytes of the current record.
    pub fn raw(&self) -> Option<&[u8]> {
        let (pos, len) = self.current?;
        self.map.as_ref()?.get(pos..pos + len)
    }

    /// The current record, parsed.
    pub fn message(&self) -> Option<MessageRef<'_>> {
        super::message_in(self.raw()?, i64::try_from(self.offset()?).ok()?)
    }

    /// The file of the current record.
    pub fn file(&self) -> Option<&'a Path> {
        self.current?;
        self.segments.get(self.seg).map(|s| s.path.as_path())
    }

    /// How the walk ended (`Running` until [`LogCursor::step`] returned `false`).
    pub fn end(&self) -> &LogEnd {
        &self.end
    }
}
