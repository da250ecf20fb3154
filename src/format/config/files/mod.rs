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

mod consumer_offsets;
mod delay_offsets;
mod subscription_groups;
mod topics;

pub use consumer_offsets::*;
pub use delay_offsets::*;
pub use subscription_groups::*;
pub use topics::*;

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

/// A named config table (`topicConfigTable`, `subscriptionGroupTable`) of bean `b`, each entry
/// read by `from_node` with its key; a repeated key keeps its first place and its last value.
fn read_table<C>(
    b: &mut Bean,
    name: &'static str,
    from_node: impl Fn(&str, Node) -> Result<C, ParseError>,
) -> Result<Vec<(String, C)>, ParseError> {
    let mut table = OrderedMap::new();
    if let Some(node) = b.take(name) {
        for e in get_entries(node, name)? {
            let key = e.key.name().into_owned();
            let config = from_node(&key, e.value)?;
            table.put(key, config);
        }
    }
    Ok(table.into_vec())
}

/// The bean of a config table file: the table under `name`, the data version, the rest.
fn table_json<C>(
    name: &str,
    table: &[(String, C)],
    to_json: impl Fn(&C) -> JsonValue,
    data_version: Option<&DataVersion>,
    extra: &Extra,
) -> JsonValue {
    let table = table
        .iter()
        .map(|(k, c)| (JsonKey::Str(k.clone()), to_json(c)))
        .collect();
    let mut fields = vec![field(name, JsonValue::Object(table))];
    if let Some(dv) = data_version {
        fields.push(field("dataVersion", dv.to_json()));
    }
    bean(fields, extra)
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
