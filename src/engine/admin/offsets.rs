//! Offline changes to committed consumer offsets (`config/consumerOffset.json`): set a group's
//! offsets on a topic to an offset, a time or the queue's first or last message, clone one
//! group's offsets to another, or delete them. Each change is first a plan (per queue the old
//! and new offset and how many messages a consumer gets again or skips); [`apply`] writes it
//! the way the broker persists the file (fastjson form, the previous file kept as `.bak`,
//! written to `.tmp`, fsynced and renamed), under the broker's lock, after copying the old file
//! to a dated backup beside it.
//!
//! New offsets are computed as the broker computes them: `--to-time` is
//! `getOffsetInQueueByTime` with the store's rules (4.9 or 5.x), and every offset is clamped to
//! the queue's min and max, as `resetOffsetByTime` and the admin tools do.

use std::path::PathBuf;

use serde::Serialize;

use crate::engine::store::reader::Reader;
use crate::engine::store::safedir::StoreLock;
use crate::engine::store::version::BrokerVersion;
use crate::engine::Store;
use crate::format::config::{load, with_suffix, ConfigFile, ConsumerOffsets};
use crate::format::error::Result;

/// Where `set` moves a group's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Offset(i64),
    /// Epoch ms: the first message stored at or after it.
    Time(i64),
    First,
    Last,
}

/// One queue's committed offset before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueChange {
    pub topic: String,
    pub queue_id: i32,
    /// `None`: the group had no committed offset on this queue.
    pub old_offset: Option<i64>,
    /// `None`: the offset is deleted.
    pub new_offset: Option<i64>,
    pub min_offset: i64,
    pub max_offset: i64,
    /// Messages a consumer receives again (the offset moved back).
    pub redelivered: i64,
    /// Messages a consumer will never receive (the offset moved forward).
    pub skipped: i64,
}

/// What a change does to the table, and the table it leaves.
#[derive(Debug, Clone)]
pub struct OffsetPlan {
    pub changes: Vec<QueueChange>,
    /// The whole table after the change.
    pub table: ConsumerOffsets,
}

impl OffsetPlan {
    /// True when applying the plan would change no offset.
    pub fn is_empty(&self) -> bool {
        self.changes.iter().all(|c| c.old_offset == c.new_offset)
    }
}

/// The committed offsets of a store (`.bak` when the main file is missing or broken, as the
/// broker loads them).
pub fn load_offsets(store: &Store) -> Result<ConsumerOffsets> {
    match load::<ConsumerOffsets>(&store.config_dir()) {
        Ok(l) => Ok(l.value),
        Err(e) if !store.config_dir().join(ConsumerOffsets::FILE_NAME).exists() => {
            let bak = with_suffix(&store.config_dir().join(ConsumerOffsets::FILE_NAME), ".bak");
            if bak.exists() {
                Err(e)
            } else {
                Ok(ConsumerOffsets::new())
            }
        }
        Err(e) => Err(e),
    }
}

/// Min and max offset of a queue (0, 0 when the store has no consume queue for it).
fn bounds(store: &Store, topic: &str, queue_id: i32) -> Result<(i64, i64)> {
    let Some(cq) = store.queue(topic, queue_id) else {
        return Ok((0, 0));
    };
    let min = cq.min_offset(store.commitlog.min_offset())?;
    let max = cq.max_offset()?;
    Ok((to_i64(min), to_i64(max)))
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn change(
    topic: &str,
    queue_id: i32,
    old: Option<i64>,
    new: Option<i64>,
    min: i64,
    max: i64,
) -> QueueChange {
    let (redelivered, skipped) = match (old, new) {
        (Some(o), Some(n)) => ((o - n).max(0), (n - o).max(0)),
        _ => (0, 0),
    };
    QueueChange {
        topic: topic.to_string(),
        queue_id,
        old_offset: old,
        new_offset: new,
        min_offset: min,
        max_offset: max,
        redelivered,
        skipped,
    }
}

/// The queue ids of `topic`: its consume queues, and any the table already names.
fn queue_ids(store: &Store, table: &ConsumerOffsets, group: &str, topic: &str) -> Vec<i32> {
    let mut ids: Vec<i32> = store.topic_queues(topic).map(|q| q.queue_id).collect();
    if let Some(qs) = table.queues(topic, group) {
        ids.extend(qs.iter().map(|(q, _)| *q));
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Move `group`'s offsets on `topic` (one queue, or every queue of the topic) to `target`.
pub fn plan_set(
    store: &Store,
    table: &ConsumerOffsets,
    group: &str,
    topic: &str,
    queue: Option<i32>,
    target: Target,
    version: BrokerVersion,
) -> Result<OffsetPlan> {
    let reader = Reader::new(store);
    let ids = match queue {
        Some(q) => vec![q],
        None => queue_ids(store, table, group, topic),
    };
    let mut new_table = table.clone();
    let mut changes = Vec::new();
    for q in ids {
        let (min, max) = bounds(store, topic, q)?;
        let wanted = match target {
            Target::Offset(n) => n,
            Target::First => min,
            Target::Last => max,
            Target::Time(ts) => reader.offset_in_queue_by_time(topic, q, ts, version)?,
        };
        let new = wanted.clamp(min, max.max(min));
        new_table.set(topic, group, q, new);
        changes.push(change(
            topic,
            q,
            table.get(topic, group, q),
            Some(new),
            min,
            max,
        ));
    }
    Ok(OffsetPlan {
        changes,
        table: new_table,
    })
}

/// Give `to` the offsets `from` has (on `topic`, or on every topic but `from`'s own
/// `%RETRY%` topic, which `to` does not read), replacing what `to` had on those topics.
pub fn plan_clone(
    store: &Store,
    table: &ConsumerOffsets,
    from: &str,
    to: &str,
    topic: Option<&str>,
) -> Result<OffsetPlan> {
    let own_retry = crate::engine::store::dispatch::retry_topic(from);
    let mut new_table = table.clone();
    let mut changes = Vec::new();
    let sources: Vec<(String, Vec<(i32, i64)>)> = table
        .iter()
        .filter(|(t, g, _)| *g == from && topic.map_or(*t != own_retry, |x| x == *t))
        .map(|(t, _, qs)| (t.to_string(), qs.to_vec()))
        .collect();
    for (t, qs) in sources {
        let before: Vec<(i32, i64)> = table.queues(&t, to).map(<[_]>::to_vec).unwrap_or_default();
        new_table.remove(&t, to);
        for &(q, off) in &qs {
            let (min, max) = bounds(store, &t, q)?;
            new_table.set(&t, to, q, off);
            let old = before.iter().find(|(bq, _)| *bq == q).map(|(_, o)| *o);
            changes.push(change(&t, q, old, Some(off), min, max));
        }
        for &(q, off) in before
            .iter()
            .filter(|(q, _)| !qs.iter().any(|(s, _)| s == q))
        {
            let (min, max) = bounds(store, &t, q)?;
            changes.push(change(&t, q, Some(off), None, min, max));
        }
    }
    Ok(OffsetPlan {
        changes,
        table: new_table,
    })
}

/// Delete `group`'s offsets (on `topic`, or on every topic).
pub fn plan_delete(
    store: &Store,
    table: &ConsumerOffsets,
    group: &str,
    topic: Option<&str>,
) -> Result<OffsetPlan> {
    let mut new_table = table.clone();
    let mut changes = Vec::new();
    let doomed: Vec<(String, Vec<(i32, i64)>)> = table
        .iter()
        .filter(|(t, g, _)| *g == group && topic.is_none_or(|x| x == *t))
        .map(|(t, _, qs)| (t.to_string(), qs.to_vec()))
        .collect();
    for (t, qs) in doomed {
        new_table.remove(&t, group);
        for (q, off) in qs {
            let (min, max) = bounds(store, &t, q)?;
            changes.push(change(&t, q, Some(off), None, min, max));
        }
    }
    Ok(OffsetPlan {
        changes,
        table: new_table,
    })
}

/// Write the plan's table into the store whose lock is held (take it before reading the table
/// the plan was made from, so no broker writes between): the current file is first copied to
/// `consumerOffset.json.before-offsets-<time>`, then the new table is persisted as the broker
/// does. Returns the dated backup (`None` when the store had no file).
pub fn apply(lock: &StoreLock, plan: &OffsetPlan) -> Result<Option<PathBuf>> {
    crate::engine::admin::config::save_under_lock(lock, &plan.table, "offsets")
}
