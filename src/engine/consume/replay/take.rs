//! Handing messages out: the queues tracked as they appear, pulled as the broker serves them,
//! taken in turn (orderly: one at a time, under the queue's lock), and each queue's offset
//! committed.

use std::collections::{BTreeMap, VecDeque};

use super::{stored_reconsume_times, Key, Pending, QueueState, Replayer, CLIENT_ID};
use super::{ReplayError, ReplayMessage};
use crate::engine::broker::offsets::ConsumeFrom;
use crate::engine::broker::orderly::OrderlyQueue;
use crate::engine::broker::pull::PullRequest;
use crate::engine::broker::rebalance::MessageQueue;
use crate::engine::broker::schedule::DeliveryOutcome;
use crate::engine::store::dispatch::RETRY_PREFIX;
use crate::format::commitlog::prop;
use crate::format::commitlog::read::{parse_record, Record};

impl Replayer {
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

    pub(super) fn commit_queue(&mut self, key: &Key) {
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
}
