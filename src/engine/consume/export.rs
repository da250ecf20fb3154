//! What a consumer group has not consumed yet, ready to be sent again to a live cluster
//! (`rmqstore export`).
//!
//! The group's topics are those it has offsets for in `consumerOffset.json` (its `%RETRY%` and
//! `%DLQ%` topics aside), or the one asked for. For each, every unit from the group's committed
//! offset (the queue's min offset when there is none, or when the committed offset is below it)
//! to the queue's max offset is exported. Optionally ([`Include`]):
//!
//! - `retry`: the group's `%RETRY%` queues past the group's offsets on them;
//! - `delayed`: messages parked in `SCHEDULE_TOPIC_XXXX` past `delayOffset.json` whose
//!   `REAL_TOPIC` is one of the group's topics, its retry topic or its DLQ (a 4.9 orderly
//!   send-back parks DLQ-bound copies);
//! - `dlq`: the whole `%DLQ%` topic of the group;
//! - `transactions`: undecided half messages (one live copy per transaction, ENGINE.md 8) whose
//!   `REAL_TOPIC` is one of the group's topics;
//! - `timers`: 5.x timer messages still pending on `rmq_sys_wheel_timer` whose `REAL_TOPIC` is
//!   one of the group's topics. They are written for their real topic with `TIMER_DELIVER_MS`
//!   set to their release time (and the broker's `TIMER_OUT_MS`, `REAL_*` and relative
//!   `TIMER_DELAY_*` removed), so a 5.x broker they are sent to parks them until that time.
//!
//! Each [`ExportItem`] says where the record was found and where it should be sent again: a
//! retry, DLQ or delayed retry copy goes back to its `RETRY_TOPIC` (the original topic) and
//! carries its `ORIGIN_MESSAGE_ID`; a delayed message or a half message goes to its
//! `REAL_TOPIC`/`REAL_QID`. With `dedupe`, only the first item of each `UNIQ_KEY` is kept, in the
//! order topics, retry, delayed, DLQ, transactions.
//!
//! [`write_store`] writes the items as a new store directory, one record per item, through the
//! one writer.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::broker::pull::PullSource;
use crate::engine::broker::transaction::HalfState;
use crate::engine::broker::{property_pairs, set_property, Engine};
use crate::engine::store::dispatch::{dlq_topic, retry_topic};
use crate::engine::store::dispatch::{DLQ_PREFIX, RETRY_PREFIX};
use crate::engine::store::index_builder::IndexNaming;
use crate::engine::store::writer::{StoreWriter, WriterOptions};
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::message_in;
use crate::format::commitlog::{encode_properties, prop, sysflag, Message, MessageRef};
use crate::format::commitlog::{MessageVersion, Properties};
use crate::format::config::{DataVersion, TopicConfig, TopicConfigs};
use crate::format::consumequeue::CqUnit;
use crate::format::error::Error;
use crate::format::java::parse_int;

/// Property added to a record of an exported store whose topic is not the topic it was stored
/// in: where it came from ([`ExportSource`] name).
pub const EXPORT_SOURCE_PROPERTY: &str = "RMQSTORE_EXPORT_SOURCE";
/// Property added with [`EXPORT_SOURCE_PROPERTY`]: the topic the record was stored in.
pub const EXPORT_STORED_TOPIC_PROPERTY: &str = "RMQSTORE_STORED_TOPIC";

/// Which kinds of waiting messages are exported besides the group's topics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Include {
    pub retry: bool,
    pub delayed: bool,
    pub dlq: bool,
    pub transactions: bool,
    pub timers: bool,
}

impl Include {
    pub const ALL: Include = Include {
        retry: true,
        delayed: true,
        dlq: true,
        transactions: true,
        timers: true,
    };

    /// A comma-separated list of `retry`, `delayed`, `dlq`, `transactions`, `timers` (or `all`,
    /// `none`).
    pub fn parse(list: &str) -> Result<Include, String> {
        let mut inc = Include::default();
        for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word.to_ascii_lowercase().as_str() {
                "retry" | "retries" => inc.retry = true,
                "delayed" | "delay" => inc.delayed = true,
                "dlq" => inc.dlq = true,
                "transactions" | "transaction" | "tx" => inc.transactions = true,
                "timers" | "timer" => inc.timers = true,
                "all" => inc = Include::ALL,
                "none" => inc = Include::default(),
                other => {
                    return Err(format!(
                        "unknown kind {other:?}: expected retry, delayed, dlq, transactions, \
                         timers, all or none"
                    ))
                }
            }
        }
        Ok(inc)
    }
}

impl std::str::FromStr for Include {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Include::parse(s)
    }
}

/// What to export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub group: String,
    /// Only this topic (default: every topic the group has offsets for).
    pub topic: Option<String>,
    pub include: Include,
    /// Keep one item per `UNIQ_KEY`.
    pub dedupe: bool,
}

/// Where an exported record was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportSource {
    /// A queue of one of the group's topics, past the group's offset.
    Topic,
    /// The group's `%RETRY%` topic, past the group's offset.
    Retry,
    /// `SCHEDULE_TOPIC_XXXX`, not yet delivered.
    Delayed,
    /// The group's `%DLQ%` topic.
    Dlq,
    /// An undecided transaction half message.
    Transaction,
    /// A 5.x timer message not yet released.
    Timer,
}

impl ExportSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ExportSource::Topic => "topic",
            ExportSource::Retry => "retry",
            ExportSource::Delayed => "delayed",
            ExportSource::Dlq => "dlq",
            ExportSource::Transaction => "transaction",
            ExportSource::Timer => "timer",
        }
    }

    /// The source [`ExportSource::as_str`] names (as an export file writes it).
    pub fn from_name(name: &str) -> Option<ExportSource> {
        [
            ExportSource::Topic,
            ExportSource::Retry,
            ExportSource::Delayed,
            ExportSource::Dlq,
            ExportSource::Transaction,
            ExportSource::Timer,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// One record to send again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportItem {
    pub source: ExportSource,
    /// The queue the record was found in.
    pub queue_topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commitlog_offset: i64,
    pub size: i32,
    /// The topic it should be sent to again (the original topic of a retry or DLQ copy).
    pub resend_topic: String,
    /// The queue it was meant for (`REAL_QID`, or the queue it is in); 0 for retry and DLQ
    /// copies, which do not record it.
    pub resend_queue_id: i32,
    /// `ORIGIN_MESSAGE_ID` of a retry or DLQ copy.
    pub origin_message_id: Option<String>,
    pub uniq_key: Option<String>,
    /// When a delayed message is due (a timer message: when it is released).
    pub due: Option<i64>,
    /// The state of a half message.
    pub transaction_state: Option<HalfState>,
}

/// Everything [`plan_export`] found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExportPlan {
    pub group: String,
    /// The group's topics that were exported.
    pub topics: Vec<String>,
    pub items: Vec<ExportItem>,
    /// Items left out by `dedupe`.
    pub duplicates: usize,
    /// Units whose record could not be read (gone, or not a record of that queue).
    pub unreadable: usize,
}

/// Why an export cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "consumer group {0} has no committed offsets (consumerOffset.json, or the client's \
         offsets.json): name its topic (--topic)"
    )]
    NoTopics(String),
    #[error(transparent)]
    Store(#[from] Error),
    #[error("{} already exists and is not an empty directory", .0.display())]
    OutputExists(PathBuf),
}

/// The topics `group` has offsets for (in `consumerOffset.json`, or in a broadcasting client's
/// `offsets.json` the engine uses for it), its retry and DLQ topics aside, sorted.
pub fn group_topics(engine: &Engine, group: &str) -> Vec<String> {
    engine
        .offset_topics(group)
        .into_iter()
        .filter(|t| !t.starts_with(RETRY_PREFIX) && !t.starts_with(DLQ_PREFIX))
        .collect()
}

/// Every unit of a queue from `from` to its max offset, across consume queue files.
pub(crate) fn queue_units(
    engine: &Engine,
    topic: &str,
    queue_id: i32,
    from: i64,
) -> Vec<(i64, CqUnit)> {
    let (min, max) = engine.queue_bounds(topic, queue_id);
    let per_file = engine.cq_file_units().max(1) as i64;
    let mut out = Vec::new();
    let mut o = from.max(min).max(0);
    while o < max {
        match engine.units_from(topic, queue_id, o, 4096) {
            Some(units) if !units.is_empty() => {
                for (i, u) in units.iter().enumerate() {
                    out.push((o + i as i64, *u));
                }
                o += units.len() as i64;
            }
            _ => o = o - o.rem_euclid(per_file) + per_file,
        }
    }
    out
}

/// The first queue offset a group has not consumed: its committed offset, or the min offset.
fn unconsumed_from(engine: &Engine, group: &str, topic: &str, queue_id: i32) -> i64 {
    let (min, _) = engine.queue_bounds(topic, queue_id);
    let c = engine.committed_offset(group, topic, queue_id);
    if c < 0 {
        min
    } else {
        c.max(min)
    }
}

/// Facts of one record needed for an item.
struct Facts {
    topic: String,
    queue_id: i32,
    retry_topic: Option<String>,
    real_topic: Option<String>,
    real_qid: Option<i32>,
    origin: Option<String>,
    uniq_key: Option<String>,
}

impl Facts {
    fn of(m: &MessageRef<'_>) -> Facts {
        let own = |name: &str| m.property(name).map(|s| s.into_owned());
        Facts {
            topic: m.topic.to_string(),
            queue_id: m.queue_id,
            retry_topic: own(prop::RETRY_TOPIC).filter(|s| !s.is_empty()),
            real_topic: own(prop::REAL_TOPIC).filter(|s| !s.is_empty()),
            real_qid: m.property(prop::REAL_QID).and_then(|s| parse_int(&s)),
            origin: own(prop::ORIGIN_MESSAGE_ID).filter(|s| !s.trim().is_empty()),
            uniq_key: own(prop::UNIQ_KEY),
        }
    }
}

fn is_consumer_copy_topic(t: &str) -> bool {
    t.starts_with(RETRY_PREFIX) || t.starts_with(DLQ_PREFIX)
}

/// Where a record found as `source` should be sent again: `(topic, queue id)`.
fn resend_target(source: ExportSource, f: &Facts) -> (String, i32) {
    match source {
        ExportSource::Topic => (f.topic.clone(), f.queue_id),
        ExportSource::Retry | ExportSource::Dlq => {
            (f.retry_topic.clone().unwrap_or_else(|| f.topic.clone()), 0)
        }
        ExportSource::Delayed | ExportSource::Transaction | ExportSource::Timer => {
            match &f.real_topic {
                Some(rt) if is_consumer_copy_topic(rt) => {
                    (f.retry_topic.clone().unwrap_or_else(|| rt.clone()), 0)
                }
                Some(rt) => (rt.clone(), f.real_qid.unwrap_or(0)),
                None => (f.topic.clone(), f.queue_id),
            }
        }
    }
}

fn with_record<T>(engine: &Engine, phy: i64, f: impl FnOnce(&MessageRef<'_>) -> T) -> Option<T> {
    let raw = engine.record_at(phy)?;
    message_in(&raw, phy).map(|m| f(&m))
}

struct Planner<'a> {
    engine: &'a Engine,
    plan: ExportPlan,
    seen: HashSet<String>,
    dedupe: bool,
}

impl Planner<'_> {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        source: ExportSource,
        queue_topic: &str,
        queue_id: i32,
        queue_offset: i64,
        commitlog_offset: i64,
        due: Option<i64>,
        transaction_state: Option<HalfState>,
    ) {
        let Some((facts, size)) = with_record(self.engine, commitlog_offset, |m| {
            (Facts::of(m), m.total_size)
        }) else {
            self.plan.unreadable += 1;
            return;
        };
        if self.dedupe {
            if let Some(k) = &facts.uniq_key {
                if !self.seen.insert(k.clone()) {
                    self.plan.duplicates += 1;
                    return;
                }
            }
        }
        let (resend_topic, resend_queue_id) = resend_target(source, &facts);
        self.plan.items.push(ExportItem {
            source,
            queue_topic: queue_topic.to_string(),
            queue_id,
            queue_offset,
            commitlog_offset,
            size,
            resend_topic,
            resend_queue_id,
            origin_message_id: facts.origin,
            uniq_key: facts.uniq_key,
            due,
            transaction_state,
        });
    }

    /// Every unconsumed unit of every queue of `topic`.
    fn queues(&mut self, source: ExportSource, group: &str, topic: &str, all: bool) {
        for q in self.engine.queue_ids(topic) {
            let from = if all {
                self.engine.queue_bounds(topic, q).0
            } else {
                unconsumed_from(self.engine, group, topic, q)
            };
            for (o, u) in queue_units(self.engine, topic, q, from) {
                let belongs = with_record(self.engine, u.offset, |m| m.topic == topic);
                if belongs != Some(true) {
                    self.plan.unreadable += 1;
                    continue;
                }
                self.push(source, topic, q, o, u.offset, None, None);
            }
        }
    }
}

/// What `group` has not consumed yet (see the module documentation).
pub fn plan_export(engine: &Engine, opts: &ExportOptions) -> Result<ExportPlan, ExportError> {
    let group = opts.group.as_str();
    let retry = retry_topic(group);
    let dlq = dlq_topic(group);
    let topics: Vec<String> = match &opts.topic {
        Some(t) => vec![t.clone()],
        None => group_topics(engine, group),
    };
    let inc = opts.include;
    if topics.is_empty() && !(inc.retry || inc.dlq) {
        return Err(ExportError::NoTopics(group.to_string()));
    }
    let mut p = Planner {
        engine,
        plan: ExportPlan {
            group: group.to_string(),
            topics: topics.clone(),
            ..Default::default()
        },
        seen: HashSet::new(),
        dedupe: opts.dedupe,
    };
    for t in &topics {
        if *t == retry {
            p.queues(ExportSource::Retry, group, t, false);
        } else if *t == dlq {
            p.queues(ExportSource::Dlq, group, t, true);
        } else {
            p.queues(ExportSource::Topic, group, t, false);
        }
    }
    if inc.retry && !topics.contains(&retry) {
        p.queues(ExportSource::Retry, group, &retry, false);
    }
    if inc.delayed {
        let targets: BTreeSet<&str> = topics
            .iter()
            .map(String::as_str)
            .chain([retry.as_str(), dlq.as_str()])
            .collect();
        for d in engine.pending_delayed() {
            if d.real_topic.as_deref().is_some_and(|t| targets.contains(t)) {
                p.push(
                    ExportSource::Delayed,
                    crate::engine::store::dispatch::SCHEDULE_TOPIC,
                    crate::engine::broker::schedule::queue_id_of_level(d.level),
                    d.queue_offset,
                    d.commitlog_offset,
                    Some(d.due),
                    None,
                );
            }
        }
    }
    if inc.dlq && !topics.contains(&dlq) {
        p.queues(ExportSource::Dlq, group, &dlq, true);
    }
    if inc.transactions {
        for t in engine.pending_transactions() {
            let r = &t.live;
            if r.real_topic.as_ref().is_some_and(|rt| topics.contains(rt)) {
                p.push(
                    ExportSource::Transaction,
                    crate::engine::store::dispatch::TRANS_HALF_TOPIC,
                    r.queue_id,
                    r.queue_offset,
                    r.commitlog_offset,
                    None,
                    Some(r.state),
                );
            }
        }
    }
    if inc.timers {
        for m in engine.timer_report(false).pending() {
            if m.real_topic.as_ref().is_some_and(|rt| topics.contains(rt)) {
                p.push(
                    ExportSource::Timer,
                    crate::format::timer::TIMER_TOPIC,
                    0,
                    m.queue_offset,
                    m.commitlog_offset,
                    Some(m.release_timestamp),
                    None,
                );
            }
        }
    }
    Ok(p.plan)
}

/// The record written to an exported store for `item`: the stored record with its topic and
/// queue set to where it should be sent again, as a normal (non-transactional) message. The
/// properties are kept byte for byte; when the topic changed, [`EXPORT_SOURCE_PROPERTY`] and
/// [`EXPORT_STORED_TOPIC_PROPERTY`] are added. `None` when the record cannot be read.
pub fn resend_message(engine: &Engine, item: &ExportItem) -> Option<Message> {
    Some(resend_record(
        engine.message_at(item.commitlog_offset)?,
        item,
    ))
}

/// [`resend_message`] of a record already read.
pub fn resend_record(mut msg: Message, item: &ExportItem) -> Message {
    if item.source == ExportSource::Timer {
        let trailing = Properties(&msg.properties).has_trailing_separator();
        let mut pairs = property_pairs(&msg.properties);
        pairs.retain(|(k, _)| {
            ![
                prop::TIMER_OUT_MS,
                prop::REAL_TOPIC,
                prop::REAL_QID,
                prop::TIMER_DELAY_SEC,
                prop::TIMER_DELAY_MS,
            ]
            .contains(&k.as_str())
        });
        if let Some(due) = item.due {
            set_property(&mut pairs, prop::TIMER_DELIVER_MS, due.to_string());
        }
        msg.properties = encode_properties(&pairs, trailing);
    }
    if msg.topic != item.resend_topic {
        let trailing = Properties(&msg.properties).has_trailing_separator();
        let mut pairs = property_pairs(&msg.properties);
        set_property(&mut pairs, EXPORT_SOURCE_PROPERTY, item.source.as_str());
        set_property(&mut pairs, EXPORT_STORED_TOPIC_PROPERTY, msg.topic.clone());
        msg.properties = encode_properties(&pairs, trailing);
        msg.topic = item.resend_topic.clone();
    }
    msg.queue_id = item.resend_queue_id.max(0);
    msg.sys_flag &= !sysflag::TRANSACTION_MASK;
    msg.prepared_transaction_offset = 0;
    msg.queue_offset = 0;
    msg.physical_offset = 0;
    if msg.topic.len() > i8::MAX as usize {
        msg.version = MessageVersion::V2;
    }
    msg
}

/// Where a record stored in `topic` is found, as an export names it: a `%RETRY%` or `%DLQ%`
/// topic, `SCHEDULE_TOPIC_XXXX`, the transaction half topic, the 5.x timer topic, or a topic.
pub fn source_of_topic(topic: &str) -> ExportSource {
    if topic.starts_with(RETRY_PREFIX) {
        ExportSource::Retry
    } else if topic.starts_with(DLQ_PREFIX) {
        ExportSource::Dlq
    } else if topic == crate::engine::store::dispatch::SCHEDULE_TOPIC {
        ExportSource::Delayed
    } else if topic == crate::engine::store::dispatch::TRANS_HALF_TOPIC {
        ExportSource::Transaction
    } else if topic == crate::format::timer::TIMER_TOPIC {
        ExportSource::Timer
    } else {
        ExportSource::Topic
    }
}

/// The item of a record handed on whole, outside any group's queues (a record only one store
/// holds): where it was found and where to send it again, by its topic. `None` for a record
/// that is the broker's own bookkeeping and is not sent again (a transaction op record).
pub fn item_of_record(m: &MessageRef<'_>) -> Option<ExportItem> {
    if m.topic == crate::engine::store::dispatch::TRANS_OP_HALF_TOPIC {
        return None;
    }
    let source = source_of_topic(&m.topic);
    let facts = Facts::of(m);
    let (resend_topic, resend_queue_id) = resend_target(source, &facts);
    let due = match source {
        ExportSource::Timer => m
            .property(prop::TIMER_OUT_MS)
            .and_then(|v| v.trim().parse::<i64>().ok()),
        _ => None,
    };
    Some(ExportItem {
        source,
        queue_topic: m.topic.to_string(),
        queue_id: m.queue_id,
        queue_offset: m.queue_offset,
        commitlog_offset: m.position as i64,
        size: m.total_size,
        resend_topic,
        resend_queue_id,
        origin_message_id: facts.origin,
        uniq_key: facts.uniq_key,
        due,
        transaction_state: None,
    })
}

/// What [`write_store`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct StoreExport {
    pub dir: PathBuf,
    pub records: usize,
    /// Items whose record could no longer be read (not written).
    pub skipped: usize,
    pub topics: Vec<String>,
    #[serde(skip)]
    pub checkpoint: Option<Checkpoint>,
}

/// Write `items` as a new store in `dir` (which must not exist, or be an empty directory):
/// built in a sibling temp directory, then renamed into place. The geometry is the source's;
/// `topics.json` lists every target topic (the source's config when it has one).
pub fn write_store(
    engine: &Engine,
    items: &[ExportItem],
    dir: &Path,
) -> Result<StoreExport, ExportError> {
    let mut w = StoreExportWriter::create(dir, engine.source().geometry.clone())?;
    let mut skipped = 0;
    let pushed = (|| -> Result<(), ExportError> {
        for item in items {
            match resend_message(engine, item) {
                Some(msg) => w.push(msg)?,
                None => skipped += 1,
            }
        }
        Ok(())
    })();
    if let Err(e) = pushed {
        w.abandon();
        return Err(e);
    }
    let mut summary = w.finish(engine.topic_configs(), engine.now())?;
    summary.skipped = skipped;
    Ok(summary)
}

/// A new store written one message at a time (an export that streams): built in a sibling temp
/// directory marked as a stage, renamed into place by [`StoreExportWriter::finish`].
pub struct StoreExportWriter {
    dir: PathBuf,
    tmp: PathBuf,
    writer: Option<StoreWriter>,
    records: usize,
    queues: std::collections::BTreeMap<String, i32>,
}

impl StoreExportWriter {
    /// Start the store for `dir` (which must not exist, or be an empty directory).
    pub fn create(
        dir: &Path,
        geometry: crate::format::geometry::Geometry,
    ) -> Result<Self, ExportError> {
        if dir.exists() {
            let empty = dir.is_dir()
                && std::fs::read_dir(dir)
                    .map_err(|e| Error::io(dir, e))?
                    .next()
                    .is_none();
            if !empty {
                return Err(ExportError::OutputExists(dir.to_path_buf()));
            }
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "export".into());
        let tmp = dir.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        // Marked while written: a killed run leaves a folder every read command refuses.
        let opened = crate::engine::store::safedir::mark_stage(&tmp)
            .map_err(ExportError::from)
            .and_then(|()| {
                StoreWriter::create(
                    &tmp,
                    WriterOptions {
                        geometry,
                        consumequeue: true,
                        index: true,
                        index_naming: IndexNaming::Local,
                        dledger: None,
                    },
                )
                .map_err(ExportError::from)
            });
        match opened {
            Ok(w) => Ok(StoreExportWriter {
                dir: dir.to_path_buf(),
                tmp,
                writer: Some(w),
                records: 0,
                queues: Default::default(),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                Err(e)
            }
        }
    }

    /// Append one message (as [`resend_record`] makes it).
    pub fn push(&mut self, msg: Message) -> Result<(), ExportError> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        let q = self.queues.entry(msg.topic.clone()).or_insert(0);
        *q = (*q).max(msg.queue_id.saturating_add(1));
        w.append(msg)?;
        self.records += 1;
        Ok(())
    }

    /// Messages pushed so far.
    pub fn records(&self) -> usize {
        self.records
    }

    /// Remove what was written.
    pub fn abandon(mut self) {
        self.writer = None;
        let _ = std::fs::remove_dir_all(&self.tmp);
    }

    /// Write `topics.json` (every target topic, with `source_topics`' config where it has one,
    /// data version stamped `now`), the checkpoint, and move the store into place.
    pub fn finish(
        mut self,
        source_topics: &TopicConfigs,
        now: i64,
    ) -> Result<StoreExport, ExportError> {
        let tmp = self.tmp.clone();
        let result = (|| -> Result<Checkpoint, ExportError> {
            let w = self
                .writer
                .take()
                .expect("finish is called once, on a live writer");
            let mut tc = TopicConfigs::new(DataVersion::new(0, now));
            for (topic, n) in &self.queues {
                let mut c = source_topics
                    .get(topic)
                    .cloned()
                    .unwrap_or_else(|| TopicConfig::new(topic.clone()));
                c.read_queue_nums = c.read_queue_nums.max(*n);
                c.write_queue_nums = c.write_queue_nums.max(*n);
                tc.insert(c);
            }
            w.write_config(&tc)?;
            let checkpoint = w.finish()?;
            crate::engine::store::safedir::sync_tree(&tmp)?;
            crate::engine::store::safedir::unmark_stage(&tmp)?;
            Ok(checkpoint)
        })();
        let checkpoint = match result {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let dir = &self.dir;
        if dir.exists() {
            std::fs::remove_dir(dir).map_err(|e| Error::io(dir, e))?;
        }
        std::fs::rename(&tmp, dir).map_err(|e| Error::io(dir, e))?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            if let Ok(d) = std::fs::File::open(parent) {
                let _ = d.sync_all();
            }
        }
        Ok(StoreExport {
            dir: dir.clone(),
            records: self.records,
            skipped: 0,
            topics: std::mem::take(&mut self.queues).into_keys().collect(),
            checkpoint: Some(checkpoint),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_lists() {
        assert_eq!(Include::parse("").unwrap(), Include::default());
        let i = Include::parse("retry, dlq").unwrap();
        assert!(i.retry && i.dlq && !i.delayed && !i.transactions);
        assert_eq!(Include::parse("all").unwrap(), Include::ALL);
        assert_eq!(
            Include::parse("retry,delayed,dlq,transactions,timers").unwrap(),
            Include::ALL
        );
        assert!(Include::parse("retry,bogus").is_err());
    }

    #[test]
    fn resend_targets() {
        let f = Facts {
            topic: "%RETRY%g".into(),
            queue_id: 0,
            retry_topic: Some("TopicA".into()),
            real_topic: None,
            real_qid: None,
            origin: Some("ID".into()),
            uniq_key: None,
        };
        assert_eq!(resend_target(ExportSource::Retry, &f), ("TopicA".into(), 0));
        let d = Facts {
            topic: "SCHEDULE_TOPIC_XXXX".into(),
            queue_id: 2,
            retry_topic: None,
            real_topic: Some("TopicB".into()),
            real_qid: Some(3),
            origin: None,
            uniq_key: None,
        };
        assert_eq!(
            resend_target(ExportSource::Delayed, &d),
            ("TopicB".into(), 3)
        );
        let dr = Facts {
            real_topic: Some("%RETRY%g".into()),
            retry_topic: Some("TopicC".into()),
            ..d
        };
        assert_eq!(
            resend_target(ExportSource::Delayed, &dr),
            ("TopicC".into(), 0)
        );
    }
}
