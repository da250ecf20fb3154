//! Sending messages as the 4.9 `DefaultMQProducer` does: single messages with
//! `SEND_MESSAGE_V2`, batches with `SEND_BATCH_MESSAGE`, retried on another broker by the
//! producer's rules, backed off on `SYSTEM_BUSY`.
//!
//! # The request
//! Header `SendMessageRequestHeaderV2` (PROTOCOL.md 6.2), as `sendKernelImpl` fills it:
//! `a` the producer group, `b` the topic, `c` `TBW102`, `d` 4, `e` the queue, `h` the flag,
//! `j` the reconsume times (0 but for `%RETRY%` topics, with `l` their max reconsume times),
//! `k` false, `m` whether it is a batch, `n` the broker's name.
//! - One message: `f` its sysflag (the compression bits it was stored with, plus
//!   `TRANSACTION_PREPARED` when its properties say `TRAN_MSG=true`, as the client adds it),
//!   `g` its born timestamp, `i` its properties with `WAIT=true` appended (the client's
//!   `Message` constructors set it; the 4.9.8 broker strips it before storing), body as is.
//! - A batch (`MessageBatch`): the body is the messages' blobs ([`crate::remoting::batch`]),
//!   each with its own flag, body and properties; `i` is the wrapper's properties, `WAIT=true`
//!   alone (`generateFromList` sets only that; the broker appends it and `CLUSTER` to every
//!   message's properties); `h` is 0 (the wrapper's flag; the broker stores each blob's).
//!   Where the Java client differs: it puts the send time in `g` and 0 in `f` (it never
//!   compresses a batch); here `g` is the first message's born timestamp, the one the broker
//!   stamps on every message of the batch, and `f` the sysflag the messages share (a batch of
//!   compressed bodies keeps its flag), so one batch holds messages of one sysflag.
//!
//! # The queue
//! A message with a queue id goes to that queue of the first broker, in the route's name
//! order, that has it (queue ids are per broker, so with several brokers the first one takes
//! them), and every retry goes there too. Otherwise a round robin over the route's queues
//! picks one, and a retry picks a queue on another broker when there is one (6.1).
//!
//! # Retries (6.6)
//! A send has `timeout` for all its attempts (`sendMsgTimeout`), and at most `1 + retries`
//! attempts. Retried: transport failures (connect, write, close, no answer in time, a frame
//! that cannot be read) and the codes the client retries, 17 `TOPIC_NOT_EXIST`,
//! 14 `SERVICE_NOT_AVAILABLE`, 1 `SYSTEM_ERROR`, 16 `NO_PERMISSION`, 204, 205; the route is
//! fetched again before the retry. A busy broker (2 `SYSTEM_BUSY`, 215 `FLOW_CONTROL`, or a
//! remark `[PC_SYNCHRONIZED]`, `[PCBUSY_CLEAN_QUEUE]`, `[TIMEOUT_CLEAN_QUEUE]`) is not counted
//! as an attempt, unlike the Java client, which gives up at once: the send pauses (50 ms,
//! doubling up to 1 s), then starts a fresh `timeout`, until `busy_budget` since the send
//! began (60 s by default) has run out. Every other code fails the send at once
//! ([`SendError::Refused`]). A stored answer with a status other than `SEND_OK` (10, 11, 12) is
//! returned as it is; the caller decides. A send whose earlier attempt may have reached the
//! broker (a transport failure) ends with a transport error whatever its last attempt got (a
//! broker that went away leaves the topic without a route, `TOPIC_NOT_EXIST`): the messages
//! may be stored, and the caller must hold them in doubt, not record them as refused.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::client::{ClientOptions, Pool, Response};
use super::outgoing::{Acked, Outgoing, SendStatus};
use super::route::{self, BrokerIdentity, PublishQueue, RouteCache, TopicRoute};
use crate::format::commitlog::{prop, sysflag};
use crate::format::config::files::PERM_WRITE;
use crate::remoting::batch::{self, BatchItem};
use crate::remoting::header::{SendMessageRequestHeaderV2, SendMessageResponseHeader};
use crate::remoting::{codes, FrameCodec, RemotingCommand, DEFAULT_MAX_FRAME};

/// The producer group the requests name.
pub const DEFAULT_PRODUCER_GROUP: &str = "RMQSTORE_SEND";

/// `DefaultMQProducer.defaultTopicQueueNums`: header `d`.
pub const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;

/// `MixAll.RETRY_GROUP_TOPIC_PREFIX`.
pub const RETRY_TOPIC_PREFIX: &str = "%RETRY%";

/// First pause after a busy answer; it doubles up to [`BUSY_BACKOFF_MAX`].
pub const BUSY_BACKOFF_FIRST: Duration = Duration::from_millis(50);
/// Longest pause after a busy answer.
pub const BUSY_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// How often the name server is asked whether a created topic is routed.
const CREATE_POLL: Duration = Duration::from_millis(200);

/// ACL keys: every request is signed as `AclClientRPCHook` signs it (PROTOCOL.md 7.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclKeys {
    pub access_key: String,
    pub secret_key: String,
}

/// Where to send and how.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Name server addresses (`host:port`); routes come from them.
    pub namesrv: Vec<String>,
    /// One broker address to send to directly instead (no name server); its topics must exist.
    pub broker: Option<String>,
    pub group: String,
    pub acl: Option<AclKeys>,
    /// Budget of one send, retries included (`sendMsgTimeout`); also the timeout of route and
    /// admin requests.
    pub timeout: Duration,
    /// `retryTimesWhenSendFailed`.
    pub retries: u32,
    /// Requests in flight on one broker connection.
    pub max_in_flight: usize,
    /// TCP connect timeout (`connectTimeoutMillis`).
    pub connect_timeout: Duration,
    /// How long a send keeps retrying a busy broker, from its first attempt.
    pub busy_budget: Duration,
    /// The cluster `create_topic` creates topics on; `None`: the name server's only cluster.
    pub cluster: Option<String>,
    /// How long `create_topic` waits for the name server to route a created topic.
    pub create_wait: Duration,
    /// Largest frame read or written, length prefix included.
    pub max_frame: usize,
}

impl ProducerConfig {
    pub fn new(namesrv: Vec<String>, broker: Option<String>) -> Self {
        ProducerConfig {
            namesrv,
            broker,
            group: DEFAULT_PRODUCER_GROUP.to_string(),
            acl: None,
            timeout: Duration::from_secs(3),
            retries: 2,
            max_in_flight: 16,
            connect_timeout: Duration::from_secs(3),
            busy_budget: Duration::from_secs(60),
            cluster: None,
            create_wait: Duration::from_secs(30),
            max_frame: DEFAULT_MAX_FRAME,
        }
    }
}

/// Why a send, a route lookup or a topic creation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The peer could not be reached, or closed the connection, or did not answer in time.
    #[error("{addr}: {what}")]
    Transport { addr: String, what: String },
    /// The broker (or name server) answered with an error code.
    #[error("{addr} answered {code} ({name}): {remark}")]
    Refused {
        addr: String,
        code: i32,
        name: String,
        remark: String,
    },
    /// The topic has no route (name server) or is not on the broker (`--broker`).
    #[error("topic {0} does not exist on the target cluster")]
    TopicNotExist(String),
    /// The answer could not be read.
    #[error("{addr}: {what}")]
    Protocol { addr: String, what: String },
    /// The request cannot be made: the messages or the config break a rule of the protocol
    /// (a batch of several topics, properties over 32767 bytes, a frame over the limit, ...).
    #[error("{0}")]
    Invalid(String),
    /// The route has no writable queue on a master broker (with `queue_id`: none with that id).
    #[error("topic {topic} has no writable queue{} on a master broker", queue_id.map(|q| format!(" {q}")).unwrap_or_default())]
    NoQueue {
        topic: String,
        queue_id: Option<i32>,
    },
    #[error("not implemented yet")]
    NotImplemented,
}

impl SendError {
    /// Whether the broker may have stored what was sent: the request may have reached it
    /// (a transport failure, an answer that could not be read).
    pub fn may_be_stored(&self) -> bool {
        matches!(
            self,
            SendError::Transport { .. } | SendError::Protocol { .. }
        )
    }

    /// Whether the whole send may be tried again later (the peer may take it then): transport
    /// failures, and a broker still busy when the busy budget ran out.
    pub fn is_retriable(&self) -> bool {
        match self {
            SendError::Transport { .. } => true,
            SendError::Refused { code, remark, .. } => is_busy(*code, remark),
            _ => false,
        }
    }
}

/// Remarks of answers that mean "busy, come back in a while" whatever their code.
const BUSY_REMARKS: [&str; 3] = [
    "[PC_SYNCHRONIZED]",
    "[PCBUSY_CLEAN_QUEUE]",
    "[TIMEOUT_CLEAN_QUEUE]",
];

/// Whether an answer says the broker is busy (flow control), not that the send is wrong.
pub fn is_busy(code: i32, remark: &str) -> bool {
    code == codes::SYSTEM_BUSY
        || code == codes::FLOW_CONTROL
        || (code == codes::SYSTEM_ERROR && BUSY_REMARKS.iter().any(|r| remark.starts_with(r)))
}

/// How 4.9's plain ACL words a refusal: a SYSTEM_ERROR whose remark is the exception
/// (`org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey=...`).
const ACL_EXCEPTION: &str = "org.apache.rocketmq.acl.common.AclException";

/// Whether an answer is the cluster's ACL refusing the request: NO_PERMISSION (5.x's ACL 2.0,
/// other brokers), or 4.9's plain ACL, which answers SYSTEM_ERROR with the exception's words.
pub fn is_acl_refusal(code: i32, remark: &str) -> bool {
    code == codes::NO_PERMISSION
        || (code == codes::SYSTEM_ERROR && remark.starts_with(ACL_EXCEPTION))
}

/// `DefaultMQProducer.retryResponseCodes`.
const RETRIED_CODES: [i32; 6] = [
    codes::TOPIC_NOT_EXIST,
    codes::SERVICE_NOT_AVAILABLE,
    codes::SYSTEM_ERROR,
    codes::NO_PERMISSION,
    codes::NO_BUYER_ID,
    codes::NOT_IN_CURRENT_UNIT,
];

/// The stored status of a send answer's code; `None` for an error code.
fn stored_status(code: i32) -> Option<SendStatus> {
    match code {
        codes::SUCCESS => Some(SendStatus::SendOk),
        codes::FLUSH_DISK_TIMEOUT => Some(SendStatus::FlushDiskTimeout),
        codes::FLUSH_SLAVE_TIMEOUT => Some(SendStatus::FlushSlaveTimeout),
        codes::SLAVE_NOT_AVAILABLE => Some(SendStatus::SlaveNotAvailable),
        _ => None,
    }
}

/// A producer: connections, routes and the send rules. Cheap to share (`&self` everywhere).
pub struct Producer {
    config: ProducerConfig,
    pool: Pool,
    routes: RouteCache,
    /// With `--broker`: what the broker says it is.
    direct: Option<BrokerIdentity>,
    /// The name server that answered last; asked first next time.
    namesrv_at: AtomicUsize,
    /// The round robin over a route's queues.
    next_queue: AtomicUsize,
}

/// What one attempt came to.
enum Attempt {
    Stored(Vec<Acked>),
    Busy(SendError),
    Retry(SendError),
    Fail(SendError),
}

impl Producer {
    /// Checks the config and reaches the first name server (or the broker).
    pub async fn connect(config: ProducerConfig) -> Result<Producer, SendError> {
        if config.group.is_empty() {
            return Err(SendError::Invalid("the producer group is empty".into()));
        }
        if config.broker.is_none() && config.namesrv.is_empty() {
            return Err(SendError::Invalid(
                "neither a name server nor a broker address is given".into(),
            ));
        }
        let pool = Pool::new(ClientOptions {
            connect_timeout: config.connect_timeout,
            codec: FrameCodec::new(config.max_frame),
            acl: config.acl.clone(),
            max_in_flight: config.max_in_flight.max(1),
        });
        let mut namesrv_at = 0;
        let direct = match &config.broker {
            Some(addr) => Some(route::broker_identity(&pool, addr, config.timeout).await?),
            None => {
                let mut reached = None;
                let mut last = None;
                for (i, addr) in config.namesrv.iter().enumerate() {
                    match pool.get(addr).await {
                        Ok(_) => {
                            reached = Some(i);
                            break;
                        }
                        Err(e) => last = Some(e),
                    }
                }
                match (reached, last) {
                    (Some(i), _) => namesrv_at = i,
                    (None, Some(e)) => return Err(e),
                    (None, None) => unreachable!("the name server list is not empty"),
                }
                None
            }
        };
        Ok(Producer {
            config,
            pool,
            routes: RouteCache::default(),
            direct,
            namesrv_at: AtomicUsize::new(namesrv_at),
            next_queue: AtomicUsize::new(random_start()),
        })
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// With `--broker`: the broker's name (from its config, else its address).
    pub fn broker_name(&self) -> Option<&str> {
        self.direct.as_ref().map(|d| d.name.as_str())
    }

    /// The version the broker at `addr` answers with ([`route::broker_version`]).
    pub async fn broker_version(&self, addr: &str) -> Result<i32, SendError> {
        route::broker_version(&self.pool, addr, self.config.timeout).await
    }

    /// The topic's route; [`SendError::TopicNotExist`] when there is none.
    pub async fn route(&self, topic: &str) -> Result<TopicRoute, SendError> {
        match self.routes.fresh(topic) {
            Some(route) => Ok(route),
            None => self.fetch_route(topic).await,
        }
    }

    /// Asks for the route again (name server, or the broker's topic table) and caches it.
    async fn fetch_route(&self, topic: &str) -> Result<TopicRoute, SendError> {
        let fetched = match (&self.direct, &self.config.broker) {
            (Some(id), Some(addr)) => route::broker_topics(&self.pool, addr, self.config.timeout)
                .await
                .and_then(|topics| match topics.get(topic) {
                    Some(cfg) => Ok(TopicRoute {
                        topic: topic.to_string(),
                        ..TopicRoute::from_topic_config(cfg, &id.name, addr)
                    }),
                    None => Err(SendError::TopicNotExist(topic.to_string())),
                }),
            _ => {
                let first = self.namesrv_at.load(Ordering::Relaxed);
                route::query_route(
                    &self.pool,
                    &self.config.namesrv,
                    first,
                    topic,
                    self.config.timeout,
                )
                .await
                .map(|(route, at)| {
                    self.namesrv_at.store(at, Ordering::Relaxed);
                    route
                })
            }
        };
        match fetched {
            Ok(route) => {
                self.routes.put(route.clone());
                Ok(route)
            }
            Err(e) => {
                if matches!(e, SendError::TopicNotExist(_)) {
                    self.routes.forget(topic);
                }
                Err(e)
            }
        }
    }

    /// Creates `topic` on every master broker of the cluster (or on the `--broker`), with
    /// `queues` read and write queues, `perm` and the order flag, as `mqadmin updateTopic`
    /// does; an orderly topic's queues are also put in the name servers' `ORDER_TOPIC_CONFIG`.
    /// Then waits (up to `create_wait`) until the name server routes the topic to every one.
    pub async fn create_topic(
        &self,
        topic: &str,
        queues: i32,
        perm: i32,
        order: bool,
    ) -> Result<(), SendError> {
        if queues <= 0 {
            return Err(SendError::Invalid(format!(
                "topic {topic}: {queues} queues cannot be created"
            )));
        }
        let timeout = self.config.timeout;
        if let Some(addr) = &self.config.broker {
            route::create_on_broker(&self.pool, addr, topic, queues, perm, order, timeout).await?;
            self.routes.forget(topic);
            self.fetch_route(topic).await?;
            return Ok(());
        }
        let namesrv = &self.config.namesrv;
        let first = self.namesrv_at.load(Ordering::Relaxed);
        let info = route::cluster_info(&self.pool, namesrv, first, timeout).await?;
        let masters = route::cluster_masters(&info, self.config.cluster.as_deref())?;
        for (_, addr) in &masters {
            route::create_on_broker(&self.pool, addr, topic, queues, perm, order, timeout).await?;
        }
        if order {
            let conf: Vec<String> = masters
                .iter()
                .map(|(name, _)| format!("{name}:{queues}"))
                .collect();
            route::put_order_conf(&self.pool, namesrv, topic, &conf.join(";"), timeout).await?;
        }
        self.routes.forget(topic);
        let deadline = Instant::now() + self.config.create_wait;
        loop {
            match self.fetch_route(topic).await {
                Ok(route) => {
                    let brokers = route.brokers();
                    if perm & PERM_WRITE == 0
                        || masters.iter().all(|(n, _)| brokers.contains(&n.as_str()))
                    {
                        return Ok(());
                    }
                }
                Err(SendError::TopicNotExist(_) | SendError::Transport { .. }) => {}
                Err(e) => return Err(e),
            }
            if Instant::now() >= deadline {
                let names: Vec<&str> = masters.iter().map(|(n, _)| n.as_str()).collect();
                return Err(SendError::Transport {
                    addr: namesrv.join(";"),
                    what: format!(
                        "topic {topic} was created on {} but is not routed to all of them after {} s",
                        names.join(", "),
                        self.config.create_wait.as_secs()
                    ),
                });
            }
            tokio::time::sleep(CREATE_POLL).await;
        }
    }

    /// Sends `messages`, all of one topic: one alone with `SEND_MESSAGE_V2`, several as one
    /// `SEND_BATCH_MESSAGE` (none delayed; the caller keeps a batch within the broker's size
    /// limit). With a queue id (all the same) it goes to that queue of the route's broker that
    /// holds it, else the producer picks a queue. Retried by the 4.9 producer's rules; the
    /// answer has one [`Acked`] per message, in order.
    pub async fn send(&self, messages: &[Outgoing]) -> Result<Vec<Acked>, SendError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let request = Prepared::new(&self.config.group, messages)?;
        let topic = request.topic;
        let started = Instant::now();
        let busy_end = started + self.config.busy_budget;
        let mut deadline = started + self.config.timeout;
        let mut attempts = 0u32;
        let mut backoff = BUSY_BACKOFF_FIRST;
        let mut last_broker: Option<String> = None;
        let mut last_error: Option<SendError> = None;
        // the first failure of an attempt that may have reached the broker: whatever the last
        // attempt says, the messages may be stored
        let mut maybe_stored: Option<SendError> = None;
        let mut refresh = false;
        loop {
            let route = match self.route_for_attempt(topic, refresh).await {
                Ok(r) => r,
                Err(e) => return Err(in_doubt(maybe_stored, e)),
            };
            let queue = match self.pick(&route, request.queue_id, last_broker.as_deref()) {
                Some(q) => q,
                // a route without the queue may be stale: ask once more
                None if !refresh => {
                    refresh = true;
                    continue;
                }
                None => {
                    let e = SendError::NoQueue {
                        topic: topic.to_string(),
                        queue_id: request.queue_id,
                    };
                    return Err(in_doubt(maybe_stored, e));
                }
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let e = last_error.unwrap_or_else(|| SendError::Transport {
                    addr: queue.broker_addr.clone(),
                    what: format!(
                        "send timed out after {} ms",
                        self.config.timeout.as_millis()
                    ),
                });
                return Err(in_doubt(maybe_stored, e));
            }
            match self.attempt(&request, &queue, left).await {
                Attempt::Stored(acks) => return Ok(acks),
                Attempt::Fail(e) => return Err(in_doubt(maybe_stored, self.final_error(topic, e))),
                Attempt::Retry(e) => {
                    tracing::debug!(topic, broker = %queue.broker_name, "send failed, retrying: {e}");
                    if maybe_stored.is_none() && e.may_be_stored() {
                        maybe_stored = Some(e.clone());
                    }
                    attempts += 1;
                    if attempts > self.config.retries {
                        return Err(in_doubt(maybe_stored, self.final_error(topic, e)));
                    }
                    last_error = Some(e);
                    refresh = true;
                }
                Attempt::Busy(e) => {
                    let now = Instant::now();
                    if now + backoff >= busy_end {
                        return Err(in_doubt(maybe_stored, e));
                    }
                    tracing::debug!(topic, broker = %queue.broker_name, "broker busy, pausing {} ms: {e}", backoff.as_millis());
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BUSY_BACKOFF_MAX);
                    deadline = Instant::now() + self.config.timeout;
                    refresh = false;
                }
            }
            last_broker = Some(queue.broker_name);
        }
    }

    /// The route for an attempt: the cached one, or after a failure a fresh one (the cached
    /// one still serves when the name server cannot be reached).
    async fn route_for_attempt(&self, topic: &str, refresh: bool) -> Result<TopicRoute, SendError> {
        if !refresh {
            return self.route(topic).await;
        }
        match self.fetch_route(topic).await {
            Ok(route) => Ok(route),
            Err(e @ SendError::TopicNotExist(_)) => Err(e),
            Err(e) => match self.routes.any(topic) {
                Some(route) => {
                    tracing::debug!(topic, "route not refreshed, the cached one serves: {e}");
                    Ok(route)
                }
                None => Err(e),
            },
        }
    }

    /// The queue of this attempt (see the module docs).
    fn pick(
        &self,
        route: &TopicRoute,
        queue_id: Option<i32>,
        avoid: Option<&str>,
    ) -> Option<PublishQueue> {
        if let Some(q) = queue_id {
            return route.pinned(q).cloned();
        }
        let n = route.queues.len();
        if n == 0 {
            return None;
        }
        let next = || &route.queues[self.next_queue.fetch_add(1, Ordering::Relaxed) % n];
        if let Some(avoid) = avoid {
            for _ in 0..n {
                let q = next();
                if q.broker_name != avoid {
                    return Some(q.clone());
                }
            }
        }
        Some(next().clone())
    }

    async fn attempt(
        &self,
        request: &Prepared<'_>,
        queue: &PublishQueue,
        timeout: Duration,
    ) -> Attempt {
        let addr = &queue.broker_addr;
        let resp = match self
            .pool
            .request(addr, request.command(queue), &request.body, timeout)
            .await
        {
            Ok(resp) => resp,
            Err(e @ (SendError::Transport { .. } | SendError::Protocol { .. })) => {
                return Attempt::Retry(e)
            }
            Err(e) => return Attempt::Fail(e),
        };
        if let Some(status) = stored_status(resp.code()) {
            return match acks(request.messages, queue, &resp, status) {
                Ok(acks) => Attempt::Stored(acks),
                Err(e) => Attempt::Fail(e),
            };
        }
        let refused = resp.refused(addr);
        if is_busy(resp.code(), resp.remark()) {
            Attempt::Busy(refused)
        } else if RETRIED_CODES.contains(&resp.code()) {
            Attempt::Retry(refused)
        } else {
            Attempt::Fail(refused)
        }
    }

    /// A broker's `TOPIC_NOT_EXIST` as the caller sees it: the topic is missing.
    fn final_error(&self, topic: &str, e: SendError) -> SendError {
        match e {
            SendError::Refused { code, .. } if code == codes::TOPIC_NOT_EXIST => {
                self.routes.forget(topic);
                SendError::TopicNotExist(topic.to_string())
            }
            e => e,
        }
    }

    /// Closes every connection. (A producer that never sent a heartbeat is unknown to the
    /// brokers, so there is nothing to unregister.)
    pub async fn shutdown(self) {
        self.pool.close_all().await;
    }
}

/// The error a send ends with: `last`, unless an earlier attempt may have stored the messages;
/// then that one (a [`SendError::Transport`] naming both), so the caller holds them in doubt
/// rather than as not stored.
fn in_doubt(earlier: Option<SendError>, last: SendError) -> SendError {
    match earlier {
        Some(first) if !last.may_be_stored() => SendError::Transport {
            addr: match &first {
                SendError::Transport { addr, .. } | SendError::Protocol { addr, .. } => {
                    addr.clone()
                }
                _ => String::new(),
            },
            what: format!(
                "{} (the messages may have been stored), then: {last}",
                match &first {
                    SendError::Transport { what, .. } | SendError::Protocol { what, .. } => {
                        what.as_str()
                    }
                    _ => "",
                }
            ),
        },
        _ => last,
    }
}

/// A start for the round robin that differs between runs (the client starts at random).
fn random_start() -> usize {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    h.finish() as usize
}

/// One [`Acked`] per message of a stored answer: a batch's `msgId` is comma-joined and its
/// `queueOffset` is the first message's.
fn acks(
    messages: &[Outgoing],
    queue: &PublishQueue,
    resp: &Response,
    status: SendStatus,
) -> Result<Vec<Acked>, SendError> {
    let h: SendMessageResponseHeader =
        resp.command
            .read_header()
            .map_err(|e| SendError::Protocol {
                addr: queue.broker_addr.clone(),
                what: format!("send answer: {e}"),
            })?;
    let ids: Vec<&str> = if messages.len() == 1 {
        vec![h.msg_id.as_str()]
    } else {
        h.msg_id.split(',').collect()
    };
    if ids.len() != messages.len() {
        tracing::warn!(
            broker = %queue.broker_name,
            "a batch of {} messages was stored with {} message ids",
            messages.len(),
            ids.len()
        );
    }
    Ok(messages
        .iter()
        .enumerate()
        .map(|(i, m)| Acked {
            key: m.key,
            broker: queue.broker_name.clone(),
            queue_id: h.queue_id,
            queue_offset: h.queue_offset + i as i64,
            offset_msg_id: ids.get(i).copied().unwrap_or_default().to_string(),
            status,
        })
        .collect())
}

/// `WAIT=true` after the message's own properties.
fn with_wait(properties: &str) -> String {
    let wait = format!("{}\u{1}true", prop::WAIT);
    if properties.is_empty() {
        wait
    } else if properties.ends_with('\u{2}') {
        format!("{properties}{wait}")
    } else {
        format!("{properties}\u{2}{wait}")
    }
}

/// Whether a properties string says `TRAN_MSG=true` (`Boolean.parseBoolean`).
fn is_transaction_prepared(properties: &str) -> bool {
    properties
        .split('\u{2}')
        .filter_map(|p| p.split_once('\u{1}'))
        .any(|(k, v)| k == prop::TRAN_MSG && v.eq_ignore_ascii_case("true"))
}

/// One send request, built once and sent to whichever queue each attempt picks.
struct Prepared<'a> {
    topic: &'a str,
    queue_id: Option<i32>,
    code: i32,
    header: SendMessageRequestHeaderV2,
    body: Cow<'a, [u8]>,
    messages: &'a [Outgoing],
}

impl<'a> Prepared<'a> {
    fn new(group: &str, messages: &'a [Outgoing]) -> Result<Self, SendError> {
        let first = &messages[0];
        let topic = first.topic.as_str();
        let invalid = |what: String| Err(SendError::Invalid(what));
        if let Some(m) = messages.iter().find(|m| m.topic != topic) {
            return invalid(format!(
                "a batch holds one topic: {topic} and {} (message {})",
                m.topic, m.key
            ));
        }
        if let Some(m) = messages.iter().find(|m| m.queue_id != first.queue_id) {
            return invalid(format!(
                "a batch goes to one queue: {:?} and {:?} (message {})",
                first.queue_id, m.queue_id, m.key
            ));
        }
        let mut header = SendMessageRequestHeaderV2 {
            a: group.to_string(),
            b: topic.to_string(),
            c: route::AUTO_CREATE_TOPIC.to_string(),
            d: DEFAULT_TOPIC_QUEUE_NUMS,
            e: first.queue_id.unwrap_or(0),
            f: first.sys_flag,
            g: first.born_timestamp,
            h: first.flag,
            i: None,
            j: Some(0),
            k: false,
            l: None,
            m: false,
            n: None,
        };
        if let [m] = messages {
            if is_transaction_prepared(&m.properties) {
                header.f |= sysflag::TRANSACTION_PREPARED;
            }
            header.i = Some(with_wait(&m.properties));
            if topic.starts_with(RETRY_TOPIC_PREFIX) {
                header.j = Some(m.reconsume_times);
                header.l = m.max_reconsume_times;
            }
            return Ok(Prepared {
                topic,
                queue_id: first.queue_id,
                code: codes::SEND_MESSAGE_V2,
                header,
                body: Cow::Borrowed(&m.body),
                messages,
            });
        }
        if topic.starts_with(RETRY_TOPIC_PREFIX) {
            return invalid(format!("a batch cannot go to a retry topic ({topic})"));
        }
        if let Some(m) = messages.iter().find(|m| m.delayed) {
            return invalid(format!("a batch cannot hold a delayed message ({})", m.key));
        }
        if let Some(m) = messages.iter().find(|m| m.sys_flag != first.sys_flag) {
            return invalid(format!(
                "a batch holds messages of one sysflag: {} and {} (message {})",
                first.sys_flag, m.sys_flag, m.key
            ));
        }
        let items: Vec<BatchItem<'_>> = messages
            .iter()
            .map(|m| BatchItem {
                flag: m.flag,
                body: &m.body,
                properties: m.properties.as_bytes(),
            })
            .collect();
        let body = batch::encode(&items).map_err(|e| SendError::Invalid(e.to_string()))?;
        header.h = 0;
        header.i = Some(with_wait(""));
        header.m = true;
        Ok(Prepared {
            topic,
            queue_id: first.queue_id,
            code: codes::SEND_BATCH_MESSAGE,
            header,
            body: Cow::Owned(body),
            messages,
        })
    }

    /// The request for `queue`: header `e` and `n` filled in.
    fn command(&self, queue: &PublishQueue) -> RemotingCommand {
        let mut header = self.header.clone();
        header.e = queue.queue_id;
        header.n = Some(queue.broker_name.clone());
        let mut cmd = RemotingCommand::request(self.code, 0);
        cmd.write_header(&header);
        cmd
    }
}
