//! Typed views of the broker's config JSON files (FORMAT.md 9.3-9.6), read and written side by side.
//!
//! Each view keeps the fields it knows as typed values and every other property as raw
//! [`JsonValue`]s (`extra`), so reading a file and writing it back with fastjson's rules (bean
//! properties sorted by name, map entries in file order) gives the same bytes. Read errors name the
//! byte offset of the offending value and what was expected there.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::Hash;

use super::fastjson::{
    parse_node, to_fastjson_pretty, JsonKey, JsonValue, Node, NodeEntry, NodeKind,
};
use crate::format::error::{ErrorKind, ParseError};
use crate::format::java::{parse_int, parse_long};

/// Properties a view does not model, in file order (written back sorted with the known ones).
pub type Extra = Vec<(JsonKey, JsonValue)>;

/// An owned `(topic, group, [(queue id, next offset)])` row of `consumerOffset.json`.
pub type OffsetRow = (String, String, Vec<(i32, i64)>);

/// Separator of topic and group in `consumerOffset.json` keys (`TOPIC_GROUP_SEPARATOR`).
pub const TOPIC_GROUP_SEPARATOR: char = '@';

/// `perm` bits (`PermName`): readable.
pub const PERM_READ: i32 = 4;
/// `perm` bits (`PermName`): writeable.
pub const PERM_WRITE: i32 = 2;
/// `perm` bits (`PermName`): inherit.
pub const PERM_INHERIT: i32 = 1;
/// `perm` bits (`PermName`): priority.
pub const PERM_PRIORITY: i32 = 8;

/// One broker config file: its name, how to read it, its empty state and how fastjson writes it.
pub trait ConfigFile: Sized {
    /// File name inside `store/config/`.
    const FILE_NAME: &'static str;

    /// Parses the file's bytes.
    fn from_bytes(text: &[u8]) -> Result<Self, ParseError>;

    /// The state the broker keeps when no file could be loaded.
    fn empty() -> Self;

    /// The JSON model fastjson would serialize.
    fn to_json(&self) -> JsonValue;

    /// The file's text as the broker writes it (`encode(true)`).
    fn to_pretty(&self) -> String {
        to_fastjson_pretty(&self.to_json())
    }
}

// ---------------------------------------------------------------------------------------------
// Reading helpers over the offset-carrying tree.

fn found(node: &Node) -> String {
    match &node.kind {
        NodeKind::Number(raw) => format!("number {raw}"),
        NodeKind::String(s) => {
            let short: String = s.chars().take(40).collect();
            format!("string {short:?}")
        }
        NodeKind::Bool(b) => b.to_string(),
        _ => node.type_name().to_string(),
    }
}

fn unexpected(node: &Node, what: &'static str, expected: &str) -> ParseError {
    ParseError::new(
        node.offset,
        ErrorKind::Unexpected {
            what,
            expected: expected.to_string(),
            found: found(node),
        },
    )
}

fn get_i64(node: &Node, what: &'static str) -> Result<i64, ParseError> {
    match &node.kind {
        NodeKind::Number(raw) => {
            parse_long(raw).ok_or_else(|| unexpected(node, what, "an integer in Java long range"))
        }
        _ => Err(unexpected(node, what, "an integer (Java long)")),
    }
}

fn get_i32(node: &Node, what: &'static str) -> Result<i32, ParseError> {
    match &node.kind {
        NodeKind::Number(raw) => {
            parse_int(raw).ok_or_else(|| unexpected(node, what, "an integer in Java int range"))
        }
        _ => Err(unexpected(node, what, "an integer (Java int)")),
    }
}

fn get_bool(node: &Node, what: &'static str) -> Result<bool, ParseError> {
    match node.kind {
        NodeKind::Bool(b) => Ok(b),
        _ => Err(unexpected(node, what, "true or false")),
    }
}

fn get_string(node: Node, what: &'static str) -> Result<String, ParseError> {
    match node.kind {
        NodeKind::String(s) => Ok(s),
        _ => Err(unexpected(&node, what, "a string")),
    }
}

fn get_entries(node: Node, what: &'static str) -> Result<Vec<NodeEntry>, ParseError> {
    match node.kind {
        NodeKind::Object(entries) => Ok(entries),
        _ => Err(unexpected(&node, what, "an object")),
    }
}

/// A map key that Java reads as an `Integer`: bare, or quoted decimal text.
fn int_key(entry: &NodeEntry, what: &'static str) -> Result<i32, ParseError> {
    let parsed = match &entry.key {
        JsonKey::Int(n) => i32::try_from(*n).ok(),
        JsonKey::Str(s) => parse_int(s),
        JsonKey::Bean(_) => None,
    };
    parsed.ok_or_else(|| {
        ParseError::new(
            entry.key_offset,
            ErrorKind::Unexpected {
                what,
                expected: "an integer key in Java int range".to_string(),
                found: format!("key {}", entry.key.name()),
            },
        )
    })
}

/// Puts `(key, value)` into an ordered map: a repeated key replaces the value in place, as a Java
/// map would. Linear; for edits after loading.
fn put<K: PartialEq, V>(map: &mut Vec<(K, V)>, key: K, value: V) {
    match map.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => map.push((key, value)),
    }
}

/// Collects a map read from a file in file order; a repeated key replaces the earlier value in
/// place (the later entry in the file wins, as in a Java map). Hash-indexed for large tables.
struct OrderedMap<K, V> {
    items: Vec<(K, V)>,
    index: HashMap<K, usize>,
}

impl<K: Eq + Hash + Clone, V> OrderedMap<K, V> {
    fn new() -> Self {
        OrderedMap {
            items: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn put(&mut self, key: K, value: V) {
        match self.index.get(&key).and_then(|&i| self.items.get_mut(i)) {
            Some(slot) => slot.1 = value,
            None => {
                self.index.insert(key.clone(), self.items.len());
                self.items.push((key, value));
            }
        }
    }

    fn into_vec(self) -> Vec<(K, V)> {
        self.items
    }
}

/// The properties of one JSON object, taken out by name as the typed view reads them.
struct Bean {
    fields: Vec<NodeEntry>,
}

impl Bean {
    fn new(node: Node, what: &'static str) -> Result<Self, ParseError> {
        Ok(Bean {
            fields: get_entries(node, what)?,
        })
    }

    /// Removes every property called `name` and returns the last one (fastjson: last wins).
    fn take(&mut self, name: &str) -> Option<Node> {
        let mut last = None;
        let mut kept = Vec::with_capacity(self.fields.len());
        for entry in self.fields.drain(..) {
            if matches!(&entry.key, JsonKey::Str(s) if s == name) {
                last = Some(entry.value);
            } else {
                kept.push(entry);
            }
        }
        self.fields = kept;
        last
    }

    fn i32_or(&mut self, name: &str, what: &'static str, default: i32) -> Result<i32, ParseError> {
        self.take(name).map_or(Ok(default), |n| get_i32(&n, what))
    }

    fn i64_or(&mut self, name: &str, what: &'static str, default: i64) -> Result<i64, ParseError> {
        self.take(name).map_or(Ok(default), |n| get_i64(&n, what))
    }

    fn bool_or(
        &mut self,
        name: &str,
        what: &'static str,
        default: bool,
    ) -> Result<bool, ParseError> {
        self.take(name).map_or(Ok(default), |n| get_bool(&n, what))
    }

    fn data_version(&mut self) -> Result<Option<DataVersion>, ParseError> {
        self.take("dataVersion")
            .map(DataVersion::from_node)
            .transpose()
    }

    /// The properties nobody took, in file order.
    fn rest(self) -> Extra {
        self.fields
            .into_iter()
            .map(|e| (e.key, e.value.into_value()))
            .collect()
    }
}

fn java_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// A bean as fastjson writes it: properties sorted by name (`SortField`), known and extra ones
/// together.
fn bean(mut fields: Extra, extra: &Extra) -> JsonValue {
    fields.extend(extra.iter().cloned());
    fields.sort_by(|(a, _), (b, _)| java_cmp(&a.name(), &b.name()));
    JsonValue::Object(fields)
}

fn field(name: &str, value: JsonValue) -> (JsonKey, JsonValue) {
    (JsonKey::Str(name.to_string()), value)
}

fn root(text: &[u8], what: &'static str) -> Result<Bean, ParseError> {
    Bean::new(parse_node(text)?, what)
}

/// The value of the extra property `name`, if present.
fn extra_get<'a>(extra: &'a Extra, name: &str) -> Option<&'a JsonValue> {
    extra
        .iter()
        .rev()
        .find(|(k, _)| matches!(k, JsonKey::Str(s) if s == name))
        .map(|(_, v)| v)
}

// ---------------------------------------------------------------------------------------------

/// `DataVersion`: 4.9 writes `{counter, timestamp}`, 5.x adds `stateVersion`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DataVersion {
    pub counter: i64,
    /// `None` in the 4.9 shape (not written).
    pub state_version: Option<i64>,
    /// ms since the epoch.
    pub timestamp: i64,
    pub extra: Extra,
}

impl DataVersion {
    /// The 4.9 shape.
    pub fn new(counter: i64, timestamp: i64) -> Self {
        DataVersion {
            counter,
            state_version: None,
            timestamp,
            extra: Vec::new(),
        }
    }

    /// The 5.x shape.
    pub fn with_state_version(counter: i64, state_version: i64, timestamp: i64) -> Self {
        DataVersion {
            state_version: Some(state_version),
            ..DataVersion::new(counter, timestamp)
        }
    }

    /// `DataVersion.nextVersion()`: counter + 1, timestamp := `now_ms`.
    pub fn next_version(&mut self, now_ms: i64) {
        self.counter = self.counter.wrapping_add(1);
        self.timestamp = now_ms;
    }

    fn from_node(node: Node) -> Result<Self, ParseError> {
        let mut b = Bean::new(node, "dataVersion")?;
        let counter = b.i64_or("counter", "dataVersion.counter", 0)?;
        let state_version = b
            .take("stateVersion")
            .map(|n| get_i64(&n, "dataVersion.stateVersion"))
            .transpose()?;
        let timestamp = b.i64_or("timestamp", "dataVersion.timestamp", 0)?;
        Ok(DataVersion {
            counter,
            state_version,
            timestamp,
            extra: b.rest(),
        })
    }

    pub fn to_json(&self) -> JsonValue {
        let mut fields = vec![
            field("counter", JsonValue::int(self.counter)),
            field("timestamp", JsonValue::int(self.timestamp)),
        ];
        if let Some(sv) = self.state_version {
            fields.push(field("stateVersion", JsonValue::int(sv)));
        }
        bean(fields, &self.extra)
    }
}

// ---------------------------------------------------------------------------------------------

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
    const FILE_NAME: &'static str = super::CONSUMER_OFFSET_FILE;

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

// ---------------------------------------------------------------------------------------------

/// `delayOffset.json`: delay level (1-based, bare int key) -> next offset to deliver in
/// `SCHEDULE_TOPIC_XXXX` queue `level - 1`. 5.x adds `dataVersion`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DelayOffsets {
    pub data_version: Option<DataVersion>,
    pub table: Vec<(i32, i64)>,
    pub extra: Extra,
}

impl DelayOffsets {
    /// An empty table; written in the 4.9 form.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_bytes(text: &[u8]) -> Result<Self, ParseError> {
        let mut b = root(text, "delayOffset.json")?;
        let data_version = b.data_version()?;
        let mut table = OrderedMap::new();
        if let Some(node) = b.take("offsetTable") {
            for e in get_entries(node, "offsetTable")? {
                let level = int_key(&e, "delay level")?;
                let offset = get_i64(&e.value, "delay offset")?;
                table.put(level, offset);
            }
        }
        Ok(DelayOffsets {
            data_version,
            table: table.into_vec(),
            extra: b.rest(),
        })
    }

    pub fn get(&self, level: i32) -> Option<i64> {
        self.table
            .iter()
            .find(|(l, _)| *l == level)
            .map(|(_, o)| *o)
    }

    pub fn set(&mut self, level: i32, offset: i64) {
        put(&mut self.table, level, offset);
    }

    pub fn iter(&self) -> impl Iterator<Item = (i32, i64)> + '_ {
        self.table.iter().copied()
    }

    pub fn to_json(&self) -> JsonValue {
        let table = self
            .table
            .iter()
            .map(|(l, o)| (JsonKey::Int(i64::from(*l)), JsonValue::int(*o)))
            .collect();
        let mut fields = vec![field("offsetTable", JsonValue::Object(table))];
        if let Some(dv) = &self.data_version {
            fields.push(field("dataVersion", dv.to_json()));
        }
        bean(fields, &self.extra)
    }
}

impl ConfigFile for DelayOffsets {
    const FILE_NAME: &'static str = super::DELAY_OFFSET_FILE;

    fn from_bytes(text: &[u8]) -> Result<Self, ParseError> {
        DelayOffsets::from_bytes(text)
    }

    fn empty() -> Self {
        DelayOffsets::new()
    }

    fn to_json(&self) -> JsonValue {
        DelayOffsets::to_json(self)
    }
}

// ---------------------------------------------------------------------------------------------

/// `TopicFilterType`, written as the enum name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TopicFilterType {
    #[default]
    SingleTag,
    MultiTag,
}

impl TopicFilterType {
    pub fn as_str(self) -> &'static str {
        match self {
            TopicFilterType::SingleTag => "SINGLE_TAG",
            TopicFilterType::MultiTag => "MULTI_TAG",
        }
    }
}

/// `TopicConfig` (FORMAT.md 9.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    /// `topicName`; when the file lacks it, the table key.
    pub topic_name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    /// [`PERM_READ`] | [`PERM_WRITE`] | ...
    pub perm: i32,
    pub topic_filter_type: TopicFilterType,
    pub topic_sys_flag: i32,
    pub order: bool,
    /// 5.x `attributes` (`queue.type`, `message.type`, ...); `None` = not written (4.9).
    pub attributes: Option<Vec<(String, String)>>,
    pub extra: Extra,
}

impl TopicConfig {
    /// Java's defaults: 16 read and write queues, perm 6 (read|write), SINGLE_TAG, no flags; 4.9
    /// shape (no attributes).
    pub fn new(topic_name: impl Into<String>) -> Self {
        TopicConfig {
            topic_name: topic_name.into(),
            read_queue_nums: 16,
            write_queue_nums: 16,
            perm: PERM_READ | PERM_WRITE,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_sys_flag: 0,
            order: false,
            attributes: None,
            extra: Vec::new(),
        }
    }

    fn from_node(key: &str, node: Node) -> Result<Self, ParseError> {
        let mut b = Bean::new(node, "topicConfigTable entry")?;
        let d = TopicConfig::new(key);
        let topic_name = match b.take("topicName") {
            Some(n) => get_string(n, "TopicConfig.topicName")?,
            None => d.topic_name,
        };
        let topic_filter_type = match b.take("topicFilterType") {
            None => d.topic_filter_type,
            Some(n) => match &n.kind {
                NodeKind::String(s) if s == "SINGLE_TAG" => TopicFilterType::SingleTag,
                NodeKind::String(s) if s == "MULTI_TAG" => TopicFilterType::MultiTag,
                _ => {
                    return Err(unexpected(
                        &n,
                        "TopicConfig.topicFilterType",
                        "\"SINGLE_TAG\" or \"MULTI_TAG\"",
                    ))
                }
            },
        };
        let attributes = match b.take("attributes") {
            None => None,
            Some(n) => {
                let mut attrs = OrderedMap::new();
                for e in get_entries(n, "TopicConfig.attributes")? {
                    let k = e.key.name().into_owned();
                    let v = get_string(e.value, "TopicConfig.attributes value")?;
                    attrs.put(k, v);
                }
                Some(attrs.into_vec())
            }
        };
        Ok(TopicConfig {
            topic_name,
            read_queue_nums: b.i32_or("readQueueNums", "TopicConfig.readQueueNums", 16)?,
            write_queue_nums: b.i32_or("writeQueueNums", "TopicConfig.writeQueueNums", 16)?,
            perm: b.i32_or("perm", "TopicConfig.perm", d.perm)?,
            topic_filter_type,
            topic_sys_flag: b.i32_or("topicSysFlag", "TopicConfig.topicSysFlag", 0)?,
            order: b.bool_or("order", "TopicConfig.order", false)?,
            attributes,
            extra: b.rest(),
        })
    }

    pub fn to_json(&self) -> JsonValue {
        let mut fields = vec![
            field("order", JsonValue::Bool(self.order)),
            field("perm", JsonValue::int(self.perm)),
            field("readQueueNums", JsonValue::int(self.read_queue_nums)),
            field(
                "topicFilterType",
                JsonValue::str(self.topic_filter_type.as_str()),
            ),
            field("topicName", JsonValue::str(self.topic_name.clone())),
            field("topicSysFlag", JsonValue::int(self.topic_sys_flag)),
            field("writeQueueNums", JsonValue::int(self.write_queue_nums)),
        ];
        if let Some(attrs) = &self.attributes {
            let map = attrs
                .iter()
                .map(|(k, v)| (JsonKey::Str(k.clone()), JsonValue::str(v.clone())))
                .collect();
            fields.push(field("attributes", JsonValue::Object(map)));
        }
        bean(fields, &self.extra)
    }
}

/// `topics.json` (`TopicConfigSerializeWrapper`): `dataVersion` and `topicConfigTable`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicConfigs {
    pub data_version: Option<DataVersion>,
    /// Table key and config, in file order.
    pub table: Vec<(String, TopicConfig)>,
    pub extra: Extra,
}

impl TopicConfigs {
    /// An empty table with the given data version (the broker always writes one).
    pub fn new(data_version: DataVersion) -> Self {
        TopicConfigs {
            data_version: Some(data_version),
            ..Self::default()
        }
    }

    pub fn from_bytes(text: &[u8]) -> Result<Self, ParseError> {
        let mut b = root(text, "topics.json")?;
        let data_version = b.data_version()?;
        let mut table = OrderedMap::new();
        if let Some(node) = b.take("topicConfigTable") {
            for e in get_entries(node, "topicConfigTable")? {
                let key = e.key.name().into_owned();
                let config = TopicConfig::from_node(&key, e.value)?;
                table.put(key, config);
            }
        }
        Ok(TopicConfigs {
            data_version,
            table: table.into_vec(),
            extra: b.rest(),
        })
    }

    pub fn get(&self, topic: &str) -> Option<&TopicConfig> {
        self.table.iter().find(|(k, _)| k == topic).map(|(_, c)| c)
    }

    /// Adds or replaces the config under its `topic_name`.
    pub fn insert(&mut self, config: TopicConfig) {
        put(&mut self.table, config.topic_name.clone(), config);
    }

    pub fn iter(&self) -> impl Iterator<Item = &TopicConfig> + '_ {
        self.table.iter().map(|(_, c)| c)
    }

    pub fn to_json(&self) -> JsonValue {
        let table = self
            .table
            .iter()
            .map(|(k, c)| (JsonKey::Str(k.clone()), c.to_json()))
            .collect();
        let mut fields = vec![field("topicConfigTable", JsonValue::Object(table))];
        if let Some(dv) = &self.data_version {
            fields.push(field("dataVersion", dv.to_json()));
        }
        bean(fields, &self.extra)
    }
}

impl ConfigFile for TopicConfigs {
    const FILE_NAME: &'static str = super::TOPICS_FILE;

    fn from_bytes(text: &[u8]) -> Result<Self, ParseError> {
        TopicConfigs::from_bytes(text)
    }

    fn empty() -> Self {
        TopicConfigs::default()
    }

    fn to_json(&self) -> JsonValue {
        TopicConfigs::to_json(self)
    }
}

// ---------------------------------------------------------------------------------------------

/// `SubscriptionGroupConfig`: the 4.9 properties typed; the 5.x additions (`attributes`,
/// `consumeMessageOrderly`, `consumeTimeoutMinute`, `groupRetryPolicy`, `groupSysFlag`,
/// `subscriptionDataSet`) and anything newer kept raw in `extra`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionGroupConfig {
    /// `groupName`; when the file lacks it, the table key.
    pub group_name: String,
    pub consume_enable: bool,
    pub consume_from_min_enable: bool,
    pub consume_broadcast_enable: bool,
    pub retry_queue_nums: i32,
    /// Deliveries before a message goes to `%DLQ%<group>` (default 16).
    pub retry_max_times: i32,
    pub broker_id: i64,
    pub which_broker_when_consume_slowly: i64,
    pub notify_consumer_ids_changed_enable: bool,
    pub extra: Extra,
}

impl SubscriptionGroupConfig {
    /// Java's defaults in the 4.9 shape.
    pub fn new(group_name: impl Into<String>) -> Self {
        SubscriptionGroupConfig {
            group_name: group_name.into(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            retry_queue_nums: 1,
            retry_max_times: 16,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            extra: Vec::new(),
        }
    }

    /// A property kept raw (a 5.x one, e.g. `consumeTimeoutMinute`).
    pub fn extra_field(&self, name: &str) -> Option<&JsonValue> {
        extra_get(&self.extra, name)
    }

    fn from_node(key: &str, node: Node) -> Result<Self, ParseError> {
        let mut b = Bean::new(node, "subscriptionGroupTable entry")?;
        let d = SubscriptionGroupConfig::new(key);
        let group_name = match b.take("groupName") {
            Some(n) => get_string(n, "SubscriptionGroupConfig.groupName")?,
            None => d.group_name,
        };
        Ok(SubscriptionGroupConfig {
            group_name,
            consume_enable: b.bool_or(
                "consumeEnable",
                "SubscriptionGroupConfig.consumeEnable",
                true,
            )?,
            consume_from_min_enable: b.bool_or(
                "consumeFromMinEnable",
                "SubscriptionGroupConfig.consumeFromMinEnable",
                true,
            )?,
            consume_broadcast_enable: b.bool_or(
                "consumeBroadcastEnable",
                "SubscriptionGroupConfig.consumeBroadcastEnable",
                true,
            )?,
            retry_queue_nums: b.i32_or(
                "retryQueueNums",
                "SubscriptionGroupConfig.retryQueueNums",
                1,
            )?,
            retry_max_times: b.i32_or(
                "retryMaxTimes",
                "SubscriptionGroupConfig.retryMaxTimes",
                16,
            )?,
            broker_id: b.i64_or("brokerId", "SubscriptionGroupConfig.brokerId", 0)?,
            which_broker_when_consume_slowly: b.i64_or(
                "whichBrokerWhenConsumeSlowly",
                "SubscriptionGroupConfig.whichBrokerWhenConsumeSlowly",
                1,
            )?,
            notify_consumer_ids_changed_enable: b.bool_or(
                "notifyConsumerIdsChangedEnable",
                "SubscriptionGroupConfig.notifyConsumerIdsChangedEnable",
                true,
            )?,
            extra: b.rest(),
        })
    }

    pub fn to_json(&self) -> JsonValue {
        let fields = vec![
            field("brokerId", JsonValue::int(self.broker_id)),
            field(
                "consumeBroadcastEnable",
                JsonValue::Bool(self.consume_broadcast_enable),
            ),
            field("consumeEnable", JsonValue::Bool(self.consume_enable)),
            field(
                "consumeFromMinEnable",
                JsonValue::Bool(self.consume_from_min_enable),
            ),
            field("groupName", JsonValue::str(self.group_name.clone())),
            field(
                "notifyConsumerIdsChangedEnable",
                JsonValue::Bool(self.notify_consumer_ids_changed_enable),
            ),
            field("retryMaxTimes", JsonValue::int(self.retry_max_times)),
            field("retryQueueNums", JsonValue::int(self.retry_queue_nums)),
            field(
                "whichBrokerWhenConsumeSlowly",
                JsonValue::int(self.which_broker_when_consume_slowly),
            ),
        ];
        bean(fields, &self.extra)
    }
}

/// `subscriptionGroup.json` (`SubscriptionGroupManager`): `dataVersion`, `subscriptionGroupTable`,
/// and in 5.x `forbiddenTable` (kept raw in `extra`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscriptionGroups {
    pub data_version: Option<DataVersion>,
    /// Table key and config, in file order.
    pub table: Vec<(String, SubscriptionGroupConfig)>,
    pub extra: Extra,
}

impl SubscriptionGroups {
    /// An empty table with the given data version (the broker always writes one).
    pub fn new(data_version: DataVersion) -> Self {
        SubscriptionGroups {
            data_version: Some(data_version),
            ..Self::default()
        }
    }

    pub fn from_bytes(text: &[u8]) -> Result<Self, ParseError> {
        let mut b = root(text, "subscriptionGroup.json")?;
        let data_version = b.data_version()?;
        let mut table = OrderedMap::new();
        if let Some(node) = b.take("subscriptionGroupTable") {
            for e in get_entries(node, "subscriptionGroupTable")? {
                let key = e.key.name().into_owned();
                let config = SubscriptionGroupConfig::from_node(&key, e.value)?;
                table.put(key, config);
            }
        }
        Ok(SubscriptionGroups {
            data_version,
            table: table.into_vec(),
            extra: b.rest(),
        })
    }

    pub fn get(&self, group: &str) -> Option<&SubscriptionGroupConfig> {
        self.table.iter().find(|(k, _)| k == group).map(|(_, c)| c)
    }

    /// `retryMaxTimes` of a group, if the group is configured.
    pub fn retry_max_times(&self, group: &str) -> Option<i32> {
        self.get(group).map(|c| c.retry_max_times)
    }

    /// Adds or replaces the config under its `group_name`.
    pub fn insert(&mut self, config: SubscriptionGroupConfig) {
        put(&mut self.table, config.group_name.clone(), config);
    }

    pub fn iter(&self) -> impl Iterator<Item = &SubscriptionGroupConfig> + '_ {
        self.table.iter().map(|(_, c)| c)
    }

    pub fn to_json(&self) -> JsonValue {
        let table = self
            .table
            .iter()
            .map(|(k, c)| (JsonKey::Str(k.clone()), c.to_json()))
            .collect();
        let mut fields = vec![field("subscriptionGroupTable", JsonValue::Object(table))];
        if let Some(dv) = &self.data_version {
            fields.push(field("dataVersion", dv.to_json()));
        }
        bean(fields, &self.extra)
    }
}

impl ConfigFile for SubscriptionGroups {
    const FILE_NAME: &'static str = super::SUBSCRIPTION_GROUP_FILE;

    fn from_bytes(text: &[u8]) -> Result<Self, ParseError> {
        SubscriptionGroups::from_bytes(text)
    }

    fn empty() -> Self {
        SubscriptionGroups::default()
    }

    fn to_json(&self) -> JsonValue {
        SubscriptionGroups::to_json(self)
    }
}
