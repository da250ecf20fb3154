//! The consumer groups clients have announced by heartbeat (`ConsumerManager`): per group what
//! it runs (consume type, message model, where a new consumer starts), its subscriptions by
//! topic and its live channels. A channel is one connection of one client; it goes when the
//! client unregisters, its connection closes, or it has not been heard from for two minutes; a
//! group goes with its last channel. The registry holds at most [`MAX_GROUPS`] groups of at most
//! [`MAX_GROUP_CLIENTS`] channels each; a heartbeat that would pass either is refused.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::remoting::body::{ConsumerData, SubscriptionData};
use crate::remoting::Language;

/// Groups the registry holds at once.
pub const MAX_GROUPS: usize = 4096;
/// Channels (client connections) one group holds at once.
pub const MAX_GROUP_CLIENTS: usize = 1024;

/// How long a channel lives without a heartbeat (`channelExpiredTimeout`).
pub const CHANNEL_EXPIRY: Duration = Duration::from_secs(120);

/// Where the server writes a frame to one connection: the connection's id and its outbox.
#[derive(Debug, Clone)]
pub struct Channel {
    pub conn_id: u64,
    pub outbox: super::conn::Outbox,
}

/// One client channel of a group (`ClientChannelInfo`).
#[derive(Debug, Clone)]
pub struct ChannelInfo {
    pub client_id: String,
    pub language: Language,
    pub version: i32,
    /// The peer's `ip:port`.
    pub addr: String,
    pub last_seen: Instant,
    pub channel: Channel,
}

/// One consumer group as its clients announce it (`ConsumerGroupInfo`).
#[derive(Debug, Clone, Default)]
pub struct GroupInfo {
    pub consume_type: String,
    pub message_model: String,
    pub consume_from_where: String,
    pub subscriptions: BTreeMap<String, SubscriptionData>,
    /// By connection id.
    pub channels: BTreeMap<u64, ChannelInfo>,
}

impl GroupInfo {
    pub fn is_broadcasting(&self) -> bool {
        self.message_model == "BROADCASTING"
    }

    /// Client ids of the live channels, in connection order.
    pub fn client_ids(&self) -> Vec<String> {
        self.channels
            .values()
            .map(|c| c.client_id.clone())
            .collect()
    }

    /// `updateSubscription`: a topic's subscription is replaced only by a newer version; topics
    /// the heartbeat no longer lists are dropped. True when the set of topics changed.
    fn update_subscriptions(&mut self, subs: &[SubscriptionData]) -> bool {
        let mut changed = false;
        for s in subs {
            match self.subscriptions.get(&s.topic) {
                Some(old) if old.sub_version >= s.sub_version => {}
                Some(_) => {
                    self.subscriptions.insert(s.topic.clone(), s.clone());
                }
                None => {
                    self.subscriptions.insert(s.topic.clone(), s.clone());
                    changed = true;
                }
            }
        }
        let before = self.subscriptions.len();
        self.subscriptions
            .retain(|t, _| subs.iter().any(|s| &s.topic == t));
        changed || self.subscriptions.len() != before
    }
}

/// Every group announced to this server.
#[derive(Debug, Default)]
pub struct Clients {
    groups: BTreeMap<String, GroupInfo>,
}

/// The client that sent a heartbeat, as the connection knows it.
#[derive(Debug, Clone)]
pub struct Peer {
    pub client_id: String,
    pub language: Language,
    pub version: i32,
    pub addr: String,
    pub channel: Channel,
}

impl Clients {
    pub fn group(&self, name: &str) -> Option<&GroupInfo> {
        self.groups.get(name).filter(|g| !g.channels.is_empty())
    }

    pub fn groups(&self) -> impl Iterator<Item = (&str, &GroupInfo)> {
        self.groups
            .iter()
            .filter(|(_, g)| !g.channels.is_empty())
            .map(|(n, g)| (n.as_str(), g))
    }

    /// Whether a heartbeat from connection `conn_id` naming `groups` fits the registry: the new
    /// groups fit [`MAX_GROUPS`] and no group would pass [`MAX_GROUP_CLIENTS`]. The error says
    /// which limit.
    pub fn admits(&self, groups: &[ConsumerData], conn_id: u64) -> Result<(), String> {
        let new = groups
            .iter()
            .filter(|d| !self.groups.contains_key(&d.group_name))
            .map(|d| d.group_name.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        if self.groups.len() + new > MAX_GROUPS {
            return Err(format!(
                "{} consumer groups are registered; {new} more would pass this server's limit of \
                 {MAX_GROUPS}",
                self.groups.len()
            ));
        }
        for d in groups {
            if let Some(g) = self.groups.get(&d.group_name) {
                if g.channels.len() >= MAX_GROUP_CLIENTS && !g.channels.contains_key(&conn_id) {
                    return Err(format!(
                        "consumer group {} has {} clients, this server's limit",
                        d.group_name,
                        g.channels.len()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Groups in the registry (with at least one channel).
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// `registerConsumer`: refresh the channel and the group's settings and subscriptions.
    /// True when the group's channels or subscribed topics changed (its clients should
    /// rebalance).
    pub fn register(&mut self, data: &ConsumerData, peer: &Peer, now: Instant) -> bool {
        let g = self.groups.entry(data.group_name.clone()).or_default();
        g.consume_type.clone_from(&data.consume_type);
        g.message_model.clone_from(&data.message_model);
        g.consume_from_where.clone_from(&data.consume_from_where);
        let info = ChannelInfo {
            client_id: peer.client_id.clone(),
            language: peer.language,
            version: peer.version,
            addr: peer.addr.clone(),
            last_seen: now,
            channel: peer.channel.clone(),
        };
        let new_channel = match g.channels.insert(peer.channel.conn_id, info) {
            None => true,
            Some(old) => old.client_id != peer.client_id,
        };
        let new_topics = g.update_subscriptions(&data.subscription_data_set);
        new_channel || new_topics
    }

    /// `unregisterConsumer`: drop `client_id`'s channels from `group`. True if one went.
    pub fn unregister(&mut self, group: &str, client_id: &str) -> bool {
        let Some(g) = self.groups.get_mut(group) else {
            return false;
        };
        let before = g.channels.len();
        g.channels.retain(|_, c| c.client_id != client_id);
        let changed = g.channels.len() != before;
        self.groups.retain(|_, g| !g.channels.is_empty());
        changed
    }

    /// A connection closed: drop its channels. Returns the groups that lost one.
    pub fn drop_connection(&mut self, conn_id: u64) -> Vec<String> {
        let mut changed = Vec::new();
        for (name, g) in &mut self.groups {
            if g.channels.remove(&conn_id).is_some() {
                changed.push(name.clone());
            }
        }
        self.groups.retain(|_, g| !g.channels.is_empty());
        changed
    }

    /// Drop channels not heard from within [`CHANNEL_EXPIRY`]. Returns the groups that lost one.
    pub fn expire(&mut self, now: Instant) -> Vec<String> {
        let mut changed = Vec::new();
        for (name, g) in &mut self.groups {
            let before = g.channels.len();
            g.channels
                .retain(|_, c| now.saturating_duration_since(c.last_seen) < CHANNEL_EXPIRY);
            if g.channels.len() != before {
                changed.push(name.clone());
            }
        }
        self.groups.retain(|_, g| !g.channels.is_empty());
        changed
    }

    /// The channels of `group` (to notify them).
    pub fn channels(&self, group: &str) -> Vec<ChannelInfo> {
        self.groups
            .get(group)
            .map(|g| g.channels.values().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(conn: u64, id: &str) -> Peer {
        let (outbox, _rx) = super::super::conn::outbox();
        Peer {
            client_id: id.into(),
            language: Language::Java,
            version: 409,
            addr: "127.0.0.1:1".into(),
            channel: Channel {
                conn_id: conn,
                outbox,
            },
        }
    }

    fn data(topics: &[(&str, i64)]) -> ConsumerData {
        ConsumerData {
            group_name: "g".into(),
            consume_type: "CONSUME_PASSIVELY".into(),
            message_model: "CLUSTERING".into(),
            consume_from_where: "CONSUME_FROM_FIRST_OFFSET".into(),
            subscription_data_set: topics
                .iter()
                .map(|(t, v)| SubscriptionData {
                    topic: t.to_string(),
                    sub_string: "*".into(),
                    sub_version: *v,
                    expression_type: "TAG".into(),
                    ..Default::default()
                })
                .collect(),
            unit_mode: false,
        }
    }

    #[test]
    fn heartbeats_register_refresh_and_expire() {
        let mut c = Clients::default();
        let t0 = Instant::now();
        assert!(c.register(&data(&[("T", 1)]), &peer(1, "a"), t0));
        assert!(!c.register(&data(&[("T", 1)]), &peer(1, "a"), t0));
        assert!(c.register(&data(&[("T", 1)]), &peer(2, "b"), t0));
        assert_eq!(c.group("g").unwrap().client_ids(), ["a", "b"]);
        // an older version does not replace, a newer one does, a new topic is a change
        let mut older = data(&[("T", 0)]);
        older.subscription_data_set[0].sub_string = "x".into();
        assert!(!c.register(&older, &peer(1, "a"), t0));
        assert_eq!(c.group("g").unwrap().subscriptions["T"].sub_string, "*");
        assert!(c.register(&data(&[("T", 2), ("U", 2)]), &peer(1, "a"), t0));
        assert!(c.register(&data(&[("U", 3)]), &peer(1, "a"), t0));
        assert!(!c.group("g").unwrap().subscriptions.contains_key("T"));
        assert_eq!(c.drop_connection(2), ["g"]);
        assert!(c.expire(t0 + CHANNEL_EXPIRY).contains(&"g".to_string()));
        assert!(c.group("g").is_none());
    }

    #[test]
    fn groups_go_with_their_last_channel_and_the_table_is_capped() {
        let mut c = Clients::default();
        let t0 = Instant::now();
        c.register(&data(&[("T", 1)]), &peer(1, "a"), t0);
        assert_eq!(c.len(), 1);
        c.drop_connection(1);
        assert!(c.is_empty(), "an empty group stayed");
        let many: Vec<ConsumerData> = (0..MAX_GROUPS)
            .map(|i| ConsumerData {
                group_name: format!("g{i}"),
                ..data(&[])
            })
            .collect();
        assert!(c.admits(&many, 1).is_ok());
        for d in &many {
            c.register(d, &peer(1, "a"), t0);
        }
        let one_more = ConsumerData {
            group_name: "late".into(),
            ..data(&[])
        };
        let err = c.admits(std::slice::from_ref(&one_more), 2).unwrap_err();
        assert!(err.contains("limit"), "{err}");
        // a group already there takes a heartbeat
        assert!(c.admits(&many[..1], 2).is_ok());
        c.drop_connection(1);
        assert!(c.is_empty());
        assert!(c.admits(&[one_more], 2).is_ok());
    }

    #[test]
    fn unregister_removes_only_that_client() {
        let mut c = Clients::default();
        let t0 = Instant::now();
        c.register(&data(&[("T", 1)]), &peer(1, "a"), t0);
        c.register(&data(&[("T", 1)]), &peer(2, "b"), t0);
        assert!(c.unregister("g", "a"));
        assert!(!c.unregister("g", "a"));
        assert_eq!(c.group("g").unwrap().client_ids(), ["b"]);
    }
}
