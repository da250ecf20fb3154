//! The 5.x timer files (FORMAT.md 10.4): their structure and links through
//! [`crate::format::timer::check`], then what only the store can say: every unit points at a
//! `rmq_sys_wheel_timer` record of its size, the checkpoint is not ahead of the timer topic's
//! queue, and `config/timermetrics` agrees with the pending units.

use std::collections::BTreeMap;

use crate::engine::store::reader::Reader;
use crate::engine::store::timer_files::TimerFiles;
use crate::engine::Store;
use crate::format::error::{Error, ErrorKind};
use crate::format::finding::{Code, Finding};
use crate::format::java::string_hash;
use crate::format::timer::check::{check_checkpoint, check_log, check_wheel};
use crate::format::timer::{DEFAULT_PRECISION_MS, TIMER_TOPIC};

fn file_finding(e: &Error) -> Finding {
    let code = match e {
        Error::NotAFile { .. } => Code::TimerNotAFile,
        Error::Data {
            kind:
                ErrorKind::Unexpected {
                    what: "timer wheel size",
                    ..
                },
            ..
        } => Code::TimerWheelSize,
        _ => Code::TimerCheckpointBad,
    };
    Finding::new(code, e.path(), e.offset().unwrap_or(0), e.to_string())
}

/// Findings about the timer files of `store` (none when it has none).
pub(super) fn timer_findings(store: &Store) -> Vec<Finding> {
    let mut out = Vec::new();
    let files = match TimerFiles::open(&store.root) {
        Ok(f) => f,
        Err(e) => {
            out.push(Finding::new(
                Code::TimerNotAFile,
                e.path(),
                0,
                e.to_string(),
            ));
            return out;
        }
    };
    if !files.present() {
        return out;
    }
    let timer_max = store
        .queue(TIMER_TOPIC, 0)
        .and_then(|cq| cq.max_offset().ok())
        .unwrap_or(0) as i64;
    for e in [
        files.wheel.as_ref().and_then(|w| w.as_ref().err()),
        files.checkpoint.as_ref().and_then(|c| c.as_ref().err()),
        files.metrics.as_ref().and_then(|m| m.as_ref().err()),
    ]
    .into_iter()
    .flatten()
    {
        out.push(file_finding(e));
    }
    let Some(log) = &files.log else {
        return out;
    };
    if files.checkpoint.is_none() {
        out.push(Finding::new(
            Code::TimerCheckpointBad,
            &files.checkpoint_path,
            0,
            "missing while timerlog/ exists: the broker starts the timer from the beginning and \
             delivers every enqueued timer message again",
        ));
    }
    let lc = check_log(log, &mut out);
    let cp = files.checkpoint();
    if let Some(w) = files.wheel() {
        check_wheel(w, log, cp, DEFAULT_PRECISION_MS, &mut out);
    }
    if let Some(cp) = cp {
        check_checkpoint(&files.checkpoint_path, cp, lc.data_end, timer_max, &mut out);
    }
    unit_records(store, &files, &mut out);
    if let (Some(cp), Some(Ok(metrics))) = (cp, files.metrics.as_ref()) {
        metrics_agree(store, &files, cp.last_read_time_ms, metrics, &mut out);
    }
    out
}

/// Every unit points at a timer topic record of the unit's size (units before the commitlog's
/// first file are not followed: those records were deleted by retention).
fn unit_records(store: &Store, files: &TimerFiles, out: &mut Vec<Finding>) {
    let Some(log) = &files.log else { return };
    let reader = Reader::new(store);
    let cl_min = store.commitlog.min_offset() as i64;
    let cl_end = store.commitlog.max_offset().ok().map(|e| e as i64);
    for (pos, u) in log.units() {
        if u.commitlog_offset < cl_min {
            continue;
        }
        let gone = cl_end.is_some_and(|end| u.commitlog_offset >= end);
        let problem = match reader.message_at(u.commitlog_offset as u64) {
            Ok(Some(l)) if l.message.topic != TIMER_TOPIC => {
                Some(format!("the record there is on topic {}", l.message.topic))
            }
            Ok(Some(l)) if l.message.raw.len() as i64 != u.record_size as i64 => Some(format!(
                "the record there has {} bytes, the unit says {}",
                l.message.raw.len(),
                u.record_size
            )),
            Ok(Some(_)) => None,
            Ok(None) => Some("no record starts there".to_string()),
            Err(e) => Some(format!("the record there does not parse: {e}")),
        };
        if let Some(mut why) = problem {
            let mut severity = crate::format::finding::Severity::Error;
            if gone {
                why = format!(
                    "{why}, past the commitlog's data end: the record is lost, and the broker \
                     skips the unit when its second comes"
                );
                severity = crate::format::finding::Severity::Warning;
            }
            let i = log
                .files
                .partition_point(|f| f.start <= pos)
                .saturating_sub(1);
            let f = &log.files[i.min(log.files.len() - 1)];
            out.push(
                Finding::new(
                    Code::TimerUnitRecord,
                    &f.path,
                    pos - f.start,
                    format!(
                        "timer log unit at {pos} points at commitlog offset {}: {why}",
                        u.commitlog_offset
                    ),
                )
                .about_record(u.commitlog_offset as u64)
                .with_severity(severity),
            );
        }
    }
}

/// `timingCount` per real topic against the units still pending.
fn metrics_agree(
    store: &Store,
    files: &TimerFiles,
    read_time: i64,
    metrics: &[crate::format::timer::metrics::TopicTiming],
    out: &mut Vec<Finding>,
) {
    let Some(log) = &files.log else { return };
    let names: BTreeMap<i32, &str> = store
        .queues
        .keys()
        .map(|(t, _)| (string_hash(t), t.as_str()))
        .collect();
    let mut pending: BTreeMap<String, i64> = BTreeMap::new();
    for (_, u) in log.units() {
        if u.slot_time_ms() >= read_time {
            let topic = names
                .get(&u.real_topic_hash)
                .map(|t| t.to_string())
                .unwrap_or_else(|| format!("(hash {})", u.real_topic_hash));
            *pending.entry(topic).or_default() += if u.is_delete() { -1 } else { 1 };
        }
    }
    let listed: BTreeMap<String, i64> =
        metrics.iter().map(|t| (t.topic.clone(), t.count)).collect();
    let differ: Vec<String> = pending
        .keys()
        .chain(listed.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter_map(|t| {
            let (a, b) = (
                pending.get(t).copied().unwrap_or(0),
                listed.get(t).copied().unwrap_or(0),
            );
            (a != b).then(|| format!("{t}: {b} listed, {a} pending"))
        })
        .collect();
    if !differ.is_empty() {
        out.push(Finding::new(
            Code::TimerMetricsMismatch,
            &files.metrics_path,
            0,
            format!(
                "timingCount differs from the timer log ({}); the broker corrects it as it runs",
                differ.join("; ")
            ),
        ));
    }
}
