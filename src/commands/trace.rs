//! `rmqstore trace`: what the clients' message traces say about messages: who sent them and
//! when, where they were stored, which groups consumed them with what result, how their
//! transactions ended (`engine::trace`). One `trace` line per traced message, then a summary,
//! on stdout. Exit status 1 when nothing is traced, also when the store has no trace topic.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::names;
use super::output::{self, format_time, parse_time_arg};
use super::{ExitStatus, GeometryArgs};
use crate::engine::consume::trace::{
    find_traces, Lookup, MessageTrace, TraceError, TraceQuery, TraceReport, TraceTarget,
};
use crate::engine::store::reader::Reader;
use crate::engine::Store;
use crate::format::trace::DEFAULT_TRACE_TOPIC;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["msg_id", "key", "topic"])))]
pub struct TraceArgs {
    /// The store root.
    pub store: PathBuf,
    /// A client message id (UNIQ_KEY), or the offset message id of a message in this store.
    #[arg(long, short = 'i', value_name = "ID")]
    pub msg_id: Option<String>,
    /// A key (KEYS element) of the traced messages.
    #[arg(long, short = 'k', value_name = "K")]
    pub key: Option<String>,
    /// The messages sent to a topic since --since.
    #[arg(long, short = 't', value_name = "T", requires = "since")]
    pub topic: Option<String>,
    /// With --topic: sends at or after this time (epoch ms or ISO 8601, local time without a
    /// zone).
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg, requires = "topic")]
    pub since: Option<i64>,
    /// The topic the clients wrote their traces to.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_TRACE_TOPIC)]
    pub trace_topic: String,
    /// JSON Lines: one `trace` object per traced message, then a `summary`.
    #[arg(long, short = 'J')]
    pub json: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

/// The fields of `trace`'s summary line.
#[derive(Debug, Serialize)]
struct Summary<'a> {
    trace_topic: &'a str,
    trace_topic_exists: bool,
    lookup: Option<Lookup>,
    messages: usize,
    trace_messages: u64,
    records: u64,
    undecodable: u64,
    capped: bool,
}

pub fn run(a: &TraceArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    if let Some(id) = &a.msg_id {
        names::ensure_message_id(id)?;
    }
    let target = match (&a.msg_id, &a.key, &a.topic, a.since) {
        (Some(id), _, _, _) => TraceTarget::MsgId(id.clone()),
        (_, Some(k), _, _) => TraceTarget::Key(k.clone()),
        (_, _, Some(t), Some(since)) => TraceTarget::Topic {
            topic: t.clone(),
            since,
        },
        _ => anyhow::bail!("say what to trace: --msg-id ID, --key K, or --topic T --since TIME"),
    };
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let reader = Reader::new(&store);
    let q = TraceQuery {
        trace_topic: a.trace_topic.clone(),
        target,
        max_scanned: None,
    };
    let mut out = BufWriter::new(out);
    let report = match find_traces(&reader, &q) {
        Ok(r) => r,
        Err(e @ TraceError::UnknownTraceTopic { .. }) => {
            output::say(&e.to_string());
            if a.json {
                output::summary_line(
                    &mut out,
                    "trace",
                    &Summary {
                        trace_topic: &a.trace_topic,
                        trace_topic_exists: false,
                        lookup: None,
                        messages: 0,
                        trace_messages: 0,
                        records: 0,
                        undecodable: 0,
                        capped: false,
                    },
                )?;
            }
            out.flush()?;
            return Ok(ExitStatus::Findings);
        }
        Err(e) => return Err(e.into()),
    };
    print(&mut out, a.json, &report)?;
    out.flush()?;
    for p in &report.problems {
        output::note(&p.to_string());
    }
    if report.undecodable > report.problems.len() as u64 {
        output::note(&format!(
            "{} more records did not decode",
            report.undecodable - report.problems.len() as u64
        ));
    }
    if report.traces.is_empty() {
        output::say(&format!(
            "nothing in {} is about {} ({} trace messages read)",
            report.trace_topic,
            match &q.target {
                TraceTarget::MsgId(id) => format!("message id {id}"),
                TraceTarget::Key(k) => format!("key {k:?}"),
                TraceTarget::Topic { topic, since } =>
                    format!("sends to {topic} since {}", format_time(*since)),
            },
            report.trace_messages
        ));
        return Ok(ExitStatus::Findings);
    }
    Ok(ExitStatus::Success)
}

fn print(out: &mut dyn Write, json: bool, r: &TraceReport) -> anyhow::Result<()> {
    for t in &r.traces {
        if json {
            output::typed_line(out, "trace", t)?;
        } else {
            human(out, t)?;
        }
    }
    let s = Summary {
        trace_topic: &r.trace_topic,
        trace_topic_exists: true,
        lookup: Some(r.lookup),
        messages: r.traces.len(),
        trace_messages: r.trace_messages,
        records: r.records,
        undecodable: r.undecodable,
        capped: r.capped,
    };
    if json {
        output::summary_line(out, "trace", &s)?;
    } else {
        let how = match r.lookup {
            Lookup::Index => "found through the index",
            Lookup::ConsumeQueue => "read through its consume queue",
            Lookup::Commitlog => "read from the commitlog (no consume queue)",
        };
        writeln!(
            out,
            "-- {} traced message(s); {} trace message(s) of {} {how}, {} records, {} undecodable{}",
            s.messages,
            s.trace_messages,
            s.trace_topic,
            s.records,
            s.undecodable,
            if s.capped { " (stopped early: more may exist)" } else { "" }
        )?;
    }
    Ok(())
}

fn or_dash(s: Option<&str>) -> &str {
    s.unwrap_or("-")
}

/// One traced message as text: a heading, then one line per event.
pub fn human(out: &mut dyn Write, t: &MessageTrace) -> std::io::Result<()> {
    writeln!(
        out,
        "message {}  topic {}  tags {}  keys {}",
        t.msg_id,
        or_dash(t.topic.as_deref()),
        or_dash(t.tags.as_deref()),
        if t.keys.is_empty() {
            "-".to_string()
        } else {
            t.keys.join(" ")
        }
    )?;
    for line in t.event_lines(&format_time) {
        writeln!(out, "  {line}")?;
    }
    writeln!(out)
}
