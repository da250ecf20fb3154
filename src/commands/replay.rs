//! `rmqstore replay`: consume a group's messages with real semantics, one process of `--exec`
//! per message.
//!
//! Each message is written to the command's stdin as one JSON line (the `dump` shape plus a
//! `replay` object: group, queue topic and id, queue offset, the topic the listener sees and the
//! reconsume count), or as its body alone with `--body-only`; the same facts are in `RMQ_*`
//! environment variables. Exit status 0 is `CONSUME_SUCCESS`, anything else `RECONSUME_LATER`:
//! the message is sent back and comes again through the retry topic on the delay-level schedule,
//! and goes to `%DLQ%<group>` past `--max-reconsume-times` (orderly: retried in place, then
//! dead-lettered). Offsets are committed after every completed message and saved to `--overlay`
//! when the run ends; a second run continues where the first stopped.
//!
//! Ctrl-C (SIGINT) or SIGTERM stops cleanly: no new message is started, the ones running are
//! waited for (a command that dies from the signal counts as not consumed and comes again next
//! run), then offsets and the overlay are saved. A second Ctrl-C quits at once without saving.
//!
//! Time is the real clock from `--now` (default: now), running `--time-scale` times faster.
//!
//! With `--client-dir DIR` the group is a broadcasting consumer ([`super::client_dir`]): its
//! queues start from DIR's `offsets.json`, and the offsets committed by the run are written into
//! that file when it ends (merged, atomically, the old file kept), not into the overlay; the
//! group's `%RETRY%` queues, retries and dead letters stay the overlay's.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use serde_json::json;

use super::client_dir::ClientDirArgs;
use super::engine_args::{engine_options, BrokerArg, ClockArgs};
use super::output::{self, BodyMode, MessageJson};
use super::{interrupt, names};
use super::{ExitStatus, GeometryArgs};
use crate::engine::broker::clock::Clock;
use crate::engine::broker::Engine;
use crate::engine::consume::export::group_topics;
use crate::engine::consume::replay::{
    Completion, Outcome, ReplayMessage, ReplayOptions, Replayer, ScaledClock,
};
use crate::engine::Store;
use crate::format::commitlog::MessageRef;

#[derive(Debug, Args)]
pub struct ReplayArgs {
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
    /// Subscribed topic (repeatable; default: every topic the group has offsets for). The
    /// group's %RETRY% topic is always consumed.
    #[arg(long, short = 't', value_name = "T")]
    pub topic: Vec<String>,
    /// The consumer: a shell command run once per message (`/bin/sh -c CMD`), the message on
    /// its stdin; exit status 0 is success.
    #[arg(long, value_name = "CMD")]
    pub exec: String,
    /// Write only the message body (decompressed) to the command's stdin.
    #[arg(long)]
    pub body_only: bool,
    /// How many messages are consumed at the same time (orderly: queues at the same time).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrency: usize,
    /// Orderly consumption: one message per queue at a time, a failure retried in place.
    #[arg(long)]
    pub orderly: bool,
    /// maxReconsumeTimes: failures past this go to the DLQ (-1: 16, unbounded when orderly).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 16,
        allow_negative_numbers = true
    )]
    pub max_reconsume_times: i32,
    /// Orderly: how long a queue waits after a failure (suspendCurrentQueueTimeMillis).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub suspend_ms: i64,
    /// Overlay store directory: offsets, retries and dead letters go there; an earlier run's
    /// overlay is continued. Without it nothing is saved (but the offsets of --client-dir).
    #[arg(long, value_name = "DIR")]
    pub overlay: Option<PathBuf>,
    /// Stop when nothing is left to consume and nothing is waiting to be delivered (by default
    /// the run waits for new deliveries until stopped).
    #[arg(long)]
    pub until_idle: bool,
    /// Kill a command that runs longer than this (a failure).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    #[command(flatten)]
    pub clock: ClockArgs,
    /// Broker rules (default: guessed from the store).
    #[arg(long, value_enum)]
    pub broker: Option<BrokerArg>,
    /// Dispatch every commitlog record again at open (see `pull --full-replay`).
    #[arg(long)]
    pub full_replay: bool,
    /// How bodies are written in the JSON given to the command.
    #[arg(long, value_parser = super::output::body_mode_parser(), default_value = "auto")]
    pub body: BodyMode,
    /// Print every completed message (to stderr) as it happens.
    #[arg(long, short)]
    pub verbose: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// With --client-dir, the offsets committed are written into DIR/offsets.json when the run
    /// ends.
    #[command(flatten)]
    pub client: ClientDirArgs,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

/// The JSON line a command reads: the `dump` shape plus the delivery.
#[derive(Debug, Serialize)]
pub struct ReplayJson {
    #[serde(flatten)]
    pub message: MessageJson,
    pub replay: Delivery,
}

#[derive(Debug, Serialize)]
pub struct Delivery {
    pub group: String,
    pub queue_topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    /// The topic the listener sees (`RETRY_TOPIC` for a retry).
    pub consumer_topic: String,
    pub reconsume_times: i32,
}

struct Running {
    ticket: u64,
    child: Child,
    started: Instant,
    label: String,
}

fn label(m: &ReplayMessage, msg: Option<&MessageRef<'_>>) -> String {
    let id = msg
        .and_then(|m| m.uniq_key().map(|s| s.into_owned()))
        .unwrap_or_else(|| m.commitlog_offset.to_string());
    format!("{}:{}:{} {id}", m.queue_topic, m.queue_id, m.queue_offset)
}

fn spawn(
    a: &ReplayArgs,
    group: &str,
    m: &ReplayMessage,
    file: &std::path::Path,
) -> anyhow::Result<Running> {
    let msg = m.message();
    let input: Vec<u8> = match (&msg, a.body_only) {
        (Some(r), true) => r
            .decompressed_body()
            .map(|b| b.into_owned())
            .unwrap_or_else(|_| r.body.to_vec()),
        (Some(r), false) => {
            let j = ReplayJson {
                message: MessageJson::new(r, file, a.body),
                replay: Delivery {
                    group: group.to_string(),
                    queue_topic: m.queue_topic.clone(),
                    queue_id: m.queue_id,
                    queue_offset: m.queue_offset,
                    consumer_topic: m.consumer_topic.clone(),
                    reconsume_times: m.reconsume_times,
                },
            };
            let mut v = serde_json::to_vec(&j)?;
            v.push(b'\n');
            v
        }
        (None, _) => Vec::new(),
    };
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(&a.exec).stdin(Stdio::piped());
    cmd.env("RMQ_GROUP", group)
        .env("RMQ_TOPIC", &m.consumer_topic)
        .env("RMQ_QUEUE_TOPIC", &m.queue_topic)
        .env("RMQ_QUEUE_ID", m.queue_id.to_string())
        .env("RMQ_QUEUE_OFFSET", m.queue_offset.to_string())
        .env("RMQ_COMMITLOG_OFFSET", m.commitlog_offset.to_string())
        .env("RMQ_RECONSUME_TIMES", m.reconsume_times.to_string());
    if let Some(r) = &msg {
        let offset_id = r.offset_msg_id();
        cmd.env(
            "RMQ_MSG_ID",
            r.uniq_key()
                .map(|s| s.into_owned())
                .unwrap_or(offset_id.clone()),
        )
        .env("RMQ_OFFSET_MSG_ID", offset_id)
        .env("RMQ_TAGS", r.tags().unwrap_or_default().as_ref())
        .env("RMQ_KEYS", r.keys().join(" "));
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run /bin/sh -c {:?}: {e}", a.exec))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A writer thread, so that a command that does not read its input cannot block us.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    Ok(Running {
        ticket: m.ticket,
        child,
        started: Instant::now(),
        label: label(m, msg.as_ref()),
    })
}

fn describe(c: &Completion) -> String {
    match c {
        Completion::Consumed => "consumed".into(),
        Completion::Retry {
            delay_level,
            due_at,
        } => format!("failed: retry at level {delay_level}, due {due_at}"),
        Completion::DeadLetter { topic } => format!("failed: dead-lettered to {topic}"),
        Completion::Suspended { resume_at } => format!("failed: queue suspended until {resume_at}"),
        Completion::LocalRetry { at, error } => {
            format!("failed: send-back failed ({error}), again at {at}")
        }
        Completion::Acknowledged => "failed: acknowledged (retryQueueNums <= 0)".into(),
        Completion::Interrupted => "interrupted: delivered again next run".into(),
    }
}

fn open(a: &ReplayArgs, clock: Arc<dyn Clock>) -> anyhow::Result<Engine> {
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let opts = engine_options(
        &store,
        a.broker,
        a.full_replay,
        a.client.broker_name.as_deref(),
    );
    let mut engine = Engine::open(store, a.overlay.as_deref(), clock, opts)?;
    super::engine_args::say_notes(&engine);
    super::engine_args::use_client_dir(&mut engine, &a.client)?;
    Ok(engine)
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Idle,
    Stopped,
}

pub fn run(a: &ReplayArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    if a.concurrency == 0 {
        anyhow::bail!("--concurrency must be at least 1");
    }
    let group = a.client.group(a.group.as_deref())?.unwrap_or_default();
    let client_dir = a.client.client_dir.is_some();
    let stop = interrupt::stop_flag(
        "stopping after the messages in progress (again to quit at once, without saving)",
    )?;
    let clock = a.clock.clock()?;
    let engine = open(a, clock.clone())?;
    if a.topic.is_empty() && !client_dir {
        names::ensure_group(
            &engine,
            &group,
            "To replay as a new group, name its topic (--topic)",
        )?;
    }
    let topics = if a.topic.is_empty() {
        group_topics(&engine, &group)
    } else {
        a.topic.clone()
    };
    if topics.is_empty() {
        anyhow::bail!(
            "consumer group {group} has no committed offsets in {}: name its topic (--topic)",
            if client_dir {
                "the client's offsets.json"
            } else {
                "consumerOffset.json"
            }
        );
    }
    output::note_pop(
        &crate::engine::consume::pop::PopUse::read(&engine.source),
        Some(group.as_str()),
    );
    if a.overlay.is_none() && client_dir {
        output::note(
            "no --overlay: retries are not saved (offsets go to the client's \
             offsets.json)",
        );
    } else if a.overlay.is_none() {
        output::note("no --overlay: offsets and retries are not saved");
    }
    let mut options = ReplayOptions::new(group.clone(), topics);
    options.orderly = a.orderly;
    options.max_reconsume_times = a.max_reconsume_times;
    options.suspend_ms = a.suspend_ms;
    let mut rp = Replayer::new(engine, options);
    let mut running: Vec<Running> = Vec::new();
    let result = drive(a, &mut rp, &mut running, &stop, &clock);
    // Whatever happened, wait for the commands still running and record them.
    let drained = finish_running(a, &mut rp, &mut running, &stop);
    let progress = rp.progress();
    let subscribed = rp.subscribed().to_vec();
    let (stats, client) = rp.finish()?;
    // saved like the overlay, also when the run failed
    let saved = match client {
        Some(mut c) => super::client_dir::persist(&mut c, "replay"),
        None => Ok(()),
    };
    let end = result?;
    drained?;
    saved?;
    let summary = json!({
        "group": group,
        "topics": subscribed,
        "end": match end { End::Idle => "idle", End::Stopped => "stopped" },
        "stats": stats,
        "offsets": progress,
        "overlay": a.overlay.as_ref().map(|p| p.display().to_string()),
    });
    if a.json {
        super::output::summary_line(out, "replay", &summary)?;
    } else {
        writeln!(
            out,
            "replay of {} {}: {} delivered, {} consumed, {} retried, {} dead-lettered, {} \
             suspended, {} interrupted",
            group,
            if end == End::Idle {
                "ended (idle)"
            } else {
                "stopped"
            },
            stats.delivered,
            stats.consumed,
            stats.retried,
            stats.dead_lettered,
            stats.suspended,
            stats.interrupted
        )?;
        for p in &progress {
            writeln!(
                out,
                "  {:<32} {:>3}  committed {:>8}  max {:>8}",
                p.topic, p.queue_id, p.committed, p.max_offset
            )?;
        }
    }
    let dlq = crate::engine::store::dispatch::dlq_topic(&group);
    if stats.dead_lettered > 0 && stats.consumed == 0 {
        output::say(&format!(
            "every message delivered failed: {} went to {dlq}, none was consumed",
            stats.dead_lettered
        ));
        return Ok(ExitStatus::Findings);
    }
    if stats.dead_lettered > 0 {
        output::note(&format!(
            "{} message(s) went to {dlq} ({} consumed)",
            stats.dead_lettered, stats.consumed
        ));
    }
    Ok(ExitStatus::Success)
}

/// A command ended by a signal (or by a shell reporting one, 128 + SIGINT): when the run is
/// stopping, that is the Ctrl-C sent to the whole foreground process group, not a failure.
fn killed_by_signal(status: &std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal().is_some() || status.code() == Some(130) || status.code() == Some(143)
}

/// Reap finished commands; returns how many finished.
fn reap(
    a: &ReplayArgs,
    rp: &mut Replayer,
    running: &mut Vec<Running>,
    stop: &AtomicBool,
) -> anyhow::Result<usize> {
    let mut done = 0;
    let mut i = 0;
    while i < running.len() {
        let Some(r) = running.get_mut(i) else {
            break;
        };
        let mut status = r.child.try_wait()?;
        let timed_out = status.is_none()
            && a.timeout
                .is_some_and(|t| r.started.elapsed() > Duration::from_secs_f64(t.max(0.0)));
        if timed_out {
            let _ = r.child.kill();
            status = Some(r.child.wait()?);
        }
        let Some(status) = status else {
            i += 1;
            continue;
        };
        let r = running.swap_remove(i);
        let outcome = if status.success() && !timed_out {
            Outcome::Success
        } else if stop.load(Ordering::SeqCst) && !timed_out && killed_by_signal(&status) {
            Outcome::Interrupted
        } else {
            Outcome::Failure
        };
        let c = rp.complete(r.ticket, outcome)?;
        if a.verbose {
            output::say(&format!(
                "{} ({}{}): {}",
                r.label,
                status,
                if timed_out { ", timed out" } else { "" },
                describe(&c)
            ));
        }
        done += 1;
    }
    Ok(done)
}

fn drive(
    a: &ReplayArgs,
    rp: &mut Replayer,
    running: &mut Vec<Running>,
    stop: &AtomicBool,
    clock: &ScaledClock,
) -> anyhow::Result<End> {
    loop {
        let finished = reap(a, rp, running, stop)?;
        if stop.load(Ordering::SeqCst) {
            return Ok(End::Stopped);
        }
        let free = a.concurrency.saturating_sub(running.len());
        let batch = if free > 0 { rp.take(free)? } else { Vec::new() };
        let started = batch.len();
        for m in batch {
            let file = rp.engine().record_file(m.commitlog_offset);
            match spawn(a, &rp.options().group, &m, &file) {
                Ok(r) => running.push(r),
                Err(e) => {
                    rp.complete(m.ticket, Outcome::Interrupted)?;
                    return Err(e);
                }
            }
        }
        if running.is_empty() {
            if rp.is_idle() && a.until_idle {
                return Ok(End::Idle);
            }
            let wait = rp
                .next_wake()
                .map(|t| clock.real_ms_until(t))
                .unwrap_or(200)
                .clamp(1, 200);
            std::thread::sleep(Duration::from_millis(wait));
        } else if finished == 0 && started == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Wait for every command still running, then record its outcome.
fn finish_running(
    a: &ReplayArgs,
    rp: &mut Replayer,
    running: &mut Vec<Running>,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let mut first_err = None;
    while !running.is_empty() {
        match reap(a, rp, running, stop) {
            Ok(0) => std::thread::sleep(Duration::from_millis(5)),
            Ok(_) => {}
            Err(e) => {
                // Give the rest back: they are delivered again next run.
                for r in running.drain(..) {
                    let _ = rp.complete(r.ticket, Outcome::Interrupted);
                }
                first_err = Some(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
