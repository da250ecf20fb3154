//! The live cluster the `send` tests run against (common/cluster.rs), proved: ali-ons produces
//! into it and consumes back, our own pull reads the same records, and what the broker does
//! with the requests `send` relies on is pinned down, one fact a test (the list is in the
//! harness's module doc). Each test starts its own name server and broker (about 0.3 s).

use crate::common::ali_ons;
use crate::common::cluster::{self, command, rpc, LiveCluster, Options, Reply, BROKER_NAME};

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use rmqstore::format::commitlog::write::encode_properties;
use rmqstore::format::commitlog::Message;
use rmqstore::remoting::header::{SendMessageRequestHeaderV2, SendMessageResponseHeader};
use rmqstore::remoting::{codes, ExtFields};
use serde_json::{json, Value};

/// The properties the broker adds to every message it stores.
const ADDED: [(&str, &str); 3] = [
    ("CLUSTER", cluster::CLUSTER),
    ("MSG_REGION", "DefaultRegion"),
    ("TRACE_ON", "true"),
];

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
fn send(c: &LiveCluster, h: SendMessageRequestHeaderV2, body: &[u8]) -> Reply {
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
    c: &LiveCluster,
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
fn with_added(sent: &[(&str, &str)]) -> BTreeMap<String, String> {
    sent.iter()
        .chain(ADDED.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Polls `topic` until it holds `n` messages (at most `within`): the broker acknowledges a
/// send once the commitlog has it, and indexes it into the consume queue a moment later.
fn wait_for(c: &LiveCluster, topic: &str, n: usize, within: Duration) -> Vec<Message> {
    let deadline = Instant::now() + within;
    loop {
        let got = c.pull_all(topic);
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[cfg_attr(
    not(all(rmqstore_cluster, rmqstore_ali_ons)),
    ignore = "needs rocketmq-rust's name server and broker, and the ali-ons client"
)]
fn ali_ons_produces_into_the_cluster_and_consumes_every_field_back() {
    if !cluster::ready() || !ali_ons::ready() {
        return;
    }
    let c = LiveCluster::start();
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
    let stored = wait_for(&c, "OnsTopic", messages.len(), Duration::from_secs(5));
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
        let want = with_added(&[
            ("UNIQ_KEY", uniq),
            ("TAGS", &tags),
            ("KEYS", &keys),
            ("color", "rouge ✓"),
            ("n", &n),
        ]);
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

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn a_send_keeps_body_flag_born_time_reconsume_times_sysflag_and_every_property() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start();
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
    // the transaction id is the message's UNIQ_KEY
    assert_eq!(ext.get("transactionId"), Some(sent[0].1));

    let stored = wait_for(&c, "KeepTopic", 1, Duration::from_secs(5));
    assert_eq!(stored.len(), 1);
    let m = &stored[0];
    assert_eq!(ext.get("msgId"), Some(offset_id(m)).as_deref());
    assert_eq!((m.queue_id, m.queue_offset), (2, 0));
    assert_eq!(m.body, zlib);
    assert_eq!(m.sys_flag, 1);
    assert_eq!(m.flag, 7);
    assert_eq!(m.born_timestamp, 1_234_567_890_123);
    assert_eq!(m.reconsume_times, 3);
    // every property comes back byte for byte, with three more; their order is the broker's
    assert_eq!(prop_map(m), with_added(&sent));
}

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn a_send_without_uniq_key_gets_one_from_the_broker_a_batch_message_does_not() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start();
    let mut h = header("NoUniq");
    h.i = props(&[("KEYS", "single")]);
    let r = send_ok(&c, h, b"single");
    let generated = r.transaction_id.unwrap();
    assert_eq!(generated.len(), 32, "{generated}");

    let mut h = header("NoUniq");
    h.m = true;
    h.e = 1;
    let blob = (
        encode_properties(&[("KEYS", "batched")], true),
        b"batched".to_vec(),
    );
    let r = send_ok(&c, h, &batch_body(&[blob]));
    assert_eq!(r.transaction_id, None);

    let stored = wait_for(&c, "NoUniq", 2, Duration::from_secs(5));
    assert_eq!(stored.len(), 2);
    let by_keys = |k: &str| {
        stored
            .iter()
            .find(|m| m.property("KEYS").as_deref() == Some(k))
            .unwrap()
    };
    assert_eq!(
        by_keys("single").property("UNIQ_KEY").as_deref(),
        Some(generated.as_str())
    );
    assert_eq!(by_keys("batched").property("UNIQ_KEY"), None);
}

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn a_batch_is_stored_one_record_per_message_with_its_own_properties_first() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start();
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

    let stored = wait_for(&c, "BatchTopic", 3, Duration::from_secs(5));
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
        // header's and the broker's in its own order
        let mut own = blob_props.clone();
        if own.last() != Some(&2) {
            own.push(2);
        }
        assert!(
            m.properties.starts_with(&own),
            "{i}: {:?}",
            String::from_utf8_lossy(&m.properties)
        );
        let mut want: Vec<(String, String)> = rmqstore::format::commitlog::Properties(blob_props)
            .iter()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        want.push(("WAIT".into(), "true".into()));
        let want: BTreeMap<String, String> = want
            .into_iter()
            .chain(ADDED.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        assert_eq!(prop_map(m), want, "{i}");
    }
}

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn sizes_over_the_limits_and_retry_topic_batches_are_message_illegal() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start();
    let uniq = props(&[("UNIQ_KEY", "BIG")]);
    let with = |i: Option<String>| {
        let mut h = header("Limits");
        h.i = i;
        h
    };
    // an empty body is refused; a body of 4 MiB is taken, one byte more is not
    let r = send(&c, with(uniq.clone()), b"");
    assert_eq!(r.command.code, codes::MESSAGE_ILLEGAL, "{:?}", r.command);
    send_ok(&c, with(uniq.clone()), &vec![b'x'; 4 << 20]);
    let r = send(&c, with(uniq.clone()), &vec![b'x'; (4 << 20) + 1]);
    assert_eq!(r.command.code, codes::MESSAGE_ILLEGAL, "{:?}", r.command);
    assert_eq!(
        r.command.remark.as_deref(),
        Some("message body size 4194305 exceeds the configured maximum 4194304 bytes")
    );
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
    let mut h = header("Limits");
    h.m = true;
    let r = send(&c, h, &batch_body(&mb));
    assert_eq!(r.command.code, codes::MESSAGE_ILLEGAL, "{:?}", r.command);
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
        wait_for(&c, "Many", 2000, Duration::from_secs(10)).len(),
        2000
    );
    // no batches to retry topics
    let mut h = header("%RETRY%SomeGroup");
    h.m = true;
    let r = send(&c, h, &batch_body(&many[..1]));
    assert_eq!(r.command.code, codes::MESSAGE_ILLEGAL, "{:?}", r.command);
}

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn topics_are_created_by_update_and_create_topic_and_listed_by_get_all_topic_config() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start();
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
    // and a queue beyond the topic's is a SYSTEM_ERROR
    let mut h = header("Created");
    h.e = 3;
    let r = send(&c, h, b"q");
    assert_eq!(r.command.code, codes::SYSTEM_ERROR, "{:?}", r.command);
    // a negative queue id lets the broker pick one
    let mut h = header("Created");
    h.e = -1;
    let r = send_ok(&c, h, b"q");
    assert!((0..3).contains(&r.queue_id), "{r:?}");
}

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn a_missing_topic_is_created_from_tbw102_with_at_most_its_queue_count() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start();
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

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn without_auto_create_a_missing_topic_is_topic_not_exist() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start_with(Options {
        auto_create_topics: false,
        ..Options::default()
    });
    assert!(c.route("TBW102").is_none());
    let r = send(&c, header("Missing"), b"m");
    assert_eq!(r.command.code, codes::TOPIC_NOT_EXIST, "{:?}", r.command);
    assert_eq!(
        r.command.remark.as_deref(),
        Some("topic[Missing] not exist, apply first please!")
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

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn a_delay_level_waits_in_schedule_topic_xxxx_and_lands_with_its_real_topic() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start();
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
        send_ok(&c, h, uniq.as_bytes());
    }
    // level n waits in queue n-1 of SCHEDULE_TOPIC_XXXX; past the last level (18), the last
    let waiting: BTreeMap<String, (i32, String)> =
        wait_for(&c, "SCHEDULE_TOPIC_XXXX", 3, Duration::from_secs(5))
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
    // level 0 and a level that is no number are stored at once, DELAY kept
    let now: BTreeMap<String, Option<String>> = wait_for(&c, "Delayed", 2, Duration::from_secs(5))
        .iter()
        .map(|m| {
            (
                m.property("UNIQ_KEY").unwrap().into_owned(),
                m.property("DELAY").map(|d| d.into_owned()),
            )
        })
        .collect();
    let want: BTreeMap<String, Option<String>> = [("D0", "0"), ("Dx", "x")]
        .into_iter()
        .map(|(u, d)| (u.to_string(), Some(d.to_string())))
        .collect();
    assert_eq!(now, want);
    // level 1 (1 s) lands in the topic: DELAY gone, WAIT false, REAL_TOPIC and REAL_QID kept
    let got = wait_for(&c, "Delayed", 3, Duration::from_secs(10));
    let m = got
        .iter()
        .find(|m| m.property("UNIQ_KEY").as_deref() == Some("D1"))
        .expect("level 1 was not delivered in 10 s");
    assert_eq!(m.property("DELAY"), None);
    assert_eq!(m.property("WAIT").as_deref(), Some("false"));
    assert_eq!(m.property("REAL_TOPIC").as_deref(), Some("Delayed"));
    assert_eq!(m.property("REAL_QID").as_deref(), Some("0"));
    assert_eq!(m.born_timestamp, born);
    assert!(
        m.store_timestamp - born >= 1000,
        "{}",
        m.store_timestamp - born
    );
}

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn timer_deliver_ms_is_delivered_at_its_time_and_refused_when_past() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start();
    let at = now_ms() + 1500;
    let mut h = header("Timed");
    h.i = props(&[("UNIQ_KEY", "T1"), ("TIMER_DELIVER_MS", &at.to_string())]);
    let r = send(&c, h, b"timed");
    assert_eq!(r.command.code, codes::SUCCESS, "{:?}", r.command);
    assert!(
        r.command.ext_fields.get("recallHandle").is_some(),
        "{:?}",
        r.command
    );
    // waiting in the timer's topic, with the real topic beside it
    let wheel = wait_for(&c, "rmq_sys_wheel_timer", 1, Duration::from_secs(5));
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
    // a time that is not in the future, or no number, is refused
    for when in [(now_ms() - 5000).to_string(), "soon".to_string()] {
        let mut h = header("Timed");
        h.i = props(&[("UNIQ_KEY", "T3"), ("TIMER_DELIVER_MS", &when)]);
        let r = send(&c, h, b"late");
        assert_eq!(
            r.command.code,
            codes::MESSAGE_ILLEGAL,
            "{when}: {:?}",
            r.command
        );
    }
    // delivered at its time (the wheel ticks each second): the timer properties gone
    let got = wait_for(&c, "Timed", 2, Duration::from_secs(10));
    assert_eq!(got.len(), 2, "not delivered in 10 s");
    for m in &got {
        assert!(
            m.store_timestamp >= at - 1000,
            "{} < {at}",
            m.store_timestamp
        );
        assert_eq!(m.property("TIMER_DELIVER_MS"), None);
        assert_eq!(m.property("TIMER_DELAY_SEC"), None);
        assert_eq!(m.property("WAIT").as_deref(), Some("false"));
        assert!(m.property("TIMER_DELIVERY_TOKEN").is_some());
    }
}

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn a_stopped_broker_keeps_what_it_acknowledged_and_comes_back_on_the_same_address() {
    if !cluster::ready() {
        return;
    }
    let mut c = LiveCluster::start();
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
    assert_eq!(wait_for(&c, "Durable", 3, Duration::from_secs(5)).len(), 3);
    send_ok(&c, header("Durable"), b"after");
    assert!(c.route("Durable").is_some());
    // SIGTERM: the same
    c.stop_broker();
    assert!(rpc(&addr, &command(codes::GET_BROKER_RUNTIME_INFO, &[]), &[]).is_err());
    assert!(c.route("Durable").is_none());
    c.restart_broker();
    assert_eq!(wait_for(&c, "Durable", 4, Duration::from_secs(5)).len(), 4);
}

#[test]
#[cfg_attr(
    not(all(rmqstore_cluster, rmqstore_ali_ons)),
    ignore = "needs rocketmq-rust's name server and broker, and the ali-ons client"
)]
fn acl_refuses_unsigned_requests_wrong_secrets_and_missing_permissions() {
    if !cluster::ready() || !ali_ons::ready() {
        return;
    }
    let c = LiveCluster::start_with(Options {
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
    // every refusal is NO_PERMISSION (16), without the send's ext fields
    for (who, r, remark) in [
        (
            "reader",
            signed(reader.access_key, reader.secret_key),
            "Permission was denied",
        ),
        (
            "wrong secret",
            signed(admin.access_key, "not-the-secret"),
            "Authentication credentials are invalid",
        ),
        (
            "unknown key",
            signed("nobody", "x"),
            "Authentication credentials are invalid",
        ),
    ] {
        assert_eq!(
            r.command.code,
            codes::NO_PERMISSION,
            "{who}: {:?}",
            r.command
        );
        assert_eq!(r.command.remark.as_deref(), Some(remark), "{who}");
        assert_eq!(r.command.ext_fields, ExtFields::new(), "{who}");
    }
    let mut unsigned = command(codes::SEND_MESSAGE_V2, &[]);
    unsigned.write_header(&header("Guarded"));
    let r = rpc(&c.broker_addr(), &unsigned, b"body").unwrap();
    assert_eq!(r.command.code, codes::NO_PERMISSION, "{:?}", r.command);
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

#[test]
#[cfg_attr(
    not(rmqstore_cluster),
    ignore = "needs rocketmq-rust's name server and broker"
)]
fn a_dropped_cluster_leaves_no_process_behind() {
    if !cluster::ready() {
        return;
    }
    let c = LiveCluster::start();
    let store = c.store_dir();
    let marker = store
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .display()
        .to_string();
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
