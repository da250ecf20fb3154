//! The 5.x timer files in a repair (FORMAT.md 10.4): the timer log cut after its last valid
//! unit ([`check_log_replay`]), the wheel rebuilt from the kept units as the broker's enqueue
//! builds it, and `config/timercheck` set to what the broker's recovery derives from them
//! (`TimerMessageStore.recover`): the flush position at the kept log's end, the timer queue
//! offset after the last kept unit's record (so that the broker enqueues the messages whose
//! units were cut again), both clamped into the timer topic's queue.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::stage::Staging;
use super::{rel, Action, ConfigWrite};
use crate::engine::check::verify::Report;
use crate::engine::store::reader::Reader;
use crate::engine::store::safedir::{create_new, write_copy};
use crate::engine::store::timer_files::TimerFiles;
use crate::engine::store::Store;
use crate::format::commitlog::{prop, RecordIter};
use crate::format::entry;
use crate::format::error::{Error, Result};
use crate::format::finding::Code;
use crate::format::timer::check::check_log_replay;
use crate::format::timer::wheel::RebuiltWheel;
use crate::format::timer::{
    TimerCheckpoint, DEFAULT_PRECISION_MS, DEFAULT_TIMERLOG_FILE_SIZE, TIMERCHECK_FILE,
    TIMERLOG_DIR, TIMERWHEEL_FILE, TIMER_TOPIC,
};

/// What the stage writes of the timer files.
pub(super) struct TimerPlan {
    /// Where the kept timer log ends, when it is cut.
    cut: Option<u64>,
    /// The wheel to write in place of the old one.
    wheel: Option<RebuiltWheel>,
}

impl TimerPlan {
    /// Entries of the store root the stage writes itself instead of copying them along.
    pub(super) fn written(plan: Option<&TimerPlan>) -> Vec<&'static str> {
        let Some(p) = plan else { return Vec::new() };
        let mut out = Vec::new();
        if p.cut.is_some() {
            out.push(TIMERLOG_DIR);
        }
        if p.wheel.is_some() {
            out.push(TIMERWHEEL_FILE);
        }
        out
    }
}

/// Plan the timer files of `store` from verify's `report`; `queues` are the rebuilt queues'
/// bounds. Returns the log and wheel work, and the `config/timercheck` to write.
pub(super) fn plan(
    store: &Store,
    report: &Report,
    queues: &BTreeMap<(String, i32), (u64, u64)>,
    actions: &mut Vec<Action>,
) -> Result<(Option<TimerPlan>, Option<ConfigWrite>)> {
    let (qmin, qmax) = queues
        .get(&(TIMER_TOPIC.to_string(), 0))
        .map_or((0, 0), |&(a, b)| (a as i64, b as i64));
    let clamp = |q: i64| q.clamp(qmin, qmax.max(qmin));
    let Ok(files) = TimerFiles::open(&store.root) else {
        return Ok((None, None));
    };
    let old = files.checkpoint().copied();
    let Some(log) = &files.log else {
        // No timer log: only the queue offsets can be out of their queue.
        return Ok((None, old.and_then(|cp| clamp_queue(cp, clamp, actions))));
    };
    let replay = check_log_replay(log, DEFAULT_PRECISION_MS);
    let size = file_size(log);
    let torn = log.files.iter().any(|f| f.len < size);
    let stop = replay
        .stop
        .clone()
        .or_else(|| torn.then(|| format!("a file is shorter than the log's {size}-byte files")));
    let cut = stop.map(|why| {
        actions.push(Action {
            problem: format!("timer log: {why}"),
            action: format!(
                "cut it after its last valid unit, at {} ({} units kept){}; the bytes after it \
                 go to the repair folder, and the broker enqueues the timer messages after the \
                 last kept unit's again (one already delivered is delivered again)",
                replay.end,
                replay.units,
                if torn {
                    format!(", the short file extended with zeros to {size} bytes")
                } else {
                    String::new()
                }
            ),
            messages: 0,
            bytes: 0,
        });
        replay.end
    });

    let wheel_findings = report
        .findings
        .iter()
        .filter(|f| {
            matches!(
                f.code,
                Code::TimerSlotChain | Code::TimerUnitUnlinked | Code::TimerWheelSize
            )
        })
        .count();
    let rebuild = match (files.wheel.as_ref(), files.wheel()) {
        (_, Some(w)) => (cut.is_some() || wheel_findings > 0) && !replay.wheel.same_as(w),
        (Some(_), None) => true,
        (None, None) => replay.units > 0,
    };
    if rebuild {
        actions.push(Action {
            problem: match files.wheel.as_ref() {
                Some(Err(e)) => format!("timerwheel: {e}"),
                None => "timerwheel missing while the timer log has units".into(),
                Some(Ok(_)) if wheel_findings > 0 => {
                    format!("verify has {wheel_findings} timer wheel finding(s)")
                }
                Some(Ok(_)) => "the timer log is cut".into(),
            },
            action: format!(
                "rebuild the wheel from the {} kept units as the broker's enqueue links them \
                 ({} slots); the old file is kept in the repair folder",
                replay.units,
                replay.wheel.slots().count()
            ),
            messages: 0,
            bytes: 0,
        });
    }

    // The timer queue offset the kept units prove: after the last unit's record.
    let proven = match replay.last {
        Some((_, u)) => Reader::new(store)
            .message_at(u.commitlog_offset as u64)
            .ok()
            .flatten()
            .filter(|l| l.message.topic == TIMER_TOPIC)
            .map(|l| l.message.queue_offset + 1),
        None => Some(qmin),
    };
    let unreadable = files.checkpoint.is_some() && old.is_none();
    let write = match old {
        _ if cut.is_some() || unreadable || files.checkpoint.is_none() => true,
        Some(cp) => {
            cp.last_timer_log_flush_pos > replay.end as i64
                || clamp(cp.last_timer_queue_offset) != cp.last_timer_queue_offset
                || clamp(cp.master_timer_queue_offset) != cp.master_timer_queue_offset
        }
        None => false,
    };
    if !write {
        return Ok((
            Some(TimerPlan {
                cut,
                wheel: rebuild.then_some(replay.wheel),
            }),
            None,
        ));
    }
    let read_time = match old {
        Some(cp) => cp.last_read_time_ms,
        None => read_time_from_copies(store)?,
    };
    let base = old.unwrap_or_default();
    let queue = clamp(proven.unwrap_or(base.last_timer_queue_offset));
    let cp = TimerCheckpoint {
        last_read_time_ms: read_time,
        last_timer_log_flush_pos: replay.end as i64,
        last_timer_queue_offset: queue,
        master_timer_queue_offset: queue,
        ..base
    };
    actions.push(Action {
        problem: match old {
            Some(o) => format!(
                "config/timercheck (lastTimerLogFlushPos {}, lastTimerQueueOffset {}, \
                 masterTimerQueueOffset {}) against the kept timer log (end {}) and the timer \
                 topic's queue ({qmin}..{qmax})",
                o.last_timer_log_flush_pos,
                o.last_timer_queue_offset,
                o.master_timer_queue_offset,
                replay.end
            ),
            None => "config/timercheck missing or unreadable while the timer log exists".into(),
        },
        action: format!(
            "write it as the broker's recovery derives it: lastTimerLogFlushPos {}, timer queue \
             offsets {queue} (after the last kept unit's record), lastReadTimeMs {read_time}{}",
            cp.last_timer_log_flush_pos,
            if old.is_some() {
                ""
            } else {
                " (after the latest delivered copy's TIMER_OUT_MS)"
            }
        ),
        messages: old.map_or(0, |o| o.last_timer_queue_offset.abs_diff(queue)),
        bytes: 0,
    });
    Ok((
        Some(TimerPlan {
            cut,
            wheel: rebuild.then_some(replay.wheel),
        }),
        Some(ConfigWrite {
            name: TIMERCHECK_FILE,
            bytes: cp.to_bytes(),
        }),
    ))
}

/// The checkpoint with its timer queue offsets clamped into the timer topic's queue, when they
/// are outside it: past the queue's end the timer would skip the messages put after the cut.
fn clamp_queue(
    mut cp: TimerCheckpoint,
    clamp: impl Fn(i64) -> i64,
    actions: &mut Vec<Action>,
) -> Option<ConfigWrite> {
    let mut changed = false;
    for (name, field) in [
        ("lastTimerQueueOffset", &mut cp.last_timer_queue_offset),
        ("masterTimerQueueOffset", &mut cp.master_timer_queue_offset),
    ] {
        let new = clamp(*field);
        if new != *field {
            actions.push(Action {
                problem: format!(
                    "timercheck {name} is {}, outside the timer topic's queue",
                    *field
                ),
                action: format!("clamp it to {new}"),
                messages: field.abs_diff(new),
                bytes: 0,
            });
            *field = new;
            changed = true;
        }
    }
    changed.then(|| ConfigWrite {
        name: TIMERCHECK_FILE,
        bytes: cp.to_bytes(),
    })
}

/// The read cursor the delivered copies prove when `config/timercheck` is lost: a copy on its
/// real topic carries the `TIMER_OUT_MS` of the slot it was read from, and the cursor moves
/// one precision step past a slot it reads. 0 (the broker's start without a checkpoint) when
/// no copy is found. One pass over the commitlog.
fn read_time_from_copies(store: &Store) -> Result<i64> {
    let mut latest: Option<i64> = None;
    for seg in &store.commitlog.segments {
        let map = seg.map()?;
        for m in RecordIter::new(&map, seg, false) {
            let Ok(m) = m else { break };
            if m.topic == TIMER_TOPIC || m.property(prop::TIMER_DEQUEUE_MS).is_none() {
                continue;
            }
            if let Some(out) = m
                .property(prop::TIMER_OUT_MS)
                .and_then(|v| v.parse::<i64>().ok())
            {
                latest = latest.max(Some(out));
            }
        }
        map.release(0, map.len());
    }
    Ok(latest.map_or(0, |t| t.saturating_add(DEFAULT_PRECISION_MS)))
}

/// The size the broker's timer log files have (`mappedFileSizeTimerLog`): the largest file's
/// when there are several; a lone file whose length is not a whole number of pages was torn,
/// and nothing tells its configured size but the default. A torn file is extended with zeros
/// to it, so that the broker's mapped file queue loads it.
fn file_size(log: &crate::format::timer::TimerLog) -> u64 {
    let largest = log.files.iter().map(|f| f.len).max().unwrap_or(0);
    if log.files.len() == 1 && largest % 4096 != 0 {
        largest.max(DEFAULT_TIMERLOG_FILE_SIZE)
    } else {
        largest
    }
}

/// Write the planned timer log and wheel into the stage; what does not reach it is saved.
pub(super) fn stage(
    store: &Store,
    plan: &TimerPlan,
    stage: &Path,
    st: &mut Staging<'_>,
) -> Result<()> {
    if let Some(end) = plan.cut {
        let dir = store.root.join(TIMERLOG_DIR);
        let Some(log) = crate::format::timer::TimerLog::open(&dir)? else {
            return Ok(());
        };
        let to = stage.join(TIMERLOG_DIR);
        std::fs::create_dir_all(&to).map_err(|e| Error::io(&to, e))?;
        let name = |p: &Path| to.join(p.file_name().map(PathBuf::from).unwrap_or_default());
        let size = file_size(&log);
        for f in &log.files {
            if f.start + f.len <= end && f.len == size {
                write_copy(&f.path, &name(&f.path), f.len, f.len, &[])?;
            } else if f.start <= end {
                let keep = end - f.start;
                write_copy(&f.path, &name(&f.path), keep, size.max(f.len), &[])?;
                st.save_tail(&f.path, keep, f.len, &rel(store, &f.path), false)?;
            } else {
                st.save_whole(&f.path, "after the timer log's last valid unit")?;
            }
        }
        for p in &log.foreign {
            let len = entry::probe(p).kind.file_len();
            write_copy(p, &name(p), len, len, &[])?;
        }
        for e in &log.odd {
            st.set_aside(e, "not a regular file in timerlog/")?;
        }
    }
    if let Some(w) = &plan.wheel {
        let old = entry::probe(&store.root.join(TIMERWHEEL_FILE));
        let why = "replaced by the wheel rebuilt from the timer log";
        match old.kind {
            _ if st.is_aside(&old.path) => {}
            entry::Kind::Missing => {}
            k if k.is_file() => st.save_whole(&old.path, why)?,
            _ => st.set_aside(&old, why)?,
        }
        let p = stage.join(TIMERWHEEL_FILE);
        let f = create_new(&p)?;
        w.write_to(&f, &p)?;
        f.sync_all().map_err(|e| Error::io(&p, e))?;
    }
    Ok(())
}
