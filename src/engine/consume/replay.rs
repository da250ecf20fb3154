//! Consuming a group's messages with a push consumer's semantics (`rmqstore replay`).
//!
//! A [`Replayer`] owns an [`Engine`] and plays one clustering push consumer of a group that holds
//! every queue of its topics and of its `%RETRY%` topic (ENGINE.md 5.1, 6):
//!
//! - queues start at the group's committed offset, or where a new consumer starts
//!   (`computePullFromWhere` with `CONSUME_FROM_LAST_OFFSET`, ENGINE.md 4.4);
//! - messages are pulled as the broker serves them (32 per pull) and handed out by
//!   [`Replayer::take`]; the caller consumes them (in parallel if it likes) and reports each
//!   [`Outcome`] with [`Replayer::complete`];
//! - concurrently: a failure is sent back (`CONSUMER_SEND_MSG_BACK`, delay level
//!   `3 + reconsumeTimes`, the DLQ past `maxReconsumeTimes`); a failed send-back is consumed
//!   again locally 5 s later. Orderly: one message per queue at a time, a failure suspends the
//!   queue and retries in place (`suspendCurrentQueueTimeMillis`), past `maxReconsumeTimes` the
//!   message is sent back to the DLQ (ENGINE.md 6.5); queues are locked on the engine's lock table;
//! - the committed offset of a queue is the smallest offset still being processed, or the next
//!   offset to pull when none is; it is committed in the engine after every completed message
//!   (and saved to the overlay by [`Replayer::close`]);
//! - the schedule service runs at every [`Replayer::take`]: delayed messages and retries are
//!   delivered when the engine's clock says they are due.
//!
//! Time is the engine's [`Clock`](crate::engine::broker::clock::Clock): with a `FakeClock`, [`Replayer::run`]
//! moves it to [`Replayer::next_wake`] whenever nothing is ready, so the whole 16-step retry
//! schedule runs in milliseconds. [`ScaledClock`] runs faster than real time for the CLI.
//!
//! An [`Outcome::Interrupted`] message (the run was stopped while it was being consumed) is
//! neither consumed nor failed: it stays below the committed offset and is delivered again by
//! the next run (at-least-once).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::engine::broker::client_offsets::ClientOffsets;
pub use crate::engine::broker::clock::ScaledClock;
use crate::engine::broker::offsets::ConsumeFrom;
use crate::engine::broker::orderly::{
    OrderlyOutcome, OrderlyQueue, OrderlyStatus, SUSPEND_DEFAULT_MS,
};
use crate::engine::broker::pull::{PullRequest, DEFAULT_PULL_BATCH};
use crate::engine::broker::rebalance::MessageQueue;
use crate::engine::broker::retry::{SendBackOutcome, DEFAULT_MAX_RECONSUME_TIMES};
use crate::engine::broker::schedule::DeliveryOutcome;
use crate::engine::broker::{Engine, EngineError};
use crate::engine::store::dispatch::RETRY_PREFIX;
use crate::engine::store::dispatch::{dlq_topic, retry_topic};
use crate::format::commitlog::message_in;
use crate::format::commitlog::prop;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::MessageRef;

/// The client id the replayer locks queues with.
pub const CLIENT_ID: &str = "rmqstore-replay@0";
/// How long a message whose send-back failed waits before it is consumed again locally.
pub const SEND_BACK_FAILED_RETRY_MS: i64 = 5_000;
/// How often the replayer looks again when nothing has a known due time.
pub const POLL_MS: i64 = 1_000;

/// How the replayer consumes.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub group: String,
    /// The subscribed topics; the group's retry topic is added.
    pub topics: Vec<String>,
    /// Orderly consumption (one message per queue at a time, retried in place).
    pub orderly: bool,
    /// `maxReconsumeTimes`: -1 is the consumer's default (16 concurrently, unbounded orderly).
    pub max_reconsume_times: i32,
    /// Orderly: `suspendCurrentQueueTimeMillis`.
    pub suspend_ms: i64,
    /// `pullBatchSize`.
    pub pull_batch: i32,
}

impl ReplayOptions {
    pub fn new(group: impl Into<String>, topics: Vec<String>) -> Self {
        ReplayOptions {
            group: group.into(),
            topics,
            orderly: false,
            max_reconsume_times: -1,
            suspend_ms: SUSPEND_DEFAULT_MS,
            pull_batch: DEFAULT_PULL_BATCH,
        }
    }
}

/// What the consumer made of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// `CONSUME_SUCCESS`.
    Success,
    /// `RECONSUME_LATER` (or `SUSPEND_CURRENT_QUEUE_A_MOMENT` when orderly).
    Failure,
    /// The run stopped while the message was consumed: delivered again by the next run.
    Interrupted,
}

/// What followed from an outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Completion {
    Consumed,
    /// Sent back; delivered again to the retry topic at `due_at`.
    Retry {
        delay_level: i32,
        due_at: i64,
    },
    /// Sent to the group's DLQ.
    DeadLetter {
        topic: String,
    },
    /// Orderly: the queue waits until `resume_at`, then the message is consumed again.
    Suspended {
        resume_at: i64,
    },
    /// The send-back failed: consumed again locally at `at`.
    LocalRetry {
        at: i64,
        error: String,
    },
    /// The group has `retryQueueNums <= 0`: the failure is acknowledged, nothing written.
    Acknowledged,
    Interrupted,
}

/// One message handed to the consumer.
#[derive(Debug, Clone)]
pub struct ReplayMessage {
    /// Pass it back to [`Replayer::complete`].
    pub ticket: u64,
    /// The queue it was pulled from.
    pub queue_topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commitlog_offset: i64,
    /// The topic the listener sees: `RETRY_TOPIC` for a message of the retry topic.
    pub consumer_topic: String,
    /// The reconsume count the listener sees (orderly: the consumer's in-memory count).
    pub reconsume_times: i32,
    /// The whole record.
    pub raw: Vec<u8>,
}

impl ReplayMessage {
    /// The record, its position set to its commitlog offset.
    pub fn message(&self) -> Option<MessageRef<'_>> {
        message_in(&self.raw, self.commitlog_offset)
    }
}

/// Counters of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReplayStats {
    /// Messages handed to the consumer (deliveries, retries included).
    pub delivered: u64,
    pub consumed: u64,
    /// Failures sent back to the retry topic.
    pub retried: u64,
    pub dead_lettered: u64,
    /// Orderly failures retried in place.
    pub suspended: u64,
    pub local_retries: u64,
    pub acknowledged: u64,
    pub interrupted: u64,
    /// Pulled units whose record could not be read (skipped).
    pub unreadable: u64,
    /// Delayed messages the schedule service delivered (any topic).
    pub delayed_delivered: u64,
    /// 5.x timer messages the timer wheel released (any topic).
    pub timers_delivered: u64,
}

/// One queue's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueProgress {
    pub topic: String,
    pub queue_id: i32,
    /// The committed offset (-1: none; `committed_offset` in JSON).
    #[serde(rename = "committed_offset")]
    pub committed: i64,
    pub max_offset: i64,
}

/// Why the replayer failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("no message in progress has ticket {0}")]
    UnknownTicket(u64),
}

/// Why [`Replayer::run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// Nothing left to consume and nothing waiting to be delivered.
    Idle,
    /// The stop flag was set, or the waiter refused to wait.
    Stopped,
}

#[derive(Debug, Clone)]
struct Pending {
    queue_offset: i64,
    commitlog_offset: i64,
    raw: Vec<u8>,
    not_before: i64,
}

#[derive(Debug)]
struct QueueState {
    next_pull: i64,
    buffered: VecDeque<Pending>,
    /// Queue offset -> ticket.
    in_flight: BTreeMap<i64, u64>,
    committed: i64,
    /// The max offset at which a pull made no progress (not pulled again until it moves).
    stalled_at: Option<i64>,
    orderly: Option<OrderlyQueue>,
    resume_at: i64,
}

impl QueueState {
    /// The offset to commit: the smallest one still being processed, else the next to pull.
    fn commit_value(&self) -> i64 {
        let buffered = self.buffered.iter().map(|p| p.queue_offset).min();
        let flying = self.in_flight.keys().next().copied();
        match (buffered, flying) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => self.next_pull,
        }
    }

    fn put_back(&mut self, p: Pending) {
        let at = self
            .buffered
            .iter()
            .position(|b| b.queue_offset > p.queue_offset)
            .unwrap_or(self.buffered.len());
        self.buffered.insert(at, p);
    }
}

type Key = (String, i32);

/// One push consumer of a group over an engine (see the module documentation).
pub struct Replayer {
    engine: Engine,
    options: ReplayOptions,
    /// Subscribed topics plus the retry topic.
    subscribed: Vec<String>,
    queues: BTreeMap<Key, QueueState>,
    tickets: HashMap<u64, (Key, Pending)>,
    next_ticket: u64,
    cursor: usize,
    stats: ReplayStats,
}

impl std::fmt::Debug for Replayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replayer")
            .field("engine", &self.engine)
            .field("group", &self.options.group)
            .field("subscribed", &self.subscribed)
            .field("in_flight", &self.tickets.len())
            .field("stats", &self.stats)
            .finish()
    }
}

fn stored_reconsume_times(raw: &[u8]) -> i32 {
    match parse_record(raw, 0, 0, false) {
        Ok(Record::Message(m)) => m.reconsume_times,
        _ => 0,
    }
}

impl Replayer {
    pub fn new(engine: Engine, options: ReplayOptions) -> Self {
        let retry = retry_topic(&options.group);
        let mut subscribed: Vec<String> = Vec::new();
        for t in options.topics.iter().chain(std::iter::once(&retry)) {
            if !subscribed.contains(t) {
                subscribed.push(t.clone());
            }
        }
        Replayer {
            engine,
            options,
            subscribed,
            queues: BTreeMap::new(),
            tickets: HashMap::new(),
            next_ticket: 1,
            cursor: 0,
            stats: ReplayStats::default(),
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn options(&self) -> &ReplayOptions {
        &self.options
    }

    /// The topics consumed: the subscription plus the group's retry topic.
    pub fn subscribed(&self) -> &[String] {
        &self.subscribed
    }

    pub fn stats(&self) -> &ReplayStats {
        &self.stats
    }

    /// Messages handed out and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.tickets.len()
    }

    fn max_reconsume(&self) -> i32 {
        if self.options.max_reconsume_times < 0 {
            if self.options.orderly {
                i32::MAX
            } else {
                DEFAULT_MAX_RECONSUME_TIMES
            }
        } else {
            self.options.max_reconsume_times
        }
    }

    /// Every queue of the subscribed topics, with its committed offset.
    pub fn progress(&self) -> Vec<QueueProgress> {
        self.queues
            .iter()
            .map(|((t, q), st)| QueueProgress {
                topic: t.clone(),
                queue_id: *q,
                committed: st.committed,
                max_offset: self.engine.queue_bounds(t, *q).1,
            })
            .collect()
    }

    /// Start tracking queues that appeared (the retry topic after the first send-back).
    fn refresh_queues(&mut self) {
        let group = self.options.group.clone();
        for t in &self.subscribed {
            for q in self.engine.queue_ids(t) {
                let key = (t.clone(), q);
                if self.queues.contains_key(&key) {
                    continue;
                }
                let committed = self.engine.committed_offset(&group, t, q);
                let max = self.engine.queue_bounds(t, q).1;
                let start = if committed >= 0 {
                    committed
                } else {
                    self.engine
                        .pull_from_where(&group, t, q, ConsumeFrom::LastOffset)
                        .unwrap_or(max)
                };
                let orderly = self.options.orderly.then(|| {
                    let mut oq = OrderlyQueue::new(MessageQueue::new(
                        t.clone(),
                        self.engine.options().broker_name.clone(),
                        q,
                    ));
                    oq.max_reconsume_times = self.options.max_reconsume_times;
                    oq.suspend_ms = self.options.suspend_ms;
                    oq
                });
                self.queues.insert(
                    key,
                    QueueState {
                        next_pull: start,
                        buffered: VecDeque::new(),
                        in_flight: BTreeMap::new(),
                        committed,
                        stalled_at: None,
                        orderly,
                        resume_at: i64::MIN,
                    },
                );
            }
        }
    }

    /// Run the schedule service, then hand out up to `max` messages that are ready, taking
    /// from the queues in turn.
    pub fn take(&mut self, max: usize) -> Result<Vec<ReplayMessage>, ReplayError> {
        let mut out = Vec::new();
        let delivered = self.engine.deliver_due()?;
        self.stats.delayed_delivered += delivered
            .iter()
            .filter(|d| matches!(d.outcome, DeliveryOutcome::Delivered(_)))
            .count() as u64;
        self.stats.timers_delivered += self.engine.deliver_due_timers()?.len() as u64;
        self.refresh_queues();
        if max == 0 {
            return Ok(out);
        }
        let keys: Vec<Key> = self.queues.keys().cloned().collect();
        let n = keys.len();
        if n == 0 {
            return Ok(out);
        }
        loop {
            let mut progressed = false;
            for i in 0..n {
                if out.len() >= max {
                    break;
                }
                let Some(key) = keys.get((self.cursor + i) % n) else {
                    continue;
                };
                if let Some(m) = self.take_one(key) {
                    out.push(m);
                    progressed = true;
                }
            }
            self.cursor = (self.cursor + 1) % n;
            if !progressed || out.len() >= max {
                break;
            }
        }
        self.stats.delivered += out.len() as u64;
        Ok(out)
    }

    fn take_one(&mut self, key: &Key) -> Option<ReplayMessage> {
        let now = self.engine.now();
        let orderly = self.options.orderly;
        let group = self.options.group.clone();
        {
            let st = self.queues.get_mut(key)?;
            if orderly {
                if !st.in_flight.is_empty() {
                    return None;
                }
                let oq = st.orderly.as_mut()?;
                if !oq.can_consume(now) {
                    let granted =
                        self.engine
                            .lock_batch(&group, CLIENT_ID, std::slice::from_ref(&oq.mq));
                    if !granted.is_empty() {
                        oq.locked(now);
                    }
                    if !oq.can_consume(now) {
                        return None;
                    }
                }
            }
        }
        if self.queues.get(key)?.buffered.is_empty() {
            self.pull(key);
        }
        let st = self.queues.get_mut(key)?;
        let pos = st.buffered.iter().position(|p| p.not_before <= now)?;
        if orderly && pos != 0 {
            return None;
        }
        let p = st.buffered.remove(pos)?;
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        st.in_flight.insert(p.queue_offset, ticket);
        let stored = stored_reconsume_times(&p.raw);
        let reconsume_times = match &st.orderly {
            Some(oq) => oq.reconsume_times(p.queue_offset, stored),
            None => stored,
        };
        let consumer_topic = if key.0.starts_with(RETRY_PREFIX) {
            match parse_record(&p.raw, 0, 0, false) {
                Ok(Record::Message(m)) => m
                    .property(prop::RETRY_TOPIC)
                    .map(|s| s.into_owned())
                    .unwrap_or_else(|| key.0.clone()),
                _ => key.0.clone(),
            }
        } else {
            key.0.clone()
        };
        let msg = ReplayMessage {
            ticket,
            queue_topic: key.0.clone(),
            queue_id: key.1,
            queue_offset: p.queue_offset,
            commitlog_offset: p.commitlog_offset,
            consumer_topic,
            reconsume_times,
            raw: p.raw.clone(),
        };
        self.tickets.insert(ticket, (key.clone(), p));
        Some(msg)
    }

    /// One pull of a queue whose buffer is empty.
    fn pull(&mut self, key: &Key) {
        let (topic, queue_id) = (key.0.as_str(), key.1);
        let (_, max) = self.engine.queue_bounds(topic, queue_id);
        let Some(st) = self.queues.get_mut(key) else {
            return;
        };
        if st.next_pull == max || st.stalled_at == Some(max) {
            return;
        }
        let r = self.engine.pull(&PullRequest {
            topic,
            queue_id,
            offset: st.next_pull,
            max_msgs: self.options.pull_batch,
            filter: None,
        });
        let before = st.next_pull;
        let found = r.messages.len();
        for pm in r.messages {
            let ok = pm.message().is_some_and(|m| m.topic == topic);
            if !ok {
                self.stats.unreadable += 1;
                continue;
            }
            st.buffered.push_back(Pending {
                queue_offset: pm.queue_offset,
                commitlog_offset: pm.commitlog_offset,
                raw: pm.raw,
                not_before: i64::MIN,
            });
        }
        st.next_pull = r.next_begin_offset;
        st.stalled_at = (found == 0 && st.next_pull == before).then_some(max);
        self.commit_queue(key);
    }

    fn commit_queue(&mut self, key: &Key) {
        let Some(st) = self.queues.get_mut(key) else {
            return;
        };
        let v = st.commit_value();
        if v != st.committed {
            self.engine
                .commit_offset(&self.options.group, &key.0, key.1, v);
            st.committed = v;
        }
    }

    /// Report what the consumer made of a message handed out by [`Replayer::take`]; commits
    /// the queue's offset.
    pub fn complete(&mut self, ticket: u64, outcome: Outcome) -> Result<Completion, ReplayError> {
        let (key, mut p) = self
            .tickets
            .remove(&ticket)
            .ok_or(ReplayError::UnknownTicket(ticket))?;
        let now = self.engine.now();
        let group = self.options.group.clone();
        let max = self.max_reconsume();
        let stored = stored_reconsume_times(&p.raw);
        let Some(st) = self.queues.get_mut(&key) else {
            return Err(ReplayError::UnknownTicket(ticket));
        };
        st.in_flight.remove(&p.queue_offset);
        let local_retry = |st: &mut QueueState, mut p: Pending, e: EngineError| {
            let at = now.saturating_add(SEND_BACK_FAILED_RETRY_MS);
            p.not_before = at;
            st.put_back(p);
            Completion::LocalRetry {
                at,
                error: e.to_string(),
            }
        };
        let send_back_completion = |r: SendBackOutcome| match r {
            SendBackOutcome::Retry {
                delay_level,
                due_at,
                ..
            } => Completion::Retry {
                delay_level,
                due_at,
            },
            SendBackOutcome::DeadLetter { .. } => Completion::DeadLetter {
                topic: dlq_topic(&group),
            },
            SendBackOutcome::Acknowledged => Completion::Acknowledged,
        };
        let completion = match (outcome, st.orderly.as_mut()) {
            (Outcome::Interrupted, _) => {
                st.put_back(p);
                Completion::Interrupted
            }
            (Outcome::Success, Some(oq)) => {
                oq.on_result(&[(p.queue_offset, stored)], OrderlyStatus::Success, now);
                Completion::Consumed
            }
            (Outcome::Success, None) => Completion::Consumed,
            (Outcome::Failure, None) => {
                match self
                    .engine
                    .send_back(&group, p.commitlog_offset, 0, Some(max))
                {
                    Ok(r) => send_back_completion(r),
                    Err(e) => local_retry(st, p, e),
                }
            }
            (Outcome::Failure, Some(oq)) => {
                let r = oq.on_result(
                    &[(p.queue_offset, stored)],
                    OrderlyStatus::SuspendCurrentQueueAMoment,
                    now,
                );
                match r {
                    OrderlyOutcome::Suspended { resume_at, .. } => {
                        st.resume_at = resume_at;
                        p.not_before = i64::MIN;
                        st.put_back(p);
                        Completion::Suspended { resume_at }
                    }
                    OrderlyOutcome::SendBack { messages, .. } => {
                        let rc = messages.first().map(|m| m.1).unwrap_or(stored);
                        match self
                            .engine
                            .orderly_send_back(&group, p.commitlog_offset, rc, max)
                        {
                            Ok(r) => send_back_completion(r),
                            Err(e) => local_retry(st, p, e),
                        }
                    }
                    OrderlyOutcome::Commit(_) => Completion::Consumed,
                }
            }
        };
        match &completion {
            Completion::Consumed => self.stats.consumed += 1,
            Completion::Retry { .. } => self.stats.retried += 1,
            Completion::DeadLetter { .. } => self.stats.dead_lettered += 1,
            Completion::Suspended { .. } => self.stats.suspended += 1,
            Completion::LocalRetry { .. } => self.stats.local_retries += 1,
            Completion::Acknowledged => self.stats.acknowledged += 1,
            Completion::Interrupted => self.stats.interrupted += 1,
        }
        self.commit_queue(&key);
        Ok(completion)
    }

    /// The topics whose parked messages the run waits for: the subscription, the retry topic
    /// and the DLQ (a 4.9 orderly send-back parks DLQ-bound copies).
    fn waits_for(&self) -> BTreeSet<String> {
        let mut set: BTreeSet<String> = self.subscribed.iter().cloned().collect();
        set.insert(dlq_topic(&self.options.group));
        set
    }

    /// Due times of parked messages bound for the group's topics.
    /// Due times of delayed and timer messages bound for the queues consumed.
    fn relevant_delayed(&self) -> Vec<i64> {
        let set = self.waits_for();
        let mut due: Vec<i64> = self
            .engine
            .pending_delayed()
            .into_iter()
            .filter(|d| d.real_topic.as_ref().is_some_and(|t| set.contains(t)))
            .map(|d| d.due)
            .collect();
        due.extend(
            self.engine
                .timer_report(false)
                .pending()
                .filter(|m| m.real_topic.as_ref().is_some_and(|t| set.contains(t)))
                .map(|m| m.release_timestamp),
        );
        due
    }

    fn drained(&self, key: &Key, st: &QueueState) -> bool {
        let max = self.engine.queue_bounds(&key.0, key.1).1;
        st.buffered.is_empty()
            && st.in_flight.is_empty()
            && (st.next_pull == max || st.stalled_at == Some(max))
    }

    /// Nothing in progress, every queue consumed to its end, and nothing parked for the group.
    pub fn is_idle(&self) -> bool {
        self.tickets.is_empty()
            && self.queues.iter().all(|(k, st)| self.drained(k, st))
            && self.relevant_delayed().is_empty()
    }

    /// When something may next become ready: a delayed message's due time, the end of an
    /// orderly suspension, a local retry; `None` when idle.
    pub fn next_wake(&self) -> Option<i64> {
        let now = self.engine.now();
        let mut best: Option<i64> = None;
        let mut cand = |t: i64| {
            let t = t.max(now.saturating_add(1));
            best = Some(best.map_or(t, |b| b.min(t)));
        };
        for st in self.queues.values() {
            for p in &st.buffered {
                if p.not_before > now {
                    cand(p.not_before);
                }
            }
            if st.orderly.is_some() && !st.buffered.is_empty() && st.resume_at > now {
                cand(st.resume_at);
            }
        }
        let delayed = self.relevant_delayed();
        if let Some(d) = delayed.iter().min() {
            cand(*d);
            if let Some(t) = self.engine.next_delivery_time() {
                cand(t.max(now.saturating_add(100)));
            }
            if let Some(t) = self.engine.next_timer_release() {
                cand(t);
            }
        }
        if best.is_none() && !self.is_idle() {
            return Some(now.saturating_add(POLL_MS));
        }
        best
    }

    /// Consume one message at a time with `consume` until idle or stopped. When nothing is
    /// ready, `wait_until` is asked to wait until the engine's clock reaches the given time (a
    /// test moves its `FakeClock`; the caller sleeps); it returns false to stop.
    pub fn run(
        &mut self,
        consume: &mut dyn FnMut(&ReplayMessage) -> Outcome,
        wait_until: &mut dyn FnMut(i64) -> bool,
        stop: &AtomicBool,
    ) -> Result<RunEnd, ReplayError> {
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(RunEnd::Stopped);
            }
            if let Some(m) = self.take(1)?.into_iter().next() {
                let outcome = if stop.load(Ordering::SeqCst) {
                    Outcome::Interrupted
                } else {
                    consume(&m)
                };
                self.complete(m.ticket, outcome)?;
                continue;
            }
            if self.is_idle() {
                return Ok(RunEnd::Idle);
            }
            let Some(t) = self.next_wake() else {
                return Ok(RunEnd::Idle);
            };
            if !wait_until(t) {
                return Ok(RunEnd::Stopped);
            }
        }
    }

    /// Give every message still in progress back (it is delivered again by the next run),
    /// then save the offsets and everything the engine wrote to the overlay.
    pub fn close(self) -> Result<ReplayStats, ReplayError> {
        Ok(self.finish()?.0)
    }

    /// [`Replayer::close`], giving back the broadcasting client's offsets the engine used (with
    /// the offsets committed by the run) for the caller to persist.
    pub fn finish(mut self) -> Result<(ReplayStats, Option<ClientOffsets>), ReplayError> {
        let tickets: Vec<u64> = self.tickets.keys().copied().collect();
        for t in tickets {
            self.complete(t, Outcome::Interrupted)?;
        }
        let stats = self.stats.clone();
        let client = self.engine.take_client_offsets();
        self.engine.close()?;
        Ok((stats, client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_value_is_the_smallest_in_progress() {
        let mut st = QueueState {
            next_pull: 40,
            buffered: VecDeque::new(),
            in_flight: BTreeMap::new(),
            committed: -1,
            stalled_at: None,
            orderly: None,
            resume_at: i64::MIN,
        };
        assert_eq!(st.commit_value(), 40);
        let p = |o| Pending {
            queue_offset: o,
            commitlog_offset: 0,
            raw: Vec::new(),
            not_before: i64::MIN,
        };
        st.put_back(p(35));
        st.put_back(p(33));
        st.in_flight.insert(34, 1);
        assert_eq!(st.commit_value(), 33);
        assert_eq!(
            st.buffered
                .iter()
                .map(|p| p.queue_offset)
                .collect::<Vec<_>>(),
            [33, 35]
        );
        st.buffered.clear();
        assert_eq!(st.commit_value(), 34);
    }
}
