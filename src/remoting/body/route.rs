//! Name-server bodies: `TopicRouteData` (GET_ROUTEINFO_BY_TOPIC), `ClusterInfo`
//! (GET_BROKER_CLUSTER_INFO) and `TopicList` (the topic-list requests).
//!
//! A 4.9.8 name server writes a route in one of two forms ([`JsonForm`]): fastjson's default
//! with bare broker-id keys (`"brokerAddrs":{0:"127.0.0.1:10911"}`) for clients older than
//! V4_9_4, and standard JSON (`SerializerFeature.BrowserCompatible`: keys quoted, non-ASCII as
//! `\uXXXX`) for newer ones or when the request asks `acceptStandardJsonOnly`. ClusterInfo is
//! always in fastjson's form. The readers take both.
//!
//! `QueueData`'s flag is `topicSynFlag` in 4.9 (`getTopicSynFlag`); 5.x renamed it
//! `topicSysFlag`. The encoder writes the 4.9 name and the reader takes either.

use std::collections::BTreeMap;

use super::{compact, object, parse_root, string_array, BodyError, Obj};
use crate::format::config::fastjson::{JsonKey, JsonValue};
use crate::remoting::command::VERSION_V4_9_4;

/// How a route body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonForm {
    /// fastjson's default: bare integer map keys.
    Fastjson,
    /// Standard JSON: quoted keys, non-ASCII escaped.
    Standard,
}

impl JsonForm {
    /// The form a 4.9.8 name server uses for a route request of client `version` with header
    /// field `acceptStandardJsonOnly`.
    pub fn for_route_request(version: i32, accept_standard_json_only: Option<bool>) -> Self {
        if version >= VERSION_V4_9_4 || accept_standard_json_only == Some(true) {
            JsonForm::Standard
        } else {
            JsonForm::Fastjson
        }
    }
}

/// `QueueData`: one broker's queues of a topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueData {
    pub broker_name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    /// `PermName` bits: 4 READ, 2 WRITE, 1 INHERIT.
    pub perm: i32,
    pub topic_syn_flag: i32,
}

/// `BrokerData`: a broker name's addresses by broker id (0 = master).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerData {
    pub cluster: String,
    pub broker_name: String,
    pub broker_addrs: BTreeMap<i64, String>,
}

/// `TopicRouteData`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicRouteData {
    pub order_topic_conf: Option<String>,
    pub queue_datas: Vec<QueueData>,
    pub broker_datas: Vec<BrokerData>,
    pub filter_server_table: BTreeMap<String, Vec<String>>,
}

/// `ClusterInfo`: brokers by name, broker names by cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    pub cluster_addr_table: BTreeMap<String, Vec<String>>,
}

/// `TopicList`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicList {
    pub topic_list: Vec<String>,
    pub broker_addr: Option<String>,
}

/// Replaces every non-ASCII character by `\uXXXX` escapes (UTF-16, upper-case hex). Applied to
/// compact fastjson text, whose non-ASCII characters all sit inside strings.
fn escape_non_ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04X}"));
            }
        }
    }
    out
}

impl QueueData {
    fn to_value(&self) -> JsonValue {
        object(vec![
            ("brokerName", JsonValue::str(&self.broker_name)),
            ("perm", JsonValue::int(self.perm)),
            ("readQueueNums", JsonValue::int(self.read_queue_nums)),
            ("topicSynFlag", JsonValue::int(self.topic_syn_flag)),
            ("writeQueueNums", JsonValue::int(self.write_queue_nums)),
        ])
    }

    fn from_obj(o: &Obj<'_>) -> Result<Self, BodyError> {
        let flag = if o.get("topicSynFlag").is_some() {
            o.i32("topicSynFlag")?
        } else {
            o.i32("topicSysFlag")?
        };
        Ok(QueueData {
            broker_name: o.string("brokerName")?,
            read_queue_nums: o.i32("readQueueNums")?,
            write_queue_nums: o.i32("writeQueueNums")?,
            perm: o.i32("perm")?,
            topic_syn_flag: flag,
        })
    }
}

impl BrokerData {
    fn to_value(&self, form: JsonForm) -> JsonValue {
        let addrs = self
            .broker_addrs
            .iter()
            .map(|(id, addr)| {
                let key = match form {
                    JsonForm::Fastjson => JsonKey::Int(*id),
                    JsonForm::Standard => JsonKey::Str(id.to_string()),
                };
                (key, JsonValue::str(addr))
            })
            .collect();
        object(vec![
            ("brokerAddrs", JsonValue::Object(addrs)),
            ("brokerName", JsonValue::str(&self.broker_name)),
            ("cluster", JsonValue::str(&self.cluster)),
        ])
    }

    fn from_obj(o: &Obj<'_>) -> Result<Self, BodyError> {
        let mut broker_addrs = BTreeMap::new();
        for (key, value) in o.map("brokerAddrs")? {
            let path = o.path("brokerAddrs");
            let id = match key {
                JsonKey::Int(n) => *n,
                JsonKey::Str(s) => {
                    crate::format::java::parse_long(s).ok_or_else(|| BodyError::Number {
                        path: path.clone(),
                        expected: "a broker id (Java long)",
                        text: s.clone(),
                    })?
                }
                bean @ JsonKey::Bean(_) => {
                    return Err(BodyError::Number {
                        path,
                        expected: "a broker id (Java long)",
                        text: bean.name().into_owned(),
                    })
                }
            };
            match value {
                JsonValue::String(addr) => {
                    broker_addrs.insert(id, addr.clone());
                }
                JsonValue::Null => {}
                other => {
                    return Err(BodyError::Type {
                        path: format!("{path}.{id}"),
                        expected: "an address string",
                        found: other.type_name(),
                    })
                }
            }
        }
        Ok(BrokerData {
            cluster: o.string("cluster")?,
            broker_name: o.string("brokerName")?,
            broker_addrs,
        })
    }
}

impl TopicRouteData {
    /// The body as the name server writes it in `form`.
    pub fn to_json(&self, form: JsonForm) -> String {
        let filter = self
            .filter_server_table
            .iter()
            .map(|(addr, servers)| (JsonKey::from(addr.as_str()), string_array(servers)))
            .collect();
        let mut entries = vec![
            (
                "brokerDatas",
                JsonValue::Array(self.broker_datas.iter().map(|b| b.to_value(form)).collect()),
            ),
            ("filterServerTable", JsonValue::Object(filter)),
        ];
        if let Some(conf) = &self.order_topic_conf {
            entries.push(("orderTopicConf", JsonValue::str(conf)));
        }
        entries.push((
            "queueDatas",
            JsonValue::Array(self.queue_datas.iter().map(QueueData::to_value).collect()),
        ));
        let text = compact(&object(entries));
        match form {
            JsonForm::Fastjson => text,
            JsonForm::Standard => escape_non_ascii(&text),
        }
    }

    /// Reads a route body in either form.
    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        let mut filter_server_table = BTreeMap::new();
        for (addr, servers) in o.map("filterServerTable")? {
            let path = format!("filterServerTable.{}", addr.name());
            let list = match servers {
                JsonValue::Array(items) => items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                JsonValue::Null => Vec::new(),
                other => {
                    return Err(BodyError::Type {
                        path,
                        expected: "an array",
                        found: other.type_name(),
                    })
                }
            };
            filter_server_table.insert(addr.name().into_owned(), list);
        }
        Ok(TopicRouteData {
            order_topic_conf: o.opt_string("orderTopicConf")?,
            queue_datas: o.objects("queueDatas", QueueData::from_obj)?,
            broker_datas: o.objects("brokerDatas", BrokerData::from_obj)?,
            filter_server_table,
        })
    }
}

impl ClusterInfo {
    /// The body as the name server writes it (fastjson form).
    pub fn to_json(&self) -> String {
        let brokers = self
            .broker_addr_table
            .iter()
            .map(|(name, b)| (JsonKey::from(name.as_str()), b.to_value(JsonForm::Fastjson)))
            .collect();
        let clusters = self
            .cluster_addr_table
            .iter()
            .map(|(name, list)| (JsonKey::from(name.as_str()), string_array(list)))
            .collect();
        compact(&object(vec![
            ("brokerAddrTable", JsonValue::Object(brokers)),
            ("clusterAddrTable", JsonValue::Object(clusters)),
        ]))
    }

    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        let mut broker_addr_table = BTreeMap::new();
        for (name, v) in o.map("brokerAddrTable")? {
            let b = BrokerData::from_obj(&Obj::of(format!("brokerAddrTable.{}", name.name()), v)?)?;
            broker_addr_table.insert(name.name().into_owned(), b);
        }
        let mut cluster_addr_table = BTreeMap::new();
        if let Some(clusters) = o.object("clusterAddrTable")? {
            for (name, _) in o.map("clusterAddrTable")? {
                let name = name.name();
                cluster_addr_table.insert(name.to_string(), clusters.strings(&name)?);
            }
        }
        Ok(ClusterInfo {
            broker_addr_table,
            cluster_addr_table,
        })
    }
}

impl TopicList {
    pub fn to_json(&self) -> String {
        let mut entries = Vec::new();
        if let Some(addr) = &self.broker_addr {
            entries.push(("brokerAddr", JsonValue::str(addr)));
        }
        entries.push(("topicList", string_array(&self.topic_list)));
        compact(&object(entries))
    }

    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        Ok(TopicList {
            topic_list: o.strings("topicList")?,
            broker_addr: o.opt_string("brokerAddr")?,
        })
    }
}
