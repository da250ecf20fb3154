//! `rmqstore pending`: what is still waiting in a store (and an optional overlay), at --now.
//!
//! Per consumer group: unconsumed messages per topic and queue (max offset minus the committed
//! offset), retries parked in `SCHEDULE_TOPIC_XXXX` for `%RETRY%<group>` and when each is due,
//! the DLQ size. For the store: delayed messages per delay level past `delayOffset.json` with
//! their due times, and undecided transactions (ENGINE.md 8's final-state view). Nothing is
//! written. `--json` prints JSON Lines (docs/json.md): a `group` per group, a `delay_level` per
//! level, a `transaction` per undecided transaction, then the `summary`.
//!
//! With `--client-dir DIR` only DIR's group is shown, its unconsumed messages measured from the
//! broadcasting client's `offsets.json` ([`super::client_dir`]) instead of `consumerOffset.json`.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::client_dir::ClientDirArgs;
use super::engine_args::{open_engine, use_client_dir, BrokerArg, EngineArgs};
use super::names;
use super::output::{format_time, parse_time_arg, summary_line, typed_line};
use super::{ExitStatus, GeometryArgs};
use crate::engine::broker::pull::BrokerRole;
use crate::engine::broker::schedule::DelayedMessage;
use crate::engine::broker::timer::{TimerCounts, TimerMessage};
use crate::engine::broker::transaction::{PendingTransaction, TRANS_CHECK_GROUP};
use crate::engine::broker::Engine;
use crate::engine::store::dispatch::RETRY_PREFIX;
use crate::engine::store::dispatch::{dlq_topic, retry_topic};
use crate::engine::Store;
use crate::format::timer::TIMER_TOPIC;

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

#[derive(Debug, Serialize)]
pub struct Pending {
    pub now: i64,
    pub groups: Vec<GroupPending>,
    pub delayed: Vec<LevelPending>,
    pub transactions: Vec<PendingTransaction>,
    /// 5.x timer messages (`None` when the store has no timer topic).
    pub timers: Option<TimersPending>,
}

/// 5.x timer messages waiting on `rmq_sys_wheel_timer` (ENGINE.md 7.2).
#[derive(Debug, Serialize)]
pub struct TimersPending {
    #[serde(flatten)]
    pub counts: TimerCounts,
    /// Pending messages by release time.
    pub messages: Vec<TimerMessage>,
    /// Messages not listed (without --all).
    pub not_listed: usize,
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

#[derive(Debug, Serialize)]
pub struct GroupPending {
    pub group: String,
    pub queues: Vec<QueuePending>,
    /// Messages not yet consumed, over every queue.
    pub lag: i64,
    /// Retries parked until they are due, earliest first.
    pub retries_waiting: Vec<DelayedMessage>,
    pub dlq_topic: String,
    pub dlq_messages: i64,
}

#[derive(Debug, Serialize)]
pub struct QueuePending {
    pub topic: String,
    pub queue_id: i32,
    /// -1: no committed offset.
    pub committed_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub lag: i64,
}

#[derive(Debug, Serialize)]
pub struct LevelPending {
    pub level: i32,
    pub delay_ms: Option<i64>,
    /// Next queue offset to deliver (`delayOffset.json`, clamped).
    pub delay_offset: i64,
    pub max_offset: i64,
    pub pending: usize,
    /// Messages due at or before now.
    pub due_now: usize,
    pub next_due_timestamp: Option<i64>,
    pub last_due_timestamp: Option<i64>,
    pub messages: Vec<DelayedMessage>,
    /// Messages not listed (without --all).
    pub not_listed: usize,
}

/// Per level messages listed without `--all`.
const LIST_PER_LEVEL: usize = 20;

fn groups_of(engine: &Engine, only: Option<&str>, delayed: &[DelayedMessage]) -> Vec<String> {
    let mut set = names::consuming_groups(engine);
    for d in delayed {
        if let Some(g) = d
            .real_topic
            .as_deref()
            .and_then(|t| t.strip_prefix(RETRY_PREFIX))
        {
            set.insert(g.to_string());
        }
    }
    set.remove(TRANS_CHECK_GROUP);
    set.into_iter()
        .filter(|g| !g.is_empty() && only.is_none_or(|o| o == g))
        .collect()
}

/// Everything pending in `engine` at its clock's now; with `only`, what concerns that group:
/// its queues, and the delayed messages and undecided transactions bound for its topics. An
/// unknown group is an error.
pub fn pending(engine: &Engine, only: Option<&str>, all: bool) -> anyhow::Result<Pending> {
    let now = engine.now();
    let waiting = engine.pending_delayed();
    if let Some(g) = only {
        let mut known = groups_of(engine, None, &waiting);
        known.extend(names::engine_groups(engine));
        names::ensure_known(
            "consumer group",
            g,
            known.iter().map(String::as_str),
            "this store's consumer offsets, config/subscriptionGroup.json, retry or DLQ topics",
        )?;
    }
    let mut groups = Vec::new();
    // topics of the groups shown: what a delayed message or a transaction must be bound for
    let mut shown_topics: BTreeSet<String> = BTreeSet::new();
    for g in groups_of(engine, only, &waiting) {
        let mut topics: BTreeSet<String> = engine.offset_topics(&g);
        let retry = retry_topic(&g);
        if !engine.queue_ids(&retry).is_empty() {
            topics.insert(retry.clone());
        }
        let mut queues = Vec::new();
        for t in &topics {
            for q in engine.queue_ids(t) {
                let (min, max) = engine.queue_bounds(t, q);
                let committed = engine.committed_offset(&g, t, q);
                let from = if committed < 0 {
                    min
                } else {
                    committed.max(min)
                };
                queues.push(QueuePending {
                    topic: t.clone(),
                    queue_id: q,
                    committed_offset: committed,
                    min_offset: min,
                    max_offset: max,
                    lag: (max - from).max(0),
                });
            }
        }
        let dlq = dlq_topic(&g);
        shown_topics.extend(topics.iter().cloned());
        shown_topics.insert(dlq.clone());
        shown_topics.insert(retry.clone());
        let dlq_messages = engine
            .queue_ids(&dlq)
            .into_iter()
            .map(|q| {
                let (min, max) = engine.queue_bounds(&dlq, q);
                max - min
            })
            .sum();
        let mut retries_waiting: Vec<DelayedMessage> = waiting
            .iter()
            .filter(|d| {
                d.real_topic.as_deref() == Some(retry.as_str())
                    || d.real_topic.as_deref() == Some(dlq.as_str())
            })
            .cloned()
            .collect();
        retries_waiting.sort_by_key(|d| (d.due, d.commitlog_offset));
        groups.push(GroupPending {
            group: g,
            lag: queues.iter().map(|q| q.lag).sum(),
            queues,
            retries_waiting,
            dlq_topic: dlq,
            dlq_messages,
        });
    }
    let bound_for_shown =
        |topic: Option<&str>| only.is_none() || topic.is_some_and(|t| shown_topics.contains(t));
    let mut delayed = Vec::new();
    for level in 1..=engine.source().geometry.max_delay_level() {
        let mine: Vec<&DelayedMessage> = waiting
            .iter()
            .filter(|d| d.level == level && bound_for_shown(d.real_topic.as_deref()))
            .collect();
        let (_, max) = engine.queue_bounds(
            crate::engine::store::dispatch::SCHEDULE_TOPIC,
            crate::engine::broker::schedule::queue_id_of_level(level),
        );
        if mine.is_empty() && (max == 0 || only.is_some()) {
            continue;
        }
        let limit = if all { usize::MAX } else { LIST_PER_LEVEL };
        delayed.push(LevelPending {
            level,
            delay_ms: engine.source().geometry.delay_millis(level),
            delay_offset: engine.delay_offset(level),
            max_offset: max,
            pending: mine.len(),
            due_now: mine.iter().filter(|d| d.due <= now).count(),
            next_due_timestamp: mine.iter().map(|d| d.due).min(),
            last_due_timestamp: mine.iter().map(|d| d.due).max(),
            not_listed: mine.len().saturating_sub(limit),
            messages: mine.into_iter().take(limit).cloned().collect(),
        });
    }
    let transactions = engine
        .pending_transactions()
        .into_iter()
        .filter(|t| bound_for_shown(t.live.real_topic.as_deref()))
        .collect();
    let timers = timers_pending(engine, all, &bound_for_shown);
    Ok(Pending {
        now,
        groups,
        delayed,
        transactions,
        timers,
    })
}

fn timers_pending(
    engine: &Engine,
    all: bool,
    bound_for_shown: &dyn Fn(Option<&str>) -> bool,
) -> Option<TimersPending> {
    if engine.queue_bounds(TIMER_TOPIC, 0).1 == 0 {
        return None;
    }
    let now = engine.now();
    let report = engine.timer_report(false);
    let mine: Vec<&TimerMessage> = report
        .pending()
        .filter(|m| bound_for_shown(m.real_topic.as_deref()))
        .collect();
    let delivered = report
        .delivered()
        .filter(|m| bound_for_shown(m.real_topic.as_deref()))
        .count();
    let limit = if all { usize::MAX } else { LIST_PER_LEVEL };
    Some(TimersPending {
        counts: TimerCounts::of(report.read_timestamp, &mine, delivered, now),
        not_listed: mine.len().saturating_sub(limit),
        messages: mine.into_iter().take(limit).cloned().collect(),
    })
}

pub fn run(a: &PendingArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let group = a.client.group(a.group.as_deref())?;
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
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
    let p = pending(&engine, group.as_deref(), a.all)?;
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
