//! The plan: one pass over the source without bodies (messages per target topic and queue),
//! each target topic routed once, and the queue rule.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::consume::export::ExportSource;
use crate::send::journal::Journal;
use crate::send::outgoing::SourceKey;
use crate::send::producer::SendError;
use crate::send::route::TopicRoute;
use crate::send::source::{PassedOver, Source, SourceEntry, SourceMessage};
use crate::send::translate::{destination, Delay, Destination, TranslateOptions};

use super::*;

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
    /// Messages sent as 5.x timers (`TIMER_DELIVER_MS`).
    #[serde(skip)]
    pub timers: u64,
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
    pub(super) fn of(m: &SourceMessage) -> Found {
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
                        if matches!(delay, Delay::Timer { .. }) {
                            t.timers += 1;
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

/// Refuses to send timer messages to a broker older than 5.0 (which would deliver them at
/// once, `TIMER_DELIVER_MS` being a plain property there): each broker a topic with timers is
/// routed to is asked its version once. Unreachable brokers are left to the send.
pub async fn check_timer_wheels<S: Sender>(
    sender: &S,
    plan: &Plan,
    routes: &BTreeMap<String, TopicRoute>,
) -> Result<(), RunError> {
    let mut timers = 0;
    let mut brokers: BTreeMap<String, Option<i32>> = BTreeMap::new();
    for (topic, t) in plan.topics.iter().filter(|(_, t)| t.timers > 0) {
        timers += t.timers;
        for q in routes.get(topic).iter().flat_map(|r| &r.queues) {
            brokers.entry(q.broker_addr.clone()).or_default();
        }
    }
    let mut old = Vec::new();
    for (addr, version) in &mut brokers {
        *version = sender.broker_version(addr).await.ok();
        if let Some(v) = version.filter(|&v| v < crate::send::route::FIRST_TIMER_VERSION) {
            old.push((addr.clone(), v));
        }
    }
    if old.is_empty() {
        return Ok(());
    }
    Err(RunError::NoTimerWheel {
        brokers: old,
        timers,
    })
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
