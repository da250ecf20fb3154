//! `consumerOffset.json`: each group's next offset per queue, keyed `<topic>@<group>`.

use super::*;
use crate::format::config::fastjson::{JsonKey, JsonValue};
use crate::format::error::ParseError;

/// One `offsetTable` entry of `consumerOffset.json`: key `"<topic>@<group>"` and the next queue
/// offset to consume per queue id, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetEntry {
    pub key: String,
    pub queues: Vec<(i32, i64)>,
}

impl OffsetEntry {
    /// The key split at its **first** `@`. Topic and group names cannot contain `@` (the broker
    /// validates both), so the first and last `@` agree in practice. A key without `@` gives
    /// `(key, "")`.
    pub fn split_key(&self) -> (&str, &str) {
        self.key
            .split_once(TOPIC_GROUP_SEPARATOR)
            .unwrap_or((self.key.as_str(), ""))
    }

    pub fn topic(&self) -> &str {
        self.split_key().0
    }

    pub fn group(&self) -> &str {
        self.split_key().1
    }
}

/// `consumerOffset.json` (`ConsumerOffsetManager`). 5.x properties (`dataVersion` typed,
/// `groupTopicMap` and anything else raw) are kept so that a read+write round trip is exact.
/// On write, a kept `groupTopicMap` is rebuilt from the table if it no longer matches it.
/// `get`/`set` scan the table linearly (tables are hundreds of entries; use `iter` for bulk work).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerOffsets {
    pub data_version: Option<DataVersion>,
    pub table: Vec<OffsetEntry>,
    pub extra: Extra,
}

impl ConsumerOffsets {
    /// An empty table; written in the 4.9 form `{"offsetTable":{...}}`.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_bytes(text: &[u8]) -> Result<Self, ParseError> {
        let mut b = root(text, "consumerOffset.json")?;
        let data_version = b.data_version()?;
        let mut table = OrderedMap::new();
        if let Some(node) = b.take("offsetTable") {
            for entry in get_entries(node, "offsetTable")? {
                let mut queues = OrderedMap::new();
                for q in get_entries(entry.value, "offsetTable entry (queueId -> offset)")? {
                    let queue_id = int_key(&q, "offsetTable queue id")?;
                    let offset = get_i64(&q.value, "offsetTable queue offset")?;
                    queues.put(queue_id, offset);
                }
                table.put(entry.key.name().into_owned(), queues.into_vec());
            }
        }
        let table = table
            .into_vec()
            .into_iter()
            .map(|(key, queues)| OffsetEntry { key, queues })
            .collect();
        Ok(ConsumerOffsets {
            data_version,
            table,
            extra: b.rest(),
        })
    }

    fn key(topic: &str, group: &str) -> String {
        format!("{topic}{TOPIC_GROUP_SEPARATOR}{group}")
    }

    /// The queues of `topic@group`, in file order.
    pub fn queues(&self, topic: &str, group: &str) -> Option<&[(i32, i64)]> {
        let key = Self::key(topic, group);
        self.table
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.queues.as_slice())
    }

    /// The committed (next) offset of one queue.
    pub fn get(&self, topic: &str, group: &str, queue_id: i32) -> Option<i64> {
        self.queues(topic, group)?
            .iter()
            .find(|(q, _)| *q == queue_id)
            .map(|(_, o)| *o)
    }

    /// Sets one queue's offset; new keys and queues are appended.
    pub fn set(&mut self, topic: &str, group: &str, queue_id: i32, offset: i64) {
        let key = Self::key(topic, group);
        match self.table.iter_mut().find(|e| e.key == key) {
            Some(e) => put(&mut e.queues, queue_id, offset),
            None => self.table.push(OffsetEntry {
                key,
                queues: vec![(queue_id, offset)],
            }),
        }
    }

    /// Removes `topic@group`; returns whether it was there.
    pub fn remove(&mut self, topic: &str, group: &str) -> bool {
        let key = Self::key(topic, group);
        let before = self.table.len();
        self.table.retain(|e| e.key != key);
        self.table.len() != before
    }

    /// `(topic, group, queues)` in file order (key split at the first `@`).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &[(i32, i64)])> + '_ {
        self.table.iter().map(|e| {
            let (t, g) = e.split_key();
            (t, g, e.queues.as_slice())
        })
    }

    /// Owned `(topic, group, queues)` in file order.
    pub fn entries(&self) -> Vec<OffsetRow> {
        self.iter()
            .map(|(t, g, q)| (t.to_string(), g.to_string(), q.to_vec()))
            .collect()
    }

    /// 5.x `getGroupTopicMap()`: group -> topics, for keys that Java's `split("@")` cuts into
    /// exactly two parts. Groups and topics come in first-seen order (Java's are hash ordered).
    pub fn group_topic_map(&self) -> Vec<(String, Vec<String>)> {
        let mut map: OrderedMap<String, Vec<String>> = OrderedMap::new();
        let mut seen: std::collections::HashSet<(&str, &str)> = std::collections::HashSet::new();
        for e in &self.table {
            let mut parts: Vec<&str> = e.key.split(TOPIC_GROUP_SEPARATOR).collect();
            while parts.last().is_some_and(|p| p.is_empty()) {
                parts.pop();
            }
            let [topic, group] = parts.as_slice() else {
                continue;
            };
            if !seen.insert((*group, *topic)) {
                continue;
            }
            let slot = map.index.get(*group).and_then(|&i| map.items.get_mut(i));
            match slot {
                Some((_, topics)) => topics.push(topic.to_string()),
                None => map.put(group.to_string(), vec![topic.to_string()]),
            }
        }
        map.into_vec()
    }

    /// The stored `groupTopicMap` if it still matches the table (compared as sets, since Java
    /// writes hash order), else one derived from the table.
    fn group_topic_map_json(&self, stored: &JsonValue) -> JsonValue {
        let derived = self.group_topic_map();
        let as_sets = |v: &JsonValue| -> Option<Vec<(String, Vec<String>)>> {
            let JsonValue::Object(entries) = v else {
                return None;
            };
            let mut out = Vec::new();
            for (k, topics) in entries {
                let JsonValue::Array(items) = topics else {
                    return None;
                };
                let mut names: Vec<String> = items
                    .iter()
                    .map(|t| t.as_str().map(str::to_string))
                    .collect::<Option<_>>()?;
                names.sort();
                names.dedup();
                out.push((k.name().into_owned(), names));
            }
            out.sort();
            Some(out)
        };
        let mut derived_sorted: Vec<(String, Vec<String>)> = derived
            .iter()
            .map(|(g, t)| {
                let mut t = t.clone();
                t.sort();
                (g.clone(), t)
            })
            .collect();
        derived_sorted.sort();
        if as_sets(stored).as_ref() == Some(&derived_sorted) {
            return stored.clone();
        }
        JsonValue::Object(
            derived
                .into_iter()
                .map(|(g, topics)| {
                    (
                        JsonKey::Str(g),
                        JsonValue::Array(topics.into_iter().map(JsonValue::String).collect()),
                    )
                })
                .collect(),
        )
    }

    pub fn to_json(&self) -> JsonValue {
        let table = self
            .table
            .iter()
            .map(|e| {
                let queues = e
                    .queues
                    .iter()
                    .map(|(q, o)| (JsonKey::Int(i64::from(*q)), JsonValue::int(*o)))
                    .collect();
                (JsonKey::Str(e.key.clone()), JsonValue::Object(queues))
            })
            .collect();
        let mut fields = vec![field("offsetTable", JsonValue::Object(table))];
        if let Some(dv) = &self.data_version {
            fields.push(field("dataVersion", dv.to_json()));
        }
        let extra: Extra = self
            .extra
            .iter()
            .map(|(k, v)| match k {
                JsonKey::Str(name) if name == "groupTopicMap" => {
                    (k.clone(), self.group_topic_map_json(v))
                }
                _ => (k.clone(), v.clone()),
            })
            .collect();
        bean(fields, &extra)
    }
}

impl ConfigFile for ConsumerOffsets {
    const FILE_NAME: &'static str = crate::format::config::CONSUMER_OFFSET_FILE;

    fn from_bytes(text: &[u8]) -> Result<Self, ParseError> {
        ConsumerOffsets::from_bytes(text)
    }

    fn empty() -> Self {
        ConsumerOffsets::new()
    }

    fn to_json(&self) -> JsonValue {
        ConsumerOffsets::to_json(self)
    }
}
