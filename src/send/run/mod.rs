//! The send loop: a source's messages translated, routed, batched per queue and handed to a
//! [`Sender`] (the [`Producer`], or a fake in tests), each acknowledgement recorded in the
//! journal.
//!
//! 1. **Plan** ([`plan`]): one pass over the source without bodies: the messages per target
//!    topic and queue, delayed and undecided counts, what the journal says was sent already.
//! 2. **Routes** ([`resolve_routes`]): each target topic routed once. A topic the cluster does not
//!    have is an error naming it ([`RunError::MissingTopics`]), unless `create_topics` (then it is
//!    created with the source's queue count, perm and order flag). **Queues** ([`choose_queues`]):
//!    a message keeps its queue when the target topic has the source's queue count; with
//!    `spread`, non-orderly topics leave the choice to the producer; an orderly topic (the
//!    source's topic config or the route says so) with another queue count is refused unless
//!    `reorder`; otherwise queue ids are folded onto the target's count (`q % n`, which keeps
//!    each source queue's order).
//! 3. **Send** ([`send_all`]): the source read again with bodies, in order. Messages are grouped
//!    per target queue into batches (at most `batch_messages` messages and `batch_bytes` of
//!    batch body; a delayed message, a `%RETRY%` message, or one whose sysflag, reconsume
//!    headers or born time differ from the batch's starts a batch of its own). At most
//!    `in_flight` batches are in flight overall and one per queue, so each queue's order holds.
//!    What is read ahead is bounded (`buffer_bytes`). Each acknowledged message is recorded in the
//!    journal; a stored-but-not-OK answer is not, unless `accept_flush_timeout`. A batch the broker
//!    refuses as illegal is split and its messages sent alone, so only the bad one is listed.
//!    Any other failure stops the run: no new batch starts, the ones in flight are waited for and
//!    recorded, the journal is flushed; the same happens when `stop` is set (Ctrl-C).
//!
//! [`Producer`]: super::producer::Producer

mod lanes;
mod plan;
mod send_all;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;

use super::journal::{Journal, JournalError};
use super::outgoing::{Acked, Outgoing};
use super::producer::{Producer, SendError};
use super::route::TopicRoute;
use super::source::{Source, SourceError};
use super::translate::TranslateOptions;

use self::lanes::*;
pub use self::plan::*;
pub use self::send_all::*;
/// `MESSAGE_ILLEGAL`: the broker refuses the message itself (size, properties).
pub const MESSAGE_ILLEGAL: i32 = 13;

/// What the loop needs of a producer.
pub trait Sender {
    /// The topic's route; [`SendError::TopicNotExist`] when the cluster does not have it.
    fn route(&self, topic: &str) -> impl Future<Output = Result<TopicRoute, SendError>>;
    /// Create `topic` with `queues` read and write queues, `perm` and the order flag.
    fn create_topic(
        &self,
        topic: &str,
        queues: i32,
        perm: i32,
        order: bool,
    ) -> impl Future<Output = Result<(), SendError>>;
    /// Send messages of one topic and queue (one alone, several as a batch); one [`Acked`] per
    /// message, in order.
    fn send(&self, messages: &[Outgoing]) -> impl Future<Output = Result<Vec<Acked>, SendError>>;
    /// The version the broker at `addr` answers with (`MQVersion`'s number).
    fn broker_version(&self, addr: &str) -> impl Future<Output = Result<i32, SendError>>;
}

impl Sender for Producer {
    fn route(&self, topic: &str) -> impl Future<Output = Result<TopicRoute, SendError>> {
        Producer::route(self, topic)
    }
    fn create_topic(
        &self,
        topic: &str,
        queues: i32,
        perm: i32,
        order: bool,
    ) -> impl Future<Output = Result<(), SendError>> {
        Producer::create_topic(self, topic, queues, perm, order)
    }
    fn broker_version(&self, addr: &str) -> impl Future<Output = Result<i32, SendError>> {
        Producer::broker_version(self, addr)
    }
    fn send(&self, messages: &[Outgoing]) -> impl Future<Output = Result<Vec<Acked>, SendError>> {
        Producer::send(self, messages)
    }
}

/// How to send.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub translate: TranslateOptions,
    /// Non-orderly topics: the producer picks queues.
    pub spread: bool,
    /// Orderly topics with another queue count are sent anyway (queues folded).
    pub reorder: bool,
    /// Topics the cluster lacks are created.
    pub create_topics: bool,
    /// `FLUSH_DISK_TIMEOUT`, `FLUSH_SLAVE_TIMEOUT` and `SLAVE_NOT_AVAILABLE` count as sent.
    pub accept_flush_timeout: bool,
    /// Batches may hold messages born at different times (the batch carries one born time).
    pub loose_born_time: bool,
    /// Batches in flight overall (one per queue at most).
    pub in_flight: usize,
    /// Messages per second, at most.
    pub rate: Option<f64>,
    /// Messages per batch, at most.
    pub batch_messages: usize,
    /// Bytes of batch body per batch, at most (the broker's `maxMessageSize`, 4 MiB).
    pub batch_bytes: usize,
    /// Bytes of messages read ahead of what is in flight, at most.
    pub buffer_bytes: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            translate: TranslateOptions::default(),
            spread: false,
            reorder: false,
            create_topics: false,
            accept_flush_timeout: false,
            loose_born_time: false,
            in_flight: 16,
            rate: None,
            batch_messages: 256,
            batch_bytes: 4 << 20,
            buffer_bytes: 64 << 20,
        }
    }
}

/// Why a send could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(
        "the target cluster has no topic {}: create {} (or give --create-topics, or rename with \
         --topic-map OLD=NEW)",
        .0.join(", "),
        if .0.len() == 1 { "it" } else { "them" }
    )]
    MissingTopics(Vec<String>),
    #[error(
        "{timers} timer message(s) (5.x TIMER_DELIVER_MS) would be delivered at once: {} \
         older than 5.0 and without a timer wheel; send them to a 5.x cluster, or give \
         --deliver-now to deliver them now",
        describe_brokers(.brokers)
    )]
    NoTimerWheel {
        /// `(broker address, the version it answers with)`.
        brokers: Vec<(String, i32)>,
        timers: u64,
    },
    #[error("route of topic {topic}: {error}")]
    Route { topic: String, error: SendError },
    #[error("creating topic {topic}: {error}")]
    Create { topic: String, error: SendError },
    #[error("connecting: {0}")]
    Connect(SendError),
    #[error("{0}")]
    Runtime(std::io::Error),
}

/// `broker 127.0.0.1:10911 (version 407) is` / `brokers a (version 407), b (...) are`.
fn describe_brokers(brokers: &[(String, i32)]) -> String {
    let list: Vec<String> = brokers
        .iter()
        .map(|(addr, v)| format!("{addr} (version {v})"))
        .collect();
    match list.len() {
        1 => format!("broker {} is", list[0]),
        _ => format!("brokers {} are", list.join(", ")),
    }
}

/// Where messages go.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// Name server addresses.
    pub namesrv: Vec<String>,
    /// One broker, talked to directly.
    pub broker: Option<String>,
    pub acl: Option<super::producer::AclKeys>,
}

impl Target {
    /// The target in one line (the journal's header): `namesrv a;b` or `broker a`.
    pub fn describe(&self) -> String {
        match &self.broker {
            Some(b) => format!("broker {b}"),
            None => {
                let mut n = self.namesrv.clone();
                n.sort();
                n.dedup();
                format!("namesrv {}", n.join(";"))
            }
        }
    }

    fn config(&self, opts: &RunOptions) -> super::producer::ProducerConfig {
        let mut c = super::producer::ProducerConfig::new(self.namesrv.clone(), self.broker.clone());
        c.acl = self.acl.clone();
        c.max_in_flight = opts.in_flight.max(1);
        c
    }
}

/// A send to make, or plan.
pub struct Request<'a> {
    pub source: &'a Source,
    /// `None`: no cluster named (a dry run only).
    pub target: Option<Target>,
    pub journal: std::path::PathBuf,
    /// Plan only: nothing is sent, the journal is only read.
    pub dry_run: bool,
    pub options: RunOptions,
    /// Set by Ctrl-C: no new batch starts.
    pub stop: std::sync::Arc<AtomicBool>,
}

/// What a dry run found.
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    pub plan: Plan,
    pub choices: BTreeMap<String, QueueChoice>,
    /// The routes read (brokers per queue).
    #[serde(skip)]
    pub routes: BTreeMap<String, TopicRoute>,
    /// Target topics the cluster does not have.
    pub missing_topics: Vec<String>,
    /// Why the queue choice could not be checked against the cluster (none reached).
    pub unchecked: Option<String>,
    /// Acknowledged in an earlier run, per the journal (if it exists).
    pub journal: std::path::PathBuf,
}

/// What a send did.
#[derive(Debug, Clone)]
pub struct Sent {
    pub plan: Plan,
    pub choices: BTreeMap<String, QueueChoice>,
    pub summary: SendSummary,
    pub journal: std::path::PathBuf,
    /// Bytes of a torn last record cut off the journal at open.
    pub journal_cut: u64,
    /// Messages an earlier run was sending when it stopped, unacknowledged.
    pub in_doubt_before: usize,
}

/// A run's outcome.
pub enum Outcome {
    DryRun(DryRun),
    Sent(Sent),
}

/// The journal's header for a request.
pub fn journal_header(source: &Source, target: &Option<Target>) -> super::journal::JournalHeader {
    // the same source named another way (relative, through a link) is the same source
    let path = std::fs::canonicalize(&source.path).unwrap_or_else(|_| source.path.clone());
    super::journal::JournalHeader {
        source: path.display().to_string(),
        kind: serde_json::to_value(source.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        fingerprint: source.fingerprint().to_string(),
        selection: source.selection().describe(),
        target: target.as_ref().map(Target::describe).unwrap_or_default(),
    }
}

/// Plan, then send with a [`Producer`] (or only plan: `dry_run`), on a runtime of its own.
pub fn execute(req: Request<'_>, events: &mut dyn FnMut(Event<'_>)) -> Result<Outcome, RunError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    rt.block_on(async {
        let header = journal_header(req.source, &req.target);
        if req.dry_run {
            let journal = match Journal::open(
                &req.journal,
                &header,
                super::journal::Access::Read,
                Duration::ZERO,
            ) {
                Ok(j) => Some(j),
                // a dry run without a target cannot check the journal's
                Err(JournalError::OtherRun {
                    field: "target", ..
                }) if req.target.is_none() => None,
                Err(e) => return Err(e.into()),
            };
            let plan = plan(req.source, &req.options.translate, journal.as_ref())?;
            return Ok(Outcome::DryRun(dry_run(plan, &req).await));
        }
        let Some(target) = &req.target else {
            return Err(RunError::Connect(SendError::Transport {
                addr: String::new(),
                what: "no --namesrv or --broker".into(),
            }));
        };
        let mut journal = Journal::open(
            &req.journal,
            &header,
            super::journal::Access::Write,
            Duration::from_millis(50),
        )?;
        let plan = plan(req.source, &req.options.translate, Some(&journal))?;
        let producer = Producer::connect(target.config(&req.options))
            .await
            .map_err(RunError::Connect)?;
        let routes = match resolve_routes(&producer, &plan, &req.options).await {
            Ok(r) => r,
            Err(e) => {
                producer.shutdown().await;
                return Err(e);
            }
        };
        if let Err(e) = check_timer_wheels(&producer, &plan, &routes).await {
            producer.shutdown().await;
            return Err(e);
        }
        let choices = choose_queues(&plan, &routes, &req.options);
        let summary = send_all(
            req.source,
            &producer,
            &mut journal,
            &plan,
            &choices,
            &req.options,
            &req.stop,
            events,
        )
        .await;
        producer.shutdown().await;
        Ok(Outcome::Sent(Sent {
            journal_cut: journal.cut(),
            in_doubt_before: journal.in_doubt_before(),
            journal: journal.path().to_path_buf(),
            plan,
            choices,
            summary,
        }))
    })
}

/// Routes for a dry run, as far as a cluster answers.
async fn dry_run(plan: Plan, req: &Request<'_>) -> DryRun {
    let mut out = DryRun {
        choices: BTreeMap::new(),
        routes: BTreeMap::new(),
        missing_topics: Vec::new(),
        unchecked: None,
        journal: req.journal.clone(),
        plan,
    };
    match &req.target {
        None => out.unchecked = Some("no --namesrv or --broker given".into()),
        Some(t) => match Producer::connect(t.config(&req.options)).await {
            Err(e) => out.unchecked = Some(format!("no cluster reached: {e}")),
            Ok(p) => {
                for topic in out.plan.topics.keys() {
                    match p.route(topic).await {
                        Ok(r) => {
                            out.routes.insert(topic.clone(), r);
                        }
                        Err(SendError::TopicNotExist(_)) => out.missing_topics.push(topic.clone()),
                        Err(e) => {
                            out.unchecked = Some(format!("no route read: {e}"));
                            out.routes.clear();
                            break;
                        }
                    }
                }
                p.shutdown().await;
            }
        },
    }
    out.choices = choose_queues(&out.plan, &out.routes, &req.options);
    out
}
