//! Message traces in a store: the trace messages a tracing client wrote to its trace topic
//! (`format::trace`), found and decoded, and put together into each traced message's life:
//! who sent it and when, where it was stored, which groups consumed it (how long, with what
//! result, after how many retries), and how its transaction ended.
//!
//! Trace messages are found the way the client's dispatcher makes them findable: it sets the
//! traced messages' ids and keys as the trace message's KEYS, so the index answers a lookup by
//! message id or key under the trace topic. Without index files, and for a topic and time
//! window (the records of a topic are not keyed by it), the trace topic's consume queues are
//! walked, or the commitlog when the trace topic has no consume queue. Each trace message is
//! read once; a body that does not decode is counted and named, never fatal.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::ControlFlow;

use serde::Serialize;

use crate::engine::store::reader::{Boundary, Reader};
use crate::format::commitlog::MessageRef;
use crate::format::msgid::decode_offset_msg_id;
use crate::format::trace::{
    consume_return_type, records, EndTransactionRecord, MessageType, PubRecord, SubAfterRecord,
    SubBeforeRecord, TraceRecord, TransactionState,
};

/// Index lookups ask for this many trace messages per key (the broker's `maxMsgsNumBatch`); a
/// full answer falls back to walking the trace topic, so nothing is missed.
const INDEX_MAX: i32 = 64;
/// Decode problems kept word for word (the rest are counted).
const PROBLEMS_KEPT: usize = 20;

/// What to trace.
#[derive(Debug, Clone)]
pub enum TraceTarget {
    /// A client message id (UNIQ_KEY), or an offset message id of a message in this store.
    MsgId(String),
    /// A KEYS element of the traced messages.
    Key(String),
    /// Messages sent to `topic` at or after `since` (client time, ms).
    Topic { topic: String, since: i64 },
}

/// A trace lookup.
#[derive(Debug, Clone)]
pub struct TraceQuery {
    pub trace_topic: String,
    pub target: TraceTarget,
    /// Read at most this many trace messages when walking the trace topic (the browser keeps
    /// its lookups small); `None`: all.
    pub max_scanned: Option<u64>,
}

/// Why a lookup could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(
        "no trace topic {topic:?} in this store (no consume queue, not in config/topics.json): \
         tracing was off, or the clients wrote to another trace topic{}",
        candidates_words(candidates)
    )]
    UnknownTraceTopic {
        topic: String,
        candidates: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] crate::format::Error),
}

fn candidates_words(c: &[String]) -> String {
    if c.is_empty() {
        " (--trace-topic NAME)".into()
    } else {
        format!(
            "; topics that look like trace topics: {} (--trace-topic NAME)",
            c.iter()
                .map(|t| format!("{t:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// How trace messages were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lookup {
    /// Through the index files, by KEYS.
    Index,
    /// The trace topic's consume queues.
    ConsumeQueue,
    /// The commitlog (the trace topic has no consume queue).
    Commitlog,
}

/// The trace message a record came in.
#[derive(Debug, Clone, Serialize)]
pub struct Carrier {
    /// Where the trace message is in the commitlog.
    pub commitlog_offset: u64,
    /// When the broker stored the trace message.
    pub store_timestamp: i64,
    /// The trace message's born host: the tracing client's address.
    pub born_host: String,
}

/// Where the traced message is in this store.
#[derive(Debug, Clone, Serialize)]
pub struct Stored {
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commitlog_offset: u64,
    pub store_timestamp: i64,
    pub store_host: String,
    pub offset_msg_id: String,
}

/// A `Pub` record: one send.
#[derive(Debug, Clone, Serialize)]
pub struct Sent {
    pub producer_group: String,
    /// The record's client host (15-field form), else the trace message's born host.
    pub client_host: String,
    pub send_timestamp: i64,
    pub cost_ms: i32,
    pub success: bool,
    pub topic: String,
    pub store_host: String,
    pub offset_msg_id: Option<String>,
    pub msg_type: MessageType,
    pub body_length: i32,
    pub region_id: String,
    pub trace_commitlog_offset: u64,
}

/// One consumption: a `SubBefore` and its `SubAfter` (same request id), either may be missing.
#[derive(Debug, Clone, Serialize)]
pub struct Consumed {
    pub group: Option<String>,
    /// The consumer's address: the born host of the trace message of the SubBefore (or of the
    /// SubAfter when there is no SubBefore).
    pub client_host: String,
    pub request_id: String,
    pub begin_timestamp: Option<i64>,
    pub retry_times: Option<i32>,
    /// Null without a SubAfter (the listener had not returned, or its trace was lost).
    pub cost_ms: Option<i32>,
    pub success: Option<bool>,
    pub context_code: Option<i32>,
    /// `ConsumeReturnType` of the context code.
    pub consume_return: Option<&'static str>,
    pub trace_commitlog_offsets: Vec<u64>,
}

/// An `EndTransaction` record.
#[derive(Debug, Clone, Serialize)]
pub struct TransactionEnd {
    pub producer_group: String,
    pub client_host: String,
    pub end_timestamp: i64,
    pub transaction_id: String,
    pub transaction_state: TransactionState,
    pub from_transaction_check: bool,
    pub store_host: String,
    pub msg_type: MessageType,
    pub trace_commitlog_offset: u64,
}

/// Everything the traces say about one message.
#[derive(Debug, Clone, Serialize)]
pub struct MessageTrace {
    pub msg_id: String,
    pub topic: Option<String>,
    pub tags: Option<String>,
    pub keys: Vec<String>,
    /// Where it is in this store, found from the send's offset msg id (or its UNIQ_KEY).
    pub stored: Option<Stored>,
    pub sent: Vec<Sent>,
    pub consumed: Vec<Consumed>,
    pub end_transaction: Vec<TransactionEnd>,
    /// Records about it.
    pub records: u64,
}

impl MessageTrace {
    /// The events in words, one per line, times written by `time` (the command and the
    /// browser show the same lines).
    pub fn event_lines(&self, time: &dyn Fn(i64) -> String) -> Vec<String> {
        let t = self;
        let mut v = Vec::new();
        match &t.stored {
            Some(s) => v.push(format!(
                "stored    {} queue {} queue offset {}, commitlog offset {}, {} on {}",
                s.topic,
                s.queue_id,
                s.queue_offset,
                s.commitlog_offset,
                time(s.store_timestamp),
                s.store_host
            )),
            None => v.push("stored    not found in this store".into()),
        }
        for s in &t.sent {
            v.push(format!(
                "sent      {} by {} from {} to {}: {} in {} ms ({}, {} bytes{})",
                time(s.send_timestamp),
                s.producer_group,
                s.client_host,
                s.store_host,
                if s.success { "SEND_OK" } else { "not SEND_OK" },
                s.cost_ms,
                s.msg_type.name(),
                s.body_length,
                s.offset_msg_id
                    .as_ref()
                    .map(|o| format!(", offset msg id {o}"))
                    .unwrap_or_default()
            ));
        }
        for c in &t.consumed {
            let when = c
                .begin_timestamp
                .map(time)
                .unwrap_or_else(|| "(time unknown)".into());
            let result = match (c.success, c.cost_ms) {
                (Some(ok), Some(ms)) => format!(
                    "{} in {ms} ms",
                    match (ok, c.consume_return) {
                        (true, _) => "success".to_string(),
                        (false, Some(r)) => format!("failed ({r})"),
                        (false, None) => "failed".to_string(),
                    }
                ),
                _ => "no SubAfter: not finished, or its trace was lost".into(),
            };
            v.push(format!(
                "consumed  {when} by {} on {}: {result}{}",
                c.group.as_deref().unwrap_or("-"),
                c.client_host,
                c.retry_times
                    .map(|r| format!(", retry times {r}"))
                    .unwrap_or_default()
            ));
        }
        for e in &t.end_transaction {
            v.push(format!(
                "ended     {} by {} from {}: {}{} (transaction id {})",
                time(e.end_timestamp),
                e.producer_group,
                e.client_host,
                e.transaction_state.name(),
                if e.from_transaction_check {
                    ", answering the broker's check"
                } else {
                    ""
                },
                e.transaction_id
            ));
        }
        v
    }

    fn first_timestamp(&self) -> i64 {
        let s = self.sent.iter().map(|s| s.send_timestamp);
        let c = self.consumed.iter().filter_map(|c| c.begin_timestamp);
        let e = self.end_transaction.iter().map(|e| e.end_timestamp);
        s.chain(c).chain(e).min().unwrap_or(i64::MAX)
    }
}

/// What a lookup found.
#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    pub trace_topic: String,
    pub lookup: Lookup,
    pub traces: Vec<MessageTrace>,
    /// Trace messages read.
    pub trace_messages: u64,
    /// Records decoded from them (about any message).
    pub records: u64,
    /// Records that did not decode.
    pub undecodable: u64,
    /// The walk stopped at `max_scanned` trace messages: more may exist.
    pub capped: bool,
    /// The first decode problems, in words.
    pub problems: Vec<String>,
}

/// Topics that look like trace topics (for the message about an unknown one).
pub fn trace_topic_candidates(reader: &Reader<'_>) -> Vec<String> {
    reader
        .topics()
        .iter()
        .filter(|t| t.to_ascii_uppercase().contains("TRACE"))
        .cloned()
        .collect()
}

/// True when the store has the trace topic (a consume queue, or an entry in topics.json).
pub fn has_trace_topic(reader: &Reader<'_>, topic: &str) -> bool {
    reader.topics().iter().any(|t| t == topic)
}

/// Find and decode the traces `q` asks for.
pub fn find_traces(reader: &Reader<'_>, q: &TraceQuery) -> Result<TraceReport, TraceError> {
    if !has_trace_topic(reader, &q.trace_topic) {
        return Err(TraceError::UnknownTraceTopic {
            topic: q.trace_topic.clone(),
            candidates: trace_topic_candidates(reader),
        });
    }
    let mut c = Collector::new(q.trace_topic.clone());
    match &q.target {
        TraceTarget::MsgId(id) => {
            let mut ids = vec![id.clone()];
            // an offset message id of a message here: its traces are keyed by its UNIQ_KEY
            if let Some(l) = reader.by_offset_msg_id(id) {
                let here = l.host_matches();
                if let Some(u) = l
                    .record
                    .filter(|_| here)
                    .and_then(|r| r.message.uniq_key().map(|u| u.into_owned()))
                {
                    ids.push(u);
                }
            }
            let keep = |r: &TraceRecord| {
                ids.iter().any(|i| r.msg_id() == i)
                    || matches!(r, TraceRecord::Pub(p) if p.offset_msg_id.as_deref() == Some(id))
            };
            if !c.by_index(reader, q, &ids, &keep) {
                c.walk(reader, q, None, &keep)?;
            }
            // a Pub matched by offset msg id names the client id the other records carry
            let more: Vec<String> = c
                .kept
                .iter()
                .map(|(r, _)| r.msg_id().to_string())
                .filter(|m| !ids.contains(m))
                .collect();
            if !more.is_empty() {
                let set: HashSet<String> = more.into_iter().collect();
                let keep2 = |r: &TraceRecord| set.contains(r.msg_id());
                let ids2: Vec<String> = set.iter().cloned().collect();
                if !c.by_index(reader, q, &ids2, &keep2) {
                    c.walk(reader, q, None, &keep2)?;
                }
            }
        }
        TraceTarget::Key(k) => {
            let keep = |r: &TraceRecord| r.key_list().any(|x| x == k);
            if !c.by_index(reader, q, std::slice::from_ref(k), &keep) {
                c.walk(reader, q, None, &keep)?;
            }
        }
        TraceTarget::Topic { topic, since } => {
            // first the sends (and transaction ends) to the topic, then everything about them
            let mut ids: HashSet<String> = HashSet::new();
            let mut probe = Collector::new(q.trace_topic.clone());
            probe.walk(reader, q, Some(*since), &|r| {
                r.topic() == Some(topic.as_str()) && r.timestamp().is_some_and(|t| t >= *since)
            })?;
            ids.extend(probe.kept.iter().map(|(r, _)| r.msg_id().to_string()));
            c.walk(reader, q, Some(*since), &|r| ids.contains(r.msg_id()))?;
            c.capped |= probe.capped;
        }
    }
    Ok(c.finish(reader))
}

/// The traces of one message of this store (its UNIQ_KEY), for the browser: through the index,
/// or a walk of at most `max_scanned` trace messages without one. `None` when the store has no
/// such trace topic or nothing is about the message.
pub fn trace_of_message(
    reader: &Reader<'_>,
    trace_topic: &str,
    m: &MessageRef<'_>,
    max_scanned: u64,
) -> Option<TraceReport> {
    if m.topic == trace_topic || !has_trace_topic(reader, trace_topic) {
        return None;
    }
    let id = m.uniq_key()?.into_owned();
    let q = TraceQuery {
        trace_topic: trace_topic.to_string(),
        target: TraceTarget::MsgId(id),
        max_scanned: Some(max_scanned),
    };
    let r = find_traces(reader, &q).ok()?;
    (!r.traces.is_empty()).then_some(r)
}

/// Records kept so far, each with the trace message it came in, and what was read.
struct Collector {
    trace_topic: String,
    kept: Vec<(TraceRecord, Carrier)>,
    seen_messages: HashSet<u64>,
    lookup: Lookup,
    trace_messages: u64,
    records: u64,
    undecodable: u64,
    capped: bool,
    problems: Vec<String>,
}

impl Collector {
    fn new(trace_topic: String) -> Self {
        Collector {
            trace_topic,
            kept: Vec::new(),
            seen_messages: HashSet::new(),
            lookup: Lookup::Index,
            trace_messages: 0,
            records: 0,
            undecodable: 0,
            capped: false,
            problems: Vec::new(),
        }
    }

    /// Decode one trace message and keep the records `keep` accepts (each message once).
    fn read(&mut self, m: &MessageRef<'_>, keep: &dyn Fn(&TraceRecord) -> bool) {
        if m.topic != self.trace_topic || !self.seen_messages.insert(m.position) {
            return;
        }
        self.trace_messages += 1;
        let body = match m.decompressed_body() {
            Ok(b) => b,
            Err(e) => {
                self.undecodable += 1;
                self.problem(format!(
                    "trace message at commitlog offset {}: {e}",
                    m.position
                ));
                return;
            }
        };
        let carrier = Carrier {
            commitlog_offset: m.position,
            store_timestamp: m.store_timestamp,
            born_host: m.born_host.to_string(),
        };
        for r in records(&body) {
            match r {
                Ok(r) => {
                    self.records += 1;
                    if keep(&r) {
                        self.kept.push((r, carrier.clone()));
                    }
                }
                Err(e) => {
                    self.undecodable += 1;
                    self.problem(format!(
                        "trace message at commitlog offset {}: {e}",
                        m.position
                    ));
                }
            }
        }
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < PROBLEMS_KEPT {
            self.problems.push(p);
        }
    }

    /// Look the keys up in the index under the trace topic. False when the index cannot answer
    /// (no index files, or an answer that may be cut at `maxMsgsNumBatch`): walk instead.
    fn by_index(
        &mut self,
        reader: &Reader<'_>,
        q: &TraceQuery,
        keys: &[String],
        keep: &dyn Fn(&TraceRecord) -> bool,
    ) -> bool {
        if reader.index_file_count() == 0 {
            return false;
        }
        let mut offsets = Vec::new();
        for k in keys {
            let r = reader.query_message(&q.trace_topic, k, INDEX_MAX, 0, i64::MAX);
            if r.capped {
                return false;
            }
            offsets.extend(r.matching());
        }
        offsets.sort_unstable();
        offsets.dedup();
        for o in offsets {
            if let Ok(Some(l)) = reader.message_at(o) {
                self.read(&l.message, keep);
            }
        }
        true
    }

    /// Read the trace topic's messages (from store time `since` when given) through its consume
    /// queues, or the commitlog when it has none.
    fn walk(
        &mut self,
        reader: &Reader<'_>,
        q: &TraceQuery,
        since: Option<i64>,
        keep: &dyn Fn(&TraceRecord) -> bool,
    ) -> Result<(), TraceError> {
        let store = reader.store();
        let queues: Vec<_> = store.topic_queues(&q.trace_topic).collect();
        let budget = q.max_scanned.unwrap_or(u64::MAX);
        let mut read = 0u64;
        if queues.is_empty() {
            self.lookup = Lookup::Commitlog;
            let max = usize::try_from(budget).unwrap_or(usize::MAX);
            let topic = q.trace_topic.clone();
            let found = reader.scan(max, |m| {
                m.topic == topic && since.is_none_or(|s| m.store_timestamp >= s)
            });
            self.capped |= found.capped;
            for o in found.offsets {
                if let Ok(Some(l)) = reader.message_at(o) {
                    self.read(&l.message, keep);
                }
            }
            return Ok(());
        }
        self.lookup = Lookup::ConsumeQueue;
        for cq in queues {
            let from = match since {
                Some(s) => {
                    u64::try_from(reader.offset_by_time_5x(cq, s, Boundary::Lower)?).unwrap_or(0)
                }
                None => cq.min_offset(store.commitlog.min_offset()).unwrap_or(0),
            };
            let mut capped = false;
            reader.for_each_unit_from(cq, from, |_, u| {
                if read >= budget {
                    capped = true;
                    return ControlFlow::Break(());
                }
                if u.is_pre_blank() {
                    return ControlFlow::Continue(());
                }
                read += 1;
                if let Ok(Some(l)) =
                    u64::try_from(u.offset).map_or(Ok(None), |o| reader.message_at(o))
                {
                    self.read(&l.message, keep);
                }
                ControlFlow::Continue(())
            })?;
            self.capped |= capped;
        }
        Ok(())
    }

    /// Put the kept records together per traced message.
    fn finish(self, reader: &Reader<'_>) -> TraceReport {
        let mut by_id: BTreeMap<String, Vec<(TraceRecord, Carrier)>> = BTreeMap::new();
        for (r, c) in self.kept {
            by_id
                .entry(r.msg_id().to_string())
                .or_default()
                .push((r, c));
        }
        let mut traces: Vec<MessageTrace> = by_id
            .into_iter()
            .map(|(id, rs)| assemble(reader, id, rs))
            .collect();
        traces.sort_by(|a, b| {
            (a.first_timestamp(), &a.msg_id).cmp(&(b.first_timestamp(), &b.msg_id))
        });
        TraceReport {
            trace_topic: self.trace_topic,
            lookup: self.lookup,
            traces,
            trace_messages: self.trace_messages,
            records: self.records,
            undecodable: self.undecodable,
            capped: self.capped,
            problems: self.problems,
        }
    }
}

fn not_null(s: &str) -> Option<String> {
    (!s.is_empty() && s != "null").then(|| s.to_string())
}

fn assemble(reader: &Reader<'_>, msg_id: String, rs: Vec<(TraceRecord, Carrier)>) -> MessageTrace {
    let mut t = MessageTrace {
        msg_id,
        topic: None,
        tags: None,
        keys: Vec::new(),
        stored: None,
        sent: Vec::new(),
        consumed: Vec::new(),
        end_transaction: Vec::new(),
        records: rs.len() as u64,
    };
    // consumptions by (request id), in the order first seen
    let mut consumptions: Vec<Consumed> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for (r, c) in &rs {
        if t.keys.is_empty() {
            t.keys = r.key_list().map(str::to_string).collect();
        }
        match r {
            TraceRecord::Pub(p) => {
                t.topic.get_or_insert_with(|| p.topic.clone());
                if t.tags.is_none() {
                    t.tags = not_null(&p.tags);
                }
                t.sent.push(sent(p, c));
            }
            TraceRecord::EndTransaction(e) => {
                t.topic.get_or_insert_with(|| e.topic.clone());
                if t.tags.is_none() {
                    t.tags = not_null(&e.tags);
                }
                t.end_transaction.push(ended(e, c));
            }
            TraceRecord::SubBefore(b) => {
                let i = *at.entry(b.request_id.clone()).or_insert_with(|| {
                    consumptions.push(empty_consumption(&b.request_id, c));
                    consumptions.len() - 1
                });
                if let Some(x) = consumptions.get_mut(i) {
                    before(x, b, c);
                }
            }
            TraceRecord::SubAfter(a) => {
                let i = *at.entry(a.request_id.clone()).or_insert_with(|| {
                    consumptions.push(empty_consumption(&a.request_id, c));
                    consumptions.len() - 1
                });
                if let Some(x) = consumptions.get_mut(i) {
                    after(x, a, c);
                }
            }
        }
    }
    t.sent
        .sort_by_key(|s| (s.send_timestamp, s.trace_commitlog_offset));
    t.end_transaction
        .sort_by_key(|e| (e.end_timestamp, e.trace_commitlog_offset));
    consumptions.sort_by(|a, b| {
        (
            a.begin_timestamp.unwrap_or(i64::MAX),
            &a.trace_commitlog_offsets,
        )
            .cmp(&(
                b.begin_timestamp.unwrap_or(i64::MAX),
                &b.trace_commitlog_offsets,
            ))
    });
    t.consumed = consumptions;
    t.stored = stored(reader, &t);
    t
}

fn sent(p: &PubRecord, c: &Carrier) -> Sent {
    Sent {
        producer_group: p.group.clone(),
        client_host: p.client_host.clone().unwrap_or_else(|| c.born_host.clone()),
        send_timestamp: p.timestamp,
        cost_ms: p.cost_time,
        success: p.success,
        topic: p.topic.clone(),
        store_host: p.store_host.clone(),
        offset_msg_id: p.offset_msg_id.clone().filter(|o| !o.is_empty()),
        msg_type: p.msg_type,
        body_length: p.body_length,
        region_id: p.region_id.clone(),
        trace_commitlog_offset: c.commitlog_offset,
    }
}

fn ended(e: &EndTransactionRecord, c: &Carrier) -> TransactionEnd {
    TransactionEnd {
        producer_group: e.group.clone(),
        client_host: c.born_host.clone(),
        end_timestamp: e.timestamp,
        transaction_id: e.transaction_id.clone(),
        transaction_state: e.transaction_state,
        from_transaction_check: e.from_transaction_check,
        store_host: e.store_host.clone(),
        msg_type: e.msg_type,
        trace_commitlog_offset: c.commitlog_offset,
    }
}

fn empty_consumption(request_id: &str, c: &Carrier) -> Consumed {
    Consumed {
        group: None,
        client_host: c.born_host.clone(),
        request_id: request_id.to_string(),
        begin_timestamp: None,
        retry_times: None,
        cost_ms: None,
        success: None,
        context_code: None,
        consume_return: None,
        trace_commitlog_offsets: Vec::new(),
    }
}

fn before(x: &mut Consumed, b: &SubBeforeRecord, c: &Carrier) {
    x.group = Some(b.group.clone());
    x.client_host = c.born_host.clone();
    x.begin_timestamp = Some(b.timestamp);
    x.retry_times = Some(b.retry_times);
    push_offset(x, c);
}

fn after(x: &mut Consumed, a: &SubAfterRecord, c: &Carrier) {
    if x.group.is_none() {
        x.group = a.group.clone();
    }
    if x.begin_timestamp.is_none() {
        x.begin_timestamp = a.timestamp;
    }
    x.cost_ms = Some(a.cost_time);
    x.success = Some(a.success);
    x.context_code = a.context_code;
    x.consume_return = a.context_code.and_then(consume_return_type);
    push_offset(x, c);
}

fn push_offset(x: &mut Consumed, c: &Carrier) {
    if !x.trace_commitlog_offsets.contains(&c.commitlog_offset) {
        x.trace_commitlog_offsets.push(c.commitlog_offset);
        x.trace_commitlog_offsets.sort_unstable();
    }
}

/// The traced message in this store: at a send's offset msg id when that record is it, else
/// through the index by its UNIQ_KEY under its topic.
fn stored(reader: &Reader<'_>, t: &MessageTrace) -> Option<Stored> {
    let is_it = |m: &MessageRef<'_>| m.uniq_key().is_some_and(|u| u == t.msg_id);
    let from = |m: &MessageRef<'_>| Stored {
        topic: m.topic.to_string(),
        queue_id: m.queue_id,
        queue_offset: m.queue_offset,
        commitlog_offset: m.position,
        store_timestamp: m.store_timestamp,
        store_host: m.store_host.to_string(),
        offset_msg_id: m.offset_msg_id(),
    };
    for s in &t.sent {
        let Some(id) = &s.offset_msg_id else { continue };
        if decode_offset_msg_id(id).is_none() {
            continue;
        }
        if let Some(l) = reader.by_offset_msg_id(id) {
            if let Some(r) = l.record.as_ref().filter(|r| is_it(&r.message)) {
                return Some(from(&r.message));
            }
        }
    }
    let topic = t.topic.as_deref()?;
    if !reader.topics().iter().any(|x| x == topic) {
        return None;
    }
    let r = reader.by_uniq_key(&t.msg_id, Some(topic), INDEX_MAX);
    let o = r.offsets.first()?;
    let l = reader.message_at(*o).ok().flatten()?;
    Some(from(&l.message))
}
