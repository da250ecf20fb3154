//! What is still waiting in a store (and an overlay) at the engine's now, as `pending` and the
//! browser show it. Per consumer group: unconsumed messages per topic and queue (max offset minus
//! the committed offset), retries parked in `SCHEDULE_TOPIC_XXXX` for `%RETRY%<group>` and when
//! each is due, the DLQ size. For the store: delayed messages per delay level past
//! `delayOffset.json` with their due times, timer messages, and undecided transactions
//! (ENGINE.md 8's final-state view).

use std::collections::BTreeSet;

use serde::Serialize;

use crate::engine::broker::schedule::DelayedMessage;
use crate::engine::broker::timer::{TimerCounts, TimerMessage};
use crate::engine::broker::transaction::{PendingTransaction, TRANS_CHECK_GROUP};
use crate::engine::broker::Engine;
use crate::engine::store::dispatch::{dlq_topic, retry_topic, DLQ_PREFIX, RETRY_PREFIX};
use crate::format::timer::TIMER_TOPIC;

#[derive(Debug, Serialize)]
pub struct Pending {
    pub now: i64,
    pub groups: Vec<GroupPending>,
    pub delayed: Vec<LevelPending>,
    pub transactions: Vec<PendingTransaction>,
    /// 5.x timer messages (`None` when the store has no timer topic).
    pub timers: Option<TimersPending>,
}

/// 5.x timer messages waiting on `rmq_sys_wheel_timer` (ENGINE.md 7.2).
#[derive(Debug, Serialize)]
pub struct TimersPending {
    #[serde(flatten)]
    pub counts: TimerCounts,
    /// Pending messages by release time.
    pub messages: Vec<TimerMessage>,
    /// Messages not listed (without --all).
    pub not_listed: usize,
}

#[derive(Debug, Serialize)]
pub struct GroupPending {
    pub group: String,
    pub queues: Vec<QueuePending>,
    /// Messages not yet consumed, over every queue.
    pub lag: i64,
    /// Retries parked until they are due, earliest first.
    pub retries_waiting: Vec<DelayedMessage>,
    pub dlq_topic: String,
    pub dlq_messages: i64,
}

#[derive(Debug, Serialize)]
pub struct QueuePending {
    pub topic: String,
    pub queue_id: i32,
    /// -1: no committed offset.
    pub committed_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub lag: i64,
}

#[derive(Debug, Serialize)]
pub struct LevelPending {
    pub level: i32,
    pub delay_ms: Option<i64>,
    /// Next queue offset to deliver (`delayOffset.json`, clamped).
    pub delay_offset: i64,
    pub max_offset: i64,
    pub pending: usize,
    /// Messages due at or before now.
    pub due_now: usize,
    pub next_due_timestamp: Option<i64>,
    pub last_due_timestamp: Option<i64>,
    pub messages: Vec<DelayedMessage>,
    /// Messages not listed (without --all).
    pub not_listed: usize,
}

/// Per level messages listed without `--all`.
const LIST_PER_LEVEL: usize = 20;

/// The groups [`pending`] reports: [`consuming_groups`] and the owners of retries waiting in
/// `delayed`, `only` alone when given.
pub fn groups_of(engine: &Engine, only: Option<&str>, delayed: &[DelayedMessage]) -> Vec<String> {
    let mut set = consuming_groups(engine);
    for d in delayed {
        if let Some(g) = d
            .real_topic
            .as_deref()
            .and_then(|t| t.strip_prefix(RETRY_PREFIX))
        {
            set.insert(g.to_string());
        }
    }
    set.remove(TRANS_CHECK_GROUP);
    set.into_iter()
        .filter(|g| !g.is_empty() && only.is_none_or(|o| o == g))
        .collect()
}

/// Everything pending in `engine` at its clock's now; with `only`, what concerns that group:
/// its queues, and the delayed messages and undecided transactions bound for its topics.
pub fn pending(engine: &Engine, only: Option<&str>, all: bool) -> Pending {
    let now = engine.now();
    let waiting = engine.pending_delayed();
    let mut groups = Vec::new();
    // topics of the groups shown: what a delayed message or a transaction must be bound for
    let mut shown_topics: BTreeSet<String> = BTreeSet::new();
    for g in groups_of(engine, only, &waiting) {
        let mut topics: BTreeSet<String> = engine.offset_topics(&g);
        let retry = retry_topic(&g);
        if !engine.queue_ids(&retry).is_empty() {
            topics.insert(retry.clone());
        }
        let mut queues = Vec::new();
        for t in &topics {
            for q in engine.queue_ids(t) {
                let (min, max) = engine.queue_bounds(t, q);
                let committed = engine.committed_offset(&g, t, q);
                let from = if committed < 0 {
                    min
                } else {
                    committed.max(min)
                };
                queues.push(QueuePending {
                    topic: t.clone(),
                    queue_id: q,
                    committed_offset: committed,
                    min_offset: min,
                    max_offset: max,
                    lag: (max - from).max(0),
                });
            }
        }
        let dlq = dlq_topic(&g);
        shown_topics.extend(topics.iter().cloned());
        shown_topics.insert(dlq.clone());
        shown_topics.insert(retry.clone());
        let dlq_messages = engine
            .queue_ids(&dlq)
            .into_iter()
            .map(|q| {
                let (min, max) = engine.queue_bounds(&dlq, q);
                max - min
            })
            .sum();
        let mut retries_waiting: Vec<DelayedMessage> = waiting
            .iter()
            .filter(|d| {
                d.real_topic.as_deref() == Some(retry.as_str())
                    || d.real_topic.as_deref() == Some(dlq.as_str())
            })
            .cloned()
            .collect();
        retries_waiting.sort_by_key(|d| (d.due, d.commitlog_offset));
        groups.push(GroupPending {
            group: g,
            lag: queues.iter().map(|q| q.lag).sum(),
            queues,
            retries_waiting,
            dlq_topic: dlq,
            dlq_messages,
        });
    }
    let bound_for_shown =
        |topic: Option<&str>| only.is_none() || topic.is_some_and(|t| shown_topics.contains(t));
    let mut delayed = Vec::new();
    for level in 1..=engine.source().geometry.max_delay_level() {
        let mine: Vec<&DelayedMessage> = waiting
            .iter()
            .filter(|d| d.level == level && bound_for_shown(d.real_topic.as_deref()))
            .collect();
        let (_, max) = engine.queue_bounds(
            crate::engine::store::dispatch::SCHEDULE_TOPIC,
            crate::engine::broker::schedule::queue_id_of_level(level),
        );
        if mine.is_empty() && (max == 0 || only.is_some()) {
            continue;
        }
        let limit = if all { usize::MAX } else { LIST_PER_LEVEL };
        delayed.push(LevelPending {
            level,
            delay_ms: engine.source().geometry.delay_millis(level),
            delay_offset: engine.delay_offset(level),
            max_offset: max,
            pending: mine.len(),
            due_now: mine.iter().filter(|d| d.due <= now).count(),
            next_due_timestamp: mine.iter().map(|d| d.due).min(),
            last_due_timestamp: mine.iter().map(|d| d.due).max(),
            not_listed: mine.len().saturating_sub(limit),
            messages: mine.into_iter().take(limit).cloned().collect(),
        });
    }
    let transactions = engine
        .pending_transactions()
        .into_iter()
        .filter(|t| bound_for_shown(t.live.real_topic.as_deref()))
        .collect();
    let timers = timers_pending(engine, all, &bound_for_shown);
    Pending {
        now,
        groups,
        delayed,
        transactions,
        timers,
    }
}

fn timers_pending(
    engine: &Engine,
    all: bool,
    bound_for_shown: &dyn Fn(Option<&str>) -> bool,
) -> Option<TimersPending> {
    if engine.queue_bounds(TIMER_TOPIC, 0).1 == 0 {
        return None;
    }
    let now = engine.now();
    let report = engine.timer_report(false);
    let mine: Vec<&TimerMessage> = report
        .pending()
        .filter(|m| bound_for_shown(m.real_topic.as_deref()))
        .collect();
    let delivered = report
        .delivered()
        .filter(|m| bound_for_shown(m.real_topic.as_deref()))
        .count();
    let limit = if all { usize::MAX } else { LIST_PER_LEVEL };
    Some(TimersPending {
        counts: TimerCounts::of(report.read_timestamp, &mine, delivered, now),
        not_listed: mine.len().saturating_sub(limit),
        messages: mine.into_iter().take(limit).cloned().collect(),
    })
}

/// Consumer groups an engine knows: [`consuming_groups`] and `subscriptionGroup.json`'s.
pub fn known_groups(engine: &Engine) -> BTreeSet<String> {
    let mut set = consuming_groups(engine);
    set.extend(
        engine
            .subscription_groups()
            .iter()
            .map(|g| g.group_name.clone()),
    );
    set.remove("");
    set
}

/// Consumer groups with committed offsets (a broadcasting client's group too), and the owners of `%RETRY%` and `%DLQ%` topics.
pub fn consuming_groups(engine: &Engine) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = BTreeSet::new();
    for (_, g, _) in engine.consumer_offsets().iter() {
        set.insert(g.to_string());
    }
    if let Some(c) = engine.client_offsets() {
        set.insert(c.group().to_string());
    }
    for (t, _) in engine.queue_keys() {
        if let Some(g) = t.strip_prefix(RETRY_PREFIX).or(t.strip_prefix(DLQ_PREFIX)) {
            set.insert(g.to_string());
        }
    }
    set
}
