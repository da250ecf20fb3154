//! Ordered consumption (ENGINE.md 6.5): the broker's per-queue lock table, so that one consumer
//! of a group holds a queue at a time, and the orderly consumer's handling of a result: retry in
//! place while the queue is held, commit on success, send back only past `maxReconsumeTimes`.
//! Times come from the engine's clock.

use std::collections::HashMap;

use crate::engine::broker::rebalance::MessageQueue;

/// `rocketmq.broker.rebalance.lockMaxLiveTime`: a broker lock older than this may be taken over.
pub const BROKER_LOCK_MAX_LIVE_MS: i64 = 60_000;
/// `rocketmq.client.rebalance.lockMaxLiveTime`: the client counts its lock expired after this.
pub const CLIENT_LOCK_MAX_LIVE_MS: i64 = 30_000;
/// `rocketmq.client.rebalance.lockInterval`: how often a client re-locks what it holds.
pub const LOCK_INTERVAL_MS: i64 = 20_000;
/// `suspendCurrentQueueTimeMillis` default and its clamp.
pub const SUSPEND_DEFAULT_MS: i64 = 1_000;

#[derive(Debug, Clone, PartialEq, Eq)]
struct LockEntry {
    client_id: String,
    last_update: i64,
}

/// `RebalanceLockManager`: group -> queue -> (client, last update).
#[derive(Debug, Clone, Default)]
pub struct QueueLocks {
    table: HashMap<String, HashMap<MessageQueue, LockEntry>>,
}

impl QueueLocks {
    pub fn new() -> Self {
        Self::default()
    }

    fn live(e: &LockEntry, now: i64) -> bool {
        now.saturating_sub(e.last_update) <= BROKER_LOCK_MAX_LIVE_MS
    }

    /// `tryLockBatch`: grant every queue that is free, already held by `client_id`, or whose
    /// lock expired; granting refreshes the lock time. Returns the queues granted.
    pub fn try_lock_batch(
        &mut self,
        group: &str,
        mqs: &[MessageQueue],
        client_id: &str,
        now: i64,
    ) -> Vec<MessageQueue> {
        let g = self.table.entry(group.to_string()).or_default();
        let mut granted = Vec::new();
        for mq in mqs {
            let free = match g.get(mq) {
                None => true,
                Some(e) => e.client_id == client_id || !Self::live(e, now),
            };
            if free {
                g.insert(
                    mq.clone(),
                    LockEntry {
                        client_id: client_id.to_string(),
                        last_update: now,
                    },
                );
                granted.push(mq.clone());
            }
        }
        granted
    }

    /// `unlockBatch`: remove the locks `client_id` owns among `mqs`.
    pub fn unlock_batch(&mut self, group: &str, mqs: &[MessageQueue], client_id: &str) {
        if let Some(g) = self.table.get_mut(group) {
            for mq in mqs {
                if g.get(mq).is_some_and(|e| e.client_id == client_id) {
                    g.remove(mq);
                }
            }
        }
    }

    /// The client holding `mq` now, if its lock is live.
    pub fn owner(&self, group: &str, mq: &MessageQueue, now: i64) -> Option<&str> {
        let e = self.table.get(group)?.get(mq)?;
        Self::live(e, now).then_some(e.client_id.as_str())
    }

    /// `isLocked`: `client_id` holds a live lock on `mq`.
    pub fn is_locked(&self, group: &str, mq: &MessageQueue, client_id: &str, now: i64) -> bool {
        self.owner(group, mq, now) == Some(client_id)
    }

    /// `isLockAllExpired`: the group holds no live lock (5.x sends such a group's retries to the
    /// DLQ at once, ENGINE.md 6.4).
    pub fn is_lock_all_expired(&self, group: &str, now: i64) -> bool {
        self.table
            .get(group)
            .is_none_or(|g| g.values().all(|e| !Self::live(e, now)))
    }
}

/// `ConsumeOrderlyStatus` as the engine sees it (a null result or an exception is `Suspend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderlyStatus {
    Success,
    SuspendCurrentQueueAMoment,
}

/// What the consumer does after a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderlyOutcome {
    /// Commit this offset (highest taken + 1).
    Commit(i64),
    /// The whole batch is taken again from `first_offset` at `resume_at`; nothing is written.
    Suspended { first_offset: i64, resume_at: i64 },
    /// Past `maxReconsumeTimes`: these queue offsets must be sent back (to `%RETRY%<group>`,
    /// which leads to the DLQ) with these reconsume counts; then the offset is committed.
    SendBack {
        messages: Vec<(i64, i32)>,
        commit: i64,
    },
}

/// One queue held by an orderly consumer (`ProcessQueue` plus `ConsumeMessageOrderlyService`).
#[derive(Debug, Clone)]
pub struct OrderlyQueue {
    pub mq: MessageQueue,
    /// `maxReconsumeTimes`; -1 (the default) means `Integer.MAX_VALUE`: retry in place forever.
    pub max_reconsume_times: i32,
    /// `suspendCurrentQueueTimeMillis`, clamped to [10, 30000].
    pub suspend_ms: i64,
    last_lock: Option<i64>,
    resume_at: i64,
    /// In-memory reconsume counts by queue offset.
    reconsume: HashMap<i64, i32>,
}

impl OrderlyQueue {
    pub fn new(mq: MessageQueue) -> Self {
        OrderlyQueue {
            mq,
            max_reconsume_times: -1,
            suspend_ms: SUSPEND_DEFAULT_MS,
            last_lock: None,
            resume_at: i64::MIN,
            reconsume: HashMap::new(),
        }
    }

    fn max(&self) -> i32 {
        if self.max_reconsume_times < 0 {
            i32::MAX
        } else {
            self.max_reconsume_times
        }
    }

    /// Record a successful (re)lock on the broker.
    pub fn locked(&mut self, now: i64) {
        self.last_lock = Some(now);
    }

    /// A lock refused or released.
    pub fn unlocked(&mut self) {
        self.last_lock = None;
    }

    /// Clustering consumption needs the lock held and not expired client-side, and no suspension.
    pub fn can_consume(&self, now: i64) -> bool {
        self.last_lock
            .is_some_and(|t| now.saturating_sub(t) <= CLIENT_LOCK_MAX_LIVE_MS)
            && now >= self.resume_at
    }

    /// The in-memory reconsume count of the message at `queue_offset` (starting from its stored
    /// RECONSUMETIMES).
    pub fn reconsume_times(&self, queue_offset: i64, stored: i32) -> i32 {
        self.reconsume.get(&queue_offset).copied().unwrap_or(stored)
    }

    /// `processConsumeResult` with auto-commit: `batch` holds (queue offset, stored reconsume
    /// times) in offset order.
    pub fn on_result(
        &mut self,
        batch: &[(i64, i32)],
        status: OrderlyStatus,
        now: i64,
    ) -> OrderlyOutcome {
        let Some(&(first, _)) = batch.first() else {
            return OrderlyOutcome::Commit(0);
        };
        let commit = batch.iter().map(|(o, _)| *o).max().unwrap_or(first) + 1;
        if status == OrderlyStatus::Success {
            for (o, _) in batch {
                self.reconsume.remove(o);
            }
            return OrderlyOutcome::Commit(commit);
        }
        let max = self.max();
        let mut suspend = false;
        let mut send_back = Vec::new();
        for &(o, stored) in batch {
            let rc = self.reconsume_times(o, stored);
            if rc >= max {
                send_back.push((o, rc));
            } else {
                suspend = true;
                self.reconsume.insert(o, rc.saturating_add(1));
            }
        }
        if suspend {
            let wait = self.suspend_ms.clamp(10, 30_000);
            self.resume_at = now.saturating_add(wait);
            OrderlyOutcome::Suspended {
                first_offset: first,
                resume_at: self.resume_at,
            }
        } else {
            for (o, _) in batch {
                self.reconsume.remove(o);
            }
            OrderlyOutcome::SendBack {
                messages: send_back,
                commit,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_per_queue_until_expiry() {
        let mut locks = QueueLocks::new();
        let q = MessageQueue::new("T", "broker-a", 0);
        let both = [q.clone(), MessageQueue::new("T", "broker-a", 1)];
        assert_eq!(locks.try_lock_batch("g", &both, "c1", 0).len(), 2);
        assert!(locks.try_lock_batch("g", &both, "c2", 1_000).is_empty());
        assert!(locks.is_locked("g", &q, "c1", 59_000));
        // c1 refreshes queue 0 only; queue 1 expires and c2 takes it
        locks.try_lock_batch("g", std::slice::from_ref(&q), "c1", 50_000);
        let got = locks.try_lock_batch("g", &both, "c2", 61_000);
        assert_eq!(got, vec![both[1].clone()]);
        assert_eq!(locks.owner("g", &q, 61_000), Some("c1"));
        // only the owner unlocks
        locks.unlock_batch("g", &both, "c2");
        assert_eq!(locks.owner("g", &both[1], 61_000), None);
        assert!(!locks.is_lock_all_expired("g", 61_000));
        assert!(locks.is_lock_all_expired("g", 200_000));
        assert!(locks.is_lock_all_expired("other", 0));
    }

    #[test]
    fn orderly_retries_in_place() {
        let mut oq = OrderlyQueue::new(MessageQueue::new("T", "b", 0));
        assert!(!oq.can_consume(0));
        oq.locked(0);
        assert!(oq.can_consume(0));
        let out = oq.on_result(
            &[(5, 0), (6, 0)],
            OrderlyStatus::SuspendCurrentQueueAMoment,
            100,
        );
        assert_eq!(
            out,
            OrderlyOutcome::Suspended {
                first_offset: 5,
                resume_at: 1_100
            }
        );
        assert!(!oq.can_consume(1_099) && oq.can_consume(1_100));
        assert_eq!(oq.reconsume_times(5, 0), 1);
        assert_eq!(
            oq.on_result(&[(5, 0), (6, 0)], OrderlyStatus::Success, 1_200),
            OrderlyOutcome::Commit(7)
        );
        assert!(!oq.can_consume(40_000)); // the lock expired client-side
                                          // with maxReconsumeTimes set, a message past it is sent back and the queue moves on
        oq.max_reconsume_times = 1;
        oq.locked(40_000);
        assert!(matches!(
            oq.on_result(&[(7, 0)], OrderlyStatus::SuspendCurrentQueueAMoment, 40_000),
            OrderlyOutcome::Suspended { .. }
        ));
        assert_eq!(
            oq.on_result(&[(7, 0)], OrderlyStatus::SuspendCurrentQueueAMoment, 41_000),
            OrderlyOutcome::SendBack {
                messages: vec![(7, 1)],
                commit: 8
            }
        );
    }
}
