//! What consumers ask of the engine: pulls, committed offsets and where a queue starts, resets by
//! time, and the orderly consumers' queue locks.

use std::collections::BTreeSet;

use super::{Engine, EngineError, EngineResult, PutResult, OFFSET_MOVED_EVENT};
use crate::engine::broker::client_offsets::ClientOffsets;
use crate::engine::broker::offsets::{
    compute_pull_from_where, offset_for_unknown_group, ConsumeFrom, QueueStart,
};
use crate::engine::broker::pull::{
    get_message, get_message_with, BrokerRole, PullRequest, PullResult, PullStatus,
};
use crate::engine::broker::rebalance::MessageQueue;
use crate::engine::store::dispatch::RETRY_PREFIX;
use crate::engine::store::reader::Reader;
use crate::engine::store::version::BrokerVersion;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::{Message, MessageVersion};
use crate::format::consumequeue::CqUnit;

impl Engine {
    /// `getMessage` with the engine's options: the store's answer, nothing written.
    pub fn pull(&self, req: &PullRequest<'_>) -> PullResult {
        get_message(self, req, &self.options.pull_options())
    }

    /// [`Engine::pull`] with the records left where they are (each `raw` empty; read them
    /// with [`PullSource::read`]).
    pub fn pull_in_place(&self, req: &PullRequest<'_>) -> PullResult {
        get_message_with(self, req, &self.options.pull_options(), false)
    }

    /// A consumer's pull as `PullMessageProcessor` serves it (ENGINE.md 2.4, 2.6): the store's
    /// answer; then `commit_offset` (the client's offset carried by the request) is committed,
    /// except by a 4.9 slave; and a 4.9 master writes an `OFFSET_MOVED_EVENT` record for every
    /// `PULL_OFFSET_MOVED` answer.
    pub fn process_pull(
        &mut self,
        group: &str,
        req: &PullRequest<'_>,
        commit_offset: Option<i64>,
    ) -> EngineResult<PullResult> {
        self.process_pull_with(group, req, commit_offset, true)
    }

    /// [`Engine::process_pull`]; without `copy_records` the records are left where they are
    /// (each `raw` empty; read them with [`PullSource::read`]).
    pub fn process_pull_with(
        &mut self,
        group: &str,
        req: &PullRequest<'_>,
        commit_offset: Option<i64>,
        copy_records: bool,
    ) -> EngineResult<PullResult> {
        let r = get_message_with(self, req, &self.options.pull_options(), copy_records);
        let v49 = self.options.version == BrokerVersion::V4_9;
        let master = self.options.role == BrokerRole::Master;
        if let Some(c) = commit_offset {
            if master || !v49 {
                self.commit_offset(group, req.topic, req.queue_id, c);
            }
        }
        let moved = r.pull_status(req.offset, self.options.role) == PullStatus::OffsetIllegal;
        if v49 && master && moved {
            self.write_offset_moved_event(group, req, r.next_begin_offset)?;
        }
        Ok(r)
    }

    /// `generateOffsetMovedEvent` (4.9): topic `OFFSET_MOVED_EVENT`, TAGS and KEYS the group,
    /// body the compact fastjson of the event.
    pub(super) fn write_offset_moved_event(
        &mut self,
        group: &str,
        req: &PullRequest<'_>,
        offset_new: i64,
    ) -> EngineResult<PutResult> {
        use crate::format::config::fastjson::write_string;
        let mut body = String::from("{\"consumerGroup\":");
        write_string(&mut body, group);
        body.push_str(",\"messageQueue\":{\"brokerName\":");
        write_string(&mut body, &self.options.broker_name);
        body.push_str(&format!(",\"queueId\":{},\"topic\":", req.queue_id));
        write_string(&mut body, req.topic);
        body.push_str(&format!(
            "}},\"offsetNew\":{offset_new},\"offsetRequest\":{}}}",
            req.offset
        ));
        self.ensure_topic(OFFSET_MOVED_EVENT, 1, 6);
        let now = self.now();
        let host = self.options.store_host;
        let msg = Message {
            topic: OFFSET_MOVED_EVENT.to_string(),
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp: now,
            born_host: host,
            store_timestamp: 0,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: body.into_bytes(),
            properties: crate::format::commitlog::encode_properties(
                &[("TAGS", group), ("KEYS", group), ("DELAY", "0")],
                self.options.trailing_separator(),
            ),
            version: MessageVersion::V1,
        };
        self.put_with_delay(msg, 0)
    }

    /// `queryOffset`: the group's committed offset, or -1. For the group of
    /// [`Engine::use_client_offsets`], the client's own offset (`readOffset(READ_FROM_STORE)`).
    pub fn committed_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        match self.client_for(group, topic) {
            Some(c) => c.get(topic, queue_id).unwrap_or(-1),
            None => {
                crate::engine::broker::offsets::query_offset(&self.offsets, group, topic, queue_id)
            }
        }
    }

    /// `commitOffset`: overwrite the group's offset (clustering; persisted on close). For the
    /// group of [`Engine::use_client_offsets`], the client's table (persisted by its owner).
    pub fn commit_offset(&mut self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        if let Some(c) = self.client.as_mut().filter(|c| c.covers(group, topic)) {
            c.set(topic, queue_id, offset);
            return;
        }
        self.offsets.set(topic, group, queue_id, offset);
        self.dirty.offsets = true;
    }

    /// Take a broadcasting client's offsets for its group: committed offsets of that group (its
    /// `%RETRY%` topic aside) are read from and written to `client`, not the broker's table.
    pub fn use_client_offsets(&mut self, client: ClientOffsets) {
        self.client = Some(client);
    }

    pub fn client_offsets(&self) -> Option<&ClientOffsets> {
        self.client.as_ref()
    }

    /// Give back the client's offsets (with what was committed since), to persist them.
    pub fn take_client_offsets(&mut self) -> Option<ClientOffsets> {
        self.client.take()
    }

    pub(super) fn client_for(&self, group: &str, topic: &str) -> Option<&ClientOffsets> {
        self.client.as_ref().filter(|c| c.covers(group, topic))
    }

    /// The topics `group` has committed offsets for (the client's, for a client's group).
    pub fn offset_topics(&self, group: &str) -> BTreeSet<String> {
        let mut set: BTreeSet<String> = self
            .offsets
            .iter()
            .filter(|(t, g, _)| *g == group && self.client_for(g, t).is_none())
            .map(|(t, _, _)| t.to_string())
            .collect();
        if let Some(c) = self.client.as_ref().filter(|c| c.group() == group) {
            set.extend(c.topics());
        }
        set
    }

    /// What the broker answers a client asking for the group's offset: the committed offset,
    /// else the new-group rule of ENGINE.md 4.1 (0 or -1). A broadcasting client asks no broker:
    /// its own offset or -1.
    pub fn query_consumer_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        let c = self.committed_offset(group, topic, queue_id);
        if c >= 0 || self.client_for(group, topic).is_some() {
            return c;
        }
        let (min, max) = self.queue_bounds(topic, queue_id);
        let head = (max > 0 && min == 0)
            .then(|| self.unit_at(topic, queue_id, 0))
            .flatten();
        let in_memory = head.is_some_and(|u| {
            let behind = self.commitlog_max().saturating_sub(u.offset);
            behind <= 0 || (behind as u64) <= self.options.memory_bytes
        });
        offset_for_unknown_group(
            min,
            head.is_some(),
            in_memory,
            self.options.version == BrokerVersion::V5,
        )
    }

    /// Where a push consumer of `group` starts on a newly assigned queue
    /// (`computePullFromWhere`); `None` when it skips the queue this round.
    pub fn pull_from_where(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        from: ConsumeFrom,
    ) -> Option<i64> {
        let (_, max) = self.queue_bounds(topic, queue_id);
        compute_pull_from_where(
            from,
            QueueStart {
                last_offset: self.query_consumer_offset(group, topic, queue_id),
                retry_topic: topic.starts_with(RETRY_PREFIX),
                max_offset: max,
            },
            |t| self.offset_by_time(topic, queue_id, t),
        )
    }

    /// `getOffsetInQueueByTime` over the source's files (4.9 or 5.x rules); for a time after the
    /// source's last message, the first in-memory unit stored at or after it (else max offset).
    pub fn offset_by_time(&self, topic: &str, queue_id: i32, ts: i64) -> i64 {
        let (min, max) = self.queue_bounds(topic, queue_id);
        let Some(view) = self.queues.get(&(topic.to_string(), queue_id)) else {
            return 0;
        };
        let store_time = |u: &CqUnit| {
            self.record_at(u.offset)
                .and_then(|r| match parse_record(&r, 0, 0, false) {
                    Ok(Record::Message(m)) => Some(m.store_timestamp),
                    _ => None,
                })
        };
        let tail_hit = || {
            view.tail
                .iter()
                .position(|u| store_time(u).is_some_and(|t| t >= ts))
                .map(|i| view.tail_start as i64 + i as i64)
                .unwrap_or(max)
        };
        if view.has_source_units() {
            let last_source = view
                .source
                .as_ref()
                .and_then(|cq| cq.unit_at(view.source_end - 1).ok().flatten())
                .and_then(|u| store_time(&u));
            if last_source.is_some_and(|t| t < ts) && !view.tail.is_empty() {
                return tail_hit();
            }
            let reader = Reader::new(&self.source);
            return reader
                .offset_in_queue_by_time(topic, queue_id, ts, self.options.version)
                .unwrap_or(min);
        }
        tail_hit()
    }

    /// Reset a group's offsets on `topic` to the messages stored at `ts` (-1: the max offset).
    /// 4.9 (`Broker2Client.resetOffset`): every queue needs a committed offset; without `force`
    /// an offset only moves back. 5.x: the target is written as is. Returns
    /// `(queue, old, new)` per queue.
    pub fn reset_offsets_by_time(
        &mut self,
        group: &str,
        topic: &str,
        ts: i64,
        force: bool,
    ) -> EngineResult<Vec<(i32, i64, i64)>> {
        let queues = self.queue_ids(topic);
        let mut plan = Vec::new();
        for q in queues {
            let old = self.committed_offset(group, topic, q);
            if old < 0 && self.options.version == BrokerVersion::V4_9 {
                return Err(EngineError::GroupHasNoOffset {
                    group: group.into(),
                    topic: topic.into(),
                });
            }
            let (_, max) = self.queue_bounds(topic, q);
            let target = if ts < 0 {
                max
            } else {
                self.offset_by_time(topic, q, ts)
            }
            .max(0);
            let new = if self.options.version == BrokerVersion::V5 || force || old < 0 {
                target
            } else {
                target.min(old)
            };
            plan.push((q, old, new));
        }
        for (q, _, new) in &plan {
            self.commit_offset(group, topic, *q, *new);
        }
        Ok(plan)
    }

    /// `lockBatchMQ`: lock `mqs` for `client_id` of `group` at the clock's now; returns the
    /// queues granted (free, already held by the client, or expired after 60 s).
    pub fn lock_batch(
        &mut self,
        group: &str,
        client_id: &str,
        mqs: &[MessageQueue],
    ) -> Vec<MessageQueue> {
        let now = self.now();
        self.locks.try_lock_batch(group, mqs, client_id, now)
    }

    /// `unlockBatchMQ`: release the locks `client_id` holds among `mqs`.
    pub fn unlock_batch(&mut self, group: &str, client_id: &str, mqs: &[MessageQueue]) {
        self.locks.unlock_batch(group, mqs, client_id);
    }

    /// The client holding a live lock on `mq` for `group`, if any.
    pub fn queue_owner(&self, group: &str, mq: &MessageQueue) -> Option<String> {
        self.locks.owner(group, mq, self.now()).map(str::to_string)
    }

    pub(crate) fn mark_delay_dirty(&mut self) {
        self.dirty.delay = true;
    }
}
