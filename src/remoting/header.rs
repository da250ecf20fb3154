//! Typed custom headers: the Java `CommandCustomHeader` classes, flattened into `extFields`.
//!
//! Java writes every non-null field as `name -> value.toString()` (`makeCustomHeaderToNet`) and
//! reads them back by field name (`decodeCommandCustomHeader`), so the keys here are exactly the
//! Java field names, including the odd ones (`clientID`, `isForce`, the one-letter keys of
//! `SendMessageRequestHeaderV2`). Numbers are Java's: signed decimal text parsed like
//! `Integer.parseInt` / `Long.parseLong` (optional sign, digits only, range checked). Booleans
//! follow `Boolean.parseBoolean` (`true` in any case is true, anything else false).
//!
//! Three kinds of field: required (`@CFNotNull`; missing is an error, as the broker fails the
//! request with "the custom field `<x>` is null"), optional (a boxed field, absent when null) and
//! primitive without `@CFNotNull` (`boolean unitMode`: written always, read as `false` when
//! missing). Where Java silently leaves an unparsable number null, these readers report it, with
//! the field name and the expected type.

use super::codes;
use super::command::{ExtFields, RemotingCommand};
use crate::format::java::{parse_int, parse_long};

/// Why `extFields` do not make a header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("{header}: the custom field <{field}> is missing")]
    Missing {
        header: &'static str,
        field: &'static str,
    },
    #[error("{header}: the custom field <{field}> = {value:?} is not {expected}")]
    Malformed {
        header: &'static str,
        field: &'static str,
        expected: &'static str,
        value: String,
    },
}

/// A value type of a header field.
pub trait FieldValue: Sized {
    /// What the text must be, for error messages.
    const EXPECTED: &'static str;
    /// Java's parse of the text; `None` when it would throw.
    fn parse(text: &str) -> Option<Self>;
    /// Java's `toString()`.
    fn render(&self) -> String;
}

impl FieldValue for String {
    const EXPECTED: &'static str = "a string";
    fn parse(text: &str) -> Option<Self> {
        Some(text.to_string())
    }
    fn render(&self) -> String {
        self.clone()
    }
}

impl FieldValue for i32 {
    const EXPECTED: &'static str = "a Java int (decimal, 32-bit signed)";
    fn parse(text: &str) -> Option<Self> {
        parse_int(text)
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl FieldValue for i64 {
    const EXPECTED: &'static str = "a Java long (decimal, 64-bit signed)";
    fn parse(text: &str) -> Option<Self> {
        parse_long(text)
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl FieldValue for bool {
    const EXPECTED: &'static str = "a boolean";
    fn parse(text: &str) -> Option<Self> {
        Some(text.eq_ignore_ascii_case("true"))
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

/// A header class: read from and written to `extFields`.
pub trait CustomHeader: Sized {
    /// The Java class name.
    const NAME: &'static str;
    /// Reads the header; extra keys are ignored.
    fn from_ext(ext: &ExtFields) -> Result<Self, FieldError>;
    /// Writes every present field into `ext` (other keys are left alone).
    fn write_ext(&self, ext: &mut ExtFields);
    /// The header alone as `extFields`.
    fn to_ext(&self) -> ExtFields {
        let mut ext = ExtFields::new();
        self.write_ext(&mut ext);
        ext
    }
}

/// Reads an optional field.
pub fn optional<T: FieldValue>(
    ext: &ExtFields,
    header: &'static str,
    field: &'static str,
) -> Result<Option<T>, FieldError> {
    match ext.get(field) {
        None => Ok(None),
        Some(text) => T::parse(text)
            .map(Some)
            .ok_or_else(|| FieldError::Malformed {
                header,
                field,
                expected: T::EXPECTED,
                value: text.to_string(),
            }),
    }
}

/// Reads a required field.
pub fn required<T: FieldValue>(
    ext: &ExtFields,
    header: &'static str,
    field: &'static str,
) -> Result<T, FieldError> {
    optional(ext, header, field)?.ok_or(FieldError::Missing { header, field })
}

macro_rules! custom_header {
    ($(
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$fmeta:meta])* $field:ident: $kind:ident $ty:ty = $key:literal, )*
        }
    )*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fmeta])* #[doc = concat!("`", $key, "`")] pub $field: custom_header!(@ty $kind $ty), )*
        }

        impl CustomHeader for $name {
            const NAME: &'static str = stringify!($name);

            fn from_ext(ext: &ExtFields) -> Result<Self, FieldError> {
                Ok($name {
                    $( $field: custom_header!(@read $kind $ty, ext, Self::NAME, $key), )*
                })
            }

            #[allow(unused_variables)]
            fn write_ext(&self, ext: &mut ExtFields) {
                $( custom_header!(@write $kind, ext, $key, &self.$field); )*
            }
        }
    )*};
    (@ty req $ty:ty) => { $ty };
    (@ty prim $ty:ty) => { $ty };
    (@ty opt $ty:ty) => { Option<$ty> };
    (@read req $ty:ty, $ext:ident, $h:expr, $key:literal) => { required::<$ty>($ext, $h, $key)? };
    (@read opt $ty:ty, $ext:ident, $h:expr, $key:literal) => { optional::<$ty>($ext, $h, $key)? };
    (@read prim $ty:ty, $ext:ident, $h:expr, $key:literal) => {
        optional::<$ty>($ext, $h, $key)?.unwrap_or_default()
    };
    (@write req, $ext:ident, $key:literal, $v:expr) => { $ext.insert($key, FieldValue::render($v)) };
    (@write prim, $ext:ident, $key:literal, $v:expr) => { $ext.insert($key, FieldValue::render($v)) };
    (@write opt, $ext:ident, $key:literal, $v:expr) => {
        if let Some(v) = $v {
            $ext.insert($key, FieldValue::render(v));
        }
    };
}

/// `PullSysFlag.FLAG_COMMIT_OFFSET`: store `commitOffset` for the group.
pub const PULL_FLAG_COMMIT_OFFSET: i32 = 0x1;
/// `PullSysFlag.FLAG_SUSPEND`: the broker may hold the request (long polling).
pub const PULL_FLAG_SUSPEND: i32 = 0x2;
/// `PullSysFlag.FLAG_SUBSCRIPTION`: filter by the request's `subscription`, not the heartbeat's.
pub const PULL_FLAG_SUBSCRIPTION: i32 = 0x4;
/// `PullSysFlag.FLAG_CLASS_FILTER`.
pub const PULL_FLAG_CLASS_FILTER: i32 = 0x8;
/// `PullSysFlag.FLAG_LITE_PULL_MESSAGE` (ignored by a 4.9.8 broker).
pub const PULL_FLAG_LITE_PULL: i32 = 0x10;

custom_header! {
    /// PULL_MESSAGE (11) request.
    PullMessageRequestHeader {
        consumer_group: req String = "consumerGroup",
        topic: req String = "topic",
        queue_id: req i32 = "queueId",
        queue_offset: req i64 = "queueOffset",
        max_msg_nums: req i32 = "maxMsgNums",
        sys_flag: req i32 = "sysFlag",
        commit_offset: req i64 = "commitOffset",
        suspend_timeout_millis: req i64 = "suspendTimeoutMillis",
        subscription: opt String = "subscription",
        sub_version: req i64 = "subVersion",
        expression_type: opt String = "expressionType",
        bname: opt String = "bname",
    }

    /// PULL_MESSAGE response: all four fields on every code.
    PullMessageResponseHeader {
        suggest_which_broker_id: req i64 = "suggestWhichBrokerId",
        next_begin_offset: req i64 = "nextBeginOffset",
        min_offset: req i64 = "minOffset",
        max_offset: req i64 = "maxOffset",
    }

    /// QUERY_CONSUMER_OFFSET (14) request.
    QueryConsumerOffsetRequestHeader {
        consumer_group: req String = "consumerGroup",
        topic: req String = "topic",
        queue_id: req i32 = "queueId",
        bname: opt String = "bname",
    }

    /// QUERY_CONSUMER_OFFSET response.
    QueryConsumerOffsetResponseHeader {
        offset: req i64 = "offset",
    }

    /// UPDATE_CONSUMER_OFFSET (15) request.
    UpdateConsumerOffsetRequestHeader {
        consumer_group: req String = "consumerGroup",
        topic: req String = "topic",
        queue_id: req i32 = "queueId",
        commit_offset: req i64 = "commitOffset",
        bname: opt String = "bname",
    }

    /// GET_CONSUMER_LIST_BY_GROUP (38) request.
    GetConsumerListByGroupRequestHeader {
        consumer_group: req String = "consumerGroup",
    }

    /// GET_MIN_OFFSET (31) request.
    GetMinOffsetRequestHeader {
        topic: req String = "topic",
        queue_id: req i32 = "queueId",
        bname: opt String = "bname",
    }

    /// GET_MIN_OFFSET response.
    GetMinOffsetResponseHeader {
        offset: req i64 = "offset",
    }

    /// GET_MAX_OFFSET (30) request.
    GetMaxOffsetRequestHeader {
        topic: req String = "topic",
        queue_id: req i32 = "queueId",
        bname: opt String = "bname",
    }

    /// GET_MAX_OFFSET response.
    GetMaxOffsetResponseHeader {
        offset: req i64 = "offset",
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP (29) request; `timestamp` in ms.
    SearchOffsetRequestHeader {
        topic: req String = "topic",
        queue_id: req i32 = "queueId",
        timestamp: req i64 = "timestamp",
        bname: opt String = "bname",
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP response.
    SearchOffsetResponseHeader {
        offset: req i64 = "offset",
    }

    /// GET_EARLIEST_MSG_STORETIME (32) request.
    GetEarliestMsgStoretimeRequestHeader {
        topic: req String = "topic",
        queue_id: req i32 = "queueId",
        bname: opt String = "bname",
    }

    /// GET_EARLIEST_MSG_STORETIME response; −1 when the queue has none.
    GetEarliestMsgStoretimeResponseHeader {
        timestamp: req i64 = "timestamp",
    }

    /// CONSUMER_SEND_MSG_BACK (36) request; `offset` is the commitlog offset.
    ConsumerSendMsgBackRequestHeader {
        offset: req i64 = "offset",
        group: req String = "group",
        delay_level: req i32 = "delayLevel",
        origin_msg_id: opt String = "originMsgId",
        origin_topic: opt String = "originTopic",
        unit_mode: prim bool = "unitMode",
        max_reconsume_times: opt i32 = "maxReconsumeTimes",
        bname: opt String = "bname",
    }

    /// GET_ROUTEINFO_BY_TOPIC (105) request.
    GetRouteInfoRequestHeader {
        topic: req String = "topic",
        accept_standard_json_only: opt bool = "acceptStandardJsonOnly",
    }

    /// QUERY_MESSAGE (12) request (by key; ext `_UNIQUE_KEY_QUERY` rides beside it).
    QueryMessageRequestHeader {
        topic: req String = "topic",
        key: req String = "key",
        max_num: req i32 = "maxNum",
        begin_timestamp: req i64 = "beginTimestamp",
        end_timestamp: req i64 = "endTimestamp",
    }

    /// QUERY_MESSAGE response.
    QueryMessageResponseHeader {
        index_last_update_timestamp: req i64 = "indexLastUpdateTimestamp",
        index_last_update_phyoffset: req i64 = "indexLastUpdatePhyoffset",
    }

    /// VIEW_MESSAGE_BY_ID (33) request; `offset` is the commitlog offset.
    ViewMessageRequestHeader {
        offset: req i64 = "offset",
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220).
    ResetOffsetRequestHeader {
        topic: req String = "topic",
        group: req String = "group",
        timestamp: req i64 = "timestamp",
        is_force: req bool = "isForce",
    }

    /// SEND_MESSAGE (10) request.
    SendMessageRequestHeader {
        producer_group: req String = "producerGroup",
        topic: req String = "topic",
        default_topic: req String = "defaultTopic",
        default_topic_queue_nums: req i32 = "defaultTopicQueueNums",
        queue_id: req i32 = "queueId",
        sys_flag: req i32 = "sysFlag",
        born_timestamp: req i64 = "bornTimestamp",
        flag: req i32 = "flag",
        properties: opt String = "properties",
        reconsume_times: opt i32 = "reconsumeTimes",
        unit_mode: prim bool = "unitMode",
        batch: prim bool = "batch",
        max_reconsume_times: opt i32 = "maxReconsumeTimes",
        bname: opt String = "bname",
    }

    /// SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): [`SendMessageRequestHeader`] under
    /// one-letter keys.
    SendMessageRequestHeaderV2 {
        a: req String = "a",
        b: req String = "b",
        c: req String = "c",
        d: req i32 = "d",
        e: req i32 = "e",
        f: req i32 = "f",
        g: req i64 = "g",
        h: req i32 = "h",
        i: opt String = "i",
        j: opt i32 = "j",
        k: prim bool = "k",
        l: opt i32 = "l",
        m: prim bool = "m",
        n: opt String = "n",
    }

    /// Send response; the broker adds ext `MSG_REGION` and `TRACE_ON` beside it.
    SendMessageResponseHeader {
        msg_id: req String = "msgId",
        queue_id: req i32 = "queueId",
        queue_offset: req i64 = "queueOffset",
        transaction_id: opt String = "transactionId",
    }

    /// UNREGISTER_CLIENT (35) request.
    UnregisterClientRequestHeader {
        client_id: req String = "clientID",
        producer_group: opt String = "producerGroup",
        consumer_group: opt String = "consumerGroup",
    }

    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker to client.
    NotifyConsumerIdsChangedRequestHeader {
        consumer_group: req String = "consumerGroup",
    }

    /// GET_CONSUME_STATS (208) request.
    GetConsumeStatsRequestHeader {
        consumer_group: req String = "consumerGroup",
        topic: opt String = "topic",
    }

    /// GET_TOPIC_STATS_INFO (202) request.
    GetTopicStatsInfoRequestHeader {
        topic: req String = "topic",
    }

    /// GET_TOPIC_CONFIG (351, 5.x) request; `lo` asks for the static topic's queue mapping too.
    GetTopicConfigRequestHeader {
        topic: req String = "topic",
        lo: opt bool = "lo",
    }

    /// GET_CONSUMER_CONNECTION_LIST (203) request.
    GetConsumerConnectionListRequestHeader {
        consumer_group: req String = "consumerGroup",
    }

    /// QUERY_TOPIC_CONSUME_BY_WHO (300) request.
    QueryTopicConsumeByWhoRequestHeader {
        topic: req String = "topic",
    }

    /// GET_TOPICS_BY_CLUSTER (224) request.
    GetTopicsByClusterRequestHeader {
        cluster: req String = "cluster",
    }

    /// GET_KV_CONFIG (101) request.
    GetKvConfigRequestHeader {
        namespace: req String = "namespace",
        key: req String = "key",
    }

    /// GET_KV_CONFIG response.
    GetKvConfigResponseHeader {
        value: opt String = "value",
    }

    /// QUERY_CONSUME_TIME_SPAN (303) request.
    QueryConsumeTimeSpanRequestHeader {
        topic: req String = "topic",
        group: req String = "group",
    }

    /// UPDATE_AND_CREATE_TOPIC (17) request (`CreateTopicRequestHeader`). The 4.9.8 broker
    /// does not read `order`; an orderly topic's queues are named on the name server
    /// (`ORDER_TOPIC_CONFIG`, [`PutKvConfigRequestHeader`]).
    CreateTopicRequestHeader {
        topic: req String = "topic",
        default_topic: req String = "defaultTopic",
        read_queue_nums: req i32 = "readQueueNums",
        write_queue_nums: req i32 = "writeQueueNums",
        perm: req i32 = "perm",
        topic_filter_type: req String = "topicFilterType",
        topic_sys_flag: opt i32 = "topicSysFlag",
        order: req bool = "order",
    }

    /// PUT_KV_CONFIG (100) request.
    PutKvConfigRequestHeader {
        namespace: req String = "namespace",
        key: req String = "key",
        value: req String = "value",
    }
}

impl PullMessageRequestHeader {
    pub fn has_commit_offset(&self) -> bool {
        self.sys_flag & PULL_FLAG_COMMIT_OFFSET != 0
    }
    pub fn has_suspend(&self) -> bool {
        self.sys_flag & PULL_FLAG_SUSPEND != 0
    }
    pub fn has_subscription(&self) -> bool {
        self.sys_flag & PULL_FLAG_SUBSCRIPTION != 0
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    /// `SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1`.
    fn from(v2: SendMessageRequestHeaderV2) -> Self {
        SendMessageRequestHeader {
            producer_group: v2.a,
            topic: v2.b,
            default_topic: v2.c,
            default_topic_queue_nums: v2.d,
            queue_id: v2.e,
            sys_flag: v2.f,
            born_timestamp: v2.g,
            flag: v2.h,
            properties: v2.i,
            reconsume_times: v2.j,
            unit_mode: v2.k,
            max_reconsume_times: v2.l,
            batch: v2.m,
            bname: v2.n,
        }
    }
}

impl SendMessageRequestHeader {
    /// Reads the send header of a SEND_MESSAGE, SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE request
    /// (the broker's `parseRequestHeader`); `None` for other codes.
    pub fn from_request(cmd: &RemotingCommand) -> Option<Result<Self, FieldError>> {
        match cmd.code {
            codes::SEND_MESSAGE => Some(Self::from_ext(&cmd.ext_fields)),
            codes::SEND_MESSAGE_V2 | codes::SEND_BATCH_MESSAGE => {
                Some(SendMessageRequestHeaderV2::from_ext(&cmd.ext_fields).map(Self::from))
            }
            _ => None,
        }
    }
}

impl RemotingCommand {
    /// This command's `extFields` read as header `H`.
    pub fn read_header<H: CustomHeader>(&self) -> Result<H, FieldError> {
        H::from_ext(&self.ext_fields)
    }

    /// Writes `header`'s fields into this command's `extFields`.
    pub fn write_header<H: CustomHeader>(&mut self, header: &H) {
        header.write_ext(&mut self.ext_fields);
    }
}
