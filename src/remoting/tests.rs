//! Known frames byte for byte (built by hand from the Java layout), real clients' quirks,
//! errors that name their place, and properties over arbitrary input.

use proptest::prelude::*;

use super::acl::{self, AclError};
use super::body::*;
use super::codes;
use super::command::{binary, json, VERSION_V3_4_9};
use super::header::*;
use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A whole frame built by hand: length, meta word, header, body.
fn frame_bytes(st: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    out.push(st);
    out.extend_from_slice(&(header.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}

const ROUTE_REQUEST_JSON: &str = r#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}"#;

fn route_request() -> RemotingCommand {
    let mut cmd = RemotingCommand::request(codes::GET_ROUTEINFO_BY_TOPIC, 7);
    cmd.ext_fields.insert("topic", "TopicTest");
    cmd
}

// ---------------------------------------------------------------------------------------------
// Frames

#[test]
fn route_request_json_frame_is_byte_exact() {
    let mut out = Vec::new();
    route_request().encode(&[], &mut out).unwrap();
    assert_eq!(ROUTE_REQUEST_JSON.len(), 131);
    assert_eq!(&out[..8], &hex("00000087 00000083")[..]);
    assert_eq!(out, frame_bytes(0, ROUTE_REQUEST_JSON.as_bytes(), &[]));
    assert_eq!(out.len(), 139);
    let (packet, used) = decode(&FrameCodec::default(), &out).unwrap().unwrap();
    assert_eq!(used, 139);
    assert_eq!(packet.command, route_request());
    assert!(packet.body.is_empty());
}

#[test]
fn route_request_binary_frame_is_byte_exact() {
    let expected = hex(
        "0000002d 01000029 0069 00 0199 00000007 00000000 00000000 00000014 0005 746f706963
         00000009 546f70696354657374",
    );
    let mut cmd = route_request();
    cmd.serialize_type = SerializeType::RocketMq;
    let mut out = Vec::new();
    cmd.encode(&[], &mut out).unwrap();
    assert_eq!(out, expected);
    let (packet, used) = decode(&FrameCodec::default(), &expected).unwrap().unwrap();
    assert_eq!(used, expected.len());
    assert_eq!(packet.command, cmd);
}

#[test]
fn incomplete_frames_ask_for_more_and_trailing_bytes_stay() {
    let mut bytes = frame_bytes(0, ROUTE_REQUEST_JSON.as_bytes(), b"body!");
    let whole = bytes.len();
    for cut in 0..whole {
        assert_eq!(frame::decode(&bytes[..cut]), Ok(None), "cut at {cut}");
    }
    bytes.extend_from_slice(&[0, 0]);
    let (f, used) = frame::decode(&bytes).unwrap().unwrap();
    assert_eq!(used, whole);
    assert_eq!(f.serialize_type, SerializeType::Json);
    assert_eq!(f.header, ROUTE_REQUEST_JSON.as_bytes());
    assert_eq!(f.body, b"body!");
}

#[test]
fn lying_length_is_rejected_from_the_prefix_alone() {
    // 2 GiB announced, 4 bytes present: refused before anything is buffered.
    let err = frame::decode(&hex("7fffffff")).unwrap_err();
    assert_eq!(
        err,
        FrameError::TooLarge {
            len: 4 + 0x7fff_ffff,
            max: DEFAULT_MAX_FRAME
        }
    );
    // Exactly one byte over the broker's limit.
    let over = (DEFAULT_MAX_FRAME - 3) as u32;
    assert!(matches!(
        frame::decode(&over.to_be_bytes()),
        Err(FrameError::TooLarge { .. })
    ));
    // At the limit: the decoder waits, and says how much to reserve (never above the max).
    let at = (DEFAULT_MAX_FRAME - 4) as u32;
    let mut head = at.to_be_bytes().to_vec();
    assert_eq!(
        FrameCodec::default().frame_len(&head),
        Ok(Some(DEFAULT_MAX_FRAME))
    );
    head.extend_from_slice(&hex("00000010"));
    assert_eq!(frame::decode(&head), Ok(None));
    // A header longer than the frame is caught from the first 8 bytes.
    let lying_header = hex("00000010 00ffffff");
    assert_eq!(
        frame::decode(&lying_header),
        Err(FrameError::HeaderTooLong {
            header_len: 0xff_ffff,
            available: 12
        })
    );
    // A smaller configured limit applies the same way.
    let small = FrameCodec::new(64);
    assert!(matches!(
        small.decode(&hex("0000003d")),
        Err(FrameError::TooLarge { len: 65, max: 64 })
    ));
    assert_eq!(small.decode(&hex("0000003c")), Ok(None));
}

#[test]
fn bad_prefixes_are_named() {
    assert_eq!(
        frame::decode(&hex("ffffffff")),
        Err(FrameError::NegativeLength { len: -1 })
    );
    for len in 0..4u32 {
        assert_eq!(
            frame::decode(&len.to_be_bytes()),
            Err(FrameError::TooShort { len: len as i32 })
        );
    }
    assert_eq!(
        frame::decode(&hex("00000004 02000000")),
        Err(FrameError::UnknownSerializeType { code: 2 })
    );
    let ok = hex("00000004 01000000");
    let (f, used) = frame::decode(&ok).unwrap().unwrap();
    assert_eq!((f.header.len(), f.body.len(), used), (0, 0, 8));
}

#[test]
fn encoder_limits() {
    let codec = FrameCodec::default();
    assert_eq!(
        codec.prefix(SerializeType::Json, MAX_HEADER + 1, 0),
        Err(FrameError::HeaderTooLarge {
            header_len: MAX_HEADER + 1
        })
    );
    assert!(matches!(
        codec.prefix(SerializeType::Json, 10, DEFAULT_MAX_FRAME),
        Err(FrameError::TooLarge { .. })
    ));
    assert!(codec
        .prefix(SerializeType::Json, 10, DEFAULT_MAX_FRAME - 18)
        .is_ok());
}

const MAX_HEADER: usize = frame::MAX_HEADER_LEN;

#[test]
fn split_encoding_leaves_the_body_in_place() {
    let body = vec![7u8; 1000];
    let cmd = route_request();
    let split = cmd.encode_split(&body).unwrap();
    assert!(std::ptr::eq(split.body, body.as_slice()));
    let mut whole = Vec::new();
    cmd.encode(&body, &mut whole).unwrap();
    assert_eq!(split.to_vec(), whole);
    assert_eq!(split.len(), whole.len());
    let slices = split.io_slices();
    assert_eq!(slices[0].len() + slices[1].len(), whole.len());
}

// ---------------------------------------------------------------------------------------------
// Command headers

/// PULL_MESSAGE as a 4.9.8 Java push consumer writes it (fastjson: bean properties sorted,
/// extFields in the map's order).
const JAVA_PULL: &str = concat!(
    r#"{"code":11,"extFields":{"queueId":"3","subVersion":"1690000000123","commitOffset":"42","#,
    r#""maxMsgNums":"32","suspendTimeoutMillis":"15000","topic":"TopicTest","sysFlag":"3","#,
    r#""bname":"broker-a","queueOffset":"42","consumerGroup":"g1","expressionType":"TAG"},"#,
    r#""flag":0,"language":"JAVA","opaque":1234,"serializeTypeCurrentRPC":"JSON","version":409}"#
);

#[test]
fn java_pull_request_reads_and_writes_back_byte_for_byte() {
    let frame = frame_bytes(0, JAVA_PULL.as_bytes(), &[]);
    let (packet, _) = decode(&FrameCodec::default(), &frame).unwrap().unwrap();
    let cmd = packet.command;
    assert_eq!(cmd.code, codes::PULL_MESSAGE);
    assert_eq!((cmd.opaque, cmd.version), (1234, 409));
    let h: PullMessageRequestHeader = cmd.read_header().unwrap();
    assert_eq!(h.consumer_group, "g1");
    assert_eq!((h.queue_id, h.queue_offset, h.commit_offset), (3, 42, 42));
    assert_eq!((h.max_msg_nums, h.suspend_timeout_millis), (32, 15000));
    assert_eq!(h.sub_version, 1_690_000_000_123);
    assert!(h.has_commit_offset() && h.has_suspend() && !h.has_subscription());
    assert_eq!(h.subscription, None);
    assert_eq!(h.bname.as_deref(), Some("broker-a"));
    let mut out = Vec::new();
    cmd.encode(&[], &mut out).unwrap();
    assert_eq!(out, frame);
}

/// ali-ons 3.x: its own key order, numbers and booleans in extFields, no
/// serializeTypeCurrentRPC, version 121.
const ALI_ONS_PULL: &str = concat!(
    r#"{"code":11,"language":"JAVA","opaque":5,"flag":0,"version":121,"extFields":{"#,
    r#""consumerGroup":"GID_x","topic":"T","queueId":0,"queueOffset":0,"maxMsgNums":32,"#,
    r#""sysFlag":6,"commitOffset":0,"suspendTimeoutMillis":15000,"subscription":"*","#,
    r#""subVersion":1690000000123,"unitMode":false,"nothing":null}}"#
);

#[test]
fn ali_ons_header_with_numbers_and_booleans() {
    let frame = frame_bytes(0, ALI_ONS_PULL.as_bytes(), &[]);
    let (packet, _) = decode(&FrameCodec::default(), &frame).unwrap().unwrap();
    let cmd = packet.command;
    assert_eq!(cmd.version, VERSION_V3_4_9);
    assert_eq!(cmd.ext_fields.get("queueId"), Some("0"));
    assert_eq!(cmd.ext_fields.get("subVersion"), Some("1690000000123"));
    assert_eq!(cmd.ext_fields.get("unitMode"), Some("false"));
    assert_eq!(cmd.ext_fields.get("nothing"), None);
    let h: PullMessageRequestHeader = cmd.read_header().unwrap();
    assert_eq!(h.subscription.as_deref(), Some("*"));
    assert!(h.has_subscription() && h.has_suspend() && !h.has_commit_offset());
    assert_eq!(h.bname, None);
    // The answer goes out in JSON, as ali-ons can read nothing else.
    let resp = RemotingCommand::response_to(&cmd, codes::PULL_NOT_FOUND, None);
    assert_eq!(resp.serialize_type, SerializeType::Json);
    assert_eq!((resp.opaque, resp.flag), (5, FLAG_RESPONSE));
}

#[test]
fn response_keeps_opaque_and_form() {
    let mut req = route_request();
    req.serialize_type = SerializeType::RocketMq;
    req.opaque = -17;
    req.mark_oneway();
    assert!(req.is_oneway() && !req.is_response());
    let resp = RemotingCommand::response_to(&req, codes::TOPIC_NOT_EXIST, Some("no".into()));
    assert!(resp.is_response() && !resp.is_oneway());
    assert_eq!(resp.opaque, -17);
    assert_eq!(resp.serialize_type, SerializeType::RocketMq);
    assert_eq!(resp.version, 409);
    let header = resp.encode_header().unwrap();
    assert_eq!(binary::decode(&header).unwrap(), resp);
}

#[test]
fn json_header_encoding_follows_fastjson() {
    let mut resp = RemotingCommand::response_to(&route_request(), 1, Some("a\"b\u{1}".into()));
    resp.ext_fields.insert("k", "v");
    assert_eq!(
        json::encode(&resp),
        r#"{"code":1,"extFields":{"k":"v"},"flag":1,"language":"JAVA","opaque":7,"remark":"a\"b\u0001","serializeTypeCurrentRPC":"JSON","version":409}"#
    );
    resp.language = Language::Unknown(99);
    assert!(json::encode(&resp).contains(r#""language":99,"#));
    assert_eq!(json::decode(json::encode(&resp).as_bytes()).unwrap(), resp);
}

#[test]
fn json_header_tolerance_and_errors() {
    let cmd = json::decode(br#"{"language":"RUST","code":"34","zzz":[1,2]}"#).unwrap();
    assert_eq!(
        (cmd.code, cmd.language, cmd.opaque),
        (34, Language::Rust, 0)
    );
    assert_eq!(
        json::decode(br#"{"language":"KLINGON"}"#).unwrap().language,
        Language::Other
    );
    assert_eq!(
        json::decode(br#"{"language":3}"#).unwrap().language,
        Language::Python
    );
    assert!(matches!(
        json::decode(b"[1]"),
        Err(HeaderError::JsonType { ref field, offset: 0, .. }) if field == "header"
    ));
    assert!(matches!(
        json::decode(br#"{"code":2147483648}"#),
        Err(HeaderError::JsonNumber { ref field, offset: 8, .. }) if field == "code"
    ));
    let nested = json::decode(br#"{"extFields":{"a":{"b":1}}}"#).unwrap_err();
    assert!(
        matches!(nested, HeaderError::JsonType { ref field, offset: 18, .. } if field == "extFields.a"),
        "{nested}"
    );
    assert!(matches!(
        json::decode(b"{\"code\":"),
        Err(HeaderError::Json(_))
    ));
    // A repeated key: the last one wins, in the header and in extFields.
    let dup = json::decode(br#"{"code":1,"code":2,"extFields":{"a":"x","a":"y"}}"#).unwrap();
    assert_eq!((dup.code, dup.ext_fields.get("a")), (2, Some("y")));
    assert_eq!(dup.ext_fields.len(), 1);
}

#[test]
fn binary_header_errors_name_field_and_offset() {
    let good = binary::encode(&route_request()).unwrap();
    assert_eq!(
        binary::decode(&good[..10]),
        Err(HeaderError::Truncated {
            field: "flag".into(),
            offset: 9,
            need: 4,
            have: 1
        })
    );
    // Remark length 5 with 2 bytes left.
    let mut bad = good[..13].to_vec();
    bad.extend_from_slice(&hex("00000005 6162"));
    assert_eq!(
        binary::decode(&bad),
        Err(HeaderError::Truncated {
            field: "remark".into(),
            offset: 17,
            need: 5,
            have: 2
        })
    );
    let mut neg = good[..13].to_vec();
    neg.extend_from_slice(&hex("00000000 ffffffff"));
    assert_eq!(
        binary::decode(&neg),
        Err(HeaderError::NegativeLength {
            field: "extFields length".into(),
            offset: 17,
            len: -1
        })
    );
    // A value length that runs past the map (but not past the header) is caught.
    let mut past = good[..13].to_vec();
    past.extend_from_slice(&hex("00000000 00000009 0001 61 00000009 62 00"));
    let err = binary::decode(&past).unwrap_err();
    assert_eq!(
        err,
        HeaderError::Truncated {
            field: "extFields.a".into(),
            offset: 28,
            need: 9,
            have: 2
        },
        "{err}"
    );
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(
        binary::decode(&trailing),
        Err(HeaderError::TrailingBytes {
            offset: good.len(),
            count: 1
        })
    );
    let mut utf8 = good[..13].to_vec();
    utf8.extend_from_slice(&hex("00000002 61ff 00000000"));
    assert_eq!(
        binary::decode(&utf8),
        Err(HeaderError::InvalidUtf8 {
            field: "remark".into(),
            offset: 18
        })
    );
    let mut big = route_request();
    big.code = 200_050;
    assert!(matches!(
        binary::encode(&big),
        Err(HeaderError::DoesNotFit { ref field, value: 200_050, bits: 16 }) if field == "code"
    ));
}

#[test]
fn binary_repeated_keys_last_wins_and_empty_strings() {
    let mut h = hex("000b 00 0199 00000001 00000000 00000000");
    let map = hex("0001 61 00000001 31  0001 62 00000000  0001 61 00000001 32");
    h.extend_from_slice(&(map.len() as u32).to_be_bytes());
    h.extend_from_slice(&map);
    let cmd = binary::decode(&h).unwrap();
    assert_eq!(cmd.ext_fields.get("a"), Some("2"));
    assert_eq!(cmd.ext_fields.get("b"), Some(""));
    assert_eq!(cmd.remark, None);
    // Java writes an empty remark as length 0, which reads back as none.
    let mut r = route_request();
    r.serialize_type = SerializeType::RocketMq;
    r.remark = Some(String::new());
    assert_eq!(
        binary::decode(&binary::encode(&r).unwrap()).unwrap().remark,
        None
    );
}

#[test]
fn languages_match_the_java_enum() {
    let names = [
        "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO",
        "PHP", "OMS", "RUST",
    ];
    for (code, name) in names.iter().enumerate() {
        let l = Language::from_code(code as u8);
        assert_eq!(l.name(), Some(*name));
        assert_eq!(l.code(), code as u8);
        assert_eq!(Language::from_name(name), Some(l));
    }
    assert_eq!(Language::from_code(13), Language::Unknown(13));
    assert_eq!(Language::Unknown(13).code(), 13);
}

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
            },
        )],
        consume_tps: 0.0,
    };
    assert_eq!(
        stats.to_json(),
        r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5,"consumerOffset":3,"lastTimestamp":1690000000000}}}"#
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

// ---------------------------------------------------------------------------------------------
// Properties

fn ext_strategy() -> impl Strategy<Value = ExtFields> {
    proptest::collection::vec(("[a-zA-Z_%]{0,12}", "\\PC{0,16}"), 0..8)
        .prop_map(|pairs| pairs.into_iter().collect())
}

fn command_strategy(binary: bool) -> impl Strategy<Value = RemotingCommand> {
    let small = if binary {
        (i16::MIN as i32..=i16::MAX as i32).boxed()
    } else {
        any::<i32>().boxed()
    };
    (
        small.clone(),
        any::<u8>(),
        small,
        any::<i32>(),
        any::<i32>(),
        proptest::option::of("\\PC{1,24}"),
        ext_strategy(),
    )
        .prop_map(
            move |(code, lang, version, opaque, flag, remark, ext_fields)| RemotingCommand {
                code,
                language: Language::from_code(lang),
                version,
                opaque,
                flag,
                remark,
                ext_fields,
                serialize_type: if binary {
                    SerializeType::RocketMq
                } else {
                    SerializeType::Json
                },
            },
        )
}

fn mq_strategy() -> impl Strategy<Value = MessageQueue> {
    ("[A-Za-z%_]{1,10}", "[a-z-]{1,8}", any::<i32>())
        .prop_map(|(t, b, q)| MessageQueue::new(t, b, q))
}

fn route_strategy() -> impl Strategy<Value = TopicRouteData> {
    let queue = (
        "\\PC{0,8}",
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
    )
        .prop_map(
            |(broker_name, read_queue_nums, write_queue_nums, perm, topic_syn_flag)| QueueData {
                broker_name,
                read_queue_nums,
                write_queue_nums,
                perm,
                topic_syn_flag,
            },
        );
    let broker = (
        "\\PC{0,8}",
        "\\PC{0,8}",
        proptest::collection::btree_map(any::<i64>(), "[0-9.:]{0,21}", 0..3),
    )
        .prop_map(|(cluster, broker_name, broker_addrs)| BrokerData {
            cluster,
            broker_name,
            broker_addrs,
        });
    (
        proptest::option::of("\\PC{0,12}"),
        proptest::collection::vec(queue, 0..3),
        proptest::collection::vec(broker, 0..3),
        proptest::collection::btree_map(
            "\\PC{0,8}",
            proptest::collection::vec("\\PC{0,8}", 0..2),
            0..2,
        ),
    )
        .prop_map(
            |(order_topic_conf, queue_datas, broker_datas, filter_server_table)| TopicRouteData {
                order_topic_conf,
                queue_datas,
                broker_datas,
                filter_server_table,
            },
        )
}

proptest! {
    #[test]
    fn frame_decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..256),
                                  max in 0usize..512) {
        for codec in [FrameCodec::default(), FrameCodec::new(max)] {
            if let Ok(Some((f, used))) = codec.decode(&data) {
                prop_assert!(used <= data.len() && used <= codec.max_frame());
                prop_assert_eq!(used, 8 + f.header.len() + f.body.len());
            }
            let _ = decode(&codec, &data);
        }
    }

    #[test]
    fn header_decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(cmd) = binary::decode(&data) {
            let again = binary::encode(&cmd).unwrap();
            prop_assert_eq!(binary::decode(&again).unwrap(), cmd);
        }
        if let Ok(cmd) = json::decode(&data) {
            prop_assert_eq!(json::decode(json::encode(&cmd).as_bytes()).unwrap(), cmd);
        }
    }

    #[test]
    fn json_text_headers_never_panic(text in "\\{(\"[a-zA-Z]{1,6}\":(-?[0-9]{1,12}|\"[^\"]{0,6}\"|true|\\{\\}|\\{\"q\":[0-9]\\}),?){0,6}\\}") {
        let _ = json::decode(text.as_bytes());
    }

    #[test]
    fn body_decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = HeartbeatData::from_json(&data);
        let _ = TopicRouteData::from_json(&data);
        let _ = ClusterInfo::from_json(&data);
        let _ = ConsumerListByGroup::from_json(&data);
        let _ = LockBatchRequestBody::from_json(&data);
        let _ = LockBatchResponseBody::from_json(&data);
        let _ = TopicList::from_json(&data);
    }

    #[test]
    fn custom_headers_never_panic(ext in ext_strategy()) {
        let _ = PullMessageRequestHeader::from_ext(&ext);
        let _ = SendMessageRequestHeaderV2::from_ext(&ext);
        let _ = acl::verify(&ext, &[], "k");
    }

    #[test]
    fn json_commands_round_trip(cmd in command_strategy(false), body in proptest::collection::vec(any::<u8>(), 0..32)) {
        let mut out = Vec::new();
        cmd.encode(&body, &mut out).unwrap();
        let (packet, used) = decode(&FrameCodec::default(), &out).unwrap().unwrap();
        prop_assert_eq!(used, out.len());
        prop_assert_eq!(packet.body, &body[..]);
        prop_assert_eq!(packet.command, cmd);
    }

    #[test]
    fn binary_commands_round_trip(cmd in command_strategy(true), body in proptest::collection::vec(any::<u8>(), 0..32)) {
        let split = cmd.encode_split(&body).unwrap();
        let bytes = split.to_vec();
        let (packet, _) = decode(&FrameCodec::default(), &bytes).unwrap().unwrap();
        prop_assert_eq!(packet.body, &body[..]);
        prop_assert_eq!(packet.command, cmd);
    }

    #[test]
    fn routes_round_trip_in_both_forms(route in route_strategy()) {
        for form in [JsonForm::Fastjson, JsonForm::Standard] {
            let text = route.to_json(form);
            prop_assert_eq!(TopicRouteData::from_json(text.as_bytes()), Ok(route.clone()), "{}", text);
        }
    }

    #[test]
    fn client_bodies_round_trip(mqs in proptest::collection::vec(mq_strategy(), 0..4),
                                 ids in proptest::collection::vec("\\PC{0,10}", 0..4),
                                 group in "\\PC{0,10}") {
        let lock = LockBatchRequestBody { consumer_group: group.clone(), client_id: group.clone(), mq_set: mqs.clone() };
        prop_assert_eq!(LockBatchRequestBody::from_json(lock.to_json().as_bytes()), Ok(lock));
        let ok = LockBatchResponseBody { lock_ok_mq_set: mqs };
        prop_assert_eq!(LockBatchResponseBody::from_json(ok.to_json().as_bytes()), Ok(ok));
        let list = ConsumerListByGroup { consumer_id_list: ids.clone() };
        prop_assert_eq!(ConsumerListByGroup::from_json(list.to_json().as_bytes()), Ok(list));
        let hb = HeartbeatData {
            client_id: group.clone(),
            producer_data_set: ids.iter().map(|g| ProducerData { group_name: g.clone() }).collect(),
            consumer_data_set: vec![ConsumerData {
                group_name: group,
                subscription_data_set: vec![SubscriptionData {
                    tags_set: ids.clone(),
                    code_set: ids.iter().map(|t| crate::format::java::string_hash(t)).collect(),
                    expression_type: "TAG".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        prop_assert_eq!(HeartbeatData::from_json(hb.to_json().as_bytes()), Ok(hb));
    }

    #[test]
    fn signed_requests_verify(ext in ext_strategy(), body in proptest::collection::vec(any::<u8>(), 0..32),
                              secret in "\\PC{0,20}") {
        let mut ext = ext;
        acl::sign(&mut ext, &body, "ak", &secret, None);
        prop_assert_eq!(acl::verify(&ext, &body, &secret), Ok(()));
    }
}
