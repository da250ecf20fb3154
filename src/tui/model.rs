//! What the browser lists, read once when it opens: topics with their queues' bounds, and
//! consumer groups with their lag. Reads only consume queue ends and config: no scan.
//!
//! Lag follows `rmqstore info`: for every queue a group has an offset on in
//! `consumerOffset.json`, max offset minus that offset (never below 0), summed per group. A
//! group's retry and dead-letter queues are listed too when the group has no offset on them,
//! so their size shows, but they do not count in any lag.

use crate::engine::store::dispatch::{is_system_topic, DLQ_PREFIX, RETRY_PREFIX};
use crate::engine::Store;
use crate::format::config::{load, ConsumerOffsets};

#[derive(Debug, Clone)]
pub struct QueueRow {
    pub id: i32,
    pub min: u64,
    pub max: u64,
    /// Lag per group that has an offset on this queue.
    pub lags: Vec<(String, i64)>,
}

impl QueueRow {
    pub fn messages(&self) -> u64 {
        self.max.saturating_sub(self.min)
    }

    pub fn total_lag(&self) -> i64 {
        self.lags.iter().map(|(_, l)| *l).sum()
    }
}

#[derive(Debug, Clone)]
pub struct TopicRow {
    pub name: String,
    pub system: bool,
    pub queues: Vec<QueueRow>,
}

impl TopicRow {
    pub fn messages(&self) -> u64 {
        self.queues.iter().map(QueueRow::messages).sum()
    }

    /// Smallest min and largest max offset of its queues (`None` without queues).
    pub fn bounds(&self) -> Option<(u64, u64)> {
        let min = self.queues.iter().map(|q| q.min).min()?;
        let max = self.queues.iter().map(|q| q.max).max()?;
        Some((min, max))
    }
}

/// One queue of one consumer group.
#[derive(Debug, Clone)]
pub struct GroupRow {
    pub group: String,
    pub topic: String,
    pub queue: i32,
    /// The committed offset; -1 for a retry or DLQ queue the group has no offset on.
    pub offset: i64,
    pub max: u64,
    /// Messages not consumed yet; for a queue without offset, the messages it holds.
    pub lag: i64,
}

impl GroupRow {
    /// True when the row has a committed offset (its lag counts in the group's total).
    pub fn counts_in_lag(&self) -> bool {
        self.offset >= 0
    }
}

/// One consumer group: the topics it has offsets on and its total lag, as `rmqstore info`.
#[derive(Debug, Clone)]
pub struct GroupSummary {
    pub group: String,
    pub topics: usize,
    pub lag: i64,
    /// Messages in its retry and dead-letter queues (not in `lag`).
    pub retry_dlq: i64,
}

/// Topics (ordinary ones first, then system topics), group rows and group summaries.
pub struct StoreView {
    pub topics: Vec<TopicRow>,
    pub groups: Vec<GroupRow>,
    pub summaries: Vec<GroupSummary>,
}

pub fn load_view(store: &Store) -> StoreView {
    let cl_min = store.commitlog.min_offset();
    let offsets = load::<ConsumerOffsets>(&store.config_dir())
        .map(|l| l.value)
        .unwrap_or_default();
    let mut topics: Vec<TopicRow> = Vec::new();
    let mut groups = Vec::new();
    // Queue bounds read a page or two of each queue's files: on a cold cache that is disk
    // latency, so the queues are read on several threads at once.
    let queues: Vec<_> = store.queues.iter().collect();
    let bounds: Vec<(u64, u64)> = std::thread::scope(|s| {
        let chunk = queues.len().div_ceil(8).max(1);
        let handles: Vec<_> = queues
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|(_, cq)| {
                            let max = cq.max_offset_fast().unwrap_or(0);
                            (cq.min_offset(cl_min).unwrap_or(0).min(max), max)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(queues.chunks(chunk))
            .flat_map(|(h, part)| h.join().unwrap_or_else(|_| vec![(0, 0); part.len()]))
            .collect()
    });
    for (((topic, qid), _), (min, max)) in queues.into_iter().zip(bounds) {
        let mut lags = Vec::new();
        for (t, g, queues) in offsets.iter() {
            if t != topic {
                continue;
            }
            if let Some((_, off)) = queues.iter().find(|(q, _)| q == qid) {
                let lag = (max as i64).saturating_sub(*off).max(0);
                lags.push((g.to_string(), lag));
                groups.push(GroupRow {
                    group: g.to_string(),
                    topic: topic.clone(),
                    queue: *qid,
                    offset: *off,
                    max,
                    lag,
                });
            }
        }
        let row = QueueRow {
            id: *qid,
            min,
            max,
            lags,
        };
        match topics.last_mut() {
            Some(t) if &t.name == topic => t.queues.push(row),
            _ => topics.push(TopicRow {
                name: topic.clone(),
                system: is_system_topic(topic),
                queues: vec![row],
            }),
        }
    }
    topics.sort_by_key(|t| (t.system, t.name.clone()));
    // Offsets on queues the store has no consume queue for: lag 0, as `info` counts them.
    for (t, g, queues) in offsets.iter() {
        for &(qid, off) in queues {
            if store.queue(t, qid).is_none() {
                groups.push(GroupRow {
                    group: g.to_string(),
                    topic: t.to_string(),
                    queue: qid,
                    offset: off,
                    max: 0,
                    lag: 0,
                });
            }
        }
    }
    let mut names: Vec<String> = groups.iter().map(|g| g.group.clone()).collect();
    names.sort();
    names.dedup();
    for g in &names {
        for prefix in [RETRY_PREFIX, DLQ_PREFIX] {
            let topic = format!("{prefix}{g}");
            let Some(t) = topics.iter().find(|t| t.name == topic) else {
                continue;
            };
            for q in &t.queues {
                let known = groups
                    .iter()
                    .any(|r| &r.group == g && r.topic == topic && r.queue == q.id);
                if !known {
                    groups.push(GroupRow {
                        group: g.clone(),
                        topic: topic.clone(),
                        queue: q.id,
                        offset: -1,
                        max: q.max,
                        lag: q.messages() as i64,
                    });
                }
            }
        }
    }
    groups.sort_by(|a, b| (&a.group, &a.topic, a.queue).cmp(&(&b.group, &b.topic, b.queue)));
    let summaries = names
        .iter()
        .map(|g| {
            let rows: Vec<&GroupRow> = groups.iter().filter(|r| &r.group == g).collect();
            let mut topics: Vec<&str> = rows
                .iter()
                .filter(|r| r.counts_in_lag())
                .map(|r| r.topic.as_str())
                .collect();
            topics.dedup();
            GroupSummary {
                group: g.clone(),
                topics: topics.len(),
                lag: rows
                    .iter()
                    .filter(|r| r.counts_in_lag())
                    .fold(0i64, |a, r| a.saturating_add(r.lag)),
                retry_dlq: rows
                    .iter()
                    .filter(|r| !r.counts_in_lag())
                    .map(|r| r.lag)
                    .sum(),
            }
        })
        .collect();
    StoreView {
        topics,
        groups,
        summaries,
    }
}
