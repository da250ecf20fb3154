//! `rmqstore offsets`: a consumer group's committed offsets, shown and changed offline.
//!
//! - `show [--group G] [--topic T]`: committed offset, min, max and lag per queue.
//! - `set --group G --topic T [--queue Q] --to-offset N | --to-time TIME | --to first|last`.
//! - `clone --from G1 --to G2 [--topic T]`, `delete --group G [--topic T]`.
//!
//! A change prints its plan (old and new offset, messages re-delivered or skipped per queue)
//! and writes nothing unless `--apply` ([`crate::engine::admin::offsets`] says how it writes).
//!
//! With `--client-dir DIR` (before `show` or `set`) the offsets are a broadcasting consumer's
//! `DIR/offsets.json` instead ([`super::client_dir`]): `show` and `set` work the same, `set
//! --apply` writes that file as the client's `persistAll` does and reads the store only (no
//! broker lock is taken).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use super::client_dir::{self, ClientDirArgs};
use super::engine_args::BrokerArg;
use super::names;
use super::output::{self, parse_time_arg, summary_line, typed_line};
use super::{ExitStatus, GeometryArgs};
use crate::engine::admin::{
    self,
    offsets::{OffsetPlan, QueueChange, Target},
};
use crate::engine::store::safedir::StoreLock;
use crate::engine::store::version::{detect_broker_version, BrokerVersion};
use crate::engine::Store;
use crate::format::config::ConsumerOffsets;

#[derive(Debug, Args)]
pub struct OffsetsArgs {
    /// The store root.
    pub store: PathBuf,
    #[command(flatten)]
    pub client: ClientDirArgs,
    #[command(subcommand)]
    pub action: OffsetsAction,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

#[derive(Debug, Subcommand)]
pub enum OffsetsAction {
    /// Committed offset, min, max and lag per queue.
    #[command(after_help = super::help::OFFSETS_SHOW)]
    Show(ShowArgs),
    /// Move a group's offsets on a topic to an offset, a time, or the first or last message.
    #[command(after_help = super::help::OFFSETS_SET)]
    Set(SetArgs),
    /// Give a group the offsets another group has.
    #[command(after_help = super::help::OFFSETS_CLONE)]
    Clone(CloneArgs),
    /// Delete a group's offsets.
    #[command(after_help = super::help::OFFSETS_DELETE)]
    Delete(DeleteArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Only this consumer group.
    #[arg(long, short = 'g', value_name = "G")]
    pub group: Option<String>,
    /// Only this topic.
    #[arg(long, short = 't', value_name = "T")]
    pub topic: Option<String>,
    /// JSON Lines: one `queue_offset` per queue, then a summary.
    #[arg(long, short = 'J')]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum End {
    First,
    Last,
}

/// Whether a change is written.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Write the change (without it, only the plan is printed).
    #[arg(long)]
    pub apply: bool,
    /// The plan as JSON Lines: one `offset_change` per queue, then a summary.
    #[arg(long, short = 'J')]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["to_offset", "to_time", "to"])))]
pub struct SetArgs {
    /// The consumer group (with --client-dir: DIR's group, which it may repeat).
    #[arg(long, short = 'g', value_name = "G")]
    pub group: Option<String>,
    #[arg(long, short = 't', value_name = "T")]
    pub topic: String,
    /// One queue (default: every queue of the topic).
    #[arg(long, short = 'q', value_name = "Q")]
    pub queue: Option<i32>,
    /// This queue offset, 0 or more (clamped to each queue's min and max).
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = super::output::parse_offset_arg::<i64>)]
    pub to_offset: Option<i64>,
    /// The first message stored at or after TIME, as the broker's getOffsetInQueueByTime.
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    pub to_time: Option<i64>,
    /// Each queue's first or last offset.
    #[arg(long, value_enum)]
    pub to: Option<End>,
    /// Broker rules for --to-time (default: guessed from the store).
    #[arg(long, value_enum)]
    pub broker: Option<BrokerArg>,
    #[command(flatten)]
    pub apply: ApplyArgs,
}

#[derive(Debug, Args)]
pub struct CloneArgs {
    /// The group whose offsets are copied.
    #[arg(long, value_name = "G1")]
    pub from: String,
    /// The group that gets them (its offsets on those topics are replaced).
    #[arg(long, value_name = "G2")]
    pub to: String,
    /// Only this topic.
    #[arg(long, short = 't', value_name = "T")]
    pub topic: Option<String>,
    #[command(flatten)]
    pub apply: ApplyArgs,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[arg(long, short = 'g', value_name = "G")]
    pub group: String,
    /// Only this topic.
    #[arg(long, short = 't', value_name = "T")]
    pub topic: Option<String>,
    #[command(flatten)]
    pub apply: ApplyArgs,
}

/// The closing line of `--json`.
#[derive(Debug, Serialize)]
struct OffsetsSummary {
    action: &'static str,
    queues: usize,
    /// `show`: the lag of the queues shown.
    lag: Option<i64>,
    redelivered: i64,
    skipped: i64,
    applied: bool,
}

/// One queue of `show`.
#[derive(Debug, Serialize)]
struct QueueOffset {
    group: String,
    topic: String,
    queue_id: i32,
    committed_offset: i64,
    min_offset: i64,
    max_offset: i64,
    lag: i64,
}

fn target_of(s: &SetArgs) -> Target {
    match (s.to_offset, s.to_time, s.to) {
        (Some(n), _, _) => Target::Offset(n),
        (_, Some(t), _) => Target::Time(t),
        (_, _, Some(End::First)) => Target::First,
        _ => Target::Last,
    }
}

fn version_of(s: &SetArgs, store: &Store) -> BrokerVersion {
    match s.broker {
        Some(BrokerArg::V4_9) => BrokerVersion::V4_9,
        Some(BrokerArg::V5) => BrokerVersion::V5,
        None => detect_broker_version(store).0,
    }
}

/// `--client-dir`: `show` and `set` on a broadcasting client's `offsets.json`.
fn run_client(a: &OffsetsArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let (show_args, set_args) = match &a.action {
        OffsetsAction::Show(s) => (Some(s), None),
        OffsetsAction::Set(s) => (None, Some(s)),
        OffsetsAction::Clone(_) | OffsetsAction::Delete(_) => anyhow::bail!(
            "--client-dir: only show and set work on a client's offsets.json (clone and delete \
             work on the broker's consumerOffset.json)"
        ),
    };
    let given = show_args
        .and_then(|s| s.group.as_deref())
        .or(set_args.and_then(|s| s.group.as_deref()));
    let group = a.client.group(given)?.unwrap_or_default();
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let Some(mut client) = a.client.load(&a.client.broker_name(&store))? else {
        return Ok(ExitStatus::Success);
    };
    let table = client.as_table();
    let known_topic = topic_check(&store);
    if let Some(sh) = show_args {
        if let Some(t) = &sh.topic {
            known_topic(t)?;
        }
        return show(&store, &table, sh, out);
    }
    let Some(s) = set_args else {
        return Ok(ExitStatus::Success);
    };
    known_topic(&s.topic)?;
    let plan = admin::offsets::plan_set(
        &store,
        &table,
        &group,
        &s.topic,
        s.queue,
        target_of(s),
        version_of(s, &store),
    )?;
    if plan.changes.is_empty() {
        anyhow::bail!("topic {} has no queues to set offsets on", s.topic);
    }
    print_plan("set", &plan, &s.apply, out)?;
    if s.apply.apply && !plan.is_empty() {
        for c in &plan.changes {
            if let Some(n) = c.new_offset {
                client.set(&c.topic, c.queue_id, n);
            }
        }
        client_dir::persist(&mut client, "offsets")?;
    }
    Ok(ExitStatus::Success)
}

pub fn run(a: &OffsetsArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    if a.client.client_dir.is_some() {
        return run_client(a, out);
    }
    let applying = match &a.action {
        OffsetsAction::Show(_) => false,
        OffsetsAction::Set(s) => s.apply.apply,
        OffsetsAction::Clone(c) => c.apply.apply,
        OffsetsAction::Delete(d) => d.apply.apply,
    };
    // held from before the table is read until it is written: no broker runs meanwhile
    let lock = applying.then(|| StoreLock::acquire(&a.store)).transpose()?;
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let table = admin::offsets::load_offsets(&store)?;
    let groups: Vec<&str> = table.iter().map(|(_, g, _)| g).collect();
    let known_group = |g: &str| {
        names::ensure_known(
            "consumer group",
            g,
            groups.iter().copied(),
            "config/consumerOffset.json",
        )
    };
    let known_topic = topic_check(&store);
    let (action, plan, apply) = match &a.action {
        OffsetsAction::Show(s) => {
            if let Some(g) = &s.group {
                known_group(g)?;
            }
            if let Some(t) = &s.topic {
                known_topic(t)?;
            }
            return show(&store, &table, s, out);
        }
        OffsetsAction::Set(s) => {
            let group = s
                .group
                .as_deref()
                .ok_or_else(|| anyhow::anyhow!("set needs --group G (or --client-dir DIR)"))?;
            known_topic(&s.topic)?;
            let plan = admin::offsets::plan_set(
                &store,
                &table,
                group,
                &s.topic,
                s.queue,
                target_of(s),
                version_of(s, &store),
            )?;
            if plan.changes.is_empty() {
                anyhow::bail!("topic {} has no queues to set offsets on", s.topic);
            }
            ("set", plan, &s.apply)
        }
        OffsetsAction::Clone(c) => {
            known_group(&c.from)?;
            if let Some(t) = &c.topic {
                known_topic(t)?;
            }
            (
                "clone",
                admin::offsets::plan_clone(&store, &table, &c.from, &c.to, c.topic.as_deref())?,
                &c.apply,
            )
        }
        OffsetsAction::Delete(d) => {
            known_group(&d.group)?;
            if let Some(t) = &d.topic {
                known_topic(t)?;
            }
            (
                "delete",
                admin::offsets::plan_delete(&store, &table, &d.group, d.topic.as_deref())?,
                &d.apply,
            )
        }
    };
    print_plan(action, &plan, apply, out)?;
    let Some(lock) = lock.filter(|_| !plan.is_empty()) else {
        return Ok(ExitStatus::Success);
    };
    let backup = admin::offsets::apply(&lock, &plan)?;
    output::note_written(&store.config_dir().join("consumerOffset.json"), backup);
    Ok(ExitStatus::Success)
}

fn show(
    store: &Store,
    table: &ConsumerOffsets,
    s: &ShowArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitStatus> {
    let mut rows = Vec::new();
    for (topic, group, queues) in table.iter() {
        if s.group.as_deref().is_some_and(|g| g != group)
            || s.topic.as_deref().is_some_and(|t| t != topic)
        {
            continue;
        }
        for &(q, committed) in queues {
            let (min, max) = match store.queue(topic, q) {
                Some(cq) => (
                    cq.min_offset(store.commitlog.min_offset())? as i64,
                    cq.max_offset()? as i64,
                ),
                None => (0, 0),
            };
            rows.push(QueueOffset {
                group: group.to_string(),
                topic: topic.to_string(),
                queue_id: q,
                committed_offset: committed,
                min_offset: min,
                max_offset: max,
                lag: (max - committed.max(min)).max(0),
            });
        }
    }
    rows.sort_by(|a, b| (&a.group, &a.topic, a.queue_id).cmp(&(&b.group, &b.topic, b.queue_id)));
    if s.json {
        for r in &rows {
            typed_line(out, "queue_offset", r)?;
        }
        summary_line(
            out,
            "offsets",
            &OffsetsSummary {
                action: "show",
                queues: rows.len(),
                lag: Some(rows.iter().map(|r| r.lag).sum()),
                redelivered: 0,
                skipped: 0,
                applied: false,
            },
        )?;
        return Ok(ExitStatus::Success);
    }
    writeln!(
        out,
        "{:<24} {:<32} {:>5} {:>12} {:>12} {:>12} {:>10}",
        "GROUP", "TOPIC", "QUEUE", "COMMITTED", "MIN", "MAX", "LAG"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<24} {:<32} {:>5} {:>12} {:>12} {:>12} {:>10}",
            r.group, r.topic, r.queue_id, r.committed_offset, r.min_offset, r.max_offset, r.lag
        )?;
    }
    Ok(ExitStatus::Success)
}

fn print_plan(
    action: &'static str,
    plan: &OffsetPlan,
    a: &ApplyArgs,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let redelivered: i64 = plan.changes.iter().map(|c| c.redelivered).sum();
    let skipped: i64 = plan.changes.iter().map(|c| c.skipped).sum();
    if a.json {
        for c in &plan.changes {
            typed_line(out, "offset_change", c)?;
        }
        summary_line(
            out,
            "offsets",
            &OffsetsSummary {
                action,
                queues: plan.changes.len(),
                lag: None,
                redelivered,
                skipped,
                applied: a.apply && !plan.is_empty(),
            },
        )?;
        return Ok(());
    }
    let shown = |o: Option<i64>| o.map_or("-".to_string(), |v| v.to_string());
    writeln!(
        out,
        "{:<32} {:>5} {:>12} {:>12} {:>12} {:>12} {:>11} {:>9}",
        "TOPIC", "QUEUE", "OLD", "NEW", "MIN", "MAX", "REDELIVERED", "SKIPPED"
    )?;
    for QueueChange {
        topic,
        queue_id,
        old_offset,
        new_offset,
        min_offset,
        max_offset,
        redelivered,
        skipped,
    } in &plan.changes
    {
        writeln!(
            out,
            "{:<32} {:>5} {:>12} {:>12} {:>12} {:>12} {:>11} {:>9}",
            topic,
            queue_id,
            shown(*old_offset),
            shown(*new_offset),
            min_offset,
            max_offset,
            redelivered,
            skipped
        )?;
    }
    writeln!(
        out,
        "{} queue(s): {redelivered} message(s) delivered again, {skipped} skipped; {}",
        plan.changes.len(),
        if plan.is_empty() {
            "nothing changes"
        } else if a.apply {
            "written"
        } else {
            "nothing was written (add --apply)"
        }
    )?;
    Ok(())
}

/// A check that a topic name is one of the store's (consume queues or config/topics.json).
fn topic_check(store: &Store) -> impl Fn(&str) -> anyhow::Result<()> {
    let topics: Vec<String> = crate::engine::store::reader::Reader::new(store)
        .topics()
        .to_vec();
    move |t: &str| {
        names::ensure_known(
            "topic",
            t,
            topics.iter().map(String::as_str),
            "this store's consume queues or config/topics.json",
        )
    }
}
