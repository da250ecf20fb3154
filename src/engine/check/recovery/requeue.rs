//! What recovery does to a queue whose recovered end is not where its records go: a lost tail
//! of consume queue units, a deleted last file, a last file of zeros after a full one
//! (apache/rocketmq#7355, #9728, #10108).
//!
//! The broker's rules, per queue (4.9 and 5.x `ConsumeQueue`):
//! - `recover` ends the queue at its first invalid unit; `truncateDirtyFiles` deletes the files
//!   after that end and keeps the one starting at it with nothing written;
//! - `putMessagePositionInfo` skips a record already covered (`offset + size <=
//!   maxPhysicOffset`) or whose queue offset is below the queue's end, and appends every other
//!   at the queue's end, whatever its own offset (a queue with no file starts at the record's
//!   offset, pre-blanks before it);
//! - `truncateDirtyLogicFiles(cut)` scans the last file again from its first unit, which it keeps
//!   whatever it holds when it points below the cut (a unit of zeros then stays, and is served as
//!   a message at offset 0), then later units while valid and below the cut, the stale bytes
//!   after the queue's end included; a last file whose first unit points at or past the cut is
//!   deleted and the one before scanned.
//!
//! Abnormal recovery (and 5.x's clean one) dispatches during the scan, then truncates; a clean
//! 4.9 start truncates, then its reput service dispatches. A record appended at another offset
//! than its own is served there; the records between the queue's end and the first one
//! appended are served nowhere.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::store::dispatch::dispatch;
use crate::engine::store::Store;
use crate::format::commitlog::walk::LogCursor;
use crate::format::consumequeue::{ConsumeQueue, CqUnit, UNIT_SIZE};
use crate::format::error::Result;
use crate::format::mapped::Mapped;

/// A queue the next start leaves with units at the wrong queue offsets, units that are no
/// message, or messages it never serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requeue {
    pub topic: String,
    pub queue_id: i32,
    /// Where the queue ends after `ConsumeQueue.recover`.
    pub recovered_end: u64,
    /// Messages given a unit at another queue offset than their own.
    pub misplaced: u64,
    /// The first of them: its own queue offset and the one it is served at.
    pub first_misplaced: Option<(u64, u64)>,
    /// Messages of the queue served at no offset: those from the recovered end to the first
    /// message dispatched again.
    pub out_of_service: u64,
    /// Units kept that are no message (zeros, a negative offset), by queue offset.
    pub bogus_units: Vec<u64>,
    /// Units kept past where the queue's data ended (stale bytes after it).
    pub stale_units: u64,
    /// `getMaxOffsetInQueue` after the start.
    pub max_offset: u64,
}

/// One queue as the start leaves it, step by step.
struct Sim<'a> {
    cq: Option<&'a ConsumeQueue>,
    units_per_file: u64,
    /// Starts (queue offsets) of the files the queue has.
    files: Vec<u64>,
    /// Files that kept their bytes from before the start (not made by an append).
    old_files: Vec<u64>,
    end: u64,
    max_physic: i64,
    /// Units appended: the queue offsets `[from, to)` (pre-blanks included), all valid and
    /// below the cut.
    appended: Option<(u64, u64)>,
    recovered_end: u64,
    misplaced: u64,
    first_misplaced: Option<(u64, u64)>,
    /// The own queue offset of the first message appended, and where.
    first_appended: Option<(u64, u64)>,
    bogus_units: Vec<u64>,
    stale_units: u64,
}

impl<'a> Sim<'a> {
    /// A queue after `ConsumeQueue.recover` and `truncateDirtyFiles`.
    fn recovered(cq: Option<&'a ConsumeQueue>, units_per_file: u64) -> Result<Self> {
        let (end, max_physic) = match cq {
            Some(cq) => super::plan::queue_end(cq)?,
            None => (0, 0),
        };
        let files: Vec<u64> = cq
            .map(|cq| {
                cq.files
                    .iter()
                    .map(|f| f.start / UNIT_SIZE as u64)
                    .filter(|&s| s <= end)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Sim {
            cq,
            units_per_file,
            old_files: files.clone(),
            files,
            end,
            max_physic: if cq.is_some() { max_physic as i64 } else { -1 },
            appended: None,
            recovered_end: end,
            misplaced: 0,
            first_misplaced: None,
            first_appended: None,
            bogus_units: Vec::new(),
            stale_units: 0,
        })
    }

    /// `putMessagePositionInfo` of one record: its own queue offset, commitlog offset and size.
    fn put(&mut self, own: u64, offset: i64, size: i32) {
        if offset.saturating_add(size as i64) <= self.max_physic {
            return;
        }
        if self.files.is_empty() {
            // The first file is made where the record's offset falls, pre-blanked up to it.
            let start = own - own % self.units_per_file.max(1);
            self.files.push(start);
            self.end = own;
            self.appended = Some((start, own));
        } else if own != 0 && own < self.end {
            return;
        }
        let last = self.files.last().copied().unwrap_or(0);
        if self.end >= last + self.units_per_file {
            self.files.push(last + self.units_per_file);
        }
        let at = self.end;
        if own != at {
            self.misplaced += 1;
            self.first_misplaced.get_or_insert((own, at));
        }
        self.first_appended.get_or_insert((own, at));
        let from = self.appended.map_or(at, |(f, _)| f);
        self.appended = Some((from, at + 1));
        self.max_physic = offset.saturating_add(size as i64);
        self.end = at + 1;
    }

    /// The bytes of the file starting at queue offset `start`, when it kept them from before
    /// the start (a file an append made holds only what was appended).
    fn old_bytes(&self, start: u64) -> Result<Option<Mapped>> {
        let Some(cq) = self.cq else { return Ok(None) };
        if !self.old_files.contains(&start) {
            return Ok(None);
        }
        let at = start * UNIT_SIZE as u64;
        match cq.files.iter().find(|f| f.start == at) {
            Some(f) => Ok(Some(Mapped::open(&f.path)?)),
            None => Ok(None),
        }
    }

    /// The unit at queue offset `q` of the file starting at `start` as the rescan reads it
    /// (zeros past the file's bytes).
    fn unit(&self, q: u64, start: u64, old: Option<&Mapped>) -> CqUnit {
        if self.appended.is_some_and(|(f, t)| (f..t).contains(&q)) {
            // Appended units point at records below the cut.
            return CqUnit {
                offset: 0,
                size: 1,
                tags_code: 0,
            };
        }
        let at = ((q - start) * UNIT_SIZE as u64) as usize;
        old.and_then(|m| m.get(at..))
            .and_then(CqUnit::from_bytes)
            .unwrap_or(CqUnit {
                offset: 0,
                size: 0,
                tags_code: 0,
            })
    }

    /// `truncateDirtyLogicFiles(cut)`.
    fn truncate(&mut self, cut: u64) -> Result<()> {
        let cut = cut as i64;
        self.max_physic = cut;
        while let Some(&start) = self.files.last() {
            let old = self.old_bytes(start)?;
            let first = self.unit(start, start, old.as_ref());
            if first.offset >= cut {
                self.files.pop();
                self.end = start;
                continue;
            }
            self.keep(start, &first);
            for q in start + 1..start + self.units_per_file {
                let u = self.unit(q, start, old.as_ref());
                if !(u.is_valid() && u.offset < cut) {
                    break;
                }
                self.keep(q, &u);
            }
            return Ok(());
        }
        Ok(())
    }

    /// A unit the rescan keeps at queue offset `q`.
    fn keep(&mut self, q: u64, u: &CqUnit) {
        let appended = self.appended.is_some_and(|(f, t)| (f..t).contains(&q));
        if !appended {
            if !u.is_valid() {
                self.bogus_units.push(q);
            } else if q >= self.recovered_end {
                self.stale_units += 1;
            }
            self.max_physic = u.offset.saturating_add(u.size as i64);
        }
        self.end = q + 1;
    }

    /// What the start did to this queue, when it did something wrong.
    fn outcome(self, topic: &str, queue_id: i32) -> Option<Requeue> {
        let out_of_service = match self.first_appended {
            Some((own, at)) if own > at => own - at,
            _ => 0,
        };
        let wrong = self.misplaced > 0
            || out_of_service > 0
            || !self.bogus_units.is_empty()
            || self.stale_units > 0;
        wrong.then(|| Requeue {
            topic: topic.to_string(),
            queue_id,
            recovered_end: self.recovered_end,
            misplaced: self.misplaced,
            first_misplaced: self.first_misplaced,
            out_of_service,
            bogus_units: self.bogus_units,
            stale_units: self.stale_units,
            max_offset: self.end,
        })
    }
}

/// Which comes first at this start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Abnormal recovery, and 5.x's clean one: dispatch during the scan, then truncate.
    DispatchThenTruncate,
    /// A clean 4.9 start: truncate, then the reput service dispatches.
    TruncateThenDispatch,
}

/// The queues the next start leaves wrong: records in `[from, to)` dispatched again, `truncate`
/// the cut when `truncateDirtyLogicFiles` runs.
pub fn requeues(
    store: &Store,
    from: u64,
    to: u64,
    truncate: Option<u64>,
    order: Order,
) -> Result<Vec<Requeue>> {
    let units_per_file = store.geometry.cq_file_units.value.max(1);
    let mut sims: BTreeMap<(String, i32), Sim<'_>> = BTreeMap::new();
    for (k, cq) in &store.queues {
        sims.insert(k.clone(), Sim::recovered(Some(cq), units_per_file)?);
    }
    let truncate_all = |sims: &mut BTreeMap<(String, i32), Sim<'_>>| -> Result<()> {
        if let Some(cut) = truncate {
            for s in sims.values_mut() {
                s.truncate(cut)?;
            }
        }
        Ok(())
    };
    if order == Order::TruncateThenDispatch {
        truncate_all(&mut sims)?;
    }
    if from < to {
        dispatch_range(store, from, to, &mut sims, units_per_file)?;
    }
    if order == Order::DispatchThenTruncate {
        truncate_all(&mut sims)?;
    }
    Ok(sims
        .into_iter()
        .filter_map(|((t, q), s)| s.outcome(&t, q))
        .collect())
}

/// Every record in `[from, to)` put into its queue, in commitlog order.
fn dispatch_range<'a>(
    store: &'a Store,
    from: u64,
    to: u64,
    sims: &mut BTreeMap<(String, i32), Sim<'a>>,
    units_per_file: u64,
) -> Result<()> {
    let mut c = LogCursor::starting_at(&store.commitlog.segments, from, false);
    while c.step()? {
        if c.offset().is_none_or(|o| o >= to) {
            break;
        }
        let Some(m) = c.message() else { continue };
        let Ok(d) = dispatch(&m, &store.geometry) else {
            continue;
        };
        let Some(t) = d.cq else { continue };
        let Ok(own) = u64::try_from(t.queue_offset) else {
            continue;
        };
        let key = (t.topic, t.queue_id);
        if !sims.contains_key(&key) {
            sims.insert(key.clone(), Sim::recovered(None, units_per_file)?);
        }
        if let Some(s) = sims.get_mut(&key) {
            s.put(own, t.unit.offset, t.unit.size);
        }
    }
    Ok(())
}
