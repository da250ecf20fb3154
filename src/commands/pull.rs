//! `rmqstore pull`: one pull request per queue, answered as the broker answers it
//! (`DefaultMessageStore.getMessage`), from the store plus an optional overlay.
//!
//! The start offset is `--offset N`, or `--from first|last|TIME` (the queue's min offset, its
//! max offset, or the broker's `getOffsetInQueueByTime`), or else the group's committed offset
//! (a group without one starts where the broker tells a new push consumer to start,
//! ENGINE.md 4.1/4.4). Output is the `dump` message shape (table or JSON Lines) on stdout; each
//! queue's answer (`{"type":"pull","status","next_begin_offset","min_offset","max_offset",...}`)
//! and the closing summary go to stderr (docs/json.md); without `--queue` every queue of the
//! topic is pulled in turn. Tag filters are applied as the broker
//! and then the client apply them (hash code, then tag string); SQL92 on the broker.
//! `--commit` stores `next_begin_offset` as the group's offset in the overlay.
//!
//! With `--client-dir DIR` the group is a broadcasting consumer whose progress is DIR's
//! `offsets.json` ([`super::client_dir`]): it starts from that file's offsets (a queue the file
//! lacks starts at its max offset, as `CONSUME_FROM_LAST_OFFSET` does without asking a broker),
//! and `--commit` writes `next_begin_offset` into that file (no overlay needed).
//! Exit status 1 when no message was returned.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::client_dir::ClientDirArgs;
use super::engine_args::{open_engine, use_client_dir, BrokerArg, EngineArgs};
use super::line_format::{LineArgs, Style};
use super::message_printer::MessagePrinter;
use super::names;
use super::output::{self, parse_time_arg, BodyMode};
use super::{ExitStatus, GeometryArgs};
use crate::engine::broker::pull::{BrokerRole, MessageFilter, PullRequest, DEFAULT_PULL_BATCH};
use crate::engine::broker::Engine;
use crate::engine::filter::sql::{SqlDialect, SqlFilter};
use crate::engine::filter::TagFilter;
use crate::engine::store::version::BrokerVersion;
use crate::engine::Store;

#[derive(Debug, Args)]
pub struct PullArgs {
    /// The store root (read-only).
    pub store: PathBuf,
    /// Consumer group whose offsets are read (and written with --commit); with --client-dir,
    /// DIR's group.
    #[arg(
        long,
        short = 'g',
        value_name = "G",
        required_unless_present = "client_dir"
    )]
    pub group: Option<String>,
    /// Topic to pull (a group's retries are in `%RETRY%<group>`).
    #[arg(long, short = 't', value_name = "T")]
    pub topic: String,
    /// Queue id (default: every queue of the topic, in turn).
    #[arg(long, short = 'q', value_name = "Q")]
    pub queue: Option<i32>,
    /// Queue offset to pull from.
    #[arg(long, short = 'o', value_name = "N", conflicts_with = "from")]
    pub offset: Option<i64>,
    /// Start at the queue's first offset, its last offset, or the first message stored at TIME
    /// (epoch ms or ISO 8601).
    #[arg(long, value_name = "first|last|TIME")]
    pub from: Option<String>,
    /// maxMsgNums of the request (the broker returns at most 32 from memory, 8 from disk).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PULL_BATCH)]
    pub max: i32,
    /// Tag expression: `TagA || TagB`, or `*`.
    #[arg(long, value_name = "EXPR", conflicts_with = "sql")]
    pub tag: Option<String>,
    /// SQL92 expression on message properties (`a > 5 AND TAGS IN ('x')`).
    #[arg(long, value_name = "EXPR")]
    pub sql: Option<String>,
    /// Store next_begin_offset as the group's committed offset: in the overlay (needs
    /// --overlay), or with --client-dir in the client's offsets.json.
    #[arg(long)]
    pub commit: bool,
    /// Overlay store directory: where the engine's writes go; an earlier run's overlay is read
    /// and continued. Without it, nothing is written.
    #[arg(long, value_name = "DIR")]
    pub overlay: Option<PathBuf>,
    /// First deliver the delayed messages due at --now into the overlay, as a master's
    /// schedule service would.
    #[arg(long)]
    pub deliver_due: bool,
    /// The engine's clock (default: the real clock).
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    pub now: Option<i64>,
    /// Broker role: a slave keeps the request offset where a master corrects it.
    #[arg(long, value_parser = super::output::broker_role_parser(), default_value = "master")]
    pub role: BrokerRole,
    /// Broker rules (default: guessed from the store).
    #[arg(long, value_enum)]
    pub broker: Option<BrokerArg>,
    /// Dispatch every commitlog record again at open, to rebuild consume queues that are
    /// missing or cut short (by default only when offsets show stale queues).
    #[arg(long)]
    pub full_replay: bool,
    /// How to print bodies (compressed bodies are shown decompressed).
    #[arg(long, value_parser = super::output::body_mode_parser(), default_value = "auto")]
    pub body: BodyMode,
    /// JSON Lines: each queue's messages on stdout; its `pull` answer and the summary on stderr.
    #[arg(long, short = 'J')]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientDirArgs,
    #[command(flatten)]
    pub lines: LineArgs,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

fn filter_of(a: &PullArgs, version: BrokerVersion) -> anyhow::Result<Option<MessageFilter>> {
    if let Some(t) = &a.tag {
        let f = TagFilter::parse(t).map_err(|e| anyhow::anyhow!("--tag: {e}"))?;
        return Ok(Some(MessageFilter::Tag(f)));
    }
    if let Some(s) = &a.sql {
        if s.trim().is_empty() {
            anyhow::bail!(
                "--sql: an empty expression (the broker answers SUBSCRIPTION_PARSE_FAILED)"
            );
        }
        let dialect = match version {
            BrokerVersion::V4_9 => SqlDialect::V4_9,
            BrokerVersion::V5 => SqlDialect::V5,
        };
        let f = SqlFilter::parse_with(s, dialect).map_err(|e| {
            anyhow::anyhow!("--sql: {e} (a broker would build no filter and match every message)")
        })?;
        return Ok(Some(MessageFilter::Sql(f)));
    }
    Ok(None)
}

pub fn run(a: &PullArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let group = a.client.group(a.group.as_deref())?.unwrap_or_default();
    let client_dir = a.client.client_dir.is_some();
    if a.commit && a.overlay.is_none() && !client_dir {
        anyhow::bail!(
            "--commit needs --overlay DIR (or --client-dir DIR): the store itself is never written"
        );
    }
    if a.deliver_due && a.role == BrokerRole::Slave {
        anyhow::bail!("--deliver-due: only a master runs the schedule service");
    }
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let mut engine = open_engine(
        store,
        EngineArgs {
            overlay: a.overlay.as_deref(),
            now: a.now,
            role: a.role,
            broker: a.broker,
            full_replay: a.full_replay,
            writable: true,
            broker_name: a.client.broker_name.clone(),
        },
    )?;
    use_client_dir(&mut engine, &a.client)?;
    names::ensure_known(
        "topic",
        &a.topic,
        names::engine_topics(&engine).iter().map(String::as_str),
        "this store's consume queues or config/topics.json",
    )?;
    if a.offset.is_none() && a.from.is_none() && !client_dir {
        names::ensure_group(
            &engine,
            &group,
            "To pull as a new group, say where to start: --from first|last|TIME or --offset N",
        )?;
    }
    let filter = filter_of(a, engine.options().version)?;
    if a.deliver_due {
        let n = engine.deliver_due()?.len();
        let t = engine.deliver_due_timers()?.len();
        output::note(&format!(
            "{n} delayed and {t} timer message(s) were due and delivered"
        ));
    }
    let queues = match a.queue {
        Some(q) => vec![q],
        None => {
            let ids = engine.queue_ids(&a.topic);
            if ids.is_empty() {
                vec![0]
            } else {
                ids
            }
        }
    };
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let total = pull_queues(a, &group, &mut engine, &queues, filter.as_ref(), &mut out)?;
    out.flush()?;
    drop(out);
    let client = engine.take_client_offsets();
    engine.close()?;
    if let Some(mut c) = client.filter(|_| a.commit) {
        super::client_dir::persist(&mut c, "pull")?;
    }
    Ok(if total > 0 {
        ExitStatus::Success
    } else {
        ExitStatus::Findings
    })
}

/// Pull each queue once and print what the consumer receives; returns the messages printed.
fn pull_queues(
    a: &PullArgs,
    group: &str,
    engine: &mut Engine,
    queues: &[i32],
    filter: Option<&MessageFilter>,
    out: &mut dyn Write,
) -> anyhow::Result<u64> {
    let mut printer = MessagePrinter::new(out, Style::from_flags(a.json, &a.lines)?, a.body);
    let mut total = 0u64;
    let mut filtered = 0u64;
    for &q in queues {
        let (min, max) = engine.queue_bounds(&a.topic, q);
        let offset = match (&a.offset, a.from.as_deref()) {
            (Some(o), _) => *o,
            (None, Some("first")) => min,
            (None, Some("last")) => max,
            (None, Some(t)) => {
                let ts = parse_time_arg(t).map_err(|e| anyhow::anyhow!("--from: {e}"))?;
                engine.offset_by_time(&a.topic, q, ts)
            }
            (None, None) => engine
                .pull_from_where(group, &a.topic, q, Default::default())
                .unwrap_or(max),
        };
        let req = PullRequest {
            topic: &a.topic,
            queue_id: q,
            offset,
            max_msgs: a.max,
            filter,
        };
        let r = engine.process_pull(group, &req, None)?;
        let mut dropped = 0u64;
        let mut shown = 0u64;
        for pm in &r.messages {
            let Some(m) = pm.message() else {
                continue;
            };
            if filter.is_some_and(|f| !f.client_keeps(&m)) {
                dropped += 1;
                continue;
            }
            printer.print(&m, &engine.record_file(pm.commitlog_offset))?;
            shown += 1;
        }
        total += shown;
        if a.commit {
            engine.commit_offset(group, &a.topic, q, r.next_begin_offset);
        }
        printer.side_line(
            "pull",
            None,
            json!({
                "topic": a.topic,
                "queue_id": q,
                "queue_offset": offset,
                "status": r.status.as_str(),
                "next_begin_offset": r.next_begin_offset,
                "min_offset": r.min_offset,
                "max_offset": r.max_offset,
                "messages": shown,
                "client_filtered": dropped,
                "committed_offset": a.commit.then_some(r.next_begin_offset),
            }),
        )?;
        filtered += dropped;
    }
    printer.summary(
        "pull",
        json!({
            "topic": a.topic,
            "group": group,
            "queues": queues.len(),
            "messages": total,
            "client_filtered": filtered,
        }),
    )?;
    Ok(total)
}
