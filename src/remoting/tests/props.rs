//! Properties: arbitrary bytes never panic a decoder; decode(encode(x)) == x.

use proptest::prelude::*;

use crate::remoting::acl;
use crate::remoting::body::*;
use crate::remoting::command::{binary, json};
use crate::remoting::header::*;
use crate::remoting::*;

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
