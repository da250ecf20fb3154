//! Batches per target queue (a lane): which messages may share a batch, the batches waiting,
//! and the rate limit.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::engine::store::dispatch::RETRY_PREFIX;
use crate::send::outgoing::{Acked, Outgoing, SourceKey};
use crate::send::producer::SendError;
use crate::send::translate::Delay;

use super::*;

/// A message on its way: what the printer and the journal need of it.
#[derive(Debug, Clone)]
pub(super) struct Meta {
    pub(super) seq: u64,
    pub(super) key: SourceKey,
    pub(super) found: Found,
    pub(super) uniq_key: Option<String>,
    pub(super) delay: Delay,
    pub(super) resent: bool,
}

/// Messages of one lane sent together.
#[derive(Debug, Default)]
pub(super) struct Batch {
    pub(super) messages: Vec<Outgoing>,
    pub(super) meta: Vec<Meta>,
    pub(super) bytes: usize,
}

impl Batch {
    pub(super) fn first_seq(&self) -> u64 {
        self.meta.first().map_or(u64::MAX, |m| m.seq)
    }
    pub(super) fn pairs(&self) -> Vec<(u64, SourceKey)> {
        self.meta.iter().map(|m| (m.seq, m.key)).collect()
    }
}

/// A lane's batches: the one filling, the closed ones waiting, and whether one is in flight.
#[derive(Debug, Default)]
pub(super) struct LaneQueue {
    pub(super) open: Batch,
    pub(super) closed: VecDeque<Batch>,
    pub(super) busy: bool,
}

/// Bytes a message takes in a batch body (PROTOCOL.md 6.4).
pub(super) fn batch_len(o: &Outgoing) -> usize {
    20 + o.body.len() + 2 + o.properties.len()
}

/// A message that goes in a batch of its own.
pub(super) fn alone(o: &Outgoing) -> bool {
    o.delayed || o.topic.starts_with(RETRY_PREFIX)
}

/// Whether `o` may join a batch that starts with `first`.
pub(super) fn fits(first: &Outgoing, o: &Outgoing, loose_born_time: bool) -> bool {
    first.sys_flag == o.sys_flag
        && first.reconsume_times == o.reconsume_times
        && first.max_reconsume_times == o.max_reconsume_times
        && (loose_born_time || first.born_timestamp == o.born_timestamp)
}

impl LaneQueue {
    /// Add a message, closing batches as the rules say.
    pub(super) fn push(&mut self, o: Outgoing, meta: Meta, opts: &RunOptions) {
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
    pub(super) fn next_batch(&self, flush: bool) -> Option<u64> {
        if self.busy {
            return None;
        }
        match self.closed.front() {
            Some(b) => Some(b.first_seq()),
            None if flush && !self.open.messages.is_empty() => Some(self.open.first_seq()),
            None => None,
        }
    }

    pub(super) fn take(&mut self) -> Batch {
        self.closed
            .pop_front()
            .unwrap_or_else(|| std::mem::take(&mut self.open))
    }
}

/// A batch's send, in flight.
pub(super) type InFlight<'a> =
    Pin<Box<dyn Future<Output = (Lane, Batch, Result<Vec<Acked>, SendError>)> + 'a>>;

/// `--rate`: the time the next batch may start.
pub(super) struct Rate {
    pub(super) per_second: Option<f64>,
    pub(super) next: Instant,
}

impl Rate {
    pub(super) fn new(per_second: Option<f64>) -> Rate {
        Rate {
            per_second: per_second.filter(|r| r.is_finite() && *r > 0.0),
            next: Instant::now(),
        }
    }

    /// When a batch of `n` messages may start (now or later); counts it as started.
    pub(super) fn take(&mut self, n: usize) -> Option<Instant> {
        let r = self.per_second?;
        let now = Instant::now();
        if self.next > now {
            return Some(self.next);
        }
        self.next = self.next.max(now) + Duration::from_secs_f64(n as f64 / r);
        None
    }
}
