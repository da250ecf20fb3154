//! `delayOffset.json`: the next offset to deliver per delay level.

use super::*;
use crate::format::config::fastjson::{JsonKey, JsonValue};
use crate::format::error::ParseError;

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
    const FILE_NAME: &'static str = crate::format::config::DELAY_OFFSET_FILE;

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
