//! `subscriptionGroup.json`: the consumer group configs.

use super::*;
use crate::format::config::fastjson::{JsonValue, Node};
use crate::format::error::ParseError;

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
        let table = read_table(
            &mut b,
            "subscriptionGroupTable",
            SubscriptionGroupConfig::from_node,
        )?;
        Ok(SubscriptionGroups {
            data_version,
            table,
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
        table_json(
            "subscriptionGroupTable",
            &self.table,
            SubscriptionGroupConfig::to_json,
            self.data_version.as_ref(),
            &self.extra,
        )
    }
}

impl ConfigFile for SubscriptionGroups {
    const FILE_NAME: &'static str = crate::format::config::SUBSCRIPTION_GROUP_FILE;

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
