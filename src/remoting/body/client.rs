//! Bodies between consumers and the broker: `HeartbeatData` (HEART_BEAT), the consumer id list
//! (GET_CONSUMER_LIST_BY_GROUP) and the queue lock bodies (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).
//!
//! Java clients send these with `JSON.toJSONString`, ali-ons with `JSON.stringify` (its own key
//! order, no `expressionType`, which then means `TAG` as in Java's field default). Enum-valued
//! fields (`consumeType`, `messageModel`, `consumeFromWhere`) are kept as their names.

use super::{compact, object, parse_root, string_array, BodyError, MessageQueue, Obj};
use crate::format::config::fastjson::JsonValue;

/// `SubscriptionData`: one topic subscription of a consumer group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriptionData {
    pub class_filter_mode: bool,
    pub topic: String,
    /// The expression (`*`, `TagA || TagB`, or SQL92 text).
    pub sub_string: String,
    pub tags_set: Vec<String>,
    /// Java `String.hashCode` of each tag.
    pub code_set: Vec<i32>,
    /// Subscription version (a ms timestamp).
    pub sub_version: i64,
    /// `TAG` or `SQL92`.
    pub expression_type: String,
}

/// `ConsumerData`: a consumer group as one client runs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerData {
    pub group_name: String,
    /// `CONSUME_ACTIVELY` (pull) or `CONSUME_PASSIVELY` (push).
    pub consume_type: String,
    /// `CLUSTERING` or `BROADCASTING`.
    pub message_model: String,
    /// `CONSUME_FROM_LAST_OFFSET`, `CONSUME_FROM_FIRST_OFFSET`, `CONSUME_FROM_TIMESTAMP`, ...
    pub consume_from_where: String,
    pub subscription_data_set: Vec<SubscriptionData>,
    pub unit_mode: bool,
}

/// `ProducerData`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerData {
    pub group_name: String,
}

/// `HeartbeatData` (note the capital `clientID` on the wire).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeartbeatData {
    pub client_id: String,
    pub producer_data_set: Vec<ProducerData>,
    pub consumer_data_set: Vec<ConsumerData>,
}

/// `GetConsumerListByGroupResponseBody`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerListByGroup {
    pub consumer_id_list: Vec<String>,
}

/// `LockBatchRequestBody`, also the body of UNLOCK_BATCH_MQ (`UnlockBatchRequestBody` has the
/// same properties).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockBatchRequestBody {
    pub consumer_group: String,
    pub client_id: String,
    pub mq_set: Vec<MessageQueue>,
}

/// `LockBatchResponseBody`: the queues now locked by the requesting client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockBatchResponseBody {
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

impl SubscriptionData {
    pub(crate) fn to_value(&self) -> JsonValue {
        object(vec![
            ("classFilterMode", JsonValue::Bool(self.class_filter_mode)),
            (
                "codeSet",
                JsonValue::Array(self.code_set.iter().map(|c| JsonValue::int(*c)).collect()),
            ),
            ("expressionType", JsonValue::str(&self.expression_type)),
            ("subString", JsonValue::str(&self.sub_string)),
            ("subVersion", JsonValue::int(self.sub_version)),
            ("tagsSet", string_array(&self.tags_set)),
            ("topic", JsonValue::str(&self.topic)),
        ])
    }

    pub(crate) fn from_obj(o: &Obj<'_>) -> Result<Self, BodyError> {
        let path = o.path("codeSet");
        let code_set = o
            .array("codeSet")?
            .iter()
            .enumerate()
            .map(|(n, v)| {
                let bad = || BodyError::Number {
                    path: format!("{path}[{n}]"),
                    expected: "a Java int",
                    text: format!("{v:?}"),
                };
                v.as_i64()
                    .and_then(|x| i32::try_from(x).ok())
                    .ok_or_else(bad)
            })
            .collect::<Result<_, _>>()?;
        Ok(SubscriptionData {
            class_filter_mode: o.bool("classFilterMode")?,
            topic: o.string("topic")?,
            sub_string: o.string("subString")?,
            tags_set: o.strings("tagsSet")?,
            code_set,
            sub_version: o.i64("subVersion")?,
            expression_type: o
                .opt_string("expressionType")?
                .unwrap_or_else(|| "TAG".to_string()),
        })
    }
}

impl ConsumerData {
    fn to_value(&self) -> JsonValue {
        object(vec![
            ("consumeFromWhere", JsonValue::str(&self.consume_from_where)),
            ("consumeType", JsonValue::str(&self.consume_type)),
            ("groupName", JsonValue::str(&self.group_name)),
            ("messageModel", JsonValue::str(&self.message_model)),
            (
                "subscriptionDataSet",
                JsonValue::Array(
                    self.subscription_data_set
                        .iter()
                        .map(SubscriptionData::to_value)
                        .collect(),
                ),
            ),
            ("unitMode", JsonValue::Bool(self.unit_mode)),
        ])
    }

    fn from_obj(o: &Obj<'_>) -> Result<Self, BodyError> {
        Ok(ConsumerData {
            group_name: o.string("groupName")?,
            consume_type: o.string("consumeType")?,
            message_model: o.string("messageModel")?,
            consume_from_where: o.string("consumeFromWhere")?,
            subscription_data_set: o.objects("subscriptionDataSet", SubscriptionData::from_obj)?,
            unit_mode: o.bool("unitMode")?,
        })
    }
}

impl HeartbeatData {
    /// The body as a Java client writes it.
    pub fn to_json(&self) -> String {
        compact(&object(vec![
            ("clientID", JsonValue::str(&self.client_id)),
            (
                "consumerDataSet",
                JsonValue::Array(
                    self.consumer_data_set
                        .iter()
                        .map(ConsumerData::to_value)
                        .collect(),
                ),
            ),
            (
                "producerDataSet",
                JsonValue::Array(
                    self.producer_data_set
                        .iter()
                        .map(|p| object(vec![("groupName", JsonValue::str(&p.group_name))]))
                        .collect(),
                ),
            ),
        ]))
    }

    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        Ok(HeartbeatData {
            client_id: o.string("clientID")?,
            producer_data_set: o.objects("producerDataSet", |p| {
                Ok(ProducerData {
                    group_name: p.string("groupName")?,
                })
            })?,
            consumer_data_set: o.objects("consumerDataSet", ConsumerData::from_obj)?,
        })
    }
}

impl ConsumerListByGroup {
    pub fn to_json(&self) -> String {
        compact(&object(vec![(
            "consumerIdList",
            string_array(&self.consumer_id_list),
        )]))
    }

    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        Ok(ConsumerListByGroup {
            consumer_id_list: o.strings("consumerIdList")?,
        })
    }
}

fn queues(list: &[MessageQueue]) -> JsonValue {
    JsonValue::Array(list.iter().map(MessageQueue::to_value).collect())
}

impl LockBatchRequestBody {
    pub fn to_json(&self) -> String {
        compact(&object(vec![
            ("clientId", JsonValue::str(&self.client_id)),
            ("consumerGroup", JsonValue::str(&self.consumer_group)),
            ("mqSet", queues(&self.mq_set)),
        ]))
    }

    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        Ok(LockBatchRequestBody {
            consumer_group: o.string("consumerGroup")?,
            client_id: o.string("clientId")?,
            mq_set: o.objects("mqSet", MessageQueue::from_obj)?,
        })
    }
}

impl LockBatchResponseBody {
    pub fn to_json(&self) -> String {
        compact(&object(vec![("lockOKMQSet", queues(&self.lock_ok_mq_set))]))
    }

    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        Ok(LockBatchResponseBody {
            lock_ok_mq_set: o.objects("lockOKMQSet", MessageQueue::from_obj)?,
        })
    }
}
