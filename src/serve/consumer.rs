//! The consumer session (PROTOCOL.md 4.1 to 4.12): heartbeats and unregistering, the group's
//! client ids, offsets and offset lookups, send-back for retries, orderly locks, and the SQL92
//! client config check.
//!
//! What a request can make the server keep is bounded: a JSON body is read only up to
//! [`MAX_JSON_BODY`]; a heartbeat names at most [`MAX_HEARTBEAT_GROUPS`] groups of at most
//! [`MAX_SUBSCRIPTIONS`] subscriptions (the registry caps groups and clients, see
//! [`super::clients`]); a lock request names at most [`MAX_LOCK_QUEUES`] queues, and only queues
//! of topics the store has are locked. Past a limit the request is refused whole with
//! `SYSTEM_ERROR` and a remark naming it.
//!
//! A heartbeat creates a group's config and `%RETRY%` topic in the overlay (the broker's
//! `autoCreateSubscriptionGroup`) only for a group that subscribes to a topic the store has, or
//! whose config exists already: only such a group can pull a message and send it back, so the
//! overlay gets what consumers of this store need and nothing a client merely names.

use std::time::Instant;

use super::clients::{Channel, Peer};
use super::conn::ConnCtx;
use super::{success, Handled, Outcome, Refusal, State};
use crate::engine::broker::retry::SendBackOutcome;
use crate::engine::broker::EngineError;
use crate::engine::filter::sql::SqlFilter;
use crate::engine::store::dispatch::retry_topic;
use crate::format::config::files::{PERM_READ, PERM_WRITE};
use crate::format::layout::check_topic;
use crate::remoting::body::{
    CheckClientConfigBody, ConsumerListByGroup, HeartbeatData, LockBatchRequestBody,
    LockBatchResponseBody,
};
use crate::remoting::codes;
use crate::remoting::command::VERSION_V3_4_9;
use crate::remoting::header::{
    ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, SearchOffsetRequestHeader, SearchOffsetResponseHeader,
    UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use crate::remoting::RemotingCommand;

/// Largest JSON body a request may carry (2 MiB): a heartbeat of a client running hundreds of
/// groups is tens of KiB.
pub const MAX_JSON_BODY: usize = 2 * 1024 * 1024;
/// Consumer groups one heartbeat may name (a client instance runs one consumer per group).
pub const MAX_HEARTBEAT_GROUPS: usize = 1024;
/// Subscriptions (topics) one group's heartbeat may carry.
pub const MAX_SUBSCRIPTIONS: usize = 1024;
/// Queues one LOCK_BATCH_MQ or UNLOCK_BATCH_MQ may name.
pub const MAX_LOCK_QUEUES: usize = 4096;

/// `body` if it is small enough to be read as JSON.
fn json_body(body: &[u8]) -> Result<&[u8], Refusal> {
    if body.len() > MAX_JSON_BODY {
        return Err(Refusal::new(
            codes::SYSTEM_ERROR,
            format!(
                "request body of {} bytes exceeds this server's limit of {MAX_JSON_BODY}",
                body.len()
            ),
        ));
    }
    Ok(body)
}

fn over_limit(what: &str, n: usize, max: usize) -> Refusal {
    Refusal::new(
        codes::SYSTEM_ERROR,
        format!("{what}: {n} exceeds this server's limit of {max}"),
    )
}

/// True when `group` may get a config and a retry topic in the overlay: it has a config, or it
/// subscribes to a topic the store has (not a retry topic).
fn of_the_store(st: &State, group: &str, subs: &[crate::remoting::body::SubscriptionData]) -> bool {
    st.engine.subscription_groups().get(group).is_some()
        || subs.iter().any(|s| {
            !s.topic
                .starts_with(crate::engine::store::dispatch::RETRY_PREFIX)
                && super::pull::topic_queues(st, &s.topic).is_some()
        })
}

/// `HEART_BEAT` (34): register each consumer group's channel and subscriptions, create the
/// group's config and `%RETRY%` topic (for a group of the store), tell the group's clients when
/// its membership changed.
pub fn heartbeat(st: &mut State, ctx: &ConnCtx, req: &RemotingCommand, body: &[u8]) -> Handled {
    let hb = HeartbeatData::from_json(json_body(body)?)?;
    if hb.consumer_data_set.len() > MAX_HEARTBEAT_GROUPS {
        return Err(over_limit(
            "consumer groups in one heartbeat",
            hb.consumer_data_set.len(),
            MAX_HEARTBEAT_GROUPS,
        ));
    }
    for data in &hb.consumer_data_set {
        if data.subscription_data_set.len() > MAX_SUBSCRIPTIONS {
            return Err(over_limit(
                &format!("subscriptions of group {}", data.group_name),
                data.subscription_data_set.len(),
                MAX_SUBSCRIPTIONS,
            ));
        }
    }
    let peer = Peer {
        client_id: hb.client_id.clone(),
        language: req.language,
        version: req.version,
        addr: ctx.peer.to_string(),
        channel: Channel {
            conn_id: ctx.id,
            outbox: ctx.outbox.clone(),
        },
    };
    let now = Instant::now();
    for data in &hb.consumer_data_set {
        check_group(&data.group_name)?;
    }
    st.clients
        .admits(&hb.consumer_data_set, ctx.id)
        .map_err(|e| Refusal::new(codes::SYSTEM_ERROR, e))?;
    for data in &hb.consumer_data_set {
        let notify = if of_the_store(st, &data.group_name, &data.subscription_data_set) {
            let cfg = st.engine.group_config(&data.group_name);
            st.engine.ensure_topic(
                &retry_topic(&data.group_name),
                cfg.retry_queue_nums,
                PERM_READ | PERM_WRITE,
            );
            cfg.notify_consumer_ids_changed_enable
        } else {
            true
        };
        let changed = st.clients.register(data, &peer, now);
        if changed && notify {
            tracing::info!(group = %data.group_name, client = %hb.client_id, "consumer group changed");
            st.notify_ids_changed(&data.group_name);
        }
    }
    success(req, Vec::new())
}

/// A group whose `%RETRY%` and `%DLQ%` topics are valid topic names: they become queue folders
/// of the overlay, so a name that is not is refused before anything is written.
fn check_group(group: &str) -> Result<(), Refusal> {
    check_topic(&retry_topic(group)).map_err(|e| {
        Refusal::new(
            codes::SYSTEM_ERROR,
            format!("the consumer group name {group:?} is not allowed: {e}"),
        )
    })
}

/// `UNREGISTER_CLIENT` (35).
pub fn unregister(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: UnregisterClientRequestHeader = req.read_header()?;
    if let Some(g) = h.consumer_group.as_deref() {
        if st.clients.unregister(g, &h.client_id) {
            st.notify_ids_changed(g);
        }
    }
    success(req, Vec::new())
}

/// `GET_CONSUMER_LIST_BY_GROUP` (38).
pub fn consumer_list(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: GetConsumerListByGroupRequestHeader = req.read_header()?;
    match st.clients.group(&h.consumer_group) {
        Some(g) => {
            let body = ConsumerListByGroup {
                consumer_id_list: g.client_ids(),
            };
            success(req, body.to_json().into_bytes())
        }
        None => Err(Refusal::new(
            codes::SYSTEM_ERROR,
            format!("no consumer for this group, {}", h.consumer_group),
        )),
    }
}

/// `CHECK_CLIENT_CONFIG` (46): SQL92 is supported (property filtering enabled); a bad
/// expression is refused as the broker refuses it.
pub fn check_client_config(st: &mut State, req: &RemotingCommand, body: &[u8]) -> Handled {
    let b = CheckClientConfigBody::from_json(json_body(body)?)?;
    let subs: Vec<_> = b.subscription_data.iter().cloned().collect();
    if !b.group.is_empty() && of_the_store(st, &b.group, &subs) {
        st.engine.group_config(&b.group);
    }
    if let Some(s) = &b.subscription_data {
        if s.expression_type.eq_ignore_ascii_case("SQL92") {
            if let Err(e) = SqlFilter::parse(&s.sub_string) {
                return Err(Refusal::new(
                    codes::SUBSCRIPTION_PARSE_FAILED,
                    format!(
                        "parse the consumer's subscription[{}] failed: {e}",
                        s.sub_string
                    ),
                ));
            }
        }
    }
    success(req, Vec::new())
}

/// `QUERY_CONSUMER_OFFSET` (14): the committed offset, else what the broker tells a new group
/// (0 from the start of a queue still in memory), else `QUERY_NOT_FOUND`.
pub fn query_offset(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: QueryConsumerOffsetRequestHeader = req.read_header()?;
    let offset = st
        .engine
        .query_consumer_offset(&h.consumer_group, &h.topic, h.queue_id);
    if offset < 0 {
        let mut cmd = RemotingCommand::response_to(
            req,
            codes::QUERY_NOT_FOUND,
            Some("Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first".into()),
        );
        cmd.write_header(&QueryConsumerOffsetResponseHeader { offset: -1 });
        return Ok(Outcome::Reply(cmd, Vec::new()));
    }
    let mut cmd = RemotingCommand::response_to(req, codes::SUCCESS, None);
    cmd.write_header(&QueryConsumerOffsetResponseHeader { offset });
    Ok(Outcome::Reply(cmd, Vec::new()))
}

/// `UPDATE_CONSUMER_OFFSET` (15): stored as sent, into the overlay.
pub fn update_offset(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: UpdateConsumerOffsetRequestHeader = req.read_header()?;
    st.engine
        .commit_offset(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
    success(req, Vec::new())
}

/// `GET_MAX_OFFSET` (30), `GET_MIN_OFFSET` (31), `SEARCH_OFFSET_BY_TIMESTAMP` (29) and
/// `GET_EARLIEST_MSG_STORETIME` (32): SUCCESS for every queue, known or not.
pub fn offset_lookup(st: &mut State, req: &RemotingCommand) -> Handled {
    let mut cmd = RemotingCommand::response_to(req, codes::SUCCESS, None);
    match req.code {
        codes::GET_MAX_OFFSET => {
            let h: GetMaxOffsetRequestHeader = req.read_header()?;
            let (_, max) = st.engine.queue_bounds(&h.topic, h.queue_id);
            cmd.write_header(&GetMaxOffsetResponseHeader { offset: max });
        }
        codes::GET_MIN_OFFSET => {
            let h: GetMinOffsetRequestHeader = req.read_header()?;
            let (min, _) = st.engine.queue_bounds(&h.topic, h.queue_id);
            cmd.write_header(&GetMinOffsetResponseHeader { offset: min });
        }
        codes::SEARCH_OFFSET_BY_TIMESTAMP => {
            let h: SearchOffsetRequestHeader = req.read_header()?;
            let offset = st.engine.offset_by_time(&h.topic, h.queue_id, h.timestamp);
            cmd.write_header(&SearchOffsetResponseHeader { offset });
        }
        _ => {
            let h: GetEarliestMsgStoretimeRequestHeader = req.read_header()?;
            let (min, max) = st.engine.queue_bounds(&h.topic, h.queue_id);
            let timestamp = (min < max)
                .then(|| store_time_at(st, &h.topic, h.queue_id, min))
                .flatten()
                .unwrap_or(-1);
            cmd.write_header(&GetEarliestMsgStoretimeResponseHeader { timestamp });
        }
    }
    Ok(Outcome::Reply(cmd, Vec::new()))
}

/// The store time of the message at a queue offset.
pub fn store_time_at(st: &State, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
    let u = st.engine.unit_at(topic, queue_id, offset)?;
    st.engine.message_at(u.offset).map(|m| m.store_timestamp)
}

/// `CONSUMER_SEND_MSG_BACK` (36): the engine's send-back (retry level, `%DLQ%` after the max
/// reconsume times); clients before 3.4.9 get the group's `retryMaxTimes`.
pub fn send_back(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: ConsumerSendMsgBackRequestHeader = req.read_header()?;
    check_group(&h.group)?;
    let max = h
        .max_reconsume_times
        .filter(|_| req.version >= VERSION_V3_4_9);
    match st.engine.send_back(&h.group, h.offset, h.delay_level, max) {
        Ok(outcome) => {
            match &outcome {
                SendBackOutcome::Retry {
                    delay_level, put, ..
                } => tracing::debug!(
                    group = %h.group, offset = h.offset, level = delay_level, to = put.commitlog_offset, "send-back: retry"
                ),
                SendBackOutcome::DeadLetter { put } => tracing::info!(
                    group = %h.group, offset = h.offset, to = put.commitlog_offset, "send-back: dead letter"
                ),
                SendBackOutcome::Acknowledged => {}
            }
            success(req, Vec::new())
        }
        Err(EngineError::NoMessage(o)) => Err(Refusal::new(
            codes::SYSTEM_ERROR,
            format!("look message by offset failed, {o}"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// A lock request's body, within [`MAX_LOCK_QUEUES`].
fn lock_body(body: &[u8]) -> Result<LockBatchRequestBody, Refusal> {
    let b = LockBatchRequestBody::from_json(json_body(body)?)?;
    if b.mq_set.len() > MAX_LOCK_QUEUES {
        return Err(over_limit(
            "queues in one lock request",
            b.mq_set.len(),
            MAX_LOCK_QUEUES,
        ));
    }
    Ok(b)
}

/// `LOCK_BATCH_MQ` (41): the queues now held by the client; a queue of a topic the store does
/// not have is not locked (nothing can be pulled from it), so the lock table holds only queues
/// that exist.
pub fn lock_batch(st: &mut State, req: &RemotingCommand, body: &[u8]) -> Handled {
    let mut b = lock_body(body)?;
    b.mq_set.retain(|mq| {
        super::pull::topic_queues(st, &mq.topic).is_some_and(|(n, _)| (0..n).contains(&mq.queue_id))
    });
    let granted = if b.mq_set.is_empty() {
        Vec::new()
    } else {
        st.engine
            .lock_batch(&b.consumer_group, &b.client_id, &b.mq_set)
    };
    let body = LockBatchResponseBody {
        lock_ok_mq_set: granted,
    };
    success(req, body.to_json().into_bytes())
}

/// `UNLOCK_BATCH_MQ` (42).
pub fn unlock_batch(st: &mut State, req: &RemotingCommand, body: &[u8]) -> Handled {
    let b = lock_body(body)?;
    st.engine
        .unlock_batch(&b.consumer_group, &b.client_id, &b.mq_set);
    success(req, Vec::new())
}
