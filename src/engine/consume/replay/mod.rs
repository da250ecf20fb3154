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
//!
//! The impl by concern: `take` (queues tracked, pulled, their messages handed out), `complete`
//! (what follows from an outcome), `run` (idle, the next wake, the loop, closing); `types` holds
//! what a replay takes and gives.

mod complete;
mod run;
mod take;
mod types;

use std::collections::{BTreeMap, HashMap, VecDeque};

pub use crate::engine::broker::clock::ScaledClock;
use crate::engine::broker::orderly::OrderlyQueue;
use crate::engine::broker::retry::DEFAULT_MAX_RECONSUME_TIMES;
use crate::engine::broker::Engine;
use crate::engine::store::dispatch::retry_topic;
use crate::format::commitlog::read::{parse_record, Record};
pub use types::{
    Completion, Outcome, QueueProgress, ReplayError, ReplayMessage, ReplayOptions, ReplayStats,
    RunEnd,
};

/// The client id the replayer locks queues with.
pub const CLIENT_ID: &str = "rmqstore-replay@0";
/// How long a message whose send-back failed waits before it is consumed again locally.
pub const SEND_BACK_FAILED_RETRY_MS: i64 = 5_000;
/// How often the replayer looks again when nothing has a known due time.
pub const POLL_MS: i64 = 1_000;

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
