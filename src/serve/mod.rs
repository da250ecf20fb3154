//! `serve`: a store answers RocketMQ clients and admin tools over the remoting protocol, as a
//! NameServer and a Broker on one port (the routes it hands out point at itself).
//!
//! The store is only read; what clients change (consumer offsets, send-backs to `%RETRY%` and
//! `%DLQ%`, delayed deliveries as they fall due, orderly locks) goes to the engine's overlay.
//! Every request is answered under one lock over the engine and the client registry; a pull
//! that finds nothing and may be suspended is parked and answered by the ticker when its queue
//! grows (a retry or delayed message falls due) or its hold time ends.
//!
//! Modules: [`conn`] (sockets), [`clients`] (heartbeats), [`acl`] (plain ACL), and one module
//! per role of the requests: [`namesrv`], [`consumer`], [`pull`], [`admin`].

pub mod acl;
pub mod admin;
pub mod clients;
pub mod conn;
pub mod consumer;
pub mod namesrv;
pub mod pull;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

use crate::engine::broker::{Engine, EngineError};
use crate::remoting::body::BodyError;
use crate::remoting::codes;
use crate::remoting::header::FieldError;
use crate::remoting::{FrameCodec, RemotingCommand, DEFAULT_MAX_FRAME};

use self::clients::Clients;
use self::conn::{ConnCtx, ConnTable, Limits};

/// `brokerClusterName`'s default.
pub const DEFAULT_CLUSTER: &str = "DefaultCluster";

/// How often parked pulls, due deliveries and expired channels are looked at.
const TICK: Duration = Duration::from_millis(20);

/// How often changed offsets and configs are written to the overlay.
const PERSIST_EVERY: Duration = Duration::from_secs(5);

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// The `host:port` routes give clients (default: the bound address).
    pub advertise: Option<String>,
    pub cluster: String,
    pub acl: Option<acl::PlainAcl>,
    /// Connections open at once; a new one past this closes the least useful one.
    pub max_connections: usize,
    /// A connection with nothing to read for this long is closed.
    pub idle: Duration,
    pub max_frame: usize,
    /// Deadlines of frames and the budget of large frames.
    pub limits: Limits,
}

impl ServeOptions {
    pub fn new(listen: SocketAddr) -> Self {
        ServeOptions {
            listen,
            advertise: None,
            cluster: DEFAULT_CLUSTER.into(),
            acl: None,
            max_connections: 1024,
            idle: Duration::from_secs(120),
            max_frame: DEFAULT_MAX_FRAME,
            limits: Limits::default(),
        }
    }
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("closing the engine: {0}")]
    Close(#[from] EngineError),
}

/// Everything requests read and change, behind the server's lock.
pub struct State {
    pub engine: Engine,
    pub clients: Clients,
    pub parked: Vec<pull::Parked>,
    /// The address routes point at.
    pub broker_addr: String,
    pub cluster: String,
    pub started_ms: i64,
    next_opaque: i32,
}

impl State {
    pub fn broker_name(&self) -> String {
        self.engine.options().broker_name.clone()
    }

    /// Send a one-way request (`NOTIFY_CONSUMER_IDS_CHANGED`, `RESET_CONSUMER_CLIENT_OFFSET`) to
    /// one channel; dropped when its outbox is full.
    pub fn send_oneway(&mut self, outbox: &conn::Outbox, mut cmd: RemotingCommand, body: &[u8]) {
        self.next_opaque = self.next_opaque.wrapping_add(1);
        cmd.opaque = self.next_opaque;
        cmd.mark_oneway();
        let mut out = Vec::new();
        if cmd.encode(body, &mut out).is_ok() {
            let _ = outbox.try_send(out);
        }
    }

    /// `NOTIFY_CONSUMER_IDS_CHANGED` to every channel of `group`.
    pub fn notify_ids_changed(&mut self, group: &str) {
        for ch in self.clients.channels(group) {
            let mut cmd = RemotingCommand::request(codes::NOTIFY_CONSUMER_IDS_CHANGED, 0);
            cmd.ext_fields.insert("consumerGroup", group);
            self.send_oneway(&ch.channel.outbox, cmd, &[]);
        }
    }
}

/// What the connections share.
pub struct Shared {
    state: Mutex<State>,
    acl: Option<acl::PlainAcl>,
    pub codec: FrameCodec,
    pub idle: Duration,
    pub limits: Limits,
    /// The open connections.
    pub conns: ConnTable,
    /// Bytes of large frames being received, over all connections.
    pub buffered: AtomicUsize,
}

/// A request's answer when it is not the plain success: code and remark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: i32,
    pub remark: String,
}

impl Refusal {
    pub fn new(code: i32, remark: impl Into<String>) -> Self {
        Refusal {
            code,
            remark: remark.into(),
        }
    }
}

impl From<FieldError> for Refusal {
    fn from(e: FieldError) -> Self {
        Refusal::new(codes::SYSTEM_ERROR, e.to_string())
    }
}

impl From<BodyError> for Refusal {
    fn from(e: BodyError) -> Self {
        Refusal::new(codes::SYSTEM_ERROR, e.to_string())
    }
}

impl From<EngineError> for Refusal {
    fn from(e: EngineError) -> Self {
        Refusal::new(codes::SYSTEM_ERROR, e.to_string())
    }
}

/// What a handler did with a request.
pub enum Outcome {
    /// Answer with this command (its opaque, flag and serialize type set by the dispatcher) and
    /// body.
    Reply(RemotingCommand, Vec<u8>),
    /// A whole response frame the handler encoded itself (a pull's records go straight in).
    Encoded(Vec<u8>),
    /// The pull is parked; the ticker answers it.
    Parked,
}

pub type Handled = Result<Outcome, Refusal>;

/// A success answer to `req` with no header fields and `body`.
pub fn success(req: &RemotingCommand, body: Vec<u8>) -> Handled {
    Ok(Outcome::Reply(
        RemotingCommand::response_to(req, codes::SUCCESS, None),
        body,
    ))
}

/// Encode `cmd` and `body` into one frame.
pub fn frame(cmd: &RemotingCommand, body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(256 + body.len());
    match cmd.encode(body, &mut out) {
        Ok(()) => Some(out),
        Err(e) => {
            tracing::warn!("cannot encode a response: {e}");
            None
        }
    }
}

impl Shared {
    pub fn new(state: State, opts: &ServeOptions) -> Self {
        Shared {
            state: Mutex::new(state),
            acl: opts.acl.clone(),
            codec: FrameCodec::new(opts.max_frame),
            idle: opts.idle,
            limits: opts.limits,
            conns: ConnTable::new(opts.max_connections),
            buffered: AtomicUsize::new(0),
        }
    }

    /// The lock; a handler that panicked leaves the state as it was, which stays usable.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Answer one request (or response) from `ctx`: the encoded frame to send back, if any.
    pub fn dispatch(&self, ctx: &ConnCtx, req: &RemotingCommand, body: &[u8]) -> Option<Vec<u8>> {
        if req.is_response() {
            // answers to the server's own one-way requests do not exist; ignore strays
            return None;
        }
        let handled = match &self.acl {
            Some(acl) => acl.check(ctx.peer.ip(), req, body),
            None => Ok(()),
        }
        .and_then(|()| {
            let mut st = self.lock();
            route(&mut st, ctx, req, body)
        });
        let (mut cmd, body) = match handled {
            Ok(Outcome::Parked) => return None,
            Ok(Outcome::Encoded(frame)) => return (!req.is_oneway()).then_some(frame),
            Ok(Outcome::Reply(cmd, body)) => (cmd, body),
            Err(r) => (
                RemotingCommand::response_to(req, r.code, Some(r.remark)),
                Vec::new(),
            ),
        };
        tracing::debug!(
            conn = ctx.id,
            code = req.code,
            opaque = req.opaque,
            answer = cmd.code,
            "request"
        );
        if req.is_oneway() {
            return None;
        }
        cmd.opaque = req.opaque;
        cmd.serialize_type = req.serialize_type;
        cmd.mark_response();
        frame(&cmd, &body)
    }

    /// A connection closed: its channels and parked pulls go.
    pub fn connection_closed(&self, conn_id: u64) {
        let mut st = self.lock();
        st.parked.retain(|p| p.conn_id != conn_id);
        for g in st.clients.drop_connection(conn_id) {
            st.notify_ids_changed(&g);
        }
    }

    /// One tick: due deliveries, parked pulls, expired channels.
    fn tick(&self, persist: bool) {
        let mut st = self.lock();
        match st.engine.deliver_due() {
            Ok(d) if !d.is_empty() => tracing::debug!("{} delayed messages delivered", d.len()),
            Ok(_) => {}
            Err(e) => tracing::warn!("delivering delayed messages: {e}"),
        }
        pull::wake_parked(&mut st, Instant::now());
        for g in st.clients.expire(Instant::now()) {
            st.notify_ids_changed(&g);
        }
        if persist {
            if let Err(e) = st.engine.persist_configs() {
                tracing::warn!("writing the overlay's config files: {e}");
            }
        }
    }
}

/// The handler of each request code.
fn route(st: &mut State, ctx: &ConnCtx, req: &RemotingCommand, body: &[u8]) -> Handled {
    use codes::*;
    match req.code {
        GET_ROUTEINFO_BY_TOPIC => namesrv::route_info(st, req),
        GET_BROKER_CLUSTER_INFO => namesrv::cluster_info(st, req),
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER => namesrv::all_topics(st, req),
        GET_TOPICS_BY_CLUSTER => namesrv::topics_by_cluster(st, req),
        GET_SYSTEM_TOPIC_LIST_FROM_NS => namesrv::system_topics_ns(st, req),
        GET_KV_CONFIG => namesrv::kv_config(req),
        HEART_BEAT => consumer::heartbeat(st, ctx, req, body),
        UNREGISTER_CLIENT => consumer::unregister(st, req),
        GET_CONSUMER_LIST_BY_GROUP => consumer::consumer_list(st, req),
        CHECK_CLIENT_CONFIG => consumer::check_client_config(st, req, body),
        QUERY_CONSUMER_OFFSET => consumer::query_offset(st, req),
        UPDATE_CONSUMER_OFFSET => consumer::update_offset(st, req),
        GET_MAX_OFFSET
        | GET_MIN_OFFSET
        | SEARCH_OFFSET_BY_TIMESTAMP
        | GET_EARLIEST_MSG_STORETIME => consumer::offset_lookup(st, req),
        CONSUMER_SEND_MSG_BACK => consumer::send_back(st, req),
        LOCK_BATCH_MQ => consumer::lock_batch(st, req, body),
        UNLOCK_BATCH_MQ => consumer::unlock_batch(st, req, body),
        // 5.x's lite pull consumer pulls with its own code, answered as a pull
        PULL_MESSAGE | LITE_PULL_MESSAGE => pull::pull(st, ctx, req),
        QUERY_MESSAGE => admin::query_message(st, req),
        VIEW_MESSAGE_BY_ID => admin::view_message(st, req),
        GET_CONSUME_STATS => admin::consume_stats(st, req),
        GET_TOPIC_STATS_INFO => admin::topic_stats(st, req),
        GET_TOPIC_CONFIG => admin::topic_config(st, req),
        GET_BROKER_RUNTIME_INFO => admin::runtime_info(st, req),
        GET_ALL_TOPIC_CONFIG => admin::all_topic_config(st, req),
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG => admin::all_group_config(st, req),
        QUERY_TOPIC_CONSUME_BY_WHO => admin::consumed_by(st, req),
        GET_CONSUMER_CONNECTION_LIST => admin::connections(st, req),
        INVOKE_BROKER_TO_RESET_OFFSET => admin::reset_offset(st, req),
        GET_SYSTEM_TOPIC_LIST_FROM_BROKER => admin::system_topics(st, req),
        GET_BROKER_CONFIG => admin::broker_config(st, req),
        SEND_MESSAGE
        | SEND_MESSAGE_V2
        | SEND_BATCH_MESSAGE
        | SEND_REPLY_MESSAGE
        | SEND_REPLY_MESSAGE_V2
        | END_TRANSACTION => Err(Refusal::new(
            NO_PERMISSION,
            format!(
                "the broker[{}] sending message is forbidden: this store is served read-only",
                st.broker_addr
            ),
        )),
        code => Err(Refusal::new(
            REQUEST_CODE_NOT_SUPPORTED,
            format!(" request type {code} not supported"),
        )),
    }
}

/// Serve `engine` until Ctrl-C or SIGTERM, then close it (the overlay is persisted).
/// `on_listening` gets the bound address and the advertised one once the socket listens.
pub fn run(
    engine: Engine,
    opts: ServeOptions,
    on_listening: impl FnOnce(SocketAddr, &str),
) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let shared = rt.block_on(serve(engine, opts, on_listening))?;
    rt.shutdown_timeout(Duration::from_secs(2));
    match Arc::try_unwrap(shared) {
        Ok(s) => {
            let state = s.state.into_inner().unwrap_or_else(|p| p.into_inner());
            state.engine.close()?;
        }
        Err(s) => {
            // a task still holds the state: write what can be written
            tracing::warn!("a task outlived the runtime; persisting configs only");
            s.lock().engine.persist_configs()?;
        }
    }
    tracing::info!("overlay persisted; stopped");
    Ok(())
}

async fn serve(
    engine: Engine,
    opts: ServeOptions,
    on_listening: impl FnOnce(SocketAddr, &str),
) -> Result<Arc<Shared>, ServeError> {
    let listener = TcpListener::bind(opts.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: opts.listen,
            source,
        })?;
    let local = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: opts.listen,
        source,
    })?;
    let advertise = opts.advertise.clone().unwrap_or_else(|| local.to_string());
    let started_ms = engine.now();
    let state = State {
        engine,
        clients: Clients::default(),
        parked: Vec::new(),
        broker_addr: advertise.clone(),
        cluster: opts.cluster.clone(),
        started_ms,
        next_opaque: 0,
    };
    let shared = Arc::new(Shared::new(state, &opts));
    on_listening(local, &advertise);
    tracing::info!(%local, %advertise, "listening");

    let ticker = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(TICK);
            let mut last_persist = Instant::now();
            loop {
                every.tick().await;
                let persist = last_persist.elapsed() >= PERSIST_EVERY;
                if persist {
                    last_persist = Instant::now();
                }
                let s = shared.clone();
                // the engine's work is blocking file I/O
                let _ = tokio::task::spawn_blocking(move || s.tick(persist)).await;
            }
        })
    };
    let next_id = AtomicU64::new(1);
    let stop = stop_signal();
    tokio::pin!(stop);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            // finished connections leave the set (it would keep them until joined)
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!("accept: {e}");
                        continue;
                    }
                };
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let (close, evicted) = shared.conns.admit(id, Instant::now());
                if let Some(old) = evicted {
                    tracing::info!(%peer, conn = old, "{} connections open: closing the least used one", opts.max_connections);
                }
                let s = shared.clone();
                conns.spawn(conn::serve(stream, peer, s, id, close));
            }
        }
    }
    tracing::info!("stopping");
    ticker.abort();
    let _ = ticker.await;
    conns.abort_all();
    while conns.join_next().await.is_some() {}
    Ok(shared)
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
