//! Paging a filtered message list over a whole consume queue without loading it.
//!
//! A page of matches is found by scanning the queue's units from a position, forward or
//! backward, in chunks of a bounded number of units ([`PageScan::step`]); the event loop runs
//! one chunk per turn and shows how many offsets were scanned, so a rare match in a long queue
//! never freezes the screen and memory stays at one page. Backward scans read a block below
//! the position forward and keep its last matches, so every unit is read once, in file order.
//! [`count_matches`] counts the matches of a whole queue the same way, on a worker thread.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::app::MsgRow;
use super::filter::MessageFilter;
use crate::engine::store::reader::Reader;
use crate::format::consumequeue::ConsumeQueue;

/// Units one scan step reads at most.
pub const CHUNK_UNITS: u64 = 4096;

/// Which way a scan walks from its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Backward,
}

/// What to do with the matches once the scan has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// They become the page; select `keep` when it is among them, else the first.
    PageFromFirst { keep: Option<u64> },
    /// They become the page; select the last (End).
    PageToLast,
    /// They are added after the page, which scrolls; select the last added.
    ScrollDown,
    /// They are added before the page, which scrolls; select the first added.
    ScrollUp,
}

/// A page of matches being looked for.
#[derive(Debug, Clone)]
pub struct PageScan {
    pub direction: Direction,
    /// Where it started.
    pub start: u64,
    /// Forward: the next queue offset to read. Backward: the end (exclusive) of what is left.
    pub cursor: u64,
    /// The queue's bounds `[min, max)`.
    pub min: u64,
    pub max: u64,
    pub want: usize,
    /// Matches so far, ascending by queue offset.
    pub found: Vec<MsgRow>,
    /// Units read so far.
    pub scanned: u64,
    pub placement: Placement,
}

impl PageScan {
    pub fn new(
        direction: Direction,
        from: u64,
        (min, max): (u64, u64),
        want: usize,
        placement: Placement,
    ) -> Self {
        let from = from.clamp(min, max.max(min));
        PageScan {
            direction,
            start: from,
            cursor: from,
            min,
            max,
            want: want.max(1),
            found: Vec::new(),
            scanned: 0,
            placement,
        }
    }

    /// True when nothing is left to read or enough matches were found.
    pub fn is_done(&self) -> bool {
        self.found.len() >= self.want
            || match self.direction {
                Direction::Forward => self.cursor >= self.max,
                Direction::Backward => self.cursor <= self.min,
            }
    }

    /// Read at most `budget` units; true when the scan is done.
    pub fn step(
        &mut self,
        reader: &Reader<'_>,
        cq: &ConsumeQueue,
        filter: Option<&MessageFilter>,
        budget: u64,
    ) -> bool {
        if self.is_done() {
            return true;
        }
        match self.direction {
            Direction::Forward => {
                let end = self.cursor.saturating_add(budget).min(self.max);
                let need = self.want - self.found.len();
                let mut got = Vec::new();
                let read = scan_range(reader, cq, self.cursor, end, filter, |r| {
                    got.push(r);
                    if got.len() >= need {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                });
                self.scanned += read.units;
                self.cursor = if read.queue_ended {
                    self.max
                } else {
                    read.next
                };
                self.found.extend(got);
            }
            Direction::Backward => {
                let start = self.cursor.saturating_sub(budget).max(self.min);
                let mut block = Vec::new();
                let read = scan_range(reader, cq, start, self.cursor, filter, |r| {
                    block.push(r);
                    ControlFlow::Continue(())
                });
                self.scanned += read.units;
                let need = self.want - self.found.len();
                let keep_from = block.len().saturating_sub(need);
                block.drain(..keep_from);
                block.append(&mut self.found);
                self.found = block;
                self.cursor = start;
            }
        }
        self.is_done()
    }
}

/// What [`scan_range`] read.
pub struct RangeRead {
    pub units: u64,
    /// The first queue offset not read.
    pub next: u64,
    /// The queue's units ended before the range did.
    pub queue_ended: bool,
}

/// Visit the matching messages with queue offsets in `[from, to)` in order, until `visit`
/// breaks. Pre-blank units and units whose record cannot be read are skipped; the scan also
/// ends at the first invalid unit (the queue's written end).
pub fn scan_range(
    reader: &Reader<'_>,
    cq: &ConsumeQueue,
    from: u64,
    to: u64,
    filter: Option<&MessageFilter>,
    mut visit: impl FnMut(MsgRow) -> ControlFlow<()>,
) -> RangeRead {
    let mut next = from;
    let mut units = 0;
    let mut stopped = false;
    let walked = reader.for_each_unit_from(cq, from, |qo, u| {
        if qo >= to {
            return ControlFlow::Break(());
        }
        units += 1;
        next = qo + 1;
        if u.is_pre_blank() || filter.is_some_and(|f| !f.may_match_unit(&u)) {
            return ControlFlow::Continue(());
        }
        // An uncommitted DLedger entry's record is listed, marked: the broker does not serve it.
        match u.commitlog_offset().map(|o| reader.message_shown_at(o)) {
            Some(Ok(Some((loc, uncommitted))))
                if filter.is_none_or(|f| f.matches(&loc.message)) =>
            {
                let flow = visit(MsgRow {
                    uncommitted,
                    ..MsgRow::of(qo, &loc.message)
                });
                stopped = flow.is_break();
                flow
            }
            _ => ControlFlow::Continue(()),
        }
    });
    // Short of `to` without being stopped: the queue's units end there (or cannot be read),
    // so the rest of the range holds nothing.
    let queue_ended = walked.is_err() || (!stopped && next < to);
    RangeRead {
        units,
        next: if queue_ended { to } else { next },
        queue_ended,
    }
}

/// Progress of a whole-queue match count, shared with the thread doing it.
#[derive(Debug, Default)]
pub struct MatchCount {
    pub scanned: AtomicU64,
    pub matched: AtomicU64,
    pub done: AtomicBool,
    pub cancel: AtomicBool,
}

/// Count the matches of `filter` in `[min, max)`, chunk by chunk, until done or cancelled.
pub fn count_matches(
    reader: &Reader<'_>,
    cq: &ConsumeQueue,
    (min, max): (u64, u64),
    filter: &MessageFilter,
    progress: &MatchCount,
) {
    let mut at = min;
    while at < max && !progress.cancel.load(Ordering::Relaxed) {
        let end = at.saturating_add(CHUNK_UNITS).min(max);
        let read = scan_range(reader, cq, at, end, Some(filter), |_| {
            progress.matched.fetch_add(1, Ordering::Relaxed);
            ControlFlow::Continue(())
        });
        progress.scanned.fetch_add(read.units, Ordering::Relaxed);
        if read.queue_ended {
            break;
        }
        at = end;
    }
    progress.done.store(true, Ordering::Relaxed);
}
