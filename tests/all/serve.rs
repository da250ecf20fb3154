//! `rmqstore serve` driven over TCP by a small client written against the protocol: routes,
//! heartbeats and rebalancing notices, offsets, pulls (filters, long polling), send-back to
//! retry and DLQ, orderly locks, admin requests, refusals, bad frames, ACL, and a restart that
//! continues from the overlay. Answers are checked against the engine's own (the library
//! opened on the same store) and the Java store's answers on the oracle store.

use crate::common;

use crate::common::Server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmqstore::engine::broker::clock::FakeClock;
use rmqstore::engine::broker::pull::{MessageFilter, PullRequest};
use rmqstore::engine::broker::{Engine, EngineOptions};
use rmqstore::engine::filter::TagFilter;
use rmqstore::engine::store::reader::Reader;
use rmqstore::engine::Store;
use rmqstore::format::commitlog::{parse_record, Record};
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::remoting::body::{
    ClusterInfo, ConsumerConnection, ConsumerData, ConsumerListByGroup, GroupList, HeartbeatData,
    KvTable, LockBatchRequestBody, LockBatchResponseBody, MessageQueue, SubscriptionData,
    TopicList, TopicRouteData,
};
use rmqstore::remoting::codes;
use rmqstore::remoting::header::*;
use rmqstore::remoting::{decode, FrameCodec, RemotingCommand};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/store-4.9");

/// `serve STORE --listen 127.0.0.1:0 --now <last store time> EXTRA...`: the clock at the
/// store's last write, so its pending delayed messages stay pending and the queues stay as the
/// engine (and the Java store) read them.
fn start(store: &Path, extra: &[&str]) -> Server {
    let now = store_end(store).to_string();
    let mut args = vec!["--now", now.as_str()];
    args.extend_from_slice(extra);
    Server::start(store, &args)
}

impl Server {
    fn client(&self) -> Client {
        Client::connect(&self.addr)
    }
}

/// A blocking protocol client: requests by opaque; requests the server sends are kept.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    opaque: i32,
    codec: FrameCodec,
    /// Requests from the server (`NOTIFY_CONSUMER_IDS_CHANGED`, ...).
    pushed: Vec<RemotingCommand>,
    /// Responses that arrived for other opaques.
    early: Vec<(RemotingCommand, Vec<u8>)>,
}

impl Client {
    fn connect(addr: &str) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            stream,
            buf: Vec::new(),
            opaque: 0,
            codec: FrameCodec::default(),
            pushed: Vec::new(),
            early: Vec::new(),
        }
    }

    fn send(&mut self, mut cmd: RemotingCommand, body: &[u8]) -> i32 {
        self.opaque += 1;
        cmd.opaque = self.opaque;
        let mut out = Vec::new();
        cmd.encode(body, &mut out).unwrap();
        self.stream.write_all(&out).unwrap();
        self.opaque
    }

    /// The next command off the wire, or `None` when the server closed the connection.
    fn next(&mut self) -> Option<(RemotingCommand, Vec<u8>)> {
        loop {
            if let Some((p, used)) = decode(&self.codec, &self.buf).unwrap() {
                let got = (p.command.clone(), p.body.to_vec());
                self.buf.drain(..used);
                return Some(got);
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn wait(&mut self, opaque: i32) -> (RemotingCommand, Vec<u8>) {
        if let Some(i) = self.early.iter().position(|(c, _)| c.opaque == opaque) {
            return self.early.remove(i);
        }
        loop {
            let (cmd, body) = self.next().expect("connection closed before the response");
            if !cmd.is_response() {
                self.pushed.push(cmd);
            } else if cmd.opaque == opaque {
                return (cmd, body);
            } else {
                self.early.push((cmd, body));
            }
        }
    }

    /// Whether the server pushes a request that `matches`: notifications travel apart from
    /// responses, so one may arrive after the response to a later call. Bounded by the read
    /// timeout.
    fn saw_push(&mut self, matches: impl Fn(&RemotingCommand) -> bool) -> bool {
        loop {
            if self.pushed.iter().any(&matches) {
                return true;
            }
            match self.next() {
                None => return false,
                Some((cmd, body)) if cmd.is_response() => self.early.push((cmd, body)),
                Some((cmd, _)) => self.pushed.push(cmd),
            }
        }
    }

    fn call(&mut self, cmd: RemotingCommand, body: &[u8]) -> (RemotingCommand, Vec<u8>) {
        let o = self.send(cmd, body);
        self.wait(o)
    }

    fn call_header<H: CustomHeader>(&mut self, code: i32, h: &H) -> (RemotingCommand, Vec<u8>) {
        let mut cmd = RemotingCommand::request(code, 0);
        cmd.write_header(h);
        self.call(cmd, &[])
    }

    fn heartbeat(&mut self, client_id: &str, data: ConsumerData) {
        let hb = HeartbeatData {
            client_id: client_id.into(),
            producer_data_set: vec![],
            consumer_data_set: vec![data],
        };
        let (r, _) = self.call(
            RemotingCommand::request(codes::HEART_BEAT, 0),
            hb.to_json().as_bytes(),
        );
        assert_eq!(r.code, codes::SUCCESS, "{:?}", r.remark);
        assert_eq!(r.version, 409);
    }
}

fn route(c: &mut Client, topic: &str) -> (RemotingCommand, Vec<u8>) {
    c.call_header(
        codes::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    )
}

fn consumer(group: &str, topics: &[(&str, &str)], model: &str) -> ConsumerData {
    ConsumerData {
        group_name: group.into(),
        consume_type: "CONSUME_PASSIVELY".into(),
        message_model: model.into(),
        consume_from_where: "CONSUME_FROM_FIRST_OFFSET".into(),
        subscription_data_set: topics
            .iter()
            .map(|(t, e)| SubscriptionData {
                topic: t.to_string(),
                sub_string: e.to_string(),
                sub_version: 1,
                expression_type: "TAG".into(),
                ..Default::default()
            })
            .collect(),
        unit_mode: false,
    }
}

fn pull_header(group: &str, topic: &str, q: i32, offset: i64) -> PullMessageRequestHeader {
    PullMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: q,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: PULL_FLAG_SUBSCRIPTION,
        commit_offset: 0,
        suspend_timeout_millis: 15000,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        bname: None,
    }
}

/// The commitlog offsets of the records in a pull, query or view body.
fn record_offsets(body: &[u8]) -> Vec<i64> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        match parse_record(body, pos, 0, true).unwrap() {
            Record::Message(m) => {
                out.push(m.physical_offset);
                pos += m.total_size as usize;
            }
            other => panic!("not a message at {pos}: {other:?}"),
        }
    }
    out
}

fn ext_i64(cmd: &RemotingCommand, key: &str) -> i64 {
    cmd.ext_fields
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {:?}", cmd.ext_fields))
        .parse()
        .unwrap()
}

fn engine(store: &Path, extra: GeometryInputs) -> Engine {
    let store = Store::open(store, &extra).unwrap();
    let opts = EngineOptions::for_store(&store);
    Engine::open_read_only(store, None, Arc::new(FakeClock::new(0)), opts).unwrap()
}

/// The newest store time of the messages in `store`'s queues.
fn store_end(store: &Path) -> i64 {
    let e = engine(store, GeometryInputs::default());
    e.queue_keys()
        .iter()
        .filter_map(|(t, q)| {
            let (_, max) = e.queue_bounds(t, *q);
            let u = e.unit_at(t, *q, max - 1)?;
            e.message_at(u.offset).map(|m| m.store_timestamp)
        })
        .max()
        .unwrap_or(0)
}

fn overlay() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("overlay");
    (t, p)
}

#[test]
fn routes_point_at_the_server_and_unknown_topics_are_refused() {
    let (_t, ov) = overlay();
    let s = start(Path::new(FIXTURE), &["--overlay", ov.to_str().unwrap()]);
    let mut c = s.client();
    let (r, body) = route(&mut c, "OrderTopic");
    assert_eq!(r.code, codes::SUCCESS);
    let data = TopicRouteData::from_json(&body).unwrap();
    assert_eq!(data.broker_datas[0].broker_addrs[&0], s.addr);
    assert_eq!(data.queue_datas[0].read_queue_nums, 4);
    assert!(String::from_utf8_lossy(&body).contains("\"brokerAddrs\":{\"0\":"));
    let (r, _) = route(&mut c, "NoSuchTopic");
    assert_eq!(r.code, codes::TOPIC_NOT_EXIST);
    // the retry topic of a group is routable
    let (r, _) = route(&mut c, "%RETRY%OrderGroup");
    assert_eq!(r.code, codes::SUCCESS);
    // so is the retry topic of a group that only has offsets
    let (r, _) = route(&mut c, "%RETRY%AuditGroup");
    assert_eq!(r.code, codes::SUCCESS);
    let (r, _) = route(&mut c, "%RETRY%NoSuchGroup");
    assert_eq!(r.code, codes::TOPIC_NOT_EXIST);
    let (r, body) = c.call(
        RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0),
        &[],
    );
    assert_eq!(r.code, codes::SUCCESS);
    let info = ClusterInfo::from_json(&body).unwrap();
    assert_eq!(info.cluster_addr_table["DefaultCluster"], ["broker-a"]);
    let (_, body) = c.call(
        RemotingCommand::request(codes::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 0),
        &[],
    );
    let topics = TopicList::from_json(&body).unwrap().topic_list;
    assert!(
        topics.contains(&"%RETRY%OrderGroup".to_string()),
        "{topics:?}"
    );
    assert!(topics.contains(&"PaymentTopic".to_string()));
    let (_, body) = c.call_header(
        codes::GET_TOPICS_BY_CLUSTER,
        &GetTopicsByClusterRequestHeader {
            cluster: "DefaultCluster".into(),
        },
    );
    assert_eq!(TopicList::from_json(&body).unwrap().topic_list, topics);
    let (_, body) = c.call(
        RemotingCommand::request(codes::GET_SYSTEM_TOPIC_LIST_FROM_NS, 0),
        &[],
    );
    let system = TopicList::from_json(&body).unwrap();
    assert_eq!(system.topic_list, ["DefaultCluster", "broker-a"]);
    assert_eq!(system.broker_addr.as_deref(), Some(s.addr.as_str()));
    let (_, body) = c.call(
        RemotingCommand::request(codes::GET_SYSTEM_TOPIC_LIST_FROM_BROKER, 0),
        &[],
    );
    assert!(TopicList::from_json(&body)
        .unwrap()
        .topic_list
        .contains(&"SCHEDULE_TOPIC_XXXX".to_string()));
    let (r, _) = c.call_header(
        codes::GET_KV_CONFIG,
        &GetKvConfigRequestHeader {
            namespace: "ORDER_TOPIC_CONFIG".into(),
            key: "OrderTopic".into(),
        },
    );
    assert_eq!(r.code, codes::QUERY_NOT_FOUND);
    // a SQL92 consumer's config check: a good expression passes, a broken one is refused
    let check = |c: &mut Client, expr: &str| {
        let body = rmqstore::remoting::body::CheckClientConfigBody {
            client_id: "c1".into(),
            group: "SqlGroup".into(),
            subscription_data: Some(SubscriptionData {
                topic: "OrderTopic".into(),
                sub_string: expr.into(),
                expression_type: "SQL92".into(),
                ..Default::default()
            }),
        };
        c.call(
            RemotingCommand::request(codes::CHECK_CLIENT_CONFIG, 0),
            body.to_json().as_bytes(),
        )
        .0
        .code
    };
    assert_eq!(check(&mut c, "a > 1 AND TAGS IS NOT NULL"), codes::SUCCESS);
    assert_eq!(check(&mut c, "a >"), codes::SUBSCRIPTION_PARSE_FAILED);
}

#[test]
fn pulls_answer_as_the_engine_with_statuses_and_filters() {
    let (_t, ov) = overlay();
    let s = start(Path::new(FIXTURE), &["--overlay", ov.to_str().unwrap()]);
    let e = engine(Path::new(FIXTURE), GeometryInputs::default());
    let mut c = s.client();
    let mut checked = 0;
    for topic in ["OrderTopic", "PaymentTopic", "AuditTopic"] {
        for q in 0..4 {
            let (_, max) = e.queue_bounds(topic, q);
            let mut offset = 0;
            while offset < max {
                let (r, body) =
                    c.call_header(codes::PULL_MESSAGE, &pull_header("G", topic, q, offset));
                assert_eq!(
                    r.code,
                    codes::SUCCESS,
                    "{topic}:{q}@{offset} {:?}",
                    r.remark
                );
                let want = e.pull(&PullRequest {
                    topic,
                    queue_id: q,
                    offset,
                    max_msgs: 32,
                    filter: None,
                });
                let raw: Vec<u8> = want.messages.iter().flat_map(|m| m.raw.clone()).collect();
                assert_eq!(body, raw, "{topic}:{q}@{offset}");
                assert_eq!(ext_i64(&r, "nextBeginOffset"), want.next_begin_offset);
                assert_eq!(ext_i64(&r, "maxOffset"), max);
                assert_eq!(ext_i64(&r, "minOffset"), 0);
                assert_eq!(ext_i64(&r, "suggestWhichBrokerId"), 0);
                checked += record_offsets(&body).len();
                offset = want.next_begin_offset;
            }
            // at the end: not found (no suspend flag); beyond: offset moved
            let (r, body) = c.call_header(codes::PULL_MESSAGE, &pull_header("G", topic, q, max));
            assert_eq!(
                (r.code, r.remark.as_deref()),
                (codes::PULL_NOT_FOUND, Some("OFFSET_OVERFLOW_ONE"))
            );
            assert!(body.is_empty());
            let (r, _) = c.call_header(codes::PULL_MESSAGE, &pull_header("G", topic, q, max + 5));
            assert_eq!(r.code, codes::PULL_OFFSET_MOVED);
            assert_eq!(ext_i64(&r, "nextBeginOffset"), max);
        }
    }
    assert!(checked > 1500, "{checked}");

    // a tag filter from the request: only that tag's units, nextBeginOffset past the others
    let tag = TagFilter::parse("TagA").unwrap();
    let mut h = pull_header("G", "OrderTopic", 1, 0);
    h.subscription = Some("TagA".into());
    let (r, body) = c.call_header(codes::PULL_MESSAGE, &h);
    let want = e.pull(&PullRequest {
        topic: "OrderTopic",
        queue_id: 1,
        offset: 0,
        max_msgs: 32,
        filter: Some(&MessageFilter::Tag(tag)),
    });
    assert_eq!(record_offsets(&body).len(), want.messages.len());
    assert!(r.code == codes::SUCCESS || r.code == codes::PULL_RETRY_IMMEDIATELY);
    assert_eq!(ext_i64(&r, "nextBeginOffset"), want.next_begin_offset);

    // SQL92 is filtered on the broker
    let mut h = pull_header("G", "OrderTopic", 0, 0);
    h.subscription = Some("TAGS = 'TagB'".into());
    h.expression_type = Some("SQL92".into());
    let (r, body) = c.call_header(codes::PULL_MESSAGE, &h);
    assert!(
        r.code == codes::SUCCESS || r.code == codes::PULL_RETRY_IMMEDIATELY,
        "{:?}",
        r.remark
    );
    for o in record_offsets(&body) {
        let m = e.message_at(o).unwrap();
        assert_eq!(m.property("TAGS").as_deref(), Some("TagB"));
    }
    h.subscription = Some("TAGS = ".into());
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &h);
    assert_eq!(r.code, codes::SUBSCRIPTION_PARSE_FAILED);

    // a bad queue id, an unknown topic
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &pull_header("G", "OrderTopic", 9, 0));
    assert_eq!(r.code, codes::SYSTEM_ERROR);
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &pull_header("G", "Nope", 0, 0));
    assert_eq!(r.code, codes::TOPIC_NOT_EXIST);

    // without the subscription flag the heartbeat's subscription is used
    let mut h = pull_header("HbGroup", "OrderTopic", 0, 0);
    h.sys_flag = 0;
    h.subscription = None;
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &h);
    assert_eq!(r.code, codes::SUBSCRIPTION_NOT_EXIST);
    c.heartbeat(
        "c1",
        consumer("HbGroup", &[("OrderTopic", "*")], "CLUSTERING"),
    );
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &h);
    assert_eq!(r.code, codes::SUCCESS);
    h.sub_version = 2;
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &h);
    assert_eq!(r.code, codes::SUBSCRIPTION_NOT_LATEST);
    // broadcasting consumers pull the same way
    c.heartbeat(
        "c1",
        consumer("Bcast", &[("OrderTopic", "*")], "BROADCASTING"),
    );
    let mut h = pull_header("Bcast", "OrderTopic", 2, 0);
    h.sys_flag = 0;
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &h);
    assert_eq!(r.code, codes::SUCCESS);
}

#[test]
fn offsets_are_queried_committed_and_kept_across_a_restart() {
    let (_t, ov) = overlay();
    let args = ["--overlay", ov.to_str().unwrap()];
    let s = start(Path::new(FIXTURE), &args);
    let mut c = s.client();
    let q = |c: &mut Client, g: &str, t: &str, q: i32| {
        c.call_header(
            codes::QUERY_CONSUMER_OFFSET,
            &QueryConsumerOffsetRequestHeader {
                consumer_group: g.into(),
                topic: t.into(),
                queue_id: q,
                bname: None,
            },
        )
    };
    // the store's committed offset; a new group on a queue starting at 0 gets 0
    let (r, _) = q(&mut c, "OrderGroup", "OrderTopic", 0);
    assert_eq!((r.code, ext_i64(&r, "offset")), (codes::SUCCESS, 90));
    let (r, _) = q(&mut c, "NewGroup", "OrderTopic", 0);
    assert_eq!((r.code, ext_i64(&r, "offset")), (codes::SUCCESS, 0));
    let (r, _) = c.call_header(
        codes::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "NewGroup".into(),
            topic: "OrderTopic".into(),
            queue_id: 0,
            commit_offset: 42,
            bname: None,
        },
    );
    assert_eq!(r.code, codes::SUCCESS);
    // a pull's commit-offset flag commits too
    let mut h = pull_header("NewGroup", "OrderTopic", 1, 7);
    h.sys_flag |= PULL_FLAG_COMMIT_OFFSET;
    h.commit_offset = 7;
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &h);
    assert_eq!(r.code, codes::SUCCESS);
    // min / max / time lookups
    let (r, _) = c.call_header(
        codes::GET_MAX_OFFSET,
        &GetMaxOffsetRequestHeader {
            topic: "OrderTopic".into(),
            queue_id: 0,
            bname: None,
        },
    );
    assert_eq!(ext_i64(&r, "offset"), 150);
    let (r, _) = c.call_header(
        codes::GET_MIN_OFFSET,
        &GetMinOffsetRequestHeader {
            topic: "Unknown".into(),
            queue_id: 0,
            bname: None,
        },
    );
    assert_eq!((r.code, ext_i64(&r, "offset")), (codes::SUCCESS, 0));
    let (r, _) = c.call_header(
        codes::SEARCH_OFFSET_BY_TIMESTAMP,
        &SearchOffsetRequestHeader {
            topic: "OrderTopic".into(),
            queue_id: 0,
            timestamp: 0,
            bname: None,
        },
    );
    assert_eq!(ext_i64(&r, "offset"), 0);
    let (r, _) = c.call_header(
        codes::GET_EARLIEST_MSG_STORETIME,
        &GetEarliestMsgStoretimeRequestHeader {
            topic: "OrderTopic".into(),
            queue_id: 0,
            bname: None,
        },
    );
    assert!(ext_i64(&r, "timestamp") > 1_700_000_000_000);
    drop(c);
    assert!(s.stop().success());
    assert!(ov.join("config/consumerOffset.json").is_file());

    let s = start(Path::new(FIXTURE), &args);
    let mut c = s.client();
    let (r, _) = q(&mut c, "NewGroup", "OrderTopic", 0);
    assert_eq!(ext_i64(&r, "offset"), 42);
    let (r, _) = q(&mut c, "NewGroup", "OrderTopic", 1);
    assert_eq!(ext_i64(&r, "offset"), 7);
    assert!(s.stop().success());
}

#[test]
fn a_suspended_pull_wakes_when_its_retry_falls_due_and_exhausted_messages_reach_the_dlq() {
    let (_t, ov) = overlay();
    // 1000x: level 1 (1 s) falls due after 1 ms of real time
    let s = start(
        Path::new(FIXTURE),
        &["--overlay", ov.to_str().unwrap(), "--time-scale", "1000"],
    );
    let e = engine(Path::new(FIXTURE), GeometryInputs::default());
    let first = e.unit_at("PaymentTopic", 0, 0).unwrap().offset;
    let mut c = s.client();
    c.heartbeat(
        "c1",
        consumer(
            "RetryG",
            &[("PaymentTopic", "*"), ("%RETRY%RetryG", "*")],
            "CLUSTERING",
        ),
    );
    // park a pull on the (empty) retry queue
    let mut h = pull_header("RetryG", "%RETRY%RetryG", 0, 0);
    h.sys_flag |= PULL_FLAG_SUSPEND;
    h.suspend_timeout_millis = 15000;
    let mut cmd = RemotingCommand::request(codes::PULL_MESSAGE, 0);
    cmd.write_header(&h);
    let parked = c.send(cmd, &[]);
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let (r, _) = c.call_header(
        codes::CONSUMER_SEND_MSG_BACK,
        &ConsumerSendMsgBackRequestHeader {
            offset: first,
            group: "RetryG".into(),
            delay_level: 1,
            max_reconsume_times: Some(16),
            ..Default::default()
        },
    );
    assert_eq!(r.code, codes::SUCCESS, "{:?}", r.remark);
    let (r, body) = c.wait(parked);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "woken only at the hold time"
    );
    assert_eq!(r.code, codes::SUCCESS, "{:?}", r.remark);
    let offsets = record_offsets(&body);
    assert_eq!(offsets.len(), 1);
    let Record::Message(m) = parse_record(&body, 0, 0, true).unwrap() else {
        panic!()
    };
    assert_eq!(m.topic, "%RETRY%RetryG");
    assert_eq!(m.reconsume_times, 1);
    assert_eq!(
        m.properties.get("RETRY_TOPIC").as_deref(),
        Some("PaymentTopic")
    );
    let original = e.message_at(first).unwrap();
    assert_eq!(m.body, original.body.as_slice());

    // past maxReconsumeTimes: the DLQ, at once
    let (r, _) = c.call_header(
        codes::CONSUMER_SEND_MSG_BACK,
        &ConsumerSendMsgBackRequestHeader {
            offset: offsets[0],
            group: "RetryG".into(),
            delay_level: 0,
            max_reconsume_times: Some(1),
            ..Default::default()
        },
    );
    assert_eq!(r.code, codes::SUCCESS);
    let (r, body) = c.call_header(
        codes::PULL_MESSAGE,
        &pull_header("RetryG", "%DLQ%RetryG", 0, 0),
    );
    assert_eq!(r.code, codes::SUCCESS, "{:?}", r.remark);
    let Record::Message(m) = parse_record(&body, 0, 0, true).unwrap() else {
        panic!()
    };
    assert_eq!(m.reconsume_times, 2);
    assert_eq!(m.body, original.body.as_slice());

    // a parked pull with nothing coming is answered not-found at its hold time
    let mut h = pull_header(
        "RetryG",
        "PaymentTopic",
        0,
        e.queue_bounds("PaymentTopic", 0).1,
    );
    h.sys_flag |= PULL_FLAG_SUSPEND;
    h.suspend_timeout_millis = 300;
    let started = Instant::now();
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &h);
    assert_eq!(r.code, codes::PULL_NOT_FOUND);
    assert!(started.elapsed() >= Duration::from_millis(250));
    // a send-back of an offset with no message
    let (r, _) = c.call_header(
        codes::CONSUMER_SEND_MSG_BACK,
        &ConsumerSendMsgBackRequestHeader {
            offset: 1 << 40,
            group: "RetryG".into(),
            ..Default::default()
        },
    );
    assert_eq!(r.code, codes::SYSTEM_ERROR);
    // a group name that cannot be a retry topic's folder is refused before anything is written
    for bad in ["../escape", "a/b", "x y"] {
        let hb = HeartbeatData {
            client_id: "c1".into(),
            producer_data_set: vec![],
            consumer_data_set: vec![consumer(bad, &[("PaymentTopic", "*")], "CLUSTERING")],
        };
        let (r, _) = c.call(
            RemotingCommand::request(codes::HEART_BEAT, 0),
            hb.to_json().as_bytes(),
        );
        assert_eq!(r.code, codes::SYSTEM_ERROR, "{bad:?}");
        let (r, _) = c.call_header(
            codes::CONSUMER_SEND_MSG_BACK,
            &ConsumerSendMsgBackRequestHeader {
                offset: first,
                group: bad.into(),
                delay_level: 1,
                ..Default::default()
            },
        );
        assert_eq!(r.code, codes::SYSTEM_ERROR, "{bad:?}");
    }
    assert!(!ov.join("consumequeue/%RETRY%..").exists());
    assert!(s.stop().success());
}

#[test]
fn consumers_of_a_group_are_listed_notified_and_locked_one_at_a_time() {
    let s = start(Path::new(FIXTURE), &[]);
    let mut a = s.client();
    let mut b = s.client();
    let data = consumer("RebalanceG", &[("OrderTopic", "*")], "CLUSTERING");
    a.heartbeat("client-a", data.clone());
    b.heartbeat("client-b", data);
    let list = |c: &mut Client| {
        let (r, body) = c.call_header(
            codes::GET_CONSUMER_LIST_BY_GROUP,
            &GetConsumerListByGroupRequestHeader {
                consumer_group: "RebalanceG".into(),
            },
        );
        (r.code, body)
    };
    let (code, body) = list(&mut a);
    assert_eq!(code, codes::SUCCESS);
    assert_eq!(
        ConsumerListByGroup::from_json(&body)
            .unwrap()
            .consumer_id_list,
        ["client-a", "client-b"]
    );
    // a was told that b joined
    assert!(a.saw_push(|p| p.code == codes::NOTIFY_CONSUMER_IDS_CHANGED
        && p.is_oneway()
        && p.ext_fields.get("consumerGroup") == Some("RebalanceG")));

    // orderly locks: one owner per queue
    let mq = MessageQueue::new("OrderTopic", "broker-a", 0);
    let lock = |c: &mut Client, id: &str, code: i32| {
        let body = LockBatchRequestBody {
            consumer_group: "RebalanceG".into(),
            client_id: id.into(),
            mq_set: vec![mq.clone()],
        };
        let (r, body) = c.call(RemotingCommand::request(code, 0), body.to_json().as_bytes());
        assert_eq!(r.code, codes::SUCCESS);
        body
    };
    let granted = |body: Vec<u8>| {
        LockBatchResponseBody::from_json(&body)
            .unwrap()
            .lock_ok_mq_set
    };
    assert_eq!(
        granted(lock(&mut a, "client-a", codes::LOCK_BATCH_MQ)),
        vec![mq.clone()]
    );
    assert!(granted(lock(&mut b, "client-b", codes::LOCK_BATCH_MQ)).is_empty());
    lock(&mut a, "client-a", codes::UNLOCK_BATCH_MQ);
    assert_eq!(
        granted(lock(&mut b, "client-b", codes::LOCK_BATCH_MQ)),
        vec![mq.clone()]
    );

    // unregistering and closing leave the group
    let (r, _) = b.call_header(
        codes::UNREGISTER_CLIENT,
        &UnregisterClientRequestHeader {
            client_id: "client-b".into(),
            producer_group: None,
            consumer_group: Some("RebalanceG".into()),
        },
    );
    assert_eq!(r.code, codes::SUCCESS);
    let (_, body) = list(&mut a);
    assert_eq!(
        ConsumerListByGroup::from_json(&body)
            .unwrap()
            .consumer_id_list,
        ["client-a"]
    );
    drop(a);
    std::thread::sleep(Duration::from_millis(200));
    let (code, _) = list(&mut b);
    assert_eq!(code, codes::SYSTEM_ERROR);
}

#[test]
fn admin_requests_answer_what_mqadmin_reads() {
    let (_t, ov) = overlay();
    let s = start(Path::new(FIXTURE), &["--overlay", ov.to_str().unwrap()]);
    let e = engine(Path::new(FIXTURE), GeometryInputs::default());
    let mut c = s.client();
    // consume stats: the store's committed offsets and the queues' max
    let (r, body) = c.call_header(
        codes::GET_CONSUME_STATS,
        &GetConsumeStatsRequestHeader {
            consumer_group: "OrderGroup".into(),
            topic: None,
        },
    );
    assert_eq!(r.code, codes::SUCCESS);
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.contains(r#"{"brokerName":"broker-a","queueId":0,"topic":"OrderTopic"}:{"brokerOffset":150,"consumerOffset":90,"#),
        "{text}"
    );
    assert!(
        text.ends_with(r#"},"consumeTps":0.0}"#) || text.starts_with(r#"{"consumeTps":0.0"#),
        "{text}"
    );
    // topic stats
    let (r, body) = c.call_header(
        codes::GET_TOPIC_STATS_INFO,
        &GetTopicStatsInfoRequestHeader {
            topic: "AuditTopic".into(),
        },
    );
    assert_eq!(r.code, codes::SUCCESS);
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains(r#""maxOffset":175,"minOffset":0"#), "{text}");
    let (r, _) = c.call_header(
        codes::GET_TOPIC_STATS_INFO,
        &GetTopicStatsInfoRequestHeader {
            topic: "Nope".into(),
        },
    );
    assert_eq!(r.code, codes::TOPIC_NOT_EXIST);
    // runtime info
    let (_, body) = c.call(
        RemotingCommand::request(codes::GET_BROKER_RUNTIME_INFO, 0),
        &[],
    );
    let kv = KvTable::from_json(&body).unwrap();
    assert_eq!(kv.table["brokerVersionDesc"], "V4_9_8");
    assert_eq!(kv.table["putTps"], "0.0 0.0 0.0");
    // configs
    let (r, body) = c.call(
        RemotingCommand::request(codes::GET_ALL_TOPIC_CONFIG, 0),
        &[],
    );
    assert_eq!(r.code, codes::SUCCESS);
    assert!(String::from_utf8_lossy(&body).contains("\"topicConfigTable\""));
    let (_, body) = c.call(
        RemotingCommand::request(codes::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 0),
        &[],
    );
    assert!(String::from_utf8_lossy(&body).contains("\"subscriptionGroupTable\""));
    let (r, body) = c.call(RemotingCommand::request(codes::GET_BROKER_CONFIG, 0), &[]);
    assert!(String::from_utf8_lossy(&body).contains("brokerName=broker-a\n"));
    assert!(r.ext_fields.get("version").is_some());
    // who consumes a topic
    let (_, body) = c.call_header(
        codes::QUERY_TOPIC_CONSUME_BY_WHO,
        &QueryTopicConsumeByWhoRequestHeader {
            topic: "AuditTopic".into(),
        },
    );
    assert_eq!(
        GroupList::from_json(&body).unwrap().group_list,
        ["AuditGroup"]
    );
    // connections: none, then one
    let conn = |c: &mut Client| {
        c.call_header(
            codes::GET_CONSUMER_CONNECTION_LIST,
            &GetConsumerConnectionListRequestHeader {
                consumer_group: "AuditGroup".into(),
            },
        )
    };
    assert_eq!(conn(&mut c).0.code, codes::CONSUMER_NOT_ONLINE);
    c.heartbeat(
        "audit-1",
        consumer("AuditGroup", &[("AuditTopic", "*")], "CLUSTERING"),
    );
    let (r, body) = conn(&mut c);
    assert_eq!(r.code, codes::SUCCESS);
    let cc = ConsumerConnection::from_json(&body).unwrap();
    assert_eq!(cc.connection_set[0].client_id, "audit-1");
    assert!(cc.subscription_table.contains_key("AuditTopic"));

    // by key, as the store's index answers
    let reader = Reader::new(e.source());
    let (m, keys) = (0..50)
        .filter_map(|o| e.message_at(e.unit_at("OrderTopic", 0, o)?.offset))
        .find_map(|m| {
            let k = m.property("KEYS")?.into_owned();
            Some((m, k))
        })
        .expect("a message with KEYS");
    let key = keys.split(' ').next().unwrap().to_string();
    let want = reader.query_message("OrderTopic", &key, 64, 0, i64::MAX);
    let mut cmd = RemotingCommand::request(codes::QUERY_MESSAGE, 0);
    cmd.write_header(&QueryMessageRequestHeader {
        topic: "OrderTopic".into(),
        key: key.clone(),
        max_num: 64,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
    });
    cmd.ext_fields.insert("_UNIQUE_KEY_QUERY", "false");
    let (r, body) = c.call(cmd, &[]);
    assert_eq!(r.code, codes::SUCCESS);
    let got: Vec<u64> = record_offsets(&body)
        .into_iter()
        .map(|o| o as u64)
        .collect();
    assert_eq!(got, want.offsets);
    assert!(got.contains(&(m.physical_offset as u64)));
    assert_eq!(
        ext_i64(&r, "indexLastUpdateTimestamp"),
        want.index_last_update_timestamp
    );
    // by id (commitlog offset)
    let (r, body) = c.call_header(
        codes::VIEW_MESSAGE_BY_ID,
        &ViewMessageRequestHeader {
            offset: m.physical_offset,
        },
    );
    assert_eq!(r.code, codes::SUCCESS);
    assert_eq!(record_offsets(&body), [m.physical_offset]);
    let (r, _) = c.call_header(
        codes::VIEW_MESSAGE_BY_ID,
        &ViewMessageRequestHeader { offset: 1 << 40 },
    );
    assert_eq!(r.code, codes::SYSTEM_ERROR);

    // reset by time: -1 moves the online group to the max offsets and tells its client
    let (r, body) = c.call_header(
        codes::INVOKE_BROKER_TO_RESET_OFFSET,
        &ResetOffsetRequestHeader {
            topic: "AuditTopic".into(),
            group: "AuditGroup".into(),
            timestamp: -1,
            is_force: true,
        },
    );
    assert_eq!(r.code, codes::SUCCESS, "{:?}", r.remark);
    assert!(String::from_utf8_lossy(&body).contains(r#""queueId":3,"topic":"AuditTopic"}:175"#));
    let (r, _) = c.call_header(
        codes::QUERY_CONSUMER_OFFSET,
        &QueryConsumerOffsetRequestHeader {
            consumer_group: "AuditGroup".into(),
            topic: "AuditTopic".into(),
            queue_id: 3,
            bname: None,
        },
    );
    assert_eq!(ext_i64(&r, "offset"), 175);
    assert!(c.saw_push(|p| p.code == codes::RESET_CONSUMER_CLIENT_OFFSET));
}

#[test]
fn sends_unknown_codes_and_bad_frames_are_refused_without_harm() {
    let s = start(Path::new(FIXTURE), &[]);
    let mut c = s.client();
    let mut send = RemotingCommand::request(codes::SEND_MESSAGE_V2, 0);
    send.ext_fields.insert("b", "OrderTopic");
    let (r, _) = c.call(send, b"hello");
    assert_eq!(r.code, codes::NO_PERMISSION);
    assert!(r.remark.unwrap().contains("read-only"));
    let (r, _) = c.call(RemotingCommand::request(9999, 0), &[]);
    assert_eq!(r.code, codes::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        r.remark.as_deref(),
        Some(" request type 9999 not supported")
    );
    // a missing required header field
    let (r, _) = c.call(RemotingCommand::request(codes::PULL_MESSAGE, 0), &[]);
    assert_eq!(r.code, codes::SYSTEM_ERROR);
    // a oneway request gets no answer; the next request still does
    let mut ow = RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0);
    ow.mark_oneway();
    let _ = c.send(ow, &[]);
    let (r, _) = c.call(
        RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0),
        &[],
    );
    assert_eq!(r.code, codes::SUCCESS);
    assert!(c.early.is_empty());

    // a frame claiming 2 GiB, a header longer than its frame, garbage: the connection closes
    for bad in [
        vec![0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0],
        vec![0, 0, 0, 8, 0, 0, 0, 200, b'{', b'}', 0, 0],
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
    ] {
        let mut c = s.client();
        c.stream.write_all(&bad).unwrap();
        assert!(c.next().is_none(), "{bad:?} did not close the connection");
    }
    // and the server goes on
    let (r, _) = s.client().call(
        RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0),
        &[],
    );
    assert_eq!(r.code, codes::SUCCESS);
}

#[test]
fn acl_requires_signed_requests_and_non_loopback_requires_acl() {
    let out = Command::new(env!("CARGO_BIN_EXE_rmqstore"))
        .args(["serve", FIXTURE, "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--acl"));

    let t = tempfile::tempdir().unwrap();
    let acl = t.path().join("plain_acl.yml");
    std::fs::write(
        &acl,
        "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    defaultTopicPerm: SUB\n    defaultGroupPerm: SUB\n    topicPerms:\n      - AuditTopic=DENY\n",
    )
    .unwrap();
    let s = start(Path::new(FIXTURE), &["--acl", acl.to_str().unwrap()]);
    let mut c = s.client();
    let signed = |h: &PullMessageRequestHeader, secret: &str| {
        let mut cmd = RemotingCommand::request(codes::PULL_MESSAGE, 0);
        cmd.write_header(h);
        rmqstore::remoting::acl::sign(&mut cmd.ext_fields, &[], "RocketMQ", secret, None);
        cmd
    };
    let h = pull_header("G", "OrderTopic", 0, 0);
    let (r, _) = c.call_header(codes::PULL_MESSAGE, &h);
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (codes::SYSTEM_ERROR, Some("No accessKey is configured"))
    );
    let (r, _) = c.call(signed(&h, "wrong-key"), &[]);
    assert_eq!(
        r.remark.as_deref(),
        Some("Check signature failed for accessKey=RocketMQ")
    );
    let (r, _) = c.call(signed(&h, "12345678"), &[]);
    assert_eq!(r.code, codes::SUCCESS);
    let (r, _) = c.call(
        signed(&pull_header("G", "AuditTopic", 0, 0), "12345678"),
        &[],
    );
    assert_eq!(r.code, codes::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some("No default permission for topic:AuditTopic")
    );
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_queries_and_pulls_answer_as_the_java_store() {
    let Some(dir) = common::oracle("basic-4.9") else {
        return;
    };
    // the copy with the consume queue file times the Java answers by time depend on
    let Some((_t, store)) = common::basic49_with_file_times() else {
        return;
    };
    let s = start(
        &store,
        &["--index-slots", "1000", "--index-entries", "4000"],
    );
    let mut c = s.client();
    let q = common::java_queries(&dir);
    let checked = java_answers_over_the_wire(&mut c, &q, true);
    assert!(checked > 30, "{checked}");
}

/// The Java store's answers (`queries.json`) asked of a running `serve` over the wire: key
/// lookups, pulls, lookups by offset, queue ends and (with `by_time`) offsets by time. Returns
/// how many cases were checked.
fn java_answers_over_the_wire(c: &mut Client, q: &serde_json::Value, by_time: bool) -> usize {
    let mut checked = 0;
    for case in q["queryMessage"].as_array().unwrap() {
        let mut cmd = RemotingCommand::request(codes::QUERY_MESSAGE, 0);
        cmd.write_header(&QueryMessageRequestHeader {
            topic: case["topic"].as_str().unwrap().into(),
            key: case["key"].as_str().unwrap().into(),
            max_num: case["maxNum"].as_i64().unwrap() as i32,
            begin_timestamp: case["begin"].as_i64().unwrap(),
            end_timestamp: case["end"].as_i64().unwrap(),
        });
        cmd.ext_fields.insert("_UNIQUE_KEY_QUERY", "false");
        let (r, body) = c.call(cmd, &[]);
        let want: Vec<i64> = case["physicalOffsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        if want.is_empty() {
            assert_eq!(r.code, codes::QUERY_NOT_FOUND);
        } else {
            assert_eq!(r.code, codes::SUCCESS);
            assert_eq!(record_offsets(&body), want, "{case}");
            assert_eq!(
                ext_i64(&r, "indexLastUpdatePhyoffset"),
                case["indexLastUpdatePhyoffset"].as_i64().unwrap()
            );
        }
        checked += 1;
    }
    for case in q["getMessage"].as_array().unwrap() {
        let status = case["status"].as_str().unwrap();
        // the oracle answered as a slave; a master agrees where no offset is corrected
        if !["FOUND", "OFFSET_OVERFLOW_ONE", "NO_MATCHED_MESSAGE"].contains(&status) {
            continue;
        }
        let mut h = pull_header(
            case["group"].as_str().unwrap(),
            case["topic"].as_str().unwrap(),
            case["queueId"].as_i64().unwrap() as i32,
            case["offset"].as_i64().unwrap(),
        );
        h.max_msg_nums = case["maxMsgNums"].as_i64().unwrap() as i32;
        if let Some(tag) = case.get("tag").and_then(|t| t.as_str()) {
            h.subscription = Some(tag.into());
        }
        let (r, body) = c.call_header(codes::PULL_MESSAGE, &h);
        assert_eq!(r.remark.as_deref(), Some(status), "{case}");
        assert_eq!(
            ext_i64(&r, "nextBeginOffset"),
            case["nextBeginOffset"].as_i64().unwrap(),
            "{case}"
        );
        assert_eq!(
            ext_i64(&r, "maxOffset"),
            case["maxOffset"].as_i64().unwrap()
        );
        let want: Vec<i64> = case["physicalOffsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(record_offsets(&body), want, "{case}");
        checked += 1;
    }
    for case in q["lookMessageByOffset"].as_array().unwrap() {
        let (r, body) = c.call_header(
            codes::VIEW_MESSAGE_BY_ID,
            &ViewMessageRequestHeader {
                offset: case["commitLogOffset"].as_i64().unwrap(),
            },
        );
        assert_eq!(r.code, codes::SUCCESS);
        assert_eq!(body.len() as i64, case["storeSize"].as_i64().unwrap());
        checked += 1;
    }
    if by_time {
        for case in q["getOffsetInQueueByTime"].as_array().unwrap() {
            let (r, _) = c.call_header(
                codes::SEARCH_OFFSET_BY_TIMESTAMP,
                &SearchOffsetRequestHeader {
                    topic: case["topic"].as_str().unwrap().into(),
                    queue_id: case["queueId"].as_i64().unwrap() as i32,
                    timestamp: case["timestamp"].as_i64().unwrap(),
                    bname: None,
                },
            );
            assert_eq!(
                ext_i64(&r, "offset"),
                case["offset"].as_i64().unwrap(),
                "{case}"
            );
            checked += 1;
        }
    }
    for case in q["queues"].as_array().unwrap() {
        let (r, _) = c.call_header(
            codes::GET_MAX_OFFSET,
            &GetMaxOffsetRequestHeader {
                topic: case["topic"].as_str().unwrap().into(),
                queue_id: case["queueId"].as_i64().unwrap() as i32,
                bname: None,
            },
        );
        assert_eq!(
            ext_i64(&r, "offset"),
            case["maxOffsetInQueue"].as_i64().unwrap()
        );
        checked += 1;
    }
    checked
}

/// DLedger-mode stores served as the Java store answered on them: the plain one and the one
/// converted from normal mode (records on both sides of the divide).
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn dledger_stores_answer_over_the_wire_as_the_java_store() {
    for name in ["dledger-4.9", "dledger-converted-4.9"] {
        let Some(dir) = common::oracle(name) else {
            return;
        };
        let s = start(
            &dir.join("store"),
            &["--index-slots", "1000", "--index-entries", "4000"],
        );
        let mut c = s.client();
        let q = common::java_queries(&dir);
        let checked = java_answers_over_the_wire(&mut c, &q, false);
        assert!(checked > 30, "{name}: {checked}");
    }
}

/// Requests with random codes, random values in the header fields the handlers read and random
/// bodies: each gets exactly one answer (none when one-way), nothing panics or hangs, and the
/// server answers normally afterwards.
#[test]
fn random_requests_each_get_one_answer() {
    let s = start(Path::new(FIXTURE), &[]);
    let mut c = s.client();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    const KEYS: [&str; 16] = [
        "topic",
        "consumerGroup",
        "group",
        "queueId",
        "queueOffset",
        "maxMsgNums",
        "sysFlag",
        "commitOffset",
        "suspendTimeoutMillis",
        "subscription",
        "subVersion",
        "expressionType",
        "offset",
        "timestamp",
        "key",
        "clientID",
    ];
    const VALUES: [&str; 12] = [
        "0",
        "1",
        "-1",
        "3",
        "50",
        "2147483648",
        "x",
        "",
        "OrderTopic",
        "%RETRY%OrderGroup",
        "SQL92",
        "a > ",
    ];
    const BODIES: [&[u8]; 5] = [
        b"",
        b"{",
        b"{\"clientID\":\"x\",\"consumerDataSet\":[{\"groupName\":1}]}",
        b"{\"consumerGroup\":\"g\",\"clientId\":\"c\",\"mqSet\":[{\"topic\":\"OrderTopic\",\"brokerName\":\"broker-a\",\"queueId\":\"q\"}]}",
        b"\xff\xfe\x00garbage",
    ];
    for round in 0..400 {
        let code = if next(3) == 0 {
            next(400) as i32
        } else {
            [
                11, 12, 14, 15, 29, 30, 31, 32, 33, 34, 35, 36, 38, 41, 42, 46, 105, 202, 203, 208,
                222, 300,
            ][next(22) as usize]
        };
        let mut cmd = RemotingCommand::request(code, 0);
        for _ in 0..next(10) {
            cmd.ext_fields.insert(
                KEYS[next(KEYS.len() as u64) as usize],
                VALUES[next(VALUES.len() as u64) as usize],
            );
        }
        // keep held pulls short
        cmd.ext_fields.insert("suspendTimeoutMillis", "10");
        let body = BODIES[next(BODIES.len() as u64) as usize];
        let (r, _) = c.call(cmd, body);
        assert!(r.is_response(), "round {round}: code {code}");
    }
    assert!(c.early.is_empty(), "answers to no request: {:?}", c.early);
    let (r, _) = s.client().call(
        RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0),
        &[],
    );
    assert_eq!(r.code, codes::SUCCESS);
}

/// An idle connection is closed after `--idle-secs`; a connection past `--max-connections`
/// closes the one idle the longest and is served.
#[test]
fn idle_connections_and_connections_over_the_limit_are_closed() {
    let s = start(
        Path::new(FIXTURE),
        &["--idle-secs", "1", "--max-connections", "1"],
    );
    let mut first = s.client();
    let (r, _) = first.call(
        RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0),
        &[],
    );
    assert_eq!(r.code, codes::SUCCESS);
    let mut second = s.client();
    let (r, _) = second.call(
        RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0),
        &[],
    );
    assert_eq!(r.code, codes::SUCCESS);
    assert!(first.next().is_none(), "the older connection stayed open");
    let started = Instant::now();
    assert!(second.next().is_none(), "the idle connection stayed open");
    assert!(started.elapsed() < Duration::from_secs(10));
    // the slot is free again
    let (r, _) = s.client().call(
        RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0),
        &[],
    );
    assert_eq!(r.code, codes::SUCCESS);
}

/// A request frame whose header holds `n` extFields `k<i> = v`, in the binary or JSON form.
fn many_fields_frame(n: usize, binary: bool) -> Vec<u8> {
    let mut cmd = RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 1);
    cmd.ext_fields = rmqstore::remoting::ExtFields::from_entries(
        (0..n).map(|i| (format!("k{i}"), "v".to_string())).collect(),
    );
    if binary {
        cmd.serialize_type = rmqstore::remoting::SerializeType::RocketMq;
    }
    let mut out = Vec::new();
    cmd.encode(&[], &mut out).unwrap();
    out
}

fn cluster_info_code(c: &mut Client) -> i32 {
    c.call(
        RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0),
        &[],
    )
    .0
    .code
}

/// 200,000 extFields in either form (over the header limit), and 15,000 in a header under it:
/// the connection is closed at once and another client is served meanwhile (the quadratic
/// header map took minutes over such a frame and held a runtime thread all along).
#[test]
fn frames_with_too_many_ext_fields_are_refused_while_others_are_served() {
    let s = start(Path::new(FIXTURE), &[]);
    let mut other = s.client();
    for (n, binary) in [(200_000, false), (200_000, true), (15_000, false)] {
        let frame = many_fields_frame(n, binary);
        let mut hostile = s.client();
        let mut w = hostile.stream.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = w.write_all(&frame);
        });
        assert_eq!(cluster_info_code(&mut other), codes::SUCCESS);
        assert!(
            hostile.next().is_none(),
            "{n} extFields (binary: {binary}) got an answer"
        );
        writer.join().unwrap();
    }
    assert_eq!(cluster_info_code(&mut other), codes::SUCCESS);
    assert!(s.stop().success());
}

/// SIGTERM while a client is half way through a 16 MiB frame: the server stops and saves the
/// overlay.
#[test]
fn sigterm_while_a_huge_frame_arrives_stops_and_saves_the_overlay() {
    let (_t, ov) = overlay();
    let s = start(Path::new(FIXTURE), &["--overlay", ov.to_str().unwrap()]);
    let mut c = s.client();
    c.heartbeat(
        "c1",
        consumer("SavedG", &[("OrderTopic", "*")], "CLUSTERING"),
    );
    let mut hostile = s.client();
    let total: u32 = 16 * 1024 * 1024;
    let mut head = (total - 4).to_be_bytes().to_vec();
    head.extend_from_slice(&16u32.to_be_bytes());
    hostile.stream.write_all(&head).unwrap();
    hostile.stream.write_all(&vec![b' '; 1 << 20]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(s.stop().success());
    let groups = std::fs::read_to_string(ov.join("config/subscriptionGroup.json")).unwrap();
    assert!(groups.contains("SavedG"));
}

/// The last commitlog file of an overlay.
fn last_overlay_file(ov: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(ov.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.pop().expect("the overlay has a commitlog file")
}

/// `verify`'s exit status over an overlay's store files (its config holds the offsets of the
/// store it overlays, which only the two together can check).
fn verify_exit(dir: &Path) -> Option<i32> {
    Command::new(env!("CARGO_BIN_EXE_rmqstore"))
        .arg("verify")
        .arg(dir)
        .args(["--only", "commitlog,consumequeue,index"])
        .output()
        .unwrap()
        .status
        .code()
}

/// Send-backs and offset commits on one connection until the server goes.
fn traffic(addr: String, offsets: Vec<i64>) -> usize {
    let mut c = Client::connect(&addr);
    let mut done = 0;
    for i in 0.. {
        let mut cmd = RemotingCommand::request(codes::CONSUMER_SEND_MSG_BACK, 0);
        cmd.write_header(&ConsumerSendMsgBackRequestHeader {
            offset: offsets[i % offsets.len()],
            group: "KillG".into(),
            delay_level: 1 + (i % 3) as i32,
            max_reconsume_times: Some(16),
            ..Default::default()
        });
        let mut commit = RemotingCommand::request(codes::UPDATE_CONSUMER_OFFSET, 0);
        commit.write_header(&UpdateConsumerOffsetRequestHeader {
            consumer_group: "KillG".into(),
            topic: "PaymentTopic".into(),
            queue_id: 0,
            commit_offset: i as i64,
            bname: None,
        });
        let mut out = Vec::new();
        for cmd in [cmd, commit] {
            c.opaque += 1;
            let mut cmd = cmd;
            cmd.opaque = c.opaque;
            cmd.encode(&[], &mut out).unwrap();
        }
        if c.stream.write_all(&out).is_err() || c.next().is_none() || c.next().is_none() {
            return done;
        }
        done += 1;
    }
    done
}

/// SIGKILL under send-back and commit traffic, five times: each restart continues the overlay
/// (cutting a torn record if the kill left one) and serves; the overlay verifies.
#[test]
fn sigkill_under_traffic_leaves_an_overlay_every_restart_continues() {
    let (_t, ov) = overlay();
    let args = ["--overlay", ov.to_str().unwrap(), "--time-scale", "1000"];
    let e = engine(Path::new(FIXTURE), GeometryInputs::default());
    let offsets: Vec<i64> = (0..8)
        .filter_map(|o| e.unit_at("PaymentTopic", 0, o))
        .map(|u| u.offset)
        .collect();
    assert!(!offsets.is_empty());
    for round in 0..5u64 {
        let mut s = start(Path::new(FIXTURE), &args);
        let (r, _) = s.client().call_header(
            codes::PULL_MESSAGE,
            &pull_header("KillG", "PaymentTopic", 0, 0),
        );
        assert_eq!(r.code, codes::SUCCESS, "round {round}: {:?}", r.remark);
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (addr, offsets) = (s.addr.clone(), offsets.clone());
                std::thread::spawn(move || traffic(addr, offsets))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150 + 90 * round));
        s.child.kill().unwrap();
        s.child.wait().unwrap();
        for w in workers {
            w.join().unwrap();
        }
    }
    let s = start(Path::new(FIXTURE), &args);
    let (r, _) = s.client().call_header(
        codes::PULL_MESSAGE,
        &pull_header("KillG", "PaymentTopic", 0, 0),
    );
    assert_eq!(r.code, codes::SUCCESS, "{:?}", r.remark);
    assert!(s.stop().success());
    assert_eq!(verify_exit(&ov), Some(0));
}

/// A record torn at the end of the overlay (what a kill during an append leaves) is cut on the
/// next start, which says so on stderr; the overlay is then as before and verifies.
#[test]
fn a_torn_record_at_the_end_of_the_overlay_is_cut_on_start() {
    use std::process::Stdio;
    let (_t, ov) = overlay();
    // the clock all but stopped: none of the fixture's delayed messages falls due and changes
    // the overlay while the test runs, however slow the machine
    let args = [
        "--overlay",
        ov.to_str().unwrap(),
        "--time-scale",
        "0.000001",
    ];
    let e = engine(Path::new(FIXTURE), GeometryInputs::default());
    let first = e.unit_at("PaymentTopic", 0, 0).unwrap().offset;
    let s = start(Path::new(FIXTURE), &args);
    let mut c = s.client();
    // delay levels far enough ahead (30 min, 1 h) that nothing falls due while the test runs
    for level in [16, 17] {
        let (r, _) = c.call_header(
            codes::CONSUMER_SEND_MSG_BACK,
            &ConsumerSendMsgBackRequestHeader {
                offset: first,
                group: "TornG".into(),
                delay_level: level,
                max_reconsume_times: Some(16),
                ..Default::default()
            },
        );
        assert_eq!(r.code, codes::SUCCESS, "{:?}", r.remark);
    }
    drop(c);
    assert!(s.stop().success());
    let file = last_overlay_file(&ov);
    let whole = std::fs::read(&file).unwrap();
    let mut end = 0;
    while let Record::Message(m) = parse_record(&whole, end, 0, false).unwrap() {
        end += m.raw.len();
    }
    let Record::Message(m) = parse_record(&whole, 0, 0, false).unwrap() else {
        panic!("no record at the start of {}", file.display())
    };
    // what a kill during an append leaves: the open file ends in half a record
    let mut torn = whole[..end].to_vec();
    torn.extend_from_slice(&m.raw[..m.raw.len() / 2]);
    std::fs::write(&file, &torn).unwrap();

    let now = store_end(Path::new(FIXTURE)).to_string();
    let mut s = Server::start_with(
        Path::new(FIXTURE),
        &[&["--now", now.as_str()][..], &args[..]].concat(),
        Stdio::piped(),
    );
    let (r, _) = s.client().call_header(
        codes::PULL_MESSAGE,
        &pull_header("TornG", "PaymentTopic", 0, 0),
    );
    assert_eq!(r.code, codes::SUCCESS);
    let mut stderr = s.child.stderr.take().unwrap();
    assert!(s.stop().success());
    let mut said = String::new();
    stderr.read_to_string(&mut said).unwrap();
    assert!(
        said.contains("overlay recovered") && said.contains("torn record"),
        "{said}"
    );
    assert_same_bytes(&std::fs::read(&file).unwrap(), &whole);
    assert_eq!(verify_exit(&ov), Some(0));

    // `pull --commit` opens the overlay the same way
    std::fs::write(&file, &torn).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rmqstore"))
        .args(["pull", FIXTURE, "--overlay", ov.to_str().unwrap()])
        .args([
            "--group",
            "TornG",
            "--topic",
            "PaymentTopic",
            "--queue",
            "0",
        ])
        .args(["--json", "--commit"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("overlay recovered"), "{said}");
    // with --json, what stderr says is JSON lines too
    for line in said.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["type"].is_string(), "{line}");
    }
    assert_eq!(verify_exit(&ov), Some(0));
}

/// Over the limits: a heartbeat of 20,000 groups (body) or 1,100 (groups), a lock batch of
/// 200,000 queues (body) or 5,000 (queues) get SYSTEM_ERROR with a remark and change nothing.
/// Groups of topics the store does not have are registered but not written to the overlay;
/// a lock takes only queues that exist.
#[test]
fn oversized_heartbeats_and_lock_batches_are_refused_and_leave_the_overlay_alone() {
    let (_t, ov) = overlay();
    let s = start(Path::new(FIXTURE), &["--overlay", ov.to_str().unwrap()]);
    let mut c = s.client();
    let heartbeat = |c: &mut Client, prefix: &str, n: usize, topic: &str| {
        let hb = HeartbeatData {
            client_id: "hostile".into(),
            producer_data_set: vec![],
            consumer_data_set: (0..n)
                .map(|i| consumer(&format!("{prefix}{i}"), &[(topic, "*")], "CLUSTERING"))
                .collect(),
        };
        c.call(
            RemotingCommand::request(codes::HEART_BEAT, 0),
            hb.to_json().as_bytes(),
        )
        .0
    };
    for n in [20_000, 1_100] {
        let r = heartbeat(&mut c, "Hostile", n, "OrderTopic");
        assert_eq!(r.code, codes::SYSTEM_ERROR, "{n} groups");
        assert!(r.remark.unwrap().contains("limit"));
    }
    let r = heartbeat(&mut c, "Ghost", 1_000, "NoSuchTopic");
    assert_eq!(r.code, codes::SUCCESS, "{:?}", r.remark);
    let r = heartbeat(&mut c, "Real", 1, "OrderTopic");
    assert_eq!(r.code, codes::SUCCESS, "{:?}", r.remark);

    let lock = |c: &mut Client, mq_set: Vec<MessageQueue>| {
        let body = LockBatchRequestBody {
            consumer_group: "Real0".into(),
            client_id: "hostile".into(),
            mq_set,
        };
        c.call(
            RemotingCommand::request(codes::LOCK_BATCH_MQ, 0),
            body.to_json().as_bytes(),
        )
    };
    for n in [200_000, 5_000] {
        let (r, _) = lock(
            &mut c,
            (0..n)
                .map(|q| MessageQueue::new("OrderTopic", "broker-a", q))
                .collect(),
        );
        assert_eq!(r.code, codes::SYSTEM_ERROR, "{n} queues");
        assert!(r.remark.unwrap().contains("limit"));
    }
    let (r, body) = lock(
        &mut c,
        vec![
            MessageQueue::new("OrderTopic", "broker-a", 0),
            MessageQueue::new("OrderTopic", "broker-a", 9999),
            MessageQueue::new("NoSuchTopic", "broker-a", 0),
        ],
    );
    assert_eq!(r.code, codes::SUCCESS);
    assert_eq!(
        LockBatchResponseBody::from_json(&body)
            .unwrap()
            .lock_ok_mq_set,
        [MessageQueue::new("OrderTopic", "broker-a", 0)]
    );
    // the server goes on
    assert_eq!(cluster_info_code(&mut s.client()), codes::SUCCESS);
    drop(c);
    assert!(s.stop().success());
    let groups = std::fs::read_to_string(ov.join("config/subscriptionGroup.json")).unwrap();
    let topics = std::fs::read_to_string(ov.join("config/topics.json")).unwrap();
    assert!(groups.contains("Real0") && topics.contains("%RETRY%Real0"));
    for text in [&groups, &topics] {
        assert!(!text.contains("Hostile") && !text.contains("Ghost"));
    }
}

/// Far more idle connections than `--max-connections`: a real client still gets in, and the
/// oldest idle connections are the ones closed.
#[test]
fn idle_connections_past_the_limit_make_room_for_a_real_client() {
    let s = start(Path::new(FIXTURE), &["--max-connections", "8"]);
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(&s.addr).unwrap())
        .collect();
    assert_eq!(cluster_info_code(&mut s.client()), codes::SUCCESS);
    for (i, mut t) in idle.into_iter().take(30).enumerate() {
        t.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut b = [0u8; 1];
        let closed = match t.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        };
        assert!(closed, "idle connection {i} stayed open");
    }
    assert!(s.stop().success());
}

/// Two files' bytes equal; where not, the first place they differ and the lengths.
fn assert_same_bytes(got: &[u8], want: &[u8]) {
    let first = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(
        first.is_none() && got.len() == want.len(),
        "differ at byte {first:?} (lengths {} and {})",
        got.len(),
        want.len()
    );
}
