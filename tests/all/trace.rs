//! Message traces: `gen --traces` writes what tracing clients write, the library decodes it back
//! to what gen wrote, and `rmqstore trace` tells each message's life (exit statuses, lookups
//! with and without the index, by message id, offset message id, key, topic and time).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::common::*;
use rmqstore::engine::filter::TagFilter;
use rmqstore::engine::store::reader::Reader;
use rmqstore::engine::Store;
use rmqstore::format::commitlog::{prop, sysflag};
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::format::trace::{
    records, trace_keys, MessageType, TraceRecord, TransactionState, BATCH_SIZE,
    DEFAULT_TRACE_TOPIC, MAX_MSG_SIZE,
};
use serde_json::Value;

fn open(root: &Path) -> Store {
    Store::open(root, &GeometryInputs::default()).unwrap()
}

/// One trace message of the store: its KEYS, its body's length before compression, whether it
/// is compressed, its records.
struct TraceMessage {
    keys: String,
    plain_len: usize,
    compressed: bool,
    records: Vec<TraceRecord>,
}

fn trace_messages(store: &Store) -> Vec<TraceMessage> {
    let reader = Reader::new(store);
    let found = reader.scan(usize::MAX, |m| m.topic == DEFAULT_TRACE_TOPIC);
    found
        .offsets
        .iter()
        .map(|&o| {
            let l = reader.message_at(o).unwrap().unwrap();
            let m = &l.message;
            let body = m.decompressed_body().unwrap();
            TraceMessage {
                keys: m.property(prop::KEYS).unwrap_or_default().into_owned(),
                plain_len: body.len(),
                compressed: m.sys_flag & sysflag::COMPRESSED != 0,
                records: records(&body).map(Result::unwrap).collect(),
            }
        })
        .collect()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let o = bin().args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

fn json_lines(s: &str) -> Vec<Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn gen_traces_decode_back_to_what_gen_wrote() {
    let tmp = scratch();
    let dir = tmp.path().join("s");
    gen_traced_store(&dir);
    let store = open(&dir);
    let reader = Reader::new(&store);
    let tms = trace_messages(&store);
    assert!(tms.len() > 5, "{}", tms.len());
    let mut by_type: HashMap<&str, usize> = HashMap::new();
    let mut before: HashMap<String, (String, String)> = HashMap::new();
    let mut after: HashSet<String> = HashSet::new();
    let mut consumed_payment: HashSet<String> = HashSet::new();
    let mut pub_ids: HashSet<String> = HashSet::new();
    let mut states: HashSet<&str> = HashSet::new();
    for tm in &tms {
        // batched as the dispatcher does, keys as it sets them, compressed over 4 KiB
        assert!(!tm.records.is_empty() && tm.records.len() <= BATCH_SIZE);
        assert!(tm.plain_len < MAX_MSG_SIZE);
        assert_eq!(tm.compressed, tm.plain_len > 4096);
        assert_eq!(tm.keys, trace_keys(&tm.records).join(" "));
        for r in &tm.records {
            *by_type.entry(r.trace_type().name()).or_default() += 1;
            match r {
                TraceRecord::Pub(p) => {
                    // the record names the stored message: at its offset msg id, same id,
                    // topic (a half's real topic), tags, keys and body length
                    let l = reader
                        .by_offset_msg_id(p.offset_msg_id.as_deref().unwrap())
                        .unwrap();
                    assert!(l.host_matches());
                    let m = l.record.unwrap().message;
                    assert_eq!(m.uniq_key().as_deref(), Some(p.msg_id.as_str()));
                    let real = m.property(prop::REAL_TOPIC);
                    let topic = match p.msg_type {
                        MessageType::Normal => m.topic.to_string(),
                        _ => real.unwrap().into_owned(),
                    };
                    assert_eq!(topic, p.topic);
                    assert_eq!(
                        m.tags().map(|t| t.into_owned()).unwrap_or("null".into()),
                        p.tags
                    );
                    assert_eq!(
                        m.property(prop::KEYS)
                            .map(|t| t.into_owned())
                            .unwrap_or("null".into()),
                        p.keys
                    );
                    assert_eq!(m.body.len() as i32, p.body_length);
                    assert_eq!(p.store_host, m.store_host.to_string());
                    assert!(p.success && p.timestamp <= m.store_timestamp);
                    match p.msg_type {
                        MessageType::Normal => {}
                        MessageType::Delay => assert_eq!(m.topic, "SCHEDULE_TOPIC_XXXX"),
                        MessageType::TransHalf => {
                            assert_eq!(m.topic, "RMQ_SYS_TRANS_HALF_TOPIC")
                        }
                        t => panic!("gen wrote a Pub of {t:?}"),
                    }
                    pub_ids.insert(p.msg_id.clone());
                }
                TraceRecord::SubBefore(b) => {
                    before.insert(b.request_id.clone(), (b.msg_id.clone(), b.group.clone()));
                    if b.group == "PaymentGroup" {
                        consumed_payment.insert(b.msg_id.clone());
                    }
                }
                TraceRecord::SubAfter(a) => {
                    // a SubBefore with the same request id came first, from the same group
                    let (id, group) = before.get(&a.request_id).expect("SubBefore first");
                    assert_eq!(id, &a.msg_id);
                    assert_eq!(a.group.as_ref(), Some(group));
                    assert_eq!(a.success, group != "OrderGroup");
                    assert_eq!(a.context_code, Some(if a.success { 0 } else { 4 }));
                    after.insert(a.request_id.clone());
                }
                TraceRecord::EndTransaction(e) => {
                    assert_eq!(e.group, "TxProducerGroup");
                    assert_eq!(e.transaction_id, e.msg_id);
                    assert!(pub_ids.contains(&e.msg_id), "ended before it was sent");
                    assert_ne!(e.msg_type, MessageType::Normal);
                    states.insert(e.transaction_state.name());
                }
            }
        }
    }
    for t in ["Pub", "SubBefore", "SubAfter", "EndTransaction"] {
        assert!(
            by_type.get(t).copied().unwrap_or(0) > 0,
            "no {t}: {by_type:?}"
        );
    }
    assert_eq!(after.len(), before.len());
    let all: HashSet<&str> = TransactionState::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(states, all);
    // PaymentGroup consumed every message queued on PaymentTopic (its committed offsets say so)
    let mut payment: HashSet<String> = HashSet::new();
    for q in 0..4 {
        let (hits, _) = reader
            .by_queue_offset("PaymentTopic", q, 0, usize::MAX, &TagFilter::all())
            .unwrap();
        for h in hits {
            let m = reader.message_at(h.offset).unwrap().unwrap().message;
            payment.insert(m.uniq_key().unwrap().into_owned());
        }
    }
    let missing: Vec<_> = payment.difference(&consumed_payment).collect();
    let extra: Vec<_> = consumed_payment.difference(&payment).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{missing:?} {extra:?}"
    );
    // the summary counts what is there
    let n: usize = tms.iter().map(|t| t.records.len()).sum();
    assert_eq!(n, by_type.values().sum::<usize>());
}

#[test]
fn gen_with_traces_is_deterministic_and_leaves_the_rest_alone() {
    let tmp = scratch();
    let (a, b, plain) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("p"),
    );
    gen_traced_store(&a);
    gen_traced_store(&b);
    assert!(tree(&a) == tree(&b), "two runs differ");
    // the same arguments without --traces
    bin()
        .arg("gen")
        .arg(&plain)
        .args(&TRACED_GEN_ARGS[..2])
        .args(SMALL_GEOMETRY)
        .assert()
        .success();
    // the same messages, minus the trace messages (and their index entries)
    let strip = |root: &Path| -> Vec<(String, i32, String)> {
        let s = open(root);
        let r = Reader::new(&s);
        r.scan(usize::MAX, |m| m.topic != DEFAULT_TRACE_TOPIC)
            .offsets
            .iter()
            .map(|&o| {
                let m = r.message_at(o).unwrap().unwrap().message;
                (
                    m.topic.to_string(),
                    m.queue_id,
                    m.uniq_key().unwrap_or_default().into_owned(),
                )
            })
            .collect()
    };
    assert_eq!(strip(&a), strip(&plain));
}

#[test]
fn trace_tells_the_life_of_a_message_by_id_key_and_topic() {
    let tmp = scratch();
    let dir = tmp.path().join("s");
    gen_traced_store(&dir);
    let s = dir.to_str().unwrap();
    let store = open(&dir);
    let reader = Reader::new(&store);
    // a PaymentTopic message with keys: sent, stored here, consumed by PaymentGroup
    let found = reader.scan(1, |m| m.topic == "PaymentTopic" && !m.keys().is_empty());
    let m = reader
        .message_at(found.offsets[0])
        .unwrap()
        .unwrap()
        .message;
    let id = m.uniq_key().unwrap().into_owned();
    let (code, out, err) = run(&["trace", s, "--msg-id", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("message {id}  topic PaymentTopic")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "stored    PaymentTopic queue {} queue offset {}, commitlog offset {}",
            m.queue_id, m.queue_offset, m.position
        )),
        "{out}"
    );
    assert!(
        out.contains("by PaymentProducerGroup from 10.1.0.21:50990 to 192.168.0.10:10911: SEND_OK"),
        "{out}"
    );
    assert!(
        out.contains("by PaymentGroup on 10.1.0.32:51001: success in "),
        "{out}"
    );
    assert!(out.contains("found through the index"), "{out}");

    // the offset message id leads to the same life
    let (code, by_offset, _) = run(&["trace", s, "--msg-id", &m.offset_msg_id()]);
    assert_eq!(code, 0);
    assert_eq!(by_offset, out);

    // by key: every traced message carrying it
    let key = m.keys()[0].clone();
    let (code, out, _) = run(&["trace", s, "--key", &key, "--json"]);
    assert_eq!(code, 0);
    let lines = json_lines(&out);
    let traces: Vec<&Value> = lines.iter().filter(|l| l["type"] == "trace").collect();
    assert!(!traces.is_empty());
    for t in &traces {
        let keys: Vec<&str> = t["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert!(keys.contains(&key.as_str()), "{t}");
    }
    assert!(traces.iter().any(|t| t["msg_id"] == id.as_str()));
    assert_eq!(lines.last().unwrap()["messages"], traces.len());

    // a failed consumption: OrderGroup sent the original back
    let dlq = reader.scan(1, |m| {
        m.topic.starts_with("%RETRY%OrderGroup") || m.topic.starts_with("%DLQ%OrderGroup")
    });
    let copy = reader.message_at(dlq.offsets[0]).unwrap().unwrap().message;
    let orig = copy.uniq_key().unwrap().into_owned();
    let (code, out, _) = run(&["trace", s, "-i", &orig, "--json"]);
    assert_eq!(code, 0);
    let t: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let c = &t["consumed"][0];
    assert_eq!(c["group"], "OrderGroup");
    assert_eq!(c["success"], false);
    assert_eq!(c["consume_return"], "FAILED");
    assert_eq!(t["stored"]["topic"], "OrderTopic");

    // by topic and time: only sends to the topic at or after the time
    let since = m.born_timestamp + 200;
    let (code, out, _) = run(&[
        "trace",
        s,
        "-t",
        "OrderTopic",
        "--since",
        &since.to_string(),
        "-J",
    ]);
    assert_eq!(code, 0);
    let lines = json_lines(&out);
    let traces: Vec<&Value> = lines.iter().filter(|l| l["type"] == "trace").collect();
    assert!(traces.len() > 5);
    for t in traces {
        assert_eq!(t["topic"], "OrderTopic");
        assert!(
            t["sent"][0]["send_timestamp"].as_i64().unwrap() >= since,
            "{t}"
        );
    }
    assert_eq!(lines.last().unwrap()["lookup"], "consume_queue");
}

#[test]
fn trace_without_the_index_or_the_consume_queue_finds_the_same() {
    let tmp = scratch();
    let dir = tmp.path().join("s");
    gen_traced_store(&dir);
    let s = dir.to_str().unwrap();
    let store = open(&dir);
    let reader = Reader::new(&store);
    let found = reader.scan(3, |m| m.topic == "AuditTopic" && m.uniq_key().is_some());
    let ids: Vec<String> = found
        .offsets
        .iter()
        .map(|&o| {
            reader
                .message_at(o)
                .unwrap()
                .unwrap()
                .message
                .uniq_key()
                .unwrap()
                .into_owned()
        })
        .collect();
    let traces = |root: &Path, id: &str| -> (Vec<Value>, Value) {
        let (code, out, err) = run(&["trace", root.to_str().unwrap(), "-i", id, "-J"]);
        assert_eq!(code, 0, "{err}");
        let mut l = json_lines(&out);
        let summary = l.pop().unwrap();
        (l, summary)
    };
    let bare = tmp.path().join("bare");
    copy_tree(&dir, &bare);
    std::fs::remove_dir_all(bare.join("index")).unwrap();
    for id in &ids {
        let (with, s1) = traces(Path::new(s), id);
        let (without, s2) = traces(&bare, id);
        assert_eq!(with, without);
        assert_eq!(s1["lookup"], "index");
        assert_eq!(s2["lookup"], "consume_queue");
    }
    std::fs::remove_dir_all(bare.join("consumequeue").join(DEFAULT_TRACE_TOPIC)).unwrap();
    let (without, s3) = traces(&bare, &ids[0]);
    assert_eq!(without, traces(Path::new(s), &ids[0]).0);
    assert_eq!(s3["lookup"], "commitlog");
}

#[test]
fn nothing_traced_and_no_trace_topic_exit_1_with_words_and_bad_ids_exit_2() {
    let tmp = scratch();
    let dir = tmp.path().join("s");
    gen_traced_store(&dir);
    let s = dir.to_str().unwrap();
    let (code, _, err) = run(&["trace", s, "-k", "no-such-key"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("nothing in RMQ_SYS_TRACE_TOPIC is about key \"no-such-key\""),
        "{err}"
    );
    let (code, _, err) = run(&[
        "trace",
        s,
        "-k",
        "k",
        "--trace-topic",
        "RMQ_SYS_TRACE_TOPlC",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no trace topic \"RMQ_SYS_TRACE_TOPlC\"")
            && err.contains("look like trace topics: \"RMQ_SYS_TRACE_TOPIC\""),
        "{err}"
    );
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/store-4.9");
    let (code, out, err) = run(&["trace", fixture.to_str().unwrap(), "-k", "key-1"]);
    assert_eq!(code, 1);
    assert!(out.is_empty() && err.contains("tracing was off"), "{err}");
    let (code, _, err) = run(&["trace", s, "-i", "not-an-id"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a message id"), "{err}");
    // --topic needs --since, and one of the three is needed
    assert_eq!(run(&["trace", s, "-t", "OrderTopic"]).0, 2);
    assert_eq!(run(&["trace", s]).0, 2);
}

#[test]
fn a_traced_store_verifies_clean() {
    // a trace message carries an index key per traced id and key: hundreds, past 64
    let tmp = scratch();
    let dir = tmp.path().join("s");
    gen_traced_store(&dir);
    let (code, out, err) = run(&["verify", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let store = open(&dir);
    let most = trace_messages(&store)
        .iter()
        .map(|t| t.keys.split(' ').count())
        .max()
        .unwrap();
    assert!(most > 64, "{most}");
}
