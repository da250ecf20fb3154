//! `rmqstore pending`: what is still waiting in a store (and an optional overlay), at --now
//! ([`crate::engine::broker::pending`]). Nothing is written. `--json` prints JSON Lines
//! (docs/json.md): a `group` per group, a `delay_level` per level, a `transaction` per undecided
//! transaction, then the `summary`.
//!
//! With `--client-dir DIR` only DIR's group is shown, its unconsumed messages measured from the
//! broadcasting client's `offsets.json` ([`super::client_dir`]) instead of `consumerOffset.json`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::client_dir::ClientDirArgs;
use super::engine_args::{open_engine, use_client_dir, BrokerArg, EngineArgs};
use super::names;
use super::output::{self, format_time, parse_time_arg, summary_line, typed_line};
use super::{ExitStatus, GeometryArgs};
use crate::engine::broker::pending::{groups_of, known_groups, pending, Pending, TimersPending};
use crate::engine::broker::pull::BrokerRole;
use crate::engine::consume::pop::PopUse;
use crate::engine::Store;

#[derive(Debug, Args)]
pub struct PendingArgs {
    /// The store root (read-only).
    pub store: PathBuf,
    /// Only this consumer group (with --client-dir: DIR's group, which it may repeat).
    #[arg(long, short = 'g', value_name = "G")]
    pub group: Option<String>,
    /// An overlay written by earlier engine runs, read (not written).
    #[arg(long, value_name = "DIR")]
    pub overlay: Option<PathBuf>,
    /// The time "due" is measured against (default: the real clock).
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    pub now: Option<i64>,
    /// Broker rules (default: guessed from the store).
    #[arg(long, value_enum)]
    pub broker: Option<BrokerArg>,
    /// Dispatch every commitlog record again at open (see `pull --full-replay`).
    #[arg(long)]
    pub full_replay: bool,
    /// List every delayed message (by default at most 20 per level are listed).
    #[arg(long)]
    pub all: bool,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientDirArgs,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

/// The summary line of `pending --json`.
#[derive(Debug, Serialize)]
struct PendingSummary {
    now_timestamp: i64,
    groups: usize,
    lag: i64,
    delay_levels: usize,
    delayed_pending: usize,
    transactions: usize,
    timers_pending: usize,
}

pub fn run(a: &PendingArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let group = a.client.group(a.group.as_deref())?;
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let pop = PopUse::read(&store);
    let mut engine = open_engine(
        store,
        EngineArgs {
            overlay: a.overlay.as_deref(),
            now: a.now,
            role: BrokerRole::Master,
            broker: a.broker,
            full_replay: a.full_replay,
            writable: false,
            broker_name: a.client.broker_name.clone(),
        },
    )?;
    use_client_dir(&mut engine, &a.client)?;
    if let Some(g) = group.as_deref() {
        let mut known = groups_of(&engine, None, &engine.pending_delayed());
        known.extend(known_groups(&engine));
        names::ensure_known(
            "consumer group",
            g,
            known.iter().map(String::as_str),
            "this store's consumer offsets, config/subscriptionGroup.json, retry or DLQ topics",
        )?;
    }
    let p = pending(&engine, group.as_deref(), a.all);
    output::note_pop(&pop, group.as_deref());
    if a.json {
        for g in &p.groups {
            typed_line(out, "group", g)?;
        }
        for l in &p.delayed {
            typed_line(out, "delay_level", l)?;
        }
        for t in &p.transactions {
            typed_line(out, "transaction", t)?;
        }
        if let Some(t) = &p.timers {
            typed_line(out, "timers", t)?;
        }
        summary_line(
            out,
            "pending",
            &PendingSummary {
                now_timestamp: p.now,
                groups: p.groups.len(),
                lag: p.groups.iter().map(|g| g.lag).sum(),
                delay_levels: p.delayed.len(),
                delayed_pending: p.delayed.iter().map(|l| l.pending).sum(),
                transactions: p.transactions.len(),
                timers_pending: p.timers.as_ref().map(|t| t.counts.pending).unwrap_or(0),
            },
        )?;
        return Ok(ExitStatus::Success);
    }
    print_human(&p, out)?;
    Ok(ExitStatus::Success)
}

fn due_text(due: i64, now: i64) -> String {
    let d = due.saturating_sub(now);
    if d <= 0 {
        format!("{} (due)", format_time(due))
    } else {
        format!("{} (in {})", format_time(due), span(d))
    }
}

fn span(ms: i64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{}.{:03}s", s, ms % 1000),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60),
    }
}

fn print_human(p: &Pending, out: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(out, "now: {}", format_time(p.now))?;
    for g in &p.groups {
        writeln!(
            out,
            "\ngroup {}: {} unconsumed, {} retries waiting, {} in {}",
            g.group,
            g.lag,
            g.retries_waiting.len(),
            g.dlq_messages,
            g.dlq_topic
        )?;
        for q in &g.queues {
            writeln!(
                out,
                "  {:<32} {:>3}  committed {:>8}  min {:>8}  max {:>8}  unconsumed {:>6}",
                q.topic, q.queue_id, q.committed_offset, q.min_offset, q.max_offset, q.lag
            )?;
        }
        for r in &g.retries_waiting {
            writeln!(
                out,
                "  retry level {:>2}  {}  commitlog {}  uniq_key {}",
                r.level,
                due_text(r.due, p.now),
                r.commitlog_offset,
                r.uniq_key.as_deref().unwrap_or("-")
            )?;
        }
    }
    if !p.delayed.is_empty() {
        writeln!(out, "\ndelayed messages (SCHEDULE_TOPIC_XXXX):")?;
    }
    for l in &p.delayed {
        writeln!(
            out,
            "  level {:>2} ({}): offset {} of {}, {} pending, {} due now{}",
            l.level,
            l.delay_ms.map(span).unwrap_or_else(|| "?".into()),
            l.delay_offset,
            l.max_offset,
            l.pending,
            l.due_now,
            match (l.next_due_timestamp, l.last_due_timestamp) {
                (Some(a), Some(b)) => format!(", due {} .. {}", format_time(a), format_time(b)),
                _ => String::new(),
            }
        )?;
        for m in &l.messages {
            writeln!(
                out,
                "    {:>8}  {}  -> {}:{}  uniq_key {}",
                m.queue_offset,
                due_text(m.due, p.now),
                m.real_topic.as_deref().unwrap_or("?"),
                m.real_queue_id
                    .map(|q| q.to_string())
                    .unwrap_or_else(|| "?".into()),
                m.uniq_key.as_deref().unwrap_or("-")
            )?;
        }
        if l.not_listed > 0 {
            writeln!(out, "    ... {} more (--all)", l.not_listed)?;
        }
    }
    if let Some(t) = &p.timers {
        print_timers(t, p.now, out)?;
    }
    writeln!(out, "\nundecided transactions: {}", p.transactions.len())?;
    for t in &p.transactions {
        writeln!(
            out,
            "  {:?}  half {}:{}  -> {}  group {}  checks {}  copies {}  uniq_key {}",
            t.live.state,
            t.live.queue_id,
            t.live.queue_offset,
            t.live.real_topic.as_deref().unwrap_or("?"),
            t.live.producer_group.as_deref().unwrap_or("-"),
            t.live.check_times.unwrap_or(0),
            t.copies,
            t.uniq_key.as_deref().unwrap_or("-")
        )?;
    }
    Ok(())
}

fn print_timers(p: &TimersPending, now: i64, out: &mut dyn Write) -> anyhow::Result<()> {
    super::output::write_timer_counts(out, &p.counts)?;
    for m in &p.messages {
        writeln!(
            out,
            "    {:>8}  {}  -> {}:{}{}  uniq_key {}",
            m.queue_offset,
            due_text(m.release_timestamp, now),
            m.real_topic.as_deref().unwrap_or("?"),
            m.real_queue_id
                .map(|q| q.to_string())
                .unwrap_or_else(|| "?".into()),
            if m.unit.is_some_and(|u| u.rolled) {
                " (rolled)"
            } else {
                ""
            },
            m.uniq_key.as_deref().unwrap_or("-")
        )?;
    }
    if p.not_listed > 0 {
        writeln!(out, "    ... {} more (--all)", p.not_listed)?;
    }
    Ok(())
}
