//! The real Apache RocketMQ Java clients and `mqadmin` (the Java peer kit, common/java.rs)
//! against `rmqstore serve` as their name server and broker, on a copy of
//! `fixtures/store-4.9`:
//!
//! - the 4.9.8 push, orderly and lite-pull consumers and the 5.x remoting push and lite-pull
//!   consumers drain a topic: every message the engine reads in it arrives exactly once (the
//!   orderly one in queue offset order per queue), equal field by field to the stored record,
//!   and the offsets they commit are the queues' ends;
//! - a push consumer that fails some messages sees them again from `%RETRY%<group>` (a fast
//!   clock lets the retry levels pass) until its max reconsume times, then they are in
//!   `%DLQ%<group>`; after a restart on the same overlay the group gets nothing more;
//! - `mqadmin` (`-n` the server) lists topics, the queue bounds, a group's progress, messages
//!   by offset id, by key and by queue offset, and the broker's runtime status with the
//!   figures the engine reads; 5.x's `mqadmin` the queue bounds and a group's progress.
//!
//! What the clients add to a message after they decoded it (`MIN_OFFSET`, `MAX_OFFSET`,
//! `CONSUME_START_TIME`) is not compared; a body the store holds compressed is compared
//! inflated, as the client hands it over. The store's delayed messages are all due: a first
//! `serve` of each copy delivers them, so that the engine reads the topics as the tests' `serve`
//! serves them.

use crate::common;
use crate::common::java::{self, assert_same_message, Consume, ConsumeMode, JavaVersion};
use crate::common::Server;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmqstore::engine::broker::clock::SystemClock;
use rmqstore::engine::broker::{Engine, EngineOptions};
use rmqstore::engine::Store;
use rmqstore::format::commitlog::{parse_record, sysflag, MessageRef, Record};
use rmqstore::format::geometry::GeometryInputs;
use serde_json::Value;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/store-4.9");

/// Properties the Java consumers put on a message after decoding it.
const CLIENT_PROPERTIES: [&str; 3] = ["MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"];

/// A copy of the fixture store and its overlay.
struct Copy {
    _dir: tempfile::TempDir,
    store: PathBuf,
    overlay: PathBuf,
}

impl Copy {
    fn new() -> Copy {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        copy_dir(Path::new(FIXTURE), &store);
        let overlay = dir.path().join("overlay");
        let c = Copy {
            _dir: dir,
            store,
            overlay,
        };
        c.settle();
        c
    }

    /// A first `serve` delivers the store's delayed messages (all due by now) into their topics
    /// in the overlay, so that the engine reads the topics as every later `serve` serves them.
    fn settle(&self) {
        let s = self.serve(&[]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(s.stop().success());
    }

    /// `serve` on the copy with its overlay and `extra` flags.
    fn serve(&self, extra: &[&str]) -> Server {
        let mut args = vec!["--overlay", self.overlay.to_str().unwrap()];
        args.extend_from_slice(extra);
        Server::start(&self.store, &args)
    }

    /// The engine over the copy and the overlay (once `serve` stopped).
    fn engine(&self) -> Engine {
        let store = Store::open(&self.store, &GeometryInputs::default()).unwrap();
        let opts = EngineOptions::for_store(&store);
        Engine::open_read_only(store, Some(&self.overlay), Arc::new(SystemClock), opts).unwrap()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// (queue id, queue offset) → the record the engine reads there, for every queue of `topic`.
fn records(e: &Engine, topic: &str) -> BTreeMap<(i32, i64), (u64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for q in e.queue_ids(topic) {
        let (min, max) = e.queue_bounds(topic, q);
        for o in min..max {
            let u = e.unit_at(topic, q, o).expect("a unit in the bounds");
            let raw = e.record_at(u.offset).expect("the unit's record");
            out.insert((q, o), (u.offset as u64, raw.into_owned()));
        }
    }
    out
}

fn message(phy: u64, raw: &[u8]) -> MessageRef<'_> {
    match parse_record(raw, 0, phy, true).unwrap() {
        Record::Message(m) => m,
        other => panic!("no message at {phy}: {other:?}"),
    }
}

fn place(d: &Value) -> (i32, i64) {
    (
        d["queueId"].as_i64().unwrap() as i32,
        d["queueOffset"].as_i64().unwrap(),
    )
}

/// `d` (a delivery by a client of `v`) is the stored `m`: the client's own properties taken
/// out, a compressed body compared inflated and then given the stored one's digest (the 5.x
/// client also clears the COMPRESSED flag of the message it inflated), the rest by
/// [`assert_same_message`].
fn assert_delivered(v: JavaVersion, d: &Value, m: &MessageRef<'_>, ctx: &str) {
    let mut d = d.clone();
    let props = d["properties"].as_object_mut().unwrap();
    for k in CLIENT_PROPERTIES {
        props.remove(k);
    }
    if m.sys_flag & sysflag::COMPRESSED != 0 {
        let plain = rmqstore::format::compression::decompress(m.sys_flag, m.body).unwrap();
        assert_eq!(
            d["bodySha256"].as_str(),
            Some(common::sha256_hex(&plain).as_str()),
            "{ctx}: inflated body"
        );
        d["bodySha256"] = common::sha256_hex(m.body).into();
        d["bodyLen"] = m.body.len().into();
        let flag = match v {
            JavaVersion::V4_9 => m.sys_flag,
            JavaVersion::V5 => m.sys_flag & !sysflag::COMPRESSED,
        };
        assert_eq!(d["sysFlag"], flag, "{ctx}: sysflag of the inflated message");
        d["sysFlag"] = m.sys_flag.into();
    }
    assert_same_message(&d, m, ctx);
}

/// Every message of `topic` delivered exactly once and equal to the record; with `orderly`, in
/// queue offset order per queue.
fn assert_drained(
    v: JavaVersion,
    e: &Engine,
    topic: &str,
    got: &[Value],
    orderly: bool,
    ctx: &str,
) {
    let want = records(e, topic);
    assert!(want.len() > 100, "{ctx}: {} messages", want.len());
    let mut seen: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    for d in got {
        assert_eq!(d["topic"], topic, "{ctx}: {d}");
        let at = place(d);
        *seen.entry(at).or_default() += 1;
        let (phy, raw) = want
            .get(&at)
            .unwrap_or_else(|| panic!("{ctx}: delivered {at:?}, which is not in the topic"));
        assert_delivered(v, d, &message(*phy, raw), &format!("{ctx} {at:?}"));
        if orderly {
            let prev = last.insert(at.0, at.1);
            assert!(
                prev.is_none_or(|p| p < at.1),
                "{ctx}: queue {} went from {prev:?} to {}",
                at.0,
                at.1
            );
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{ctx}: delivered more than once: {twice:?}"
    );
    let missing: Vec<_> = want.keys().filter(|k| !seen.contains_key(k)).collect();
    assert!(missing.is_empty(), "{ctx}: never delivered: {missing:?}");
}

/// The group committed every queue of `topic` to its end.
fn assert_committed(e: &Engine, group: &str, topic: &str) {
    for q in e.queue_ids(topic) {
        let (_, max) = e.queue_bounds(topic, q);
        assert_eq!(
            e.committed_offset(group, topic, q),
            max,
            "{group} on {topic}:{q}"
        );
    }
}

fn drain<'a>(addr: &'a str, group: &'a str, topic: &'a str, mode: ConsumeMode) -> Consume<'a> {
    Consume {
        mode,
        idle_ms: 2000,
        start_ms: 20_000,
        ..Consume::all(addr, group, topic)
    }
}

/// Each `(group, mode)` of `runs` drains `topic` with the client of `v`, one after the other,
/// through one `serve`; then each got every message once and committed every queue's end.
fn drains(v: JavaVersion, topic: &str, runs: &[(&str, ConsumeMode)]) {
    let c = Copy::new();
    let s = c.serve(&[]);
    let got: Vec<Vec<Value>> = runs
        .iter()
        .map(|(group, mode)| java::consume(v, &drain(&s.addr, group, topic, *mode)))
        .collect();
    assert!(s.stop().success());
    let e = c.engine();
    for ((group, mode), got) in runs.iter().zip(&got) {
        let ctx = format!("{} {mode:?}", v.label());
        assert_drained(v, &e, topic, got, *mode == ConsumeMode::Orderly, &ctx);
        assert_committed(&e, group, topic);
    }
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn java_4_9_push_orderly_and_lite_pull_consumers_drain_a_topic() {
    let v = JavaVersion::V4_9;
    if !java::ready(v) {
        return;
    }
    let runs = [
        ("JavaPushGroup", ConsumeMode::Push),
        ("JavaOrderlyGroup", ConsumeMode::Orderly),
        ("JavaLitePullGroup", ConsumeMode::LitePull),
    ];
    drains(v, "OrderTopic", &runs);
}

/// The 5.x remoting client; its lite pull consumer pulls with `LITE_PULL_MESSAGE`.
#[test]
#[cfg_attr(not(rmqstore_java_5), ignore = "needs the Java 5.x peer kit")]
fn java_5_push_and_lite_pull_consumers_drain_a_topic() {
    let v = JavaVersion::V5;
    if !java::ready(v) {
        return;
    }
    let runs = [
        ("Java5PushGroup", ConsumeMode::Push),
        ("Java5LitePullGroup", ConsumeMode::LitePull),
    ];
    drains(v, "PaymentTopic", &runs);
}

/// The UNIQ_KEY of every message of `topic` whose queue offset is ≡ 3 (mod `m`): the ones the
/// driver fails.
fn failing(e: &Engine, topic: &str, m: i64) -> BTreeSet<String> {
    records(e, topic)
        .iter()
        .filter(|((_, o), _)| o % m == 3 % m)
        .map(|(_, (phy, raw))| message(*phy, raw).uniq_key().unwrap().to_string())
        .collect()
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn java_retries_end_in_the_dlq_and_a_restart_delivers_nothing_more() {
    let v = JavaVersion::V4_9;
    if !java::ready(v) {
        return;
    }
    let (topic, group, fail_mod, max_reconsume) = ("AuditTopic", "JavaRetryGroup", 3, 2);
    let c = Copy::new();
    // retry levels of 10 s and 30 s pass in a few milliseconds
    let fast = ["--time-scale", "10000"];
    let s = c.serve(&fast);
    let got = java::consume(
        v,
        &Consume {
            fail_mod,
            max_reconsume,
            ..drain(&s.addr, group, topic, ConsumeMode::Push)
        },
    );
    assert!(s.stop().success());
    let e = c.engine();
    let first: Vec<Value> = got
        .iter()
        .filter(|d| d["reconsumeTimes"] == 0)
        .cloned()
        .collect();
    assert_drained(v, &e, topic, &first, false, "4.9 push, first deliveries");
    let failed = failing(&e, topic, fail_mod as i64);
    assert!(!failed.is_empty());
    // each failed message came back from the retry topic once per reconsume time
    let retry = format!("%RETRY%{group}");
    for rc in 1..=max_reconsume as i64 {
        let again: BTreeSet<String> = got
            .iter()
            .filter(|d| d["reconsumeTimes"] == rc)
            .map(|d| {
                assert_eq!(d["topic"], topic, "{d}");
                assert_eq!(d["properties"]["RETRY_TOPIC"], topic, "{d}");
                d["uniqKey"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(again, failed, "redeliveries at reconsume {rc}");
    }
    let redelivered = got.iter().filter(|d| d["reconsumeTimes"] != 0).count();
    assert_eq!(redelivered, failed.len() * max_reconsume as usize);
    // then they went to the dead letter queue
    let dlq = format!("%DLQ%{group}");
    let dead: BTreeSet<String> = records(&e, &dlq)
        .values()
        .map(|(phy, raw)| {
            let m = message(*phy, raw);
            assert_eq!(m.reconsume_times, max_reconsume as i32 + 1);
            assert_eq!(m.property("RETRY_TOPIC").as_deref(), Some(topic));
            m.uniq_key().unwrap().to_string()
        })
        .collect();
    assert_eq!(dead, failed);
    assert_committed(&e, group, topic);
    assert_committed(&e, group, &retry);
    drop(e);

    // a restart on the same overlay: the offsets were kept, nothing is delivered again
    let s = c.serve(&fast);
    let again = java::consume(
        v,
        &Consume {
            start_ms: 6000,
            ..drain(&s.addr, group, topic, ConsumeMode::Push)
        },
    );
    assert!(s.stop().success());
    assert!(
        again.is_empty(),
        "{} delivered after the restart",
        again.len()
    );
}

/// The rows of `mqadmin` output whose first column is `first`, split on whitespace.
fn rows<'a>(out: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.first() == Some(&first))
        .collect()
}

/// The value of a `Name: value` line of `mqadmin` output.
fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim())
        })
        .unwrap_or_else(|| panic!("no {name} in\n{out}"))
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn mqadmin_lists_and_queries_through_serve() {
    let v = JavaVersion::V4_9;
    if !java::ready(v) {
        return;
    }
    let c = Copy::new();
    let topic = "OrderTopic";
    // the message looked up by id, key and offset: its offset id names the server
    let (q, o) = (2, 17);
    let port = free_port();
    let phy = c.engine().unit_at(topic, q, o).unwrap().offset as u64;
    move_store_host(&c.store, phy, port);
    let s = serve_at(&c, port);
    let n = s.addr.as_str();
    let e = c.engine();

    let out = java::mqadmin(v, &["topicList", "-n", n]);
    let listed: BTreeSet<&str> = out.lines().map(str::trim).collect();
    for t in [
        "OrderTopic",
        "PaymentTopic",
        "AuditTopic",
        "%RETRY%OrderGroup",
    ] {
        assert!(listed.contains(t), "topicList: no {t} in\n{out}");
    }

    topic_status(v, n, &e, topic);

    // a group that drained the topic, and one with the store's own offsets
    let group = "JavaAdminGroup";
    let got = java::consume(v, &drain(n, group, topic, ConsumeMode::Push));
    assert_eq!(got.len(), records(&e, topic).len());
    progress(v, n, &e, group, topic, |_, max| max);
    progress(v, n, &e, "OrderGroup", topic, |q, _| {
        e.committed_offset("OrderGroup", topic, q)
    });

    let (_, raw) = records(&e, topic)[&(q, o)].clone();
    let m = message(phy, &raw);
    assert_eq!(
        common::java_host(&m.store_host),
        n,
        "the record names the server"
    );
    let keys = m
        .property("KEYS")
        .expect("the message has keys")
        .to_string();
    let tags = m.property("TAGS").map(|t| t.to_string());
    let shows_message = |out: &str, how: &str| {
        assert_eq!(field(out, "Topic"), topic, "{how}\n{out}");
        assert_eq!(field(out, "Keys"), format!("[{keys}]"), "{how}\n{out}");
        assert_eq!(field(out, "Store Host"), n, "{how}\n{out}");
        assert_eq!(field(out, "Queue ID"), q.to_string(), "{how}\n{out}");
        assert_eq!(field(out, "Queue Offset"), o.to_string(), "{how}\n{out}");
        assert_eq!(
            field(out, "CommitLog Offset"),
            phy.to_string(),
            "{how}\n{out}"
        );
        if let Some(t) = &tags {
            assert_eq!(field(out, "Tags"), format!("[{t}]"), "{how}\n{out}");
        }
    };
    let id = m.offset_msg_id();
    let out = java::mqadmin(v, &["queryMsgById", "-n", n, "-i", &id]);
    shows_message(&out, "queryMsgById");

    let out = java::mqadmin(v, &["queryMsgByKey", "-n", n, "-t", topic, "-k", &keys]);
    // #Message ID  #QID  #Offset
    let uniq = m.uniq_key().unwrap().to_string();
    assert!(
        out.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w == [uniq.as_str(), &q.to_string(), &o.to_string()]
        }),
        "queryMsgByKey: no {uniq} {q} {o} in\n{out}"
    );

    let (qs, os) = (q.to_string(), o.to_string());
    let args = [
        "queryMsgByOffset",
        "-n",
        n,
        "-t",
        topic,
        "-b",
        "broker-a",
        "-i",
        &qs,
        "-o",
        &os,
    ];
    let out = java::mqadmin(v, &args);
    shows_message(&out, "queryMsgByOffset");

    let out = java::mqadmin(v, &["brokerStatus", "-n", n, "-b", n]);
    assert_eq!(
        field(&out, "commitLogMaxOffset"),
        e.commitlog_max().to_string(),
        "{out}"
    );
    assert_eq!(field(&out, "brokerVersionDesc"), "V4_9_8", "{out}");
    assert!(s.stop().success());
}

/// A free loopback port (the listener is closed again at once).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The record at commitlog offset `phy` of the copy gets `127.0.0.1:port` as its store host, as
/// if a broker on that address had written it. `queryMsgById` connects to the host its offset
/// id names, and the fixture's records name the broker that wrote them (192.168.0.10:10911).
/// STOREHOSTADDRESS is not under the body CRC; of an IPv4 record it is bytes 64..72.
fn move_store_host(store: &Path, phy: u64, port: u16) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let file_size = 262_144;
    let start = phy / file_size * file_size;
    let path = store.join("commitlog").join(format!("{start:020}"));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut head = [0u8; 72];
    f.seek(SeekFrom::Start(phy - start)).unwrap();
    f.read_exact(&mut head).unwrap();
    let flags = i32::from_be_bytes(head[36..40].try_into().unwrap());
    assert_eq!(flags & (sysflag::BORNHOST_V6 | sysflag::STOREHOST_V6), 0);
    let mut host = [127, 0, 0, 1, 0, 0, 0, 0];
    host[4..].copy_from_slice(&u32::from(port).to_be_bytes());
    f.seek(SeekFrom::Start(phy - start + 64)).unwrap();
    f.write_all(&host).unwrap();
}

/// `serve` on the copy listening on `127.0.0.1:port`.
fn serve_at(c: &Copy, port: u16) -> Server {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmqstore"))
        .arg("serve")
        .arg(&c.store)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--overlay")
        .arg(&c.overlay)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("serve printed {line:?}"))
        .to_string();
    Server { child, addr }
}

/// `topicStatus -t topic`: a row per queue with the engine's bounds.
fn topic_status(v: JavaVersion, n: &str, e: &Engine, topic: &str) {
    // #Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated
    let out = java::mqadmin(v, &["topicStatus", "-n", n, "-t", topic]);
    let table = rows(&out, "broker-a");
    assert_eq!(table.len(), e.queue_ids(topic).len(), "{out}");
    for r in &table {
        let q: i32 = r[1].parse().unwrap();
        let (min, max) = e.queue_bounds(topic, q);
        assert_eq!(
            (r[2], r[3]),
            (&*min.to_string(), &*max.to_string()),
            "{out}"
        );
    }
}

/// `consumerProgress -g group`: a row per queue of `topic` with the queue's end as the broker
/// offset and `consumer(q, max)` as the group's.
fn progress(
    v: JavaVersion,
    n: &str,
    e: &Engine,
    group: &str,
    topic: &str,
    consumer: impl Fn(i32, i64) -> i64,
) {
    // #Topic  #Broker Name  #QID  #Broker Offset  #Consumer Offset  #Diff  (5.x: #Inflight)  #LastTime
    let out = java::mqadmin(v, &["consumerProgress", "-n", n, "-g", group]);
    let table = rows(&out, topic);
    assert_eq!(table.len(), e.queue_ids(topic).len(), "{out}");
    for r in &table {
        assert_eq!(r[1], "broker-a", "{out}");
        let q: i32 = r[2].parse().unwrap();
        let (_, max) = e.queue_bounds(topic, q);
        let want = consumer(q, max);
        assert_eq!(r[3], max.to_string(), "{group} broker offset of {q}\n{out}");
        assert_eq!(
            r[4],
            want.to_string(),
            "{group} consumer offset of {q}\n{out}"
        );
        assert_eq!(r[5], (max - want).to_string(), "{group} diff of {q}\n{out}");
        if v == JavaVersion::V5 {
            assert_eq!(r[6], "0", "{group} in flight on {q}\n{out}");
        }
    }
    // the total is over every row (the group's retry topic too)
    let diff: i64 = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() > 5 && w[1] == "broker-a")
        .map(|w| w[5].parse::<i64>().unwrap())
        .sum();
    let total = match v {
        JavaVersion::V4_9 => "Diff Total",
        JavaVersion::V5 => "Consume Diff Total",
    };
    assert_eq!(field(&out, total), diff.to_string(), "{out}");
}

/// 5.x's `mqadmin` reads a topic's config (`GET_TOPIC_CONFIG`) before its stats and prints the
/// messages in flight (the pull offset less the consumer offset) beside the progress.
#[test]
#[cfg_attr(not(rmqstore_java_5), ignore = "needs the Java 5.x peer kit")]
fn mqadmin_5_shows_topic_status_and_consumer_progress() {
    let v = JavaVersion::V5;
    if !java::ready(v) {
        return;
    }
    let c = Copy::new();
    let e = c.engine();
    let s = c.serve(&[]);
    let topic = "OrderTopic";
    topic_status(v, &s.addr, &e, topic);
    progress(v, &s.addr, &e, "OrderGroup", topic, |q, _| {
        e.committed_offset("OrderGroup", topic, q)
    });
    assert!(s.stop().success());
}
