//! How each store's config differs from the keeper's: topics (`topics.json`), subscription
//! groups (`subscriptionGroup.json`) and committed offsets (`consumerOffset.json`). A slave copies
//! these from its master every few seconds (`SlaveSynchronize`), so a difference is what the last
//! sync had not brought over, or what changed on one side afterwards.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::Store;
use crate::format::config::{load, ConsumerOffsets, SubscriptionGroups, TopicConfigs};
use crate::format::error::Error;

/// One entry that differs between a store and the keeper.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigDifference {
    #[serde(serialize_with = "crate::engine::check::compare::one_based")]
    pub store: usize,
    #[serde(serialize_with = "crate::engine::check::compare::one_based")]
    pub against: usize,
    /// `topics.json`, `subscriptionGroup.json` or `consumerOffset.json`.
    pub file: &'static str,
    /// The topic, the group, or `topic@group` for an offset.
    pub name: String,
    /// The queue of an offset.
    pub queue_id: Option<i32>,
    /// The entry in each (a topic's `read/write/perm`, `present` for a group, an offset); null
    /// where it is missing.
    pub store_value: Option<String>,
    pub against_value: Option<String>,
}

fn topics(s: &Store) -> Result<BTreeMap<String, String>, Error> {
    Ok(load::<TopicConfigs>(&s.config_dir())?
        .value
        .iter()
        .map(|t| {
            (
                t.topic_name.clone(),
                format!(
                    "queues {}/{}, perm {}",
                    t.read_queue_nums, t.write_queue_nums, t.perm
                ),
            )
        })
        .collect())
}

fn groups(s: &Store) -> Result<BTreeMap<String, String>, Error> {
    Ok(load::<SubscriptionGroups>(&s.config_dir())?
        .value
        .iter()
        .map(|g| (g.group_name.clone(), "present".to_string()))
        .collect())
}

fn offsets(s: &Store) -> Result<BTreeMap<(String, i32), String>, Error> {
    let mut out = BTreeMap::new();
    for (topic, group, queues) in load::<ConsumerOffsets>(&s.config_dir())?.value.iter() {
        for (q, o) in queues {
            out.insert((format!("{topic}@{group}"), *q), o.to_string());
        }
    }
    Ok(out)
}

fn diff<K: Ord + Clone>(
    a: &BTreeMap<K, String>,
    b: &BTreeMap<K, String>,
    mut push: impl FnMut(&K, Option<&String>, Option<&String>),
) {
    let keys: std::collections::BTreeSet<&K> = a.keys().chain(b.keys()).collect();
    for k in keys {
        let (x, y) = (a.get(k), b.get(k));
        if x != y {
            push(k, x, y);
        }
    }
}

/// Every difference of each store's config from the keeper's.
pub fn differences(stores: &[Store], keeper: usize) -> Result<Vec<ConfigDifference>, Error> {
    let k = &stores[keeper];
    let (kt, kg, ko) = (topics(k)?, groups(k)?, offsets(k)?);
    let mut out = Vec::new();
    for (i, s) in stores.iter().enumerate() {
        if i == keeper {
            continue;
        }
        let mut push = |file: &'static str,
                        name: String,
                        queue_id: Option<i32>,
                        x: Option<&String>,
                        y: Option<&String>| {
            out.push(ConfigDifference {
                store: i,
                against: keeper,
                file,
                name,
                queue_id,
                store_value: x.cloned(),
                against_value: y.cloned(),
            })
        };
        diff(&topics(s)?, &kt, |n, x, y| {
            push("topics.json", n.clone(), None, x, y)
        });
        diff(&groups(s)?, &kg, |n, x, y| {
            push("subscriptionGroup.json", n.clone(), None, x, y)
        });
        diff(&offsets(s)?, &ko, |(n, q), x, y| {
            push("consumerOffset.json", n.clone(), Some(*q), x, y)
        });
    }
    Ok(out)
}
