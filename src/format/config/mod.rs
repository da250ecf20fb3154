//! The broker's config JSON files under `store/config/` (FORMAT.md 8-9): a fastjson-tolerant JSON
//! reader and byte-exact writer ([`fastjson`]), typed views of the four files ([`files`]), and
//! loading/persisting with the broker's `.bak` mechanics ([`persist`]).

pub mod check;
pub mod fastjson;
pub mod files;
pub mod persist;

#[cfg(test)]
mod tests;

pub use fastjson::{parse, to_fastjson_compact, to_fastjson_pretty, JsonKey, JsonValue, MAX_DEPTH};
pub use files::{
    ConfigFile, ConsumerOffsets, DataVersion, DelayOffsets, Extra, OffsetEntry, OffsetRow,
    SubscriptionGroupConfig, SubscriptionGroups, TopicConfig, TopicConfigs, TopicFilterType,
    TOPIC_GROUP_SEPARATOR,
};
pub use persist::{
    load, load_file, persist, read_config_bytes, save, with_suffix, ConfigSource, Loaded,
    MAX_CONFIG_BYTES,
};

/// `ConsumerOffsetManager`'s file.
pub const CONSUMER_OFFSET_FILE: &str = "consumerOffset.json";
/// `ScheduleMessageService`'s file.
pub const DELAY_OFFSET_FILE: &str = "delayOffset.json";
/// `TopicConfigManager`'s file.
pub const TOPICS_FILE: &str = "topics.json";
/// `SubscriptionGroupManager`'s file.
pub const SUBSCRIPTION_GROUP_FILE: &str = "subscriptionGroup.json";
