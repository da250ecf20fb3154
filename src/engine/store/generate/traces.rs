//! The tracing clients of `gen --traces`: the trace records their dispatchers batch into
//! `RMQ_SYS_TRACE_TOPIC` messages, as the clients' `AsyncTraceDispatcher` sends them.

use crate::format::commitlog::{prop, Host, Message, MessageVersion};
use crate::format::compression::Compression;
use crate::format::error::{Error, Result};
use crate::format::msgid::to_hex;
use crate::format::trace::{
    encode_body, trace_keys, BodyBatcher, EndTransactionRecord, MessageType, PubRecord,
    SubAfterRecord, SubBeforeRecord, TraceRecord, TransactionState, DEFAULT_REGION_ID,
    DEFAULT_TRACE_TOPIC,
};

use super::{t_index, Gen, Rng, GROUPS, TX_PRODUCER_GROUP};

/// The tracing clients: their own random sequence and one dispatcher each.
pub(super) struct TraceGen {
    pub(super) rng: Rng,
    /// 0: the producers' dispatcher; 1 + i: the dispatcher of consumer group `GROUPS[i]`.
    pub(super) dispatchers: Vec<(Host, BodyBatcher)>,
    pub(super) uniq_counter: u16,
}

/// What a trace record says about a message, taken before it is stored.
pub(super) struct Traced {
    pub(super) topic: String,
    pub(super) msg_id: String,
    pub(super) tags: String,
    pub(super) keys: String,
    pub(super) born: i64,
    pub(super) body_len: i32,
    pub(super) reconsume_times: i32,
}

impl Traced {
    /// `topic` is the one the client sent to (a half message's real topic).
    pub(super) fn of(m: &Message, topic: &str) -> Self {
        let p = m.properties();
        let or_null = |k| p.get(k).map_or("null".to_string(), |v| v.into_owned());
        Traced {
            topic: topic.to_string(),
            msg_id: or_null(prop::UNIQ_KEY),
            tags: or_null(prop::TAGS),
            keys: or_null(prop::KEYS),
            born: m.born_timestamp,
            body_len: m.body.len() as i32,
            reconsume_times: m.reconsume_times,
        }
    }
}

impl Gen<'_> {
    /// The trace producer's UNIQ_KEY (its own process id and counter).
    pub(super) fn trace_uniq_key(&mut self) -> String {
        let Some(tr) = self.trace.as_mut() else {
            return String::new();
        };
        let mut b = vec![10, 1, 0, 21];
        b.extend_from_slice(&0x3206u16.to_be_bytes());
        b.extend_from_slice(&0x1A2B_3C4Du32.to_be_bytes());
        let in_month = (self.clock - 1_793_491_200_000).rem_euclid(1 << 32) as u32;
        b.extend_from_slice(&in_month.to_be_bytes());
        b.extend_from_slice(&tr.uniq_counter.to_be_bytes());
        tr.uniq_counter = tr.uniq_counter.wrapping_add(1);
        to_hex(&b)
    }

    /// Hand a record to dispatcher `d`; a full body is written at once.
    pub(super) fn trace_push(&mut self, d: usize, r: TraceRecord) -> Result<()> {
        let now = self.clock;
        let full = self
            .trace
            .as_mut()
            .and_then(|tr| tr.dispatchers.get_mut(d))
            .and_then(|(_, b)| b.push(r, now));
        match full {
            Some(records) => self.trace_write(d, records),
            None => Ok(()),
        }
    }

    /// `SendMessageTraceHookImpl`: the producer's record of a send the broker stored.
    pub(super) fn trace_pub(
        &mut self,
        t: &Traced,
        offset_msg_id: &str,
        mt: MessageType,
        group: &str,
    ) {
        let Some(tr) = self.trace.as_mut() else {
            return;
        };
        let cost = (self.clock - t.born).max(0) as i32 + tr.rng.below(3) as i32;
        let r = TraceRecord::Pub(PubRecord {
            timestamp: t.born,
            region_id: DEFAULT_REGION_ID.into(),
            group: group.into(),
            topic: t.topic.clone(),
            msg_id: t.msg_id.clone(),
            tags: t.tags.clone(),
            keys: t.keys.clone(),
            store_host: self.store_host.to_string(),
            body_length: t.body_len,
            cost_time: cost,
            msg_type: mt,
            offset_msg_id: Some(offset_msg_id.into()),
            success: true,
            client_host: None,
        });
        self.trace_deferred(0, r);
    }

    /// `ConsumeMessageTraceHookImpl`: group `GROUPS[g]` ran its listener on the message.
    pub(super) fn trace_consume(&mut self, t: &Traced, g: usize, success: bool) {
        let request_id = self.trace_uniq_key();
        let Some(tr) = self.trace.as_mut() else {
            return;
        };
        let begin = self.clock + tr.rng.below(5) as i64;
        let cost = 1 + tr.rng.below(40) as i32;
        let before = TraceRecord::SubBefore(SubBeforeRecord {
            timestamp: begin,
            region_id: DEFAULT_REGION_ID.into(),
            group: GROUPS[g].into(),
            request_id: request_id.clone(),
            msg_id: t.msg_id.clone(),
            retry_times: t.reconsume_times,
            keys: t.keys.clone(),
        });
        let after = TraceRecord::SubAfter(SubAfterRecord {
            request_id,
            msg_id: t.msg_id.clone(),
            cost_time: cost,
            success,
            keys: t.keys.clone(),
            // ConsumeReturnType: SUCCESS, or FAILED for RECONSUME_LATER
            context_code: Some(if success { 0 } else { 4 }),
            timestamp: Some(begin),
            group: Some(GROUPS[g].into()),
        });
        self.trace_deferred(1 + g, before);
        self.trace_deferred(1 + g, after);
    }

    /// PaymentGroup consumed everything on PaymentTopic, AuditGroup the first `q * 10` of each
    /// AuditTopic queue (their committed offsets, `write_configs`).
    pub(super) fn trace_if_consumed(&mut self, t: &Traced, queue: i32, queue_offset: i64) {
        let consumed = match t_index(&t.topic) {
            Some(1) => Some(1),
            Some(2) if queue_offset < queue as i64 * 10 => Some(2),
            _ => None,
        };
        if let Some(g) = consumed {
            self.trace_consume(t, g, true);
        }
    }

    /// `EndTransactionTraceHookImpl`.
    pub(super) fn trace_end(&mut self, t: &Traced, state: TransactionState) {
        let r = TraceRecord::EndTransaction(EndTransactionRecord {
            timestamp: self.clock,
            region_id: DEFAULT_REGION_ID.into(),
            group: TX_PRODUCER_GROUP.into(),
            topic: t.topic.clone(),
            msg_id: t.msg_id.clone(),
            tags: t.tags.clone(),
            keys: t.keys.clone(),
            store_host: self.store_host.to_string(),
            msg_type: MessageType::TransCommit,
            transaction_id: t.msg_id.clone(),
            transaction_state: state,
            from_transaction_check: false,
        });
        self.trace_deferred(0, r);
    }

    /// Queue a record; a write error is kept for the next flush to return (the hooks cannot
    /// fail, as the client's cannot).
    pub(super) fn trace_deferred(&mut self, d: usize, r: TraceRecord) {
        if let Err(e) = self.trace_push(d, r) {
            self.trace_error.get_or_insert(e);
        }
    }

    /// Send what each dispatcher has held for `WAIT_TIME_THRESHOLD_MS`; `all` at shutdown.
    pub(super) fn trace_flush(&mut self, all: bool) -> Result<()> {
        if let Some(e) = self.trace_error.take() {
            return Err(e);
        }
        let now = self.clock;
        let n = self.trace.as_ref().map_or(0, |t| t.dispatchers.len());
        for d in 0..n {
            let due = self
                .trace
                .as_mut()
                .and_then(|tr| tr.dispatchers.get_mut(d))
                .and_then(|(_, b)| if all { Some(b.take()) } else { b.due(now) });
            if let Some(records) = due.filter(|r| !r.is_empty()) {
                self.trace_write(d, records)?;
            }
        }
        Ok(())
    }

    /// One trace message (`AsyncDataSendTask.sendTraceDataByMQ`).
    pub(super) fn trace_write(&mut self, d: usize, records: Vec<TraceRecord>) -> Result<()> {
        let Some(born_host) = self
            .trace
            .as_ref()
            .and_then(|tr| tr.dispatchers.get(d))
            .map(|(h, _)| *h)
        else {
            return Ok(());
        };
        let plain = encode_body(&records);
        let keys = trace_keys(&records).join(" ");
        // DefaultMQProducer.compressMsgBodyOverHowmuch: 4 KiB
        let (body, flag) = if plain.len() > 4096 {
            let c = self
                .compressor
                .compress(Compression::Zlib, &plain)
                .map_err(|e| Error::io(self.w.root(), e))?;
            (c, Compression::Zlib.sys_flag_bits())
        } else {
            (plain, 0)
        };
        let uniq = self.trace_uniq_key();
        let props = self.props(vec![
            (prop::KEYS.into(), keys),
            (prop::UNIQ_KEY.into(), uniq),
            (prop::WAIT.into(), "true".into()),
            (prop::CLUSTER.into(), "DefaultCluster".into()),
        ]);
        let m = Message {
            topic: DEFAULT_TRACE_TOPIC.to_string(),
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: flag,
            born_timestamp: self.clock - 1,
            born_host,
            store_timestamp: self.clock,
            store_host: self.store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            properties: props,
            version: MessageVersion::for_topic(DEFAULT_TRACE_TOPIC),
        };
        self.put(m)?;
        self.summary.trace_messages += 1;
        self.summary.trace_records += records.len() as u64;
        Ok(())
    }
}
