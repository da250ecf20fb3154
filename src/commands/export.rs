//! `rmqstore export`: everything a consumer group has not consumed yet, with the original ids,
//! keys, tags, properties and bodies, ready to be sent again to a live cluster.
//!
//! `--out FILE.jsonl` (or `.json`, `.ndjson`, or `-` for stdout) writes JSON Lines: the `dump`
//! message shape plus `export_source` (`topic`, `retry`, `delayed`, `dlq`, `transaction`),
//! `resend_topic`/`resend_queue_id` (where to send it: the original topic of a retry or DLQ
//! copy), `origin_message_id`, and `due` / `transaction_state` where they apply. Any other
//! `--out` is a new store directory, one record per exported message (see
//! `engine::export::write_store`). What is exported is described in `engine::export`. Nothing
//! is written to the store; an `--overlay` of earlier engine runs (`pull --commit`, `replay`) is
//! read, so an export after a replay sees the replay's offsets and retries.
//!
//! With `--client-dir DIR` the group is a broadcasting consumer: what it has not consumed is
//! measured from DIR's `offsets.json` ([`super::client_dir`]), which is only read.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;
use serde_json::json;

use super::client_dir::ClientDirArgs;
use super::engine_args::{open_engine, use_client_dir, BrokerArg, EngineArgs};
use super::names;
use super::output::{self, json_line, parse_time_arg, BodyMode, MessageJson};
use super::{ExitStatus, GeometryArgs};
use crate::engine::broker::pull::BrokerRole;
use crate::engine::broker::transaction::HalfState;
use crate::engine::broker::Engine;
use crate::engine::consume::export::{
    plan_export, write_store, ExportItem, ExportOptions, ExportPlan, ExportSource, Include,
};
use crate::engine::consume::pop::PopUse;
use crate::engine::Store;
use crate::format::commitlog::message_in;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The store root (read-only).
    pub store: PathBuf,
    /// The consumer group (with --client-dir: DIR's group, which it may repeat).
    #[arg(
        long,
        short = 'g',
        value_name = "G",
        required_unless_present = "client_dir"
    )]
    pub group: Option<String>,
    /// Only this topic (default: every topic the group has offsets for).
    #[arg(long, short = 't', value_name = "T")]
    pub topic: Option<String>,
    /// Also export: retry (the group's %RETRY% queue past its offset), delayed (parked in
    /// SCHEDULE_TOPIC_XXXX for the group's topics), dlq (the whole %DLQ% topic), transactions
    /// (undecided half messages for the group's topics), timers (5.x timer messages not yet
    /// released, handed on with TIMER_DELIVER_MS = their release time); comma-separated, or
    /// `all`.
    #[arg(long, value_name = "LIST", default_value = "")]
    pub include: Include,
    /// Keep one copy per UNIQ_KEY (the first of: topic, retry, delayed, dlq, transaction).
    #[arg(long)]
    pub dedupe: bool,
    /// FILE.jsonl (also .json, .ndjson; `-` for stdout) for JSON Lines, else a new store
    /// directory (it must not exist, or be empty).
    #[arg(long, value_name = "FILE.jsonl|DIR")]
    pub out: PathBuf,
    /// Replace an existing FILE.jsonl (without it an existing file is refused).
    #[arg(long)]
    pub force: bool,
    /// Export a group that consumes by POP (5.x) with exit status 0: its popped, unacknowledged
    /// messages are not in the export (they are in the revive topic, which is not read yet).
    #[arg(long)]
    pub accept_pop_gap: bool,
    /// An overlay written by earlier engine runs, read (not written).
    #[arg(long, value_name = "DIR")]
    pub overlay: Option<PathBuf>,
    /// The time due times and transaction ages are measured against (default: the real clock).
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    pub now: Option<i64>,
    /// Broker rules (default: guessed from the store).
    #[arg(long, value_enum)]
    pub broker: Option<BrokerArg>,
    /// Dispatch every commitlog record again at open (see `pull --full-replay`).
    #[arg(long)]
    pub full_replay: bool,
    /// How bodies are written in JSON Lines.
    #[arg(long, value_parser = super::output::body_mode_parser(), default_value = "auto")]
    pub body: BodyMode,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientDirArgs,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

/// One JSON line: the `dump` shape plus where the message came from and where it goes.
#[derive(Debug, Serialize)]
pub struct ExportJson {
    #[serde(flatten)]
    pub message: MessageJson,
    pub export_source: ExportSource,
    pub resend_topic: String,
    pub resend_queue_id: i32,
    pub origin_message_id: Option<String>,
    /// When a delayed message is due (epoch ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction_state: Option<HalfState>,
}

fn is_json_lines(out: &Path) -> bool {
    out.as_os_str() == "-"
        || out
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jsonl" | "json" | "ndjson"))
}

/// Write the JSON line of every item; returns how many were written.
fn write_lines(
    engine: &Engine,
    items: &[ExportItem],
    body: BodyMode,
    out: &mut dyn Write,
) -> anyhow::Result<usize> {
    let mut n = 0;
    for item in items {
        let Some(raw) = engine.record_at(item.commitlog_offset) else {
            continue;
        };
        let Some(m) = message_in(&raw, item.commitlog_offset) else {
            continue;
        };
        let line = ExportJson {
            message: MessageJson::new(&m, &engine.record_file(item.commitlog_offset), body),
            export_source: item.source,
            resend_topic: item.resend_topic.clone(),
            resend_queue_id: item.resend_queue_id,
            origin_message_id: item.origin_message_id.clone(),
            due_timestamp: item.due,
            transaction_state: item.transaction_state,
        };
        json_line(out, &line)?;
        n += 1;
    }
    Ok(n)
}

/// JSON Lines into `path` through a temp sibling renamed into place.
fn write_file(
    engine: &Engine,
    items: &[ExportItem],
    body: BodyMode,
    path: &Path,
) -> anyhow::Result<usize> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export.jsonl".into());
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let write = || -> anyhow::Result<usize> {
        let f =
            std::fs::File::create(&tmp).map_err(|e| anyhow::anyhow!("{}: {e}", tmp.display()))?;
        let mut w = BufWriter::with_capacity(1 << 16, f);
        let n = write_lines(engine, items, body, &mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(n)
    };
    match write() {
        Ok(n) => {
            std::fs::rename(&tmp, path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            Ok(n)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn counts(plan: &ExportPlan) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    for s in [
        ExportSource::Topic,
        ExportSource::Retry,
        ExportSource::Delayed,
        ExportSource::Dlq,
        ExportSource::Transaction,
    ] {
        let n = plan.items.iter().filter(|i| i.source == s).count();
        if n > 0 {
            m.insert(s.as_str().to_string(), json!(n));
        }
    }
    m
}

pub fn run(a: &ExportArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    if a.out.as_os_str() != "-" {
        crate::format::layout::ensure_outside_stores(&a.out, "--out", false)?;
        let exists =
            crate::format::entry::probe(&a.out).kind != crate::format::entry::Kind::Missing;
        if is_json_lines(&a.out) && exists && !a.force {
            anyhow::bail!(
                "{}: already exists: refusing to overwrite it (--force replaces it)",
                a.out.display()
            );
        }
    }
    let group = a.client.group(a.group.as_deref())?.unwrap_or_default();
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
    if a.topic.is_none() && a.client.client_dir.is_none() {
        names::ensure_group(
            &engine,
            &group,
            "To export as a new group, name its topic (--topic)",
        )?;
    }
    let plan = plan_export(
        &engine,
        &ExportOptions {
            group,
            topic: a.topic.clone(),
            include: a.include,
            dedupe: a.dedupe,
        },
    )?;
    let (written, kind) = if a.out.as_os_str() == "-" {
        let n = write_lines(&engine, &plan.items, a.body, out)?;
        out.flush()?;
        (n, "jsonl")
    } else if is_json_lines(&a.out) {
        (write_file(&engine, &plan.items, a.body, &a.out)?, "jsonl")
    } else {
        (write_store(&engine, &plan.items, &a.out)?.records, "store")
    };
    let summary = json!({
        "group": plan.group,
        "topics": plan.topics,
        "out": a.out.display().to_string(),
        "format": kind,
        "messages": written,
        "by_source": counts(&plan),
        "duplicates_dropped": plan.duplicates,
        "unreadable": plan.unreadable,
    });
    if plan.unreadable > 0 {
        output::note(&format!(
            "{} unit(s) point to records that cannot be read; they were left out",
            plan.unreadable
        ));
    }
    let pop_gap = output::note_pop(&pop, Some(plan.group.as_str()));
    if pop_gap && !a.accept_pop_gap {
        output::note(
            "exit status 1: the export may lack popped messages (--accept-pop-gap accepts that)",
        );
    }
    if a.out.as_os_str() == "-" && a.json {
        super::output::summary_line(&mut std::io::stderr().lock(), "export", &summary)?;
    } else if a.out.as_os_str() == "-" {
        output::say(&format!(
            "exported {written} message(s) of group {}",
            plan.group
        ));
    } else if a.json {
        super::output::summary_line(out, "export", &summary)?;
    } else {
        writeln!(
            out,
            "exported {written} message(s) of group {} ({}) to {} ({kind}){}",
            plan.group,
            counts(&plan)
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            a.out.display(),
            if plan.duplicates > 0 {
                format!(", {} duplicate(s) dropped", plan.duplicates)
            } else {
                String::new()
            }
        )?;
    }
    Ok(if pop_gap && !a.accept_pop_gap {
        ExitStatus::Findings
    } else {
        ExitStatus::Success
    })
}
