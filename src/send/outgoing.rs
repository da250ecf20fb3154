//! One message on its way back to a cluster, and the broker's answer for it.

use serde::Serialize;

/// Where a message was found in its source: the key the journal records it under. For a store,
/// the commitlog offset of its record; for an export file, the line number (from 1).
pub type SourceKey = u64;

/// A message as the producer puts it on the wire (PROTOCOL.md 6.2 to 6.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub key: SourceKey,
    /// The topic it is sent to.
    pub topic: String,
    /// The queue it is sent to; `None` lets the producer pick (round robin over the route).
    pub queue_id: Option<i32>,
    pub flag: i32,
    /// Only the compression bits of the stored sysflag (the body is sent as stored).
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub body: Vec<u8>,
    /// The 4.9 properties string (`name\x01value\x02...`), without `WAIT`.
    pub properties: String,
    /// Header `j` of a `%RETRY%` send (with `--keep-retry-topics`); 0 otherwise.
    pub reconsume_times: i32,
    /// Header `l` of a `%RETRY%` send; `None` otherwise.
    pub max_reconsume_times: Option<i32>,
    /// `DELAY` or `TIMER_DELIVER_MS` is set: sent alone (a batch cannot hold it).
    pub delayed: bool,
}

/// A stored-but-not-OK send result is still stored (PROTOCOL.md 6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SendStatus {
    SendOk,
    FlushDiskTimeout,
    FlushSlaveTimeout,
    SlaveNotAvailable,
}

/// What the broker answered for one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Acked {
    pub key: SourceKey,
    pub broker: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    /// The offset message id of the stored record.
    pub offset_msg_id: String,
    pub status: SendStatus,
}
