//! The live cluster the `send` tests run against (common/cluster.rs), proved: ali-ons produces
//! into it and consumes back, our own pull reads the same records, and what the broker does
//! with the requests `send` relies on is pinned down, one fact a test (the list is in the
//! harness's module doc). Each test starts its own name server and broker (about 0.3 s).

use crate::common::ali_ons;
use crate::common::cluster::{self, command, rpc, Cluster, Flavour, Options, Reply, BROKER_NAME};
use crate::on_every_broker;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use rmqstore::format::commitlog::write::encode_properties;
use rmqstore::format::commitlog::Message;
use rmqstore::remoting::header::{SendMessageRequestHeaderV2, SendMessageResponseHeader};
use rmqstore::remoting::{codes, ExtFields};
use serde_json::{json, Value};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

/// The send header a 4.9 producer writes for one message to queue 0 of `topic`; tests change
/// what they probe.
fn header(topic: &str) -> SendMessageRequestHeaderV2 {
    SendMessageRequestHeaderV2 {
        a: "rmqstore-test-producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: 0,
        f: 0,
        g: now_ms(),
        h: 0,
        i: None,
        j: Some(0),
        k: false,
        l: None,
        m: false,
        n: Some(BROKER_NAME.into()),
    }
}

fn props(pairs: &[(&str, &str)]) -> Option<String> {
    Some(String::from_utf8(encode_properties(pairs, true)).unwrap())
}

/// SEND_MESSAGE_V2, or SEND_BATCH_MESSAGE when the header says `m` (batch).
fn send(c: &dyn Cluster, h: SendMessageRequestHeaderV2, body: &[u8]) -> Reply {
    let code = if h.m {
        codes::SEND_BATCH_MESSAGE
    } else {
        codes::SEND_MESSAGE_V2
    };
    let mut req = command(code, &[]);
    req.write_header(&h);
    c.call_broker(req, body).unwrap()
}

fn send_ok(
    c: &dyn Cluster,
    h: SendMessageRequestHeaderV2,
    body: &[u8],
) -> SendMessageResponseHeader {
    let r = send(c, h, body);
    assert_eq!(r.command.code, codes::SUCCESS, "{:?}", r.command);
    r.command.read_header().unwrap()
}

/// `MessageDecoder.encodeMessages`: per message TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG 0,
/// BODY and PROPERTIES with their lengths.
fn batch_body(messages: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (props, body) in messages {
        let total = 20 + body.len() + 2 + props.len();
        out.extend_from_slice(&(total as i32).to_be_bytes());
        out.extend_from_slice(&[0; 12]);
        out.extend_from_slice(&(body.len() as i32).to_be_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(&(props.len() as i16).to_be_bytes());
        out.extend_from_slice(props);
    }
    out
}

/// The offset message id of a stored record.
fn offset_id(m: &Message) -> String {
    rmqstore::format::msgid::offset_msg_id(&m.store_host, m.physical_offset)
}

fn prop_map(m: &Message) -> BTreeMap<String, String> {
    m.properties()
        .iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// `sent` with the properties the broker adds.
fn with_added(flavour: Flavour, sent: &[(&str, &str)]) -> BTreeMap<String, String> {
    sent.iter()
        .chain(flavour.added_properties())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

on_every_broker!(
    #[needs(rmqstore_ali_ons)]
    fn ali_ons_produces_into_the_cluster_and_consumes_every_field_back(flavour: Flavour) {
        if !ali_ons::ready() {
            return;
        }
        let c = flavour.start(Options::default());
        // ali-ons asks for the topic's route before it sends and gives up when there is none
        c.create_topic("OnsTopic", 4);
        let binary: Vec<u8> = (0..=255u8).collect();
        let large: Vec<u8> = (0..6000u32).map(|i| (i % 251) as u8).collect();
        let bodies = [
            b"plain text".to_vec(),
            binary,
            large,
            "välue ✓".as_bytes().to_vec(),
        ];
        let messages: Vec<Value> = bodies
            .iter()
            .enumerate()
            .map(|(i, body)| {
                json!({
                    "topic": "OnsTopic",
                    "body": b64(body),
                    "tags": format!("Tag{i}"),
                    "keys": [format!("key-{i}"), "shared"],
                    "properties": {
                        "UNIQ_KEY": format!("0A0B0C0D00002A9F00000000000000{i:02X}"),
                        "color": "rouge ✓",
                        "n": i.to_string(),
                    },
                })
            })
            .collect();
        let answers = ali_ons::produce(&c.namesrv_addr(), "OnsProducer", None, &messages);
        for a in &answers {
            assert_eq!(a["sendStatus"], "SEND_OK", "{a}");
        }
        let got = ali_ons::consume(&ali_ons::Consume {
            max: messages.len(),
            serialize_type_field: true,
            ..ali_ons::Consume::all(&c.namesrv_addr(), "OnsGroup", "OnsTopic")
        });
        assert_eq!(got.len(), messages.len(), "{got:?}");
        let stored = c.wait_for("OnsTopic", messages.len(), Duration::from_secs(5));
        assert_eq!(stored.len(), messages.len());

        for (i, (sent, answer)) in messages.iter().zip(&answers).enumerate() {
            let uniq = sent["properties"]["UNIQ_KEY"].as_str().unwrap();
            let d = got
                .iter()
                .find(|d| d["properties"]["UNIQ_KEY"] == uniq)
                .unwrap_or_else(|| panic!("{uniq} not consumed: {got:?}"));
            // ali-ons hands the body over decompressed, with every property
            assert_eq!(unb64(d["body"].as_str().unwrap()), bodies[i]);
            assert_eq!(d["tags"], format!("Tag{i}"));
            assert_eq!(d["keys"], format!("key-{i} shared"));
            assert_eq!(d["properties"]["color"], "rouge ✓");
            assert_eq!(d["properties"]["n"], i.to_string());
            assert_eq!(d["reconsumeTimes"], 0);
            assert_eq!(d["msgId"], answer["msgId"]);
            assert_eq!(d["queueId"], answer["queueId"]);
            assert_eq!(d["queueOffset"], answer["queueOffset"]);
            assert!(d["bornTimestamp"].as_i64().unwrap() <= d["storeTimestamp"].as_i64().unwrap());

            // and the record itself, read with our own pull
            let m = stored
                .iter()
                .find(|m| m.property("UNIQ_KEY").as_deref() == Some(uniq))
                .unwrap();
            let tags = format!("Tag{i}");
            let keys = format!("key-{i} shared");
            let n = i.to_string();
            let want = with_added(
                flavour,
                &[
                    ("UNIQ_KEY", uniq),
                    ("TAGS", &tags),
                    ("KEYS", &keys),
                    ("color", "rouge ✓"),
                    ("n", &n),
                ],
            );
            assert_eq!(prop_map(m), want);
            assert_eq!(m.queue_id as i64, answer["queueId"].as_i64().unwrap());
            assert_eq!(m.queue_offset, answer["queueOffset"].as_i64().unwrap());
            assert_eq!(offset_id(m), answer["msgId"].as_str().unwrap());
            // ali-ons compresses bodies of 4 KiB and more (zlib, sysflag bit 0)
            let compressed = bodies[i].len() >= 4096;
            assert_eq!(m.sys_flag & 1 != 0, compressed, "{i}");
            let body = if compressed {
                rmqstore::format::compression::decompress(m.sys_flag, &m.body).unwrap()
            } else {
                m.body.clone()
            };
            assert_eq!(body, bodies[i]);
        }
    }
);

on_every_broker!(
    fn a_send_keeps_body_flag_born_time_reconsume_times_sysflag_and_every_property(
        flavour: Flavour,
    ) {
        let c = flavour.start(Options::default());
        let sent = [
            ("UNIQ_KEY", "AC11000100002A9F0000000000000001"),
            ("KEYS", "k1 k2"),
            ("TAGS", "TagA"),
            ("user", "välue with spaces ✓"),
            ("WAIT", "true"),
        ];
        // a zlib body sent as compressed is stored as it came
        let zlib = b"\x78\x9c\x03\x00\x00\x00\x00\x01";
        let mut h = header("KeepTopic");
        h.e = 2;
        h.f = 1;
        h.g = 1_234_567_890_123;
        h.h = 7;
        h.j = Some(3);
        h.i = props(&sent);
        let r = send(&c, h, zlib);
        assert_eq!(r.command.code, codes::SUCCESS, "{:?}", r.command);
        let ext = &r.command.ext_fields;
        assert_eq!(ext.get("MSG_REGION"), Some("DefaultRegion"));
        assert_eq!(ext.get("TRACE_ON"), Some("true"));
        assert_eq!(ext.get("queueId"), Some("2"));
        assert_eq!(ext.get("queueOffset"), Some("0"));
        // the transaction id is the message's UNIQ_KEY (4.9 answers none for a plain message)
        let transaction_id = (flavour != Flavour::Java4_9).then_some(sent[0].1);
        assert_eq!(ext.get("transactionId"), transaction_id);

        let stored = c.wait_for("KeepTopic", 1, Duration::from_secs(5));
        assert_eq!(stored.len(), 1);
        let m = &stored[0];
        assert_eq!(ext.get("msgId"), Some(offset_id(m)).as_deref());
        assert_eq!((m.queue_id, m.queue_offset), (2, 0));
        assert_eq!(m.body, zlib);
        assert_eq!(m.sys_flag, 1);
        assert_eq!(m.flag, 7);
        assert_eq!(m.born_timestamp, 1_234_567_890_123);
        assert_eq!(m.reconsume_times, 3);
        // every property comes back byte for byte, with the broker's; their order is the broker's
        let mut want = with_added(flavour, &sent);
        if flavour.drops_wait() {
            want.remove("WAIT");
        }
        assert_eq!(prop_map(m), want);
    }
);

on_every_broker!(
    fn a_send_without_uniq_key_gets_one_from_the_broker_a_batch_message_does_not(flavour: Flavour) {
        let c = flavour.start(Options::default());
        let mut h = header("NoUniq");
        h.i = props(&[("KEYS", "single")]);
        let r = send_ok(&c, h, b"single");
        // 5.x and rocketmq-rust give it a UNIQ_KEY (32 hex digits, answered as the transaction
        // id); 4.9 stores it without one
        let generated = r.transaction_id.clone();
        assert_eq!(generated.is_some(), flavour != Flavour::Java4_9, "{r:?}");
        assert!(generated.iter().all(|g| g.len() == 32), "{generated:?}");

        let mut h = header("NoUniq");
        h.m = true;
        h.e = 1;
        let blob = (
            encode_properties(&[("KEYS", "batched")], true),
            b"batched".to_vec(),
        );
        let r = send_ok(&c, h, &batch_body(&[blob]));
        assert_eq!(r.transaction_id, None);

        let stored = c.wait_for("NoUniq", 2, Duration::from_secs(5));
        assert_eq!(stored.len(), 2);
        let by_keys = |k: &str| {
            stored
                .iter()
                .find(|m| m.property("KEYS").as_deref() == Some(k))
                .unwrap()
        };
        assert_eq!(
            by_keys("single").property("UNIQ_KEY").as_deref(),
            generated.as_deref()
        );
        assert_eq!(by_keys("batched").property("UNIQ_KEY"), None);
    }
);

on_every_broker!(
    fn a_batch_is_stored_one_record_per_message_with_its_own_properties_first(flavour: Flavour) {
        let c = flavour.start(Options::default());
        let blobs = vec![
            (
                encode_properties(&[("UNIQ_KEY", "B1"), ("KEYS", "bk1"), ("zeta", "z")], true),
                b"one".to_vec(),
            ),
            // without the trailing separator, as brokers 4.9.1 to 5.1 write it
            (
                encode_properties(&[("UNIQ_KEY", "B2"), ("TAGS", "T2")], false),
                b"two".to_vec(),
            ),
            // a delay inside a batch is not applied: stored at once, DELAY kept
            (
                encode_properties(&[("UNIQ_KEY", "B3"), ("DELAY", "1")], true),
                b"three".to_vec(),
            ),
        ];
        let mut h = header("BatchTopic");
        h.m = true;
        h.e = 1;
        h.h = 5;
        h.j = Some(2);
        h.i = props(&[("WAIT", "true")]);
        let r = send_ok(&c, h, &batch_body(&blobs));
        assert_eq!((r.queue_id, r.queue_offset), (1, 0));

        let stored = c.wait_for("BatchTopic", 3, Duration::from_secs(5));
        assert_eq!(stored.len(), 3);
        // one offset id per message, comma-joined, in order
        let ids: Vec<String> = stored.iter().map(offset_id).collect();
        assert_eq!(r.msg_id, ids.join(","));
        for (i, (m, (blob_props, body))) in stored.iter().zip(&blobs).enumerate() {
            assert_eq!((m.queue_id, m.queue_offset), (1, i as i64));
            assert_eq!(&m.body, body);
            // the flag is the message's own, the reconsume times the header's
            assert_eq!((m.flag, m.reconsume_times), (0, 2), "{i}");
            // the message's own properties first, as sent (a missing separator added), then the
            // header's and the broker's in its own order; 5.x stores them exactly as sent
            let mut own = blob_props.clone();
            if flavour.batch_adds_properties() && own.last() != Some(&2) {
                own.push(2);
            }
            assert!(
                m.properties.starts_with(&own),
                "{i}: {:?}",
                String::from_utf8_lossy(&m.properties)
            );
            if !flavour.batch_adds_properties() {
                assert_eq!(m.properties, own, "{i}");
            }
            let mut want: Vec<(String, String)> =
                rmqstore::format::commitlog::Properties(blob_props)
                    .iter()
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect();
            if flavour.batch_adds_properties() {
                want.push(("WAIT".into(), "true".into()));
                want.extend(
                    flavour
                        .added_properties()
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string())),
                );
            }
            let want: BTreeMap<String, String> = want.into_iter().collect();
            assert_eq!(prop_map(m), want, "{i}");
        }
    }
);

on_every_broker!(
    fn sizes_over_the_limits_and_retry_topic_batches_are_message_illegal(flavour: Flavour) {
        let c = flavour.start(Options::default());
        let uniq = props(&[("UNIQ_KEY", "BIG")]);
        let with = |i: Option<String>| {
            let mut h = header("Limits");
            h.i = i;
            h
        };
        // an empty body: refused by rocketmq-rust (MESSAGE_ILLEGAL), stored by 4.9, a
        // SYSTEM_ERROR from 5.x (a NullPointerException: the frame has no body)
        let r = send(&c, with(uniq.clone()), b"");
        let empty = match flavour {
            Flavour::RocketmqRust => codes::MESSAGE_ILLEGAL,
            Flavour::Java4_9 => codes::SUCCESS,
            Flavour::Java5 => codes::SYSTEM_ERROR,
        };
        assert_eq!(r.command.code, empty, "{:?}", r.command);
        // a body of 4 MiB is taken, one byte more is not
        send_ok(&c, with(uniq.clone()), &vec![b'x'; 4 << 20]);
        let r = send(&c, with(uniq.clone()), &vec![b'x'; (4 << 20) + 1]);
        assert_eq!(r.command.code, codes::MESSAGE_ILLEGAL, "{:?}", r.command);
        let remark = match flavour {
            Flavour::RocketmqRust => {
                "message body size 4194305 exceeds the configured maximum 4194304 bytes"
            }
            Flavour::Java4_9 | Flavour::Java5 => {
                "the message is illegal, maybe msg body or properties length not matched. msg \
                 body length limit 4194304B, msg properties length limit 32KB."
            }
        };
        assert_eq!(r.command.remark.as_deref(), Some(remark));
        // properties up to 32 KiB
        send_ok(&c, with(props(&[("big", &"v".repeat(32_000))])), b"p");
        let r = send(&c, with(props(&[("big", &"v".repeat(40_000))])), b"p");
        assert_eq!(r.command.code, codes::MESSAGE_ILLEGAL, "{:?}", r.command);
        // the 4 MiB limit holds for a whole batch body
        let mb: Vec<(Vec<u8>, Vec<u8>)> = (0..5)
            .map(|i| {
                (
                    encode_properties(&[("UNIQ_KEY", &format!("M{i}"))], true),
                    vec![b'y'; 1 << 20],
                )
            })
            .collect();
        // (5.x: a SYSTEM_ERROR, "java.lang.RuntimeException: message body size exceeded", which
        // a producer retries)
        let mut h = header("Limits");
        h.m = true;
        let r = send(&c, h, &batch_body(&mb));
        let too_big = match flavour {
            Flavour::Java5 => codes::SYSTEM_ERROR,
            _ => codes::MESSAGE_ILLEGAL,
        };
        assert_eq!(r.command.code, too_big, "{:?}", r.command);
        // many small messages in one batch are fine
        let many: Vec<(Vec<u8>, Vec<u8>)> = (0..2000)
            .map(|i| {
                (
                    encode_properties(&[("UNIQ_KEY", &format!("S{i}"))], true),
                    vec![b'z'; 100],
                )
            })
            .collect();
        let mut h = header("Many");
        h.m = true;
        send_ok(&c, h, &batch_body(&many));
        assert_eq!(
            c.wait_for("Many", 2000, Duration::from_secs(10)).len(),
            2000
        );
        // no batches to retry topics (4.9 takes them)
        let mut h = header("%RETRY%SomeGroup");
        h.m = true;
        let r = send(&c, h, &batch_body(&many[..1]));
        let retry_batch = match flavour {
            Flavour::Java4_9 => codes::SUCCESS,
            _ => codes::MESSAGE_ILLEGAL,
        };
        assert_eq!(r.command.code, retry_batch, "{:?}", r.command);
    }
);

on_every_broker!(
    fn topics_are_created_by_update_and_create_topic_and_listed_by_get_all_topic_config(
        flavour: Flavour,
    ) {
        let c = flavour.start(Options::default());
        c.create_topic("Created", 3);
        let t = c.topic_config("Created").unwrap();
        assert_eq!(t["readQueueNums"], 3);
        assert_eq!(t["writeQueueNums"], 3);
        assert_eq!(t["perm"], 6);
        let route = c.route("Created").unwrap();
        assert_eq!(route.queue_datas.len(), 1);
        assert_eq!(route.queue_datas[0].write_queue_nums, 3);
        assert_eq!(
            route.broker_datas[0].broker_addrs.get(&0),
            Some(&c.broker_addr())
        );
        let all = c.all_topic_config();
        assert!(all["dataVersion"]["counter"].as_i64().unwrap() > 0, "{all}");
        // and a queue beyond the topic's is a SYSTEM_ERROR (5.x: INVALID_PARAMETER, 29)
        let mut h = header("Created");
        h.e = 3;
        let r = send(&c, h, b"q");
        let beyond = match flavour {
            Flavour::Java5 => 29,
            _ => codes::SYSTEM_ERROR,
        };
        assert_eq!(r.command.code, beyond, "{:?}", r.command);
        // a negative queue id lets the broker pick one
        let mut h = header("Created");
        h.e = -1;
        let r = send_ok(&c, h, b"q");
        assert!((0..3).contains(&r.queue_id), "{r:?}");
    }
);

on_every_broker!(
    fn a_missing_topic_is_created_from_tbw102_with_at_most_its_queue_count(flavour: Flavour) {
        let c = flavour.start(Options::default());
        let tbw = c.route("TBW102").unwrap();
        assert_eq!(tbw.queue_datas[0].write_queue_nums, 8);
        assert_eq!(tbw.queue_datas[0].perm, 7);
        for (topic, asked, got) in [("Two", 2, 2), ("Four", 4, 4), ("Sixteen", 16, 8)] {
            let mut h = header(topic);
            h.d = asked;
            send_ok(&c, h, b"auto");
            let t = c.topic_config(topic).unwrap();
            assert_eq!(t["writeQueueNums"], got, "{topic}: {t}");
            assert_eq!(t["readQueueNums"], got, "{topic}: {t}");
            assert_eq!(t["perm"], 6, "{topic}: {t}");
        }
    }
);

on_every_broker!(
    fn without_auto_create_a_missing_topic_is_topic_not_exist(flavour: Flavour) {
        let c = flavour.start(Options {
            auto_create_topics: false,
            ..Options::default()
        });
        assert!(c.route("TBW102").is_none());
        let r = send(&c, header("Missing"), b"m");
        assert_eq!(r.command.code, codes::TOPIC_NOT_EXIST, "{:?}", r.command);
        // the Java brokers add where to read more
        let remark = r.command.remark.as_deref().unwrap_or_default();
        assert!(
            remark.starts_with("topic[Missing] not exist, apply first please!"),
            "{remark}"
        );
        let faq = match flavour {
            Flavour::RocketmqRust => "",
            Flavour::Java4_9 => "\nSee http://rocketmq.apache.org/docs/faq/ for further details.",
            Flavour::Java5 => {
                "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
            }
        };
        assert_eq!(
            &remark["topic[Missing] not exist, apply first please!".len()..],
            faq
        );
        // the error answer carries the two ext fields a Java client reads
        assert_eq!(
            r.command.ext_fields.get("MSG_REGION"),
            Some("DefaultRegion")
        );
        assert_eq!(r.command.ext_fields.get("TRACE_ON"), Some("true"));
        assert!(c.topic_config("Missing").is_none());
        // a created topic takes sends
        c.create_topic("Missing", 1);
        send_ok(&c, header("Missing"), b"m");
    }
);

on_every_broker!(
    fn a_delay_level_waits_in_schedule_topic_xxxx_and_lands_with_its_real_topic(flavour: Flavour) {
        let c = flavour.start(Options::default());
        let born = now_ms();
        for (uniq, level) in [
            ("D1", "1"),
            ("D3", "3"),
            ("D20", "20"),
            ("D0", "0"),
            ("Dx", "x"),
        ] {
            let mut h = header("Delayed");
            h.g = born;
            h.i = props(&[("UNIQ_KEY", uniq), ("DELAY", level)]);
            let r = send(&c, h, uniq.as_bytes());
            // a level that is no number: the Java brokers fail to parse it (SYSTEM_ERROR,
            // "java.lang.NumberFormatException: For input string: \"x\"")
            let code = match (flavour, level) {
                (Flavour::Java4_9 | Flavour::Java5, "x") => codes::SYSTEM_ERROR,
                _ => codes::SUCCESS,
            };
            assert_eq!(r.command.code, code, "{uniq}: {:?}", r.command);
        }
        let unparsed_stored = flavour == Flavour::RocketmqRust;
        // level n waits in queue n-1 of SCHEDULE_TOPIC_XXXX; past the last level (18), the last
        let waiting: BTreeMap<String, (i32, String)> = c
            .wait_for("SCHEDULE_TOPIC_XXXX", 3, Duration::from_secs(5))
            .iter()
            .map(|m| {
                assert_eq!(m.property("REAL_TOPIC").as_deref(), Some("Delayed"));
                assert_eq!(m.property("REAL_QID").as_deref(), Some("0"));
                (
                    m.property("UNIQ_KEY").unwrap().into_owned(),
                    (m.queue_id, m.property("DELAY").unwrap().into_owned()),
                )
            })
            .collect();
        let want: BTreeMap<String, (i32, String)> =
            [("D1", (0, "1")), ("D3", (2, "3")), ("D20", (17, "18"))]
                .into_iter()
                .map(|(u, (q, d))| (u.to_string(), (q, d.to_string())))
                .collect();
        assert_eq!(waiting, want);
        // level 0 (and for rocketmq-rust a level that is no number) is stored at once, DELAY
        // kept
        let at_once = 1 + usize::from(unparsed_stored);
        let now: BTreeMap<String, Option<String>> = c
            .wait_for("Delayed", at_once, Duration::from_secs(5))
            .iter()
            .map(|m| {
                (
                    m.property("UNIQ_KEY").unwrap().into_owned(),
                    m.property("DELAY").map(|d| d.into_owned()),
                )
            })
            .collect();
        let want: BTreeMap<String, Option<String>> = [("D0", "0"), ("Dx", "x")][..at_once]
            .iter()
            .map(|(u, d)| (u.to_string(), Some(d.to_string())))
            .collect();
        assert_eq!(now, want);
        // level 1 (1 s) lands in the topic: REAL_TOPIC and REAL_QID kept
        let got = c.wait_for("Delayed", at_once + 1, Duration::from_secs(10));
        let m = got
            .iter()
            .find(|m| m.property("UNIQ_KEY").as_deref() == Some("D1"))
            .expect("level 1 was not delivered in 10 s");
        // (the Java brokers keep DELAY on the copy and add no WAIT)
        if flavour == Flavour::RocketmqRust {
            assert_eq!(m.property("DELAY"), None);
            assert_eq!(m.property("WAIT").as_deref(), Some("false"));
        } else {
            assert_eq!(m.property("DELAY").as_deref(), Some("1"));
            assert_eq!(m.property("WAIT"), None);
        }
        assert_eq!(m.property("REAL_TOPIC").as_deref(), Some("Delayed"));
        assert_eq!(m.property("REAL_QID").as_deref(), Some("0"));
        assert_eq!(m.born_timestamp, born);
        assert!(
            m.store_timestamp - born >= 1000,
            "{}",
            m.store_timestamp - born
        );
    }
);

on_every_broker!(
    fn timer_deliver_ms_is_delivered_at_its_time_and_refused_when_past(flavour: Flavour) {
        let c = flavour.start(Options::default());
        let at = now_ms() + 1500;
        let mut h = header("Timed");
        h.i = props(&[("UNIQ_KEY", "T1"), ("TIMER_DELIVER_MS", &at.to_string())]);
        let r = send(&c, h, b"timed");
        assert_eq!(r.command.code, codes::SUCCESS, "{:?}", r.command);
        if flavour == Flavour::Java4_9 {
            // 4.9 has no timer: the message is stored at once, the property kept as any other
            assert_eq!(r.command.ext_fields.get("recallHandle"), None);
            let now = c.wait_for("Timed", 1, Duration::from_secs(5));
            assert_eq!(now.len(), 1);
            assert_eq!(
                now[0].property("TIMER_DELIVER_MS"),
                Some(at.to_string().into())
            );
            assert!(c.topic_config("rmq_sys_wheel_timer").is_none());
            return;
        }
        assert!(
            r.command.ext_fields.get("recallHandle").is_some(),
            "{:?}",
            r.command
        );
        // waiting in the timer's topic, with the real topic beside it
        let wheel = c.wait_for("rmq_sys_wheel_timer", 1, Duration::from_secs(5));
        assert_eq!(wheel.len(), 1);
        assert_eq!(wheel[0].property("REAL_TOPIC").as_deref(), Some("Timed"));
        assert_eq!(
            wheel[0].property("TIMER_DELIVER_MS"),
            Some(at.to_string().into())
        );
        assert!(c.pull_all("Timed").is_empty());
        // TIMER_DELAY_SEC is the other way to say it
        let mut h = header("Timed");
        h.i = props(&[("UNIQ_KEY", "T2"), ("TIMER_DELAY_SEC", "1")]);
        send_ok(&c, h, b"delay-sec");
        // rocketmq-rust refuses a time that is not in the future, or no number; 5.x stores
        // a past time at once
        for (uniq, when) in [
            ("T3", (now_ms() - 5000).to_string()),
            ("T4", "soon".to_string()),
        ] {
            let mut h = header("Timed");
            h.i = props(&[("UNIQ_KEY", uniq), ("TIMER_DELIVER_MS", &when)]);
            let r = send(&c, h, b"late");
            let code = match (flavour, uniq) {
                (Flavour::Java5, "T3") => codes::SUCCESS,
                _ => codes::MESSAGE_ILLEGAL,
            };
            assert_eq!(r.command.code, code, "{when}: {:?}", r.command);
        }
        // (5.x's past one is in its topic at once, TIMER_DELIVER_MS kept)
        let past = usize::from(flavour == Flavour::Java5);
        if past == 1 {
            let at_once = c.wait_for("Timed", 1, Duration::from_secs(5));
            assert_eq!(at_once.len(), 1);
            assert_eq!(at_once[0].property("UNIQ_KEY").as_deref(), Some("T3"));
            assert!(at_once[0].property("TIMER_DELIVER_MS").is_some());
        }
        // delivered at its time (the wheel ticks each second)
        let got = c.wait_for("Timed", 2 + past, Duration::from_secs(10));
        assert_eq!(got.len(), 2 + past, "not delivered in 10 s");
        for m in got
            .iter()
            .filter(|m| m.property("UNIQ_KEY").as_deref() != Some("T3"))
        {
            assert!(
                m.store_timestamp >= at - 1000,
                "{} < {at}",
                m.store_timestamp
            );
            assert_eq!(m.property("REAL_TOPIC").as_deref(), Some("Timed"));
            if flavour == Flavour::RocketmqRust {
                assert_eq!(m.property("TIMER_DELIVER_MS"), None);
                assert_eq!(m.property("TIMER_DELAY_SEC"), None);
                assert_eq!(m.property("WAIT").as_deref(), Some("false"));
                assert!(m.property("TIMER_DELIVERY_TOKEN").is_some());
            } else {
                // 5.x keeps the request and adds the wheel's times
                let asked = m
                    .property("TIMER_DELIVER_MS")
                    .or(m.property("TIMER_DELAY_SEC"));
                assert!(asked.is_some(), "{:?}", m.properties().to_map());
                for p in ["TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS"] {
                    assert!(
                        m.property(p).is_some(),
                        "{p}: {:?}",
                        m.properties().to_map()
                    );
                }
                assert_eq!(m.property("WAIT"), None);
            }
        }
    }
);

on_every_broker!(
    fn a_stopped_broker_keeps_what_it_acknowledged_and_comes_back_on_the_same_address(
        flavour: Flavour,
    ) {
        let mut c = flavour.start(Options::default());
        for i in 0..3 {
            let mut h = header("Durable");
            h.i = props(&[("UNIQ_KEY", &format!("K{i}"))]);
            send_ok(&c, h, b"kept");
        }
        let addr = c.broker_addr();
        c.kill_broker();
        let refused = rpc(&addr, &command(codes::GET_BROKER_RUNTIME_INFO, &[]), &[]);
        assert!(refused.is_err(), "{refused:?}");
        // the name server forgets it as soon as its connection drops: no route until it is back
        assert!(c.cluster_info().unwrap().broker_addr_table.is_empty());
        assert!(c.route("Durable").is_none());
        c.restart_broker();
        assert_eq!(c.broker_addr(), addr);
        assert_eq!(c.wait_for("Durable", 3, Duration::from_secs(5)).len(), 3);
        send_ok(&c, header("Durable"), b"after");
        assert!(c.route("Durable").is_some());
        // SIGTERM: the same
        c.stop_broker();
        assert!(rpc(&addr, &command(codes::GET_BROKER_RUNTIME_INFO, &[]), &[]).is_err());
        assert!(c.route("Durable").is_none());
        c.restart_broker();
        assert_eq!(c.wait_for("Durable", 4, Duration::from_secs(5)).len(), 4);
    }
);

/// What a broker with ACL on answers a send of `who`: its code and how its remark begins.
fn acl_refusal(flavour: Flavour, who: &str) -> (i32, &'static str) {
    match (flavour, who) {
        (Flavour::RocketmqRust, "reader") => (codes::NO_PERMISSION, "Permission was denied"),
        (Flavour::RocketmqRust, _) => (
            codes::NO_PERMISSION,
            "Authentication credentials are invalid",
        ),
        (Flavour::Java4_9, "reader") => (
            codes::SYSTEM_ERROR,
            "org.apache.rocketmq.acl.common.AclException: No default permission for topic:Guarded",
        ),
        (Flavour::Java4_9, "wrong secret") => (
            codes::SYSTEM_ERROR,
            "org.apache.rocketmq.acl.common.AclException: Check signature failed for \
             accessKey=rmqstore-admin",
        ),
        (Flavour::Java4_9, "unknown key") => (
            codes::SYSTEM_ERROR,
            "org.apache.rocketmq.acl.common.AclException: No acl config for nobody",
        ),
        (Flavour::Java4_9, _) => (
            codes::SYSTEM_ERROR,
            "org.apache.rocketmq.acl.common.AclException: No accessKey is configured",
        ),
        (Flavour::Java5, "reader") => (
            codes::NO_PERMISSION,
            "User:rmqstore-reader has no permission to access Topic:Guarded from 127.0.0.1, no \
             matched policies.",
        ),
        (Flavour::Java5, "wrong secret") => (codes::NO_PERMISSION, "check signature failed."),
        (Flavour::Java5, "unknown key") => (codes::NO_PERMISSION, "User:nobody is not found."),
        (Flavour::Java5, _) => (codes::NO_PERMISSION, "username cannot be null."),
    }
}

on_every_broker!(
    #[needs(rmqstore_ali_ons)]
    fn acl_refuses_unsigned_requests_wrong_secrets_and_missing_permissions(flavour: Flavour) {
        if !ali_ons::ready() {
            return;
        }
        let c = flavour.start(Options {
            acl: Some(vec![cluster::ADMIN, cluster::READER]),
            ..Options::default()
        });
        let signed = |ak: &str, sk: &str| {
            let mut req = command(codes::SEND_MESSAGE_V2, &[]);
            let mut h = header("Guarded");
            h.i = props(&[("UNIQ_KEY", "A1")]);
            req.write_header(&h);
            rmqstore::remoting::acl::sign(&mut req.ext_fields, b"body", ak, sk, None);
            rpc(&c.broker_addr(), &req, b"body").unwrap()
        };
        let (admin, reader) = (cluster::ADMIN, cluster::READER);
        assert_eq!(
            signed(admin.access_key, admin.secret_key).command.code,
            codes::SUCCESS
        );
        // every refusal comes without the send's ext fields: rocketmq-rust's and 5.x's (ACL 2.0)
        // as NO_PERMISSION, 4.9's as a SYSTEM_ERROR naming the AclException
        for (who, r) in [
            ("reader", signed(reader.access_key, reader.secret_key)),
            ("wrong secret", signed(admin.access_key, "not-the-secret")),
            ("unknown key", signed("nobody", "x")),
        ] {
            let (code, remark) = acl_refusal(flavour, who);
            assert_eq!(r.command.code, code, "{who}: {:?}", r.command);
            let said = r.command.remark.as_deref().unwrap_or_default();
            assert!(said.starts_with(remark), "{who}: {said}");
            assert_eq!(r.command.ext_fields, ExtFields::new(), "{who}");
        }
        let mut unsigned = command(codes::SEND_MESSAGE_V2, &[]);
        unsigned.write_header(&header("Guarded"));
        let r = rpc(&c.broker_addr(), &unsigned, b"body").unwrap();
        assert_eq!(
            r.command.code,
            acl_refusal(flavour, "unsigned").0,
            "{:?}",
            r.command
        );
        // the name server does not check
        assert!(c.route("Guarded").is_some());

        // ali-ons signs as the broker expects
        let keys = Some((admin.access_key, admin.secret_key));
        let m = json!({"topic": "Guarded", "body": b64(b"ons"), "properties": {"UNIQ_KEY": "A2"}});
        let answers = ali_ons::produce(
            &c.namesrv_addr(),
            "AclProducer",
            keys,
            std::slice::from_ref(&m),
        );
        assert_eq!(answers[0]["sendStatus"], "SEND_OK", "{answers:?}");
        let answers = ali_ons::produce(&c.namesrv_addr(), "AclProducer", None, &[m]);
        assert!(answers[0]["error"].is_string(), "{answers:?}");
        let got = ali_ons::consume(&ali_ons::Consume {
            max: 2,
            acl: keys,
            serialize_type_field: true,
            ..ali_ons::Consume::all(&c.namesrv_addr(), "AclGroup", "Guarded")
        });
        let mut uniq: Vec<&str> = got
            .iter()
            .map(|d| d["properties"]["UNIQ_KEY"].as_str().unwrap())
            .collect();
        uniq.sort();
        assert_eq!(uniq, ["A1", "A2"]);
    }
);

on_every_broker!(
    fn a_dropped_cluster_leaves_no_process_behind(flavour: Flavour) {
        let c = flavour.start(Options::default());
        let marker = c.dir().display().to_string();
        let running = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
                .filter(|cmd| String::from_utf8_lossy(cmd).contains(&marker))
                .count()
        };
        // two programs, each with its supervisor and the supervisor's pipe watcher
        assert!(running() >= 2, "{}", running());
        drop(c);
        assert_eq!(running(), 0);
    }
);
