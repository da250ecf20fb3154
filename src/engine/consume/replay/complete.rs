//! What follows from an outcome: a success consumed, a failure sent back (retry level, DLQ,
//! acknowledged) or, orderly, retried in place after a suspension; a failed send-back consumed
//! again locally; an interrupted message given back.

use super::{stored_reconsume_times, Pending, QueueState, Replayer, SEND_BACK_FAILED_RETRY_MS};
use super::{Completion, Outcome, ReplayError};
use crate::engine::broker::orderly::{OrderlyOutcome, OrderlyStatus};
use crate::engine::broker::retry::SendBackOutcome;
use crate::engine::broker::EngineError;
use crate::engine::store::dispatch::dlq_topic;

impl Replayer {
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
}
