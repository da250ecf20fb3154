//! `rmqstore send`: recovered messages handed back to a live cluster, as a producer sent them,
//! resumable through a journal (`send::run` does the work, `send::translate` says what a
//! message keeps).
//!
//! The source is a store (with `export`'s selection `--group`, or `dump`/`query`'s `--topic`,
//! `--queue`, `--begin/--end`, `--key`, `--msg-id`; all of it by default), a repair folder's
//! salvage store, or an export file. `--dry-run` prints the plan per target topic and queue (and
//! broker, when a cluster answers) and sends nothing. With `--json`: a `send` line per message
//! (`send_plan` lines per queue with `--dry-run`), then a `summary`, on stdout.
//!
//! Exit status: 0 everything selected was sent; 1 some messages were refused, stored without
//! SEND_OK, left in doubt, damaged in the source, or the source could not be read to its end (all
//! listed); 2 could not run, stopped by a failure, or interrupted (run it again: the journal skips
//! what was sent).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Args;
use serde::Serialize;
use serde_json::json;

use super::client_dir::ClientDirArgs;
use super::output::{self, parse_time_arg};
use super::{interrupt, ExitStatus, GeometryArgs};
use crate::engine::consume::export::Include;
use crate::send::journal::default_path;
use crate::send::producer::AclKeys;
use crate::send::run::{
    execute, DryRun, Event, MessageOutcome, Outcome, QueueChoice, Request, RunOptions, Sent,
    Status, Target,
};
use crate::send::source::{PassedOver, Selection, Source, SourceSpec};
use crate::send::translate::TranslateOptions;

#[derive(Debug, Args)]
pub struct SendArgs {
    /// A store root, a repair folder (or its salvaged/ store), or an export file (JSON Lines).
    /// Only read.
    pub source: PathBuf,
    /// Name server(s) of the target cluster: host:port, several separated by `;`.
    #[arg(long, value_name = "ADDR[;ADDR]", required_unless_present_any = ["broker", "dry_run"])]
    pub namesrv: Option<String>,
    /// Send to this broker directly (host:port) instead of routing through a name server; its
    /// topics must exist there (or --create-topics).
    #[arg(long, value_name = "ADDR", conflicts_with = "namesrv")]
    pub broker: Option<String>,
    /// What a consumer group has not consumed (as `export --group`).
    #[arg(long, short = 'g', value_name = "G")]
    pub group: Option<String>,
    /// With --group: also retry, delayed, dlq, transactions, timers (comma-separated, or all),
    /// as `export --include`.
    #[arg(long, value_name = "LIST", default_value = "")]
    pub include: Include,
    /// Only this topic: the records stored in it and those parked for it (delayed, timer, half
    /// messages); with --group, the group's topic to export.
    #[arg(long, short = 't', value_name = "T")]
    pub topic: Option<String>,
    /// Only this queue of --topic.
    #[arg(long, short = 'q', value_name = "Q", requires = "topic")]
    pub queue: Option<i32>,
    /// First source position sent: a commitlog offset (a store), a line number (a file).
    #[arg(long, value_name = "POS")]
    pub begin: Option<u64>,
    /// Source positions from this one on are not sent.
    #[arg(long, value_name = "POS")]
    pub end: Option<u64>,
    /// Only messages with this key (a KEYS element or the UNIQ_KEY).
    #[arg(long, short = 'k', value_name = "K")]
    pub key: Option<String>,
    /// Only the message with this UNIQ_KEY or offset message id.
    #[arg(long, short = 'i', value_name = "ID")]
    pub msg_id: Option<String>,
    #[command(flatten)]
    pub client: ClientDirArgs,
    /// %RETRY% and %DLQ% copies stay on their topic (default: they go to their original topic,
    /// RETRY_TOPIC).
    #[arg(long)]
    pub keep_retry_topics: bool,
    /// Delayed and 5.x timer messages go at once (default: they keep what remains of their
    /// delay).
    #[arg(long)]
    pub deliver_now: bool,
    /// Send undecided transaction half messages as normal messages (default: listed, not sent).
    #[arg(long)]
    pub send_undecided: bool,
    /// Send what goes to topic OLD to NEW instead (repeatable).
    #[arg(long, value_name = "OLD=NEW", value_parser = parse_topic_map)]
    pub topic_map: Vec<(String, String)>,
    /// Set property NAME to VALUE on every message, e.g. where it was recovered from
    /// (repeatable).
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_mark)]
    pub mark: Vec<(String, String)>,
    /// The time remaining delays are measured from (default: now); a delayed or timer message
    /// keeps what remained at that time, counted from when it is sent.
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    pub now: Option<i64>,
    /// Non-orderly topics: let the producer pick queues (default: a message keeps its queue).
    #[arg(long)]
    pub spread: bool,
    /// Send to an orderly topic whose queue count differs from the source's anyway (queue ids
    /// folded onto the target's count).
    #[arg(long)]
    pub reorder: bool,
    /// Create the topics the cluster lacks, with the source's queue count, perm and order flag.
    #[arg(long)]
    pub create_topics: bool,
    /// Count FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE as sent (the broker
    /// stored the message; default: listed, and sent again by the next run).
    #[arg(long)]
    pub accept_flush_timeout: bool,
    /// Batches in flight at once (one per queue at most).
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub in_flight: usize,
    /// Messages per second, at most (`1000` or `1000/s`).
    #[arg(long, value_name = "N/s", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Messages per batch, at most (the batch body also stays within 4 MiB).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub batch: usize,
    /// Batch messages born at different times (faster; each batch carries the born time of its
    /// first message). Default: a batch holds messages born in the same millisecond, so every
    /// message keeps its born time.
    #[arg(long)]
    pub loose_born_time: bool,
    /// The journal of acknowledged messages (default: beside the source, <source>.send-journal;
    /// never inside a store). Run again with the same journal to send the rest.
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// ACL access key (plain ACL, signed as AclClientRPCHook does).
    #[arg(long, value_name = "KEY", requires = "secret_key")]
    pub access_key: Option<String>,
    /// ACL secret key.
    #[arg(long, value_name = "KEY", requires = "access_key")]
    pub secret_key: Option<String>,
    /// Print what would be sent, per target topic and queue, and send nothing (no cluster is
    /// needed; given one, the queue choice is checked against its routes).
    #[arg(long)]
    pub dry_run: bool,
    /// JSON Lines: a `send` line per message (`send_plan` per queue with --dry-run), then a
    /// summary.
    #[arg(long, short = 'J')]
    pub json: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

fn parse_pair(s: &str, what: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_string(), b.to_string())),
        _ => Err(format!("expected {what}")),
    }
}

fn parse_topic_map(s: &str) -> Result<(String, String), String> {
    let (old, new) = parse_pair(s, "OLD=NEW")?;
    crate::format::layout::check_topic(&new).map_err(|e| format!("{new}: {e}"))?;
    Ok((old, new))
}

fn parse_mark(s: &str) -> Result<(String, String), String> {
    let (name, value) = parse_pair(s, "NAME=VALUE")?;
    if s.contains(['\u{1}', '\u{2}']) {
        return Err("a property may not hold the characters 1 and 2 (the separators)".into());
    }
    Ok((name, value))
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let n = s.strip_suffix("/s").unwrap_or(s);
    match n.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!("{s:?}: expected messages per second, e.g. 1000/s")),
    }
}

/// One `send` line (docs/json.md).
#[derive(Serialize)]
struct SendLine<'a> {
    key: u64,
    seq: u64,
    found: &'a crate::send::run::Found,
    uniq_key: Option<&'a str>,
    topic: Option<&'a str>,
    queue_id: Option<i32>,
    status: &'static str,
    broker: Option<&'a str>,
    queue_offset: Option<i64>,
    offset_msg_id: Option<&'a str>,
    send_status: Option<crate::send::SendStatus>,
    delay: Option<crate::send::translate::Delay>,
    why: Option<&'a str>,
    possible_duplicate: bool,
}

impl<'a> SendLine<'a> {
    fn of(o: &'a MessageOutcome) -> Self {
        SendLine {
            key: o.key,
            seq: o.seq,
            found: &o.found,
            uniq_key: o.uniq_key.as_deref(),
            topic: o.topic.as_deref(),
            queue_id: o.acked.as_ref().map(|a| a.queue_id).or(o.queue_id),
            status: status_word(o),
            broker: o.acked.as_ref().map(|a| a.broker.as_str()),
            queue_offset: o.acked.as_ref().map(|a| a.queue_offset),
            offset_msg_id: o.acked.as_ref().map(|a| a.offset_msg_id.as_str()),
            send_status: o.acked.as_ref().map(|a| a.status),
            delay: o.delay,
            why: o.why.as_deref(),
            possible_duplicate: o.possible_duplicate,
        }
    }

    /// An undecided message a dry run lists.
    fn listed(l: &'a crate::send::run::Listed) -> Self {
        SendLine {
            key: l.key,
            seq: l.seq,
            found: &l.found,
            uniq_key: l.uniq_key.as_deref(),
            topic: l.topic.as_deref(),
            queue_id: l.queue_id,
            status: "undecided",
            broker: None,
            queue_offset: None,
            offset_msg_id: None,
            send_status: None,
            delay: None,
            why: Some(&l.why),
            possible_duplicate: false,
        }
    }
}

pub fn run(a: &SendArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    // before any thread starts: Ctrl-C stops starting batches
    let stop = if a.dry_run {
        Arc::new(AtomicBool::new(false))
    } else {
        interrupt::stop_flag(
            "stopping: the batches in flight finish and are recorded in the journal (again to \
             quit at once); run the same command again to send the rest",
        )?
    };
    let group = a.client.group(a.group.as_deref())?;
    let source = Source::open(&SourceSpec {
        path: a.source.clone(),
        geometry: a.geometry.inputs()?,
        selection: Selection {
            group,
            include: a.include,
            topic: a.topic.clone(),
            queue: a.queue,
            begin: a.begin,
            end: a.end,
            key: a.key.clone(),
            msg_id: a.msg_id.clone(),
            client_dir: a.client.client_dir.clone(),
            broker_name: a.client.broker_name.clone(),
        },
        now: a.now,
    })?;
    for n in source.notes() {
        output::note(n);
    }
    let journal = match &a.journal {
        Some(j) => j.clone(),
        None => default_path(&source.path)?,
    };
    let target =
        match (&a.namesrv, &a.broker) {
            (None, None) => None,
            (namesrv, broker) => Some(Target {
                namesrv: namesrv
                    .iter()
                    .flat_map(|n| n.split(';'))
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect(),
                broker: broker.clone(),
                acl: a.access_key.clone().zip(a.secret_key.clone()).map(
                    |(access_key, secret_key)| AclKeys {
                        access_key,
                        secret_key,
                    },
                ),
            }),
        };
    let options = RunOptions {
        translate: TranslateOptions {
            keep_retry_topics: a.keep_retry_topics,
            deliver_now: a.deliver_now,
            send_undecided: a.send_undecided,
            topic_map: a.topic_map.iter().cloned().collect(),
            marks: a.mark.clone(),
            delay_levels: source.delay_levels(),
            now: source.now(),
            clock: a.now.map(|_| chrono::Utc::now().timestamp_millis()),
            retry_max_times: source.retry_max_times(),
        },
        spread: a.spread,
        reorder: a.reorder,
        create_topics: a.create_topics,
        accept_flush_timeout: a.accept_flush_timeout,
        loose_born_time: a.loose_born_time,
        in_flight: a.in_flight.max(1),
        rate: a.rate,
        batch_messages: a.batch.clamp(1, 1024),
        ..Default::default()
    };
    let target_text = target.as_ref().map(Target::describe);
    let pb = progress(a.json || a.dry_run);
    let mut printed = Ok(());
    let outcome = {
        let mut events = |e: Event<'_>| match e {
            Event::Progress { done, total } => {
                pb.set_length(total);
                pb.set_position(done);
            }
            Event::Message(o) => {
                if printed.is_ok() {
                    printed = pb.suspend(|| print_outcome(out, o, a.json));
                }
            }
        };
        execute(
            Request {
                source: &source,
                target,
                journal,
                dry_run: a.dry_run,
                options,
                stop,
            },
            &mut events,
        )
    };
    pb.finish_and_clear();
    printed?;
    match outcome? {
        Outcome::DryRun(d) => print_dry_run(out, &source, &target_text, &d, a.json),
        Outcome::Sent(s) => print_sent(out, &source, &target_text, &s, a.json),
    }
}

/// A progress bar of messages on stderr, when it is a terminal.
fn progress(hidden: bool) -> indicatif::ProgressBar {
    if hidden || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "sending [{bar:40}] {pos}/{len} messages {per_sec} eta {eta}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

fn status_word(o: &MessageOutcome) -> &'static str {
    match o.status {
        Status::Sent => "sent",
        Status::Unconfirmed => "unconfirmed",
        Status::Refused => "refused",
        Status::Undecided => "undecided",
        Status::InDoubt => "in_doubt",
    }
}

/// A message's line: every one with `--json`; without, the ones not sent.
fn print_outcome(out: &mut dyn Write, o: &MessageOutcome, json: bool) -> anyhow::Result<()> {
    if json {
        return output::typed_line(out, "send", &SendLine::of(o));
    }
    if matches!(o.status, Status::Sent) {
        return Ok(());
    }
    writeln!(
        out,
        "{:<11} position {} ({} {}/{} queue offset {}{}){}: {}",
        status_word(o),
        o.key,
        o.found.source.as_str(),
        o.found.topic,
        o.found.queue_id,
        o.found.queue_offset,
        o.uniq_key
            .as_deref()
            .map(|u| format!(", UNIQ_KEY {u}"))
            .unwrap_or_default(),
        o.topic
            .as_deref()
            .map(|t| format!(" -> {t}"))
            .unwrap_or_default(),
        o.why.as_deref().unwrap_or("")
    )?;
    Ok(())
}

fn counts<K: Serialize>(m: &std::collections::BTreeMap<K, u64>) -> String {
    m.iter()
        .map(|(k, v)| {
            let k = serde_json::to_value(k)
                .ok()
                .and_then(|k| k.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("{k} {v}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn rule_text(c: &QueueChoice) -> String {
    match c {
        QueueChoice::Keep => "keep".into(),
        QueueChoice::Fold { queues } => format!("fold onto {queues}"),
        QueueChoice::Spread => "spread".into(),
        QueueChoice::Refused { .. } => "REFUSED".into(),
        QueueChoice::Unchecked => "unchecked".into(),
    }
}

fn print_dry_run(
    out: &mut dyn Write,
    source: &Source,
    target: &Option<String>,
    d: &DryRun,
    json: bool,
) -> anyhow::Result<ExitStatus> {
    let p = &d.plan;
    let refused: u64 = p
        .topics
        .iter()
        .filter(|(t, _)| matches!(d.choices.get(*t), Some(QueueChoice::Refused { .. })))
        .flat_map(|(_, tp)| tp.queues.values())
        .map(|q| q.messages)
        .sum();
    let broker_of = |topic: &str, queue: Option<i32>| -> Option<String> {
        let r = d.routes.get(topic)?;
        let q = queue?;
        r.queues
            .iter()
            .find(|pq| pq.queue_id == q)
            .map(|pq| pq.broker_name.clone())
    };
    if json {
        for (topic, t) in &p.topics {
            let choice = d
                .choices
                .get(topic)
                .cloned()
                .unwrap_or(QueueChoice::Unchecked);
            for (q, qp) in &t.queues {
                output::typed_line(
                    out,
                    "send_plan",
                    &json!({
                        "topic": topic,
                        "queue_id": q,
                        "target_queue_id": choice.apply(*q).ok().flatten(),
                        "broker": broker_of(topic, choice.apply(*q).ok().flatten()),
                        "messages": qp.messages,
                        "delayed": qp.delayed,
                        "skipped": qp.skipped,
                        "rule": choice,
                    }),
                )?;
            }
        }
        for l in &p.undecided {
            output::typed_line(out, "send", &SendLine::listed(l))?;
        }
        let extra = DryRunFields {
            missing_topics: &d.missing_topics,
            unchecked: d.unchecked.as_deref(),
            refused,
        };
        summary_json(
            out,
            source,
            target,
            &d.journal,
            p,
            &d.choices,
            None,
            Some(extra),
        )?;
    } else {
        writeln!(
            out,
            "plan: {} message(s) of {} ({}) to {}",
            p.messages,
            source.path.display(),
            serde_json::to_value(source.kind)?
                .as_str()
                .unwrap_or_default(),
            target.as_deref().unwrap_or("no cluster")
        )?;
        if let Some(why) = &d.unchecked {
            writeln!(
                out,
                "queue choice unchecked: {why}; queues as in the source"
            )?;
        }
        writeln!(
            out,
            "{:<32} {:>5} {:>9} {:>8} {:>8} {:<16} RULE",
            "TOPIC", "QUEUE", "MESSAGES", "DELAYED", "SKIPPED", "BROKER"
        )?;
        for (topic, t) in &p.topics {
            let choice = d
                .choices
                .get(topic)
                .cloned()
                .unwrap_or(QueueChoice::Unchecked);
            for (q, qp) in &t.queues {
                let target_q = choice.apply(*q).ok().flatten();
                writeln!(
                    out,
                    "{:<32} {:>5} {:>9} {:>8} {:>8} {:<16} {}",
                    topic,
                    match (q, target_q) {
                        (Some(a), Some(b)) if a != &b => format!("{a}>{b}"),
                        (Some(a), _) => a.to_string(),
                        (None, _) => "any".into(),
                    },
                    qp.messages,
                    qp.delayed,
                    qp.skipped,
                    broker_of(topic, target_q).unwrap_or_else(|| "-".into()),
                    rule_text(&choice)
                )?;
            }
            if let Some(QueueChoice::Refused { why }) = d.choices.get(topic) {
                writeln!(out, "  refused: {why}")?;
            }
        }
        writeln!(out, "found as: {}", counts(&p.by_source))?;
        writeln!(
            out,
            "delayed: {} keep their delay, {} are due and go at once",
            p.delayed, p.released
        )?;
        if !p.undecided.is_empty() {
            writeln!(
                out,
                "undecided transactions (listed, not sent; --send-undecided sends them): {}",
                p.undecided.len()
            )?;
            for l in &p.undecided {
                writeln!(
                    out,
                    "  position {} ({}/{}){}",
                    l.key,
                    l.found.topic,
                    l.found.queue_id,
                    l.uniq_key
                        .as_deref()
                        .map(|u| format!(", UNIQ_KEY {u}"))
                        .unwrap_or_default()
                )?;
            }
        }
        if !p.passed_over.is_empty() {
            writeln!(
                out,
                "passed over (not messages to send): {}",
                counts(&p.passed_over)
            )?;
        }
        if !d.missing_topics.is_empty() {
            writeln!(
                out,
                "missing on the cluster: {} (--create-topics creates them)",
                d.missing_topics.join(", ")
            )?;
        }
        if let Some(s) = &p.stopped {
            writeln!(
                out,
                "the source could not be read past position {}: {}",
                s.key, s.why
            )?;
        }
        writeln!(
            out,
            "journal: {} ({} acknowledged in an earlier run, skipped)",
            d.journal.display(),
            p.skipped
        )?;
        writeln!(out, "dry run: nothing was sent")?;
    }
    let unreadable = [PassedOver::Damaged, PassedOver::Unreadable]
        .iter()
        .any(|w| p.passed_over.contains_key(w));
    Ok(
        if refused > 0 || !d.missing_topics.is_empty() || p.stopped.is_some() || unreadable {
            ExitStatus::Findings
        } else {
            ExitStatus::Success
        },
    )
}

fn print_sent(
    out: &mut dyn Write,
    source: &Source,
    target: &Option<String>,
    r: &Sent,
    json: bool,
) -> anyhow::Result<ExitStatus> {
    let s = &r.summary;
    if json {
        summary_json(
            out,
            source,
            target,
            &r.journal,
            &r.plan,
            &r.choices,
            Some(r),
            None,
        )?;
    } else {
        writeln!(
            out,
            "sent {} message(s) of {} to {} in {:.1} s, {} batch(es){}",
            s.sent,
            source.path.display(),
            target.as_deref().unwrap_or_default(),
            s.elapsed_ms as f64 / 1000.0,
            s.batches,
            if s.topics.is_empty() {
                String::new()
            } else {
                format!(": {}", counts(&s.topics))
            }
        )?;
        writeln!(
            out,
            "skipped {} (sent by an earlier run); delayed {} (delay kept), {} due and sent at once",
            s.skipped, s.delayed, s.released
        )?;
        let listed = [
            (s.refused, "refused"),
            (s.undecided, "undecided (--send-undecided sends them)"),
            (
                s.unconfirmed,
                "stored without SEND_OK (--accept-flush-timeout counts them)",
            ),
            (
                s.in_doubt,
                "in doubt (a batch failed: the next run sends them again)",
            ),
        ];
        let parts: Vec<String> = listed
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, w)| format!("{n} {w}"))
            .collect();
        if !parts.is_empty() {
            writeln!(out, "listed above: {}", parts.join(", "))?;
        }
        if s.possible_duplicates > 0 {
            writeln!(
                out,
                "possible duplicates: {} message(s) an earlier run was sending when it stopped \
                 were sent again; each may be on the cluster twice, with the same UNIQ_KEY",
                s.possible_duplicates
            )?;
        }
        if !s.passed_over.is_empty() {
            writeln!(
                out,
                "passed over (not messages to send): {}",
                counts(&s.passed_over)
            )?;
        }
        if let Some(st) = &s.stopped {
            writeln!(
                out,
                "the source could not be read past position {}: {}",
                st.key, st.why
            )?;
        }
        if r.journal_cut > 0 {
            writeln!(
                out,
                "the journal's last record was cut short by a stop ({} bytes), and was cut off",
                r.journal_cut
            )?;
        }
        writeln!(out, "journal: {}", r.journal.display())?;
    }
    if s.not_sent > 0 {
        output::note(&format!(
            "{} message(s) not sent{}: run the same command again to send them",
            s.not_sent,
            if s.interrupted { " (interrupted)" } else { "" }
        ));
    }
    if let Some(f) = &s.failure {
        anyhow::bail!(
            "the send stopped: {f} (the journal holds what was sent; run again to send the rest)"
        );
    }
    if s.interrupted {
        return Ok(ExitStatus::Failure);
    }
    let unreadable = [PassedOver::Damaged, PassedOver::Unreadable]
        .iter()
        .any(|w| s.passed_over.contains_key(w));
    Ok(
        if s.refused + s.unconfirmed + s.in_doubt > 0 || s.stopped.is_some() || unreadable {
            ExitStatus::Findings
        } else {
            ExitStatus::Success
        },
    )
}

/// What only a dry run's summary says.
struct DryRunFields<'a> {
    missing_topics: &'a [String],
    unchecked: Option<&'a str>,
    refused: u64,
}

/// The `summary` of `send`, one shape for a dry run and a send (docs/json.md).
#[allow(clippy::too_many_arguments)]
fn summary_json(
    out: &mut dyn Write,
    source: &Source,
    target: &Option<String>,
    journal: &std::path::Path,
    p: &crate::send::run::Plan,
    choices: &std::collections::BTreeMap<String, QueueChoice>,
    sent: Option<&Sent>,
    dry: Option<DryRunFields<'_>>,
) -> anyhow::Result<()> {
    let s = sent.map(|r| r.summary.clone()).unwrap_or_default();
    let topics: serde_json::Map<String, serde_json::Value> = p
        .topics
        .iter()
        .map(|(t, tp)| {
            (
                t.clone(),
                json!({
                    "messages": tp.queues.values().map(|q| q.messages).sum::<u64>(),
                    "sent": s.topics.get(t).copied().unwrap_or(0),
                    "found_in": tp.found_in,
                    "source_queues": tp.source_queues,
                    "order": tp.order,
                    "rule": choices.get(t),
                }),
            )
        })
        .collect();
    output::summary_line(
        out,
        "send",
        &json!({
            "dry_run": dry.is_some(),
            "source": source.path.display().to_string(),
            "source_kind": source.kind,
            "target": target,
            "journal": journal.display().to_string(),
            "messages": p.messages,
            "sent": s.sent,
            "skipped": if sent.is_some() { s.skipped } else { p.skipped },
            "refused": dry.as_ref().map_or(s.refused, |d| d.refused),
            "undecided": p.undecided.len(),
            "unconfirmed": s.unconfirmed,
            "in_doubt": s.in_doubt,
            "possible_duplicates": s.possible_duplicates,
            "in_doubt_before": sent.map_or(0, |r| r.in_doubt_before),
            "not_sent": s.not_sent,
            "delayed": p.delayed,
            "released": p.released,
            "batches": s.batches,
            "by_source": p.by_source,
            "passed_over": p.passed_over,
            "stopped": p.stopped,
            "missing_topics": dry.as_ref().map_or(&[][..], |d| d.missing_topics),
            "unchecked": dry.as_ref().and_then(|d| d.unchecked),
            "interrupted": s.interrupted,
            "failure": s.failure,
            "journal_cut_bytes": sent.map_or(0, |r| r.journal_cut),
            "elapsed_ms": s.elapsed_ms,
            "topics": topics,
        }),
    )
}
