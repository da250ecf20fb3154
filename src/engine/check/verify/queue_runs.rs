//! Each queue's run of records in the commitlog (queue offsets seen, units matched), as one
//! worker and as the whole pass see it.

use std::sync::Arc;

use super::props::FastMap;
use crate::engine::store::Store;
use crate::format::config::TopicConfigs;
use crate::format::consumequeue::ConsumeQueue;
use crate::format::mapped::Mapped;

#[derive(Debug, Clone)]
pub(super) struct QueueRun {
    pub(super) first_q: i64,
    pub(super) first_pos: u64,
    /// Commitlog offset of the queue's last record so far.
    pub(super) last_pos: u64,
    pub(super) next_q: i64,
    pub(super) count: u64,
    /// The consume queue's end (recovery's view), looked up once.
    pub(super) cq_end: u64,
    /// Records with a queue offset at or beyond `cq_end`.
    pub(super) beyond: u64,
    pub(super) first_beyond: Option<(u64, i64)>,
    /// Records whose consume queue unit points back at them, and their queue offsets as ranges.
    pub(super) matched: u64,
    pub(super) ranges: Vec<(u64, u64)>,
    pub(super) ranges_overflow: bool,
}

impl QueueRun {
    pub(super) fn add_matched(&mut self, q: u64) {
        self.matched += 1;
        add_range(&mut self.ranges, &mut self.ranges_overflow, q, q + 1);
    }
}

const MAX_RANGES: usize = 1024;

/// Append `[a, b)` to sorted, disjoint ranges (merging with the last one when adjacent).
pub(super) fn add_range(ranges: &mut Vec<(u64, u64)>, overflow: &mut bool, a: u64, b: u64) {
    if let Some(last) = ranges.last_mut() {
        if last.1 == a {
            last.1 = b;
            return;
        }
    }
    if ranges.len() < MAX_RANGES {
        ranges.push((a, b));
    } else {
        *overflow = true;
    }
}

/// A queue as one worker sees it: the run so far and the consume queue file it last read.
pub(super) struct SegQueue<'a> {
    pub(super) topic: Box<str>,
    /// The topic's queue count in topics.json when this queue id is not below it and the queue
    /// has no consume queue folder: every record of it is set aside (a damaged QUEUEID).
    pub(super) out_of_range: Option<i32>,
    pub(super) run: QueueRun,
    pub(super) cq: Option<&'a ConsumeQueue>,
    pub(super) map: Option<(u64, u64, Arc<Mapped>)>,
}

/// The queues a worker met, by the topic's number in the worker's [`TopicCache`] and queue id:
/// ids below [`DIRECT_QUEUE_IDS`] through a table per topic, others through a map.
#[derive(Default)]
pub(super) struct QueueRuns<'a> {
    /// Per topic number, per queue id: 0, or `n` for `queues[n - 1]`.
    direct: Vec<Vec<u32>>,
    other: FastMap<(u32, i32), u32>,
    pub(super) queues: Vec<(i32, SegQueue<'a>)>,
}

/// Queue ids a worker finds through a table (a topic has 4 or 8 queues by default, 1024 at most
/// in practice).
const DIRECT_QUEUE_IDS: usize = 1024;

impl<'a> QueueRuns<'a> {
    /// The queue `queue_id` of topic number `topic`, made by `make` when it is new.
    #[inline]
    pub(super) fn get_or_insert_with(
        &mut self,
        topic: u32,
        queue_id: i32,
        make: impl FnOnce() -> SegQueue<'a>,
    ) -> Option<&mut SegQueue<'a>> {
        let direct = usize::try_from(queue_id)
            .ok()
            .filter(|&q| q < DIRECT_QUEUE_IDS);
        let found = match direct {
            Some(q) => self
                .direct
                .get(topic as usize)
                .and_then(|t| t.get(q))
                .copied()
                .unwrap_or(0),
            None => self.other.get(&(topic, queue_id)).copied().unwrap_or(0),
        };
        let n = if found != 0 {
            found
        } else {
            self.queues.push((queue_id, make()));
            let n = self.queues.len() as u32;
            match direct {
                Some(q) => {
                    let t = topic as usize;
                    if self.direct.len() <= t {
                        self.direct.resize_with(t + 1, Vec::new);
                    }
                    let per = self.direct.get_mut(t)?;
                    if per.len() <= q {
                        per.resize(q + 1, 0);
                    }
                    *per.get_mut(q)? = n;
                }
                None => {
                    self.other.insert((topic, queue_id), n);
                }
            }
            n
        };
        let i = n.checked_sub(1)? as usize;
        self.queues.get_mut(i).map(|(_, sq)| sq)
    }
}

/// Per topic and queue id: the queue end recovery finds and the consume queue.
pub(super) type CqIndex<'a> = FastMap<&'a str, FastMap<i32, (u64, &'a ConsumeQueue)>>;

/// Queue count per topic in topics.json (`max(readQueueNums, writeQueueNums)`); empty when it
/// does not load.
pub(super) fn topic_queue_counts(store: &Store) -> FastMap<String, i32> {
    match crate::format::config::load::<TopicConfigs>(&store.config_dir()) {
        Ok(l) => l
            .value
            .iter()
            .map(|c| {
                (
                    c.topic_name.clone(),
                    c.read_queue_nums.max(c.write_queue_nums),
                )
            })
            .collect(),
        Err(_) => FastMap::default(),
    }
}
