//! `rmqstore dump`: the records of one kind of store file, as a readable table or JSON Lines.
//!
//! - `dump commitlog <STORE|FILE>`: messages in commitlog order, in the one message shape
//!   ([`output::MessageJson`]); compressed bodies are shown decompressed (`body_decompressed_from`
//!   names the algorithm).
//! - `dump consumequeue <STORE> --topic T [--queue Q]`: consume queue units.
//! - `dump index <STORE|FILE>`: index file headers and entries.
//! - `dump checkpoint <STORE>`, `dump config <STORE>`.
//!
//! JSON Lines (docs/json.md): one object per record, each with its `type`, then a `summary` line
//! (on stderr for `dump commitlog`, whose stdout holds the messages only). Notes (a limit that cut
//! the output short, a file that does not parse) go to stderr. A closed pipe ends quietly.

use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{json, Value};

use super::line_format::{LineArgs, Style};
use super::message_printer::{render, MessagePrinter};
use super::output::{self, format_time, json_line, BodyMode};
use super::{ExitStatus, GeometryArgs};
use crate::engine::store::reader::Reader;
use crate::engine::store::render_walk::{render_in_order, Selection, WalkOutcome};
use crate::engine::store::StorePath;
use crate::engine::Store;
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::Segment;
use crate::format::config::{
    load, ConfigFile, ConfigSource, ConsumerOffsets, DelayOffsets, JsonValue, Loaded,
    SubscriptionGroups, TopicConfigs,
};
use crate::format::consumequeue::{ConsumeQueue, UNIT_SIZE};
use crate::format::geometry::resolve;
use crate::format::indexfile::{
    infer_geometry, slot_of, IndexFile, IndexGeometry, IndexHeader, InferResult,
};
use crate::format::mapped::Mapped;

#[derive(Debug, Args)]
pub struct DumpArgs {
    #[command(subcommand)]
    pub what: DumpWhat,
}

#[derive(Debug, Subcommand)]
pub enum DumpWhat {
    /// Messages of the commitlog (a store, or one commitlog file), in offset order.
    #[command(after_help = super::help::DUMP_COMMITLOG)]
    Commitlog(CommitlogArgs),
    /// Units of a topic's consume queues.
    #[command(after_help = super::help::DUMP_CONSUMEQUEUE)]
    Consumequeue(ConsumeQueueArgs),
    /// Index file headers and entries (a store, or one index file).
    #[command(after_help = super::help::DUMP_INDEX)]
    Index(IndexArgs),
    /// The checkpoint file.
    #[command(after_help = super::help::DUMP_CHECKPOINT)]
    Checkpoint(CheckpointArgs),
    /// The config JSON files (consumer offsets, delay offsets, topics, subscription groups).
    #[command(after_help = super::help::DUMP_CONFIG)]
    Config(ConfigArgs),
    /// The 5.x timer log: one line per unit (enqueued timer message or delete marker).
    #[command(after_help = super::help::DUMP_TIMERLOG)]
    Timerlog(super::dump_timer::TimerFileArgs),
    /// The 5.x timer wheel: its non-empty slots.
    #[command(after_help = super::help::DUMP_TIMERWHEEL)]
    Timerwheel(super::dump_timer::TimerFileArgs),
    /// The 5.x timer checkpoint (config/timercheck) and timer metrics.
    #[command(after_help = super::help::DUMP_TIMERCHECK)]
    Timercheck(super::dump_timer::TimerFileArgs),
}

#[derive(Debug, Args)]
pub struct CommitlogArgs {
    /// A store root, or one commitlog file.
    pub path: PathBuf,
    /// Start at this commitlog offset (the first record at or after it).
    #[arg(long, short = 'o', value_name = "OFFSET")]
    pub from: Option<u64>,
    /// Print at most N messages.
    #[arg(long, short = 'c', value_name = "N")]
    pub count: Option<u64>,
    /// Only messages of this topic.
    #[arg(long, short = 't', value_name = "T")]
    pub topic: Option<String>,
    /// How to print bodies (compressed bodies are shown decompressed).
    #[arg(long, value_parser = super::output::body_mode_parser(), default_value = "auto")]
    pub body: BodyMode,
    /// JSON Lines: one object per message, then a `summary` on stderr.
    #[arg(long, short = 'J')]
    pub json: bool,
    #[command(flatten)]
    pub lines: LineArgs,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

#[derive(Debug, Args)]
pub struct ConsumeQueueArgs {
    /// The store root.
    pub store: PathBuf,
    /// The topic whose queues to print.
    #[arg(long, short = 't', value_name = "T")]
    pub topic: String,
    /// One queue id (default: every queue of the topic).
    #[arg(long, value_name = "Q")]
    pub queue: Option<i32>,
    /// First queue offset to print (default: the first unit of the queue's first file).
    #[arg(long, value_name = "N")]
    pub from: Option<u64>,
    /// Print at most N units per queue.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// JSON Lines: one object per record, then a `summary`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// A store root, or one index file.
    pub path: PathBuf,
    /// Only the 40-byte headers.
    #[arg(long)]
    pub header_only: bool,
    /// JSON Lines: one object per record, then a `summary`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// The store root (or the checkpoint file).
    pub store: PathBuf,
    /// JSON Lines: the `checkpoint` object, then a `summary`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// The store root.
    pub store: PathBuf,
    /// JSON Lines: one `config` object per config file (`name`, `file`, `source`, `content`),
    /// then a `summary`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &DumpArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let status = match &a.what {
        DumpWhat::Commitlog(c) => commitlog(c, &mut out)?,
        DumpWhat::Consumequeue(c) => consumequeue(c, &mut out)?,
        DumpWhat::Index(c) => index(c, &mut out)?,
        DumpWhat::Checkpoint(c) => checkpoint(c, &mut out)?,
        DumpWhat::Config(c) => config(c, &mut out)?,
        DumpWhat::Timerlog(c) => super::dump_timer::timerlog(c, &mut out)?,
        DumpWhat::Timerwheel(c) => super::dump_timer::timerwheel(c, &mut out)?,
        DumpWhat::Timercheck(c) => super::dump_timer::timercheck(c, &mut out)?,
    };
    out.flush()?;
    Ok(status)
}

// ---------------------------------------------------------------------------------------------
// dump commitlog

fn commitlog(a: &CommitlogArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let segments: Vec<Segment> = match StorePath::classify(&a.path)? {
        StorePath::Root(root) => Store::open(&root, &a.geometry.inputs()?)?
            .commitlog
            .segments
            .clone(),
        StorePath::CommitlogFile { path, start } => {
            let len = std::fs::metadata(&path)?.len();
            vec![Segment { path, start, len }]
        }
        _ => anyhow::bail!(
            "{}: give a store root or a commitlog file (commitlog/<20 digits>)",
            a.path.display()
        ),
    };
    let total = output::commitlog_data_bytes(&segments);
    let pb = output::progress(total, "dumping");
    let style = Style::from_flags(a.json, &a.lines)?;
    let mut printer = MessagePrinter::new(out, style.clone(), a.body);
    let limit = a.count.unwrap_or(u64::MAX);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let sel = Selection {
        from: a.from.unwrap_or(0),
        topic: a.topic.clone(),
        limit: a.count,
    };
    let walked = render_in_order(
        &segments,
        &sel,
        workers,
        &|done| pb.set_position(done),
        |buf, m, file| render(buf, m, file, &style, a.body),
        |lines, n| printer.write_rendered(lines, n),
    );
    pb.finish_and_clear();
    let WalkOutcome {
        files,
        more,
        problems,
    } = walked?;
    printer.summary(
        "dump commitlog",
        json!({
            "messages": printer.printed(),
            "files": files,
            "truncated": more,
            "problems": problems.len(),
        }),
    )?;
    printer.flush()?;
    if more {
        output::note_truncated(&format!(
            "--count {limit} reached: more messages follow (continue with --from)"
        ));
    }
    for p in &problems {
        eprintln!("rmqstore: {p}");
    }
    Ok(if problems.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Findings
    })
}

// ---------------------------------------------------------------------------------------------
// dump consumequeue

#[derive(Serialize)]
struct UnitJson<'a> {
    topic: &'a str,
    queue_id: i32,
    queue_offset: u64,
    commitlog_offset: i64,
    size: i32,
    tags_code: i64,
    /// A `fillPreBlank` placeholder, never a message.
    pre_blank: bool,
    /// The tags code is a ConsumeQueueExt address.
    ext_address: bool,
    /// Points below the commitlog's first offset (deleted data).
    stale: bool,
    file: String,
}

fn consumequeue(a: &ConsumeQueueArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let queues: Vec<&ConsumeQueue> = match a.queue {
        Some(q) => store.queue(&a.topic, q).into_iter().collect(),
        None => store.topic_queues(&a.topic).collect(),
    };
    if queues.is_empty() {
        anyhow::bail!(
            "no consume queue for topic {:?}{} under {}",
            a.topic,
            a.queue.map(|q| format!(" queue {q}")).unwrap_or_default(),
            store.root.join("consumequeue").display()
        );
    }
    let reader = Reader::new(&store);
    let cl_min = store.commitlog.min_offset() as i64;
    let limit = a.count.unwrap_or(u64::MAX);
    let mut summary = Vec::new();
    let mut truncated = Vec::new();
    for cq in queues {
        let min = cq.min_offset(store.commitlog.min_offset())?;
        let max = cq.max_offset()?;
        let first = cq
            .files
            .first()
            .map(|f| f.start / UNIT_SIZE as u64)
            .unwrap_or(0);
        let from = a.from.unwrap_or(first);
        if !a.json {
            writeln!(
                out,
                "{}/{}: min offset {min}, max offset {max}, {} file(s)",
                cq.topic,
                cq.queue_id,
                cq.files.len()
            )?;
            writeln!(
                out,
                "{:>10} {:>14} {:>8} {:>20}  NOTE",
                "QOFFSET", "COMMITLOG", "SIZE", "TAGS_CODE"
            )?;
        }
        let mut n = 0u64;
        let mut more = false;
        let mut failed: Option<anyhow::Error> = None;
        reader.for_each_unit_from(cq, from, |q, u| {
            if n >= limit {
                more = true;
                return ControlFlow::Break(());
            }
            n += 1;
            let pre_blank = u.is_pre_blank();
            let ext = u.has_ext_addr();
            let stale = !pre_blank && u.offset < cl_min;
            let r = if a.json {
                let file = file_of(cq, q);
                output::typed_line(
                    out,
                    "unit",
                    &UnitJson {
                        topic: &cq.topic,
                        queue_id: cq.queue_id,
                        queue_offset: q,
                        commitlog_offset: u.offset,
                        size: u.size,
                        tags_code: u.tags_code,
                        pre_blank,
                        ext_address: ext,
                        stale,
                        file,
                    },
                )
            } else {
                let note = [
                    (pre_blank, "pre-blank"),
                    (ext, "ext address"),
                    (stale, "below commitlog min"),
                ]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, s)| *s)
                .collect::<Vec<_>>()
                .join(", ");
                writeln!(
                    out,
                    "{:>10} {:>14} {:>8} {:>20}  {note}",
                    q, u.offset, u.size, u.tags_code
                )
                .map_err(Into::into)
            };
            if let Err(e) = r {
                failed = Some(e);
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        if more {
            truncated.push(format!("{}/{}", cq.topic, cq.queue_id));
        }
        summary.push(json!({
            "topic": cq.topic, "queue_id": cq.queue_id, "min_offset": min, "max_offset": max,
            "units": n, "truncated": more,
        }));
    }
    if a.json {
        output::summary_line(out, "dump consumequeue", &json!({ "queues": summary }))?;
    }
    out.flush()?;
    if !truncated.is_empty() {
        output::note_truncated(&format!(
            "--count {limit} reached in {}: more units follow",
            truncated.join(", ")
        ));
    }
    Ok(ExitStatus::Success)
}

fn file_of(cq: &ConsumeQueue, q: u64) -> String {
    let pos = q.saturating_mul(UNIT_SIZE as u64);
    cq.files
        .iter()
        .rev()
        .find(|f| f.start <= pos)
        .map(|f| f.path.display().to_string())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// dump index

#[derive(Serialize)]
struct EntryJson<'a> {
    file: &'a str,
    entry: u32,
    slot: u32,
    key_hash: i32,
    commitlog_offset: i64,
    time_diff: i32,
    /// `beginTimestamp + time_diff * 1000`, as the lookup computes it.
    store_timestamp: i64,
    prev: i32,
}

fn index(a: &IndexArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let inputs = a.geometry.inputs()?;
    let (files, store_geometry): (Vec<PathBuf>, Option<IndexGeometry>) =
        match StorePath::classify(&a.path)? {
            StorePath::Root(root) => {
                let s = Store::open(&root, &inputs)?;
                let g = IndexGeometry::new(
                    s.geometry.index_slots.value,
                    s.geometry.index_entries.value,
                );
                (s.index_files.clone(), Some(g))
            }
            StorePath::IndexFile(p) => (vec![p], None),
            _ => anyhow::bail!(
                "{}: give a store root or an index file (index/<yyyyMMddHHmmssSSS>)",
                a.path.display()
            ),
        };
    let flags = resolve(&inputs);
    let mut status = ExitStatus::Success;
    let mut entries_total = 0u64;
    for p in &files {
        let name = p.display().to_string();
        let map = Mapped::open(p)?;
        let header = IndexHeader::from_bytes(&map).map_err(|e| e.in_file(p, 0))?;
        let geometry = match store_geometry {
            Some(g) => Some(g),
            None => file_geometry(&map, &inputs, &flags),
        };
        if a.json {
            output::typed_line(
                out,
                "index_header",
                &json!({
                    "file": name, "size": map.len(), "header": header,
                    "entries": (header.index_count as i64 - 1).max(0),
                    "geometry": geometry,
                }),
            )?;
        } else {
            writeln!(out, "{name}")?;
            writeln!(
                out,
                "  begin {} ({})  end {} ({})",
                header.begin_timestamp,
                format_time(header.begin_timestamp),
                header.end_timestamp,
                format_time(header.end_timestamp)
            )?;
            writeln!(
                out,
                "  phy offsets {}..{}  hash slots taken {}  index count {} ({} entries)  geometry {}",
                header.begin_phy_offset,
                header.end_phy_offset,
                header.hash_slot_count,
                header.index_count,
                (header.index_count as i64 - 1).max(0),
                geometry.map(|g| g.to_string()).unwrap_or_else(|| "unknown".into())
            )?;
        }
        if a.header_only {
            continue;
        }
        let Some(g) = geometry else {
            eprintln!(
                "rmqstore: {name}: slot and entry counts unknown (pass --index-slots and --index-entries); entries not shown"
            );
            status = ExitStatus::Findings;
            continue;
        };
        let file = match IndexFile::new(map, g) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("rmqstore: {}", e.in_file(p, 0));
                status = ExitStatus::Findings;
                continue;
            }
        };
        if !a.json {
            writeln!(
                out,
                "  {:>9} {:>8} {:>11} {:>14} {:>9} {:<29} {:>9}",
                "ENTRY", "SLOT", "HASH", "PHY_OFFSET", "DIFF_S", "TIME", "PREV"
            )?;
        }
        for e in file.entries() {
            let (n, e) = match e {
                Ok(x) => x,
                Err(err) => {
                    eprintln!("rmqstore: {}", err.in_file(p, 0));
                    status = ExitStatus::Findings;
                    break;
                }
            };
            entries_total += 1;
            let time = header
                .begin_timestamp
                .wrapping_add(i64::from(e.time_diff).wrapping_mul(1000));
            let slot = slot_of(e.key_hash, g.slots);
            if a.json {
                output::typed_line(
                    out,
                    "index_entry",
                    &EntryJson {
                        file: &name,
                        entry: n,
                        slot,
                        key_hash: e.key_hash,
                        commitlog_offset: e.phy_offset,
                        time_diff: e.time_diff,
                        store_timestamp: time,
                        prev: e.prev,
                    },
                )?;
            } else {
                writeln!(
                    out,
                    "  {:>9} {:>8} {:>11} {:>14} {:>9} {:<29} {:>9}",
                    n,
                    slot,
                    e.key_hash,
                    e.phy_offset,
                    e.time_diff,
                    format_time(time),
                    e.prev
                )?;
            }
        }
    }
    if a.json {
        output::summary_line(
            out,
            "dump index",
            &json!({ "files": files.len(), "entries": entries_total }),
        )?;
    }
    Ok(status)
}

/// The geometry of a lone index file: the flags (or broker config), else inference, else the
/// broker's default when the size fits it.
fn file_geometry(
    map: &[u8],
    inputs: &crate::format::geometry::GeometryInputs,
    resolved: &crate::format::geometry::Geometry,
) -> Option<IndexGeometry> {
    let given = |o: &crate::format::geometry::GeometryOverrides| {
        o.index_slots
            .zip(o.index_entries)
            .map(|(s, e)| IndexGeometry::new(s, e))
    };
    if let Some(g) = given(&inputs.flags).or_else(|| given(&inputs.broker_conf)) {
        return Some(g);
    }
    match infer_geometry(map).result {
        InferResult::Unique(g) => Some(g),
        _ => {
            let d = IndexGeometry::new(resolved.index_slots.value, resolved.index_entries.value);
            (d.file_size() == map.len() as u64).then_some(d)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// dump checkpoint

fn checkpoint(a: &CheckpointArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let path = if a.store.is_dir() {
        a.store.join("checkpoint")
    } else {
        a.store.clone()
    };
    let bytes = crate::format::entry::read_prefix(
        &path,
        crate::format::checkpoint::CHECKPOINT_FILE_SIZE as u64,
    )?;
    let cp = Checkpoint::from_bytes(&bytes).map_err(|e| e.in_file(&path, 0))?;
    if a.json {
        output::typed_line(
            out,
            "checkpoint",
            &json!({
                "file": path.display().to_string(),
                "size": bytes.len(),
                "physic_msg_timestamp": cp.physic_msg_timestamp,
                "logics_msg_timestamp": cp.logics_msg_timestamp,
                "index_msg_timestamp": cp.index_msg_timestamp,
                "master_flushed_offset": cp.master_flushed_offset,
                "confirm_commitlog_offset": cp.confirm_phy_offset,
                "min_timestamp": cp.min_timestamp(),
                "min_timestamp_index": cp.min_timestamp_index(),
            }),
        )?;
        output::summary_line(out, "dump checkpoint", &json!({ "files": 1 }))?;
    } else {
        writeln!(out, "{} ({} bytes)", path.display(), bytes.len())?;
        for (name, v, is_time) in [
            ("physicMsgTimestamp", cp.physic_msg_timestamp, true),
            ("logicsMsgTimestamp", cp.logics_msg_timestamp, true),
            ("indexMsgTimestamp", cp.index_msg_timestamp, true),
            ("masterFlushedOffset", cp.master_flushed_offset, false),
            ("confirmPhyOffset", cp.confirm_phy_offset, false),
            ("minTimestamp (recovery)", cp.min_timestamp(), true),
            ("minTimestampIndex", cp.min_timestamp_index(), true),
        ] {
            if is_time && v > 0 {
                writeln!(out, "{name:<24} {v:>15}  {}", format_time(v))?;
            } else {
                writeln!(out, "{name:<24} {v:>15}")?;
            }
        }
    }
    Ok(ExitStatus::Success)
}

// ---------------------------------------------------------------------------------------------
// dump config

/// A fastjson value as plain JSON (bare integer keys become strings).
fn to_json_value(v: &JsonValue) -> Value {
    match v {
        JsonValue::Null => Value::Null,
        JsonValue::Bool(b) => Value::Bool(*b),
        JsonValue::Number(raw) => {
            if let Ok(n) = raw.parse::<i64>() {
                Value::from(n)
            } else if let Some(n) = raw
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Value::Number(n)
            } else {
                Value::String(raw.clone())
            }
        }
        JsonValue::String(s) => Value::String(s.clone()),
        JsonValue::Array(a) => Value::Array(a.iter().map(to_json_value).collect()),
        JsonValue::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.name().into_owned(), to_json_value(v)))
                .collect(),
        ),
    }
}

fn source_text(s: &ConfigSource) -> (&'static str, Option<String>) {
    match s {
        ConfigSource::Main => ("main", None),
        ConfigSource::Backup { reason } => ("backup", Some(reason.clone())),
        ConfigSource::Missing => ("missing", None),
        ConfigSource::Empty { reason } => ("empty", Some(reason.clone())),
    }
}

fn config_json<T: ConfigFile>(l: &Loaded<T>) -> Value {
    let (source, reason) = source_text(&l.source);
    json!({
        "type": "config",
        "name": T::FILE_NAME,
        "file": l.path.display().to_string(),
        "source": source,
        "reason": reason,
        "content": to_json_value(&l.value.to_json()),
    })
}

fn config_heading<T: ConfigFile>(out: &mut dyn Write, l: &Loaded<T>) -> std::io::Result<()> {
    let (source, reason) = source_text(&l.source);
    let how = match (source, reason) {
        ("main", _) => String::new(),
        ("missing", _) => " (missing)".to_string(),
        (s, Some(r)) => format!(" ({s}: {r})"),
        (s, None) => format!(" ({s})"),
    };
    writeln!(out, "\n{}{how}", l.path.display())
}

fn config(a: &ConfigArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let dir = if a.store.join("config").is_dir() {
        a.store.join("config")
    } else {
        a.store.clone()
    };
    if !dir.is_dir() {
        anyhow::bail!("{}: no config/ folder", a.store.display());
    }
    let offsets = load::<ConsumerOffsets>(&dir)?;
    let delay = load::<DelayOffsets>(&dir)?;
    let topics = load::<TopicConfigs>(&dir)?;
    let groups = load::<SubscriptionGroups>(&dir)?;
    let mut status = ExitStatus::Success;
    for s in [
        &offsets.source,
        &delay.source,
        &topics.source,
        &groups.source,
    ] {
        if matches!(s, ConfigSource::Backup { .. } | ConfigSource::Empty { .. }) {
            status = ExitStatus::Findings;
        }
    }
    if a.json {
        json_line(out, &config_json(&offsets))?;
        json_line(out, &config_json(&delay))?;
        json_line(out, &config_json(&topics))?;
        json_line(out, &config_json(&groups))?;
        let sources = [
            &offsets.source,
            &delay.source,
            &topics.source,
            &groups.source,
        ];
        let count = |f: fn(&ConfigSource) -> bool| sources.iter().filter(|s| f(s)).count();
        output::summary_line(
            out,
            "dump config",
            &json!({
                "files": sources.len(),
                "missing": count(|s| matches!(s, ConfigSource::Missing)),
                "from_backup": count(|s| matches!(s, ConfigSource::Backup { .. })),
                "empty": count(|s| matches!(s, ConfigSource::Empty { .. })),
            }),
        )?;
        return Ok(status);
    }
    config_heading(out, &offsets)?;
    writeln!(
        out,
        "{:<40} {:<28} {:>5} {:>12}",
        "TOPIC", "GROUP", "QUEUE", "OFFSET"
    )?;
    for (topic, group, queues) in offsets.value.iter() {
        for (q, o) in queues {
            writeln!(out, "{topic:<40} {group:<28} {q:>5} {o:>12}")?;
        }
    }
    config_heading(out, &delay)?;
    writeln!(out, "{:>5} {:>12}", "LEVEL", "OFFSET")?;
    for (level, o) in delay.value.iter() {
        writeln!(out, "{level:>5} {o:>12}")?;
    }
    config_heading(out, &topics)?;
    writeln!(
        out,
        "{:<40} {:>5} {:>5} {:>4} {:>5} {:<10} {:>7}",
        "TOPIC", "READ", "WRITE", "PERM", "ORDER", "FILTER", "SYSFLAG"
    )?;
    for t in topics.value.iter() {
        writeln!(
            out,
            "{:<40} {:>5} {:>5} {:>4} {:>5} {:<10} {:>7}",
            t.topic_name,
            t.read_queue_nums,
            t.write_queue_nums,
            t.perm,
            t.order,
            t.topic_filter_type.as_str(),
            t.topic_sys_flag
        )?;
    }
    config_heading(out, &groups)?;
    writeln!(
        out,
        "{:<32} {:>7} {:>9} {:>12} {:>9} {:>9}",
        "GROUP", "CONSUME", "BROADCAST", "RETRY_QUEUES", "RETRY_MAX", "BROKER_ID"
    )?;
    for g in groups.value.iter() {
        writeln!(
            out,
            "{:<32} {:>7} {:>9} {:>12} {:>9} {:>9}",
            g.group_name,
            g.consume_enable,
            g.consume_broadcast_enable,
            g.retry_queue_nums,
            g.retry_max_times,
            g.broker_id
        )?;
    }
    let known = [
        ConsumerOffsets::FILE_NAME,
        DelayOffsets::FILE_NAME,
        TopicConfigs::FILE_NAME,
        SubscriptionGroups::FILE_NAME,
    ];
    let mut others: Vec<String> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !known.iter().any(|k| {
                n == k
                    || n.strip_prefix(k)
                        .is_some_and(|s| s == ".bak" || s == ".tmp")
            })
        })
        .collect();
    others.sort();
    if !others.is_empty() {
        writeln!(
            out,
            "\nother files in {}: {}",
            dir.display(),
            others.join(", ")
        )?;
    }
    Ok(status)
}
