//! The wire side against small fake peers: a TCP listener speaking the remoting codec that
//! answers each request as a test scripts it (name server and broker on one port), records what
//! it got, and can stay silent, close the connection or send bytes of its own.
//!
//! [`client`]: one connection (many in flight, out of order answers, close, timeout, frame
//! limit); [`producer`]: the send rules (headers, batches, busy, retries, queues, ACL);
//! [`route`]: publishable queues, `--broker` routes and topic creation.

mod client;
mod producer;
mod route;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::outgoing::Outgoing;
use super::producer::ProducerConfig;
use crate::remoting::body::{BrokerData, JsonForm, QueueData, TopicRouteData};
use crate::remoting::{self, codes, FrameCodec, RemotingCommand, FLAG_RESPONSE};

/// A request the peer received.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub cmd: RemotingCommand,
    pub body: Vec<u8>,
    /// How many requests with this code the peer got before this one.
    pub nth: usize,
    /// The peer's own address (what a route names).
    pub addr: String,
}

impl Request {
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.cmd.ext_fields.get(key)
    }
}

/// What the peer does with a request.
pub(super) enum Reply {
    /// Answer (opaque and response flag filled in).
    Answer(RemotingCommand, Vec<u8>),
    /// Answer after a pause, without holding up the connection's other requests.
    Later(Duration, RemotingCommand, Vec<u8>),
    /// Close the connection.
    Close,
    /// Never answer.
    Silent,
    /// Write these bytes.
    Raw(Vec<u8>),
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// A fake name server and broker on one loopback port.
pub(super) struct Peer {
    pub addr: String,
    log: Arc<Mutex<Vec<Request>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Peer {
    pub async fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Peer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let log: Arc<Mutex<Vec<Request>>> = Arc::default();
        let handler: Handler = Arc::new(handler);
        let counts: Arc<Mutex<HashMap<i32, usize>>> = Arc::default();
        let task = {
            let (log, addr) = (log.clone(), addr.clone());
            tokio::spawn(async move {
                // the connections end with the peer
                let mut conns = JoinSet::new();
                while let Ok((stream, _)) = listener.accept().await {
                    conns.spawn(serve(
                        stream,
                        handler.clone(),
                        log.clone(),
                        counts.clone(),
                        addr.clone(),
                    ));
                }
            })
        };
        Peer { addr, log, task }
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().clone()
    }

    /// The requests with `code`.
    pub fn with_code(&self, code: i32) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.cmd.code == code)
            .collect()
    }
}

async fn serve(
    stream: TcpStream,
    handler: Handler,
    log: Arc<Mutex<Vec<Request>>>,
    counts: Arc<Mutex<HashMap<i32, usize>>>,
    addr: String,
) {
    let (mut rd, wr) = stream.into_split();
    let wr = Arc::new(tokio::sync::Mutex::new(wr));
    let mut later = JoinSet::new();
    let mut buf = Vec::new();
    loop {
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        while let Ok(Some((packet, used))) = remoting::decode(&FrameCodec::default(), &buf) {
            let nth = {
                let mut counts = counts.lock().unwrap();
                let n = counts.entry(packet.command.code).or_default();
                *n += 1;
                *n - 1
            };
            let req = Request {
                cmd: packet.command,
                body: packet.body.to_vec(),
                nth,
                addr: addr.clone(),
            };
            buf.drain(..used);
            log.lock().unwrap().push(req.clone());
            let frame = |mut cmd: RemotingCommand, body: Vec<u8>| {
                cmd.opaque = req.cmd.opaque;
                cmd.flag |= FLAG_RESPONSE;
                let mut out = Vec::new();
                cmd.encode(&body, &mut out).unwrap();
                out
            };
            match handler(&req) {
                Reply::Answer(cmd, body) => {
                    let out = frame(cmd, body);
                    if wr.lock().await.write_all(&out).await.is_err() {
                        return;
                    }
                }
                Reply::Later(pause, cmd, body) => {
                    let out = frame(cmd, body);
                    let wr = wr.clone();
                    later.spawn(async move {
                        tokio::time::sleep(pause).await;
                        let _ = wr.lock().await.write_all(&out).await;
                    });
                }
                Reply::Raw(bytes) => {
                    if wr.lock().await.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                Reply::Close => return,
                Reply::Silent => {}
            }
        }
    }
}

/// An answer with `code` and `remark`.
pub(super) fn answer(req: &Request, code: i32, remark: &str) -> Reply {
    let remark = (!remark.is_empty()).then(|| remark.to_string());
    Reply::Answer(
        RemotingCommand::response_to(&req.cmd, code, remark),
        Vec::new(),
    )
}

/// SUCCESS with a body.
pub(super) fn success(req: &Request, body: Vec<u8>) -> Reply {
    Reply::Answer(
        RemotingCommand::response_to(&req.cmd, codes::SUCCESS, None),
        body,
    )
}

/// A stored send's answer, as the broker writes it.
pub(super) fn stored(req: &Request, code: i32, msg_id: &str, queue_id: i32, offset: i64) -> Reply {
    let mut cmd = RemotingCommand::response_to(&req.cmd, code, None);
    cmd.ext_fields.insert("msgId", msg_id);
    cmd.ext_fields.insert("queueId", queue_id.to_string());
    cmd.ext_fields.insert("queueOffset", offset.to_string());
    cmd.ext_fields.insert("MSG_REGION", "DefaultRegion");
    cmd.ext_fields.insert("TRACE_ON", "true");
    Reply::Answer(cmd, Vec::new())
}

/// SEND_OK for the queue the request names, at offset `offset`.
pub(super) fn send_ok(req: &Request, offset: i64) -> Reply {
    let queue_id = req.ext("e").and_then(|e| e.parse().ok()).unwrap_or(0);
    stored(
        req,
        codes::SUCCESS,
        "0A000001000027DA0000000000000000",
        queue_id,
        offset,
    )
}

/// A route body: `(broker name, master address, write queues, perm)` per broker.
pub(super) fn route_body(brokers: &[(&str, &str, i32, i32)]) -> Vec<u8> {
    let data = TopicRouteData {
        order_topic_conf: None,
        queue_datas: brokers
            .iter()
            .map(|(name, _, queues, perm)| QueueData {
                broker_name: name.to_string(),
                read_queue_nums: *queues,
                write_queue_nums: *queues,
                perm: *perm,
                topic_syn_flag: 0,
            })
            .collect(),
        broker_datas: brokers
            .iter()
            .map(|(name, addr, _, _)| BrokerData {
                cluster: "DefaultCluster".into(),
                broker_name: name.to_string(),
                broker_addrs: [(0, addr.to_string())].into_iter().collect(),
            })
            .collect(),
        filter_server_table: Default::default(),
    };
    data.to_json(JsonForm::Standard).into_bytes()
}

/// A message of `topic` with key `key`.
pub(super) fn message(key: u64, topic: &str, body: &[u8]) -> Outgoing {
    Outgoing {
        key,
        topic: topic.to_string(),
        queue_id: None,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000 + key as i64,
        body: body.to_vec(),
        properties: format!("UNIQ_KEY\u{1}ID{key}\u{2}TAGS\u{1}t"),
        reconsume_times: 0,
        max_reconsume_times: None,
        delayed: false,
    }
}

/// A config for the name server at `namesrv`, with short budgets.
pub(super) fn config(namesrv: &str) -> ProducerConfig {
    let mut c = ProducerConfig::new(vec![namesrv.to_string()], None);
    c.timeout = Duration::from_secs(2);
    c.busy_budget = Duration::from_secs(5);
    c.create_wait = Duration::from_secs(2);
    c
}
