//! Routes: the publishable queues of a name server's route, a route built from one broker's
//! topic table (`--broker`), and topic creation on a cluster's masters or on the one broker.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;
use crate::format::config::{to_fastjson_compact, DataVersion, TopicConfig, TopicConfigs};
use crate::remoting::body::ClusterInfo;
use crate::send::producer::{Producer, SendError};
use crate::send::route::{PublishQueue, TopicRoute};

fn queue(broker: &str, addr: &str, queue_id: i32) -> PublishQueue {
    PublishQueue {
        broker_name: broker.into(),
        broker_addr: addr.into(),
        queue_id,
    }
}

fn route_data() -> TopicRouteData {
    let broker = |name: &str, ids: &[(i64, &str)]| BrokerData {
        cluster: "C".into(),
        broker_name: name.into(),
        broker_addrs: ids.iter().map(|(i, a)| (*i, a.to_string())).collect(),
    };
    let queues = |name: &str, nums: i32, perm: i32| QueueData {
        broker_name: name.into(),
        read_queue_nums: nums,
        write_queue_nums: nums,
        perm,
        topic_syn_flag: 0,
    };
    TopicRouteData {
        order_topic_conf: None,
        queue_datas: vec![
            queues("b", 2, 6),
            queues("a", 3, 7),
            queues("c", 4, 4),
            queues("d", 4, 6),
        ],
        broker_datas: vec![
            broker("a", &[(0, "A:1"), (1, "A:2")]),
            broker("b", &[(0, "B:1")]),
            broker("c", &[(0, "C:1")]),
            broker("d", &[(1, "D:2")]),
        ],
        filter_server_table: Default::default(),
    }
}

#[test]
fn a_routes_publishable_queues_are_the_writable_ones_of_masters_brokers_by_name() {
    let route = TopicRoute::from_route_data("T", &route_data());
    // c is read-only, d has no master
    assert_eq!(
        route.queues,
        vec![
            queue("a", "A:1", 0),
            queue("a", "A:1", 1),
            queue("a", "A:1", 2),
            queue("b", "B:1", 0),
            queue("b", "B:1", 1),
        ]
    );
    assert_eq!(route.write_queue_nums, 3);
    assert!(!route.order);
    assert_eq!(route.brokers(), vec!["a", "b"]);
    assert_eq!(route.pinned(2), Some(&queue("a", "A:1", 2)));
    assert_eq!(route.pinned(3), None);
}

#[test]
fn an_orderly_topics_queues_come_from_its_order_conf_in_the_order_given() {
    let mut data = route_data();
    data.order_topic_conf = Some("b:2;a:1;d:4".into());
    let route = TopicRoute::from_route_data("T", &data);
    // d has no master to send to
    assert_eq!(
        route.queues,
        vec![
            queue("b", "B:1", 0),
            queue("b", "B:1", 1),
            queue("a", "A:1", 0)
        ]
    );
    assert!(route.order);
    assert_eq!(route.write_queue_nums, 2);
}

fn topics_body() -> Vec<u8> {
    let mut topics = TopicConfigs::new(DataVersion::new(3, 1_700_000_000_000));
    let mut t1 = TopicConfig::new("T1");
    t1.write_queue_nums = 8;
    t1.read_queue_nums = 8;
    t1.order = true;
    topics.insert(t1);
    let mut ro = TopicConfig::new("ReadOnly");
    ro.perm = 4;
    topics.insert(ro);
    to_fastjson_compact(&topics.to_json()).into_bytes()
}

#[tokio::test]
async fn with_a_broker_the_route_comes_from_its_topic_table_under_its_own_name() {
    let created = Arc::new(AtomicBool::new(false));
    let peer = {
        let created = created.clone();
        Peer::start(move |req| match req.cmd.code {
            codes::GET_BROKER_CONFIG => success(
                req,
                b"brokerClusterName=C1\nbrokerName=broker-x\nbrokerId=0\n".to_vec(),
            ),
            codes::GET_ALL_TOPIC_CONFIG => {
                let mut body = topics_body();
                if created.load(Ordering::SeqCst) {
                    let mut all = TopicConfigs::from_bytes(&body).unwrap();
                    all.insert(TopicConfig::new("New"));
                    body = to_fastjson_compact(&all.to_json()).into_bytes();
                }
                success(req, body)
            }
            codes::UPDATE_AND_CREATE_TOPIC => {
                created.store(true, Ordering::SeqCst);
                success(req, Vec::new())
            }
            codes::SEND_MESSAGE_V2 => send_ok(req, 0),
            _ => answer(req, codes::REQUEST_CODE_NOT_SUPPORTED, ""),
        })
        .await
    };
    let mut c = config("unused:1");
    c.namesrv.clear();
    c.broker = Some(peer.addr.clone());
    let producer = Producer::connect(c).await.unwrap();
    assert_eq!(producer.broker_name(), Some("broker-x"));
    let route = producer.route("T1").await.unwrap();
    assert_eq!(route.queues.len(), 8);
    assert!(route
        .queues
        .iter()
        .enumerate()
        .all(|(i, q)| q.queue_id == i as i32
            && q.broker_name == "broker-x"
            && q.broker_addr == peer.addr));
    assert!(route.order);
    assert_eq!(
        producer.route("Missing").await.unwrap_err(),
        SendError::TopicNotExist("Missing".into())
    );
    let e = producer
        .send(&[message(1, "ReadOnly", b"x")])
        .await
        .unwrap_err();
    assert_eq!(
        e,
        SendError::NoQueue {
            topic: "ReadOnly".into(),
            queue_id: None
        }
    );
    let acked = producer.send(&[message(1, "T1", b"x")]).await.unwrap();
    assert_eq!(acked[0].broker, "broker-x");
    assert_eq!(
        peer.with_code(codes::SEND_MESSAGE_V2)[0].ext("n"),
        Some("broker-x")
    );
    // creation goes to the broker, and the topic is there after it
    producer.create_topic("New", 16, 6, false).await.unwrap();
    assert_eq!(producer.route("New").await.unwrap().queues.len(), 16);
    assert_eq!(peer.with_code(codes::UPDATE_AND_CREATE_TOPIC).len(), 1);
}

#[tokio::test]
async fn a_broker_that_does_not_say_its_name_is_named_by_its_address() {
    let peer = Peer::start(|req| answer(req, codes::REQUEST_CODE_NOT_SUPPORTED, "")).await;
    let mut c = config("unused:1");
    c.broker = Some(peer.addr.clone());
    let producer = Producer::connect(c).await.unwrap();
    assert_eq!(producer.broker_name(), Some(peer.addr.as_str()));
}

fn cluster_body(clusters: &[(&str, &[(&str, &str)])]) -> Vec<u8> {
    let mut info = ClusterInfo::default();
    for (cluster, brokers) in clusters {
        let mut names = Vec::new();
        for (name, addr) in *brokers {
            names.push(name.to_string());
            info.broker_addr_table.insert(
                name.to_string(),
                BrokerData {
                    cluster: cluster.to_string(),
                    broker_name: name.to_string(),
                    broker_addrs: [(0, addr.to_string())].into_iter().collect(),
                },
            );
        }
        info.cluster_addr_table.insert(cluster.to_string(), names);
    }
    info.to_json().into_bytes()
}

#[tokio::test]
async fn a_topic_is_created_on_the_clusters_masters_and_waited_for_on_the_name_server() {
    // the name server routes the topic from its third route request after the creation on
    let created = Arc::new(AtomicBool::new(false));
    let asked_after = Arc::new(AtomicUsize::new(0));
    let peer = {
        let (created, asked_after) = (created.clone(), asked_after.clone());
        Peer::start(move |req| match req.cmd.code {
            codes::GET_BROKER_CLUSTER_INFO => success(
                req,
                cluster_body(&[("DefaultCluster", &[("broker-a", &req.addr)])]),
            ),
            codes::UPDATE_AND_CREATE_TOPIC => {
                created.store(true, Ordering::SeqCst);
                success(req, Vec::new())
            }
            codes::PUT_KV_CONFIG => success(req, Vec::new()),
            codes::GET_ROUTEINFO_BY_TOPIC => {
                if created.load(Ordering::SeqCst) && asked_after.fetch_add(1, Ordering::SeqCst) >= 2
                {
                    success(req, route_body(&[("broker-a", &req.addr, 8, 6)]))
                } else {
                    answer(req, codes::TOPIC_NOT_EXIST, "No topic route info")
                }
            }
            _ => answer(req, codes::REQUEST_CODE_NOT_SUPPORTED, ""),
        })
        .await
    };
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    assert!(matches!(
        producer.route("Orders").await,
        Err(SendError::TopicNotExist(_))
    ));
    producer.create_topic("Orders", 8, 6, true).await.unwrap();
    assert_eq!(producer.route("Orders").await.unwrap().queues.len(), 8);
    let create = &peer.with_code(codes::UPDATE_AND_CREATE_TOPIC)[0];
    let mut ext: Vec<(&str, &str)> = create.cmd.ext_fields.iter().collect();
    ext.sort();
    assert_eq!(
        ext,
        vec![
            ("defaultTopic", "TBW102"),
            ("order", "true"),
            ("perm", "6"),
            ("readQueueNums", "8"),
            ("topic", "Orders"),
            ("topicFilterType", "SINGLE_TAG"),
            ("topicSysFlag", "0"),
            ("writeQueueNums", "8"),
        ]
    );
    let kv = &peer.with_code(codes::PUT_KV_CONFIG)[0];
    assert_eq!(kv.ext("namespace"), Some("ORDER_TOPIC_CONFIG"));
    assert_eq!(kv.ext("key"), Some("Orders"));
    assert_eq!(kv.ext("value"), Some("broker-a:8"));
}

#[tokio::test]
async fn creating_a_topic_needs_one_cluster_and_a_route_in_time() {
    let peer = Peer::start(|req| match req.cmd.code {
        codes::GET_BROKER_CLUSTER_INFO => success(
            req,
            cluster_body(&[
                ("C1", &[("broker-a", &req.addr)]),
                ("C2", &[("broker-b", "127.0.0.1:1")]),
            ]),
        ),
        codes::UPDATE_AND_CREATE_TOPIC => success(req, Vec::new()),
        _ => answer(req, codes::TOPIC_NOT_EXIST, "No topic route info"),
    })
    .await;
    let producer = Producer::connect(config(&peer.addr)).await.unwrap();
    let e = producer.create_topic("T", 4, 6, false).await.unwrap_err();
    assert!(
        matches!(&e, SendError::Invalid(what) if what.contains("several clusters (C1, C2)")),
        "{e}"
    );
    assert!(peer.with_code(codes::UPDATE_AND_CREATE_TOPIC).is_empty());
    // naming the cluster, the topic is created, but the name server never routes it
    let mut c = config(&peer.addr);
    c.cluster = Some("C1".into());
    c.create_wait = std::time::Duration::from_millis(500);
    let producer = Producer::connect(c).await.unwrap();
    let e = producer.create_topic("T", 4, 6, false).await.unwrap_err();
    assert!(
        matches!(&e, SendError::Transport { what, .. } if what.contains("topic T was created on broker-a but is not routed")),
        "{e}"
    );
    assert_eq!(peer.with_code(codes::UPDATE_AND_CREATE_TOPIC).len(), 1);
    assert!(peer.with_code(codes::PUT_KV_CONFIG).is_empty());
}
