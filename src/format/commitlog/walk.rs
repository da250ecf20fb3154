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
