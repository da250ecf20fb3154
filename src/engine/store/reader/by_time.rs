//! Offsets by store time: `getOffsetInQueueByTime` with the 4.9 rules (a queue file chosen by
//! its modification time, then a binary search) and the 5.x rules (a binary search over the
//! whole queue, the boundary picking the first or last unit at the time), and the per-queue
//! windows of a time range.

use super::*;

/// 5.x `BoundaryType`: `Lower` finds the first message stored at or after a time, `Upper` the last
/// one stored at or before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Boundary {
    Lower,
    Upper,
}

/// What [`Reader::time_window`] looks for.
#[derive(Debug, Clone, Copy)]
pub struct WindowQuery<'a> {
    pub topic: &'a str,
    /// One queue, or every queue of the topic.
    pub queue_id: Option<i32>,
    pub begin: i64,
    /// Inclusive.
    pub end: i64,
    /// Whose `getOffsetInQueueByTime` to report.
    pub version: BrokerVersion,
    /// Most hits per queue.
    pub max: usize,
}

/// The messages of one queue stored in a time window.
#[derive(Debug, Clone, Serialize)]
pub struct WindowQueue {
    pub topic: String,
    pub queue_id: i32,
    /// `getOffsetInQueueByTime(begin)` under the broker rules asked for.
    pub broker_offset: i64,
    /// First queue offset stored at or after `begin` (5.x `LOWER` rule), where the walk started.
    pub start: i64,
    pub hits: Vec<Hit>,
    /// Messages stored after `end` follow in this queue.
    pub more_after_end: bool,
    /// The walk stopped at `max` hits.
    pub capped: bool,
}

/// A file's modification time in ms, as `File.lastModified()` (0 when it cannot be read).
pub fn file_mtime_ms(f: &QueueFile) -> i64 {
    std::fs::metadata(&f.path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `low = minLogicOffset > fileFromOffset ? minLogicOffset - fileFromOffset : 0`.
fn low_pos(min_logic: u64, file_start: u64) -> i64 {
    min_logic.saturating_sub(file_start).min(i64::MAX as u64) as i64
}

/// The commitlog offset and size of the unit at byte `pos` of a consume queue file.
fn unit_head(buf: &[u8], pos: i64) -> Option<(i64, i32)> {
    let p = usize::try_from(pos).ok()?;
    Some((i64_at(buf, p)?, i32_at(buf, p.checked_add(8)?)?))
}

/// The file of a queue holding stream byte `pos`.
pub(super) fn file_for(cq: &ConsumeQueue, pos: u64) -> Option<&QueueFile> {
    let i = cq
        .files
        .partition_point(|f| f.start <= pos)
        .checked_sub(1)?;
    let f = cq.files.get(i)?;
    (pos < f.start.saturating_add(f.len)).then_some(f)
}

impl Reader<'_> {
    /// `getOffsetInQueueByTime(topic, queueId, ts)` with the rules of `version`: 4.9 picks the
    /// file by its modification time (read from the file system); 5.x uses `LOWER` and clamps.
    /// An unknown queue answers 0.
    pub fn offset_in_queue_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        ts: i64,
        version: BrokerVersion,
    ) -> Result<i64> {
        let Some(cq) = self.store.queue(topic, queue_id) else {
            return Ok(0);
        };
        match version {
            BrokerVersion::V4_9 => self.offset_by_time_49(cq, ts, &file_mtime_ms),
            BrokerVersion::V5 => self.offset_by_time_5x(cq, ts, Boundary::Lower),
        }
    }

    /// 4.9 `ConsumeQueue.getOffsetInQueueByTime`: the first file whose modification time
    /// (`file_time`, ms) is at or after `ts`, else the last; a binary search over its units by
    /// store time; an exact hit, or the nearer neighbour with ties going to the earlier one. A
    /// failed store-time read answers 0. No clamping.
    pub fn offset_by_time_49(
        &self,
        cq: &ConsumeQueue,
        ts: i64,
        file_time: &dyn Fn(&QueueFile) -> i64,
    ) -> Result<i64> {
        let q = self.loaded_queue(cq)?;
        let Some(&(file, written)) = q
            .files
            .iter()
            .find(|(f, _)| file_time(f) >= ts)
            .or(q.files.last())
        else {
            return Ok(0);
        };
        if written == 0 {
            return Ok(0);
        }
        let map = Mapped::open(&file.path)?;
        let buf = map.get(..written).unwrap_or_default();
        let start = file.start as i64;
        let cl_min = self.cl_min();
        let mut low = low_pos(q.min_logic, file.start);
        let mut high = written as i64 - UNIT_SIZE as i64;
        let (mut target, mut left, mut right) = (-1i64, -1i64, -1i64);
        let (mut left_v, mut right_v) = (-1i64, -1i64);
        while high >= low {
            let mid = (low + high) / (2 * UNIT_SIZE as i64) * UNIT_SIZE as i64;
            let Some((phy, size)) = unit_head(buf, mid) else {
                return Ok(0);
            };
            if phy < cl_min {
                low = mid + UNIT_SIZE as i64;
                left = mid;
                continue;
            }
            let t = self.pickup_store_timestamp(phy, size);
            if t < 0 {
                return Ok(0);
            } else if t == ts {
                target = mid;
                break;
            } else if t > ts {
                high = mid - UNIT_SIZE as i64;
                right = mid;
                right_v = t;
            } else {
                low = mid + UNIT_SIZE as i64;
                left = mid;
                left_v = t;
            }
        }
        let offset = if target != -1 {
            target
        } else if left_v == -1 {
            right
        } else if right_v == -1 {
            left
        } else if ts.wrapping_sub(left_v).wrapping_abs() > ts.wrapping_sub(right_v).wrapping_abs() {
            right
        } else {
            left
        };
        Ok((start + offset) / UNIT_SIZE as i64)
    }

    /// 5.x `ConsumeQueueStore.getOffsetInQueueByTime(topic, queueId, ts, boundary)`: the file is
    /// chosen by the store times of its first and last units (`LOWER`: the first but the last
    /// whose last unit is at or after `ts`, else the last; `UPPER`: the last whose first unit is
    /// at or before `ts`, else none); then `binarySearchInQueueByTime`; the result is clamped to
    /// `[minOffset, maxOffset]`.
    pub fn offset_by_time_5x(&self, cq: &ConsumeQueue, ts: i64, boundary: Boundary) -> Result<i64> {
        let q = self.loaded_queue(cq)?;
        let min = (q.min_logic / UNIT_SIZE as u64) as i64;
        let max = (q.end / UNIT_SIZE as u64) as i64;
        let raw = self.search_5x(&q, ts, boundary)?;
        Ok(raw.max(min).min(max))
    }

    fn search_5x(&self, q: &LoadedQueue<'_>, ts: i64, boundary: Boundary) -> Result<i64> {
        let n = q.files.len();
        if n == 0 {
            return Ok(0);
        }
        let unit = UNIT_SIZE as i64;
        let file_size = q.file_size as usize;
        let mut maps: Vec<Option<Mapped>> = Vec::with_capacity(n);
        for (f, _) in &q.files {
            maps.push(Mapped::open(&f.path).ok());
        }
        let pickup_at = |i: usize, pos: usize| -> i64 {
            let buf = maps.get(i).and_then(|m| m.as_deref()).unwrap_or_default();
            match unit_head(buf, pos as i64) {
                Some((phy, size)) => self.pickup_store_timestamp(phy, size),
                None => -1,
            }
        };
        let chosen = match boundary {
            Boundary::Lower => (0..n)
                .find(|&i| {
                    i + 1 < n && {
                        let written = q.files.get(i).map_or(0, |f| f.1);
                        let t = if written >= file_size && file_size >= UNIT_SIZE {
                            pickup_at(i, file_size - UNIT_SIZE)
                        } else {
                            -1
                        };
                        // an unknown stop time stays -1 (`DefaultMappedFile.stopTimestamp`)
                        let stop = if t > 0 { t } else { -1 };
                        stop >= ts
                    }
                })
                .unwrap_or(n - 1),
            Boundary::Upper => {
                let found = (0..n).rev().find(|&i| {
                    let written = q.files.get(i).map_or(0, |f| f.1);
                    let t = if written >= UNIT_SIZE {
                        pickup_at(i, 0)
                    } else {
                        -1
                    };
                    // an unknown start time stays -1, which is <= any ts >= -1
                    let start = if t > 0 { t } else { -1 };
                    start <= ts
                });
                match found {
                    Some(i) => i,
                    None => return Ok(0),
                }
            }
        };
        let Some(&(file, written)) = q.files.get(chosen) else {
            return Ok(0);
        };
        let Some(map) = maps.get(chosen).and_then(|m| m.as_ref()) else {
            return Ok(0);
        };
        let range = if written != 0 && written != file_size {
            written
        } else {
            file_size
        };
        if range > written || range < UNIT_SIZE {
            return Ok(0);
        }
        let buf = map.get(..range).unwrap_or_default();
        let start = file.start as i64;
        let cl_min = self.cl_min();
        let at = |pos: i64| -> Option<i64> {
            unit_head(buf, pos).map(|(phy, size)| self.pickup_store_timestamp(phy, size))
        };
        let ceiling = range as i64 - unit;
        let floor = low_pos(q.min_logic, file.start);
        let mut low = floor;
        let mut high = ceiling;
        let Some(t_ceiling) = at(ceiling) else {
            return Ok(0);
        };
        if t_ceiling < ts {
            return Ok(match boundary {
                Boundary::Lower => (start + ceiling + unit) / unit,
                Boundary::Upper => (start + ceiling) / unit,
            });
        }
        let Some(t_floor) = at(floor) else {
            return Ok(0);
        };
        if t_floor > ts {
            return Ok(match boundary {
                Boundary::Lower => start / unit,
                Boundary::Upper => 0,
            });
        }
        let (mut target, mut left, mut right) = (-1i64, -1i64, -1i64);
        while high >= low {
            let mid = (low + high) / (2 * unit) * unit;
            let Some((phy, size)) = unit_head(buf, mid) else {
                return Ok(0);
            };
            if phy < cl_min {
                low = mid + unit;
                left = mid;
                continue;
            }
            let t = self.pickup_store_timestamp(phy, size);
            if t < 0 {
                return Ok(0);
            } else if t == ts {
                target = mid;
                break;
            } else if t > ts {
                high = mid - unit;
                right = mid;
            } else {
                low = mid + unit;
                left = mid;
            }
        }
        let offset = if target != -1 {
            let mut best = target;
            match boundary {
                Boundary::Lower => {
                    while best - unit >= floor && at(best - unit) == Some(ts) {
                        best -= unit;
                    }
                }
                Boundary::Upper => {
                    while best + unit <= ceiling && at(best + unit) == Some(ts) {
                        best += unit;
                    }
                }
            }
            best
        } else {
            match boundary {
                Boundary::Lower => right,
                Boundary::Upper => left,
            }
        };
        Ok((start + offset) / unit)
    }

    fn cl_min(&self) -> i64 {
        if self.store.commitlog.segments.is_empty() {
            -1
        } else {
            self.store.commitlog.min_offset() as i64
        }
    }

    /// The messages of a topic (one queue, or all of them) stored in `[begin, end]`: each queue
    /// is entered at its first message stored at or after `begin` (5.x `LOWER` search) and walked
    /// until a message stored after `end`. `broker_offset` is what `getOffsetInQueueByTime(begin)`
    /// answers under `version`. At most `max` hits per queue.
    pub fn time_window(&self, w: &WindowQuery<'_>, filter: &TagFilter) -> Result<Vec<WindowQueue>> {
        let WindowQuery {
            topic,
            queue_id,
            begin,
            end,
            version,
            max,
        } = *w;
        let queues: Vec<&ConsumeQueue> = match queue_id {
            Some(q) => self.store.queue(topic, q).into_iter().collect(),
            None => self.store.topic_queues(topic).collect(),
        };
        let mut out = Vec::new();
        for cq in queues {
            let broker_offset = match version {
                BrokerVersion::V4_9 => self.offset_by_time_49(cq, begin, &file_mtime_ms)?,
                BrokerVersion::V5 => self.offset_by_time_5x(cq, begin, Boundary::Lower)?,
            };
            let start = self.offset_by_time_5x(cq, begin, Boundary::Lower)?;
            let mut w = WindowQueue {
                topic: cq.topic.clone(),
                queue_id: cq.queue_id,
                broker_offset,
                start,
                hits: Vec::new(),
                more_after_end: false,
                capped: false,
            };
            // the broker's answer is never negative; a queue before offset 0 is read from 0
            self.for_each_unit_from(cq, u64::try_from(start).unwrap_or(0), |q, u| {
                if u.is_pre_blank() {
                    return ControlFlow::Continue(());
                }
                let t = self.pickup_store_timestamp(u.offset, u.size);
                if t > end {
                    w.more_after_end = true;
                    return ControlFlow::Break(());
                }
                let Some(offset) = u.commitlog_offset() else {
                    return ControlFlow::Continue(());
                };
                if t < begin || !self.unit_matches(&u, filter) {
                    return ControlFlow::Continue(());
                }
                if w.hits.len() >= max {
                    w.capped = true;
                    return ControlFlow::Break(());
                }
                w.hits.push(Hit {
                    offset,
                    queue_offset: Some(q),
                });
                ControlFlow::Continue(())
            })?;
            out.push(w);
        }
        Ok(out)
    }
}
