//! Encoding trace records (`TraceDataEncoder.encoderFromContextBean`) and grouping them into
//! message bodies with the keys the dispatcher sets (`AsyncTraceDispatcher`).

use super::{
    TraceRecord, BATCH_SIZE, BODY_FLUSH_AT, CONTENT_SPLITOR, FIELD_SPLITOR, WAIT_TIME_THRESHOLD_MS,
};

/// Append one record as the 4.9 encoder writes it: the fields, each followed by
/// `CONTENT_SPLITOR`, the last by `FIELD_SPLITOR`. Optional fields are written up to the last
/// one present (a Pub without offset msg id is the 13-field form of old clients; a SubAfter
/// with a group is the 9-field form of 4.9).
pub fn encode_record(r: &TraceRecord, out: &mut Vec<u8>) {
    let mut f: Vec<String> = vec![r.trace_type().name().to_string()];
    match r {
        TraceRecord::Pub(p) => {
            f.extend([
                p.timestamp.to_string(),
                p.region_id.clone(),
                p.group.clone(),
                p.topic.clone(),
                p.msg_id.clone(),
                p.tags.clone(),
                p.keys.clone(),
                p.store_host.clone(),
                p.body_length.to_string(),
                p.cost_time.to_string(),
                p.msg_type.ordinal().to_string(),
            ]);
            if p.offset_msg_id.is_some() || p.client_host.is_some() {
                f.push(p.offset_msg_id.clone().unwrap_or_default());
            }
            f.push(p.success.to_string());
            if let Some(h) = &p.client_host {
                f.push(h.clone());
            }
        }
        TraceRecord::SubBefore(s) => f.extend([
            s.timestamp.to_string(),
            s.region_id.clone(),
            s.group.clone(),
            s.request_id.clone(),
            s.msg_id.clone(),
            s.retry_times.to_string(),
            s.keys.clone(),
        ]),
        TraceRecord::SubAfter(s) => {
            f.extend([
                s.request_id.clone(),
                s.msg_id.clone(),
                s.cost_time.to_string(),
                s.success.to_string(),
                s.keys.clone(),
            ]);
            let tail = [
                s.context_code.map(|c| c.to_string()),
                s.timestamp.map(|t| t.to_string()),
                s.group.clone(),
            ];
            let upto = tail.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
            let defaults = ["0", "0", ""];
            for (v, d) in tail.into_iter().zip(defaults).take(upto) {
                f.push(v.unwrap_or_else(|| d.to_string()));
            }
        }
        TraceRecord::EndTransaction(e) => f.extend([
            e.timestamp.to_string(),
            e.region_id.clone(),
            e.group.clone(),
            e.topic.clone(),
            e.msg_id.clone(),
            e.tags.clone(),
            e.keys.clone(),
            e.store_host.clone(),
            e.msg_type.ordinal().to_string(),
            e.transaction_id.clone(),
            e.transaction_state.name().to_string(),
            e.from_transaction_check.to_string(),
        ]),
    }
    let last = f.len() - 1;
    for (i, v) in f.iter().enumerate() {
        out.extend_from_slice(v.as_bytes());
        out.push(if i == last {
            FIELD_SPLITOR
        } else {
            CONTENT_SPLITOR
        });
    }
}

/// The body of one trace message holding `records`, in order.
pub fn encode_body<'a>(records: impl IntoIterator<Item = &'a TraceRecord>) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        encode_record(r, &mut out);
    }
    out
}

/// The KEYS the dispatcher sets on a trace message: each record's msg id, then its KEYS
/// elements (`TraceTransferBean.transKey`, joined with spaces by `Message.setKeys`). The client
/// collects them in a `HashSet`, in no order; here they come in first-seen order, once each.
/// A Java `null` keys (written `null`) adds nothing.
pub fn trace_keys<'a>(records: impl IntoIterator<Item = &'a TraceRecord>) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for r in records {
        for k in std::iter::once(r.msg_id()).chain(r.key_list()) {
            if !k.is_empty() && seen.insert(k.to_string()) {
                keys.push(k.to_string());
            }
        }
    }
    keys
}

/// Groups records into trace message bodies the way the dispatcher does: a body is sent when
/// it holds [`BATCH_SIZE`] records (4.9.0 to 4.9.3) or [`BODY_FLUSH_AT`] bytes (4.9.4+), or
/// when its first record is [`WAIT_TIME_THRESHOLD_MS`] old.
#[derive(Debug, Default)]
pub struct BodyBatcher {
    records: Vec<TraceRecord>,
    bytes: usize,
    first_at: Option<i64>,
}

impl BodyBatcher {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a record at client time `now`; the records of a full body are returned.
    pub fn push(&mut self, r: TraceRecord, now: i64) -> Option<Vec<TraceRecord>> {
        let mut one = Vec::new();
        encode_record(&r, &mut one);
        self.bytes += one.len();
        self.records.push(r);
        self.first_at.get_or_insert(now);
        (self.records.len() >= BATCH_SIZE || self.bytes >= BODY_FLUSH_AT).then(|| self.take())
    }

    /// The records held, if the first is old enough at `now` to be sent.
    pub fn due(&mut self, now: i64) -> Option<Vec<TraceRecord>> {
        let first = self.first_at?;
        (now - first >= WAIT_TIME_THRESHOLD_MS).then(|| self.take())
    }

    /// Everything held (a flush at shutdown); empty when nothing is.
    pub fn take(&mut self) -> Vec<TraceRecord> {
        self.bytes = 0;
        self.first_at = None;
        std::mem::take(&mut self.records)
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}
