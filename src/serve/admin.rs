//! What `mqadmin` and the dashboard ask a broker (PROTOCOL.md 5): messages by key, id and
//! offset, consume and topic stats, connections, configs, runtime info, reset by time.

use std::collections::{BTreeMap, BTreeSet};

use super::consumer::store_time_at;
use super::pull::topic_queues;
use super::{success, Handled, Outcome, Refusal, State};
use crate::engine::broker::EngineError;
use crate::engine::store::reader::Reader;
use crate::format::config::fastjson::to_fastjson_compact;
use crate::format::config::files::{ConfigFile, TopicConfig};
use crate::remoting::acl::UNIQUE_MSG_QUERY_FLAG;
use crate::remoting::body::{
    ConnectionInfo, ConsumeStats, ConsumerConnection, GroupList, KvTable, MessageQueue,
    OffsetWrapper, ResetOffsetBody, TopicList, TopicOffset, TopicStatsTable,
};
use crate::remoting::codes;
use crate::remoting::header::{
    GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader,
    GetTopicConfigRequestHeader, GetTopicStatsInfoRequestHeader, QueryMessageRequestHeader,
    QueryMessageResponseHeader, QueryTopicConsumeByWhoRequestHeader, ResetOffsetRequestHeader,
    ViewMessageRequestHeader,
};
use crate::remoting::RemotingCommand;

/// `maxMsgsNumBatch` and `defaultQueryMaxNum`.
const QUERY_MAX: i32 = 64;
const UNIQUE_QUERY_MAX: i32 = 32;

/// The broker's system topics (`TopicValidator`).
const SYSTEM_TOPICS: [&str; 9] = [
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];

/// `QUERY_MESSAGE` (12): records by key (or unique key) through the index files.
pub fn query_message(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: QueryMessageRequestHeader = req.read_header()?;
    let unique = req
        .ext_fields
        .get(UNIQUE_MSG_QUERY_FLAG)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let max = if unique {
        UNIQUE_QUERY_MAX
    } else {
        h.max_num.min(QUERY_MAX)
    };
    let found = Reader::new(st.engine.source()).query_message(
        &h.topic,
        &h.key,
        max,
        h.begin_timestamp,
        h.end_timestamp,
    );
    let mut body = Vec::new();
    for phy in &found.offsets {
        if let Some(r) = st.engine.record_at(*phy as i64) {
            body.extend_from_slice(&r);
        }
    }
    let (code, remark) = if body.is_empty() {
        (
            codes::QUERY_NOT_FOUND,
            Some("can not find message, maybe time range not correct".to_string()),
        )
    } else {
        (codes::SUCCESS, None)
    };
    let mut cmd = RemotingCommand::response_to(req, code, remark);
    cmd.write_header(&QueryMessageResponseHeader {
        index_last_update_timestamp: found.index_last_update_timestamp,
        index_last_update_phyoffset: found.index_last_update_phy_offset,
    });
    Ok(Outcome::Reply(cmd, body))
}

/// `VIEW_MESSAGE_BY_ID` (33): the record at a commitlog offset (store or overlay).
pub fn view_message(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: ViewMessageRequestHeader = req.read_header()?;
    match st.engine.record_at(h.offset) {
        Some(r) => success(req, r.into_owned()),
        None => Err(Refusal::new(
            codes::SYSTEM_ERROR,
            format!("can not find message by the offset, {}", h.offset),
        )),
    }
}

/// `GET_CONSUME_STATS` (208): per queue, the max offset and the group's committed offset (also
/// as 5.x's pull offset).
pub fn consume_stats(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: GetConsumeStatsRequestHeader = req.read_header()?;
    let group = h.consumer_group.as_str();
    let topics: Vec<String> = match &h.topic {
        Some(t) if !t.is_empty() => vec![t.clone()],
        _ => st.engine.offset_topics(group).into_iter().collect(),
    };
    let subscribed = st.clients.group(group).map(|g| g.subscriptions.clone());
    let broker = st.broker_name();
    let mut stats = ConsumeStats::default();
    for topic in topics {
        let Some((read, _)) = topic_queues(st, &topic) else {
            continue;
        };
        if subscribed
            .as_ref()
            .is_some_and(|s| !s.is_empty() && !s.contains_key(&topic))
        {
            continue;
        }
        for q in 0..read {
            let (_, max) = st.engine.queue_bounds(&topic, q);
            let consumer = st.engine.committed_offset(group, &topic, q).max(0);
            let last = if consumer > 0 {
                store_time_at(st, &topic, q, consumer - 1).unwrap_or(0)
            } else {
                0
            };
            stats.offset_table.push((
                MessageQueue::new(topic.clone(), broker.clone(), q),
                OffsetWrapper {
                    broker_offset: max.max(0),
                    consumer_offset: consumer,
                    last_timestamp: last,
                    // pulls are not tracked: as a 5.x broker answers a queue its pull table
                    // lacks, nothing in flight
                    pull_offset: consumer,
                },
            ));
        }
    }
    success(req, stats.to_json().into_bytes())
}

/// `GET_TOPIC_STATS_INFO` (202).
pub fn topic_stats(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: GetTopicStatsInfoRequestHeader = req.read_header()?;
    let Some((read, _)) = topic_queues(st, &h.topic) else {
        return Err(Refusal::new(
            codes::TOPIC_NOT_EXIST,
            format!("topic[{}] not exist", h.topic),
        ));
    };
    let write = st
        .engine
        .topic_configs()
        .get(&h.topic)
        .map_or(read, |t| t.write_queue_nums);
    let broker = st.broker_name();
    let mut table = TopicStatsTable::default();
    for q in 0..write {
        let (min, max) = st.engine.queue_bounds(&h.topic, q);
        let last = if max > 0 {
            store_time_at(st, &h.topic, q, max - 1).unwrap_or(0)
        } else {
            0
        };
        table.offset_table.push((
            MessageQueue::new(h.topic.clone(), broker.clone(), q),
            TopicOffset {
                min_offset: min,
                max_offset: max,
                last_update_timestamp: last,
            },
        ));
    }
    success(req, table.to_json().into_bytes())
}

/// `GET_TOPIC_CONFIG` (351, 5.x): one topic's config as `TopicConfigAndQueueMapping` (no static
/// topic mapping here), which 5.x's `mqadmin topicStatus` and `consumerProgress` read before the
/// stats. A topic routed without a config (queues only, a known group's `%RETRY%`) gets the
/// config its route describes; an unknown one is TOPIC_NOT_EXIST, which the tool skips.
pub fn topic_config(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: GetTopicConfigRequestHeader = req.read_header()?;
    let Some((read, perm)) = topic_queues(st, &h.topic) else {
        return Err(Refusal::new(
            codes::TOPIC_NOT_EXIST,
            format!("No topic in this broker. topic: {}", h.topic),
        ));
    };
    let config = match st.engine.topic_configs().get(&h.topic) {
        Some(tc) => tc.clone(),
        None => TopicConfig {
            read_queue_nums: read,
            write_queue_nums: read,
            perm,
            ..TopicConfig::new(h.topic.as_str())
        },
    };
    success(req, to_fastjson_compact(&config.to_json()).into_bytes())
}

/// `GET_BROKER_RUNTIME_INFO` (28): what `clusterList` and `brokerStatus` print. The counters
/// of a live broker are zero: nothing is produced here.
pub fn runtime_info(st: &mut State, req: &RemotingCommand) -> Handled {
    let mut t = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        t.insert(k.to_string(), v);
    };
    put("brokerVersionDesc", "V4_9_8".into());
    put(
        "brokerVersion",
        crate::remoting::command::VERSION_V4_9_8.to_string(),
    );
    for k in [
        "putTps",
        "getTransferedTps",
        "getFoundTps",
        "getMissTps",
        "getTotalTps",
    ] {
        put(k, "0.0 0.0 0.0".into());
    }
    for k in [
        "msgPutTotalYesterdayMorning",
        "msgPutTotalTodayMorning",
        "msgPutTotalTodayNow",
        "msgGetTotalYesterdayMorning",
        "msgGetTotalTodayMorning",
        "msgGetTotalTodayNow",
        "sendThreadPoolQueueSize",
        "pullThreadPoolQueueSize",
        "queryThreadPoolQueueSize",
        "sendThreadPoolQueueHeadWaitTimeMills",
        "pullThreadPoolQueueHeadWaitTimeMills",
        "queryThreadPoolQueueHeadWaitTimeMills",
        "pageCacheLockTimeMills",
    ] {
        put(k, "0".into());
    }
    let first = st
        .engine
        .source()
        .commitlog
        .segments
        .first()
        .map(|s| s.start);
    let earliest = first
        .and_then(|o| st.engine.message_at(o as i64))
        .map_or(-1, |m| m.store_timestamp);
    put("earliestMessageTimeStamp", earliest.to_string());
    put("commitLogMinOffset", first.unwrap_or(0).to_string());
    put("commitLogMaxOffset", st.engine.commitlog_max().to_string());
    put("commitLogDiskRatio", "0.0".into());
    put("bootTimestamp", st.started_ms.to_string());
    let up = (st.engine.now() - st.started_ms).max(0) / 1000;
    put(
        "runtime",
        format!(
            "[ {} days, {} hours, {} minutes, {} seconds ]",
            up / 86400,
            up / 3600 % 24,
            up / 60 % 60,
            up % 60
        ),
    );
    put("brokerActive", "true".into());
    success(req, KvTable { table: t }.to_json().into_bytes())
}

/// `GET_ALL_TOPIC_CONFIG` (21): `topics.json` as the engine has it.
pub fn all_topic_config(st: &mut State, req: &RemotingCommand) -> Handled {
    let json = st.engine.topic_configs().to_json();
    success(req, to_fastjson_compact(&json).into_bytes())
}

/// `GET_ALL_SUBSCRIPTIONGROUP_CONFIG` (201): `subscriptionGroup.json` as the engine has it.
pub fn all_group_config(st: &mut State, req: &RemotingCommand) -> Handled {
    let json = ConfigFile::to_json(st.engine.subscription_groups());
    success(req, to_fastjson_compact(&json).into_bytes())
}

/// `QUERY_TOPIC_CONSUME_BY_WHO` (300): groups subscribed now and groups with offsets.
pub fn consumed_by(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: QueryTopicConsumeByWhoRequestHeader = req.read_header()?;
    let mut groups: BTreeSet<String> = st
        .clients
        .groups()
        .filter(|(_, g)| g.subscriptions.contains_key(&h.topic))
        .map(|(n, _)| n.to_string())
        .collect();
    groups.extend(
        st.engine
            .consumer_offsets()
            .iter()
            .filter(|(t, _, _)| *t == h.topic)
            .map(|(_, g, _)| g.to_string()),
    );
    let body = GroupList {
        group_list: groups.into_iter().collect(),
    };
    success(req, body.to_json().into_bytes())
}

/// `GET_CONSUMER_CONNECTION_LIST` (203).
pub fn connections(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: GetConsumerConnectionListRequestHeader = req.read_header()?;
    let Some(g) = st.clients.group(&h.consumer_group) else {
        return Err(Refusal::new(
            codes::CONSUMER_NOT_ONLINE,
            format!("the consumer group[{}] not online", h.consumer_group),
        ));
    };
    let body = ConsumerConnection {
        connection_set: g
            .channels
            .values()
            .map(|c| ConnectionInfo {
                client_addr: c.addr.clone(),
                client_id: c.client_id.clone(),
                language: c.language,
                version: c.version,
            })
            .collect(),
        consume_from_where: g.consume_from_where.clone(),
        consume_type: g.consume_type.clone(),
        message_model: g.message_model.clone(),
        subscription_table: g.subscriptions.clone(),
    };
    success(req, body.to_json().into_bytes())
}

/// `INVOKE_BROKER_TO_RESET_OFFSET` (222): the group's offsets on the topic move to the messages
/// stored at the time (into the overlay, so a restart keeps them); live clients get
/// `RESET_CONSUMER_CLIENT_OFFSET`. Without live clients the answer is `CONSUMER_NOT_ONLINE`, on
/// which `mqadmin` resets queue by queue itself.
pub fn reset_offset(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: ResetOffsetRequestHeader = req.read_header()?;
    if topic_queues(st, &h.topic).is_none() {
        return Err(Refusal::new(
            codes::SYSTEM_ERROR,
            format!(
                "[reset-offset] reset offset failed, no topic in this broker. topic={}",
                h.topic
            ),
        ));
    }
    let plan = match st
        .engine
        .reset_offsets_by_time(&h.group, &h.topic, h.timestamp, h.is_force)
    {
        Ok(p) => p,
        Err(EngineError::GroupHasNoOffset { group, .. }) => {
            return Err(Refusal::new(
                codes::SYSTEM_ERROR,
                format!("THe consumer group <{group}> not exist"),
            ))
        }
        Err(e) => return Err(e.into()),
    };
    let broker = st.broker_name();
    let table = ResetOffsetBody {
        offset_table: plan
            .iter()
            .map(|(q, _, new)| (MessageQueue::new(h.topic.clone(), broker.clone(), *q), *new))
            .collect(),
    };
    let body = table.to_json().into_bytes();
    let channels = st.clients.channels(&h.group);
    if channels.is_empty() {
        return Err(Refusal::new(
            codes::CONSUMER_NOT_ONLINE,
            format!(
                "Consumer not online, so can not reset offset, Group: {} Topic: {} Timestamp: {}",
                h.group, h.topic, h.timestamp
            ),
        ));
    }
    for ch in channels {
        let mut cmd = RemotingCommand::request(codes::RESET_CONSUMER_CLIENT_OFFSET, 0);
        cmd.write_header(&h);
        st.send_oneway(&ch.channel.outbox, cmd, &body);
    }
    success(req, body)
}

/// `GET_SYSTEM_TOPIC_LIST_FROM_BROKER` (305).
pub fn system_topics(_st: &mut State, req: &RemotingCommand) -> Handled {
    let body = TopicList {
        topic_list: SYSTEM_TOPICS.iter().map(|t| t.to_string()).collect(),
        broker_addr: None,
    };
    success(req, body.to_json().into_bytes())
}

/// `GET_BROKER_CONFIG` (26): the settings that describe this broker, as properties text.
pub fn broker_config(st: &mut State, req: &RemotingCommand) -> Handled {
    let g = &st.engine.source().geometry;
    let levels: Vec<String> = (1..=g.max_delay_level())
        .filter_map(|l| g.delay_millis(l))
        .map(|ms| match ms {
            ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
            ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
            ms => format!("{}s", ms / 1000),
        })
        .collect();
    let text = format!(
        "brokerClusterName={}\nbrokerName={}\nbrokerId=0\nbrokerRole=ASYNC_MASTER\nbrokerAddr={}\nstorePathRootDir={}\nmappedFileSizeCommitLog={}\nmessageDelayLevel={}\nenablePropertyFilter=true\n",
        st.cluster,
        st.broker_name(),
        st.broker_addr,
        st.engine.source().root.display(),
        g.commitlog_file_size.value,
        levels.join(" "),
    );
    let mut cmd = RemotingCommand::response_to(req, codes::SUCCESS, None);
    cmd.ext_fields.insert(
        "version",
        format!("{{\"counter\":0,\"timestamp\":{}}}", st.started_ms),
    );
    Ok(Outcome::Reply(cmd, text.into_bytes()))
}
