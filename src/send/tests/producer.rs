//! The send rules against a fake name server and broker: the V2 header of a single and a batch
//! send, the batch body, busy answers backed off, retried and refused codes, queues pinned or
//! picked, the ACL signature.

use std::time::{Duration, Instant};

use super::*;
use crate::remoting::acl;
use crate::remoting::batch;
use crate::send::outgoing::SendStatus;
use crate::send::producer::{AclKeys, Producer, SendError};

const TOPIC: &str = "TopicTest";

/// A peer that routes every topic to itself (`broker-a`, 4 queues) and answers sends with
/// `on_send`.
async fn broker(on_send: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Peer {
    Peer::start(move |req| match req.cmd.code {
        codes::GET_ROUTEINFO_BY_TOPIC => success(req, route_body(&[("broker-a", &req.addr, 4, 6)])),
        codes::SEND_MESSAGE_V2 | codes::SEND_BATCH_MESSAGE => on_send(req),
        _ => answer(req, codes::REQUEST_CODE_NOT_SUPPORTED, ""),
    })
    .await
}

fn ext_fields(req: &Request) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = req
        .cmd
        .ext_fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = p
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn one_message_goes_out_as_send_message_v2_with_the_java_clients_header() {
    let peer = broker(|req| send_ok(req, 41)).await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let mut m = message(7, TOPIC, b"hello");
    m.queue_id = Some(2);
    m.flag = 5;
    m.sys_flag = 0x1 | 0x100;
    let acked = producer.send(std::slice::from_ref(&m)).await.unwrap();
    let sends = peer.with_code(codes::SEND_MESSAGE_V2);
    assert_eq!(sends.len(), 1);
    let req = &sends[0];
    assert_eq!(req.body, b"hello");
    assert_eq!(
        ext_fields(req),
        pairs(&[
            ("a", "RMQSTORE_SEND"),
            ("b", TOPIC),
            ("c", "TBW102"),
            ("d", "4"),
            ("e", "2"),
            ("f", "257"),
            ("g", "1700000000007"),
            ("h", "5"),
            ("i", "UNIQ_KEY\u{1}ID7\u{2}TAGS\u{1}t\u{2}WAIT\u{1}true"),
            ("j", "0"),
            ("k", "false"),
            ("m", "false"),
            ("n", "broker-a"),
        ])
    );
    assert_eq!(
        acked,
        vec![crate::send::Acked {
            key: 7,
            broker: "broker-a".into(),
            queue_id: 2,
            queue_offset: 41,
            offset_msg_id: "0A000001000027DA0000000000000000".into(),
            status: SendStatus::SendOk,
        }]
    );
    producer.shutdown().await;
}

#[tokio::test]
async fn a_retry_topic_message_carries_its_reconsume_times_and_a_half_message_its_flag() {
    let peer = broker(|req| send_ok(req, 0)).await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let mut retry = message(1, "%RETRY%g1", b"r");
    retry.reconsume_times = 3;
    retry.max_reconsume_times = Some(16);
    retry.properties = String::new();
    producer.send(&[retry]).await.unwrap();
    let mut half = message(2, TOPIC, b"h");
    half.properties = "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}pg\u{2}".into();
    half.reconsume_times = 9; // only a retry topic's count is sent
    producer.send(&[half]).await.unwrap();
    let sends = peer.with_code(codes::SEND_MESSAGE_V2);
    assert_eq!(sends[0].ext("j"), Some("3"));
    assert_eq!(sends[0].ext("l"), Some("16"));
    assert_eq!(sends[0].ext("i"), Some("WAIT\u{1}true"));
    assert_eq!(sends[1].ext("j"), Some("0"));
    assert_eq!(sends[1].ext("l"), None);
    assert_eq!(sends[1].ext("f"), Some("4"));
    // a properties string ending with its separator gets no second one
    assert_eq!(
        sends[1].ext("i"),
        Some("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}pg\u{2}WAIT\u{1}true")
    );
}

#[tokio::test]
async fn a_batch_goes_out_as_send_batch_message_with_the_wrappers_header_and_one_ack_each() {
    let peer = broker(|req| {
        stored(
            req,
            codes::SUCCESS,
            "0A00000100002A9F0000000000000100,0A00000100002A9F0000000000000180,0A00000100002A9F0000000000000200",
            1,
            90,
        )
    })
    .await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let mut messages: Vec<Outgoing> = (1..=3).map(|k| message(k, TOPIC, b"xyz")).collect();
    for m in &mut messages {
        m.queue_id = Some(1);
        m.flag = m.key as i32 * 10;
    }
    messages[2].body = Vec::new();
    let acked = producer.send(&messages).await.unwrap();
    let sends = peer.with_code(codes::SEND_BATCH_MESSAGE);
    assert_eq!(sends.len(), 1);
    let req = &sends[0];
    assert_eq!(
        ext_fields(req),
        pairs(&[
            ("a", "RMQSTORE_SEND"),
            ("b", TOPIC),
            ("c", "TBW102"),
            ("d", "4"),
            ("e", "1"),
            ("f", "0"),
            ("g", "1700000000001"),
            ("h", "0"),
            ("i", "WAIT\u{1}true"),
            ("j", "0"),
            ("k", "false"),
            ("m", "true"),
            ("n", "broker-a"),
        ])
    );
    let items = batch::decode(&req.body).unwrap();
    assert_eq!(items.len(), 3);
    for (item, m) in items.iter().zip(&messages) {
        assert_eq!(item.flag, m.flag);
        assert_eq!(item.body, m.body.as_slice());
        assert_eq!(item.properties, m.properties.as_bytes());
    }
    // the body is exactly the three blobs
    let blob = |m: &Outgoing| batch::item_len(m.body.len(), m.properties.len());
    assert_eq!(req.body.len(), messages.iter().map(blob).sum::<usize>());
    let offsets: Vec<(u64, i64, &str)> = acked
        .iter()
        .map(|a| (a.key, a.queue_offset, a.offset_msg_id.as_str()))
        .collect();
    assert_eq!(
        offsets,
        vec![
            (1, 90, "0A00000100002A9F0000000000000100"),
            (2, 91, "0A00000100002A9F0000000000000180"),
            (3, 92, "0A00000100002A9F0000000000000200"),
        ]
    );
    assert!(acked
        .iter()
        .all(|a| a.queue_id == 1 && a.broker == "broker-a"));
}

#[tokio::test]
async fn a_batch_that_breaks_a_batch_rule_is_refused_before_anything_is_sent() {
    let peer = broker(|req| send_ok(req, 0)).await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let two = |f: &dyn Fn(&mut Outgoing)| {
        let mut v = vec![message(1, TOPIC, b"a"), message(2, TOPIC, b"b")];
        f(&mut v[1]);
        v
    };
    let cases: Vec<Vec<Outgoing>> = vec![
        two(&|m| m.topic = "Other".into()),
        two(&|m| m.queue_id = Some(3)),
        two(&|m| m.delayed = true),
        two(&|m| m.sys_flag = 1),
        two(&|m| m.properties = "p".repeat(40_000)),
        vec![message(1, "%RETRY%g", b"a"), message(2, "%RETRY%g", b"b")],
    ];
    for batch in cases {
        let e = producer.send(&batch).await.unwrap_err();
        assert!(matches!(e, SendError::Invalid(_)), "{e}");
    }
    assert!(peer.with_code(codes::SEND_BATCH_MESSAGE).is_empty());
    assert_eq!(producer.send(&[]).await.unwrap(), vec![]);
}

#[tokio::test]
async fn a_busy_broker_is_backed_off_then_acked() {
    let peer = broker(|req| match req.nth {
        0 => answer(
            req,
            codes::SYSTEM_BUSY,
            "[REJECTREQUEST]system busy, start flow control for a while",
        ),
        1 => answer(
            req,
            codes::SYSTEM_ERROR,
            "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
        ),
        _ => send_ok(req, 3),
    })
    .await;
    let mut c = config(&peer.addr);
    c.retries = 0; // busy answers are not attempts
    let producer = Producer::connect(c).await.unwrap();
    let started = Instant::now();
    let acked = producer.send(&[message(1, TOPIC, b"b")]).await.unwrap();
    let took = started.elapsed();
    assert_eq!(acked[0].queue_offset, 3);
    assert_eq!(peer.with_code(codes::SEND_MESSAGE_V2).len(), 3);
    // 50 ms then 100 ms of pause
    assert!(took >= Duration::from_millis(150), "{took:?}");
}

#[tokio::test]
async fn a_broker_busy_past_the_budget_is_refused_as_worth_another_try_later() {
    let peer = broker(|req| answer(req, codes::FLOW_CONTROL, "flow control")).await;
    let mut c = config(&peer.addr);
    c.busy_budget = Duration::from_millis(500);
    let producer = Producer::connect(c).await.unwrap();
    let started = Instant::now();
    let e = producer.send(&[message(1, TOPIC, b"b")]).await.unwrap_err();
    assert!(matches!(e, SendError::Refused { code: 215, .. }), "{e}");
    assert!(e.is_retriable());
    assert!(started.elapsed() < Duration::from_millis(1500));
    // 50 + 100 + 200 ms of pauses fit the budget, the next does not
    assert_eq!(peer.with_code(codes::SEND_MESSAGE_V2).len(), 4);
}

#[tokio::test]
async fn a_topic_the_name_server_does_not_know_is_topic_not_exist() {
    let peer = Peer::start(|req| {
        answer(
            req,
            codes::TOPIC_NOT_EXIST,
            "No topic route info in name server for the topic: Missing",
        )
    })
    .await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let e = producer.route("Missing").await.unwrap_err();
    assert_eq!(e, SendError::TopicNotExist("Missing".into()));
    let e = producer
        .send(&[message(1, "Missing", b"x")])
        .await
        .unwrap_err();
    assert_eq!(e, SendError::TopicNotExist("Missing".into()));
    assert!(!e.is_retriable());
}

#[tokio::test]
async fn a_broker_without_the_topic_is_retried_then_the_topic_is_missing() {
    let peer =
        broker(|req| answer(req, codes::TOPIC_NOT_EXIST, "topic[TopicTest] not exist")).await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let e = producer.send(&[message(1, TOPIC, b"x")]).await.unwrap_err();
    assert_eq!(e, SendError::TopicNotExist(TOPIC.into()));
    assert_eq!(peer.with_code(codes::SEND_MESSAGE_V2).len(), 3);
    // the route was asked again before each retry
    assert_eq!(peer.with_code(codes::GET_ROUTEINFO_BY_TOPIC).len(), 3);
}

#[tokio::test]
async fn a_code_the_client_does_not_retry_fails_at_once() {
    let peer = broker(|req| {
        answer(
            req,
            codes::MESSAGE_ILLEGAL,
            "the message body size over max value",
        )
    })
    .await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let e = producer.send(&[message(1, TOPIC, b"x")]).await.unwrap_err();
    assert!(
        matches!(&e, SendError::Refused { code: 13, name, .. } if name == "MESSAGE_ILLEGAL"),
        "{e}"
    );
    assert_eq!(peer.with_code(codes::SEND_MESSAGE_V2).len(), 1);
}

#[tokio::test]
async fn a_stored_answer_that_is_not_send_ok_is_returned_with_its_status() {
    let peer = broker(|req| stored(req, codes::FLUSH_DISK_TIMEOUT, "AB", 0, 5)).await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let acked = producer.send(&[message(1, TOPIC, b"x")]).await.unwrap();
    assert_eq!(acked[0].status, SendStatus::FlushDiskTimeout);
    assert_eq!(peer.with_code(codes::SEND_MESSAGE_V2).len(), 1);
}

#[tokio::test]
async fn a_broker_closing_on_every_send_fails_the_send_after_its_attempts_without_hanging() {
    let peer = broker(|_| Reply::Close).await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let started = Instant::now();
    let e = producer.send(&[message(1, TOPIC, b"x")]).await.unwrap_err();
    assert!(matches!(e, SendError::Transport { .. }), "{e}");
    assert!(e.is_retriable());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(peer.with_code(codes::SEND_MESSAGE_V2).len(), 3);
}

/// A broker that goes away mid-send: the first attempt's connection closes (the message may be
/// stored), then the name server has no route for the topic. The send ends in doubt, not as a
/// missing topic, so the caller does not record the message as refused.
#[tokio::test]
async fn a_refusal_after_an_attempt_that_may_have_been_stored_is_a_transport_failure() {
    let peer = Peer::start(|req| match req.cmd.code {
        codes::GET_ROUTEINFO_BY_TOPIC if req.nth == 0 => {
            success(req, route_body(&[("broker-a", &req.addr, 4, 6)]))
        }
        codes::GET_ROUTEINFO_BY_TOPIC => answer(req, codes::TOPIC_NOT_EXIST, "no route"),
        _ => Reply::Close,
    })
    .await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let e = producer.send(&[message(1, TOPIC, b"x")]).await.unwrap_err();
    assert!(matches!(e, SendError::Transport { .. }), "{e}");
    assert!(
        e.may_be_stored() && e.to_string().contains("does not exist"),
        "{e}"
    );
    assert_eq!(peer.with_code(codes::SEND_MESSAGE_V2).len(), 1);
}

#[tokio::test]
async fn a_broker_that_never_answers_uses_up_the_send_timeout() {
    let peer = broker(|_| Reply::Silent).await;
    let mut c = config(&peer.addr);
    c.timeout = Duration::from_millis(300);
    let producer = Producer::connect(c).await.unwrap();
    let started = Instant::now();
    let e = producer.send(&[message(1, TOPIC, b"x")]).await.unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(&e, SendError::Transport { what, .. } if what.contains("no answer")),
        "{e}"
    );
    // the 300 ms budget covers the retries too
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(1),
        "{took:?}"
    );
}

/// Two brokers on two peers: `broker-a` (2 queues) answers sends with `a`, `broker-b`
/// (4 queues) with `b`; the name server is on the first.
async fn two_brokers(
    a: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    b: impl Fn(&Request) -> Reply + Send + Sync + 'static,
) -> (Peer, Peer) {
    let peer_b = Peer::start(b).await;
    let addr_b = peer_b.addr.clone();
    let peer_a = Peer::start(move |req| match req.cmd.code {
        codes::GET_ROUTEINFO_BY_TOPIC => success(
            req,
            route_body(&[("broker-b", &addr_b, 4, 6), ("broker-a", &req.addr, 2, 6)]),
        ),
        _ => a(req),
    })
    .await;
    (peer_a, peer_b)
}

#[tokio::test]
async fn a_failed_send_is_retried_on_the_other_broker() {
    let (a, b) = two_brokers(
        |req| answer(req, codes::SYSTEM_ERROR, "store error"),
        |req| send_ok(req, 8),
    )
    .await;
    let producer = Producer::connect(config(&a.addr)).await.unwrap();
    for k in 0..6 {
        let acked = producer.send(&[message(k, TOPIC, b"x")]).await.unwrap();
        assert_eq!(acked[0].broker, "broker-b");
    }
    // every send that tried broker-a went to broker-b next
    let on_a = a.with_code(codes::SEND_MESSAGE_V2).len();
    assert_eq!(b.with_code(codes::SEND_MESSAGE_V2).len(), 6);
    assert!(on_a >= 1, "the round robin never picked broker-a");
}

#[tokio::test]
async fn a_pinned_queue_goes_to_the_first_broker_that_has_it_and_stays_there() {
    let (a, b) = two_brokers(
        |req| answer(req, codes::SERVICE_NOT_AVAILABLE, "disk full"),
        |req| send_ok(req, 8),
    )
    .await;
    let producer = Producer::connect(config(&a.addr)).await.unwrap();
    let route = producer.route(TOPIC).await.unwrap();
    assert_eq!(route.brokers(), vec!["broker-a", "broker-b"]);
    assert_eq!(route.write_queue_nums, 4);
    // queue 3 is only on broker-b
    let mut m = message(1, TOPIC, b"x");
    m.queue_id = Some(3);
    let acked = producer.send(std::slice::from_ref(&m)).await.unwrap();
    assert_eq!(
        (acked[0].broker.as_str(), acked[0].queue_id),
        ("broker-b", 3)
    );
    // queue 1 is on both: broker-a, first by name, takes it, and keeps it through the retries
    m.queue_id = Some(1);
    let e = producer.send(&[m.clone()]).await.unwrap_err();
    assert!(matches!(e, SendError::Refused { code: 14, .. }), "{e}");
    let on_a = a.with_code(codes::SEND_MESSAGE_V2);
    assert_eq!(on_a.len(), 3);
    assert!(on_a
        .iter()
        .all(|r| r.ext("e") == Some("1") && r.ext("n") == Some("broker-a")));
    assert_eq!(b.with_code(codes::SEND_MESSAGE_V2).len(), 1);
    // no broker has queue 9
    m.queue_id = Some(9);
    let e = producer.send(&[m]).await.unwrap_err();
    assert_eq!(
        e,
        SendError::NoQueue {
            topic: TOPIC.into(),
            queue_id: Some(9)
        }
    );
}

#[tokio::test]
async fn unpinned_messages_go_round_the_routes_queues() {
    let peer = broker(|req| send_ok(req, 0)).await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    for k in 0..8 {
        producer.send(&[message(k, TOPIC, b"x")]).await.unwrap();
    }
    let queues: Vec<i32> = peer
        .with_code(codes::SEND_MESSAGE_V2)
        .iter()
        .map(|r| r.ext("e").unwrap().parse().unwrap())
        .collect();
    // consecutive queues, wrapping at 4: each queue twice
    for w in queues.windows(2) {
        assert_eq!(w[1], (w[0] + 1) % 4, "{queues:?}");
    }
}

#[tokio::test]
async fn every_request_is_signed_as_the_acl_client_hook_signs_it() {
    let peer = broker(|req| send_ok(req, 0)).await;
    let mut c = config(&peer.addr);
    c.acl = Some(AclKeys {
        access_key: "RocketMQ".into(),
        secret_key: "12345678".into(),
    });
    let producer = Producer::connect(c).await.unwrap();
    producer.send(&[message(1, TOPIC, b"body!")]).await.unwrap();
    // the route request is PROTOCOL.md 7.1's first vector
    let route = &peer.with_code(codes::GET_ROUTEINFO_BY_TOPIC)[0];
    assert_eq!(route.ext("AccessKey"), Some("RocketMQ"));
    assert_eq!(route.ext("Signature"), Some("0jiwhsaYp5ObE5GObbZH1I8/FT4="));
    // the send: values sorted by key (AccessKey first, upper case before lower), then the body
    let send = &peer.with_code(codes::SEND_MESSAGE_V2)[0];
    let born = "1700000000001";
    let props = "UNIQ_KEY\u{1}ID1\u{2}TAGS\u{1}t\u{2}WAIT\u{1}true";
    let queue = send.ext("e").unwrap();
    let content = format!(
        "RocketMQRMQSTORE_SEND{TOPIC}TBW1024{queue}0{born}0{props}0falsefalsebroker-abody!"
    );
    assert_eq!(
        acl::signing_content(&send.cmd.ext_fields, &send.body, &[]),
        content.as_bytes()
    );
    assert_eq!(
        send.ext("Signature"),
        Some(acl::signature(content.as_bytes(), "12345678").as_str())
    );
    acl::verify(&send.cmd.ext_fields, &send.body, "12345678").unwrap();
    assert!(acl::verify(&send.cmd.ext_fields, b"other body", "12345678").is_err());
}
