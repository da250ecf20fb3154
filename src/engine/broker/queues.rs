//! The queues as the engine sees them: the source's consume queue files followed by the units
//! held in memory, their bounds, units and records; the engine as a [`PullSource`].

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Engine;
use crate::engine::broker::pull::PullSource;
use crate::engine::broker::rebalance::MessageQueue;
use crate::engine::store::paths;
use crate::format::commitlog::message_in;
use crate::format::commitlog::Message;
use crate::format::consumequeue::{ConsumeQueue, CqUnit, UNIT_SIZE};
use crate::format::mapped::Mapped;

/// One queue as the engine sees it: the source's consume queue files, then units in memory.
#[derive(Debug, Clone, Default)]
pub(super) struct QueueView {
    pub(super) source: Option<ConsumeQueue>,
    pub(super) source_min: u64,
    /// Queue offsets `[.., source_end)` come from the source's files.
    pub(super) source_end: u64,
    /// Queue offset of `tail[0]`.
    pub(super) tail_start: u64,
    pub(super) tail: Vec<CqUnit>,
    /// `maxPhysicOffset`: end of the last unit's record, for the repeat rule.
    pub(super) max_physic: i64,
}

impl QueueView {
    pub(super) fn has_source_units(&self) -> bool {
        self.source.is_some() && self.source_end > 0
    }

    pub(super) fn max(&self) -> u64 {
        if self.tail.is_empty() && self.has_source_units() {
            self.source_end
        } else if self.tail.is_empty() {
            self.tail_start.max(self.source_end)
        } else {
            self.tail_start + self.tail.len() as u64
        }
    }

    pub(super) fn min(&self) -> u64 {
        if self.has_source_units() {
            self.source_min.min(self.max())
        } else {
            self.tail_start
        }
    }

    /// `putMessagePositionInfo`'s rules for a unit added in memory.
    pub(super) fn put(&mut self, unit: CqUnit, queue_offset: i64) -> bool {
        if unit.offset.saturating_add(i64::from(unit.size)) <= self.max_physic {
            return false;
        }
        // the overlay's writer numbers the units: a queue offset is never negative here
        let expected = u64::try_from(queue_offset).unwrap_or(0);
        if !self.has_source_units() && self.tail.is_empty() {
            self.tail_start = expected;
        } else if queue_offset != 0 && expected < self.max() {
            return false;
        }
        self.tail.push(unit);
        self.max_physic = unit.offset.saturating_add(i64::from(unit.size));
        true
    }
}

impl Engine {
    /// Every (topic, queue id) the engine knows, sorted.
    pub fn queue_keys(&self) -> Vec<(String, i32)> {
        self.queues.keys().cloned().collect()
    }

    /// The queue ids of `topic`: those with data, and those `topics.json` declares for reading.
    pub fn queue_ids(&self, topic: &str) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .queues
            .range((topic.to_string(), i32::MIN)..=(topic.to_string(), i32::MAX))
            .map(|((_, q), _)| *q)
            .collect();
        if let Some(tc) = self.topics.get(topic) {
            ids.extend(0..tc.read_queue_nums.max(0));
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The message queues a client would see for `topic` on this broker.
    pub fn message_queues(&self, topic: &str) -> Vec<MessageQueue> {
        self.queue_ids(topic)
            .into_iter()
            .map(|q| MessageQueue::new(topic, self.options.broker_name.clone(), q))
            .collect()
    }

    /// `(minOffset, maxOffset)` of a queue over source and overlay; `(0, 0)` when unknown.
    pub fn queue_bounds(&self, topic: &str, queue_id: i32) -> (i64, i64) {
        self.queues
            .get(&(topic.to_string(), queue_id))
            .map(|q| (q.min() as i64, q.max() as i64))
            .unwrap_or((0, 0))
    }

    /// The commitlog's max offset: the overlay's end once it holds records, else the source's
    /// end of data.
    pub fn commitlog_max(&self) -> i64 {
        if self.overlay.records.is_empty() {
            self.log.end as i64
        } else {
            self.overlay.next as i64
        }
    }

    /// The consume queue unit at `offset`, from the source's files or memory.
    pub fn unit_at(&self, topic: &str, queue_id: i32, offset: i64) -> Option<CqUnit> {
        self.units_from(topic, queue_id, offset, 1)?
            .into_iter()
            .next()
    }

    /// The record at commitlog offset `phy` (source or overlay), whole.
    pub fn record_at(&self, phy: i64) -> Option<Cow<'_, [u8]>> {
        let p = u64::try_from(phy).ok()?;
        if p >= self.overlay.start && !self.overlay.records.is_empty() {
            return self
                .overlay
                .records
                .get(&p)
                .map(|r| Cow::Borrowed(r.as_slice()));
        }
        let head = self.log.read(phy, 8)?;
        let size = crate::format::bytes::i32_at(head, 0)?;
        self.log.read(phy, size).map(Cow::Borrowed)
    }

    /// The commitlog file that holds `phy`, for printing: a source file, the overlay's file, or
    /// `(overlay in memory)`.
    pub fn record_file(&self, phy: i64) -> PathBuf {
        let Ok(p) = u64::try_from(phy) else {
            return self.source.commitlog.dir.clone();
        };
        if p >= self.overlay.start && !self.overlay.records.is_empty() {
            let file_size = self.source.geometry.commitlog_file_size.value.max(1);
            return match &self.overlay.dir {
                Some(d) => d
                    .join(paths::COMMITLOG)
                    .join(crate::format::filename::offset_to_name(p - p % file_size)),
                None => PathBuf::from("(overlay in memory)"),
            };
        }
        self.source
            .commitlog
            .segment_for(p)
            .map(|s| s.path.clone())
            .unwrap_or_else(|| self.source.commitlog.dir.clone())
    }

    /// The record at `phy` as an owned message.
    pub fn message_at(&self, phy: i64) -> Option<Message> {
        let raw = self.record_at(phy)?;
        message_in(&raw, phy).map(|m| m.to_owned_message())
    }

    /// A source consume queue file's map, kept for later reads (the files are not written).
    pub(super) fn cq_map(&self, path: &Path) -> Option<Arc<Mapped>> {
        let mut maps = self.cq_maps.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = maps.get(path) {
            return Some(m.clone());
        }
        let m = Arc::new(Mapped::open(path).ok()?);
        maps.insert(path.to_path_buf(), m.clone());
        Some(m)
    }
}

impl PullSource for Engine {
    fn queue_bounds(&self, topic: &str, queue_id: i32) -> (i64, i64) {
        Engine::queue_bounds(self, topic, queue_id)
    }

    fn units_from(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        limit: usize,
    ) -> Option<Vec<CqUnit>> {
        let view = self.queues.get(&(topic.to_string(), queue_id))?;
        let offset = u64::try_from(offset).ok()?;
        let per_file = self.source.geometry.cq_file_units.value.max(1);
        let file_end = offset - offset % per_file + per_file;
        let max = view.max();
        if offset >= max {
            return None;
        }
        let mut out = Vec::new();
        let mut next = offset;
        if offset < view.source_end {
            let cq = view.source.as_ref()?;
            let pos = offset * UNIT_SIZE as u64;
            let f = cq
                .files
                .iter()
                .find(|f| f.start <= pos && pos < f.start.saturating_add(f.len))?;
            let map = self.cq_map(&f.path)?;
            let file_stop = f.start.saturating_add(f.len) / UNIT_SIZE as u64;
            let stop = view.source_end.min(file_end).min(file_stop);
            while next < stop && out.len() < limit {
                let at = usize::try_from(next * UNIT_SIZE as u64 - f.start).ok()?;
                let Some(u) = map.get(at..).and_then(CqUnit::from_bytes) else {
                    break;
                };
                out.push(u);
                next += 1;
            }
            if next < view.source_end || next >= file_end {
                return Some(out);
            }
        }
        if next < view.tail_start {
            return if out.is_empty() { None } else { Some(out) };
        }
        let stop = max.min(file_end);
        while next < stop && out.len() < limit {
            let Some(u) = view.tail.get((next - view.tail_start) as usize) else {
                break;
            };
            out.push(*u);
            next += 1;
        }
        Some(out)
    }

    fn read(&self, phy: i64, size: i32) -> Option<Cow<'_, [u8]>> {
        let p = u64::try_from(phy).ok()?;
        if p >= self.overlay.start && !self.overlay.records.is_empty() {
            let r = self.overlay.records.get(&p)?;
            return (usize::try_from(size).ok()? == r.len()).then_some(Cow::Borrowed(r.as_slice()));
        }
        self.log.read(phy, size).map(Cow::Borrowed)
    }

    fn commitlog_max(&self) -> i64 {
        Engine::commitlog_max(self)
    }

    fn commitlog_file_size(&self) -> u64 {
        self.source.geometry.commitlog_file_size.value
    }

    fn cq_file_units(&self) -> u64 {
        self.source.geometry.cq_file_units.value
    }
}
