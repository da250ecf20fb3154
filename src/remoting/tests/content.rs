//! Codes, custom headers, bodies and ACL signatures.

use super::route_request;
use crate::remoting::acl::{self, AclError};
use crate::remoting::body::*;
use crate::remoting::codes;
use crate::remoting::header::*;
use crate::remoting::*;

// ---------------------------------------------------------------------------------------------
// Codes and custom headers

#[test]
fn codes_match_the_java_constants() {
    let requests = [
        (codes::SEND_MESSAGE, 10),
        (codes::PULL_MESSAGE, 11),
        (codes::QUERY_MESSAGE, 12),
        (codes::QUERY_CONSUMER_OFFSET, 14),
        (codes::UPDATE_CONSUMER_OFFSET, 15),
        (codes::SEARCH_OFFSET_BY_TIMESTAMP, 29),
        (codes::GET_MAX_OFFSET, 30),
        (codes::GET_MIN_OFFSET, 31),
        (codes::GET_EARLIEST_MSG_STORETIME, 32),
        (codes::VIEW_MESSAGE_BY_ID, 33),
        (codes::HEART_BEAT, 34),
        (codes::UNREGISTER_CLIENT, 35),
        (codes::CONSUMER_SEND_MSG_BACK, 36),
        (codes::GET_CONSUMER_LIST_BY_GROUP, 38),
        (codes::NOTIFY_CONSUMER_IDS_CHANGED, 40),
        (codes::LOCK_BATCH_MQ, 41),
        (codes::UNLOCK_BATCH_MQ, 42),
        (codes::GET_ROUTEINFO_BY_TOPIC, 105),
        (codes::GET_BROKER_CLUSTER_INFO, 106),
        (codes::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 206),
        (codes::GET_CONSUME_STATS, 208),
        (codes::INVOKE_BROKER_TO_RESET_OFFSET, 222),
        (codes::GET_TOPICS_BY_CLUSTER, 224),
        (codes::SEND_MESSAGE_V2, 310),
        (codes::SEND_BATCH_MESSAGE, 320),
    ];
    for (c, n) in requests {
        assert_eq!(c, n);
    }
    let responses = [
        (codes::SUCCESS, 0),
        (codes::SYSTEM_ERROR, 1),
        (codes::SYSTEM_BUSY, 2),
        (codes::REQUEST_CODE_NOT_SUPPORTED, 3),
        (codes::NO_PERMISSION, 16),
        (codes::TOPIC_NOT_EXIST, 17),
        (codes::PULL_NOT_FOUND, 19),
        (codes::PULL_RETRY_IMMEDIATELY, 20),
        (codes::PULL_OFFSET_MOVED, 21),
        (codes::QUERY_NOT_FOUND, 22),
        (codes::SUBSCRIPTION_NOT_EXIST, 24),
        (codes::SUBSCRIPTION_NOT_LATEST, 25),
        (codes::SUBSCRIPTION_GROUP_NOT_EXIST, 26),
        (codes::CONSUMER_NOT_ONLINE, 206),
        (codes::FLOW_CONTROL, 215),
    ];
    for (c, n) in responses {
        assert_eq!(c, n);
    }
    assert_eq!(codes::request_name(11), Some("PULL_MESSAGE"));
    assert_eq!(codes::request_name(105), Some("GET_ROUTEINFO_BY_TOPIC"));
    assert_eq!(codes::request_name(16), None);
    assert_eq!(codes::response_name(19), Some("PULL_NOT_FOUND"));
    assert_eq!(codes::describe(34, false), "HEART_BEAT(34)");
    assert_eq!(codes::describe(9999, true), "code 9999");
}

#[test]
fn header_errors_name_field_and_type() {
    let ext: ExtFields = [("consumerGroup", "g"), ("topic", "T")]
        .into_iter()
        .collect();
    assert_eq!(
        QueryConsumerOffsetRequestHeader::from_ext(&ext),
        Err(FieldError::Missing {
            header: "QueryConsumerOffsetRequestHeader",
            field: "queueId"
        })
    );
    let ext: ExtFields = [("consumerGroup", "g"), ("topic", "T"), ("queueId", " 1")]
        .into_iter()
        .collect();
    let err = QueryConsumerOffsetRequestHeader::from_ext(&ext).unwrap_err();
    assert_eq!(
        err.to_string(),
        "QueryConsumerOffsetRequestHeader: the custom field <queueId> = \" 1\" is not a Java int (decimal, 32-bit signed)"
    );
    let ext: ExtFields = [("offset", "9223372036854775808")].into_iter().collect();
    assert!(matches!(
        ViewMessageRequestHeader::from_ext(&ext),
        Err(FieldError::Malformed {
            field: "offset",
            ..
        })
    ));
    let ext: ExtFields = [("offset", "-9223372036854775808")].into_iter().collect();
    assert_eq!(
        ViewMessageRequestHeader::from_ext(&ext).unwrap().offset,
        i64::MIN
    );
}

#[test]
fn headers_write_java_field_names() {
    let resp = PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: 43,
        min_offset: 0,
        max_offset: 100,
    };
    let ext = resp.to_ext();
    let keys: Vec<_> = ext.iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "suggestWhichBrokerId",
            "nextBeginOffset",
            "minOffset",
            "maxOffset"
        ]
    );
    assert_eq!(PullMessageResponseHeader::from_ext(&ext), Ok(resp));
    let back = ConsumerSendMsgBackRequestHeader {
        offset: 1024,
        group: "g".into(),
        delay_level: 0,
        max_reconsume_times: Some(16),
        ..Default::default()
    };
    let ext = back.to_ext();
    assert_eq!(ext.get("unitMode"), Some("false"));
    assert_eq!(ext.get("originMsgId"), None);
    let mut ext2 = ext.clone();
    ext2.remove("unitMode");
    assert_eq!(ConsumerSendMsgBackRequestHeader::from_ext(&ext2), Ok(back));
    let reset = ResetOffsetRequestHeader {
        topic: "T".into(),
        group: "g".into(),
        timestamp: -1,
        is_force: true,
    };
    assert_eq!(reset.to_ext().get("isForce"), Some("true"));
    let unreg = UnregisterClientRequestHeader {
        client_id: "c".into(),
        ..Default::default()
    };
    assert_eq!(unreg.to_ext().get("clientID"), Some("c"));
}

#[test]
fn send_headers_of_both_versions() {
    let mut v2 = RemotingCommand::request(codes::SEND_MESSAGE_V2, 1);
    for (k, v) in [
        ("a", "PG"),
        ("b", "T"),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", "2"),
        ("f", "0"),
        ("g", "1690000000000"),
        ("h", "0"),
        ("i", "TAGS\u{1}x"),
        ("k", "false"),
    ] {
        v2.ext_fields.insert(k, v);
    }
    let h = SendMessageRequestHeader::from_request(&v2)
        .unwrap()
        .unwrap();
    assert_eq!(
        (h.producer_group.as_str(), h.topic.as_str(), h.queue_id),
        ("PG", "T", 2)
    );
    assert_eq!(h.properties.as_deref(), Some("TAGS\u{1}x"));
    assert!(!h.batch);
    let mut v1 = RemotingCommand::request(codes::SEND_MESSAGE, 2);
    v1.write_header(&h);
    assert_eq!(SendMessageRequestHeader::from_request(&v1), Some(Ok(h)));
    assert!(SendMessageRequestHeader::from_request(&route_request()).is_none());
}

// ---------------------------------------------------------------------------------------------
// Bodies

fn sample_route() -> TopicRouteData {
    TopicRouteData {
        order_topic_conf: None,
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_syn_flag: 0,
        }],
        broker_datas: vec![BrokerData {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_addrs: [(0, "127.0.0.1:10911".to_string())].into_iter().collect(),
        }],
        filter_server_table: Default::default(),
    }
}

#[test]
fn route_body_in_both_forms() {
    let route = sample_route();
    let standard = route.to_json(JsonForm::Standard);
    assert_eq!(
        standard,
        concat!(
            r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"#,
            r#""filterServerTable":{},"#,
            r#""queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"writeQueueNums":4}]}"#
        )
    );
    let legacy = route.to_json(JsonForm::Fastjson);
    assert_eq!(legacy, standard.replace(r#"{"0":"127"#, r#"{0:"127"#));
    assert_eq!(
        TopicRouteData::from_json(standard.as_bytes()),
        Ok(route.clone())
    );
    assert_eq!(
        TopicRouteData::from_json(legacy.as_bytes()),
        Ok(route.clone())
    );
    // The 5.x name of the flag reads too.
    let v5 = standard.replace("topicSynFlag\":0", "topicSysFlag\":1");
    assert_eq!(
        TopicRouteData::from_json(v5.as_bytes())
            .unwrap()
            .queue_datas[0]
            .topic_syn_flag,
        1
    );
    assert_eq!(JsonForm::for_route_request(409, None), JsonForm::Standard);
    assert_eq!(JsonForm::for_route_request(121, None), JsonForm::Fastjson);
    assert_eq!(
        JsonForm::for_route_request(121, Some(true)),
        JsonForm::Standard
    );
}

#[test]
fn standard_form_escapes_non_ascii() {
    let mut route = sample_route();
    route.order_topic_conf = Some("b\u{e9}:4;\u{1F600}".into());
    let s = route.to_json(JsonForm::Standard);
    assert!(
        s.contains(r#""orderTopicConf":"b\u00E9:4;\uD83D\uDE00""#),
        "{s}"
    );
    assert!(s.is_ascii());
    assert_eq!(TopicRouteData::from_json(s.as_bytes()), Ok(route.clone()));
    let f = route.to_json(JsonForm::Fastjson);
    assert!(f.contains("\u{1F600}"));
}

#[test]
fn cluster_info_has_bare_broker_ids() {
    let b = sample_route().broker_datas.remove(0);
    let info = ClusterInfo {
        broker_addr_table: [("broker-a".to_string(), b)].into_iter().collect(),
        cluster_addr_table: [("DefaultCluster".to_string(), vec!["broker-a".to_string()])]
            .into_iter()
            .collect(),
    };
    let text = info.to_json();
    assert_eq!(
        text,
        concat!(
            r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}},"#,
            r#""clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#
        )
    );
    assert_eq!(ClusterInfo::from_json(text.as_bytes()), Ok(info));
}

const JAVA_HEARTBEAT: &str = r#"{"clientID":"10.0.0.5@4711#81234567890",
 "consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",
   "groupName":"g1","messageModel":"CLUSTERING","unitMode":false,
   "subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG",
     "subString":"TagA","subVersion":1690000000123,"tagsSet":["TagA"],"topic":"TopicTest"},
    {"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",
     "subVersion":1690000000124,"tagsSet":[],"topic":"%RETRY%g1"}]}],
 "producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#;

#[test]
fn heartbeat_from_java_and_ali_ons() {
    let hb = HeartbeatData::from_json(JAVA_HEARTBEAT.as_bytes()).unwrap();
    assert_eq!(hb.client_id, "10.0.0.5@4711#81234567890");
    let c = &hb.consumer_data_set[0];
    assert_eq!(
        (c.group_name.as_str(), c.message_model.as_str()),
        ("g1", "CLUSTERING")
    );
    assert_eq!(c.subscription_data_set[0].code_set, vec![2598919]);
    assert_eq!(c.subscription_data_set[1].topic, "%RETRY%g1");
    assert_eq!(hb.producer_data_set[0].group_name, "CLIENT_INNER_PRODUCER");
    assert_eq!(HeartbeatData::from_json(hb.to_json().as_bytes()), Ok(hb));
    // ali-ons: its own order, no expressionType, an extra field.
    let ons = br#"{"clientID":"c","producerDataSet":[],"consumerDataSet":[{"groupName":"GID","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"T","subString":"*","classFilterMode":false,"tagsSet":[],"codeSet":[],"subVersion":1690000000000}],"unitMode":false,"extra":1}]}"#;
    let hb = HeartbeatData::from_json(ons).unwrap();
    assert_eq!(
        hb.consumer_data_set[0].subscription_data_set[0].expression_type,
        "TAG"
    );
    let err = HeartbeatData::from_json(br#"{"consumerDataSet":[{"groupName":[]}]}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "body field consumerDataSet[0].groupName: expected a string, found an array"
    );
}

#[test]
fn small_client_bodies() {
    let list = ConsumerListByGroup {
        consumer_id_list: vec!["a@1".into(), "b@2".into()],
    };
    assert_eq!(list.to_json(), r#"{"consumerIdList":["a@1","b@2"]}"#);
    assert_eq!(
        ConsumerListByGroup::from_json(list.to_json().as_bytes()),
        Ok(list)
    );
    let req = LockBatchRequestBody::from_json(
        br#"{"clientId":"c","consumerGroup":"g1","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}]}"#,
    )
    .unwrap();
    assert_eq!(
        req.mq_set,
        vec![MessageQueue::new("TopicTest", "broker-a", 0)]
    );
    let resp = LockBatchResponseBody {
        lock_ok_mq_set: req.mq_set.clone(),
    };
    assert_eq!(
        resp.to_json(),
        r#"{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}]}"#
    );
    assert_eq!(
        LockBatchRequestBody::from_json(req.to_json().as_bytes()),
        Ok(req)
    );
    let topics = TopicList {
        topic_list: vec!["T".into(), "%RETRY%g".into()],
        broker_addr: None,
    };
    assert_eq!(topics.to_json(), r#"{"topicList":["T","%RETRY%g"]}"#);
    assert_eq!(
        TopicList::from_json(topics.to_json().as_bytes()),
        Ok(topics)
    );
}

#[test]
fn stats_tables_use_object_keys() {
    let mq = MessageQueue::new("T", "b", 0);
    let stats = ConsumeStats {
        offset_table: vec![(
            mq.clone(),
            OffsetWrapper {
                broker_offset: 5,
                consumer_offset: 3,
                last_timestamp: 1690000000000,
                pull_offset: 4,
            },
        )],
        consume_tps: 0.0,
    };
    assert_eq!(
        stats.to_json(),
        r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5,"consumerOffset":3,"lastTimestamp":1690000000000,"pullOffset":4}}}"#
    );
    let table = TopicStatsTable {
        offset_table: vec![
            (
                mq.clone(),
                TopicOffset {
                    min_offset: 0,
                    max_offset: 9,
                    last_update_timestamp: 7,
                },
            ),
            (MessageQueue::new("T", "b", 1), TopicOffset::default()),
        ],
    };
    assert_eq!(
        table.to_json(),
        concat!(
            r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":7,"maxOffset":9,"minOffset":0},"#,
            r#"{"brokerName":"b","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}"#
        )
    );
    let reset = ResetOffsetBody {
        offset_table: vec![(mq, 12)],
    };
    assert_eq!(
        reset.to_json(),
        r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:12}}"#
    );
}

#[test]
fn doubles_as_java_prints_them() {
    for (d, s) in [
        (0.0, "0.0"),
        (1.0, "1.0"),
        (12.5, "12.5"),
        (0.001, "0.001"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (1.5e-5, "1.5E-5"),
        (-2.5e20, "-2.5E20"),
        (f64::NAN, "null"),
    ] {
        assert_eq!(java_double(d), s, "{d}");
    }
}

// ---------------------------------------------------------------------------------------------
// ACL

#[test]
fn acl_vectors() {
    let ext: ExtFields = [("topic", "TopicTest")].into_iter().collect();
    let mut signed = ext.clone();
    acl::sign(&mut signed, &[], "RocketMQ", "12345678", None);
    assert_eq!(
        signed.get("Signature"),
        Some("0jiwhsaYp5ObE5GObbZH1I8/FT4=")
    );
    assert_eq!(acl::verify(&signed, &[], "12345678"), Ok(()));
    let mut ext: ExtFields = [
        ("topic", "TopicTest"),
        ("queueId", "3"),
        ("consumerGroup", "g1"),
        ("commitOffset", "42"),
        ("bname", "broker-a"),
    ]
    .into_iter()
    .collect();
    acl::sign(&mut ext, &[], "RocketMQ", "12345678", None);
    assert_eq!(
        acl::signing_content(&ext, &[], &[]),
        b"RocketMQbroker-a42g13TopicTest"
    );
    assert_eq!(ext.get("Signature"), Some("FY9BuR2Z8L/jVOR/8sdTtazFw4k="));
    // The body is signed after the values.
    let mut with_body: ExtFields = [("topic", "TopicTest")].into_iter().collect();
    acl::sign(&mut with_body, b"hello", "RocketMQ", "12345678", None);
    assert_eq!(
        with_body.get("Signature"),
        Some("IlhJmDi56c1+sdRGdQLyYHpYz4g=")
    );
    assert!(acl::verify(&with_body, b"hellO", "12345678").is_err());
}

#[test]
fn acl_verify_errors_and_the_unique_key_quirk() {
    let ext: ExtFields = [("topic", "T")].into_iter().collect();
    assert_eq!(acl::verify(&ext, &[], "s"), Err(AclError::MissingAccessKey));
    let mut signed = ext.clone();
    acl::sign(&mut signed, &[], "ak", "s", Some("tok"));
    assert_eq!(signed.get("SecurityToken"), Some("tok"));
    assert_eq!(acl::verify(&signed, &[], "s"), Ok(()));
    assert_eq!(
        acl::verify(&signed, &[], "other"),
        Err(AclError::BadSignature {
            access_key: "ak".into()
        })
    );
    let mut unsigned = signed.clone();
    unsigned.remove("Signature");
    assert!(matches!(
        acl::verify(&unsigned, &[], "s"),
        Err(AclError::MissingSignature { .. })
    ));
    // A 4.9.8 client signs _UNIQUE_KEY_QUERY; a broker-style signer leaves it out. Both pass.
    let mut query: ExtFields = [("topic", "T"), ("_UNIQUE_KEY_QUERY", "false")]
        .into_iter()
        .collect();
    acl::sign(&mut query, &[], "ak", "s", None);
    assert_eq!(acl::verify(&query, &[], "s"), Ok(()));
    let content = acl::signing_content(&query, &[], &["_UNIQUE_KEY_QUERY"]);
    query.insert("Signature", acl::signature(&content, "s"));
    assert_eq!(acl::verify(&query, &[], "s"), Ok(()));
}

#[test]
fn acl_sorts_like_java_treemap() {
    // UTF-16 order: upper case before lower case; U+FFFD sorts after a supplementary character
    // (surrogates are 0xD800..), unlike byte order.
    let ext: ExtFields = [
        ("b", "2"),
        ("A", "1"),
        ("\u{FFFD}", "4"),
        ("\u{1F600}", "3"),
    ]
    .into_iter()
    .collect();
    assert_eq!(acl::signing_content(&ext, b"!", &[]), b"1234!");
}
