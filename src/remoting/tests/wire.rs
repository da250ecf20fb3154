//! Frames and command headers.

use super::{frame_bytes, hex, route_request, ROUTE_REQUEST_JSON};
use crate::remoting::codes;
use crate::remoting::command::{binary, json, VERSION_V3_4_9};
use crate::remoting::header::*;
use crate::remoting::*;

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
