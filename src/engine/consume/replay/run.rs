//! The run: when the replayer is idle, when something next becomes ready, the loop that
//! consumes until idle or stopped, and closing.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Key, QueueState, Replayer, POLL_MS};
use super::{Outcome, ReplayError, ReplayMessage, ReplayStats, RunEnd};
use crate::engine::broker::client_offsets::ClientOffsets;
use crate::engine::store::dispatch::dlq_topic;

impl Replayer {
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
