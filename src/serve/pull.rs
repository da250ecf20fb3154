//! `PULL_MESSAGE` as `PullMessageProcessor` answers it (PROTOCOL.md 4.8): the group, topic
//! and queue checks in the broker's order, the filter from the request or from the group's
//! heartbeat, the store read with the commit-offset side effect, and long polling: a pull that
//! finds nothing and carries the suspend flag is parked until its queue grows or its hold
//! time ends, then read again without committing. 5.x's lite pull consumer sends the same
//! request as `LITE_PULL_MESSAGE` (361), which a 5.x broker answers the same way; so does this
//! server, whatever the store's version (a 4.9 broker does not know the code).

use std::borrow::Cow;
use std::time::{Duration, Instant};

use super::conn::{ConnCtx, Outbox};
use super::{Handled, Outcome, Refusal, State};
use crate::engine::broker::pull::{MessageFilter, PullRequest, PullResult, PullSource, PullStatus};
use crate::engine::broker::Engine;
use crate::engine::filter::sql::{SqlDialect, SqlFilter};
use crate::engine::filter::TagFilter;
use crate::engine::store::dispatch::RETRY_PREFIX;
use crate::engine::store::version::BrokerVersion;
use crate::format::config::files::PERM_READ;
use crate::remoting::codes;
use crate::remoting::header::{PullMessageRequestHeader, PullMessageResponseHeader};
use crate::remoting::{FrameCodec, RemotingCommand};

/// The longest a pull is held, whatever `suspendTimeoutMillis` asks (clients time out at 30 s).
const MAX_HOLD: Duration = Duration::from_secs(25);

/// Pulls one connection may have parked at once (a consumer parks one per queue it holds).
pub const MAX_PARKED_PER_CONN: usize = 1024;

/// A suspended pull waiting for its queue to grow.
pub struct Parked {
    pub conn_id: u64,
    outbox: Outbox,
    req: RemotingCommand,
    header: PullMessageRequestHeader,
    filter: Option<MessageFilter>,
    deadline: Instant,
}

/// A filter from a subscription expression and its type (`TAG` when absent).
fn build_filter(
    expr: &str,
    expression_type: Option<&str>,
    version: BrokerVersion,
) -> Result<Option<MessageFilter>, Refusal> {
    let failed = |e: String| {
        Refusal::new(
            codes::SUBSCRIPTION_PARSE_FAILED,
            format!("parse the consumer's subscription[{expr}] failed: {e}"),
        )
    };
    match expression_type.unwrap_or("TAG") {
        t if t.eq_ignore_ascii_case("TAG") => {
            let f = TagFilter::parse(expr).map_err(|e| failed(e.to_string()))?;
            Ok((!f.is_all()).then_some(MessageFilter::Tag(f)))
        }
        t if t.eq_ignore_ascii_case("SQL92") => {
            let dialect = match version {
                BrokerVersion::V4_9 => SqlDialect::V4_9,
                BrokerVersion::V5 => SqlDialect::V5,
            };
            let f = SqlFilter::parse_with(expr, dialect).map_err(|e| failed(e.to_string()))?;
            Ok(Some(MessageFilter::Sql(f)))
        }
        other => Err(failed(format!("unknown expression type {other}"))),
    }
}

/// Checks 2 to 6 of PROTOCOL.md 4.8; the filter to read with.
fn check(
    st: &mut State,
    h: &PullMessageRequestHeader,
    peer: std::net::SocketAddr,
) -> Result<Option<MessageFilter>, Refusal> {
    let group = st.engine.group_config(&h.consumer_group);
    if !group.consume_enable {
        return Err(Refusal::new(
            codes::NO_PERMISSION,
            format!("subscription group no permission, {}", h.consumer_group),
        ));
    }
    let (read_queues, perm) = topic_queues(st, &h.topic).ok_or_else(|| {
        Refusal::new(
            codes::TOPIC_NOT_EXIST,
            format!("topic[{}] not exist, apply first please!", h.topic),
        )
    })?;
    if perm & PERM_READ == 0 {
        return Err(Refusal::new(
            codes::NO_PERMISSION,
            format!("the topic[{}] pulling message is forbidden", h.topic),
        ));
    }
    if h.queue_id < 0 || h.queue_id >= read_queues {
        return Err(Refusal::new(
            codes::SYSTEM_ERROR,
            format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{read_queues}] consumer:[{peer}]",
                h.queue_id, h.topic
            ),
        ));
    }
    let version = st.engine.options().version;
    if h.has_subscription() {
        let expr = h.subscription.as_deref().unwrap_or("*");
        return build_filter(expr, h.expression_type.as_deref(), version);
    }
    let Some(info) = st.clients.group(&h.consumer_group) else {
        return Err(Refusal::new(
            codes::SUBSCRIPTION_NOT_EXIST,
            format!(
                "the consumer's group info not exist, group: {}",
                h.consumer_group
            ),
        ));
    };
    if info.is_broadcasting() && !group.consume_broadcast_enable {
        return Err(Refusal::new(
            codes::NO_PERMISSION,
            format!(
                "the consumer group[{}] can not consume by broadcast way",
                h.consumer_group
            ),
        ));
    }
    let Some(sub) = info.subscriptions.get(&h.topic) else {
        return Err(Refusal::new(
            codes::SUBSCRIPTION_NOT_EXIST,
            format!("the consumer's subscription not exist, topic: {}", h.topic),
        ));
    };
    if sub.sub_version < h.sub_version {
        return Err(Refusal::new(
            codes::SUBSCRIPTION_NOT_LATEST,
            "the consumer's subscription not latest",
        ));
    }
    let (expr, ty) = (sub.sub_string.clone(), sub.expression_type.clone());
    build_filter(&expr, Some(&ty), version)
}

/// A topic's read queue count and perm: its config, else (a topic with consume queues but no
/// `topics.json` entry) its queues, readable and writable; the `%RETRY%` topic of a group the
/// store knows (configured or with offsets) exists with the group's `retryQueueNums`, as a
/// broker creates it for the group's first consumer (`mqadmin consumerProgress` asks its
/// route).
pub fn topic_queues(st: &State, topic: &str) -> Option<(i32, i32)> {
    if let Some(tc) = st.engine.topic_configs().get(topic) {
        return Some((tc.read_queue_nums, tc.perm));
    }
    let ids = st.engine.queue_ids(topic);
    if let Some(n) = ids.iter().max().map(|m| m + 1) {
        return Some((n, 6));
    }
    let group = topic.strip_prefix(RETRY_PREFIX)?;
    let known = st.engine.subscription_groups().get(group).is_some()
        || st
            .engine
            .consumer_offsets()
            .iter()
            .any(|(_, g, _)| g == group);
    known.then(|| {
        let n = st
            .engine
            .subscription_groups()
            .get(group)
            .map_or(1, |c| c.retry_queue_nums.max(1));
        (n, 6)
    })
}

pub fn pull(st: &mut State, ctx: &ConnCtx, req: &RemotingCommand) -> Handled {
    let h: PullMessageRequestHeader = req.read_header()?;
    let filter = check(st, &h, ctx.peer)?;
    let commit = h.has_commit_offset().then_some(h.commit_offset);
    let r = st.engine.process_pull_with(
        &h.consumer_group,
        &request(&h, filter.as_ref()),
        commit,
        false,
    )?;
    let status = r.pull_status(h.queue_offset, st.engine.options().role);
    // a connection holds one parked pull per queue it consumes; past the limit a pull is
    // answered at once, as one without the suspend flag
    let room = || st.parked.iter().filter(|p| p.conn_id == ctx.id).count() < MAX_PARKED_PER_CONN;
    if status == PullStatus::NoNewMsg && h.has_suspend() && room() {
        let hold = Duration::from_millis(u64::try_from(h.suspend_timeout_millis).unwrap_or(0))
            .min(MAX_HOLD);
        st.parked.push(Parked {
            conn_id: ctx.id,
            outbox: ctx.outbox.clone(),
            req: req.clone(),
            header: h,
            filter,
            deadline: Instant::now() + hold,
        });
        return Ok(Outcome::Parked);
    }
    answer(&st.engine, req, &r, status)
        .map(Outcome::Encoded)
        .ok_or_else(|| Refusal::new(codes::SYSTEM_ERROR, "the pull response cannot be encoded"))
}

fn request<'a>(
    h: &'a PullMessageRequestHeader,
    filter: Option<&'a MessageFilter>,
) -> PullRequest<'a> {
    PullRequest {
        topic: &h.topic,
        queue_id: h.queue_id,
        offset: h.queue_offset,
        max_msgs: h.max_msg_nums,
        filter,
    }
}

/// The response frame to a pull: code by status, the four offsets, the records as stored,
/// copied once, from the engine's maps straight after the header (`r` holds their places).
fn answer(
    engine: &Engine,
    req: &RemotingCommand,
    r: &PullResult,
    status: PullStatus,
) -> Option<Vec<u8>> {
    let code = match status {
        PullStatus::Found => codes::SUCCESS,
        PullStatus::NoNewMsg => codes::PULL_NOT_FOUND,
        PullStatus::NoMatchedMsg => codes::PULL_RETRY_IMMEDIATELY,
        PullStatus::OffsetIllegal => codes::PULL_OFFSET_MOVED,
    };
    let mut cmd = RemotingCommand::response_to(req, code, Some(r.status.as_str().to_string()));
    cmd.write_header(&PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: r.next_begin_offset,
        min_offset: r.min_offset,
        max_offset: r.max_offset,
    });
    let records: Vec<Cow<'_, [u8]>> = if code == codes::SUCCESS {
        r.messages
            .iter()
            .filter_map(|m| PullSource::read(engine, m.commitlog_offset, m.size))
            .collect()
    } else {
        Vec::new()
    };
    let body_len = records.iter().map(|m| m.len()).sum();
    let header = cmd.encode_header().ok()?;
    let prefix = FrameCodec::default()
        .prefix(cmd.serialize_type, header.len(), body_len)
        .ok()?;
    let mut out = Vec::with_capacity(prefix.len() + header.len() + body_len);
    out.extend_from_slice(&prefix);
    out.extend_from_slice(&header);
    for m in &records {
        out.extend_from_slice(m);
    }
    Some(out)
}

/// Answer the parked pulls whose queue grew past their offset or whose hold time ended.
pub fn wake_parked(st: &mut State, now: Instant) {
    if st.parked.is_empty() {
        return;
    }
    let parked = std::mem::take(&mut st.parked);
    let role = st.engine.options().role;
    for p in parked {
        let (_, max) = st.engine.queue_bounds(&p.header.topic, p.header.queue_id);
        if max <= p.header.queue_offset && now < p.deadline {
            st.parked.push(p);
            continue;
        }
        let r = st
            .engine
            .pull_in_place(&request(&p.header, p.filter.as_ref()));
        let status = r.pull_status(p.header.queue_offset, role);
        if let Some(bytes) = answer(&st.engine, &p.req, &r, status) {
            let _ = p.outbox.try_send(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_from_expressions() {
        let v = BrokerVersion::V4_9;
        assert!(build_filter("*", None, v).unwrap().is_none());
        assert!(matches!(
            build_filter("TagA || TagB", Some("TAG"), v).unwrap(),
            Some(MessageFilter::Tag(_))
        ));
        assert!(matches!(
            build_filter("a > 1", Some("SQL92"), v).unwrap(),
            Some(MessageFilter::Sql(_))
        ));
        let bad = build_filter("a >", Some("SQL92"), v).unwrap_err();
        assert_eq!(bad.code, codes::SUBSCRIPTION_PARSE_FAILED);
        let unknown = build_filter("x", Some("CLASS"), v).unwrap_err();
        assert_eq!(unknown.code, codes::SUBSCRIPTION_PARSE_FAILED);
    }
}
