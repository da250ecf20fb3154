//! What a replay takes and gives: its options, the messages it hands out, what became of each,
//! its counters, the progress of its queues, why it stopped and why it failed.

use serde::Serialize;

use crate::engine::broker::orderly::SUSPEND_DEFAULT_MS;
use crate::engine::broker::pull::DEFAULT_PULL_BATCH;
use crate::engine::broker::EngineError;
use crate::format::commitlog::message_in;
use crate::format::commitlog::MessageRef;

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
    /// Pass it back to [`Replayer::complete`](super::Replayer::complete).
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

/// Why [`Replayer::run`](super::Replayer::run) returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// Nothing left to consume and nothing waiting to be delivered.
    Idle,
    /// The stop flag was set, or the waiter refused to wait.
    Stopped,
}
