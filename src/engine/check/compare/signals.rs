//! Which broker and cluster a store belongs to, from what the store itself holds (no broker
//! config is needed):
//!
//! - the cluster: the `CLUSTER` property the broker puts on every message it stores
//!   (`SendMessageProcessor`), read from the first record; else the `<cluster>_REPLY_TOPIC` the
//!   broker's `TopicConfigManager` creates in `topics.json`;
//! - the broker name: 5.x's `rmq_sys_SYNC_BROKER_MEMBER_<brokerName>` topic; else the topic
//!   `TopicConfigManager` creates under the broker's own name (one read and one write queue,
//!   perm with `PERM_INHERIT`), when exactly one topic other than the cluster's and `TBW102`
//!   looks like it.
//!
//! A slave's `topics.json` is its master's (the slave's periodic sync copies it), so the two
//! agree; stores of two different brokers do not.

use serde::Serialize;

use crate::engine::Store;
use crate::format::commitlog::{message_in, prop, walk::LogCursor};
use crate::format::config::files::PERM_INHERIT;
use crate::format::config::{load, TopicConfigs};
use crate::format::dledger::walk::EntryCursor;
use crate::format::error::Error;

/// `MixAll.REPLY_TOPIC_POSTFIX`.
const REPLY_TOPIC_POSTFIX: &str = "_REPLY_TOPIC";
/// `TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX` (5.x), followed by the broker name.
const SYNC_BROKER_MEMBER_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";
/// `TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`.
const AUTO_CREATE_TOPIC: &str = "TBW102";

/// A value and where it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signal {
    pub value: String,
    /// `records` (the first record's CLUSTER property), `topics.json` (a topic the broker
    /// creates for itself).
    pub source: &'static str,
}

/// The broker and cluster a store belongs to, as far as its files tell.
#[derive(Debug, Clone, Default)]
pub struct BrokerSignals {
    pub cluster: Option<Signal>,
    pub broker_name: Option<Signal>,
}

fn first_record_cluster(store: &Store) -> Result<Option<String>, Error> {
    if let Some(layout) = &store.dledger {
        let mut c = EntryCursor::new(layout, 0);
        if !c.step()? {
            return Ok(None);
        }
        let Some(v) = c.visit() else { return Ok(None) };
        let m = message_in(v.body, v.header.record_offset());
        return Ok(m.and_then(|m| m.property(prop::CLUSTER).map(|c| c.into_owned())));
    }
    let mut c = LogCursor::new(&store.commitlog.segments, false);
    if !c.step()? {
        return Ok(None);
    }
    Ok(c.message()
        .and_then(|m| m.property(prop::CLUSTER).map(|c| c.into_owned())))
}

impl BrokerSignals {
    pub fn read(store: &Store) -> Result<BrokerSignals, Error> {
        let topics = load::<TopicConfigs>(&store.config_dir())?.value;
        let names: Vec<&str> = topics.iter().map(|t| t.topic_name.as_str()).collect();
        let topics_cluster = names
            .iter()
            .filter_map(|n| n.strip_suffix(REPLY_TOPIC_POSTFIX))
            .find(|c| !c.is_empty() && names.contains(c))
            .map(str::to_string);
        let cluster = match first_record_cluster(store)?.filter(|c| !c.is_empty()) {
            Some(c) => Some(Signal {
                value: c,
                source: "records",
            }),
            None => topics_cluster.clone().map(|c| Signal {
                value: c,
                source: "topics.json",
            }),
        };
        let member = names
            .iter()
            .filter_map(|n| n.strip_prefix(SYNC_BROKER_MEMBER_PREFIX))
            .find(|b| !b.is_empty());
        let broker_name = match member {
            Some(b) => Some(b.to_string()),
            None => {
                let own: Vec<&str> = topics
                    .iter()
                    .filter(|t| {
                        t.perm & PERM_INHERIT != 0
                            && t.read_queue_nums == 1
                            && t.write_queue_nums == 1
                            && t.topic_name != AUTO_CREATE_TOPIC
                            && Some(&t.topic_name) != topics_cluster.as_ref()
                            && cluster.as_ref().is_none_or(|c| c.value != t.topic_name)
                    })
                    .map(|t| t.topic_name.as_str())
                    .collect();
                match own.as_slice() {
                    [one] => Some(one.to_string()),
                    _ => None,
                }
            }
        };
        Ok(BrokerSignals {
            cluster,
            broker_name: broker_name.map(|b| Signal {
                value: b,
                source: "topics.json",
            }),
        })
    }

    /// The first signal on which `self` and `other` disagree: what, the two values and where
    /// they were read.
    pub fn conflict(
        &self,
        other: &BrokerSignals,
    ) -> Option<(&'static str, String, String, String)> {
        for (what, a, b) in [
            ("cluster", &self.cluster, &other.cluster),
            ("broker name", &self.broker_name, &other.broker_name),
        ] {
            if let (Some(a), Some(b)) = (a, b) {
                if a.value != b.value {
                    let signal = if a.source == b.source {
                        a.source.to_string()
                    } else {
                        format!("{} and {}", a.source, b.source)
                    };
                    let signal = match signal.as_str() {
                        "records" => "the CLUSTER property of each store's first record".into(),
                        "topics.json" => {
                            "the topics each broker creates for itself in topics.json".into()
                        }
                        _ => signal,
                    };
                    return Some((what, a.value.clone(), b.value.clone(), signal));
                }
            }
        }
        None
    }
}
