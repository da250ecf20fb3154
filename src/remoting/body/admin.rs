//! Admin answers without queue-keyed maps: `ConsumerConnection` (203), `KVTable` (28),
//! `GroupList` (300), and the `CheckClientConfigRequestBody` a SQL92 consumer sends (46).

use std::collections::BTreeMap;

use super::{compact, object, parse_root, string_array, BodyError, Obj, SubscriptionData};
use crate::format::config::fastjson::{JsonKey, JsonValue};
use crate::remoting::Language;

/// `Connection`: one client channel of a consumer group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionInfo {
    pub client_addr: String,
    pub client_id: String,
    pub language: Language,
    pub version: i32,
}

/// `ConsumerConnection`: a group's live channels and what it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerConnection {
    pub connection_set: Vec<ConnectionInfo>,
    pub consume_from_where: String,
    pub consume_type: String,
    pub message_model: String,
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

impl ConsumerConnection {
    pub fn to_json(&self) -> String {
        let connections = self
            .connection_set
            .iter()
            .map(|c| {
                object(vec![
                    ("clientAddr", JsonValue::str(&c.client_addr)),
                    ("clientId", JsonValue::str(&c.client_id)),
                    (
                        "language",
                        JsonValue::str(c.language.name().unwrap_or("JAVA")),
                    ),
                    ("version", JsonValue::int(c.version)),
                ])
            })
            .collect();
        let table = self
            .subscription_table
            .iter()
            .map(|(t, s)| (JsonKey::from(t.as_str()), s.to_value()))
            .collect();
        compact(&object(vec![
            ("connectionSet", JsonValue::Array(connections)),
            ("consumeFromWhere", JsonValue::str(&self.consume_from_where)),
            ("consumeType", JsonValue::str(&self.consume_type)),
            ("messageModel", JsonValue::str(&self.message_model)),
            ("subscriptionTable", JsonValue::Object(table)),
        ]))
    }

    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        let connection_set = o.objects("connectionSet", |c| {
            Ok(ConnectionInfo {
                client_addr: c.string("clientAddr")?,
                client_id: c.string("clientId")?,
                language: c
                    .opt_string("language")?
                    .and_then(|l| Language::from_name(&l))
                    .unwrap_or_default(),
                version: c.i32("version")?,
            })
        })?;
        let mut subscription_table = BTreeMap::new();
        for (k, v) in o.map("subscriptionTable")? {
            let s = SubscriptionData::from_obj(&Obj::of(
                format!("subscriptionTable.{}", k.name()),
                v,
            )?)?;
            subscription_table.insert(k.name().into_owned(), s);
        }
        Ok(ConsumerConnection {
            connection_set,
            consume_from_where: o.string("consumeFromWhere")?,
            consume_type: o.string("consumeType")?,
            message_model: o.string("messageModel")?,
            subscription_table,
        })
    }
}

/// `KVTable`: string keys and values (broker runtime info).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KvTable {
    pub table: BTreeMap<String, String>,
}

impl KvTable {
    pub fn to_json(&self) -> String {
        let table = self
            .table
            .iter()
            .map(|(k, v)| (JsonKey::from(k.as_str()), JsonValue::str(v)))
            .collect();
        compact(&object(vec![("table", JsonValue::Object(table))]))
    }

    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        let mut table = BTreeMap::new();
        for (k, v) in o.map("table")? {
            let path = format!("table.{}", k.name());
            let text = v.as_str().ok_or_else(|| BodyError::Type {
                path,
                expected: "a string",
                found: v.type_name(),
            })?;
            table.insert(k.name().into_owned(), text.to_string());
        }
        Ok(KvTable { table })
    }
}

/// `GroupList`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupList {
    pub group_list: Vec<String>,
}

impl GroupList {
    pub fn to_json(&self) -> String {
        compact(&object(vec![("groupList", string_array(&self.group_list))]))
    }

    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        Ok(GroupList {
            group_list: Obj::of("", &root)?.strings("groupList")?,
        })
    }
}

/// `CheckClientConfigRequestBody`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckClientConfigBody {
    pub client_id: String,
    pub group: String,
    pub subscription_data: Option<SubscriptionData>,
}

impl CheckClientConfigBody {
    pub fn from_json(body: &[u8]) -> Result<Self, BodyError> {
        let root = parse_root(body)?;
        let o = Obj::of("", &root)?;
        Ok(CheckClientConfigBody {
            client_id: o.opt_string("clientId")?.unwrap_or_default(),
            group: o.opt_string("group")?.unwrap_or_default(),
            subscription_data: o
                .object("subscriptionData")?
                .map(|s| SubscriptionData::from_obj(&s))
                .transpose()?,
        })
    }

    pub fn to_json(&self) -> String {
        let mut entries = vec![
            ("clientId", JsonValue::str(&self.client_id)),
            ("group", JsonValue::str(&self.group)),
        ];
        if let Some(s) = &self.subscription_data {
            entries.push(("subscriptionData", s.to_value()));
        }
        compact(&object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_connection_round_trips() {
        let mut c = ConsumerConnection {
            consume_from_where: "CONSUME_FROM_FIRST_OFFSET".into(),
            consume_type: "CONSUME_PASSIVELY".into(),
            message_model: "CLUSTERING".into(),
            ..Default::default()
        };
        c.connection_set.push(ConnectionInfo {
            client_addr: "127.0.0.1:5000".into(),
            client_id: "a@1".into(),
            language: Language::Java,
            version: 409,
        });
        c.subscription_table.insert(
            "T".into(),
            SubscriptionData {
                topic: "T".into(),
                sub_string: "*".into(),
                expression_type: "TAG".into(),
                sub_version: 5,
                ..Default::default()
            },
        );
        let text = c.to_json();
        assert!(
            text.starts_with("{\"connectionSet\":[{\"clientAddr\":\"127.0.0.1:5000\""),
            "{text}"
        );
        assert_eq!(ConsumerConnection::from_json(text.as_bytes()).unwrap(), c);
    }

    #[test]
    fn kv_table_and_group_list_round_trip() {
        let mut t = KvTable::default();
        t.table.insert("brokerVersionDesc".into(), "V4_9_8".into());
        assert_eq!(t.to_json(), r#"{"table":{"brokerVersionDesc":"V4_9_8"}}"#);
        assert_eq!(KvTable::from_json(t.to_json().as_bytes()).unwrap(), t);
        let g = GroupList {
            group_list: vec!["g1".into()],
        };
        assert_eq!(g.to_json(), r#"{"groupList":["g1"]}"#);
        assert_eq!(GroupList::from_json(g.to_json().as_bytes()).unwrap(), g);
    }
}
