//! `topics.json`: the topic configs.

use super::*;
use crate::format::config::fastjson::{JsonKey, JsonValue, Node, NodeKind};
use crate::format::error::ParseError;

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
        let table = read_table(&mut b, "topicConfigTable", TopicConfig::from_node)?;
        Ok(TopicConfigs {
            data_version,
            table,
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
        table_json(
            "topicConfigTable",
            &self.table,
            TopicConfig::to_json,
            self.data_version.as_ref(),
            &self.extra,
        )
    }
}

impl ConfigFile for TopicConfigs {
    const FILE_NAME: &'static str = crate::format::config::TOPICS_FILE;

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
