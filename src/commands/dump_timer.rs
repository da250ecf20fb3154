//! `dump timerlog`, `dump timerwheel`, `dump timercheck`: the 5.x timer files as tables or
//! JSON Lines (`timer_unit`, `timer_slot`, `timercheck`, then a `summary`).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::output::{self, format_time, summary_line, typed_line};
use super::ExitStatus;
use crate::engine::store::timer_files::read_checkpoint;
use crate::format::java::string_hash;
use crate::format::timer::log::LogStop;
use crate::format::timer::metrics::parse_timing_counts;
use crate::format::timer::{self, TimerLog, TimerWheel, DEFAULT_PRECISION_MS};

#[derive(Debug, Args)]
pub struct TimerFileArgs {
    /// The store root (or the file itself: a timerlog folder, the timerwheel, timercheck).
    pub store: PathBuf,
    /// Name the real topic of each unit when its hash matches one of these (comma-separated).
    #[arg(long, value_name = "TOPICS", value_delimiter = ',')]
    pub topics: Vec<String>,
    /// JSON Lines: one object per unit / slot, then a `summary`.
    #[arg(long, short = 'J')]
    pub json: bool,
}

fn locate(arg: &Path, under_root: &str) -> PathBuf {
    let inside = arg.join(under_root);
    if arg.is_dir() && (inside.exists() || arg.file_name() != Some(under_root.as_ref())) {
        inside
    } else {
        arg.to_path_buf()
    }
}

fn flags(magic: i32) -> String {
    let mut v = Vec::new();
    for (bit, name) in [
        (timer::log::magic::DEFAULT, "default"),
        (timer::log::magic::ROLL, "roll"),
        (timer::log::magic::DELETE, "delete"),
    ] {
        if magic & bit != 0 {
            v.push(name);
        }
    }
    if v.is_empty() {
        format!("{magic:#x}")
    } else {
        v.join("|")
    }
}

fn topic_names(a: &TimerFileArgs) -> Vec<(i32, String)> {
    let mut names: Vec<String> = a.topics.clone();
    if a.store.is_dir() {
        if let Ok(s) = crate::engine::Store::open(&a.store, &Default::default()) {
            names.extend(s.queues.keys().map(|(t, _)| t.clone()));
        }
    }
    names.sort();
    names.dedup();
    names.into_iter().map(|t| (string_hash(&t), t)).collect()
}

/// `dump timerlog`.
pub fn timerlog(a: &TimerFileArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let dir = locate(&a.store, timer::TIMERLOG_DIR);
    let log = TimerLog::open(&dir)?.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: no such directory (not a 5.x store with the timer wheel)",
            dir.display()
        )
    })?;
    let names = topic_names(a);
    let name_of = |h: i32| names.iter().find(|(x, _)| *x == h).map(|(_, t)| t.as_str());
    if !a.json {
        writeln!(
            out,
            "{:>12} {:>12} {:<14} {:<29} {:<29} {:>14} {:>6}  REAL_TOPIC",
            "POSITION", "PREV", "MAGIC", "ENQUEUED", "SLOT", "COMMITLOG_OFF", "SIZE"
        )?;
    }
    let mut units = log.units();
    let mut n = 0u64;
    for (pos, u) in units.by_ref() {
        n += 1;
        let topic = name_of(u.real_topic_hash);
        if a.json {
            typed_line(
                out,
                "timer_unit",
                &json!({
                    "timerlog_position": pos,
                    "prev_position": u.prev_pos,
                    "magic": u.magic,
                    "roll": u.is_roll(),
                    "delete": u.is_delete(),
                    "enqueue_timestamp": u.write_time_ms,
                    "slot_timestamp": u.slot_time_ms(),
                    "commitlog_offset": u.commitlog_offset,
                    "size": u.record_size,
                    "real_topic_hash": u.real_topic_hash,
                    "real_topic": topic,
                }),
            )?;
        } else {
            writeln!(
                out,
                "{:>12} {:>12} {:<14} {:<29} {:<29} {:>14} {:>6}  {}",
                pos,
                u.prev_pos,
                flags(u.magic),
                format_time(u.write_time_ms),
                format_time(u.slot_time_ms()),
                u.commitlog_offset,
                u.record_size,
                topic
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("(hash {})", u.real_topic_hash)),
            )?;
        }
    }
    let end = units.data_end();
    let problem = match units.stop() {
        Some(LogStop::Bad(e)) => Some(e.to_string()),
        Some(LogStop::EndBeforeLastFile { file, file_offset }) => Some(format!(
            "{}: at byte {file_offset}: the data ends before the last file",
            file.display()
        )),
        _ => None,
    };
    if a.json {
        summary_line(
            out,
            "dump timerlog",
            &json!({
                "files": log.files.len(),
                "file_size": log.file_size(),
                "units": n,
                "data_end": end,
                "problem": problem,
            }),
        )?;
    } else {
        writeln!(
            out,
            "{n} unit(s) in {} file(s) of {} bytes; data ends at {end}",
            log.files.len(),
            log.file_size()
        )?;
    }
    if let Some(p) = problem {
        output::say(&p.to_string());
        return Ok(ExitStatus::Findings);
    }
    Ok(ExitStatus::Success)
}

/// `dump timerwheel`: the slots that are not zero.
pub fn timerwheel(a: &TimerFileArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let path = locate(&a.store, timer::TIMERWHEEL_FILE);
    let wheel = TimerWheel::open(&path)?;
    if !a.json {
        writeln!(
            out,
            "{:>8} {:<29} {:>12} {:>12} {:>6}",
            "SLOT", "SECOND", "FIRST", "LAST", "NUM"
        )?;
    }
    let (mut slots, mut messages) = (0u64, 0i64);
    for (index, s) in wheel.non_empty() {
        slots += 1;
        messages += s.num as i64;
        let t = s.time_ms(DEFAULT_PRECISION_MS);
        if a.json {
            typed_line(
                out,
                "timer_slot",
                &json!({
                    "slot": index,
                    "slot_timestamp": t,
                    "first_position": s.first_pos,
                    "last_position": s.last_pos,
                    "num": s.num,
                    "magic": s.magic,
                }),
            )?;
        } else {
            writeln!(
                out,
                "{index:>8} {:<29} {:>12} {:>12} {:>6}",
                format_time(t),
                s.first_pos,
                s.last_pos,
                s.num
            )?;
        }
    }
    if a.json {
        summary_line(
            out,
            "dump timerwheel",
            &json!({ "slots": timer::wheel::WHEEL_SLOTS, "non_empty_slots": slots, "messages": messages }),
        )?;
    } else {
        writeln!(
            out,
            "{slots} non-empty slot(s) of {}, counting {messages} message(s)",
            timer::wheel::WHEEL_SLOTS
        )?;
    }
    Ok(ExitStatus::Success)
}

/// `dump timercheck`: the checkpoint, and `config/timermetrics` beside it.
pub fn timercheck(a: &TimerFileArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let path = if a.store.is_dir() {
        a.store.join("config").join(timer::TIMERCHECK_FILE)
    } else {
        a.store.clone()
    };
    let cp = read_checkpoint(&path)?;
    let metrics_path = path.with_file_name(timer::TIMERMETRICS_FILE);
    let metrics = match crate::format::entry::read_bounded(&metrics_path, 64 << 20) {
        Ok(text) => Some(parse_timing_counts(&text).map_err(|e| e.in_file(&metrics_path, 0))?),
        Err(_) => None,
    };
    if a.json {
        typed_line(
            out,
            "timercheck",
            &json!({
                "file": path.display().to_string(),
                "last_read_timestamp": cp.last_read_time_ms,
                "last_timerlog_flush_position": cp.last_timer_log_flush_pos,
                "last_timer_queue_offset": cp.last_timer_queue_offset,
                "master_timer_queue_offset": cp.master_timer_queue_offset,
                "data_version": {
                    "state_version": cp.state_version,
                    "timestamp": cp.data_timestamp,
                    "counter": cp.data_counter,
                },
                "timing_counts": metrics.as_ref().map(|m| m.iter().map(|t| json!({
                    "topic": t.topic, "count": t.count, "timestamp": t.timestamp,
                })).collect::<Vec<_>>()),
            }),
        )?;
        summary_line(
            out,
            "dump timercheck",
            &json!({ "files": 1 + metrics.is_some() as usize }),
        )?;
    } else {
        writeln!(out, "{}", path.display())?;
        writeln!(
            out,
            "{:<24} {:>15}  {}",
            "lastReadTimeMs",
            cp.last_read_time_ms,
            format_time(cp.last_read_time_ms)
        )?;
        for (name, v) in [
            ("lastTimerLogFlushPos", cp.last_timer_log_flush_pos),
            ("lastTimerQueueOffset", cp.last_timer_queue_offset),
            ("masterTimerQueueOffset", cp.master_timer_queue_offset),
            ("dataVersion.stateVersion", cp.state_version),
            ("dataVersion.counter", cp.data_counter),
        ] {
            writeln!(out, "{name:<24} {v:>15}")?;
        }
        writeln!(
            out,
            "{:<24} {:>15}  {}",
            "dataVersion.timestamp",
            cp.data_timestamp,
            format_time(cp.data_timestamp)
        )?;
        if let Some(m) = &metrics {
            writeln!(out, "{} (pending per real topic)", metrics_path.display())?;
            for t in m {
                writeln!(out, "  {:<40} {:>10}", t.topic, t.count)?;
            }
        }
    }
    Ok(ExitStatus::Success)
}
