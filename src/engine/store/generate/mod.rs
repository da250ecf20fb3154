//! A deterministic synthetic store: the same arguments give byte-identical files.
//!
//! It plays a broker's life through [`StoreWriter`]: ordinary messages on three topics (tags,
//! keys, user properties, IPv6 born hosts, compressed bodies), batches, delayed messages parked
//! in SCHEDULE_TOPIC_XXXX and delivered when due (so some are delivered and some still pending),
//! consumer send-backs to %RETRY% and %DLQ%, transaction half, commit, rollback and op messages,
//! and PREPARED/ROLLBACK-type records of old brokers. Then it writes the config files a broker
//! would: consumer offsets for several groups, delay offsets, topics and subscription groups.
//!
//! With [`GenOptions::traces`] the clients also trace, as 4.9 clients with tracing enabled do
//! (`AsyncTraceDispatcher`): the producers write a `Pub` record per message they send (delayed
//! ones as `Delay_Msg`, transaction halves as `Trans_Msg_Half`) and an `EndTransaction` record
//! per transaction they end; PaymentGroup and AuditGroup write `SubBefore`/`SubAfter` for what
//! their committed offsets say they consumed, and OrderGroup for the messages it failed and
//! sent back. Each client batches its records into trace messages on `RMQ_SYS_TRACE_TOPIC` (one
//! queue, as the broker creates it) by count, size and age, with the traced ids and keys as
//! KEYS and bodies over 4 KiB compressed, as the trace producer does. Batches are not traced.
//! The tracing draws from its own random sequence, so everything else is the same as without.
//!
//! With [`GenOptions::dledger`] the same broker runs in DLedger mode (a single-member group, the
//! writer's DLedger output); with [`GenOptions::converted`] it runs in normal mode for the first
//! half of the operations and in DLedger mode after, as a broker switched to DLedger mode does.
//! The messages are the same in every mode; only their offsets differ.

use std::collections::VecDeque;
use std::path::Path;

use crate::engine::store::dispatch::{SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};
use crate::engine::store::index_builder::IndexNaming;
use crate::engine::store::writer::{DledgerOutput, StoreWriter, WriterOptions};
use crate::format::commitlog::{encode_properties, prop, sysflag, Host, Message, MessageVersion};
use crate::format::compression::{Compression, Compressor};
use crate::format::config::files::{
    ConsumerOffsets, DataVersion, DelayOffsets, SubscriptionGroupConfig, SubscriptionGroups,
    TopicConfig, TopicConfigs,
};
use crate::format::error::{Error, Result};
use crate::format::geometry::Geometry;
use crate::format::msgid::to_hex;
use crate::format::trace::{BodyBatcher, MessageType, TransactionState, DEFAULT_TRACE_TOPIC};

mod traces;
use traces::{TraceGen, Traced};

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenOptions {
    pub messages: u64,
    pub seed: u64,
    pub geometry: Geometry,
    /// 1: a 4.9-style broker (no trailing property separator, WAIT dropped). 2: a 5.x broker
    /// (trailing separator, WAIT kept, a group name long enough for version 2 retry records).
    pub message_version: u8,
    /// Write the clients' message traces to `RMQ_SYS_TRACE_TOPIC` (see the module doc).
    pub traces: bool,
    /// Only what every client decodes: IPv4 born hosts, bodies plain or zlib with the bare
    /// COMPRESSED bit (no LZ4, zstd or compression-type bits).
    pub plain: bool,
    /// Write a DLedger-mode store as this member.
    pub dledger: Option<DledgerOutput>,
    /// With `dledger`: normal mode for the first half of the operations, then DLedger mode.
    pub converted: bool,
}

/// What was generated.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GenSummary {
    pub records: u64,
    pub bytes: u64,
    pub delayed_pending: u64,
    pub delayed_delivered: u64,
    /// Trace messages written (with `traces`).
    pub trace_messages: u64,
    /// Trace records in them.
    pub trace_records: u64,
    /// DLedger entries written (DLedger mode).
    pub dledger_entries: u64,
    /// Where the DLedger data begin in a converted store (`dividedCommitlogOffset`).
    pub divided_commitlog_offset: Option<u64>,
}

/// The ordinary topics and their consumer groups.
pub const TOPICS: [&str; 3] = ["OrderTopic", "PaymentTopic", "AuditTopic"];
pub const GROUPS: [&str; 3] = ["OrderGroup", "PaymentGroup", "AuditGroup"];
/// The producer group sending to each of [`TOPICS`] (in trace records).
pub const PRODUCER_GROUPS: [&str; 3] = [
    "OrderProducerGroup",
    "PaymentProducerGroup",
    "AuditProducerGroup",
];
/// The transactional producer's group.
pub const TX_PRODUCER_GROUP: &str = "TxProducerGroup";
const QUEUES: i32 = 4;
const START_MS: i64 = 1_796_000_000_000;
const DELAY_LEVELS: [i32; 6] = [1, 2, 3, 5, 10, 18];

/// SplitMix64: small, fast and stable across versions (the output must never change).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn fill(&mut self, out: &mut Vec<u8>, n: usize) {
        while out.len() < n {
            let v = self.next().to_le_bytes();
            let take = (n - out.len()).min(8);
            out.extend_from_slice(&v[..take]);
        }
    }
}

const WORDS: [&str; 16] = [
    "order",
    "payment",
    "refund",
    "shipped",
    "customer",
    "amount",
    "currency",
    "status",
    "warehouse",
    "priority",
    "express",
    "invoice",
    "coupon",
    "region",
    "上海",
    "Zürich",
];

struct Gen<'a> {
    rng: Rng,
    w: StoreWriter,
    opts: &'a GenOptions,
    clock: i64,
    uniq_counter: u16,
    store_host: Host,
    /// Parked delayed records per level (index level-1): (deliver time, parked message).
    parked: Vec<VecDeque<(i64, Message)>>,
    /// Next queue offset to deliver per level (delayOffset.json).
    delivered_upto: Vec<i64>,
    /// Recent OrderTopic messages a consumer may send back: (offset msg id, message).
    sent_back_pool: VecDeque<(String, Message)>,
    /// Open transactions: (half offset, half queue offset, half message).
    open_tx: VecDeque<(i64, i64, Message)>,
    summary: GenSummary,
    long_group: String,
    compressor: Compressor,
    /// Compressed bodies by algorithm (`Compression as usize`), see `compressed_body`.
    compressed_pool: [Vec<Vec<u8>>; 3],
    trace: Option<TraceGen>,
    /// A trace write that failed inside a hook, returned by the next flush.
    trace_error: Option<Error>,
}

/// The index of an ordinary topic in [`TOPICS`].
fn t_index(topic: &str) -> Option<usize> {
    TOPICS.iter().position(|t| *t == topic)
}

impl<'a> Gen<'a> {
    fn v5(&self) -> bool {
        self.opts.message_version >= 2
    }

    fn tick(&mut self) -> i64 {
        self.clock += 1 + self.rng.below(3) as i64;
        self.clock
    }

    /// A client UNIQ_KEY: IPv4 10.1.0.21, pid, class loader hash, ms in month, counter.
    fn uniq_key(&mut self) -> String {
        let mut b = vec![10, 1, 0, 21];
        b.extend_from_slice(&0x3205u16.to_be_bytes());
        b.extend_from_slice(&0x5FFD_2B27u32.to_be_bytes());
        let in_month = (self.clock - 1_793_491_200_000).rem_euclid(1 << 32) as u32; // 2026-11-01 UTC
        b.extend_from_slice(&in_month.to_be_bytes());
        b.extend_from_slice(&self.uniq_counter.to_be_bytes());
        self.uniq_counter = self.uniq_counter.wrapping_add(1);
        to_hex(&b)
    }

    fn props(&self, mut pairs: Vec<(String, String)>) -> Vec<u8> {
        if !self.v5() {
            pairs.retain(|(k, _)| k != prop::WAIT);
        }
        encode_properties(&pairs, self.v5())
    }

    /// A compressed 4-20 KiB text body. Compressing is the generator's costliest step, so each
    /// algorithm gets a small pool of bodies made on first use and reused after.
    fn compressed_body(&mut self, kind: Compression) -> Result<Vec<u8>> {
        const POOL: usize = 8;
        let k = kind as usize;
        if self.compressed_pool[k].is_empty() {
            for _ in 0..POOL {
                let len = 4096 + self.rng.below(16 * 1024) as usize;
                let text = self.text_body(len);
                let c = self
                    .compressor
                    .compress(kind, &text)
                    .map_err(|e| Error::io(self.w.root(), e))?;
                self.compressed_pool[k].push(c);
            }
        }
        let i = self.rng.below(POOL as u64) as usize;
        Ok(self.compressed_pool[k].get(i).cloned().unwrap_or_default())
    }

    fn text_body(&mut self, len: usize) -> Vec<u8> {
        let mut s = String::with_capacity(len + 32);
        s.push_str("{\"id\":");
        s.push_str(&self.rng.below(1_000_000).to_string());
        while s.len() < len {
            s.push_str(",\"");
            s.push_str(WORDS[self.rng.below(16) as usize]);
            s.push_str("\":\"");
            s.push_str(WORDS[self.rng.below(16) as usize]);
            s.push('"');
        }
        s.push('}');
        s.into_bytes()
    }

    fn base_message(
        &mut self,
        topic: &str,
        queue_id: i32,
        body: Vec<u8>,
        props: Vec<u8>,
    ) -> Message {
        let born = self.clock - 1 - self.rng.below(5) as i64;
        let born_host = if self.rng.below(97) == 0 && !self.opts.plain {
            Host::new(
                "fd00::21"
                    .parse()
                    .unwrap_or(std::net::Ipv6Addr::LOCALHOST.into()),
                50000,
            )
        } else {
            Host::v4(
                [10, 1, 0, 21 + self.rng.below(3) as u8],
                50000 + self.rng.below(1000) as i32,
            )
        };
        Message {
            topic: topic.to_string(),
            queue_id,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp: born,
            born_host,
            store_timestamp: self.clock,
            store_host: self.store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            properties: props,
            version: MessageVersion::for_topic(topic),
        }
    }

    fn put(&mut self, m: Message) -> Result<crate::engine::store::writer::Appended> {
        let a = self.w.append(m)?;
        self.summary.records += 1;
        self.summary.bytes += a.wrote_bytes as u64;
        Ok(a)
    }

    /// Deliver every parked message that is due, level by level, as the schedule service does.
    fn deliver_due(&mut self) -> Result<()> {
        for level in 0..self.parked.len() {
            while self.parked[level]
                .front()
                .is_some_and(|(t, _)| *t <= self.clock)
            {
                let Some((_, parked)) = self.parked[level].pop_front() else {
                    break;
                };
                let p = parked.properties();
                let real_topic = p
                    .get(prop::REAL_TOPIC)
                    .map(|s| s.into_owned())
                    .unwrap_or_default();
                let real_qid = p
                    .get(prop::REAL_QID)
                    .and_then(|s| crate::format::java::parse_int(&s))
                    .unwrap_or(0);
                let mut m = parked.clone();
                m.version = MessageVersion::for_topic(&real_topic);
                m.topic = real_topic;
                m.queue_id = real_qid;
                m.store_timestamp = self.tick();
                let traced = self.trace.is_some().then(|| Traced::of(&m, &m.topic));
                let queue = m.queue_id;
                let a = self.put(m)?;
                if let Some(t) = traced {
                    self.trace_if_consumed(&t, queue, a.queue_offset);
                }
                self.delivered_upto[level] += 1;
                self.summary.delayed_delivered += 1;
            }
        }
        Ok(())
    }

    /// Park a message in SCHEDULE_TOPIC_XXXX (the broker's delay-level rewrite); the offset
    /// message id of the parked record.
    fn park(
        &mut self,
        mut m: Message,
        level: i32,
        extra: Vec<(String, String)>,
    ) -> Result<Option<String>> {
        let mut pairs: Vec<(String, String)> = m
            .properties()
            .iter()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        pairs.extend(extra);
        pairs.push((prop::REAL_TOPIC.into(), m.topic.clone()));
        pairs.push((prop::REAL_QID.into(), m.queue_id.to_string()));
        pairs.push((prop::DELAY.into(), level.to_string()));
        m.properties = self.props(pairs);
        m.topic = SCHEDULE_TOPIC.into();
        m.queue_id = level - 1;
        m.version = MessageVersion::V1;
        m.store_timestamp = self.clock;
        let due = self.clock + self.opts.geometry.delay_millis(level).unwrap_or(1000);
        let parked = m.clone();
        let a = self.put(m)?;
        if let Some(q) = self.parked.get_mut((level - 1) as usize) {
            q.push_back((due, parked));
        }
        Ok(Some(a.msg_id))
    }

    fn normal(&mut self, i: u64) -> Result<()> {
        let t = self.rng.below(3) as usize;
        let topic = TOPICS[t];
        let queue = self.rng.below(QUEUES as u64) as i32;
        let mut pairs: Vec<(String, String)> = Vec::new();
        let tags = ["TagA", "TagB", "TagC", ""][self.rng.below(4) as usize];
        if !tags.is_empty() {
            pairs.push((prop::TAGS.into(), tags.into()));
        }
        match self.rng.below(4) {
            0 => pairs.push((prop::KEYS.into(), format!("key-{i}"))),
            1 => pairs.push((
                prop::KEYS.into(),
                format!("order-{i} user-{}", self.rng.below(50)),
            )),
            2 => pairs.push((prop::KEYS.into(), format!("hot-key-{}", i % 7))),
            _ => {}
        }
        pairs.push((prop::UNIQ_KEY.into(), self.uniq_key()));
        pairs.push((prop::WAIT.into(), "true".into()));
        pairs.push((
            "traceId".into(),
            format!("t{:x}", self.rng.next() & 0xFFFFF),
        ));
        if i.is_multiple_of(5) {
            pairs.push(("region".into(), "cn-上海".into()));
        }
        pairs.push((prop::CLUSTER.into(), "DefaultCluster".into()));
        let (body, flag_bits) = if i % 50 == 25 {
            let kind = match (i / 50) % 4 {
                _ if self.opts.plain => None,
                0 => Some(Compression::Zlib),
                1 => None, // zlib as clients before 4.9.4: only the COMPRESSED bit
                2 => Some(Compression::Lz4),
                _ => Some(Compression::Zstd),
            };
            let c = self.compressed_body(kind.unwrap_or(Compression::Zlib))?;
            (
                c,
                kind.map(|k| k.sys_flag_bits())
                    .unwrap_or(sysflag::COMPRESSED),
            )
        } else if self.rng.below(4) == 0 {
            let mut b = Vec::new();
            let n = 1 + self.rng.below(2000) as usize;
            self.rng.fill(&mut b, n);
            (b, 0)
        } else {
            let n = 20 + self.rng.below(1500) as usize;
            (self.text_body(n), 0)
        };
        let props = self.props(pairs);
        let mut m = self.base_message(topic, queue, body, props);
        m.sys_flag |= flag_bits;
        if i % 37 == 5 {
            let level = DELAY_LEVELS[self.rng.below(DELAY_LEVELS.len() as u64) as usize];
            let traced = self.trace.is_some().then(|| Traced::of(&m, topic));
            let parked = self.park(m, level, Vec::new())?;
            if let (Some(tr), Some(id)) = (traced, parked) {
                self.trace_pub(&tr, &id, MessageType::Delay, PRODUCER_GROUPS[t]);
            }
            return Ok(());
        }
        let keep = topic == TOPICS[0] && self.sent_back_pool.len() < 64;
        let copy = keep.then(|| m.clone());
        let traced = self.trace.is_some().then(|| Traced::of(&m, topic));
        let a = self.put(m)?;
        if let Some(tr) = traced {
            self.trace_pub(&tr, &a.msg_id, MessageType::Normal, PRODUCER_GROUPS[t]);
            self.trace_if_consumed(&tr, queue, a.queue_offset);
        }
        if let Some(m) = copy {
            self.sent_back_pool.push_back((
                a.msg_id,
                Message {
                    queue_offset: a.queue_offset,
                    ..m
                },
            ));
        }
        Ok(())
    }

    fn batch(&mut self, i: u64) -> Result<()> {
        let n = 8 + self.rng.below(3);
        let queue = self.rng.below(QUEUES as u64) as i32;
        let batch_uniq = self.uniq_key();
        for k in 0..n {
            let mut pairs = vec![
                (prop::TAGS.to_string(), "TagBatch".to_string()),
                (prop::KEYS.to_string(), format!("batch-{i}-{k}")),
                (prop::UNIQ_KEY.to_string(), self.uniq_key()),
            ];
            if self.v5() {
                // 5.x appends the batch-level properties after each inner message's own.
                pairs.push((prop::UNIQ_KEY.into(), batch_uniq.clone()));
                pairs.push((prop::CLUSTER.into(), "DefaultCluster".into()));
                pairs.push((prop::WAIT.into(), "true".into()));
            } else {
                pairs.push((prop::CLUSTER.into(), "DefaultCluster".into()));
            }
            let n = 60 + self.rng.below(200) as usize;
            let body = self.text_body(n);
            let props = self.props(pairs);
            let m = self.base_message(TOPICS[2], queue, body, props);
            self.put(m)?;
        }
        Ok(())
    }

    fn send_back(&mut self) -> Result<()> {
        let Some((msg_id, orig)) = self.sent_back_pool.pop_front() else {
            return Ok(());
        };
        let group = if self.v5() && self.rng.below(2) == 0 {
            self.long_group.clone()
        } else {
            GROUPS[0].to_string()
        };
        let mut pairs: Vec<(String, String)> = orig
            .properties()
            .iter()
            .filter(|(k, _)| k != prop::WAIT)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        pairs.push((prop::RETRY_TOPIC.into(), orig.topic.clone()));
        pairs.push((prop::ORIGIN_MESSAGE_ID.into(), msg_id));
        pairs.push((prop::WAIT.into(), "false".into()));
        let to_dlq = self.rng.below(4) == 0;
        if self.trace.is_some() {
            self.trace_consume(&Traced::of(&orig, &orig.topic), 0, false);
        }
        let mut m = orig.clone();
        m.reconsume_times = orig.reconsume_times + 1;
        m.store_timestamp = self.clock;
        if to_dlq {
            pairs.push((prop::DELAY.into(), "0".into()));
            m.properties = self.props(pairs);
            m.topic = crate::engine::store::dispatch::dlq_topic(&group);
            m.queue_id = 0;
            m.version = MessageVersion::for_topic(&m.topic);
            self.put(m)?;
        } else {
            m.properties = self.props(pairs);
            m.topic = crate::engine::store::dispatch::retry_topic(&group);
            m.queue_id = 0;
            self.park(m, 3 + orig.reconsume_times, Vec::new())?;
        }
        Ok(())
    }

    fn half(&mut self) -> Result<()> {
        let queue = self.rng.below(QUEUES as u64) as i32;
        let pairs = vec![
            (prop::TRAN_MSG.to_string(), "true".to_string()),
            (prop::PGROUP.to_string(), "TxProducerGroup".to_string()),
            (prop::UNIQ_KEY.to_string(), self.uniq_key()),
            (
                prop::KEYS.to_string(),
                format!("tx-{}", self.summary.records),
            ),
            (prop::REAL_TOPIC.to_string(), TOPICS[1].to_string()),
            (prop::REAL_QID.to_string(), queue.to_string()),
            (prop::CLUSTER.to_string(), "DefaultCluster".to_string()),
        ];
        let body = self.text_body(100);
        let props = self.props(pairs);
        let m = self.base_message(TRANS_HALF_TOPIC, 0, body, props);
        let a = self.put(m.clone())?;
        if self.trace.is_some() {
            let t = Traced::of(&m, TOPICS[1]);
            self.trace_pub(&t, &a.msg_id, MessageType::TransHalf, TX_PRODUCER_GROUP);
        }
        self.open_tx
            .push_back((a.wrote_offset as i64, a.queue_offset, m));
        Ok(())
    }

    fn end_transaction(&mut self) -> Result<()> {
        let Some((half_offset, half_qo, half)) = self.open_tx.pop_front() else {
            return Ok(());
        };
        let traced = self.trace.is_some().then(|| Traced::of(&half, TOPICS[1]));
        match self.rng.below(5) {
            0 => {
                // left unresolved: the local transaction answered UNKNOW
                if let Some(t) = traced {
                    self.trace_end(&t, TransactionState::Unknown);
                }
                return Ok(());
            }
            1 | 2 => {
                // commit: the real message, COMMIT type, pointing at the half record
                let p = half.properties();
                let topic = p
                    .get(prop::REAL_TOPIC)
                    .map(|s| s.into_owned())
                    .unwrap_or_default();
                let qid = p
                    .get(prop::REAL_QID)
                    .and_then(|s| crate::format::java::parse_int(&s))
                    .unwrap_or(0);
                let mut m = half.clone();
                m.version = MessageVersion::for_topic(&topic);
                m.topic = topic;
                m.queue_id = qid;
                m.sys_flag =
                    (m.sys_flag & !sysflag::TRANSACTION_MASK) | sysflag::TRANSACTION_COMMIT;
                m.prepared_transaction_offset = half_offset;
                m.store_timestamp = self.clock;
                self.put(m)?;
                if let Some(t) = &traced {
                    self.trace_end(t, TransactionState::Commit);
                    // PaymentGroup consumes everything on PaymentTopic
                    self.trace_consume(t, 1, true);
                }
            }
            _ => {
                // rollback: only the op message
                if let Some(t) = &traced {
                    self.trace_end(t, TransactionState::Rollback);
                }
            }
        }
        let mut pairs = vec![(prop::TAGS.to_string(), "d".to_string())];
        if !self.v5() {
            pairs.push((prop::UNIQ_KEY.to_string(), self.uniq_key()));
        }
        pairs.push((prop::WAIT.to_string(), "false".to_string()));
        let body = if self.v5() {
            format!("{half_qo},").into_bytes()
        } else {
            half_qo.to_string().into_bytes()
        };
        let props = self.props(pairs);
        let op = self.base_message(TRANS_OP_HALF_TOPIC, 0, body, props);
        self.put(op)?;
        Ok(())
    }

    /// A record of the PREPARED or ROLLBACK transaction type, as old brokers stored them.
    fn typed_transaction(&mut self, rollback: bool) -> Result<()> {
        let pairs = vec![
            (prop::UNIQ_KEY.to_string(), self.uniq_key()),
            (
                prop::KEYS.to_string(),
                format!("typed-tx-{}", self.summary.records),
            ),
            (prop::TAGS.to_string(), "TagTx".to_string()),
        ];
        let body = self.text_body(80);
        let props = self.props(pairs);
        let mut m = self.base_message(TOPICS[1], 0, body, props);
        m.sys_flag |= if rollback {
            sysflag::TRANSACTION_ROLLBACK
        } else {
            sysflag::TRANSACTION_PREPARED
        };
        self.put(m)?;
        Ok(())
    }
}

/// Generate a store into `dir` (which must not hold a commitlog yet). `progress` is called with
/// the bytes written so far.
pub fn generate(dir: &Path, opts: &GenOptions, progress: &dyn Fn(u64)) -> Result<GenSummary> {
    let w = StoreWriter::create(
        dir,
        WriterOptions {
            geometry: opts.geometry.clone(),
            consumequeue: true,
            index: true,
            index_naming: IndexNaming::Utc,
            dledger: opts.dledger.clone().filter(|_| !opts.converted),
        },
    )?;
    let convert_at = opts
        .dledger
        .as_ref()
        .filter(|_| opts.converted)
        .map(|d| (opts.messages / 2, d.clone()));
    let levels = opts.geometry.delay_levels.value.len();
    let mut g = Gen {
        rng: Rng(opts.seed ^ 0x005E_ED0F_4B40_u64),
        w,
        opts,
        clock: START_MS,
        uniq_counter: 0,
        store_host: Host::v4([192, 168, 0, 10], 10911),
        parked: (0..levels).map(|_| VecDeque::new()).collect(),
        delivered_upto: vec![0; levels],
        sent_back_pool: VecDeque::new(),
        open_tx: VecDeque::new(),
        summary: GenSummary::default(),
        long_group: format!("LongGroup{}", "x".repeat(125)),
        compressor: Compressor::default(),
        compressed_pool: Default::default(),
        trace: opts.traces.then(|| TraceGen {
            rng: Rng(opts.seed ^ 0x0007_1ACE_D15C),
            dispatchers: std::iter::once(Host::v4([10, 1, 0, 21], 50990))
                .chain((0..GROUPS.len()).map(|i| Host::v4([10, 1, 0, 31 + i as u8], 51001)))
                .map(|h| (h, BodyBatcher::new()))
                .collect(),
            uniq_counter: 0,
        }),
        trace_error: None,
    };
    let mut i = 0u64;
    while i < opts.messages {
        if let Some((at, d)) = &convert_at {
            if i == *at {
                g.w.convert_to_dledger(d.clone())?;
            }
        }
        g.tick();
        g.deliver_due()?;
        match i % 100 {
            13 if i % 500 == 13 => g.batch(i)?,
            17 | 67 => g.half()?,
            29 | 79 => g.end_transaction()?,
            41 | 91 => g.send_back()?,
            59 if i % 700 == 59 => g.typed_transaction(false)?,
            97 if i % 900 == 97 => g.typed_transaction(true)?,
            _ => g.normal(i)?,
        }
        g.trace_flush(false)?;
        i += 1;
        if i.is_multiple_of(1024) {
            progress(g.summary.bytes);
        }
    }
    // Let the schedule service run for a while after the last put, as a broker would.
    let stop = g.clock + 12_000;
    while g.clock < stop {
        g.clock += 500;
        g.deliver_due()?;
        g.trace_flush(false)?;
    }
    g.trace_flush(true)?;
    g.summary.delayed_pending = g.parked.iter().map(|q| q.len() as u64).sum();
    write_configs(&g)?;
    let Gen { w, mut summary, .. } = g;
    summary.dledger_entries = w.dledger_entries();
    summary.divided_commitlog_offset = w.divide();
    w.finish()?;
    progress(summary.bytes);
    Ok(summary)
}

fn write_configs(g: &Gen<'_>) -> Result<()> {
    let now = g.clock;
    let v5 = g.v5();
    let version = |counter| {
        if v5 {
            DataVersion::with_state_version(counter, 0, now)
        } else {
            DataVersion::new(counter, now)
        }
    };

    // Consumer offsets: the previous generation goes to .bak, as the broker's persist does.
    let mut previous = ConsumerOffsets::new();
    let mut offsets = ConsumerOffsets::new();
    for (t, topic) in TOPICS.iter().enumerate() {
        for q in 0..QUEUES {
            let max = g.w.next_queue_offset(topic, q);
            let done = match t {
                0 => max * 3 / 5,
                1 => max,
                _ => (q as i64 * 10).min(max),
            };
            offsets.set(topic, GROUPS[t], q, done);
            previous.set(topic, GROUPS[t], q, done / 2);
        }
    }
    let retry = crate::engine::store::dispatch::retry_topic(GROUPS[0]);
    let retry_max = g.w.next_queue_offset(&retry, 0);
    offsets.set(&retry, GROUPS[0], 0, retry_max / 2);
    g.w.write_config(&previous)?;
    g.w.write_config(&offsets)?;

    let mut delay = DelayOffsets::new();
    for (i, &n) in g.delivered_upto.iter().enumerate() {
        let level = i as i32 + 1;
        if n > 0 || (v5 && DELAY_LEVELS.contains(&level)) {
            delay.set(level, n);
        }
    }
    g.w.write_config(&delay)?;

    let mut topics = TopicConfigs::new(version(TOPICS.len() as i64));
    for t in TOPICS {
        let mut c = TopicConfig::new(t);
        c.read_queue_nums = QUEUES;
        c.write_queue_nums = QUEUES;
        if v5 {
            c.attributes = Some(Vec::new());
        }
        topics.insert(c);
    }
    let mut sched = TopicConfig::new(SCHEDULE_TOPIC);
    sched.read_queue_nums = 18;
    sched.write_queue_nums = 18;
    topics.insert(sched);
    for t in [TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC] {
        let mut c = TopicConfig::new(t);
        c.read_queue_nums = 1;
        c.write_queue_nums = 1;
        topics.insert(c);
    }
    if g.trace.is_some() {
        // TopicConfigManager with traceTopicEnable: one queue
        let mut c = TopicConfig::new(DEFAULT_TRACE_TOPIC);
        c.read_queue_nums = 1;
        c.write_queue_nums = 1;
        topics.insert(c);
    }
    g.w.write_config(&topics)?;

    let mut groups = SubscriptionGroups::new(version(GROUPS.len() as i64));
    for gname in GROUPS {
        groups.insert(SubscriptionGroupConfig::new(gname));
    }
    if v5 {
        groups.insert(SubscriptionGroupConfig::new(g.long_group.clone()));
    }
    g.w.write_config(&groups)?;
    Ok(())
}
