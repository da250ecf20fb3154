//! `rmqstore info`: the store summary ([`crate::engine::store::summary`]) as text or JSON.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::output::format_time;
use super::{output, ExitStatus, GeometryArgs};
use crate::engine::store::summary::{gather, Info};
use crate::engine::Store;

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The store root (the broker's storePathRootDir).
    pub store: PathBuf,
    #[command(flatten)]
    pub geometry: GeometryArgs,
    /// JSON Lines: the `info` object, then a `summary`.
    #[arg(long)]
    pub json: bool,
}

/// The summary line of `info --json`.
#[derive(Debug, Serialize)]
pub(super) struct InfoSummary {
    pub topics: usize,
    pub consumer_groups: usize,
    pub index_files: usize,
    pub notes: usize,
    /// Signs of damage were seen: run `verify`.
    pub needs_verify: bool,
}

pub fn run(a: &InfoArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    if let Some(d) = crate::engine::store::dledger::summary(&store)? {
        return super::info_dledger::run(&store, &d, a.json, out);
    }
    let info = gather(&store)?;
    output::note_pop(&crate::engine::consume::pop::PopUse::read(&store), None);
    if a.json {
        output::typed_line(out, "info", &info)?;
        output::summary_line(
            out,
            "info",
            &InfoSummary {
                topics: info.topics.len(),
                consumer_groups: info.consumer_groups.len(),
                index_files: info.index_files.len(),
                notes: info.notes.len(),
                needs_verify: !info.needs_verify.is_empty(),
            },
        )?;
    } else {
        print_human(&info, out)?;
    }
    Ok(ExitStatus::Success)
}

/// How the last shutdown went, as `info` says it.
pub(super) fn shutdown_word(clean: bool) -> &'static str {
    if clean {
        "clean"
    } else {
        "UNCLEAN (abort file present)"
    }
}

fn print_human(i: &Info, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "store      {}", i.store)?;
    writeln!(out, "shutdown   {}", shutdown_word(i.clean_shutdown))?;
    if !i.needs_verify.is_empty() {
        writeln!(
            out,
            "damage     SIGNS OF DAMAGE: run `rmqstore verify` ({} sign(s), listed at the end)",
            i.needs_verify.len()
        )?;
    }
    for line in i.geometry.describe() {
        writeln!(out, "geometry   {line}")?;
    }
    let c = &i.commitlog;
    writeln!(
        out,
        "commitlog  {} files, offsets {}..{} ({} bytes of data), record version(s) {:?}",
        c.files.len(),
        c.min_offset,
        c.max_offset,
        c.max_offset.saturating_sub(c.min_offset),
        c.message_versions
    )?;
    if let Some(cp) = &i.checkpoint {
        writeln!(
            out,
            "checkpoint physic {} logics {} index {}",
            format_time(cp.physic_msg_timestamp),
            format_time(cp.logics_msg_timestamp),
            format_time(cp.index_msg_timestamp)
        )?;
    }
    writeln!(
        out,
        "\n{:<40} {:>5} {:>12} {:>12}",
        "TOPIC", "QUEUE", "MIN", "MAX"
    )?;
    for system in [false, true] {
        for t in i.topics.iter().filter(|t| t.system == system) {
            for q in &t.queues {
                let (min, max) = if q.files == 0 {
                    ("no file".to_string(), "no file".to_string())
                } else {
                    (q.min_offset.to_string(), q.max_offset.to_string())
                };
                writeln!(
                    out,
                    "{:<40} {:>5} {:>12} {:>12}",
                    t.topic, q.queue_id, min, max
                )?;
            }
        }
    }
    if !i.consumer_groups.is_empty() {
        writeln!(
            out,
            "\n{:<24} {:<32} {:>5} {:>12} {:>12} {:>10}",
            "GROUP", "TOPIC", "QUEUE", "OFFSET", "MAX", "LAG"
        )?;
        for g in &i.consumer_groups {
            for q in &g.queues {
                writeln!(
                    out,
                    "{:<24} {:<32} {:>5} {:>12} {:>12} {:>10}",
                    g.group, g.topic, q.queue_id, q.committed_offset, q.max_offset, q.lag
                )?;
            }
        }
    }
    writeln!(out, "\n{:<40} {:>6} {:>12}", "TOPIC", "QUEUES", "MESSAGES")?;
    for system in [false, true] {
        for t in i.topics.iter().filter(|t| t.system == system) {
            writeln!(
                out,
                "{:<40} {:>6} {:>12}",
                t.topic,
                t.queues.len(),
                t.messages
            )?;
        }
    }
    if !i.group_lag.is_empty() {
        writeln!(out, "\n{:<32} {:>6} {:>12}", "GROUP", "TOPICS", "LAG")?;
        for g in &i.group_lag {
            writeln!(out, "{:<32} {:>6} {:>12}", g.group, g.topics, g.lag)?;
        }
    }
    if !i.delayed.is_empty() {
        writeln!(
            out,
            "\n{:>11} {:>10} {:>10} {:>10} {:>10}",
            "DELAY LEVEL", "DELAY", "DELIVERED", "MAX", "PENDING"
        )?;
        for d in &i.delayed {
            writeln!(
                out,
                "{:>11} {:>10} {:>10} {:>10} {:>10}",
                d.level,
                d.delay_ms.map(format_delay).unwrap_or_else(|| "?".into()),
                d.delay_offset
                    .map(|o| o.to_string())
                    .unwrap_or_else(|| "-".into()),
                d.max_offset,
                d.pending
            )?;
        }
    }
    if !i.retry_dlq.is_empty() {
        writeln!(out, "\n{:<32} {:>12} {:>12}", "GROUP", "RETRY", "DLQ")?;
        for r in &i.retry_dlq {
            writeln!(
                out,
                "{:<32} {:>12} {:>12}",
                r.group, r.retry_messages, r.dlq_messages
            )?;
        }
    }
    let t = &i.transactions;
    if t.half_messages > 0 {
        writeln!(
            out,
            "\ntransactions: {} half messages, {} op messages; {} with an outcome, {} without ({} transactions)",
            t.half_messages, t.op_messages, t.with_outcome, t.without_outcome,
            t.transactions_without_outcome
        )?;
    }
    if let Some(t) = &i.timers {
        super::output::write_timer_counts(out, t)?;
    }
    writeln!(
        out,
        "\n{:<20} {:>10} {:<29} {:<29}",
        "INDEX FILE", "ENTRIES", "BEGIN", "END"
    )?;
    for f in &i.index_files {
        writeln!(
            out,
            "{:<20} {:>10} {:<29} {:<29}",
            f.name,
            f.entries,
            format_time(f.begin_timestamp),
            format_time(f.end_timestamp)
        )?;
    }
    for n in &i.notes {
        writeln!(out, "note: {n}")?;
    }
    for n in &i.needs_verify {
        writeln!(out, "damage: {n}")?;
    }
    Ok(())
}

/// A delay in the `messageDelayLevel` style: `10s`, `2m`, `1h`.
fn format_delay(ms: i64) -> String {
    match ms {
        m if m > 0 && m % 3_600_000 == 0 => format!("{}h", m / 3_600_000),
        m if m > 0 && m % 60_000 == 0 => format!("{}m", m / 60_000),
        m if m % 1000 == 0 => format!("{}s", m / 1000),
        m => format!("{m}ms"),
    }
}
