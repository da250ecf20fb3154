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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::journal::{Journal, JournalError};
use super::outgoing::{Acked, Outgoing, SendStatus, SourceKey};
use super::producer::{Producer, SendError};
use super::route::TopicRoute;
use super::source::{PassedOver, Source, SourceEntry, SourceError, SourceMessage};
use super::translate::{destination, translate, Delay, Destination, TranslateOptions, Translation};
use crate::engine::consume::export::ExportSource;
use crate::engine::store::dispatch::RETRY_PREFIX;

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
    #[error("route of topic {topic}: {error}")]
    Route { topic: String, error: SendError },
    #[error("creating topic {topic}: {error}")]
    Create { topic: String, error: SendError },
    #[error("connecting: {0}")]
    Connect(SendError),
    #[error("{0}")]
    Runtime(std::io::Error),
}

/// A target queue: the topic and the queue id wanted (`None`: the producer picks).
pub type Lane = (String, Option<i32>);

/// What the plan found for one target queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueuePlan {
    pub messages: u64,
    /// Sent with a delay kept (delay level or timer).
    pub delayed: u64,
    /// Acknowledged in an earlier run (the journal).
    pub skipped: u64,
}

/// What the plan found for one target topic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TopicPlan {
    /// By queue id (`None`: queue not known, the producer picks).
    pub queues: BTreeMap<Option<i32>, QueuePlan>,
    /// The topics the messages were found in, and how many from each.
    pub found_in: BTreeMap<String, u64>,
    /// The source's queue count for it (its topic config, or the highest queue id + 1).
    pub source_queues: i32,
    /// The source's perm for it (6 when it has no config).
    pub perm: i32,
    /// The source's topic config says orderly.
    pub order: bool,
}

/// The first pass over a source.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    pub topics: BTreeMap<String, TopicPlan>,
    /// Messages selected.
    pub messages: u64,
    /// Messages by what they were found as.
    pub by_source: BTreeMap<ExportSource, u64>,
    /// Undecided half messages, listed (not sent).
    pub undecided: Vec<Listed>,
    /// Sent with their delay kept.
    pub delayed: u64,
    /// Delayed, but due: sent at once.
    pub released: u64,
    /// Acknowledged in an earlier run.
    pub skipped: u64,
    /// Records that are not messages to send.
    pub passed_over: BTreeMap<PassedOver, u64>,
    /// Where the source could not be read further.
    pub stopped: Option<Stopped>,
}

/// Where a source stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stopped {
    pub key: SourceKey,
    pub why: String,
}

/// A message listed, not sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    pub key: SourceKey,
    pub seq: u64,
    pub found: Found,
    pub uniq_key: Option<String>,
    /// The target topic and queue, when known.
    pub topic: Option<String>,
    pub queue_id: Option<i32>,
    pub why: String,
}

/// Where a message was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    pub source: ExportSource,
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commitlog_offset: i64,
}

impl Found {
    fn of(m: &SourceMessage) -> Found {
        Found {
            source: m.item.source,
            topic: m.item.queue_topic.clone(),
            queue_id: m.item.queue_id,
            queue_offset: m.item.queue_offset,
            commitlog_offset: m.item.commitlog_offset,
        }
    }
}

/// The topic before `topic_map` renamed it.
fn unmapped<'a>(opts: &'a TranslateOptions, topic: &'a str) -> &'a str {
    opts.topic_map
        .iter()
        .find(|(_, new)| new.as_str() == topic)
        .map_or(topic, |(old, _)| old.as_str())
}

/// Pass over the source without bodies (see the module documentation); `journal` (when given)
/// says what was sent already.
pub fn plan(
    source: &Source,
    opts: &TranslateOptions,
    journal: Option<&Journal>,
) -> Result<Plan, RunError> {
    let mut p = Plan::default();
    for e in source.entries(false) {
        match e? {
            SourceEntry::PassedOver { why, .. } => *p.passed_over.entry(why).or_default() += 1,
            SourceEntry::Stopped { key, why } => p.stopped = Some(Stopped { key, why }),
            SourceEntry::Message(m) => {
                p.messages += 1;
                *p.by_source.entry(m.item.source).or_default() += 1;
                let skipped = journal.is_some_and(|j| j.is_acked(m.seq));
                if let Some(j) = journal {
                    j.check_key(m.seq, m.key)?;
                }
                let found = Found::of(&m);
                let uniq_key = m.item.uniq_key.clone();
                match destination(&m.item, &m.message, opts) {
                    None => p.undecided.push(Listed {
                        key: m.key,
                        seq: m.seq,
                        found,
                        uniq_key,
                        topic: None,
                        queue_id: None,
                        why: "undecided transaction (--send-undecided sends it)".into(),
                    }),
                    Some(Destination {
                        topic,
                        queue_id,
                        delay,
                    }) => {
                        let t = p.topics.entry(topic).or_default();
                        *t.found_in.entry(found.topic.clone()).or_default() += 1;
                        if let Some(q) = queue_id {
                            t.source_queues = t.source_queues.max(q.saturating_add(1));
                        }
                        let q = t.queues.entry(queue_id).or_default();
                        q.messages += 1;
                        match delay {
                            Delay::Level { .. } | Delay::Timer { .. } => {
                                q.delayed += 1;
                                p.delayed += 1;
                            }
                            Delay::Released => p.released += 1,
                            Delay::None => {}
                        }
                        if skipped {
                            q.skipped += 1;
                            p.skipped += 1;
                        }
                    }
                }
            }
        }
    }
    for (name, t) in p.topics.iter_mut() {
        t.perm = 6;
        if let Some(c) = source.topic_config(unmapped(opts, name)) {
            t.source_queues = t
                .source_queues
                .max(c.write_queue_nums.max(c.read_queue_nums));
            t.perm = c.perm;
            t.order = c.order;
        }
        t.source_queues = t.source_queues.max(1);
    }
    Ok(p)
}

/// Each target topic's route; missing topics created with `create_topics`.
pub async fn resolve_routes<S: Sender>(
    sender: &S,
    plan: &Plan,
    opts: &RunOptions,
) -> Result<BTreeMap<String, TopicRoute>, RunError> {
    let mut routes = BTreeMap::new();
    let mut missing = Vec::new();
    for (topic, t) in &plan.topics {
        match sender.route(topic).await {
            Ok(r) => {
                routes.insert(topic.clone(), r);
            }
            Err(SendError::TopicNotExist(_)) if opts.create_topics => {
                sender
                    .create_topic(topic, t.source_queues, t.perm, t.order)
                    .await
                    .map_err(|error| RunError::Create {
                        topic: topic.clone(),
                        error,
                    })?;
                let r = sender.route(topic).await.map_err(|error| RunError::Route {
                    topic: topic.clone(),
                    error,
                })?;
                routes.insert(topic.clone(), r);
            }
            Err(SendError::TopicNotExist(_)) => missing.push(topic.clone()),
            Err(error) => {
                return Err(RunError::Route {
                    topic: topic.clone(),
                    error,
                })
            }
        }
    }
    if !missing.is_empty() {
        return Err(RunError::MissingTopics(missing));
    }
    Ok(routes)
}

/// How a target topic's queues are chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum QueueChoice {
    /// Each message keeps its queue id.
    Keep,
    /// Queue ids folded onto the target's count (`q % queues`).
    Fold { queues: i32 },
    /// The producer picks (`--spread`).
    Spread,
    /// Not sent: an orderly topic whose queue count differs.
    Refused { why: String },
    /// No route was read (a dry run without a cluster): queues as in the source.
    Unchecked,
}

impl QueueChoice {
    /// The queue a message wanting `queue` goes to; `Err` when it is refused.
    pub fn apply(&self, queue: Option<i32>) -> Result<Option<i32>, String> {
        match self {
            QueueChoice::Keep | QueueChoice::Unchecked => Ok(queue),
            QueueChoice::Fold { queues } => Ok(queue.map(|q| q.rem_euclid((*queues).max(1)))),
            QueueChoice::Spread => Ok(None),
            QueueChoice::Refused { why } => Err(why.clone()),
        }
    }
}

/// The queue rule of every target topic (see the module documentation); `routes` empty means
/// unchecked.
pub fn choose_queues(
    plan: &Plan,
    routes: &BTreeMap<String, TopicRoute>,
    opts: &RunOptions,
) -> BTreeMap<String, QueueChoice> {
    plan.topics
        .iter()
        .map(|(topic, t)| {
            let choice = match routes.get(topic) {
                None => QueueChoice::Unchecked,
                Some(r) => {
                    let order = t.order || r.order;
                    let n = r.write_queue_nums;
                    let highest = t.queues.keys().flatten().max().copied().unwrap_or(-1);
                    if opts.spread && !order {
                        QueueChoice::Spread
                    } else if n == t.source_queues && highest < n {
                        QueueChoice::Keep
                    } else if order && !opts.reorder {
                        QueueChoice::Refused {
                            why: format!(
                                "orderly topic {topic} has {n} queue(s) on the target and {} in \
                                 the source: its order would not hold (--reorder sends it anyway)",
                                t.source_queues
                            ),
                        }
                    } else {
                        QueueChoice::Fold { queues: n.max(1) }
                    }
                }
            };
            (topic.clone(), choice)
        })
        .collect()
}

/// What happened to a message, for the printer.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Stored (`SEND_OK`, or an accepted flush timeout).
    Sent,
    /// Stored, but not as asked (a flush or slave timeout): not recorded, sent again next time.
    Unconfirmed,
    /// Refused (queue rules, or the broker): listed, not sent.
    Refused,
    /// An undecided half message: listed.
    Undecided,
    /// Its batch failed: it may or may not be stored.
    InDoubt,
}

/// One message's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct MessageOutcome {
    pub key: SourceKey,
    pub seq: u64,
    pub found: Found,
    pub uniq_key: Option<String>,
    pub topic: Option<String>,
    pub queue_id: Option<i32>,
    pub status: Status,
    /// The broker's answer (sent and unconfirmed).
    pub acked: Option<Acked>,
    pub delay: Option<Delay>,
    /// Why it was refused, or what failed.
    pub why: Option<String>,
    /// An earlier run was sending it when it stopped: if that send was stored too, the
    /// message is there twice (with the same UNIQ_KEY).
    pub possible_duplicate: bool,
}

/// What a send did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SendSummary {
    /// Messages selected.
    pub messages: u64,
    /// Acknowledged in this run.
    pub sent: u64,
    /// Acknowledged in an earlier run (in the journal).
    pub skipped: u64,
    pub refused: u64,
    pub undecided: u64,
    /// Stored without `SEND_OK`, not recorded.
    pub unconfirmed: u64,
    /// In a batch that failed: may be stored, not recorded (sent again next time).
    pub in_doubt: u64,
    /// Sent in this run after an earlier run left them in doubt: maybe there twice.
    pub possible_duplicates: u64,
    /// Sent with their delay kept.
    pub delayed: u64,
    /// Delayed, but due: sent at once.
    pub released: u64,
    /// Not sent because the run stopped first (Ctrl-C or a failure).
    pub not_sent: u64,
    pub batches: u64,
    pub passed_over: BTreeMap<PassedOver, u64>,
    pub stopped: Option<Stopped>,
    pub interrupted: bool,
    /// What stopped the run.
    pub failure: Option<String>,
    /// Sent per target topic.
    pub topics: BTreeMap<String, u64>,
    pub elapsed_ms: u64,
}

/// Events of a run, in order.
pub enum Event<'a> {
    /// A message's outcome.
    Message(&'a MessageOutcome),
    /// Messages dealt with so far (sent, skipped, listed), of `total`.
    Progress { done: u64, total: u64 },
}

/// A message on its way: what the printer and the journal need of it.
#[derive(Debug, Clone)]
struct Meta {
    seq: u64,
    key: SourceKey,
    found: Found,
    uniq_key: Option<String>,
    delay: Delay,
    resent: bool,
}

/// Messages of one lane sent together.
#[derive(Debug, Default)]
struct Batch {
    messages: Vec<Outgoing>,
    meta: Vec<Meta>,
    bytes: usize,
}

impl Batch {
    fn first_seq(&self) -> u64 {
        self.meta.first().map_or(u64::MAX, |m| m.seq)
    }
    fn pairs(&self) -> Vec<(u64, SourceKey)> {
        self.meta.iter().map(|m| (m.seq, m.key)).collect()
    }
}

/// A lane's batches: the one filling, the closed ones waiting, and whether one is in flight.
#[derive(Debug, Default)]
struct LaneQueue {
    open: Batch,
    closed: VecDeque<Batch>,
    busy: bool,
}

/// Bytes a message takes in a batch body (PROTOCOL.md 6.4).
fn batch_len(o: &Outgoing) -> usize {
    20 + o.body.len() + 2 + o.properties.len()
}

/// A message that goes in a batch of its own.
fn alone(o: &Outgoing) -> bool {
    o.delayed || o.topic.starts_with(RETRY_PREFIX)
}

/// Whether `o` may join a batch that starts with `first`.
fn fits(first: &Outgoing, o: &Outgoing, loose_born_time: bool) -> bool {
    first.sys_flag == o.sys_flag
        && first.reconsume_times == o.reconsume_times
        && first.max_reconsume_times == o.max_reconsume_times
        && (loose_born_time || first.born_timestamp == o.born_timestamp)
}

impl LaneQueue {
    /// Add a message, closing batches as the rules say.
    fn push(&mut self, o: Outgoing, meta: Meta, opts: &RunOptions) {
        let len = batch_len(&o);
        let close = match self.open.messages.first() {
            None => false,
            Some(first) => {
                alone(first)
                    || alone(&o)
                    || !fits(first, &o, opts.loose_born_time)
                    || self.open.messages.len() >= opts.batch_messages
                    || self.open.bytes + len > opts.batch_bytes
            }
        };
        if close {
            self.closed.push_back(std::mem::take(&mut self.open));
        }
        self.open.bytes += len;
        self.open.messages.push(o);
        self.open.meta.push(meta);
        if alone(&self.open.messages[0]) || self.open.messages.len() >= opts.batch_messages {
            self.closed.push_back(std::mem::take(&mut self.open));
        }
    }

    /// The batch to send next: a closed one, or (`flush`) the one filling.
    fn next_batch(&self, flush: bool) -> Option<u64> {
        if self.busy {
            return None;
        }
        match self.closed.front() {
            Some(b) => Some(b.first_seq()),
            None if flush && !self.open.messages.is_empty() => Some(self.open.first_seq()),
            None => None,
        }
    }

    fn take(&mut self) -> Batch {
        self.closed
            .pop_front()
            .unwrap_or_else(|| std::mem::take(&mut self.open))
    }
}

/// A batch's send, in flight.
type InFlight<'a> =
    Pin<Box<dyn Future<Output = (Lane, Batch, Result<Vec<Acked>, SendError>)> + 'a>>;

/// `--rate`: the time the next batch may start.
struct Rate {
    per_second: Option<f64>,
    next: Instant,
}

impl Rate {
    fn new(per_second: Option<f64>) -> Rate {
        Rate {
            per_second: per_second.filter(|r| r.is_finite() && *r > 0.0),
            next: Instant::now(),
        }
    }

    /// When a batch of `n` messages may start (now or later); counts it as started.
    fn take(&mut self, n: usize) -> Option<Instant> {
        let r = self.per_second?;
        let now = Instant::now();
        if self.next > now {
            return Some(self.next);
        }
        self.next = self.next.max(now) + Duration::from_secs_f64(n as f64 / r);
        None
    }
}

/// Send every message of `source` not in `journal` (see the module documentation).
#[allow(clippy::too_many_arguments)]
pub async fn send_all<S: Sender>(
    source: &Source,
    sender: &S,
    journal: &mut Journal,
    plan: &Plan,
    choices: &BTreeMap<String, QueueChoice>,
    opts: &RunOptions,
    stop: &AtomicBool,
    events: &mut dyn FnMut(Event<'_>),
) -> SendSummary {
    let started = Instant::now();
    let mut s = SendSummary {
        passed_over: plan.passed_over.clone(),
        stopped: plan.stopped.clone(),
        ..Default::default()
    };
    let total = plan.messages;
    let mut done = 0u64;
    let mut lanes: HashMap<Lane, LaneQueue> = HashMap::new();
    let mut in_flight: Vec<InFlight<'_>> = Vec::new();
    let mut buffered = 0usize;
    let mut entries = source.entries(true);
    let mut source_done = false;
    let mut rate = Rate::new(opts.rate);
    let mut rate_wait: Option<Instant> = None;
    let fail = |s: &mut SendSummary, why: String| {
        s.failure.get_or_insert(why);
    };
    loop {
        let stopping = s.failure.is_some() || stop.load(Ordering::SeqCst);
        if stop.load(Ordering::SeqCst) {
            s.interrupted = true;
        }
        // read ahead
        while !source_done && !stopping && buffered < opts.buffer_bytes && s.failure.is_none() {
            let Some(entry) = entries.next() else {
                source_done = true;
                break;
            };
            let m = match entry {
                Err(e) => {
                    fail(&mut s, e.to_string());
                    source_done = true;
                    break;
                }
                Ok(SourceEntry::PassedOver { .. } | SourceEntry::Stopped { .. }) => continue,
                Ok(SourceEntry::Message(m)) => m,
            };
            s.messages += 1;
            if let Err(e) = journal.check_key(m.seq, m.key) {
                fail(&mut s, e.to_string());
                source_done = true;
                break;
            }
            if journal.is_acked(m.seq) {
                s.skipped += 1;
                done += 1;
                continue;
            }
            let meta = Meta {
                seq: m.seq,
                key: m.key,
                found: Found::of(&m),
                uniq_key: m.item.uniq_key.clone(),
                delay: Delay::None,
                resent: journal.in_doubt(m.seq),
            };
            let listed = |status, topic, queue_id, why: String, meta: &Meta| MessageOutcome {
                key: meta.key,
                seq: meta.seq,
                found: meta.found.clone(),
                uniq_key: meta.uniq_key.clone(),
                topic,
                queue_id,
                status,
                acked: None,
                delay: None,
                why: Some(why),
                possible_duplicate: false,
            };
            match translate(m.key, &m.item, m.message, &opts.translate) {
                Translation::Undecided => {
                    s.undecided += 1;
                    done += 1;
                    let why = "undecided transaction (--send-undecided sends it)".to_string();
                    events(Event::Message(&listed(
                        Status::Undecided,
                        None,
                        None,
                        why,
                        &meta,
                    )));
                }
                Translation::Send { mut message, delay } => {
                    let choice = choices
                        .get(&message.topic)
                        .cloned()
                        .unwrap_or(QueueChoice::Keep);
                    match choice.apply(message.queue_id) {
                        Err(why) => {
                            s.refused += 1;
                            done += 1;
                            let o = listed(
                                Status::Refused,
                                Some(message.topic.clone()),
                                message.queue_id,
                                why,
                                &meta,
                            );
                            events(Event::Message(&o));
                        }
                        Ok(queue) => {
                            message.queue_id = queue;
                            buffered += batch_len(&message);
                            let lane = (message.topic.clone(), queue);
                            let meta = Meta { delay, ..meta };
                            lanes.entry(lane).or_default().push(message, meta, opts);
                        }
                    }
                }
            }
        }
        // start batches: the lane whose next batch comes first in the source
        let flush = source_done || buffered >= opts.buffer_bytes || stopping;
        while in_flight.len() < opts.in_flight.max(1) && !stopping && rate_wait.is_none() {
            let Some(lane) = lanes
                .iter()
                .filter_map(|(l, q)| q.next_batch(flush).map(|seq| (seq, l)))
                .min_by_key(|(seq, _)| *seq)
                .map(|(_, l)| l.clone())
            else {
                break;
            };
            let Some(q) = lanes.get_mut(&lane) else { break };
            let n = q
                .closed
                .front()
                .map_or(q.open.messages.len(), |b| b.messages.len());
            if let Some(at) = rate.take(n) {
                rate_wait = Some(at);
                break;
            }
            let batch = q.take();
            q.busy = true;
            if let Err(e) = journal.sending(&batch.pairs()) {
                fail(&mut s, e.to_string());
                q.busy = false;
                q.closed.push_front(batch);
                break;
            }
            s.batches += 1;
            let lane_key = lane.clone();
            in_flight.push(Box::pin(async move {
                let r = sender.send(&batch.messages).await;
                (lane_key, batch, r)
            }));
        }
        if in_flight.is_empty() {
            let idle = lanes
                .values()
                .all(|q| q.open.messages.is_empty() && q.closed.is_empty());
            if stopping || (source_done && idle) {
                break;
            }
            if let Some(at) = rate_wait.take() {
                tokio::time::sleep_until(at.into()).await;
            }
            continue;
        }
        // wait for a batch (or the rate's next start)
        let mut sleep = rate_wait.map(|at| Box::pin(tokio::time::sleep_until(at.into())));
        let finished = std::future::poll_fn(|cx| {
            for i in 0..in_flight.len() {
                if let Poll::Ready(out) = in_flight[i].as_mut().poll(cx) {
                    drop(in_flight.swap_remove(i));
                    return Poll::Ready(Some(out));
                }
            }
            if let Some(s) = sleep.as_mut() {
                if s.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
            }
            Poll::Pending
        })
        .await;
        let Some((lane, batch, result)) = finished else {
            rate_wait = None;
            continue;
        };
        buffered = buffered.saturating_sub(batch.bytes);
        if let Some(q) = lanes.get_mut(&lane) {
            q.busy = false;
        }
        match result {
            Ok(acks) if acks.len() == batch.messages.len() => {
                let mut recorded = Vec::with_capacity(acks.len());
                let mut outcomes = Vec::with_capacity(acks.len());
                for ((o, meta), ack) in batch.messages.iter().zip(&batch.meta).zip(acks) {
                    let stored = ack.status == SendStatus::SendOk || opts.accept_flush_timeout;
                    if stored {
                        recorded.push((meta.seq, meta.key));
                        s.sent += 1;
                        *s.topics.entry(o.topic.clone()).or_default() += 1;
                        match meta.delay {
                            Delay::Level { .. } | Delay::Timer { .. } => s.delayed += 1,
                            Delay::Released => s.released += 1,
                            Delay::None => {}
                        }
                        if meta.resent {
                            s.possible_duplicates += 1;
                        }
                    } else {
                        s.unconfirmed += 1;
                    }
                    outcomes.push(MessageOutcome {
                        key: meta.key,
                        seq: meta.seq,
                        found: meta.found.clone(),
                        uniq_key: meta.uniq_key.clone(),
                        topic: Some(o.topic.clone()),
                        queue_id: Some(ack.queue_id),
                        status: if stored {
                            Status::Sent
                        } else {
                            Status::Unconfirmed
                        },
                        why: (!stored).then(|| {
                            format!(
                                "stored as {:?}, not SEND_OK (--accept-flush-timeout counts it \
                                 as sent)",
                                ack.status
                            )
                        }),
                        acked: Some(ack),
                        delay: Some(meta.delay),
                        possible_duplicate: meta.resent,
                    });
                }
                if let Err(e) = journal.record_acked(&recorded) {
                    fail(&mut s, e.to_string());
                }
                done += outcomes.len() as u64;
                for o in &outcomes {
                    events(Event::Message(o));
                }
            }
            Err(SendError::Refused { code, .. })
                if code == MESSAGE_ILLEGAL && batch.messages.len() > 1 =>
            {
                // sent again one by one, so that only the illegal one is refused
                let q = lanes.entry(lane).or_default();
                let Batch { messages, meta, .. } = batch;
                for (o, m) in messages.into_iter().zip(meta).rev() {
                    buffered += batch_len(&o);
                    q.closed.push_front(Batch {
                        bytes: batch_len(&o),
                        messages: vec![o],
                        meta: vec![m],
                    });
                }
            }
            Err(e @ SendError::Refused { code, .. }) if code == MESSAGE_ILLEGAL => {
                s.refused += 1;
                done += 1;
                if let Err(e) = journal.not_stored(&batch.pairs()) {
                    fail(&mut s, e.to_string());
                }
                for (o, meta) in batch.messages.iter().zip(&batch.meta) {
                    events(Event::Message(&MessageOutcome {
                        key: meta.key,
                        seq: meta.seq,
                        found: meta.found.clone(),
                        uniq_key: meta.uniq_key.clone(),
                        topic: Some(o.topic.clone()),
                        queue_id: o.queue_id,
                        status: Status::Refused,
                        acked: None,
                        delay: Some(meta.delay),
                        why: Some(e.to_string()),
                        possible_duplicate: false,
                    }));
                }
            }
            other => {
                // a refusal was not stored; anything else may have been
                let (why, maybe_stored) = match &other {
                    Ok(acks) => (
                        format!(
                            "the broker answered {} result(s) for a batch of {}",
                            acks.len(),
                            batch.messages.len()
                        ),
                        true,
                    ),
                    Err(e @ SendError::Refused { code, .. })
                        if *code == crate::remoting::codes::NO_PERMISSION =>
                    {
                        let topic = batch.messages.first().map_or("", |o| o.topic.as_str());
                        let why = format!(
                            "{e} (the cluster's ACL: check --access-key and --secret-key, and \
                             that the account may publish to {topic})"
                        );
                        (why, false)
                    }
                    Err(e @ (SendError::Refused { .. } | SendError::TopicNotExist(_))) => {
                        (e.to_string(), false)
                    }
                    Err(e) => (e.to_string(), true),
                };
                if maybe_stored {
                    for (o, meta) in batch.messages.iter().zip(&batch.meta) {
                        s.in_doubt += 1;
                        events(Event::Message(&MessageOutcome {
                            key: meta.key,
                            seq: meta.seq,
                            found: meta.found.clone(),
                            uniq_key: meta.uniq_key.clone(),
                            topic: Some(o.topic.clone()),
                            queue_id: o.queue_id,
                            status: Status::InDoubt,
                            acked: None,
                            delay: Some(meta.delay),
                            why: Some(why.clone()),
                            possible_duplicate: meta.resent,
                        }));
                    }
                } else if let Err(e) = journal.not_stored(&batch.pairs()) {
                    fail(&mut s, e.to_string());
                }
                fail(&mut s, why);
            }
        }
        events(Event::Progress { done, total });
    }
    drop(in_flight);
    if let Err(e) = journal.sync() {
        fail(&mut s, e.to_string());
    }
    // what was read but not sent, and what was not read
    s.not_sent = total
        .saturating_sub(s.sent + s.skipped + s.refused + s.undecided + s.unconfirmed + s.in_doubt);
    s.elapsed_ms = started.elapsed().as_millis() as u64;
    s
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

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::engine::store::message_json::{write_json_line, BodyMode, RecordFile};
    use crate::format::commitlog::read::{parse_record, Record};
    use crate::format::commitlog::{encode_properties, Host, Message, MessageVersion};
    use crate::send::journal::Access;
    use crate::send::route::PublishQueue;
    use crate::send::source::SourceSpec;

    /// An export file of `per_queue` messages on each of `queues` queues of each topic, in
    /// round-robin order as a store interleaves them; the body names the message.
    fn export_file(dir: &Path, topics: &[&str], queues: i32, per_queue: usize) -> PathBuf {
        let path = dir.join("x.jsonl");
        let mut out = Vec::new();
        let mut n = 0u64;
        for i in 0..per_queue {
            for t in topics {
                for q in 0..queues {
                    let m = Message {
                        topic: t.to_string(),
                        queue_id: q,
                        flag: 0,
                        queue_offset: i as i64,
                        physical_offset: (n * 1000) as i64,
                        sys_flag: 0,
                        born_timestamp: 1_700_000_000_000,
                        born_host: Host::v4([10, 0, 0, 1], 5000),
                        store_timestamp: 1_700_000_000_001,
                        store_host: Host::v4([10, 0, 0, 2], 10911),
                        reconsume_times: 0,
                        prepared_transaction_offset: 0,
                        body: format!("{t}/{q}/{i}").into_bytes(),
                        properties: encode_properties(
                            &[("UNIQ_KEY", format!("U{n}")), ("KEYS", format!("k{n}"))],
                            true,
                        ),
                        version: MessageVersion::V1,
                    };
                    let raw = m.encode().unwrap();
                    let Ok(Record::Message(r)) = parse_record(&raw, 0, n * 1000, false) else {
                        panic!()
                    };
                    write_json_line(
                        &mut out,
                        &r,
                        &RecordFile::new(Path::new("f")),
                        BodyMode::Auto,
                    )
                    .unwrap();
                    n += 1;
                }
            }
        }
        std::fs::write(&path, out).unwrap();
        path
    }

    type Script = Box<dyn Fn(usize, &[Outgoing]) -> Result<Vec<SendStatus>, SendError>>;

    /// A cluster in memory: routes, and sends answered by a script, each after a short wait
    /// that differs between calls (so that batches finish out of order).
    struct Fake {
        queues: i32,
        order: bool,
        missing: RefCell<Vec<String>>,
        created: RefCell<Vec<(String, i32, i32, bool)>>,
        calls: RefCell<Vec<Vec<Outgoing>>>,
        active: RefCell<HashMap<Lane, usize>>,
        max_lane: Cell<usize>,
        total: Cell<usize>,
        max_total: Cell<usize>,
        script: Script,
    }

    fn ok_all() -> Script {
        Box::new(|_, m| Ok(vec![SendStatus::SendOk; m.len()]))
    }

    impl Fake {
        fn new(queues: i32, script: Script) -> Fake {
            Fake {
                queues,
                order: false,
                missing: RefCell::new(Vec::new()),
                created: RefCell::new(Vec::new()),
                calls: RefCell::new(Vec::new()),
                active: RefCell::new(HashMap::new()),
                max_lane: Cell::new(0),
                total: Cell::new(0),
                max_total: Cell::new(0),
                script,
            }
        }

        /// Keys the fake stored (answered SEND_OK), in the order sent per lane.
        fn sent_keys(&self) -> Vec<u64> {
            self.calls
                .borrow()
                .iter()
                .flatten()
                .map(|o| o.key)
                .collect()
        }
    }

    impl Sender for Fake {
        async fn route(&self, topic: &str) -> Result<TopicRoute, SendError> {
            if self.missing.borrow().iter().any(|t| t == topic) {
                return Err(SendError::TopicNotExist(topic.into()));
            }
            Ok(TopicRoute {
                topic: topic.into(),
                queues: (0..self.queues)
                    .map(|q| PublishQueue {
                        broker_name: "broker-a".into(),
                        broker_addr: "127.0.0.1:10911".into(),
                        queue_id: q,
                    })
                    .collect(),
                write_queue_nums: self.queues,
                order: self.order,
            })
        }

        async fn create_topic(&self, t: &str, q: i32, p: i32, o: bool) -> Result<(), SendError> {
            self.created.borrow_mut().push((t.into(), q, p, o));
            self.missing.borrow_mut().retain(|m| m != t);
            Ok(())
        }

        async fn send(&self, messages: &[Outgoing]) -> Result<Vec<Acked>, SendError> {
            let call = {
                let mut calls = self.calls.borrow_mut();
                calls.push(messages.to_vec());
                calls.len() - 1
            };
            let lane = (messages[0].topic.clone(), messages[0].queue_id);
            assert!(messages
                .iter()
                .all(|m| (m.topic.clone(), m.queue_id) == lane));
            {
                let mut a = self.active.borrow_mut();
                let n = a.entry(lane.clone()).or_default();
                *n += 1;
                self.max_lane.set(self.max_lane.get().max(*n));
            }
            self.total.set(self.total.get() + 1);
            self.max_total
                .set(self.max_total.get().max(self.total.get()));
            tokio::time::sleep(Duration::from_millis((call * 7 % 5) as u64)).await;
            self.total.set(self.total.get() - 1);
            *self.active.borrow_mut().get_mut(&lane).unwrap() -= 1;
            let statuses = (self.script)(call, messages);
            if statuses.is_err() {
                self.calls.borrow_mut()[call].clear();
            }
            Ok(statuses?
                .into_iter()
                .zip(messages)
                .map(|(status, o)| Acked {
                    key: o.key,
                    broker: "broker-a".into(),
                    queue_id: o.queue_id.unwrap_or(0),
                    queue_offset: 0,
                    offset_msg_id: format!("ID{}", o.key),
                    status,
                })
                .collect())
        }
    }

    struct Setup {
        _t: tempfile::TempDir,
        source: Source,
        journal: PathBuf,
    }

    fn setup(topics: &[&str], queues: i32, per_queue: usize) -> Setup {
        let t = tempfile::tempdir().unwrap();
        let file = export_file(t.path(), topics, queues, per_queue);
        let source = Source::open(&SourceSpec {
            path: file,
            ..Default::default()
        })
        .unwrap();
        let journal = t.path().join("x.jsonl.send-journal");
        Setup {
            _t: t,
            source,
            journal,
        }
    }

    struct Ran {
        summary: SendSummary,
        outcomes: Vec<MessageOutcome>,
    }

    /// Plan, route and send `s`'s source to `fake`.
    async fn run(
        s: &Setup,
        fake: &Fake,
        opts: &RunOptions,
        stop: &AtomicBool,
    ) -> Result<Ran, RunError> {
        let header = journal_header(&s.source, &Some(Target::default()));
        let mut journal = Journal::open(&s.journal, &header, Access::Write, Duration::ZERO)?;
        let plan = plan(&s.source, &opts.translate, Some(&journal))?;
        let routes = resolve_routes(fake, &plan, opts).await?;
        let choices = choose_queues(&plan, &routes, opts);
        let mut outcomes = Vec::new();
        let summary = send_all(
            &s.source,
            fake,
            &mut journal,
            &plan,
            &choices,
            opts,
            stop,
            &mut |e| {
                if let Event::Message(o) = e {
                    outcomes.push(o.clone());
                }
            },
        )
        .await;
        Ok(Ran { summary, outcomes })
    }

    fn reopen(s: &Setup) -> Journal {
        let header = journal_header(&s.source, &Some(Target::default()));
        Journal::open(&s.journal, &header, Access::Read, Duration::ZERO).unwrap()
    }

    fn opts(in_flight: usize, batch: usize) -> RunOptions {
        RunOptions {
            in_flight,
            batch_messages: batch,
            ..Default::default()
        }
    }

    /// Line number of the `i`th message of queue `q` of topic `t` in [`export_file`]'s order.
    fn body_key(o: &Outgoing) -> (String, i32, usize) {
        let b = String::from_utf8(o.body.clone()).unwrap();
        let mut p = b.split('/');
        let t = p.next().unwrap().to_string();
        let q = p.next().unwrap().parse().unwrap();
        let i = p.next().unwrap().parse().unwrap();
        (t, q, i)
    }

    #[tokio::test]
    async fn every_message_once_in_queue_order_one_batch_per_queue() {
        let s = setup(&["T0", "T1"], 4, 100);
        let fake = Fake::new(4, ok_all());
        let stop = AtomicBool::new(false);
        let r = run(&s, &fake, &opts(3, 16), &stop).await.unwrap();
        assert_eq!(r.summary.sent, 800);
        assert_eq!(r.summary.messages, 800);
        assert_eq!(
            (r.summary.refused, r.summary.in_doubt, r.summary.not_sent),
            (0, 0, 0)
        );
        let mut keys = fake.sent_keys();
        keys.sort();
        assert_eq!(keys, (1..=800).collect::<Vec<u64>>());
        // each queue in its order, each message to its own queue
        let mut next: HashMap<(String, i32), usize> = HashMap::new();
        for o in fake.calls.borrow().iter().flatten() {
            let (t, q, i) = body_key(o);
            assert_eq!((o.topic.as_str(), o.queue_id), (t.as_str(), Some(q)));
            let n = next.entry((t, q)).or_default();
            assert_eq!(*n, i);
            *n += 1;
        }
        assert_eq!(fake.max_lane.get(), 1, "two batches of one queue in flight");
        assert!(
            fake.max_total.get() <= 3 && fake.max_total.get() >= 2,
            "{}",
            fake.max_total.get()
        );
        assert!(fake.calls.borrow().iter().all(|c| c.len() <= 16));
        // 6 full batches and the last 4 per queue
        assert_eq!(fake.calls.borrow().len(), 8 * 7);
        let j = reopen(&s);
        assert_eq!((j.acked(), j.ranges(), j.in_doubt_before()), (800, 1, 0));
        assert!(r.outcomes.iter().all(|o| matches!(o.status, Status::Sent)));
        // again: everything is skipped, nothing sent
        let fake2 = Fake::new(4, ok_all());
        let r = run(&s, &fake2, &opts(3, 16), &stop).await.unwrap();
        assert_eq!((r.summary.sent, r.summary.skipped), (0, 800));
        assert!(fake2.calls.borrow().is_empty());
    }

    #[tokio::test]
    async fn journal_right_after_a_failure_and_resume_sends_exactly_the_rest() {
        let s = setup(&["T0"], 4, 50);
        // the 6th batch fails as a lost connection does
        let fake = Fake::new(
            4,
            Box::new(|call, m| {
                if call == 5 {
                    Err(SendError::Transport {
                        addr: "127.0.0.1:10911".into(),
                        what: "connection reset".into(),
                    })
                } else {
                    Ok(vec![SendStatus::SendOk; m.len()])
                }
            }),
        );
        let stop = AtomicBool::new(false);
        let r = run(&s, &fake, &opts(4, 10), &stop).await.unwrap();
        assert!(r
            .summary
            .failure
            .as_deref()
            .unwrap()
            .contains("connection reset"));
        let failed = fake.calls.borrow()[5].len();
        assert_eq!(failed, 0, "the fake clears a failed call");
        let stored: BTreeSet<u64> = fake.sent_keys().into_iter().collect();
        assert_eq!(r.summary.sent as usize, stored.len());
        assert_eq!(r.summary.in_doubt, 10);
        assert!(
            stored.len() >= 5 * 10 && stored.len() < 200,
            "{}",
            stored.len()
        );
        assert_eq!(
            r.summary.sent + r.summary.in_doubt + r.summary.not_sent,
            200
        );
        // the journal holds exactly what was stored
        let j = reopen(&s);
        for seq in 0..200u64 {
            assert_eq!(j.is_acked(seq), stored.contains(&(seq + 1)), "place {seq}");
        }
        let in_doubt: Vec<u64> = r
            .outcomes
            .iter()
            .filter(|o| matches!(o.status, Status::InDoubt))
            .map(|o| o.seq)
            .collect();
        assert_eq!(in_doubt.len(), 10);
        assert!(in_doubt.iter().all(|&q| j.in_doubt(q)));
        assert_eq!(j.in_doubt_before(), 10);
        // resumed: exactly the rest, the in-doubt ones said to be possible duplicates
        let fake2 = Fake::new(4, ok_all());
        let r2 = run(&s, &fake2, &opts(4, 10), &stop).await.unwrap();
        let again: BTreeSet<u64> = fake2.sent_keys().into_iter().collect();
        assert!(again.is_disjoint(&stored));
        assert_eq!(again.len() + stored.len(), 200);
        assert_eq!(r2.summary.skipped as usize, stored.len());
        assert_eq!(r2.summary.possible_duplicates, 10);
        assert!(r2.summary.failure.is_none());
        let j = reopen(&s);
        assert_eq!((j.acked(), j.in_doubt_before()), (200, 0));
    }

    #[tokio::test]
    async fn an_illegal_message_is_refused_alone() {
        let s = setup(&["T0"], 2, 20);
        let bad = 17u64;
        let fake = Fake::new(
            2,
            Box::new(move |_, m| {
                if m.iter().any(|o| o.key == bad) {
                    Err(SendError::Refused {
                        addr: "b".into(),
                        code: MESSAGE_ILLEGAL,
                        name: "MESSAGE_ILLEGAL".into(),
                        remark: "too big".into(),
                    })
                } else {
                    Ok(vec![SendStatus::SendOk; m.len()])
                }
            }),
        );
        let stop = AtomicBool::new(false);
        let r = run(&s, &fake, &opts(2, 8), &stop).await.unwrap();
        assert_eq!((r.summary.sent, r.summary.refused), (39, 1));
        assert!(r.summary.failure.is_none());
        let refused: Vec<_> = r
            .outcomes
            .iter()
            .filter(|o| matches!(o.status, Status::Refused))
            .collect();
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].key, bad);
        assert!(refused[0].why.as_deref().unwrap().contains("too big"));
        // the queue's order held around the split batch
        let mut next: HashMap<(String, i32), usize> = HashMap::new();
        for o in fake.calls.borrow().iter().flatten() {
            let (t, q, i) = body_key(o);
            let n = next.entry((t, q)).or_default();
            assert!(*n <= i);
            *n = i + 1;
        }
        let j = reopen(&s);
        assert!(!j.is_acked(bad - 1) && !j.in_doubt(bad - 1));
        assert_eq!(j.acked(), 39);
    }

    #[tokio::test]
    async fn stored_without_send_ok_is_recorded_only_when_accepted() {
        let s = setup(&["T0"], 1, 10);
        let script = || -> Script {
            Box::new(|_, m| {
                Ok(m.iter()
                    .map(|o| {
                        if o.key == 3 {
                            SendStatus::FlushDiskTimeout
                        } else {
                            SendStatus::SendOk
                        }
                    })
                    .collect())
            })
        };
        let stop = AtomicBool::new(false);
        let r = run(&s, &Fake::new(1, script()), &opts(1, 4), &stop)
            .await
            .unwrap();
        assert_eq!((r.summary.sent, r.summary.unconfirmed), (9, 1));
        assert!(!reopen(&s).is_acked(2));
        let accept = RunOptions {
            accept_flush_timeout: true,
            ..opts(1, 4)
        };
        let fake = Fake::new(1, script());
        let r = run(&s, &fake, &accept, &stop).await.unwrap();
        assert_eq!((r.summary.sent, r.summary.skipped), (1, 9));
        assert_eq!(fake.sent_keys(), vec![3]);
        assert!(reopen(&s).is_acked(2));
    }

    #[tokio::test]
    async fn a_missing_topic_is_named_or_created() {
        let s = setup(&["T0", "T1"], 3, 2);
        let fake = Fake::new(3, ok_all());
        fake.missing.borrow_mut().push("T1".into());
        let stop = AtomicBool::new(false);
        let e = run(&s, &fake, &opts(2, 8), &stop).await.err().unwrap();
        assert!(
            matches!(&e, RunError::MissingTopics(t) if t == &["T1".to_string()]),
            "{e}"
        );
        assert!(e.to_string().contains("no topic T1"));
        assert!(fake.calls.borrow().is_empty());
        let create = RunOptions {
            create_topics: true,
            ..opts(2, 8)
        };
        let r = run(&s, &fake, &create, &stop).await.unwrap();
        assert_eq!(r.summary.sent, 12);
        assert_eq!(
            fake.created.borrow().as_slice(),
            &[("T1".to_string(), 3, 6, false)]
        );
    }

    #[tokio::test]
    async fn queue_counts_that_differ() {
        let s = setup(&["T0"], 4, 5);
        let stop = AtomicBool::new(false);
        // not orderly: folded onto the target's two queues, each source queue's order kept
        let fake = Fake::new(2, ok_all());
        let r = run(&s, &fake, &opts(4, 8), &stop).await.unwrap();
        assert_eq!(r.summary.sent, 20);
        assert!(fake
            .calls
            .borrow()
            .iter()
            .flatten()
            .all(|o| o.queue_id == Some(body_key(o).1 % 2)));
        // orderly: refused, unless --reorder
        let s = setup(&["T0"], 4, 5);
        let mut fake = Fake::new(2, ok_all());
        fake.order = true;
        let r = run(&s, &fake, &opts(4, 8), &stop).await.unwrap();
        assert_eq!((r.summary.sent, r.summary.refused), (0, 20));
        assert!(r.outcomes[0].why.as_deref().unwrap().contains("--reorder"));
        let reorder = RunOptions {
            reorder: true,
            ..opts(4, 8)
        };
        let r = run(&s, &fake, &reorder, &stop).await.unwrap();
        assert_eq!(r.summary.sent, 20);
        // --spread: the producer picks
        let s = setup(&["T0"], 4, 5);
        let fake = Fake::new(4, ok_all());
        let spread = RunOptions {
            spread: true,
            ..opts(4, 8)
        };
        run(&s, &fake, &spread, &stop).await.unwrap();
        assert!(fake
            .calls
            .borrow()
            .iter()
            .flatten()
            .all(|o| o.queue_id.is_none()));
    }

    #[tokio::test]
    async fn a_stop_starts_no_new_batch_and_keeps_the_journal() {
        let s = setup(&["T0"], 2, 50);
        let stop = AtomicBool::new(false);
        let stop_ref = &stop;
        let script_stop = std::rc::Rc::new(Cell::new(false));
        let f2 = Fake::new(
            2,
            Box::new({
                let flag = script_stop.clone();
                move |call, m| {
                    if call == 3 {
                        flag.set(true);
                    }
                    Ok(vec![SendStatus::SendOk; m.len()])
                }
            }),
        );
        // Ctrl-C comes while the 4th batch is answered: the loop sees it after that batch
        let header = journal_header(&s.source, &Some(Target::default()));
        let mut journal =
            Journal::open(&s.journal, &header, Access::Write, Duration::ZERO).unwrap();
        let o = opts(2, 5);
        let plan = plan(&s.source, &o.translate, Some(&journal)).unwrap();
        let routes = resolve_routes(&f2, &plan, &o).await.unwrap();
        let choices = choose_queues(&plan, &routes, &o);
        let summary = send_all(
            &s.source,
            &f2,
            &mut journal,
            &plan,
            &choices,
            &o,
            stop_ref,
            &mut |_| {
                if script_stop.get() {
                    stop_ref.store(true, Ordering::SeqCst);
                }
            },
        )
        .await;
        drop(journal);
        assert!(summary.interrupted);
        let calls = f2.calls.borrow().len();
        assert!((4..=5).contains(&calls), "{calls}");
        assert_eq!(summary.sent as usize, f2.sent_keys().len());
        assert_eq!(summary.sent + summary.not_sent, 100);
        assert_eq!(reopen(&s).acked(), summary.sent);
    }

    fn out(topic: &str, key: u64) -> Outgoing {
        Outgoing {
            key,
            topic: topic.into(),
            queue_id: Some(0),
            flag: 0,
            sys_flag: 0,
            born_timestamp: 5,
            body: vec![0; 100],
            properties: String::new(),
            reconsume_times: 0,
            max_reconsume_times: None,
            delayed: false,
        }
    }

    fn meta(seq: u64) -> Meta {
        Meta {
            seq,
            key: seq,
            found: Found {
                source: ExportSource::Topic,
                topic: "T".into(),
                queue_id: 0,
                queue_offset: 0,
                commitlog_offset: 0,
            },
            uniq_key: None,
            delay: Delay::None,
            resent: false,
        }
    }

    /// Batches close at the count and size limits, and where a message cannot share one.
    #[test]
    fn batches_close_on_the_rules() {
        let o = RunOptions {
            batch_messages: 3,
            batch_bytes: 400,
            ..Default::default()
        };
        let mut q = LaneQueue::default();
        let mut seq = 0;
        let mut push = |q: &mut LaneQueue, m: Outgoing| {
            q.push(m, meta(seq), &o);
            seq += 1;
        };
        for _ in 0..4 {
            push(&mut q, out("T", 0));
        }
        // 3 (count), then one open
        assert_eq!(q.closed.len(), 1);
        let mut delayed = out("T", 0);
        delayed.delayed = true;
        push(&mut q, delayed);
        // the open one closed, the delayed one alone
        assert_eq!(
            q.closed
                .iter()
                .map(|b| b.messages.len())
                .collect::<Vec<_>>(),
            vec![3, 1, 1]
        );
        let mut born = out("T", 0);
        push(&mut q, out("T", 0));
        born.born_timestamp = 6;
        push(&mut q, born.clone());
        assert_eq!(q.closed.back().unwrap().messages.len(), 1);
        let mut zipped = out("T", 0);
        zipped.sys_flag = 0x301;
        push(&mut q, zipped);
        push(&mut q, out("%RETRY%g", 0));
        // size: 3 * 122 bytes fit 400, a 4th would not (count closes first here)
        let lens: Vec<usize> = q.closed.iter().map(|b| b.messages.len()).collect();
        assert_eq!(lens, vec![3, 1, 1, 1, 1, 1, 1]);
        let mut big = LaneQueue::default();
        let mut b = out("T", 0);
        b.body = vec![0; 300];
        big.push(b.clone(), meta(0), &o);
        big.push(b, meta(1), &o);
        assert_eq!((big.closed.len(), big.open.messages.len()), (1, 1));
        assert_eq!(big.next_batch(false), Some(0));
        assert_eq!(big.take().messages.len(), 1);
        assert_eq!(big.next_batch(false), None);
        assert_eq!(big.next_batch(true), Some(1));
        big.busy = true;
        assert_eq!(big.next_batch(true), None);
    }

    #[test]
    fn rate_spaces_batches() {
        let mut r = Rate::new(Some(1000.0));
        assert!(r.take(100).is_none());
        let at = r.take(100).unwrap();
        let wait = at.saturating_duration_since(Instant::now());
        assert!(
            wait > Duration::from_millis(80) && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
        assert!(Rate::new(None).take(1_000_000).is_none());
        assert!(Rate::new(Some(0.0)).take(1).is_none());
    }
}
