//! Message trace records: the text a tracing client (4.9 `AsyncTraceDispatcher`) puts in the
//! bodies of the messages it sends to `RMQ_SYS_TRACE_TOPIC` (or a custom trace topic).
//!
//! The encoding is the client's `TraceDataEncoder` (`encoderFromContextBean` writes,
//! `decoderFromTraceDataString` reads) over `TraceContext` and `TraceBean`, with the separators
//! of `TraceConstants` and the types of `TraceType`, as in the 4.9.x client. A body is a run of
//! records, each ended by [`FIELD_SPLITOR`] (`(char) 2`); inside a record the fields are
//! separated by [`CONTENT_SPLITOR`] (`(char) 1`), the first being the type name. Java writes
//! `null` strings as the four letters `null`; they are kept as found.
//!
//! | type | fields after the type name |
//! |---|---|
//! | `Pub` | timestamp, region id, group, topic, msg id, tags, keys, store host, body length, cost time, msg type (ordinal), offset msg id, success [, client host] |
//! | `SubBefore` | timestamp, region id, group, request id, msg id, retry times, keys |
//! | `SubAfter` | request id, msg id, cost time, success, keys [, context code [, timestamp [, group]]] |
//! | `EndTransaction` | timestamp, region id, group, topic, msg id, tags, keys, store host, msg type, transaction id, transaction state (name), from transaction check |
//!
//! Field counts differ between client releases, and the reader takes each form the 4.9 client's
//! decoder takes, plus the ones later clients write:
//! - `Pub`: 13 fields (clients before the offset msg id), 14 (4.9), 15 or more (a client host
//!   after success). 12 fields read with success `true`, as the client's decoder does.
//! - `SubAfter`: 6 (before the context code), 7 (4.9.1, which dropped the timestamp and group),
//!   8 (timestamp without group, some 5.x), 9 (4.9.0, 4.9.2 and later). The 4.9 decoder reads
//!   the timestamp only with 9 fields; here it is read whenever present.
//! - Since 4.9.5 a client on the `CLOUD` access channel ends a `SubAfter` after the context
//!   code with a `CONTENT_SPLITOR` and no `FIELD_SPLITOR`, so the next record of the body is
//!   glued to it; the client's own decoder fails on such a body. The reader splits the record
//!   where a type name follows the context code.
//!
//! Java's `String.split` drops trailing empty fields, so an empty last field (keys) is absent
//! from the field count; the reader takes a missing trailing text field as empty. Booleans follow
//! `Boolean.parseBoolean` (`true` in any case is true, anything else false); numbers follow
//! `Integer.parseInt` / `Long.parseLong`, and a field that is not one is an error naming the
//! field, as is an unknown msg type ordinal or transaction state. A record of a type this reader
//! does not know (5.x `Recall`) is reported as such; an empty record is skipped, as the client
//! skips it.
//!
//! [`read::records`] decodes a body record by record (an error in one record does not hide the
//! others); [`write::encode_record`] writes one record exactly as the 4.9 encoder does, and
//! [`write::BodyBatcher`] groups records into bodies as the dispatcher does.

pub mod read;
pub mod write;

#[cfg(test)]
mod tests;

use serde::Serialize;

pub use read::{records, DecodeError, DecodeErrorKind};
pub use write::{encode_body, encode_record, trace_keys, BodyBatcher};

/// `TraceConstants.CONTENT_SPLITOR`: between the fields of a record.
pub const CONTENT_SPLITOR: u8 = 1;
/// `TraceConstants.FIELD_SPLITOR`: after each record.
pub const FIELD_SPLITOR: u8 = 2;
/// `TopicValidator.RMQ_SYS_TRACE_TOPIC`: the default trace topic.
pub const DEFAULT_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// `TraceConstants.TRACE_TOPIC_PREFIX`: trace topics per region on the `CLOUD` access channel.
pub const CLOUD_TRACE_TOPIC_PREFIX: &str = "rmq_sys_TRACE_DATA_";
/// `MixAll.DEFAULT_TRACE_REGION_ID`.
pub const DEFAULT_REGION_ID: &str = "DefaultRegion";
/// `TraceConstants.GROUP_NAME_PREFIX`: the trace producer's group is
/// `_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>`.
pub const TRACE_PRODUCER_GROUP_PREFIX: &str = "_INNER_TRACE_PRODUCER";
/// `AsyncTraceDispatcher.maxMsgSize`: the trace producer's largest body (characters).
pub const MAX_MSG_SIZE: usize = 128_000;
/// `AsyncTraceDispatcher.batchSize`: contexts taken from the queue per send (4.9.0 to 4.9.3).
pub const BATCH_SIZE: usize = 100;
/// A 4.9.4+ dispatcher sends a body once it reaches `maxMsgSize - 10 * 1000` characters.
pub const BODY_FLUSH_AT: usize = MAX_MSG_SIZE - 10_000;
/// `AsyncTraceDispatcher.waitTimeThresholdMil`: a 4.9.4+ dispatcher sends what it holds once
/// the first record is this old (ms).
pub const WAIT_TIME_THRESHOLD_MS: i64 = 500;

/// `TraceType`: what a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum TraceType {
    Pub,
    SubBefore,
    SubAfter,
    EndTransaction,
}

impl TraceType {
    pub const ALL: [TraceType; 4] = [
        TraceType::Pub,
        TraceType::SubBefore,
        TraceType::SubAfter,
        TraceType::EndTransaction,
    ];

    /// The Java enum name, as written in the first field.
    pub fn name(self) -> &'static str {
        match self {
            TraceType::Pub => "Pub",
            TraceType::SubBefore => "SubBefore",
            TraceType::SubAfter => "SubAfter",
            TraceType::EndTransaction => "EndTransaction",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// `MessageType` (common), written as its ordinal. `Order_Msg` is 5.x only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    Normal,
    TransHalf,
    TransCommit,
    Delay,
    Order,
}

impl MessageType {
    pub const ALL: [MessageType; 5] = [
        MessageType::Normal,
        MessageType::TransHalf,
        MessageType::TransCommit,
        MessageType::Delay,
        MessageType::Order,
    ];

    /// `ordinal()`.
    pub fn ordinal(self) -> i32 {
        self as i32
    }

    /// `MessageType.values()[n]`.
    pub fn from_ordinal(n: i32) -> Option<Self> {
        usize::try_from(n)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }

    /// The Java enum name.
    pub fn name(self) -> &'static str {
        match self {
            MessageType::Normal => "Normal_Msg",
            MessageType::TransHalf => "Trans_Msg_Half",
            MessageType::TransCommit => "Trans_msg_Commit",
            MessageType::Delay => "Delay_Msg",
            MessageType::Order => "Order_Msg",
        }
    }
}

impl Serialize for MessageType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// `LocalTransactionState`, written by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionState {
    Commit,
    Rollback,
    Unknown,
}

impl TransactionState {
    pub const ALL: [TransactionState; 3] = [
        TransactionState::Commit,
        TransactionState::Rollback,
        TransactionState::Unknown,
    ];

    /// The Java enum name (`UNKNOW` is the client's spelling).
    pub fn name(self) -> &'static str {
        match self {
            TransactionState::Commit => "COMMIT_MESSAGE",
            TransactionState::Rollback => "ROLLBACK_MESSAGE",
            TransactionState::Unknown => "UNKNOW",
        }
    }

    /// `LocalTransactionState.valueOf(s)`.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }
}

impl Serialize for TransactionState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// `ConsumeReturnType`, the SubAfter context code's meaning (its ordinal).
pub fn consume_return_type(code: i32) -> Option<&'static str> {
    ["SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED"]
        .get(usize::try_from(code).ok()?)
        .copied()
}

/// A `Pub` record: the producer's send (`SendMessageTraceHookImpl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PubRecord {
    /// When the send started (client clock, ms).
    pub timestamp: i64,
    pub region_id: String,
    /// The producer group (namespace removed).
    pub group: String,
    pub topic: String,
    /// The client message id (UNIQ_KEY).
    pub msg_id: String,
    pub tags: String,
    /// The message's KEYS, space separated.
    pub keys: String,
    /// The broker address the message was sent to.
    pub store_host: String,
    pub body_length: i32,
    /// Milliseconds from the start of the send to its result.
    pub cost_time: i32,
    pub msg_type: MessageType,
    /// The broker's offset message id; `None` in the 13-field form of old clients.
    pub offset_msg_id: Option<String>,
    /// The send status was SEND_OK.
    pub success: bool,
    /// The producer's address, in the 15-field form only.
    pub client_host: Option<String>,
}

/// A `SubBefore` record: a consumer is about to run its listener (`consumeMessageBefore`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubBeforeRecord {
    pub timestamp: i64,
    pub region_id: String,
    /// The consumer group.
    pub group: String,
    /// Pairs this record with its `SubAfter`.
    pub request_id: String,
    pub msg_id: String,
    /// The message's reconsume times.
    pub retry_times: i32,
    pub keys: String,
}

/// A `SubAfter` record: the listener returned (`consumeMessageAfter`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubAfterRecord {
    pub request_id: String,
    pub msg_id: String,
    /// Milliseconds the listener took, per message of the batch.
    pub cost_time: i32,
    pub success: bool,
    pub keys: String,
    /// `ConsumeReturnType` ordinal (7 fields and more).
    pub context_code: Option<i32>,
    /// The SubBefore's timestamp (8 fields and more).
    pub timestamp: Option<i64>,
    /// The consumer group (9 fields).
    pub group: Option<String>,
}

/// An `EndTransaction` record: the producer ended a transaction (`EndTransactionTraceHookImpl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndTransactionRecord {
    pub timestamp: i64,
    pub region_id: String,
    pub group: String,
    pub topic: String,
    pub msg_id: String,
    pub tags: String,
    pub keys: String,
    pub store_host: String,
    pub msg_type: MessageType,
    pub transaction_id: String,
    pub transaction_state: TransactionState,
    /// The state came from the broker's transaction check, not the local transaction.
    pub from_transaction_check: bool,
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceRecord {
    Pub(PubRecord),
    SubBefore(SubBeforeRecord),
    SubAfter(SubAfterRecord),
    EndTransaction(EndTransactionRecord),
}

impl TraceRecord {
    pub fn trace_type(&self) -> TraceType {
        match self {
            TraceRecord::Pub(_) => TraceType::Pub,
            TraceRecord::SubBefore(_) => TraceType::SubBefore,
            TraceRecord::SubAfter(_) => TraceType::SubAfter,
            TraceRecord::EndTransaction(_) => TraceType::EndTransaction,
        }
    }

    /// The traced message's client id.
    pub fn msg_id(&self) -> &str {
        match self {
            TraceRecord::Pub(r) => &r.msg_id,
            TraceRecord::SubBefore(r) => &r.msg_id,
            TraceRecord::SubAfter(r) => &r.msg_id,
            TraceRecord::EndTransaction(r) => &r.msg_id,
        }
    }

    /// The traced message's KEYS as written (space separated).
    pub fn keys(&self) -> &str {
        match self {
            TraceRecord::Pub(r) => &r.keys,
            TraceRecord::SubBefore(r) => &r.keys,
            TraceRecord::SubAfter(r) => &r.keys,
            TraceRecord::EndTransaction(r) => &r.keys,
        }
    }

    /// The KEYS elements (`MessageConst.KEY_SEPARATOR` is a space); `null` and empty give none.
    pub fn key_list(&self) -> impl Iterator<Item = &str> {
        let k = self.keys();
        let k = if k == "null" { "" } else { k };
        k.split(' ').filter(|s| !s.is_empty())
    }

    /// The traced message's topic, where the record names it (Pub, EndTransaction).
    pub fn topic(&self) -> Option<&str> {
        match self {
            TraceRecord::Pub(r) => Some(&r.topic),
            TraceRecord::EndTransaction(r) => Some(&r.topic),
            _ => None,
        }
    }

    /// The client timestamp, where the record has one.
    pub fn timestamp(&self) -> Option<i64> {
        match self {
            TraceRecord::Pub(r) => Some(r.timestamp),
            TraceRecord::SubBefore(r) => Some(r.timestamp),
            TraceRecord::SubAfter(r) => r.timestamp,
            TraceRecord::EndTransaction(r) => Some(r.timestamp),
        }
    }
}
