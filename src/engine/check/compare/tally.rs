//! Counts of the records found only in a store: how many, their bytes, offset and time range,
//! per topic and queue, and per consumer group how many it had not consumed (by the store's
//! `consumerOffset.json`). The size grows with the number of queues and groups, not of records.

use std::collections::HashMap;

use serde::Serialize;

use crate::engine::Store;
use crate::format::commitlog::MessageRef;
use crate::format::config::{load, ConsumerOffsets};
use crate::format::error::Error;

/// One queue's share of a [`Tally`].
#[derive(Debug, Clone, Serialize)]
pub struct QueueTally {
    pub topic: String,
    pub queue_id: i32,
    pub records: u64,
    pub bytes: u64,
    pub min_queue_offset: i64,
    pub max_queue_offset: i64,
}

/// How many records of a [`Tally`] one group had not consumed.
#[derive(Debug, Clone, Serialize)]
pub struct GroupCount {
    pub group: String,
    pub records: u64,
}

/// Records counted together.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub records: u64,
    pub bytes: u64,
    /// The first and the last record's commitlog offset.
    pub min_commitlog_offset: Option<u64>,
    pub max_commitlog_offset: Option<u64>,
    pub min_store_timestamp: Option<i64>,
    pub max_store_timestamp: Option<i64>,
    /// Per topic and queue, sorted.
    pub queues: Vec<QueueTally>,
    /// Per group that had not consumed some of them, sorted.
    pub unconsumed: Vec<GroupCount>,
}

impl Tally {
    pub fn add(&mut self, m: &MessageRef<'_>, unconsumed_by: &[String]) {
        self.records += 1;
        self.bytes += m.raw.len() as u64;
        let o = m.position;
        self.min_commitlog_offset = Some(self.min_commitlog_offset.map_or(o, |x| x.min(o)));
        self.max_commitlog_offset = Some(self.max_commitlog_offset.map_or(o, |x| x.max(o)));
        let t = m.store_timestamp;
        self.min_store_timestamp = Some(self.min_store_timestamp.map_or(t, |x| x.min(t)));
        self.max_store_timestamp = Some(self.max_store_timestamp.map_or(t, |x| x.max(t)));
        let key = (m.topic.as_ref(), m.queue_id);
        let at = self
            .queues
            .binary_search_by(|q| (q.topic.as_str(), q.queue_id).cmp(&key));
        let q = match at {
            Ok(i) => &mut self.queues[i],
            Err(i) => {
                self.queues.insert(
                    i,
                    QueueTally {
                        topic: m.topic.to_string(),
                        queue_id: m.queue_id,
                        records: 0,
                        bytes: 0,
                        min_queue_offset: m.queue_offset,
                        max_queue_offset: m.queue_offset,
                    },
                );
                &mut self.queues[i]
            }
        };
        q.records += 1;
        q.bytes += m.raw.len() as u64;
        q.min_queue_offset = q.min_queue_offset.min(m.queue_offset);
        q.max_queue_offset = q.max_queue_offset.max(m.queue_offset);
        for g in unconsumed_by {
            match self
                .unconsumed
                .binary_search_by(|c| c.group.as_str().cmp(g))
            {
                Ok(i) => self.unconsumed[i].records += 1,
                Err(i) => self.unconsumed.insert(
                    i,
                    GroupCount {
                        group: g.clone(),
                        records: 1,
                    },
                ),
            }
        }
    }
}

/// A group and its committed offset per queue id.
type GroupQueues = (String, Vec<(i32, i64)>);

/// A store's committed offsets by topic, for asking who had not consumed a record.
#[derive(Debug, Default)]
pub struct GroupOffsets {
    by_topic: HashMap<String, Vec<GroupQueues>>,
}

impl GroupOffsets {
    pub fn read(store: &Store) -> Result<GroupOffsets, Error> {
        let offsets = load::<ConsumerOffsets>(&store.config_dir())?.value;
        let mut by_topic: HashMap<String, Vec<GroupQueues>> = HashMap::new();
        for (topic, group, queues) in offsets.iter() {
            by_topic
                .entry(topic.to_string())
                .or_default()
                .push((group.to_string(), queues.to_vec()));
        }
        for v in by_topic.values_mut() {
            v.sort();
        }
        Ok(GroupOffsets { by_topic })
    }

    /// The groups with offsets on the record's topic that had not consumed it: no offset for its
    /// queue, or an offset at or below its queue offset. A record no consumer reads (a prepared
    /// or rolled-back half message) has none.
    pub fn unconsumed_by(&self, m: &MessageRef<'_>) -> Vec<String> {
        if !m.transaction_type().is_queued() {
            return Vec::new();
        }
        let Some(groups) = self.by_topic.get(m.topic.as_ref()) else {
            return Vec::new();
        };
        groups
            .iter()
            .filter(|(_, queues)| {
                queues
                    .iter()
                    .find(|(q, _)| *q == m.queue_id)
                    .is_none_or(|(_, committed)| *committed <= m.queue_offset)
            })
            .map(|(g, _)| g.clone())
            .collect()
    }
}
