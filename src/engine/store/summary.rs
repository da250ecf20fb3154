//! The store summary `info` prints: a first overview of a store, from its file listing and
//! small files only (queue bounds come from consume queue files; the commitlog is read only at
//! its last file, and at the records of the transaction half and op queues).
//!
//! Besides files, queues and consumer offsets it gives per-topic message counts, per-group lag
//! totals, delayed messages still pending per level (`SCHEDULE_TOPIC_XXXX` queue max minus the
//! level's `delayOffset.json` offset), retry and DLQ sizes per group, and transaction half
//! messages without an outcome (half-queue records whose queue offset no `d` op record names).

use serde::Serialize;

use crate::engine::store::dispatch::{
    is_system_topic, DLQ_PREFIX, RETRY_PREFIX, SCHEDULE_TOPIC, TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
};
use crate::engine::store::reader::Reader;
use crate::engine::Store;
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::config::{load, ConfigSource, ConsumerOffsets, DelayOffsets};
use crate::format::error::Result;
use crate::format::geometry::Geometry;
use crate::format::indexfile::IndexHeader;
use crate::format::mapped::Mapped;

#[derive(Debug, Serialize)]
pub struct Info {
    pub store: String,
    pub geometry: Geometry,
    pub commitlog: CommitlogInfo,
    pub topics: Vec<TopicInfo>,
    pub consumer_groups: Vec<GroupInfo>,
    pub index_files: Vec<IndexFileInfo>,
    pub checkpoint: Option<Checkpoint>,
    pub clean_shutdown: bool,
    pub notes: Vec<String>,
    /// Signs of damage seen without reading the data (an unclean shutdown, consume queue files
    /// missing or of the wrong size): run `verify`. Empty: none seen, which proves nothing.
    pub needs_verify: Vec<String>,
    /// Lag summed over every topic and queue of each consumer group.
    pub group_lag: Vec<GroupLag>,
    /// Delayed messages still waiting, per delay level.
    pub delayed: Vec<DelayLevelInfo>,
    /// `%RETRY%<group>` and `%DLQ%<group>` message counts per group.
    pub retry_dlq: Vec<RetryDlqInfo>,
    /// Transaction half messages and their outcomes.
    pub transactions: TransactionInfo,
    /// 5.x timer messages on `rmq_sys_wheel_timer` (null when the store has none), judged at
    /// the time `info` runs.
    pub timers: Option<crate::engine::broker::timer::TimerCounts>,
}

#[derive(Debug, Serialize)]
pub struct GroupLag {
    pub group: String,
    pub topics: usize,
    pub lag: i64,
}

#[derive(Debug, Serialize)]
pub struct DelayLevelInfo {
    pub level: i32,
    /// The level's delay in ms (`messageDelayLevel`), if the level is configured.
    pub delay_ms: Option<i64>,
    /// `SCHEDULE_TOPIC_XXXX` queue id (`level - 1`).
    pub queue_id: i32,
    /// Next queue offset to deliver, from `delayOffset.json` (null: the broker starts at 0).
    pub delay_offset: Option<i64>,
    pub min_offset: u64,
    pub max_offset: u64,
    /// `max_offset` minus the offset (clamped to the queue's range, as the broker's load does).
    pub pending: u64,
}

#[derive(Debug, Serialize)]
pub struct RetryDlqInfo {
    pub group: String,
    pub retry_messages: u64,
    pub dlq_messages: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct TransactionInfo {
    /// Records in `RMQ_SYS_TRANS_HALF_TOPIC` (all queues, from each queue's min offset).
    pub half_messages: u64,
    /// Op records tagged `d` in `RMQ_SYS_TRANS_OP_HALF_TOPIC`.
    pub op_messages: u64,
    /// Half records whose queue offset some op record names (committed or rolled back).
    pub with_outcome: u64,
    /// Half records whose queue offset no op record names (including check copies).
    pub without_outcome: u64,
    /// Distinct UNIQ_KEYs none of whose half records has an outcome.
    pub transactions_without_outcome: u64,
    /// `(queue id, queue offset)` of the half records without an outcome (at most 1000).
    pub without_outcome_offsets: Vec<(i32, u64)>,
}

#[derive(Debug, Serialize)]
pub struct CommitlogInfo {
    pub files: Vec<FileInfo>,
    pub min_offset: u64,
    pub max_offset: u64,
    /// Record versions seen at the start of each file (1 or 2).
    pub message_versions: Vec<u8>,
}

#[derive(Debug, Serialize)]
pub struct FileInfo {
    pub name: String,
    pub start: u64,
    pub size: u64,
}

#[derive(Debug, Serialize)]
pub struct TopicInfo {
    pub topic: String,
    pub system: bool,
    pub queues: Vec<QueueInfo>,
    /// Messages in the consume queues: the sum of `max_offset - min_offset`.
    pub messages: u64,
}

#[derive(Debug, Serialize)]
pub struct QueueInfo {
    pub queue_id: i32,
    pub min_offset: u64,
    pub max_offset: u64,
    /// Consume queue files in its folder (0: its offsets are unknown, not 0).
    pub files: usize,
}

#[derive(Debug, Serialize)]
pub struct GroupInfo {
    pub group: String,
    pub topic: String,
    pub queues: Vec<GroupQueueInfo>,
    /// Sum of the queues' lag.
    pub lag: i64,
}

#[derive(Debug, Serialize)]
pub struct GroupQueueInfo {
    pub queue_id: i32,
    /// The group's committed offset.
    pub committed_offset: i64,
    pub max_offset: u64,
    pub lag: i64,
}

#[derive(Debug, Serialize)]
pub struct IndexFileInfo {
    pub name: String,
    pub size: u64,
    pub entries: i64,
    pub begin_timestamp: i64,
    pub end_timestamp: i64,
    pub begin_commitlog_offset: i64,
    pub end_commitlog_offset: i64,
}

/// Gather the overview.
pub fn gather(store: &Store) -> Result<Info> {
    let mut notes = Vec::new();
    let cl = &store.commitlog;
    let mut versions = Vec::new();
    for s in &cl.segments {
        let m = Mapped::open(&s.path)?;
        if let Ok(Record::Message(r)) = parse_record(&m, 0, s.start, false) {
            let v = r.version.number();
            if !versions.contains(&v) {
                versions.push(v);
            }
        }
    }
    for issue in cl.layout_issues(store.geometry.commitlog_file_size.value) {
        notes.push(format!("commitlog layout: {issue:?}"));
    }
    let odd = cl
        .odd
        .iter()
        .chain(store.queues.values().flat_map(|q| q.odd.iter()))
        .chain(&store.consumequeue_odd)
        .chain(&store.index_odd);
    for e in odd {
        notes.push(format!(
            "{} is {}{}: not read (see verify)",
            e.path.display(),
            if e.symlink { "a symlink to " } else { "" },
            e.kind.describe()
        ));
    }
    let commitlog = CommitlogInfo {
        files: cl
            .segments
            .iter()
            .map(|s| FileInfo {
                name: s
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                start: s.start,
                size: s.len,
            })
            .collect(),
        min_offset: cl.min_offset(),
        max_offset: cl.max_offset()?,
        message_versions: versions,
    };

    // Signs of damage seen without reading the data: what `verify` should look at.
    let mut needs_verify = Vec::new();
    if store.abort.present {
        needs_verify.push(
            "unclean shutdown: the abort file is present (the broker recovers abnormally)".into(),
        );
    }
    if !cl
        .layout_issues(store.geometry.commitlog_file_size.value)
        .is_empty()
    {
        needs_verify
            .push("the commitlog files' sizes or names do not fit together (see notes)".into());
    }
    let mut topics: Vec<TopicInfo> = Vec::new();
    for ((topic, qid), cq) in &store.queues {
        let q = QueueInfo {
            queue_id: *qid,
            min_offset: cq.min_offset(commitlog.min_offset)?,
            max_offset: cq.max_offset()?,
            files: cq.files.len(),
        };
        if cq.files.is_empty() {
            needs_verify.push(format!(
                "{topic}/{qid}: the queue folder holds no consume queue file (deleted?)"
            ));
        }
        // Nothing has expired while the commitlog starts at 0: every queue starts at 0 too.
        if let Some(f) = cq
            .files
            .first()
            .filter(|f| f.start > 0 && cl.min_offset() == 0)
        {
            needs_verify.push(format!(
                "{topic}/{qid}: its first consume queue file starts at queue offset {} while the \
                 commitlog holds all its data from offset 0: the files before it are missing",
                f.start / crate::format::consumequeue::UNIT_SIZE as u64
            ));
        }
        for f in crate::format::consumequeue::check::check_files(cq) {
            needs_verify.push(f.message);
        }
        match topics.last_mut() {
            Some(t) if &t.topic == topic => t.queues.push(q),
            _ => topics.push(TopicInfo {
                topic: topic.clone(),
                system: is_system_topic(topic),
                queues: vec![q],
                messages: 0,
            }),
        }
    }
    for t in &mut topics {
        t.messages = t
            .queues
            .iter()
            .map(|q| q.max_offset.saturating_sub(q.min_offset))
            .sum();
    }

    let mut consumer_groups = Vec::new();
    match load::<ConsumerOffsets>(&store.config_dir()) {
        Ok(loaded) => {
            match &loaded.source {
                ConfigSource::Main | ConfigSource::Missing => {}
                ConfigSource::Backup { reason } => notes.push(format!(
                    "consumerOffset.json {reason}: read consumerOffset.json.bak instead, as the broker would"
                )),
                ConfigSource::Empty { reason } => notes.push(format!("consumerOffset.json: {reason}")),
            }
            for (topic, group, queues) in loaded.value.iter() {
                let mut qs = Vec::new();
                for &(qid, offset) in queues {
                    let max = match store.queue(topic, qid) {
                        Some(cq) => cq.max_offset()?,
                        None => 0,
                    };
                    qs.push(GroupQueueInfo {
                        queue_id: qid,
                        committed_offset: offset,
                        max_offset: max,
                        lag: (max as i64).saturating_sub(offset).max(0),
                    });
                }
                qs.sort_by_key(|q| q.queue_id);
                consumer_groups.push(GroupInfo {
                    group: group.to_string(),
                    topic: topic.to_string(),
                    lag: qs.iter().fold(0i64, |a, q| a.saturating_add(q.lag)),
                    queues: qs,
                });
            }
            consumer_groups.sort_by(|a, b| (&a.group, &a.topic).cmp(&(&b.group, &b.topic)));
        }
        Err(e) => notes.push(format!("consumer offsets unreadable: {e}")),
    }

    let mut index_files = Vec::new();
    for p in &store.index_files {
        let m = Mapped::open(p)?;
        match IndexHeader::from_bytes(&m) {
            Ok(h) => index_files.push(IndexFileInfo {
                name: p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                size: m.len() as u64,
                entries: (h.index_count as i64 - 1).max(0),
                begin_timestamp: h.begin_timestamp,
                end_timestamp: h.end_timestamp,
                begin_commitlog_offset: h.begin_phy_offset,
                end_commitlog_offset: h.end_phy_offset,
            }),
            Err(e) => notes.push(e.in_file(p, 0).to_string()),
        }
    }
    let checkpoint = match store.checkpoint() {
        Ok(c) => c,
        Err(e) => {
            notes.push(e.to_string());
            None
        }
    };
    if store.abort.present {
        notes.push(
            "abort file present: the last shutdown was unclean; the broker will run abnormal recovery"
                .into(),
        );
    }
    let group_lag = group_lags(&consumer_groups);
    let delayed = delayed_pending(store, &topics, &mut notes);
    let retry_dlq = retry_dlq_sizes(&topics);
    let transactions = transactions(store)?;
    let timers = timers(store, &mut notes);
    Ok(Info {
        store: store.root.display().to_string(),
        geometry: store.geometry.clone(),
        commitlog,
        topics,
        consumer_groups,
        index_files,
        checkpoint,
        clean_shutdown: !store.abort.present,
        notes,
        needs_verify,
        group_lag,
        delayed,
        retry_dlq,
        transactions,
        timers,
    })
}

/// Timer messages pending and delivered, through a read-only engine over the store.
fn timers(
    store: &Store,
    notes: &mut Vec<String>,
) -> Option<crate::engine::broker::timer::TimerCounts> {
    use crate::engine::broker::{Engine, EngineOptions};
    store.queue(crate::format::timer::TIMER_TOPIC, 0)?;
    let clock = std::sync::Arc::new(crate::engine::broker::clock::SystemClock);
    let opts = EngineOptions::for_store(store);
    match Engine::open_read_only(store.clone(), None, clock, opts) {
        Ok(e) => Some(e.timer_report(false).counts(e.now())),
        Err(e) => {
            notes.push(format!("timer messages not counted: {e}"));
            None
        }
    }
}

fn group_lags(groups: &[GroupInfo]) -> Vec<GroupLag> {
    let mut out: Vec<GroupLag> = Vec::new();
    for g in groups {
        match out.iter_mut().find(|x| x.group == g.group) {
            Some(x) => {
                x.topics += 1;
                x.lag = x.lag.saturating_add(g.lag);
            }
            None => out.push(GroupLag {
                group: g.group.clone(),
                topics: 1,
                lag: g.lag,
            }),
        }
    }
    out.sort_by(|a, b| a.group.cmp(&b.group));
    out
}

/// Pending delayed messages per level: `SCHEDULE_TOPIC_XXXX` queue `level-1` max offset minus the
/// level's `delayOffset.json` offset, clamped to the queue's range (`correctDelayOffset`).
fn delayed_pending(
    store: &Store,
    topics: &[TopicInfo],
    notes: &mut Vec<String>,
) -> Vec<DelayLevelInfo> {
    let Some(t) = topics.iter().find(|t| t.topic == SCHEDULE_TOPIC) else {
        return Vec::new();
    };
    let table = match load::<DelayOffsets>(&store.config_dir()) {
        Ok(l) => {
            if let ConfigSource::Backup { reason } = &l.source {
                notes.push(format!(
                    "delayOffset.json {reason}: read delayOffset.json.bak instead, as the broker would"
                ));
            }
            l.value
        }
        Err(e) => {
            notes.push(format!("delay offsets unreadable: {e}"));
            DelayOffsets::new()
        }
    };
    t.queues
        .iter()
        .map(|q| {
            let level = q.queue_id.saturating_add(1);
            let offset = table.get(level);
            let from = offset
                .unwrap_or(0)
                .clamp(q.min_offset as i64, q.max_offset as i64) as u64;
            DelayLevelInfo {
                level,
                delay_ms: store.geometry.delay_millis(level),
                queue_id: q.queue_id,
                delay_offset: offset,
                min_offset: q.min_offset,
                max_offset: q.max_offset,
                pending: q.max_offset.saturating_sub(from),
            }
        })
        .collect()
}

fn retry_dlq_sizes(topics: &[TopicInfo]) -> Vec<RetryDlqInfo> {
    let mut out: Vec<RetryDlqInfo> = Vec::new();
    for t in topics {
        let (group, retry) = if let Some(g) = t.topic.strip_prefix(RETRY_PREFIX) {
            (g, true)
        } else if let Some(g) = t.topic.strip_prefix(DLQ_PREFIX) {
            (g, false)
        } else {
            continue;
        };
        let i = match out.iter().position(|x| x.group == group) {
            Some(i) => i,
            None => {
                out.push(RetryDlqInfo {
                    group: group.to_string(),
                    retry_messages: 0,
                    dlq_messages: 0,
                });
                out.len() - 1
            }
        };
        if let Some(x) = out.get_mut(i) {
            if retry {
                x.retry_messages += t.messages;
            } else {
                x.dlq_messages += t.messages;
            }
        }
    }
    out.sort_by(|a, b| a.group.cmp(&b.group));
    out
}

/// Queue offsets named by the `d` op records of one op queue. A 4.9 body is one decimal offset,
/// a 5.1+ body a list with a `,` after each offset; both parse as a `,`-separated list.
fn op_offsets(reader: &Reader<'_>, queue_id: i32) -> Result<(u64, std::collections::HashSet<i64>)> {
    let mut named = std::collections::HashSet::new();
    let mut ops = 0u64;
    let Some(cq) = reader.store().queue(TRANS_OP_HALF_TOPIC, queue_id) else {
        return Ok((ops, named));
    };
    let min = cq.min_offset(reader.store().commitlog.min_offset())?;
    reader.for_each_unit_from(cq, min, |_, u| {
        if u.is_pre_blank() {
            return std::ops::ControlFlow::Continue(());
        }
        if let Some(Ok(Some(r))) = u.commitlog_offset().map(|o| reader.message_at(o)) {
            if r.message.tags().as_deref() == Some("d") {
                ops += 1;
                if let Ok(body) = r.message.decompressed_body() {
                    for piece in String::from_utf8_lossy(&body).split(',') {
                        if let Some(o) = crate::format::java::parse_long(piece.trim()) {
                            named.insert(o);
                        }
                    }
                }
            }
        }
        std::ops::ControlFlow::Continue(())
    })?;
    Ok((ops, named))
}

/// Half records and whether an op names them.
fn transactions(store: &Store) -> Result<TransactionInfo> {
    const LISTED: usize = 1000;
    let mut info = TransactionInfo::default();
    let halves: Vec<_> = store.topic_queues(TRANS_HALF_TOPIC).collect();
    if halves.is_empty() {
        return Ok(info);
    }
    let reader = Reader::new(store);
    // UNIQ_KEY -> has an outcome
    let mut by_key: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    for cq in halves {
        let (ops, named) = op_offsets(&reader, cq.queue_id)?;
        info.op_messages += ops;
        let min = cq.min_offset(store.commitlog.min_offset())?;
        reader.for_each_unit_from(cq, min, |q, u| {
            if u.is_pre_blank() {
                return std::ops::ControlFlow::Continue(());
            }
            info.half_messages += 1;
            let done = named.contains(&(q as i64));
            if done {
                info.with_outcome += 1;
            } else {
                info.without_outcome += 1;
                if info.without_outcome_offsets.len() < LISTED {
                    info.without_outcome_offsets.push((cq.queue_id, q));
                }
            }
            let key = u
                .commitlog_offset()
                .and_then(|o| reader.message_at(o).ok().flatten())
                .and_then(|r| r.message.uniq_key().map(|k| k.into_owned()))
                .unwrap_or_else(|| format!("@{}", u.offset));
            let e = by_key.entry(key).or_insert(false);
            *e |= done;
            std::ops::ControlFlow::Continue(())
        })?;
    }
    info.transactions_without_outcome = by_key.values().filter(|d| !**d).count() as u64;
    Ok(info)
}
