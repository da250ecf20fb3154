//! JSON bodies of the consumer, admin and name-server requests, in fastjson's dialect.
//!
//! Java writes bodies with `RemotingSerializable.encode` (fastjson 1.2.69, compact): bean
//! properties from getters in alphabetical order, nulls left out, enums by name, `double` as
//! `Double.toString` (`0.0`), maps with `Long`/`Integer` keys with bare keys (`{0:"…"}`) and maps
//! with `MessageQueue` keys with the key written as an object (`{{"brokerName":…}:…}`). The
//! encoders here write exactly that; the `MessageQueue`-keyed maps are written by hand because
//! the shared fastjson model ([`crate::format::config::fastjson`]) has no object keys.
//!
//! The decoders read through the same shared reader, which accepts strict JSON plus bare
//! integer keys; they take unknown fields and missing ones (Java defaults: empty, zero, false).
//! Object keys are only ever written by the broker (ConsumeStats, TopicStatsTable,
//! ResetOffsetBody), so those bodies have encoders only.
//!
//! Modules: [`route`] (name-server answers), [`client`] (what consumers send and get),
//! [`stats`] (admin tables keyed by queue), [`admin`] (other admin answers).

pub mod admin;
pub mod client;
pub mod route;
pub mod stats;

use crate::format::config::fastjson::{parse, to_fastjson_compact, JsonKey, JsonValue};
use crate::format::error::ParseError;

pub use admin::{CheckClientConfigBody, ConnectionInfo, ConsumerConnection, GroupList, KvTable};
pub use client::{
    ConsumerData, ConsumerListByGroup, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody,
    ProducerData, SubscriptionData,
};
pub use route::{BrokerData, ClusterInfo, JsonForm, QueueData, TopicList, TopicRouteData};
pub use stats::{ConsumeStats, OffsetWrapper, ResetOffsetBody, TopicOffset, TopicStatsTable};

/// Why a body is not the expected JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Not JSON (the offset is in the body).
    #[error("body: {0}")]
    Json(ParseError),
    /// A value of the wrong type at `path` (`consumerDataSet[0].groupName`).
    #[error("body field {path}: expected {expected}, found {found}")]
    Type {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    /// A number that does not fit its Java type.
    #[error("body field {path}: {text:?} is not {expected}")]
    Number {
        path: String,
        expected: &'static str,
        text: String,
    },
}

/// `MessageQueue`: one queue of a topic on a broker; also the key of the stats tables. Its order
/// (`compareTo`) and `toString` are in `engine::broker::rebalance`, where allocation uses them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct MessageQueue {
    pub topic: String,
    pub broker_name: String,
    pub queue_id: i32,
}

impl MessageQueue {
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        MessageQueue {
            topic: topic.into(),
            broker_name: broker_name.into(),
            queue_id,
        }
    }

    pub(crate) fn to_value(&self) -> JsonValue {
        object(vec![
            ("brokerName", JsonValue::str(&self.broker_name)),
            ("queueId", JsonValue::int(self.queue_id)),
            ("topic", JsonValue::str(&self.topic)),
        ])
    }

    pub(crate) fn from_obj(o: &Obj<'_>) -> Result<Self, BodyError> {
        Ok(MessageQueue {
            topic: o.string("topic")?,
            broker_name: o.string("brokerName")?,
            queue_id: o.i32("queueId")?,
        })
    }
}

/// An object from `(key, value)` pairs, in the order given.
pub(crate) fn object(entries: Vec<(&str, JsonValue)>) -> JsonValue {
    JsonValue::Object(
        entries
            .into_iter()
            .map(|(k, v)| (JsonKey::from(k), v))
            .collect(),
    )
}

/// Compact fastjson text of a value.
pub(crate) fn compact(v: &JsonValue) -> String {
    to_fastjson_compact(v)
}

/// `Double.toString` as fastjson writes a `double`; `null` for NaN and infinities.
pub fn java_double(d: f64) -> String {
    if !d.is_finite() {
        return "null".to_string();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    if (1e-3..1e7).contains(&d.abs()) {
        let s = format!("{d}");
        if s.contains('.') {
            s
        } else {
            s + ".0"
        }
    } else {
        let s = format!("{d:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        if mantissa.contains('.') {
            format!("{mantissa}E{exp}")
        } else {
            format!("{mantissa}.0E{exp}")
        }
    }
}

/// A read-only view of one JSON object with its path, for typed errors.
pub(crate) struct Obj<'a> {
    path: String,
    entries: &'a [(JsonKey, JsonValue)],
}

fn type_error(path: &str, expected: &'static str, v: &JsonValue) -> BodyError {
    BodyError::Type {
        path: path.to_string(),
        expected,
        found: v.type_name(),
    }
}

/// Parses a body that must be one object.
pub(crate) fn parse_root(body: &[u8]) -> Result<JsonValue, BodyError> {
    parse(body).map_err(BodyError::Json)
}

impl<'a> Obj<'a> {
    pub fn of(path: impl Into<String>, v: &'a JsonValue) -> Result<Self, BodyError> {
        let path = path.into();
        match v {
            JsonValue::Object(entries) => Ok(Obj { path, entries }),
            other => Err(type_error(
                if path.is_empty() { "(body)" } else { &path },
                "an object",
                other,
            )),
        }
    }

    pub fn path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The last entry named `key`, null counting as absent.
    pub fn get(&self, key: &str) -> Option<&'a JsonValue> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k.name() == key)
            .map(|(_, v)| v)
            .filter(|v| !matches!(v, JsonValue::Null))
    }

    /// A string property; numbers and booleans give their text; missing is empty.
    pub fn string(&self, key: &str) -> Result<String, BodyError> {
        Ok(self.opt_string(key)?.unwrap_or_default())
    }

    pub fn opt_string(&self, key: &str) -> Result<Option<String>, BodyError> {
        match self.get(key) {
            None => Ok(None),
            Some(JsonValue::String(s) | JsonValue::Number(s)) => Ok(Some(s.clone())),
            Some(JsonValue::Bool(b)) => Ok(Some(b.to_string())),
            Some(v) => Err(type_error(&self.path(key), "a string", v)),
        }
    }

    /// An `int`/`long` property (a number or a decimal string); missing is 0.
    pub fn i64(&self, key: &str) -> Result<i64, BodyError> {
        let text = match self.get(key) {
            None => return Ok(0),
            Some(JsonValue::Number(s) | JsonValue::String(s)) => s,
            Some(v) => return Err(type_error(&self.path(key), "a number", v)),
        };
        crate::format::java::parse_long(text).ok_or_else(|| BodyError::Number {
            path: self.path(key),
            expected: "a Java long",
            text: text.clone(),
        })
    }

    pub fn i32(&self, key: &str) -> Result<i32, BodyError> {
        let n = self.i64(key)?;
        i32::try_from(n).map_err(|_| BodyError::Number {
            path: self.path(key),
            expected: "a Java int",
            text: n.to_string(),
        })
    }

    /// A `boolean` property (also `"true"`/`"false"` strings); missing is false.
    pub fn bool(&self, key: &str) -> Result<bool, BodyError> {
        match self.get(key) {
            None => Ok(false),
            Some(JsonValue::Bool(b)) => Ok(*b),
            Some(JsonValue::String(s)) => Ok(s.eq_ignore_ascii_case("true")),
            Some(v) => Err(type_error(&self.path(key), "a boolean", v)),
        }
    }

    /// A nested object, if present.
    pub fn object(&self, key: &str) -> Result<Option<Obj<'a>>, BodyError> {
        self.get(key)
            .map(|v| Obj::of(self.path(key), v))
            .transpose()
    }

    /// The entries of a nested object (a Java map), empty if absent.
    pub fn map(&self, key: &str) -> Result<&'a [(JsonKey, JsonValue)], BodyError> {
        match self.get(key) {
            None => Ok(&[]),
            Some(JsonValue::Object(entries)) => Ok(entries),
            Some(v) => Err(type_error(&self.path(key), "an object", v)),
        }
    }

    /// The items of an array (a Java list or set), empty if absent.
    pub fn array(&self, key: &str) -> Result<&'a [JsonValue], BodyError> {
        match self.get(key) {
            None => Ok(&[]),
            Some(JsonValue::Array(items)) => Ok(items),
            Some(v) => Err(type_error(&self.path(key), "an array", v)),
        }
    }

    /// An array of objects, each read by `f`.
    pub fn objects<T>(
        &self,
        key: &str,
        f: impl Fn(&Obj<'a>) -> Result<T, BodyError>,
    ) -> Result<Vec<T>, BodyError> {
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(n, v)| f(&Obj::of(format!("{}[{n}]", self.path(key)), v)?))
            .collect()
    }

    /// An array of strings.
    pub fn strings(&self, key: &str) -> Result<Vec<String>, BodyError> {
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(n, v)| match v {
                JsonValue::String(s) | JsonValue::Number(s) => Ok(s.clone()),
                other => Err(type_error(
                    &format!("{}[{n}]", self.path(key)),
                    "a string",
                    other,
                )),
            })
            .collect()
    }
}

/// Strings as a JSON array.
pub(crate) fn string_array(items: &[String]) -> JsonValue {
    JsonValue::Array(items.iter().map(JsonValue::str).collect())
}
