//! 5.x timer messages (ENGINE.md 7.2, FORMAT.md 10.4) as the engine sees them: the timer files
//! of a store ([`TimerFiles`]), every message parked on `rmq_sys_wheel_timer` with its state
//! ([`TimerReport`]), the put-time parking of a message with a `TIMER_*` property, and delivery
//! when due.
//!
//! The state follows the broker's restart from `config/timercheck`: units of the timer topic's
//! queue before `lastTimerQueueOffset` were enqueued into the wheel; an enqueued message whose
//! slot is before `lastReadTimeMs` was delivered (or, in a roll slot, put back on the timer topic
//! for the rest of its delay, where it appears again as a newer record); everything else is
//! pending and is released at `TIMER_OUT_MS + timerPrecisionMs` (a message enqueued late is
//! released at once). The engine delivers a pending message straight to its real topic when that
//! time comes, rolled or not (the consumer sees the same copy; the intermediate roll records are
//! not written), and keeps its progress in the overlay's `config/timercheck`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::broker::pull::PullSource;
use crate::engine::broker::{property_pairs, set_property, Engine, EngineResult, PutResult};
use crate::engine::store::reader::Reader;
use crate::engine::store::timer_files::read_checkpoint;
use crate::engine::store::timer_files::TimerFiles;
use crate::format::commitlog::message_in;
use crate::format::commitlog::{encode_properties, prop, Message};
use crate::format::error::{Error, Result};
use crate::format::java::{parse_int, parse_long};
use crate::format::timer::{self, release_time, TimerCheckpoint, TimerUnit, TIMER_TOPIC};

/// Where a timer message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerState {
    /// In the wheel (or not yet enqueued), to be released at `release_timestamp`.
    Pending,
    /// Released to its real topic.
    Delivered,
    /// Its roll slot passed: it went back to the timer topic as a newer record.
    RolledOver,
}

/// The timer log unit of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UnitPlace {
    /// Position in the timer log.
    pub timerlog_position: u64,
    /// The second of the slot it is linked into (ms).
    pub slot_timestamp: i64,
    pub magic: i32,
    /// Linked into a roll slot (the delay is beyond the roll window).
    pub rolled: bool,
}

/// The copy a delivered message left on its real topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveredCopy {
    pub commitlog_offset: i64,
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub store_timestamp: i64,
    /// `TIMER_DEQUEUE_MS`.
    pub dequeue_timestamp: Option<i64>,
}

/// One message parked on `rmq_sys_wheel_timer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimerMessage {
    pub state: TimerState,
    pub uniq_key: Option<String>,
    pub real_topic: Option<String>,
    pub real_queue_id: Option<i32>,
    /// `TIMER_OUT_MS`: the normalized delivery time.
    pub timer_out_timestamp: i64,
    /// When the wheel releases it (`TIMER_OUT_MS` + precision).
    pub release_timestamp: i64,
    /// The `TIMER_DELIVER_MS` / `TIMER_DELAY_SEC` / `TIMER_DELAY_MS` the producer set.
    pub requested: std::collections::BTreeMap<String, String>,
    /// `TIMER_ROLL_TIMES` (0 when never rolled).
    pub roll_times: i32,
    /// Where the parked record is.
    pub commitlog_offset: i64,
    pub queue_offset: i64,
    pub store_timestamp: i64,
    /// Its timer log unit, once enqueued.
    pub unit: Option<UnitPlace>,
    /// For a delivered message, the copy on its real topic when it was found.
    pub delivered: Option<DeliveredCopy>,
}

/// Every timer message of a store, and the timer's progress.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TimerReport {
    /// `lastReadTimeMs` the state was judged against.
    pub read_timestamp: i64,
    /// `lastTimerQueueOffset`.
    pub enqueued_queue_offset: i64,
    /// Pending first, by release time; then delivered and rolled over, by queue offset.
    pub messages: Vec<TimerMessage>,
    /// Units of the timer topic whose record could not be read.
    pub unreadable: usize,
}

impl TimerReport {
    pub fn pending(&self) -> impl Iterator<Item = &TimerMessage> {
        self.messages
            .iter()
            .filter(|m| m.state == TimerState::Pending)
    }

    pub fn delivered(&self) -> impl Iterator<Item = &TimerMessage> {
        self.messages
            .iter()
            .filter(|m| m.state == TimerState::Delivered)
    }

    /// Counts over every pending message at `now`.
    pub fn counts(&self, now: i64) -> TimerCounts {
        let pending: Vec<&TimerMessage> = self.pending().collect();
        TimerCounts::of(self.read_timestamp, &pending, self.delivered().count(), now)
    }
}

/// Counts over a set of pending timer messages (`pending`, `info`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TimerCounts {
    /// The timer's read cursor (`lastReadTimeMs`): slots before it were delivered.
    pub read_timestamp: i64,
    pub pending: usize,
    /// Pending in a roll slot (due beyond the 2-day roll window when enqueued).
    pub rolled: usize,
    /// Released to their real topic already (in the store, or by an earlier engine run).
    pub delivered: usize,
    /// Released at or before now.
    pub due_now: usize,
    pub next_release_timestamp: Option<i64>,
    pub last_release_timestamp: Option<i64>,
    /// Pending per real topic, by topic.
    pub topics: Vec<TopicTimers>,
}

/// Pending timer messages of one real topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicTimers {
    pub topic: String,
    pub pending: usize,
}

impl TimerCounts {
    /// Count `pending` (and `delivered` others) at `now`.
    pub fn of(read_timestamp: i64, pending: &[&TimerMessage], delivered: usize, now: i64) -> Self {
        let mut topics = std::collections::BTreeMap::<String, usize>::new();
        for m in pending {
            *topics
                .entry(m.real_topic.clone().unwrap_or_default())
                .or_default() += 1;
        }
        TimerCounts {
            read_timestamp,
            pending: pending.len(),
            rolled: pending
                .iter()
                .filter(|m| m.unit.is_some_and(|u| u.rolled))
                .count(),
            delivered,
            due_now: pending
                .iter()
                .filter(|m| m.release_timestamp <= now)
                .count(),
            next_release_timestamp: pending.iter().map(|m| m.release_timestamp).min(),
            last_release_timestamp: pending.iter().map(|m| m.release_timestamp).max(),
            topics: topics
                .into_iter()
                .map(|(topic, pending)| TopicTimers { topic, pending })
                .collect(),
        }
    }
}

/// The timer's progress as the engine keeps it.
#[derive(Debug, Clone, Default)]
pub(crate) struct TimerProgress {
    /// `lastReadTimeMs`.
    pub read_time_ms: i64,
    /// `lastTimerQueueOffset`.
    pub enqueued: i64,
    pub checkpoint: TimerCheckpoint,
    /// The source store, whose timer log is read on first use.
    source_root: PathBuf,
    /// Units of the source's timer log by record offset (see [`TimerProgress::units`]).
    units: std::sync::OnceLock<HashMap<i64, (u64, TimerUnit)>>,
    /// Copies the engine delivered, by the parked record's offset.
    pub copies: HashMap<i64, PutResult>,
    pub precision_ms: i64,
    pub dirty: bool,
}

impl TimerProgress {
    /// From the source's `config/timercheck`, with the overlay's winning. A source checkpoint
    /// that cannot be read counts as absent (verify reports it), so that a damaged timer does
    /// not keep the engine from serving the other topics.
    pub fn load(source_root: &Path, overlay: Option<&Path>) -> Result<TimerProgress> {
        let source_cp = source_root.join("config").join(timer::TIMERCHECK_FILE);
        let mut cp = if source_cp.exists() {
            read_checkpoint(&source_cp).unwrap_or_default()
        } else {
            TimerCheckpoint::default()
        };
        if let Some(dir) = overlay {
            let p = dir.join("config").join(timer::TIMERCHECK_FILE);
            if p.exists() {
                cp = read_checkpoint(&p)?;
            }
        }
        Ok(TimerProgress {
            read_time_ms: cp.last_read_time_ms,
            enqueued: cp.last_timer_queue_offset,
            checkpoint: cp,
            source_root: source_root.to_path_buf(),
            units: std::sync::OnceLock::new(),
            copies: HashMap::new(),
            precision_ms: timer::DEFAULT_PRECISION_MS,
            dirty: false,
        })
    }

    /// The source's timer log units by the record they point at, read the first time a timer
    /// question is asked (a store without timer messages never reads them); a timer log that
    /// cannot be read gives none.
    pub fn units(&self) -> &HashMap<i64, (u64, TimerUnit)> {
        self.units.get_or_init(|| {
            TimerFiles::open(&self.source_root)
                .map(|f| f.units_by_record())
                .unwrap_or_default()
        })
    }

    /// The checkpoint to write to the overlay.
    pub fn to_checkpoint(&self) -> TimerCheckpoint {
        TimerCheckpoint {
            last_read_time_ms: self.read_time_ms,
            last_timer_queue_offset: self.enqueued,
            master_timer_queue_offset: self.enqueued,
            data_counter: self.checkpoint.data_counter + 1,
            ..self.checkpoint
        }
    }
}

/// The delivery time a producer asked for (`TIMER_DELAY_SEC`, `TIMER_DELAY_MS`, then
/// `TIMER_DELIVER_MS`, relative ones from `now`); `Err` when the value is not a number.
pub fn requested_deliver_ms(
    pairs: &[(String, String)],
    now: i64,
) -> Option<std::result::Result<i64, TimerRefused>> {
    let get = |n: &str| pairs.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    let num = |property: &'static str, v: &str| {
        parse_long(v).ok_or_else(|| TimerRefused::NotANumber {
            property,
            value: v.to_string(),
        })
    };
    if let Some(v) = get(prop::TIMER_DELAY_SEC) {
        return Some(
            num(prop::TIMER_DELAY_SEC, v).map(|s| now.saturating_add(s.saturating_mul(1000))),
        );
    }
    if let Some(v) = get(prop::TIMER_DELAY_MS) {
        return Some(num(prop::TIMER_DELAY_MS, v).map(|ms| now.saturating_add(ms)));
    }
    get(prop::TIMER_DELIVER_MS).map(|v| num(prop::TIMER_DELIVER_MS, v))
}

/// Why a put of a timer message was refused (`WHEEL_TIMER_MSG_ILLEGAL`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimerRefused {
    /// A `TIMER_*` property whose value is not a Java long.
    #[error(
        "timer message refused (WHEEL_TIMER_MSG_ILLEGAL): {property}={value:?} is not a number"
    )]
    NotANumber {
        property: &'static str,
        value: String,
    },
    /// A delivery time further ahead than `timerMaxDelaySec`.
    #[error(
        "timer message refused (WHEEL_TIMER_MSG_ILLEGAL): delivery {ahead_ms} ms ahead is beyond \
         timerMaxDelaySec ({max_delay_sec} s)"
    )]
    TooFarAhead { ahead_ms: i64, max_delay_sec: i64 },
}

/// `HookUtils.handleScheduleMessage` for a 5.x put: a message with a delay level loses its
/// timer properties; one with a `TIMER_*` delivery time in the future is parked on the timer
/// topic with `TIMER_OUT_MS`, `REAL_TOPIC` and `REAL_QID`. Returns whether it was parked.
pub fn park_if_timer(
    msg: &mut Message,
    delay_level: i32,
    now: i64,
    trailing_separator: bool,
) -> std::result::Result<bool, TimerRefused> {
    let mut pairs = property_pairs(&msg.properties);
    let has = |pairs: &[(String, String)], n: &str| pairs.iter().any(|(k, _)| k == n);
    if delay_level > 0 {
        let before = pairs.len();
        pairs.retain(|(k, _)| k != prop::TIMER_DELIVER_MS && k != prop::TIMER_DELAY_SEC);
        if pairs.len() != before {
            msg.properties = encode_properties(&pairs, trailing_separator);
        }
        return Ok(false);
    }
    if msg.topic == TIMER_TOPIC || has(&pairs, prop::TIMER_OUT_MS) {
        return Ok(false);
    }
    let Some(deliver) = requested_deliver_ms(&pairs, now) else {
        return Ok(false);
    };
    let deliver = deliver?;
    if deliver <= now {
        return Ok(false);
    }
    if deliver - now > timer::DEFAULT_MAX_DELAY_SEC * 1000 {
        return Err(TimerRefused::TooFarAhead {
            ahead_ms: deliver - now,
            max_delay_sec: timer::DEFAULT_MAX_DELAY_SEC,
        });
    }
    let out = timer::normalize_deliver_ms(deliver, timer::DEFAULT_PRECISION_MS);
    set_property(&mut pairs, prop::TIMER_OUT_MS, out.to_string());
    set_property(&mut pairs, prop::REAL_TOPIC, msg.topic.clone());
    set_property(&mut pairs, prop::REAL_QID, msg.queue_id.to_string());
    msg.properties = encode_properties(&pairs, trailing_separator);
    msg.topic = TIMER_TOPIC.to_string();
    msg.queue_id = 0;
    Ok(true)
}

impl Engine {
    /// Every message of the timer topic with its state at the engine's progress. With
    /// `find_copies`, delivered messages are matched to their copy on the real topic (through
    /// the index by `UNIQ_KEY`, or the engine's own deliveries).
    pub fn timer_report(&self, find_copies: bool) -> TimerReport {
        let t = &self.timer;
        let mut report = TimerReport {
            read_timestamp: t.read_time_ms,
            enqueued_queue_offset: t.enqueued,
            ..Default::default()
        };
        let reader = find_copies.then(|| Reader::new(&self.source));
        let (min, max) = self.queue_bounds(TIMER_TOPIC, 0);
        let mut o = min;
        while o < max {
            let Some(units) = self.units_from(TIMER_TOPIC, 0, o, 4096) else {
                let per_file = self.cq_file_units().max(1) as i64;
                o = o - o % per_file + per_file;
                continue;
            };
            if units.is_empty() {
                break;
            }
            for (i, u) in units.iter().enumerate() {
                let q = o + i as i64;
                match self.describe_timer(q, u.offset, u.size, reader.as_ref()) {
                    Some(m) => report.messages.push(m),
                    None => report.unreadable += 1,
                }
            }
            o += units.len() as i64;
        }
        report.messages.sort_by_key(|m| {
            (
                m.state != TimerState::Pending,
                if m.state == TimerState::Pending {
                    m.release_timestamp
                } else {
                    0
                },
                m.queue_offset,
            )
        });
        report
    }

    fn describe_timer(
        &self,
        queue_offset: i64,
        phy: i64,
        size: i32,
        reader: Option<&Reader<'_>>,
    ) -> Option<TimerMessage> {
        let t = &self.timer;
        let raw = self.read(phy, size)?;
        let m = message_in(&raw, phy)?;
        let out = m
            .property(prop::TIMER_OUT_MS)
            .and_then(|v| parse_long(&v))
            .unwrap_or(0);
        let unit = t.units().get(&phy).map(|(pos, u)| UnitPlace {
            timerlog_position: *pos,
            slot_timestamp: u.slot_time_ms(),
            magic: u.magic,
            rolled: u.is_roll(),
        });
        let state = match unit {
            Some(u) if u.rolled && u.slot_timestamp < t.read_time_ms => TimerState::RolledOver,
            _ if queue_offset >= t.enqueued => TimerState::Pending,
            _ if t.copies.contains_key(&phy) || out < t.read_time_ms => TimerState::Delivered,
            _ => TimerState::Pending,
        };
        let real_topic = m.property(prop::REAL_TOPIC).map(|s| s.into_owned());
        let uniq_key = m.uniq_key().map(|s| s.into_owned());
        let delivered = match (state, reader) {
            (TimerState::Delivered, Some(r)) => self.find_copy(r, phy, &uniq_key, &real_topic),
            _ => None,
        };
        let requested = m
            .properties
            .iter()
            .filter(|(k, _)| {
                [
                    prop::TIMER_DELIVER_MS,
                    prop::TIMER_DELAY_SEC,
                    prop::TIMER_DELAY_MS,
                ]
                .contains(&k.as_ref())
            })
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let release = if state == TimerState::Pending && queue_offset >= t.enqueued {
            // enqueued late: released as soon as it is read if its slot has passed
            release_time(out, t.precision_ms).max(t.read_time_ms)
        } else {
            release_time(out, t.precision_ms)
        };
        Some(TimerMessage {
            state,
            uniq_key,
            real_queue_id: m.property(prop::REAL_QID).and_then(|s| parse_int(&s)),
            real_topic,
            timer_out_timestamp: out,
            release_timestamp: release,
            requested,
            roll_times: m
                .property(prop::TIMER_ROLL_TIMES)
                .and_then(|s| parse_int(&s))
                .unwrap_or(0),
            commitlog_offset: phy,
            queue_offset,
            store_timestamp: m.store_timestamp,
            unit,
            delivered,
        })
    }

    /// The copy of the parked record at `phy` on its real topic.
    fn find_copy(
        &self,
        reader: &Reader<'_>,
        phy: i64,
        uniq: &Option<String>,
        topic: &Option<String>,
    ) -> Option<DeliveredCopy> {
        if let Some(p) = self.timer.copies.get(&phy) {
            return Some(DeliveredCopy {
                commitlog_offset: p.commitlog_offset as i64,
                topic: p.topic.clone(),
                queue_id: p.queue_id,
                queue_offset: p.queue_offset,
                store_timestamp: p.store_timestamp,
                dequeue_timestamp: Some(p.store_timestamp),
            });
        }
        let (uniq, topic) = (uniq.as_deref()?, topic.as_deref()?);
        let hits = reader.by_uniq_key(uniq, Some(topic), 64);
        hits.offsets.iter().find_map(|&o| {
            let l = reader.message_at(o).ok()??;
            let m = &l.message;
            let dequeue = m.property(prop::TIMER_DEQUEUE_MS)?;
            (m.position as i64 > phy).then(|| DeliveredCopy {
                commitlog_offset: m.position as i64,
                topic: m.topic.to_string(),
                queue_id: m.queue_id,
                queue_offset: m.queue_offset,
                store_timestamp: m.store_timestamp,
                dequeue_timestamp: parse_long(&dequeue),
            })
        })
    }

    /// The earliest release time of a pending timer message.
    pub fn next_timer_release(&self) -> Option<i64> {
        self.timer_report(false)
            .pending()
            .map(|m| m.release_timestamp)
            .min()
    }

    /// Release every pending timer message due at the engine's now to its real topic, earliest
    /// first, with `TIMER_ENQUEUE_MS` and `TIMER_DEQUEUE_MS` added; then move the read cursor
    /// to now (floored to the precision) and mark the whole timer queue enqueued.
    pub fn deliver_due_timers(&mut self) -> EngineResult<Vec<PutResult>> {
        let now = self.now();
        let report = self.timer_report(false);
        let due: Vec<TimerMessage> = report
            .pending()
            .filter(|m| m.release_timestamp <= now)
            .cloned()
            .collect();
        let mut done = Vec::new();
        for m in &due {
            let Some(mut msg) = self.message_at(m.commitlog_offset) else {
                continue;
            };
            let (Some(topic), Some(qid)) = (m.real_topic.clone(), m.real_queue_id) else {
                continue;
            };
            let trailing = self.options.trailing_separator();
            let mut pairs = property_pairs(&msg.properties);
            // the enqueue time the timer log unit recorded (a late enqueue: the store time)
            let enqueue = self
                .timer
                .units()
                .get(&m.commitlog_offset)
                .map(|(_, u)| u.write_time_ms)
                .unwrap_or(m.store_timestamp);
            set_property(&mut pairs, prop::TIMER_ENQUEUE_MS, enqueue.to_string());
            set_property(&mut pairs, prop::TIMER_DEQUEUE_MS, now.to_string());
            msg.properties = encode_properties(&pairs, trailing);
            msg.topic = topic;
            msg.queue_id = qid;
            let put = self.put_with_delay(msg, 0)?;
            self.timer.copies.insert(m.commitlog_offset, put.clone());
            done.push(put);
        }
        let p = self.timer.precision_ms.max(1);
        let floor = now.div_euclid(p) * p;
        let (_, max) = self.queue_bounds(TIMER_TOPIC, 0);
        if floor > self.timer.read_time_ms || max > self.timer.enqueued {
            self.timer.read_time_ms = self.timer.read_time_ms.max(floor);
            self.timer.enqueued = self.timer.enqueued.max(max);
            self.timer.dirty = true;
        }
        Ok(done)
    }
}

/// Where the timer's progress goes in an overlay store.
pub fn overlay_checkpoint_path(overlay_root: &Path) -> PathBuf {
    overlay_root.join("config").join(timer::TIMERCHECK_FILE)
}

/// Write the timer's progress to `path` durably.
pub fn write_checkpoint(path: &Path, cp: &TimerCheckpoint) -> std::result::Result<(), Error> {
    crate::format::config::persist::persist_bytes(path, &cp.to_bytes())
}
