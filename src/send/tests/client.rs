//! One connection: requests in flight together and answered in any order, a peer that closes
//! or stays silent, a frame over the limit, the request header a 4.9.8 client writes.

use std::time::{Duration, Instant};

use super::*;
use crate::send::client::{ClientOptions, Connection, Pool};
use crate::send::producer::SendError;

fn request(code: i32) -> RemotingCommand {
    RemotingCommand::request(code, 0)
}

#[tokio::test]
async fn a_request_is_written_as_a_java_4_9_8_client_writes_it() {
    let peer = Peer::start(|req| answer(req, codes::SUCCESS, "")).await;
    let conn = Connection::connect(&peer.addr, &ClientOptions::default())
        .await
        .unwrap();
    let mut cmd = request(codes::GET_ROUTEINFO_BY_TOPIC);
    cmd.ext_fields.insert("topic", "TopicTest");
    let resp = conn
        .request(cmd.clone(), &[], Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(resp.code(), codes::SUCCESS);
    let resp2 = conn
        .request(cmd, b"body", Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(resp2.command.opaque, 1);
    let got = peer.requests();
    assert_eq!(got.len(), 2);
    let first = &got[0].cmd;
    assert_eq!(first.language, crate::remoting::Language::Java);
    assert_eq!(first.version, 409);
    assert_eq!(first.serialize_type, crate::remoting::SerializeType::Json);
    assert_eq!(first.flag, 0);
    assert_eq!(first.opaque, 0);
    // byte for byte the header of PROTOCOL.md 1.2 (opaque 0 here)
    assert_eq!(
        crate::remoting::command::json::encode(first),
        r#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":0,"serializeTypeCurrentRPC":"JSON","version":409}"#
    );
    assert_eq!(got[1].body, b"body");
    assert_eq!(got[1].cmd.opaque, 1);
}

#[tokio::test]
async fn answers_in_any_order_reach_their_own_requests_and_do_not_wait_for_each_other() {
    // the first request is answered 400 ms late, the second at once
    let peer = Peer::start(|req| {
        let mut cmd = RemotingCommand::response_to(&req.cmd, codes::SUCCESS, None);
        cmd.remark = Some(format!("answer to {}", req.ext("n").unwrap_or("?")));
        if req.nth == 0 {
            Reply::Later(Duration::from_millis(400), cmd, Vec::new())
        } else {
            Reply::Answer(cmd, Vec::new())
        }
    })
    .await;
    let conn = Connection::connect(&peer.addr, &ClientOptions::default())
        .await
        .unwrap();
    let ask = |n: &str| {
        let mut cmd = request(codes::GET_MAX_OFFSET);
        cmd.ext_fields.insert("n", n);
        let conn = &conn;
        async move {
            let r = conn.request(cmd, &[], Duration::from_secs(3)).await;
            (r, Instant::now())
        }
    };
    let started = Instant::now();
    let ((slow, slow_at), (fast, fast_at)) = tokio::join!(ask("slow"), async {
        // let the slow one be written first
        tokio::time::sleep(Duration::from_millis(50)).await;
        ask("fast").await
    });
    assert_eq!(slow.unwrap().remark(), "answer to slow");
    assert_eq!(fast.unwrap().remark(), "answer to fast");
    assert!(fast_at < slow_at, "the fast answer waited for the slow one");
    assert!(fast_at - started < Duration::from_millis(300));
}

#[tokio::test]
async fn a_peer_closing_mid_request_fails_every_request_in_flight_at_once() {
    // two requests stay unanswered; the third makes the peer close the connection
    let peer = Peer::start(|req| {
        if req.nth < 2 {
            Reply::Silent
        } else {
            Reply::Close
        }
    })
    .await;
    let conn = Connection::connect(&peer.addr, &ClientOptions::default())
        .await
        .unwrap();
    let started = Instant::now();
    let long = Duration::from_secs(20);
    let (a, b, c) = tokio::join!(
        conn.request(request(codes::GET_MAX_OFFSET), &[], long),
        conn.request(request(codes::GET_MAX_OFFSET), &[], long),
        async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            conn.request(request(codes::GET_MAX_OFFSET), &[], long)
                .await
        }
    );
    for r in [a, b, c] {
        let e = r.unwrap_err();
        assert!(
            matches!(&e, SendError::Transport { what, .. } if what.contains("closed by the peer")),
            "{e}"
        );
        assert!(e.is_retriable());
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(conn.is_closed());
    // later requests fail at once too
    let e = conn
        .request(request(codes::GET_MAX_OFFSET), &[], long)
        .await
        .unwrap_err();
    assert!(matches!(e, SendError::Transport { .. }), "{e}");
}

#[tokio::test]
async fn a_pool_opens_a_new_connection_after_the_old_one_ended() {
    let peer = Peer::start(|req| {
        if req.nth == 0 {
            Reply::Close
        } else {
            answer(req, codes::SUCCESS, "")
        }
    })
    .await;
    let pool = Pool::new(ClientOptions::default());
    let t = Duration::from_secs(2);
    let e = pool
        .request(&peer.addr, request(codes::GET_MAX_OFFSET), &[], t)
        .await
        .unwrap_err();
    assert!(matches!(e, SendError::Transport { .. }), "{e}");
    let ok = pool
        .request(&peer.addr, request(codes::GET_MAX_OFFSET), &[], t)
        .await
        .unwrap();
    assert_eq!(ok.code(), codes::SUCCESS);
}

#[tokio::test]
async fn a_frame_over_the_limit_is_refused_from_its_length_before_its_bytes_are_read() {
    // the peer announces a 1 GiB answer and sends only its first 8 bytes
    let peer = Peer::start(|_| {
        let mut raw = Vec::new();
        raw.extend_from_slice(&(1u32 << 30).to_be_bytes());
        raw.extend_from_slice(&[0, 0, 0, 10]);
        Reply::Raw(raw)
    })
    .await;
    let options = ClientOptions {
        codec: FrameCodec::new(1024 * 1024),
        ..ClientOptions::default()
    };
    let conn = Connection::connect(&peer.addr, &options).await.unwrap();
    let started = Instant::now();
    let e = conn
        .request(request(codes::GET_MAX_OFFSET), &[], Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, SendError::Protocol { what, .. } if what.contains("exceeds the maximum of 1048576")),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(conn.is_closed());
}

#[tokio::test]
async fn a_frame_over_the_limit_is_not_written_either() {
    let peer = Peer::start(|req| answer(req, codes::SUCCESS, "")).await;
    let options = ClientOptions {
        codec: FrameCodec::new(1024),
        ..ClientOptions::default()
    };
    let conn = Connection::connect(&peer.addr, &options).await.unwrap();
    let e = conn
        .request(
            request(codes::SEND_MESSAGE_V2),
            &[7u8; 2000],
            Duration::from_secs(2),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, SendError::Invalid(_)), "{e}");
    // nothing went out, and the connection still serves
    assert!(conn
        .request(request(codes::GET_MAX_OFFSET), &[], Duration::from_secs(2))
        .await
        .is_ok());
    assert_eq!(peer.requests().len(), 1);
}

#[tokio::test]
async fn an_answer_that_never_comes_times_out_and_the_connection_still_serves() {
    let peer = Peer::start(|req| {
        if req.nth == 0 {
            Reply::Silent
        } else {
            answer(req, codes::SUCCESS, "")
        }
    })
    .await;
    let conn = Connection::connect(&peer.addr, &ClientOptions::default())
        .await
        .unwrap();
    let started = Instant::now();
    let e = conn
        .request(
            request(codes::GET_MAX_OFFSET),
            &[],
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(&e, SendError::Transport { what, .. } if what.contains("no answer to request 30 (GET_MAX_OFFSET) within 200 ms")),
        "{e}"
    );
    assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(2));
    let ok = conn
        .request(request(codes::GET_MAX_OFFSET), &[], Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(ok.code(), codes::SUCCESS);
}

#[tokio::test]
async fn a_peer_that_does_not_listen_is_a_transport_error() {
    // a port just freed: nothing listens there
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let e = Connection::connect(&addr, &ClientOptions::default())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&e, SendError::Transport { addr: a, what } if *a == addr && what.starts_with("connect")),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_share_one_connection_without_waiting_for_each_other() {
    // each answer takes 20 ms: one at a time, 96 requests would take about 2 s
    let peer = Peer::start(|req| {
        Reply::Later(
            Duration::from_millis(20),
            RemotingCommand::response_to(&req.cmd, codes::SUCCESS, None),
            Vec::new(),
        )
    })
    .await;
    let options = ClientOptions {
        max_in_flight: 16,
        ..ClientOptions::default()
    };
    let conn = std::sync::Arc::new(Connection::connect(&peer.addr, &options).await.unwrap());
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..96 {
        let conn = conn.clone();
        tasks.spawn(async move {
            conn.request(
                request(codes::GET_MAX_OFFSET),
                &[1u8; 1000],
                Duration::from_secs(5),
            )
            .await
        });
    }
    let mut opaques = std::collections::BTreeSet::new();
    while let Some(r) = tasks.join_next().await {
        opaques.insert(r.unwrap().unwrap().command.opaque);
    }
    assert_eq!(opaques.len(), 96, "every answer reached its own request");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_producer_is_shared_between_tasks() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<crate::send::producer::Producer>();
    send_sync::<Pool>();
    let producer: Option<&crate::send::producer::Producer> = None;
    if let Some(p) = producer {
        send(&p.send(&[]));
        send(&p.route("T"));
        send(&p.create_topic("T", 1, 6, false));
    }
}
