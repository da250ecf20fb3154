//! Admin tables keyed by `MessageQueue`: `ConsumeStats` (GET_CONSUME_STATS), `TopicStatsTable`
//! (GET_TOPIC_STATS_INFO) and `ResetOffsetBody` (INVOKE_BROKER_TO_RESET_OFFSET).
//!
//! fastjson writes a `Map<MessageQueue, _>` with each key as a JSON object:
//! `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5,…}}}`. Java
//! admin tools read only that shape, so it is written as is. Entries keep the order given.

use super::{compact, java_double, object, MessageQueue};
use crate::format::config::fastjson::JsonValue;

/// `OffsetWrapper`: one queue's offsets for a group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffsetWrapper {
    /// The queue's max offset.
    pub broker_offset: i64,
    /// The group's committed offset.
    pub consumer_offset: i64,
    /// Store time of the last consumed message (ms), 0 if none.
    pub last_timestamp: i64,
    /// 5.x's `pullOffset`, where the group's pulls got to (`mqadmin consumerProgress` prints it
    /// less the consumer offset as the queue's in-flight count); 4.9's tools ignore it.
    pub pull_offset: i64,
}

/// `ConsumeStats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsumeStats {
    pub offset_table: Vec<(MessageQueue, OffsetWrapper)>,
    pub consume_tps: f64,
}

/// `TopicOffset`: one queue's offset range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicOffset {
    pub min_offset: i64,
    pub max_offset: i64,
    /// Store time of the newest message (ms), 0 if empty.
    pub last_update_timestamp: i64,
}

/// `TopicStatsTable`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicStatsTable {
    pub offset_table: Vec<(MessageQueue, TopicOffset)>,
}

/// `ResetOffsetBody`: the new offset per queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResetOffsetBody {
    pub offset_table: Vec<(MessageQueue, i64)>,
}

/// `{key:value,…}` with `MessageQueue` object keys.
fn queue_map<T>(entries: &[(MessageQueue, T)], value: impl Fn(&T) -> String) -> String {
    let mut out = String::from("{");
    for (n, (mq, v)) in entries.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(&compact(&mq.to_value()));
        out.push(':');
        out.push_str(&value(v));
    }
    out.push('}');
    out
}

impl ConsumeStats {
    /// The body as the broker writes it.
    pub fn to_json(&self) -> String {
        let table = queue_map(&self.offset_table, |w| {
            compact(&object(vec![
                ("brokerOffset", JsonValue::int(w.broker_offset)),
                ("consumerOffset", JsonValue::int(w.consumer_offset)),
                ("lastTimestamp", JsonValue::int(w.last_timestamp)),
                ("pullOffset", JsonValue::int(w.pull_offset)),
            ]))
        });
        format!(
            "{{\"consumeTps\":{},\"offsetTable\":{table}}}",
            java_double(self.consume_tps)
        )
    }
}

impl TopicStatsTable {
    /// The body as the broker writes it.
    pub fn to_json(&self) -> String {
        let table = queue_map(&self.offset_table, |t| {
            compact(&object(vec![
                (
                    "lastUpdateTimestamp",
                    JsonValue::int(t.last_update_timestamp),
                ),
                ("maxOffset", JsonValue::int(t.max_offset)),
                ("minOffset", JsonValue::int(t.min_offset)),
            ]))
        });
        format!("{{\"offsetTable\":{table}}}")
    }
}

impl ResetOffsetBody {
    /// The body as the broker writes it.
    pub fn to_json(&self) -> String {
        let table = queue_map(&self.offset_table, |o| o.to_string());
        format!("{{\"offsetTable\":{table}}}")
    }
}
