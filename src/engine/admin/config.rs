//! Offline edits of `topics.json` and `subscriptionGroup.json`: set properties of a topic or a
//! subscription group (created with Java's defaults when new), or delete one. Each edit is a
//! list of changes first; [`save_under_lock`] writes the file as the broker persists it
//! (fastjson form, `.bak`, `.tmp` fsynced and renamed) after a dated backup of the old one,
//! with the broker's lock held. An edit bumps `dataVersion` as the broker's managers do.
//!
//! Checked against the store: a topic name must pass the broker's topic rule; a topic's read
//! queue count below the consume queues it already has is refused unless forced (the broker
//! would stop serving those queues); `perm` takes only the permission bits.

use std::path::PathBuf;

use serde::Serialize;

use crate::engine::store::safedir::{stamp, StoreLock};
use crate::engine::Store;
use crate::format::config::{
    save, ConfigFile, SubscriptionGroupConfig, SubscriptionGroups, TopicConfig, TopicConfigs,
    TopicFilterType,
};
use crate::format::error::{Error, Result};

/// One property before and after (`None`: absent, for a created or deleted entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigChange {
    pub name: String,
    pub key: String,
    pub old_value: Option<String>,
    pub new_value: Option<String>,
}

/// The properties `set` takes for a topic, by their Java names.
pub const TOPIC_KEYS: &[&str] = &[
    "readQueueNums",
    "writeQueueNums",
    "perm",
    "order",
    "topicFilterType",
    "topicSysFlag",
];

/// The properties `set` takes for a subscription group.
pub const GROUP_KEYS: &[&str] = &[
    "consumeEnable",
    "consumeFromMinEnable",
    "consumeBroadcastEnable",
    "retryQueueNums",
    "retryMaxTimes",
    "brokerId",
    "whichBrokerWhenConsumeSlowly",
    "notifyConsumerIdsChangedEnable",
];

/// Why an edit is refused.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EditError(pub String);

type Edit<T> = std::result::Result<T, EditError>;

fn invalid(what: String) -> EditError {
    EditError(what)
}

fn parse<T: std::str::FromStr>(key: &str, value: &str, expected: &str) -> Edit<T> {
    value
        .parse()
        .map_err(|_| invalid(format!("{key}={value}: expected {expected}")))
}

fn unknown_key(key: &str, known: &[&str]) -> EditError {
    invalid(format!(
        "unknown property {key:?} (known: {})",
        known.join(", ")
    ))
}

fn topic_value(c: &TopicConfig, key: &str) -> String {
    match key {
        "readQueueNums" => c.read_queue_nums.to_string(),
        "writeQueueNums" => c.write_queue_nums.to_string(),
        "perm" => c.perm.to_string(),
        "order" => c.order.to_string(),
        "topicFilterType" => c.topic_filter_type.as_str().to_string(),
        _ => c.topic_sys_flag.to_string(),
    }
}

fn group_value(c: &SubscriptionGroupConfig, key: &str) -> String {
    match key {
        "consumeEnable" => c.consume_enable.to_string(),
        "consumeFromMinEnable" => c.consume_from_min_enable.to_string(),
        "consumeBroadcastEnable" => c.consume_broadcast_enable.to_string(),
        "retryQueueNums" => c.retry_queue_nums.to_string(),
        "retryMaxTimes" => c.retry_max_times.to_string(),
        "brokerId" => c.broker_id.to_string(),
        "whichBrokerWhenConsumeSlowly" => c.which_broker_when_consume_slowly.to_string(),
        _ => c.notify_consumer_ids_changed_enable.to_string(),
    }
}

/// A topic's properties `set` takes, by their Java names, as text.
pub fn topic_properties(c: &TopicConfig) -> Vec<(&'static str, String)> {
    TOPIC_KEYS.iter().map(|k| (*k, topic_value(c, k))).collect()
}

/// A subscription group's properties `set` takes, as text.
pub fn group_properties(c: &SubscriptionGroupConfig) -> Vec<(&'static str, String)> {
    GROUP_KEYS.iter().map(|k| (*k, group_value(c, k))).collect()
}

/// Set `pairs` on topic `name` in `configs` (a new topic starts from Java's defaults).
pub fn set_topic(
    configs: &mut TopicConfigs,
    store: &Store,
    name: &str,
    pairs: &[(String, String)],
    force: bool,
    now_ms: i64,
) -> Edit<Vec<ConfigChange>> {
    crate::format::layout::check_topic(name)
        .map_err(|e| invalid(format!("topic {name:?}: {e}")))?;
    let before = configs.get(name).cloned();
    let mut c = before.clone().unwrap_or_else(|| TopicConfig::new(name));
    for (key, value) in pairs {
        match key.as_str() {
            "readQueueNums" => c.read_queue_nums = parse(key, value, "an integer")?,
            "writeQueueNums" => c.write_queue_nums = parse(key, value, "an integer")?,
            "perm" => {
                let p: i32 = parse(key, value, "an integer")?;
                if !(0..=15).contains(&p) {
                    return Err(invalid(format!(
                        "perm={p}: expected the bits 4 (read), 2 (write), 1 (inherit), 8 (priority)"
                    )));
                }
                c.perm = p;
            }
            "order" => c.order = parse(key, value, "true or false")?,
            "topicSysFlag" => c.topic_sys_flag = parse(key, value, "an integer")?,
            "topicFilterType" => {
                c.topic_filter_type = match value.as_str() {
                    "SINGLE_TAG" => TopicFilterType::SingleTag,
                    "MULTI_TAG" => TopicFilterType::MultiTag,
                    _ => {
                        return Err(invalid(format!(
                            "{key}={value}: expected SINGLE_TAG or MULTI_TAG"
                        )))
                    }
                }
            }
            _ => return Err(unknown_key(key, TOPIC_KEYS)),
        }
    }
    for (key, n) in [
        ("readQueueNums", c.read_queue_nums),
        ("writeQueueNums", c.write_queue_nums),
    ] {
        if n < 0 {
            return Err(invalid(format!("{key}={n}: must not be negative")));
        }
    }
    let queues = store
        .topic_queues(name)
        .map(|q| q.queue_id + 1)
        .max()
        .unwrap_or(0);
    if c.read_queue_nums < queues && !force {
        return Err(invalid(format!(
            "readQueueNums={} is below the {queues} consume queue(s) topic {name} has: their \
             messages would no longer be served (--force to do it anyway)",
            c.read_queue_nums
        )));
    }
    let changes = diff(
        name,
        TOPIC_KEYS,
        before.as_ref().map(|b| |k: &str| topic_value(b, k)),
        |k| topic_value(&c, k),
    );
    if !changes.is_empty() {
        configs.insert(c);
        bump(&mut configs.data_version, now_ms);
    }
    Ok(changes)
}

/// Set `pairs` on subscription group `name` (a new group starts from Java's defaults).
pub fn set_group(
    groups: &mut SubscriptionGroups,
    name: &str,
    pairs: &[(String, String)],
    now_ms: i64,
) -> Edit<Vec<ConfigChange>> {
    let legal = !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'));
    if !legal {
        return Err(invalid(format!(
            "group {name:?}: the broker takes 1 to 255 of the characters a-z A-Z 0-9 % | _ -"
        )));
    }
    let before = groups.get(name).cloned();
    let mut c = before
        .clone()
        .unwrap_or_else(|| SubscriptionGroupConfig::new(name));
    for (key, value) in pairs {
        let b = || parse::<bool>(key, value, "true or false");
        match key.as_str() {
            "consumeEnable" => c.consume_enable = b()?,
            "consumeFromMinEnable" => c.consume_from_min_enable = b()?,
            "consumeBroadcastEnable" => c.consume_broadcast_enable = b()?,
            "notifyConsumerIdsChangedEnable" => c.notify_consumer_ids_changed_enable = b()?,
            "retryQueueNums" => c.retry_queue_nums = parse(key, value, "an integer")?,
            "retryMaxTimes" => c.retry_max_times = parse(key, value, "an integer")?,
            "brokerId" => c.broker_id = parse(key, value, "an integer")?,
            "whichBrokerWhenConsumeSlowly" => {
                c.which_broker_when_consume_slowly = parse(key, value, "an integer")?
            }
            _ => return Err(unknown_key(key, GROUP_KEYS)),
        }
    }
    let changes = diff(
        name,
        GROUP_KEYS,
        before.as_ref().map(|b| |k: &str| group_value(b, k)),
        |k| group_value(&c, k),
    );
    if !changes.is_empty() {
        groups.insert(c);
        bump(&mut groups.data_version, now_ms);
    }
    Ok(changes)
}

/// Delete topic `name` from `configs`; the changes list its properties.
pub fn delete_topic(configs: &mut TopicConfigs, name: &str, now_ms: i64) -> Vec<ConfigChange> {
    let Some(before) = configs.get(name).map(topic_properties) else {
        return Vec::new();
    };
    configs.table.retain(|(k, _)| k != name);
    bump(&mut configs.data_version, now_ms);
    removed(name, before)
}

/// Delete subscription group `name`.
pub fn delete_group(groups: &mut SubscriptionGroups, name: &str, now_ms: i64) -> Vec<ConfigChange> {
    let Some(before) = groups.get(name).map(group_properties) else {
        return Vec::new();
    };
    groups.table.retain(|(k, _)| k != name);
    bump(&mut groups.data_version, now_ms);
    removed(name, before)
}

/// The changes that delete an entry with these properties.
fn removed(name: &str, properties: Vec<(&'static str, String)>) -> Vec<ConfigChange> {
    properties
        .into_iter()
        .map(|(k, v)| ConfigChange {
            name: name.to_string(),
            key: k.to_string(),
            old_value: Some(v),
            new_value: None,
        })
        .collect()
}

/// The keys whose value differs (all of them for a new entry).
fn diff(
    name: &str,
    keys: &[&str],
    old: Option<impl Fn(&str) -> String>,
    new: impl Fn(&str) -> String,
) -> Vec<ConfigChange> {
    keys.iter()
        .filter_map(|k| {
            let o = old.as_ref().map(|f| f(k));
            let n = new(k);
            (o.as_deref() != Some(n.as_str())).then(|| ConfigChange {
                name: name.to_string(),
                key: k.to_string(),
                old_value: o,
                new_value: Some(n),
            })
        })
        .collect()
}

fn bump(v: &mut Option<crate::format::config::DataVersion>, now_ms: i64) {
    match v {
        Some(v) => v.next_version(now_ms),
        None => *v = Some(crate::format::config::DataVersion::new(1, now_ms)),
    }
}

/// Write `value` as `config/<its file>` of the store whose lock is held: the old file copied
/// first to `<file>.before-<what>-<time>` (returned), then persisted as the broker does.
pub fn save_under_lock<T: ConfigFile>(
    lock: &StoreLock,
    value: &T,
    what: &str,
) -> Result<Option<PathBuf>> {
    let config = lock.root().join(crate::engine::store::paths::CONFIG);
    std::fs::create_dir_all(&config).map_err(|e| Error::io(&config, e))?;
    let main = config.join(T::FILE_NAME);
    let backup = crate::format::config::persist::dated_copy(&main, what, &stamp())?;
    save(&config, value)?;
    Ok(backup)
}
