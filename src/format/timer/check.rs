//! Structural checks of the timer files and of the links between them: the log's entries and
//! file sizes, every wheel slot's chain (units of the slot's second, positions strictly going
//! back, the count), pending units no slot links, and the checkpoint against the log's end.
//! [`check_log_replay`] finds the log's valid units and the wheel they build (what a repair
//! keeps and writes).
//! Links into the commitlog are checked by the store-level verify.

use std::path::Path;

use super::checkpoint::TimerCheckpoint;
use super::log::{magic, LogStop, TimerLog, TimerUnit};
use super::wheel::{RebuiltWheel, TimerWheel};
use crate::format::finding::{Code, Finding};

/// What [`check_log`] learned besides its findings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogCheck {
    /// Units read, delete markers included.
    pub units: u64,
    /// Position after the last unit.
    pub data_end: u64,
}

/// The timer log's files and entries.
pub fn check_log(log: &TimerLog, out: &mut Vec<Finding>) -> LogCheck {
    for e in &log.odd {
        out.push(Finding::new(
            Code::TimerNotAFile,
            &e.path,
            0,
            format!("{} in timerlog/ is {}", e.path.display(), e.kind.describe()),
        ));
    }
    for p in &log.foreign {
        out.push(Finding::new(
            Code::TimerForeignFile,
            p,
            0,
            "not a 20-digit offset name: the broker's timer log does not load it",
        ));
    }
    let size = log.file_size();
    for f in &log.files {
        if f.len != size || (size > 0 && f.start % size != 0) {
            out.push(Finding::new(
                Code::TimerLogFileSize,
                &f.path,
                0,
                format!(
                    "{} bytes starting at {}: the first file has {size} bytes, and names are \
                     multiples of the file size",
                    f.len, f.start
                ),
            ));
        }
    }
    let mut units = log.units();
    let mut n = 0u64;
    for (pos, u) in units.by_ref() {
        n += 1;
        if let Some(why) = unit_problem(&u) {
            let (file, at) = place(log, pos);
            out.push(Finding::new(
                Code::TimerBadUnit,
                file,
                at,
                format!("timer log unit at {pos}: {why}"),
            ));
        }
    }
    match units.stop() {
        Some(LogStop::Bad(e)) => out.push(Finding::new(
            Code::TimerLogBadEntry,
            e.path(),
            e.offset().unwrap_or(0),
            e.to_string(),
        )),
        Some(LogStop::EndBeforeLastFile { file, file_offset }) => out.push(Finding::new(
            Code::TimerLogEndEarly,
            file,
            *file_offset,
            "zero where the next unit or the end-of-file blank should be, and later files \
             exist: the broker's timer log stops here",
        )),
        _ => {}
    }
    LogCheck {
        units: n,
        data_end: units.data_end(),
    }
}

/// What is wrong with a unit alone: magic bits, offset or size no enqueue writes.
pub fn unit_problem(u: &TimerUnit) -> Option<String> {
    let known = magic::DEFAULT | magic::ROLL | magic::DELETE;
    if u.magic & !known != 0 || u.magic == 0 {
        Some(format!("magic {:#x} is not a mix of 1, 2 and 4", u.magic))
    } else if u.commitlog_offset < 0 {
        Some(format!("negative commitlog offset {}", u.commitlog_offset))
    } else if u.record_size <= 0 {
        Some(format!("record size {} is not positive", u.record_size))
    } else {
        None
    }
}

/// The timer log's valid units replayed into a wheel ([`check_log_replay`]).
#[derive(Debug, Clone)]
pub struct LogReplay {
    /// The wheel the valid units build.
    pub wheel: RebuiltWheel,
    /// Valid units (delete markers included).
    pub units: u64,
    /// The position after the last valid unit: where the timer log is cut.
    pub end: u64,
    /// Why the units stop before the log's data does (a unit that is not valid, bytes that are
    /// not a unit, data after the end), `None` when the log is whole.
    pub stop: Option<String>,
    /// The last valid unit (its position and unit).
    pub last: Option<(u64, TimerUnit)>,
}

/// Walk the timer log as the broker's recovery does (`recoverAndRevise`) and replay every unit
/// into a wheel as its enqueue did, stopping at the first unit that is not what the enqueue
/// wrote: bytes that are not a unit, a unit [`unit_problem`] rejects, or one whose `prev_pos`
/// is not the last unit of its slot at that point (a self-link, a chain the wheel cannot
/// walk). Positions before the log's first file were deleted by retention: a unit starting a
/// slot may point there. Data after the stop (or after the zero end) is reported in `stop`.
pub fn check_log_replay(log: &TimerLog, precision_ms: i64) -> LogReplay {
    let log_start = log.files.first().map(|f| f.start as i64).unwrap_or(0);
    let mut wheel = RebuiltWheel::new(precision_ms);
    let mut units = log.units();
    let (mut n, mut last, mut stop) = (0u64, None, None);
    for (pos, u) in units.by_ref() {
        let expected = wheel.get_slot(u.slot_time_ms()).last_pos;
        let prev_ok = u.prev_pos == expected || (expected == -1 && u.prev_pos < log_start);
        let why = unit_problem(&u).or_else(|| {
            (!prev_ok).then(|| {
                format!(
                    "prevPos {} where its slot's last unit is at {expected}",
                    u.prev_pos
                )
            })
        });
        if let Some(why) = why {
            stop = Some((pos, format!("the unit at {pos}: {why}")));
            break;
        }
        wheel.put(pos, &u);
        n += 1;
        last = Some((pos, u));
    }
    let (end, stop) = match stop {
        Some((pos, why)) => (pos, Some(why)),
        None => {
            let end = units.data_end();
            let why = match units.stop() {
                Some(LogStop::Bad(e)) => Some(e.to_string()),
                Some(LogStop::EndBeforeLastFile { file, file_offset }) => Some(format!(
                    "zero at {} byte {file_offset}, and later files exist",
                    file.display()
                )),
                _ if log.has_data_from(end) => Some(format!("zero at {end}, and data after it")),
                _ => None,
            };
            (end, why)
        }
    };
    LogReplay {
        wheel,
        units: n,
        end,
        stop,
        last,
    }
}

/// The file holding timer log position `pos` and the offset inside it.
fn place(log: &TimerLog, pos: u64) -> (&Path, u64) {
    let i = log
        .files
        .partition_point(|f| f.start <= pos)
        .saturating_sub(1);
    match log.files.get(i) {
        Some(f) => (&f.path, pos.saturating_sub(f.start)),
        None => (&log.dir, pos),
    }
}

/// Every non-empty slot's chain, and pending units (slot time at or after the checkpoint's read
/// time) that no chain reaches. Positions before the log's first file belong to files the
/// broker already deleted and are not followed.
pub fn check_wheel(
    wheel: &TimerWheel,
    log: &TimerLog,
    checkpoint: Option<&TimerCheckpoint>,
    precision_ms: i64,
    out: &mut Vec<Finding>,
) {
    let log_start = log.files.first().map(|f| f.start as i64).unwrap_or(0);
    let mut linked = std::collections::HashSet::new();
    for (index, slot) in wheel.non_empty() {
        let at = index * super::wheel::SLOT_SIZE as u64;
        let mut bad = |why: String| {
            out.push(Finding::new(
                Code::TimerSlotChain,
                wheel.path(),
                at,
                format!("slot {index} ({} s): {why}", slot.time_div_precision),
            ))
        };
        if slot.last_pos < log_start {
            continue;
        }
        let mut pos = slot.last_pos;
        let mut count = 0i64;
        let mut first = None;
        let mut broken = false;
        while pos >= log_start {
            let Some(u) = log.unit_at(pos) else {
                bad(format!("position {pos} is not a timer log unit"));
                broken = true;
                break;
            };
            if u.slot_time_ms() / precision_ms.max(1) != slot.time_div_precision {
                bad(format!(
                    "the unit at {pos} belongs to second {}",
                    u.slot_time_ms() / precision_ms.max(1)
                ));
                broken = true;
                break;
            }
            linked.insert(pos);
            count += if u.is_delete() { -1 } else { 1 };
            first = Some(pos);
            if u.prev_pos >= pos {
                bad(format!(
                    "the unit at {pos} points forward to {} (a loop)",
                    u.prev_pos
                ));
                broken = true;
                break;
            }
            pos = u.prev_pos;
        }
        if broken || pos != -1 {
            continue;
        }
        if first != Some(slot.first_pos) {
            bad(format!(
                "the chain starts at {} but the slot says {}",
                first.unwrap_or(-1),
                slot.first_pos
            ));
        } else if count != slot.num as i64 {
            bad(format!(
                "{count} messages on the chain but the slot counts {}",
                slot.num
            ));
        }
    }
    let read_time = checkpoint.map(|c| c.last_read_time_ms).unwrap_or(i64::MIN);
    for (pos, u) in log.units() {
        if u.slot_time_ms() >= read_time && !linked.contains(&(pos as i64)) {
            let (file, at) = place(log, pos);
            out.push(Finding::new(
                Code::TimerUnitUnlinked,
                file,
                at,
                format!(
                    "the unit at {pos} (commitlog offset {}, second {}) is not on its slot's \
                     chain",
                    u.commitlog_offset,
                    u.slot_time_ms() / precision_ms.max(1)
                ),
            ));
        }
    }
}

/// The checkpoint against the log's data end and the timer topic's queue length.
pub fn check_checkpoint(
    path: &Path,
    cp: &TimerCheckpoint,
    log_data_end: u64,
    timer_queue_max: i64,
    out: &mut Vec<Finding>,
) {
    if cp.last_timer_log_flush_pos > log_data_end as i64 {
        out.push(Finding::new(
            Code::TimerCheckpointAhead,
            path,
            8,
            format!(
                "lastTimerLogFlushPos {} is past the timer log's data end {log_data_end}",
                cp.last_timer_log_flush_pos
            ),
        ));
    }
    if cp.last_timer_queue_offset > timer_queue_max {
        out.push(Finding::new(
            Code::TimerCheckpointAhead,
            path,
            16,
            format!(
                "lastTimerQueueOffset {} is past the timer topic's max offset {timer_queue_max}: \
                 messages put after it would be skipped",
                cp.last_timer_queue_offset
            ),
        ));
    }
}
