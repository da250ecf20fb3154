//! `rmqstore query`: find messages the way the broker and its admin tools do.
//!
//! - `--topic T --key K [--begin] [--end] [--max N]`: through the index files, as the broker's
//!   `queryMessage` (at most 64, offsets ascending; index hash collisions dropped as the client
//!   does); `--scan` walks the commitlog instead.
//! - `--msg-id ID`: an offset message id (store host + commitlog offset, read directly and the
//!   host checked), else a client UNIQ_KEY looked up in the index under every topic (or `--topic`).
//! - `--topic T --queue Q --offset N [--count N]`: through the consume queue.
//! - `--topic T [--queue Q] --begin TIME [--end TIME]`: the messages stored in a time window,
//!   entered by binary search over consume queue units by store time; the summary also gives
//!   what the broker's `getOffsetInQueueByTime(begin)` answers (4.9 or 5.x rules, `--broker`).
//!
//! `--tag EXPR` filters all of these. Output is the `dump commitlog` output (table or JSON
//! Lines, then a summary line on stderr). A message whose body fails its CRC is printed with a
//! warning on stderr, and its offset is in the summary's `body_crc_failed`. Exit status 1 when
//! nothing is found or a body printed fails its CRC.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use serde_json::{json, Value};

use super::line_format::{LineArgs, Style};
use super::message_printer::MessagePrinter;
use super::names;
use super::output::{self, parse_time_arg, BodyMode};
use super::{ExitStatus, GeometryArgs};
use crate::engine::filter::TagFilter;
use crate::engine::store::reader::{Hit, Reader, WindowQuery};
use crate::engine::store::version::{detect_broker_version, BrokerVersion};
use crate::engine::Store;

use super::engine_args::BrokerArg;

/// Default and largest `--max` for index lookups (`maxMsgsNumBatch`).
const INDEX_MAX: usize = 64;

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The store root.
    pub store: PathBuf,
    /// Topic (needed for --key, --offset and time windows; limits a UNIQ_KEY lookup).
    #[arg(long, short = 't', value_name = "T")]
    pub topic: Option<String>,
    /// A message key (KEYS element or UNIQ_KEY) looked up under --topic.
    #[arg(long, short = 'k', value_name = "K", conflicts_with = "msg_id")]
    pub key: Option<String>,
    /// An offset message id or a client UNIQ_KEY.
    #[arg(long, short = 'i', value_name = "ID")]
    pub msg_id: Option<String>,
    /// Queue id (with --offset, or to limit a time window to one queue).
    #[arg(long, short = 'q', value_name = "Q")]
    pub queue: Option<i32>,
    /// Queue offset to read from (with --topic and --queue).
    #[arg(long, short = 'o', value_name = "N", conflicts_with_all = ["key", "msg_id"],
          allow_negative_numbers = true, value_parser = super::output::parse_offset_arg::<u64>)]
    pub offset: Option<u64>,
    /// Messages to read from --offset (default 1), or the first N of a --begin time window
    /// (as --max).
    #[arg(long, short = 'c', value_name = "N", conflicts_with_all = ["key", "msg_id"])]
    pub count: Option<usize>,
    /// Start of the time window: epoch ms or an ISO 8601 date/date-time (local time without a zone).
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    pub begin: Option<i64>,
    /// End of the time window (inclusive).
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    pub end: Option<i64>,
    /// Most messages to return. Index lookups keep the newest N (the index is walked newest
    /// first, as the broker does; at most 64, its maxMsgsNumBatch); time windows and scans keep
    /// the first N in commitlog order. Messages are printed in commitlog order.
    #[arg(long, value_name = "N")]
    pub max: Option<usize>,
    /// Search the commitlog instead of the index (for a missing or broken index).
    #[arg(long)]
    pub scan: bool,
    /// Tag expression: `TagA || TagB`, or `*`.
    #[arg(long, value_name = "EXPR")]
    pub tag: Option<String>,
    /// Broker rules for time lookups (default: guessed from the store).
    #[arg(long, value_enum)]
    pub broker: Option<BrokerArg>,
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

pub fn run(a: &QueryArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let filter = match &a.tag {
        Some(t) => TagFilter::parse(t)?,
        None => TagFilter::all(),
    };
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let reader = Reader::new(&store);
    let mut out = BufWriter::with_capacity(1 << 16, out);
    if let Some(t) = &a.topic {
        names::ensure_known(
            "topic",
            t,
            reader.topics().iter().map(String::as_str),
            "this store's consume queues or config/topics.json",
        )?;
    }
    if let Some(id) = &a.msg_id {
        names::ensure_message_id(id)?;
    }
    let mut notes: Vec<String> = Vec::new();
    let (hits, summary) = if let Some(key) = &a.key {
        by_key(a, &reader, key, &filter, &mut notes)?
    } else if let Some(id) = &a.msg_id {
        by_msg_id(a, &reader, id, &filter, &mut notes)?
    } else if let Some(offset) = a.offset {
        by_queue_offset(a, &reader, offset, &filter, &mut notes)?
    } else if let Some(begin) = a.begin {
        by_time(a, &reader, begin, &filter)?
    } else {
        anyhow::bail!(
            "say what to look for: --topic T --key K, --msg-id ID, --topic T --queue Q --offset N, \
             or --topic T --begin TIME"
        );
    };
    let mut printer = MessagePrinter::new(&mut out, Style::from_flags(a.json, &a.lines)?, a.body);
    let mut unreadable = 0u64;
    // Bodies whose CRC fails (an empty body is not checked, as the broker's recovery does not):
    // printed, and said on stderr and in the summary.
    let mut crc_failed: Vec<u64> = Vec::new();
    for h in &hits {
        match reader.message_at(h.offset) {
            Ok(Some(r)) => {
                let m = &r.message;
                if !m.body.is_empty() && !m.body_crc_ok() {
                    crc_failed.push(h.offset);
                    output::say(&format!(
                        "warning: the body of the message at commitlog offset {} fails its CRC \
                         (BODYCRC {}, the body's is {}): it is damaged (see verify)",
                        h.offset,
                        m.body_crc,
                        m.computed_body_crc()
                    ));
                }
                printer.print(m, r.file)?
            }
            Ok(None) => unreadable += 1,
            Err(e) => {
                unreadable += 1;
                notes.push(e.to_string());
            }
        }
    }
    if unreadable > 0 {
        notes.push(format!(
            "{unreadable} record(s) could not be read at the offsets found"
        ));
    }
    let found = printer.printed();
    let mut summary = summary;
    if let Value::Object(m) = &mut summary {
        m.insert("messages".into(), json!(found));
        m.insert("body_crc_failed".into(), json!(crc_failed));
        if let Some(t) = &a.tag {
            m.insert("tag".into(), json!(t));
        }
    }
    // notes first: the summary is the last line of stderr (docs/json.md)
    for n in &notes {
        output::note(n);
    }
    printer.summary("query", summary)?;
    out.flush()?;
    // A damaged body is a finding, as `dump` exits 1 on damage it met.
    Ok(if found > 0 && crc_failed.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Findings
    })
}

type Found = (Vec<Hit>, Value);

fn keep(reader: &Reader<'_>, offsets: &[u64], filter: &TagFilter) -> Vec<Hit> {
    offsets
        .iter()
        .copied()
        .filter(|&o| {
            filter.is_all()
                || reader
                    .message_at(o)
                    .ok()
                    .flatten()
                    .is_some_and(|r| filter.matches_message(&r.message))
        })
        .map(|offset| Hit {
            offset,
            queue_offset: None,
        })
        .collect()
}

fn window(a: &QueryArgs) -> (i64, i64) {
    (a.begin.unwrap_or(0), a.end.unwrap_or(i64::MAX))
}

fn by_key(
    a: &QueryArgs,
    reader: &Reader<'_>,
    key: &str,
    filter: &TagFilter,
    notes: &mut Vec<String>,
) -> anyhow::Result<Found> {
    let (begin, end) = window(a);
    if a.scan {
        let max = a.max.unwrap_or(usize::MAX);
        let r = reader.scan_for_key(a.topic.as_deref(), key, begin, end, max);
        if r.capped {
            output::note_truncated(&format!("--max {max} reached: more messages may match"));
        }
        notes.extend(r.problems.iter().cloned());
        let hits = keep(reader, &r.offsets, filter);
        return Ok((
            hits,
            json!({
                "query": "key", "method": "commitlog scan", "topic": a.topic, "key": key,
                "records_scanned": r.records_scanned, "bytes_scanned": r.bytes_scanned,
                "truncated": r.capped,
            }),
        ));
    }
    let Some(topic) = a.topic.as_deref() else {
        anyhow::bail!("--key needs --topic (the index holds topic#key), or --scan");
    };
    let max = a.max.unwrap_or(INDEX_MAX);
    if max > INDEX_MAX {
        notes.push(format!(
            "the broker returns at most {INDEX_MAX} messages per index lookup (maxMsgsNumBatch); use --scan for more"
        ));
    }
    if reader.index_file_count() == 0 {
        notes.push("the store has no usable index files: try --scan".into());
    }
    notes.extend(reader.index_problems().iter().cloned());
    let r = reader.query_message(topic, key, max.min(i32::MAX as usize) as i32, begin, end);
    if r.capped {
        output::note_truncated(&format!(
            "--max {} reached: these are the newest; the index may hold older messages for this key (narrow --begin/--end, or --scan)",
            max.min(INDEX_MAX)
        ));
    }
    if !r.collisions.is_empty() {
        notes.push(format!(
            "{} index hit(s) were hash collisions of other keys, dropped as the client does",
            r.collisions.len()
        ));
    }
    if (a.begin.is_some() || a.end.is_some()) && !r.capped {
        let all = reader.query_message(topic, key, max.min(INDEX_MAX) as i32, 0, i64::MAX);
        let outside = all.matching().len().saturating_sub(r.matching().len());
        if outside > 0 {
            output::note_truncated(&format!(
                "the time window left out {outside} message(s) with this key"
            ));
        }
    }
    let hits = keep(reader, &r.matching(), filter);
    let stored_outside = hits
        .iter()
        .filter(|h| {
            reader
                .message_at(h.offset)
                .ok()
                .flatten()
                .is_some_and(|m| !(begin..=end).contains(&m.message.store_timestamp))
        })
        .count();
    if stored_outside > 0 {
        notes.push(format!(
            "{stored_outside} message(s) found were stored outside --begin/--end: the index \
             compares whole seconds counted from each index file's begin time, as the broker does"
        ));
    }
    Ok((
        hits,
        json!({
            "query": "key", "method": "index", "topic": topic, "key": key,
            "index_files": r.index_files, "commitlog_offsets": r.offsets,
            "collisions": r.collisions.len(), "truncated": r.capped,
            "index_last_update_timestamp": r.index_last_update_timestamp,
            "index_last_update_commitlog_offset": r.index_last_update_phy_offset,
        }),
    ))
}

fn by_msg_id(
    a: &QueryArgs,
    reader: &Reader<'_>,
    id: &str,
    filter: &TagFilter,
    notes: &mut Vec<String>,
) -> anyhow::Result<Found> {
    let mut offset_note = None;
    if let Some(l) = reader.by_offset_msg_id(id) {
        if l.host_matches() {
            let o = l.offset as u64;
            return Ok((
                keep(reader, &[o], filter),
                json!({
                    "query": "msg_id", "method": "offset message id", "store_host": l.host,
                    "commitlog_offset": l.offset, "truncated": false,
                }),
            ));
        }
        // said only when the id is not found as a UNIQ_KEY either
        offset_note = Some(match &l.record {
            Some(r) => format!(
                "as an offset message id, {id} names store host {} at offset {}, but the record there was stored by {}: not this broker's message",
                l.host, l.offset, r.message.store_host
            ),
            None => format!(
                "as an offset message id, {id} names offset {} (store host {}), where no record starts",
                l.offset, l.host
            ),
        });
    }
    let max = a.max.unwrap_or(INDEX_MAX);
    if a.scan {
        let r = reader.scan(max, |m| {
            m.uniq_key().as_deref() == Some(id) && a.topic.as_deref().is_none_or(|t| m.topic == t)
        });
        if r.capped {
            output::note_truncated(&format!("--max {max} reached: more messages may match"));
        }
        notes.extend(r.problems.iter().cloned());
        if r.offsets.is_empty() {
            notes.extend(offset_note);
        }
        return Ok((
            keep(reader, &r.offsets, filter),
            json!({
                "query": "msg_id", "method": "commitlog scan for UNIQ_KEY",
                "records_scanned": r.records_scanned, "truncated": r.capped,
            }),
        ));
    }
    if reader.index_file_count() == 0 {
        notes.push("the store has no usable index files: try --scan".into());
    }
    let r = reader.by_uniq_key(id, a.topic.as_deref(), max.min(INDEX_MAX) as i32);
    if r.capped {
        output::note_truncated(&format!(
            "--max {} reached under some topic: more messages may carry this UNIQ_KEY",
            max.min(INDEX_MAX)
        ));
    }
    if r.offsets.is_empty() {
        notes.extend(offset_note);
    }
    let searched = match &a.topic {
        Some(t) => vec![t.clone()],
        None => reader.topics().to_vec(),
    };
    Ok((
        keep(reader, &r.offsets, filter),
        json!({
            "query": "msg_id", "method": "index (UNIQ_KEY)", "topics_searched": searched.len(),
            "index_files": r.index_files, "truncated": r.capped,
        }),
    ))
}

fn by_queue_offset(
    a: &QueryArgs,
    reader: &Reader<'_>,
    offset: u64,
    filter: &TagFilter,
    notes: &mut Vec<String>,
) -> anyhow::Result<Found> {
    let (Some(topic), Some(queue)) = (a.topic.as_deref(), a.queue) else {
        anyhow::bail!("--offset needs --topic and --queue");
    };
    let count = a.count.unwrap_or(1);
    let Some(cq) = reader.store().queue(topic, queue) else {
        let ids: Vec<String> = reader
            .store()
            .topic_queues(topic)
            .map(|q| q.queue_id.to_string())
            .collect();
        anyhow::bail!(
            "unknown queue {topic}/{queue}: the topic's consume queues are {}",
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(", ")
            }
        );
    };
    let min = cq.min_offset(reader.store().commitlog.min_offset())?;
    let max = cq.max_offset()?;
    if offset < min || offset >= max {
        notes.push(format!(
            "queue offset {offset} is outside {topic}/{queue}'s range [{min}, {max})"
        ));
    }
    let (hits, more) = reader.by_queue_offset(topic, queue, offset, count, filter)?;
    if more {
        output::note_truncated(&format!(
            "--count {count} reached: more messages follow in {topic}/{queue}"
        ));
    }
    Ok((
        hits,
        json!({
            "query": "queue offset", "method": "consume queue", "topic": topic, "queue_id": queue,
            "queue_offset": offset, "min_offset": min, "max_offset": max, "truncated": more,
        }),
    ))
}

fn by_time(
    a: &QueryArgs,
    reader: &Reader<'_>,
    begin: i64,
    filter: &TagFilter,
) -> anyhow::Result<Found> {
    let Some(topic) = a.topic.as_deref() else {
        anyhow::bail!("--begin needs --topic (or --key for an index lookup)");
    };
    let end = a.end.unwrap_or(i64::MAX);
    let (version, why) = match a.broker {
        Some(BrokerArg::V4_9) => (BrokerVersion::V4_9, "--broker".to_string()),
        Some(BrokerArg::V5) => (BrokerVersion::V5, "--broker".to_string()),
        None => detect_broker_version(reader.store()),
    };
    let max = a.max.into_iter().chain(a.count).min().unwrap_or(usize::MAX);
    let window = WindowQuery {
        topic,
        queue_id: a.queue,
        begin,
        end,
        version,
        max,
    };
    let queues = reader.time_window(&window, filter)?;
    if queues.is_empty() {
        anyhow::bail!(
            "no consume queue for {topic}{}",
            a.queue.map(|q| format!("/{q}")).unwrap_or_default()
        );
    }
    let mut hits: Vec<Hit> = queues.iter().flat_map(|q| q.hits.iter().copied()).collect();
    hits.sort_by_key(|h| h.offset);
    let capped = queues.iter().any(|q| q.capped) || hits.len() > max;
    hits.truncate(max);
    if capped {
        output::note_truncated(&format!(
            "{} {max} reached: more messages are in the window",
            if a.max == Some(max) {
                "--max"
            } else {
                "--count"
            }
        ));
    }
    let after: Vec<String> = queues
        .iter()
        .filter(|q| q.more_after_end)
        .map(|q| format!("{}/{}", q.topic, q.queue_id))
        .collect();
    if a.end.is_some() && !after.is_empty() {
        output::note_truncated(&format!(
            "the time window ends before the newest messages of {}",
            after.join(", ")
        ));
    }
    let per_queue: Vec<Value> = queues
        .iter()
        .map(|q| {
            json!({
                "topic": q.topic, "queue_id": q.queue_id,
                "offset_in_queue_by_time": q.broker_offset, "start_offset": q.start,
                "messages": q.hits.len(), "more_after_end": q.more_after_end,
            })
        })
        .collect();
    Ok((
        hits,
        json!({
            "query": "time", "method": "consume queue binary search by store time",
            "broker_rules": version, "broker_rules_from": why,
            "begin_timestamp": begin, "end_timestamp": a.end, "queues": per_queue,
            "truncated": capped,
        }),
    ))
}
