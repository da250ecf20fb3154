//! `send` against a live cluster (each broker of common/cluster.rs: the real 4.9 and 5.x, rocketmq-rust opt-in),
//! everything read back and compared with its source field by field: the oracle stores (plain
//! and DLedger, 4.9 and 5.x timers), a salvage store made by `repair`, an export file;
//! `--create-topics`, `--topic-map`, `--mark`, `--deliver-now`; `send` killed at random moments
//! and at the journal's failpoints, then resumed; the broker stopped or killed mid-send; ACL
//! refused and granted.
//!
//! What a sent message must be on the broker (issue 34, and the harness's list of what this
//! broker does): the body as stored with its compression bits, the flag, the born time, every
//! property the producer set (compared as a map, since the broker reorders them), the queue of
//! a message found in its topic (and each queue's order), a remaining delay as the recomputed
//! level in `SCHEDULE_TOPIC_XXXX` or a timer's `TIMER_DELIVER_MS` in the timer wheel's topic (or
//! plain with `--deliver-now`). The broker adds `CLUSTER`,
//! `MSG_REGION` and `TRACE_ON`, and keeps the `WAIT=true` the producer sends. A sent message is
//! found on the broker by the offset message id its `send` line names, so nothing is matched
//! by guesswork.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::ali_ons;
use crate::common::cluster::{Cluster, Flavour, Options, ADMIN, READER};
use crate::common::java::{self, JavaVersion};
use crate::common::*;
use crate::on_every_broker;
use rmqstore::engine::store::message_json::read_line;
use rmqstore::engine::store::reader::Reader;
use rmqstore::engine::Store;
use rmqstore::format::commitlog::{sysflag, Message};
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::format::msgid::offset_msg_id;
use rmqstore::send::journal::{Access, Journal};
use serde_json::Value;

const SCHEDULE: &str = "SCHEDULE_TOPIC_XXXX";
/// Where a 5.x broker parks a timer message.
const WHEEL: &str = "rmq_sys_wheel_timer";

/// The broker's default `messageDelayLevel` (the oracle stores' too), in ms.
const LEVELS_MS: [i64; 18] = [
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
    480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
];

/// Properties of a stored record that a sent message does not carry (the broker's own, the
/// parked copy's, the transaction's, the timer requests of a message already released: issue
/// 34, "what a message keeps"; a pending timer's are checked on their own).
const NOT_CARRIED: [&str; 17] = [
    "TIMER_DELIVER_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELAY_MS",
    "TIMER_OUT_MS",
    "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES",
    "CLUSTER",
    "WAIT",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "REAL_TOPIC",
    "REAL_QID",
    "DELAY",
    "TRAN_MSG",
    "PGROUP",
    "TRAN_PREPARED_QUEUE_OFFSET",
];

/// What the target may add to a stored message, one set for a message sent alone and one for
/// a message of a batch (tests/all/cluster.rs pins both): the broker's own properties, and
/// the producer's `WAIT=true` where the broker keeps it (4.9 drops it from a single message
/// and appends it to each of a batch's; 5.x keeps it on a single message and adds nothing to a
/// batch's).
fn added(flavour: Flavour) -> [Vec<(&'static str, &'static str)>; 2] {
    let broker = flavour.added_properties().to_vec();
    let with_wait = |mut a: Vec<(&'static str, &'static str)>| {
        a.push(("WAIT", "true"));
        a
    };
    let single = if flavour.drops_wait() {
        broker.clone()
    } else {
        with_wait(broker.clone())
    };
    let batched = if flavour.batch_adds_properties() {
        with_wait(broker)
    } else {
        Vec::new()
    };
    [single, batched]
}

// ---------------------------------------------------------------------------------------------
// running send

/// A finished `send --json`.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    /// The `send` lines.
    lines: Vec<Value>,
    summary: Option<Value>,
    stderr: String,
}

impl Ran {
    fn summary(&self) -> &Value {
        self.summary
            .as_ref()
            .unwrap_or_else(|| panic!("no summary: {}", self.stderr))
    }

    fn sent(&self) -> impl Iterator<Item = &Value> {
        self.lines.iter().filter(|l| l["status"] == "sent")
    }

    fn assert_code(&self, code: i32) {
        assert_eq!(
            self.code,
            Some(code),
            "exit {:?}: {}\n{:?}",
            self.code,
            self.stderr,
            self.summary
        );
    }
}

fn rmqstore() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("rmqstore"));
    c.env_clear().env("TZ", "UTC");
    c
}

/// The lines of a `send --json` stdout, a last line cut short by a kill left out.
fn parse(stdout: &[u8]) -> (Vec<Value>, Option<Value>) {
    let mut lines = Vec::new();
    let mut summary = None;
    for l in String::from_utf8_lossy(stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(l) else {
            continue;
        };
        match v["type"].as_str() {
            Some("send") => lines.push(v),
            Some("summary") => summary = Some(v),
            _ => panic!("unexpected line {l}"),
        }
    }
    (lines, summary)
}

/// `send SOURCE --json --journal JOURNAL ARGS`, to its end (at most 120 s).
fn send(source: &Path, journal: &Path, args: &[&str]) -> Ran {
    let out = bin()
        .arg("send")
        .arg(source)
        .arg("--json")
        .arg("--journal")
        .arg(journal)
        .args(args)
        .output()
        .unwrap();
    let (lines, summary) = parse(&out.stdout);
    Ran {
        code: out.status.code(),
        lines,
        summary,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `--namesrv ADDR`.
fn to(c: &dyn Cluster) -> Vec<String> {
    vec!["--namesrv".into(), c.namesrv_addr()]
}

fn args<'a>(a: &'a [String], more: &[&'a str]) -> Vec<&'a str> {
    a.iter()
        .map(String::as_str)
        .chain(more.iter().copied())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// the source and the target

/// The source records the `send` lines name, by key: read from the store (commitlog offset) or
/// the export file (line number, from 1).
fn source_records(source: &Path, lines: &[Value]) -> HashMap<u64, Message> {
    let keys: BTreeSet<u64> = lines.iter().map(|l| l["key"].as_u64().unwrap()).collect();
    if source.is_file() {
        let text = std::fs::read_to_string(source).unwrap();
        let all: Vec<&str> = text.lines().collect();
        return keys
            .into_iter()
            .map(|k| {
                let line = all[(k - 1) as usize];
                (k, read_line(line.as_bytes()).unwrap().message)
            })
            .collect();
    }
    let store = Store::open(source, &GeometryInputs::default()).unwrap();
    let reader = Reader::new(&store);
    keys.into_iter()
        .map(|k| {
            let at = reader
                .message_at(k)
                .unwrap()
                .unwrap_or_else(|| panic!("no record at {k}"));
            (k, at.message.to_owned_message())
        })
        .collect()
}

/// What a topic holds on the broker.
struct Landed {
    by_topic: BTreeMap<String, Vec<Message>>,
}

impl Landed {
    /// `topics` and `SCHEDULE_TOPIC_XXXX`, read with our own pull.
    fn read(c: &dyn Cluster, topics: impl IntoIterator<Item = String>) -> Landed {
        let mut by_topic = BTreeMap::new();
        let mut all: BTreeSet<String> = topics.into_iter().collect();
        all.insert(SCHEDULE.into());
        all.insert(WHEEL.into());
        for t in all {
            by_topic.insert(t.clone(), c.pull_all(&t));
        }
        Landed { by_topic }
    }

    fn by_id(&self) -> HashMap<String, &Message> {
        self.by_topic
            .values()
            .flatten()
            .map(|m| (offset_msg_id(&m.store_host, m.physical_offset), m))
            .collect()
    }

    /// Copies of each UNIQ_KEY over the topics read (the schedule topic too).
    fn uniq_counts(&self) -> HashMap<String, usize> {
        let mut n = HashMap::new();
        for m in self.by_topic.values().flatten() {
            let u = m.property("UNIQ_KEY").expect("a message without UNIQ_KEY");
            *n.entry(u.into_owned()).or_default() += 1;
        }
        n
    }
}

fn prop_map(m: &Message) -> BTreeMap<String, String> {
    m.properties()
        .iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// The level whose delay is the smallest at least `remaining` ms (the longest if none is).
fn level_for(remaining: i64) -> i64 {
    LEVELS_MS
        .iter()
        .position(|&d| d >= remaining)
        .unwrap_or(LEVELS_MS.len() - 1) as i64
        + 1
}

/// How the messages were sent.
#[derive(Default)]
struct Expect<'a> {
    /// `--now` in ms.
    now: i64,
    marks: &'a [(&'a str, &'a str)],
    topic_map: &'a [(&'a str, &'a str)],
    /// When the send started and ended (ms).
    sent_between: (i64, i64),
}

/// What the compared messages held, so a test can say its comparison covered it.
#[derive(Debug, Default)]
struct Seen {
    sent: usize,
    compressed: usize,
    keys: usize,
    tags: usize,
    user_properties: usize,
    /// Delayed messages parked again with a recomputed level.
    parked: usize,
    /// Delayed messages found due (or `--deliver-now`) and sent plain.
    released: usize,
    /// Consumer copies (%RETRY%/%DLQ%) sent to their topic.
    copies: usize,
    /// Committed transaction messages sent as normal ones.
    committed: usize,
    /// Messages found in a topic and kept on their queue.
    queue_kept: usize,
}

/// Where a message of a source queue was stored: its source queue offset, the target queue and
/// the offset there.
type Placed = (i64, i32, i64);

/// Every `sent` line of `ran` against the broker: the record it names by offset id holds what
/// the source record held (see the module documentation); each source queue's messages are on
/// the same queue, in the same order; a topic holds nothing else but delivered copies of the
/// delayed messages sent.
fn check_sent(
    c: &dyn Cluster,
    source: &Path,
    ran: &Ran,
    e: &Expect<'_>,
    landed: Option<&Landed>,
) -> Seen {
    let sent: Vec<&Value> = ran.sent().collect();
    let src = source_records(source, &ran.lines);
    let read;
    let landed = match landed {
        Some(l) => l,
        None => {
            read = Landed::read(
                c,
                sent.iter()
                    .map(|l| l["topic"].as_str().unwrap().to_string()),
            );
            &read
        }
    };
    let by_id = landed.by_id();
    let mut seen = Seen::default();
    let mut matched: BTreeSet<String> = BTreeSet::new();
    let mut parked_uniq: BTreeSet<String> = BTreeSet::new();
    let mut queues: BTreeMap<(String, i32), Vec<Placed>> = BTreeMap::new();
    let mapped = |t: &str| -> String {
        e.topic_map
            .iter()
            .find(|(old, _)| *old == t)
            .map_or(t, |(_, new)| new)
            .to_string()
    };
    for l in &sent {
        seen.sent += 1;
        let key = l["key"].as_u64().unwrap();
        let m = &src[&key];
        let id = l["offset_msg_id"].as_str().unwrap();
        let t = by_id
            .get(id)
            .unwrap_or_else(|| panic!("{id} of {l} is not on the broker"));
        assert!(matched.insert(id.to_string()), "{id} named twice");
        let topic = l["topic"].as_str().unwrap();
        let found = l["found"]["source"].as_str().unwrap();
        let what = format!("source {key} ({found} {}) -> {id}", m.topic);
        let src_props = prop_map(m);
        let real_topic = src_props.get("REAL_TOPIC").cloned();
        let real_copy = real_topic
            .as_deref()
            .is_some_and(|r| r.starts_with("%RETRY%") || r.starts_with("%DLQ%"));
        // what the record held
        assert_eq!(t.body, m.body, "{what}: body");
        let zip = sysflag::COMPRESSED | sysflag::COMPRESSION_TYPE_MASK;
        assert_eq!(t.sys_flag & zip, m.sys_flag & zip, "{what}: sysflag");
        assert_eq!(t.flag, m.flag, "{what}: flag");
        assert_eq!(t.born_timestamp, m.born_timestamp, "{what}: born time");
        assert_eq!(
            l["uniq_key"].as_str(),
            src_props.get("UNIQ_KEY").map(String::as_str),
            "{what}"
        );
        // every property the producer set, as a map
        let mut want = src_props.clone();
        want.retain(|k, _| !NOT_CARRIED.contains(&k.as_str()));
        if m.topic != topic && found != "topic" {
            want.insert("RMQSTORE_EXPORT_SOURCE".into(), found.into());
            want.insert("RMQSTORE_STORED_TOPIC".into(), m.topic.clone());
        }
        for (k, v) in e.marks {
            want.insert(k.to_string(), v.to_string());
        }
        let mut got = prop_map(t);
        // the broker's additions: the larger of the two sets that is there whole
        let shapes = added(c.flavour());
        let shape = shapes
            .iter()
            .filter(|add| {
                add.iter()
                    .all(|(k, v)| got.get(*k).map(String::as_str) == Some(*v))
            })
            .max_by_key(|add| add.len())
            .unwrap_or_else(|| panic!("{what}: none of {shapes:?} added: {got:?}"));
        for (k, _) in shape {
            got.remove(*k);
        }
        // where it went
        match l["delay"]["kind"].as_str().unwrap() {
            "level" => {
                seen.parked += 1;
                let level = l["delay"]["level"].as_i64().unwrap();
                let was: usize = src_props["DELAY"].parse().unwrap();
                let due = m.store_timestamp + LEVELS_MS[was - 1];
                assert_eq!(l["delay"]["remaining_ms"].as_i64(), Some(due - e.now));
                assert_eq!(level, level_for(due - e.now), "{what}: level");
                assert_eq!(t.topic, SCHEDULE, "{what}");
                assert_eq!(t.queue_id as i64, level - 1, "{what}: schedule queue");
                assert_eq!(got.remove("DELAY"), Some(level.to_string()), "{what}");
                assert_eq!(got.remove("REAL_TOPIC").as_deref(), Some(topic), "{what}");
                let qid: i32 = got.remove("REAL_QID").unwrap().parse().unwrap();
                if !real_copy {
                    assert_eq!(
                        Some(qid.to_string()),
                        src_props.get("REAL_QID").cloned(),
                        "{what}: real queue"
                    );
                }
                parked_uniq.insert(src_props["UNIQ_KEY"].clone());
            }
            "timer" => {
                seen.parked += 1;
                let at = l["delay"]["deliver_timestamp"].as_i64().unwrap();
                assert_eq!(t.topic, WHEEL, "{what}");
                assert_eq!(
                    got.remove("TIMER_DELIVER_MS"),
                    Some(at.to_string()),
                    "{what}"
                );
                // what remained at --now, from when it was sent (the wheel releases a message a
                // precision, 1 s, after its TIMER_OUT_MS)
                let out: i64 = src_props["TIMER_OUT_MS"].parse().unwrap();
                let due = out + 1000;
                let (from, to) = e.sent_between;
                assert!(
                    (from..=to).contains(&(at - (due - e.now))),
                    "{what}: released at {at}, {} ms after the send started at {from}",
                    at - from
                );
                assert_eq!(got.remove("REAL_TOPIC").as_deref(), Some(topic), "{what}");
                got.remove("REAL_QID");
                // the source's timer properties became TIMER_DELIVER_MS; the wheel adds its own
                want.retain(|k, _| !k.starts_with("TIMER_"));
                got.retain(|k, _| !k.starts_with("TIMER_") && k != "E_T");
                parked_uniq.insert(src_props["UNIQ_KEY"].clone());
            }
            kind => {
                assert_eq!(t.topic, topic, "{what}");
                if kind == "released" {
                    seen.released += 1;
                    assert!(!got.contains_key("DELAY"), "{what}");
                    if !real_copy {
                        assert_eq!(
                            Some(t.queue_id.to_string()),
                            src_props.get("REAL_QID").cloned(),
                            "{what}: real queue"
                        );
                    }
                }
            }
        }
        assert_eq!(got, want, "{what}: properties");
        assert_eq!(topic, mapped(&resend_topic(m, found)), "{what}: topic");
        // the queue and its order
        if found == "topic" {
            seen.queue_kept += 1;
            assert_eq!(t.queue_id, m.queue_id, "{what}: queue");
            queues
                .entry((m.topic.clone(), m.queue_id))
                .or_default()
                .push((
                    l["found"]["queue_offset"].as_i64().unwrap(),
                    t.queue_id,
                    t.queue_offset,
                ));
        }
        if matches!(found, "retry" | "dlq") || real_copy {
            seen.copies += 1;
        }
        if src_props.contains_key("TRAN_MSG") && found == "topic" {
            seen.committed += 1;
        }
        if m.sys_flag & sysflag::COMPRESSED != 0 {
            seen.compressed += 1;
        }
        seen.keys += usize::from(want.contains_key("KEYS"));
        seen.tags += usize::from(want.contains_key("TAGS"));
        seen.user_properties += usize::from(
            want.keys()
                .any(|k| k.chars().any(|c| c.is_ascii_lowercase())),
        );
    }
    for ((topic, q), mut v) in queues {
        v.sort();
        for w in v.windows(2) {
            assert!(
                w[1].2 > w[0].2,
                "{topic}/{q}: source offsets {} and {} stored at {} and {}",
                w[0].0,
                w[1].0,
                w[0].2,
                w[1].2
            );
        }
    }
    // nothing else: a record not named is a delivered copy of a parked message
    for (topic, records) in &landed.by_topic {
        for r in records {
            let id = offset_msg_id(&r.store_host, r.physical_offset);
            if matched.contains(&id) {
                continue;
            }
            let uniq = r.property("UNIQ_KEY").map(|u| u.into_owned());
            assert!(
                topic != SCHEDULE
                    && r.property("REAL_TOPIC").is_some()
                    && uniq.is_some_and(|u| parked_uniq.contains(&u)),
                "{topic}: {id} was not sent: {r:?}"
            );
        }
    }
    seen
}

/// The topic a record goes back to: its own, or its `REAL_TOPIC` (parked), or its
/// `RETRY_TOPIC` (a consumer copy, also a parked one).
fn resend_topic(m: &Message, found: &str) -> String {
    let p = prop_map(m);
    let copy_of = |t: &str| t.starts_with("%RETRY%") || t.starts_with("%DLQ%");
    match found {
        "retry" | "dlq" => p["RETRY_TOPIC"].clone(),
        "topic" => m.topic.clone(),
        _ => match p.get("REAL_TOPIC") {
            Some(r) if copy_of(r) => p["RETRY_TOPIC"].clone(),
            Some(r) => r.clone(),
            None => m.topic.clone(),
        },
    }
}

fn now_of(s: &str) -> i64 {
    rmqstore::engine::broker::clock::parse_time(s, rmqstore::engine::broker::clock::Zoneless::Utc)
        .unwrap()
}

/// After the oracle stores' last write: their parked messages still have some delay left.
const ORACLE_NOW: &str = "2026-11-30T21:11:06Z";

// ---------------------------------------------------------------------------------------------
// 1. send and read back

on_every_broker!(
    /// basic-4.9 (with TopicC given 6 queues in its topic config) to a cluster that creates no
    /// topics: without `--create-topics` the run stops before sending, naming the topics; with it,
    /// the topics are created with the source's queue counts and every message comes back field
    /// by field, to our own pull and to ali-ons' consumer.
    #[needs(rmqstore_oracle)]
    fn an_oracle_store_comes_back_field_by_field(flavour: Flavour) {
        let Some(o) = oracle("basic-4.9") else { return };
        let t = tempfile::tempdir().unwrap();
        let store = t.path().join("store");
        copy_tree(&o.join("store"), &store);
        let topics_json = store.join("config/topics.json");
        let mut topics: Value =
            serde_json::from_slice(&std::fs::read(&topics_json).unwrap()).unwrap();
        topics["topicConfigTable"]["TopicC"]["readQueueNums"] = 6.into();
        topics["topicConfigTable"]["TopicC"]["writeQueueNums"] = 6.into();
        std::fs::write(&topics_json, topics.to_string()).unwrap();
        let c = flavour.start(Options {
            auto_create_topics: false,
            ..Options::default()
        });
        let journal = t.path().join("journal");
        let target = to(&c);

        let missing = send(&store, &journal, &args(&target, &["--now", ORACLE_NOW]));
        missing.assert_code(2);
        for topic in ["TopicA", "TopicB", "TopicC"] {
            assert!(missing.stderr.contains(topic), "{}", missing.stderr);
        }
        assert!(
            missing.stderr.contains("--create-topics"),
            "{}",
            missing.stderr
        );
        assert!(missing.lines.is_empty());
        assert_eq!(c.route("TopicA").map(|_| ()), None);

        let ran = send(
            &store,
            &journal,
            &args(&target, &["--now", ORACLE_NOW, "--create-topics"]),
        );
        ran.assert_code(0);
        let s = ran.summary();
        assert_eq!(s["undecided"], 5);
        assert_eq!(
            s["sent"].as_u64().unwrap() + 5,
            s["messages"].as_u64().unwrap()
        );
        assert_eq!(s["sent"].as_u64().unwrap() as usize, ran.sent().count());
        for (topic, queues) in [("TopicA", 4), ("TopicB", 4), ("TopicC", 6)] {
            let cfg = c.topic_config(topic).unwrap();
            assert_eq!(cfg["writeQueueNums"], queues, "{topic}: {cfg}");
            assert_eq!(cfg["readQueueNums"], queues, "{topic}: {cfg}");
        }
        let seen = check_sent(
            &c,
            &store,
            &ran,
            &Expect {
                now: now_of(ORACLE_NOW),
                ..Default::default()
            },
            None,
        );
        eprintln!("basic-4.9: {seen:?}");
        assert_eq!(seen.sent, 4581);
        assert!(
            seen.compressed > 0 && seen.keys > 1000 && seen.tags > 1000,
            "{seen:?}"
        );
        assert!(seen.user_properties > 1000 && seen.copies > 0, "{seen:?}");
        assert!(seen.parked > 0 && seen.committed > 0, "{seen:?}");
        assert_eq!(seen.queue_kept, 1468 + 1481 + 1520);
        // sent again: the journal says everything was sent, nothing is
        let again = send(&store, &journal, &args(&target, &["--now", ORACLE_NOW]));
        again.assert_code(0);
        assert_eq!(again.summary()["sent"], 0);
        assert_eq!(again.summary()["skipped"], s["sent"]);

        // ali-ons reads the same messages: TopicB, every field
        // read back by real consumers: the Java consumer of the broker's release (4.9's for
        // rocketmq-rust) and ali-ons
        let landed = c.pull_all("TopicB");
        let release = flavour.java().unwrap_or(JavaVersion::V4_9);
        if java::ready(release) {
            let got = java::consume(
                release,
                &java::Consume {
                    expect: landed.len(),
                    ..java::Consume::all(&c.namesrv_addr(), "SendLiveJavaGroup", "TopicB")
                },
            );
            assert_delivered(&got, "offsetMsgId", &landed, &store, &ran);
        }
        if !ali_ons::ready() {
            return;
        }
        let got = ali_ons::consume(&ali_ons::Consume {
            max: landed.len(),
            serialize_type_field: true,
            ..ali_ons::Consume::all(&c.namesrv_addr(), "SendLiveGroup", "TopicB")
        });
        assert_delivered(&got, "msgId", &landed, &store, &ran);
    }
);

/// `got` (a client's deliveries, its offset message id in `id_field`) is `landed` (what the
/// broker holds) once each: the body as the source held it (decompressed, as clients hand it
/// over), every property, queue, born time, flag and tags.
fn assert_delivered(got: &[Value], id_field: &str, landed: &[Message], store: &Path, ran: &Ran) {
    assert_eq!(got.len(), landed.len());
    let by_id: HashMap<String, &Message> = landed
        .iter()
        .map(|m| (offset_msg_id(&m.store_host, m.physical_offset), m))
        .collect();
    let src = source_records(store, &ran.lines);
    let src_of: HashMap<&str, &Message> = ran
        .sent()
        .map(|l| {
            (
                l["offset_msg_id"].as_str().unwrap(),
                &src[&l["key"].as_u64().unwrap()],
            )
        })
        .collect();
    let plain = |m: &Message| {
        if m.sys_flag & sysflag::COMPRESSED != 0 {
            rmqstore::format::compression::decompress(m.sys_flag, &m.body).unwrap()
        } else {
            m.body.clone()
        }
    };
    let mut ids = BTreeSet::new();
    for d in got {
        let id = d[id_field].as_str().unwrap();
        assert!(ids.insert(id.to_string()), "{id} delivered twice");
        let m = by_id[id];
        let was = src_of[id];
        use base64::Engine as _;
        let body = base64::engine::general_purpose::STANDARD
            .decode(d["body"].as_str().unwrap())
            .unwrap();
        assert_eq!(body, plain(was), "{id}");
        // the clients add the queue's MIN_OFFSET and MAX_OFFSET (the Java push consumer its
        // CONSUME_START_TIME too); ali-ons reads the broker's trailing separator as an empty
        // name and has TAGS null when there is none
        let props: BTreeMap<String, String> = d["properties"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, v)| {
                let client_added =
                    ["MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", ""].contains(&k.as_str());
                let no_tags = k.as_str() == "TAGS" && v.is_null();
                !client_added && !no_tags
            })
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        assert_eq!(props, prop_map(m), "{id}");
        assert_eq!(d["queueId"], m.queue_id);
        assert_eq!(d["queueOffset"], m.queue_offset);
        assert_eq!(d["bornTimestamp"], was.born_timestamp);
        assert_eq!(d["flag"], was.flag);
        assert_eq!(d["tags"].as_str(), was.property("TAGS").as_deref());
    }
}

on_every_broker!(
    /// dledger-4.9: a DLedger store's messages (keys are the positions its consume queues use)
    /// come back field by field.
    #[needs(rmqstore_oracle)]
    fn a_dledger_store_comes_back_field_by_field(flavour: Flavour) {
        let Some(o) = oracle("dledger-4.9") else {
            return;
        };
        let store = o.join("store");
        let t = tempfile::tempdir().unwrap();
        let c = flavour.start(Options::default());
        let journal = t.path().join("journal");
        let target = to(&c);
        let ran = send(
            &store,
            &journal,
            &args(&target, &["--now", ORACLE_NOW, "--create-topics"]),
        );
        ran.assert_code(0);
        let seen = check_sent(
            &c,
            &store,
            &ran,
            &Expect {
                now: now_of(ORACLE_NOW),
                ..Default::default()
            },
            None,
        );
        eprintln!("dledger-4.9: {seen:?}");
        assert_eq!(seen.queue_kept, 1317 + 1317 + 1293);
        assert!(
            seen.compressed > 0 && seen.copies > 0 && seen.committed > 0,
            "{seen:?}"
        );
        assert_eq!(
            seen.sent as u64,
            ran.summary()["messages"].as_u64().unwrap()
                - ran.summary()["undecided"].as_u64().unwrap()
        );
    }
);

on_every_broker!(
    /// The export of a group (`--include all`) sent with `--deliver-now`, `--topic-map` and
    /// `--mark`: the parked messages go plain to their queue, TopicA's messages to the new name,
    /// every message with the mark.
    #[needs(rmqstore_oracle)]
    fn an_export_file_comes_back_renamed_marked_and_delivered_now(flavour: Flavour) {
        let Some(o) = oracle("basic-4.9") else { return };
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("groupa.jsonl");
        bin()
            .arg("export")
            .arg(o.join("store"))
            .args(["-g", "GroupA", "--include", "all", "--out"])
            .arg(&file)
            .assert()
            .success();
        let c = flavour.start(Options::default());
        let journal = t.path().join("journal");
        let target = to(&c);
        let ran = send(
            &file,
            &journal,
            &args(
                &target,
                &[
                    "--now",
                    ORACLE_NOW,
                    "--deliver-now",
                    "--create-topics",
                    "--topic-map",
                    "TopicA=Restored",
                    "--mark",
                    "recovered-from=basic-4.9",
                ],
            ),
        );
        ran.assert_code(0);
        let seen = check_sent(
            &c,
            &file,
            &ran,
            &Expect {
                now: now_of(ORACLE_NOW),
                marks: &[("recovered-from", "basic-4.9")],
                topic_map: &[("TopicA", "Restored")],
                ..Default::default()
            },
            None,
        );
        eprintln!("export file: {seen:?}");
        assert_eq!(seen.parked, 0);
        assert!(seen.released > 0 && seen.queue_kept > 0, "{seen:?}");
        assert!(c.pull_all(SCHEDULE).is_empty());
        assert!(c.route("TopicA").is_none(), "TopicA was created");
        assert!(ran.sent().any(|l| l["topic"] == "Restored"));
    }
);

on_every_broker!(
    /// A store damaged (a commitlog file gone), repaired, and its salvage store sent: every
    /// salvaged message comes back field by field.
    fn a_salvage_store_comes_back_field_by_field(flavour: Flavour) {
        let t = tempfile::tempdir().unwrap();
        let damaged = t.path().join("store");
        copy_tree(&fixture("store-4.9"), &damaged);
        let mut files: Vec<PathBuf> = std::fs::read_dir(damaged.join("commitlog"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        std::fs::remove_file(&files[4]).unwrap();
        let out = t.path().join("out");
        bin()
            .arg("repair")
            .arg(&damaged)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let salvaged = repair_folder(&out).unwrap().join("salvaged");
        let c = flavour.start(Options::default());
        let journal = t.path().join("journal");
        let ran = send(
            &salvaged,
            &journal,
            &args(&to(&c), &["--create-topics", "--deliver-now"]),
        );
        ran.assert_code(0);
        let seen = check_sent(&c, &salvaged, &ran, &Expect::default(), None);
        eprintln!("salvage store: {seen:?}");
        assert!(seen.sent > 100, "{seen:?}");
        assert_eq!(ran.summary()["source_kind"], "salvage_store");
    }
);

on_every_broker!(
    /// timer-5.x, measured at the store's own time: its pending timer messages wait in the
    /// broker's timer topic until what remained of their delay has passed, counted from the send
    /// (their first release time has long passed: sent as it was, the broker would refuse them).
    #[needs(rmqstore_oracle)]
    fn a_timer_store_keeps_what_remained_of_its_timers(flavour: Flavour) {
        let Some(o) = oracle("timer-5.x") else { return };
        let store = o.join("store");
        let t = tempfile::tempdir().unwrap();
        let c = flavour.start(Options::default());
        let wall = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64
        };
        let started = wall();
        let ran = send(
            &store,
            &t.path().join("journal"),
            &args(&to(&c), &["--now", ORACLE_NOW, "--create-topics"]),
        );
        if flavour == Flavour::Java4_9 {
            // a 4.9 broker has no timer wheel and would deliver them at once: refused before
            // anything is sent, naming the broker; --deliver-now sends them now
            ran.assert_code(2);
            assert!(
                ran.stderr.contains("64 timer message(s)")
                    && ran
                        .stderr
                        .contains(&format!("broker {} (version 407)", c.broker_addr())),
                "{}",
                ran.stderr
            );
            assert!(ran.lines.is_empty());
            let now = send(
                &store,
                &t.path().join("journal"),
                &args(
                    &to(&c),
                    &["--now", ORACLE_NOW, "--create-topics", "--deliver-now"],
                ),
            );
            now.assert_code(0);
            let seen = check_sent(
                &c,
                &store,
                &now,
                &Expect {
                    now: now_of(ORACLE_NOW),
                    sent_between: (started, wall()),
                    ..Default::default()
                },
                None,
            );
            assert_eq!((seen.parked, seen.sent), (0, 835 + 64), "{seen:?}");
            assert!(seen.released >= 64, "{seen:?}");
            return;
        }
        ran.assert_code(0);
        let seen = check_sent(
            &c,
            &store,
            &ran,
            &Expect {
                now: now_of(ORACLE_NOW),
                sent_between: (started, wall()),
                ..Default::default()
            },
            None,
        );
        eprintln!("timer-5.x: {seen:?}");
        assert_eq!(seen.parked, 64);
        assert_eq!(seen.sent, 835 + 64);
    }
);

// ---------------------------------------------------------------------------------------------
// 2. killed and resumed

/// A generated store of `ops` operations in the fixtures' small geometry.
fn gen_store(dir: &Path, ops: u32) -> PathBuf {
    let store = dir.join("store");
    bin()
        .arg("gen")
        .arg(&store)
        .args(["--messages", &ops.to_string()])
        .args(SMALL_GEOMETRY)
        .assert()
        .success();
    store
}

/// The UNIQ_KEY of every message `send` sends from `store` (undecided half messages are not
/// sent): how many of them share each, and each one's place.
fn uniq_keys_to_send(store: &Path) -> (HashMap<String, usize>, BTreeMap<u64, String>) {
    use rmqstore::engine::consume::export::ExportSource;
    use rmqstore::send::source::{Source, SourceEntry, SourceSpec};
    let s = Source::open(&SourceSpec {
        path: store.to_path_buf(),
        ..Default::default()
    })
    .unwrap();
    let mut n = HashMap::new();
    let mut at = BTreeMap::new();
    for e in s.entries(false) {
        if let SourceEntry::Message(m) = e.unwrap() {
            if m.item.source != ExportSource::Transaction {
                let u = m.item.uniq_key.clone().expect("no UNIQ_KEY");
                *n.entry(u.clone()).or_default() += 1;
                at.insert(m.seq, u);
            }
        }
    }
    (n, at)
}

/// A journal read as the next run reads it: its header is its own first line.
fn read_journal(path: &Path) -> Journal {
    use rmqstore::send::journal::JournalHeader;
    let text = std::fs::read_to_string(path).unwrap();
    let first = text.lines().next().unwrap();
    let payload = first.rsplit_once('\t').unwrap().0;
    let json = payload.splitn(3, ' ').nth(2).unwrap();
    let header: JournalHeader = serde_json::from_str(json).unwrap();
    Journal::open(path, &header, Access::Read, Duration::ZERO).unwrap()
}

/// The places a journal holds in doubt (sent, not acknowledged), of the first `n`.
fn in_doubt(j: &Journal, n: u64) -> BTreeSet<u64> {
    (0..n).filter(|&s| j.in_doubt(s)).collect()
}

/// `send` started with its stdout in a file.
struct Running {
    child: std::process::Child,
    out: PathBuf,
}

fn spawn_send(
    source: &Path,
    journal: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    out: PathBuf,
) -> Running {
    let child = rmqstore()
        .arg("send")
        .arg(source)
        .arg("--json")
        .arg("--journal")
        .arg(journal)
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Running { child, out }
}

impl Running {
    /// Waits for the exit (killing first when `kill`).
    fn finish(mut self, kill: bool) -> (std::process::ExitStatus, Ran) {
        if kill {
            let _ = self.child.kill();
        }
        let out = self.child.wait_with_output().unwrap();
        let (lines, summary) = parse(&std::fs::read(&self.out).unwrap());
        let ran = Ran {
            code: out.status.code(),
            lines,
            summary,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        (out.status, ran)
    }
}

/// A small xorshift generator: the kill moments are the same on every run of the test.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Pulls `topics` until they hold at least `n` messages (the broker indexes a stored message
/// a moment after it acknowledges it), at most 20 s.
fn landed_at_least(c: &dyn Cluster, topics: &[String], n: usize) -> Landed {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let l = Landed::read(c, topics.iter().cloned());
        let have: usize = l.by_topic.values().map(Vec::len).sum();
        if have >= n || Instant::now() > deadline {
            return l;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the journal held in doubt along a series of runs.
#[derive(Default)]
struct Doubts {
    /// After the last run noted.
    now: BTreeSet<u64>,
    /// After any run.
    ever: BTreeSet<u64>,
    /// Places a run said it resent as possible duplicates.
    resent: BTreeSet<u64>,
}

impl Doubts {
    /// After a run: what it said it resent as possible duplicates was in doubt when it
    /// started; at most `window` places are newly in doubt.
    fn note(&mut self, ran: &Ran, journal: &Path, total: usize, window: u64, why: &str) {
        for l in &ran.lines {
            if l["possible_duplicate"] == true {
                let seq = l["seq"].as_u64().unwrap();
                assert!(
                    self.now.contains(&seq),
                    "{why}: {seq} was not in doubt: {l}"
                );
                self.resent.insert(seq);
            }
        }
        let now = in_doubt(&read_journal(journal), total as u64 + 10);
        let new = now.difference(&self.now).count() as u64;
        assert!(
            new <= window,
            "{why}: {new} newly in doubt, more than the window of {window}"
        );
        self.ever.extend(now.iter().copied());
        self.now = now;
    }
}

on_every_broker!(
    /// A generated store sent slowly (`--rate`, small batches, few in flight) and SIGKILLed at six
    /// seeded random moments, then aborted at each of the journal's failpoints, then run to its
    /// end: every message is on the broker; each kill leaves at most the in-flight window
    /// (batches in flight x batch size) newly in doubt; a run marks as possible duplicates only
    /// messages the journal held in doubt; every extra copy on the broker carries the UNIQ_KEY of a
    /// message once in doubt; the last run's summary counts as possible duplicates exactly what
    /// the journal held in doubt. (A message resent and recorded just before a kill has no line:
    /// the line is printed after the journal records it.)
    fn killed_at_random_moments_and_at_the_journal_failpoints_then_resumed(flavour: Flavour) {
        let t = tempfile::tempdir().unwrap();
        let store = gen_store(t.path(), 3000);
        let (want, uniq_at) = uniq_keys_to_send(&store);
        let total: usize = want.values().sum();
        let c = flavour.start(Options::default());
        let journal = t.path().join("journal");
        let (in_flight, batch) = (3u64, 4u64);
        let window = in_flight * batch;
        let (fl, bt) = (in_flight.to_string(), batch.to_string());
        let target = to(&c);
        let a = args(
            &target,
            &[
                "--create-topics",
                "--deliver-now",
                "--in-flight",
                &fl,
                "--batch",
                &bt,
                "--rate",
                "500/s",
            ],
        );
        let mut rng = Rng(0x5eed_0f5e_4d00);
        let mut d = Doubts::default();
        let mut kills = 0;
        for i in 0..6 {
            let run = spawn_send(&store, &journal, &a, &[], t.path().join(format!("kill{i}")));
            std::thread::sleep(Duration::from_millis(150 + rng.below(700)));
            let (status, ran) = run.finish(true);
            assert!(
                status.code().is_none(),
                "run {i} ended before its kill: {ran:?}"
            );
            kills += 1;
            d.note(&ran, &journal, total, window, &format!("kill {i}"));
        }
        for fp in [
            "send-journal-before-write",
            "send-journal-written",
            "send-journal-synced",
        ] {
            let run = spawn_send(
                &store,
                &journal,
                &a,
                &[("RMQSTORE_FAILPOINT", fp)],
                t.path().join(fp),
            );
            let (status, ran) = run.finish(false);
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(6), "{fp}: {ran:?}");
            kills += 1;
            d.note(&ran, &journal, total, window, fp);
        }
        assert!(!d.ever.is_empty());
        let before = read_journal(&journal);
        let acked_before = before.acked();
        assert!(
            acked_before > 0 && (acked_before as usize) < total,
            "{acked_before}"
        );
        drop(before);
        let (status, last) =
            spawn_send(&store, &journal, &a, &[], t.path().join("last")).finish(false);
        assert_eq!(status.code(), Some(0), "{}", last.stderr);
        d.note(&last, &journal, total, window, "last run");
        let s = last.summary();
        assert_eq!(s["possible_duplicates"].as_u64().unwrap() as usize, {
            last.lines
                .iter()
                .filter(|l| l["possible_duplicate"] == true)
                .count()
        });
        assert_eq!(s["in_doubt_before"], s["possible_duplicates"]);
        assert_eq!(
            s["sent"].as_u64().unwrap() + s["skipped"].as_u64().unwrap(),
            total as u64
        );
        assert_eq!(s["skipped"].as_u64(), Some(acked_before));
        let j = read_journal(&journal);
        assert_eq!(j.acked(), total as u64);
        assert_eq!(j.in_doubt_before(), 0);

        let topics: Vec<String> = ["OrderTopic", "PaymentTopic", "AuditTopic"]
            .map(String::from)
            .to_vec();
        let landed = landed_at_least(&c, &topics, total);
        let got = landed.uniq_counts();
        let doubted: BTreeSet<&String> = d.ever.iter().map(|s| &uniq_at[s]).collect();
        let mut duplicates = 0;
        for (u, n) in &want {
            let have = got.get(u).copied().unwrap_or(0);
            assert!(have >= *n, "{u}: {have} on the broker, {n} sent");
            if have > *n {
                duplicates += have - n;
                assert!(
                    doubted.contains(u),
                    "{u} is there {have} times, never in doubt"
                );
            }
        }
        for u in got.keys() {
            assert!(
                want.contains_key(u),
                "{u} on the broker was not in the source"
            );
        }
        eprintln!(
            "{total} messages, {kills} kills, {} places ever in doubt, {} resent as possible \
             duplicates, {duplicates} extra copies on the broker",
            d.ever.len(),
            d.resent.len()
        );
        assert!(duplicates as u64 <= kills * window);
    }
);

// ---------------------------------------------------------------------------------------------
// 3. broker faults

/// Runs `send` until it exits on its own (at most 90 s).
fn wait_exit(run: Running) -> (std::process::ExitStatus, Ran) {
    let Running { mut child, out } = run;
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("send did not stop within 90 s of losing its broker");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Running { child, out }.finish(false)
}

on_every_broker!(
    /// The broker stopped (SIGTERM) in the middle of a send, and killed (SIGKILL) in the middle of
    /// the next: each time the send stops with exit 2 and the summary says why; the journal holds
    /// exactly what the broker acknowledged (every acknowledged message is on the broker when it
    /// is back) and holds in doubt what was in flight; once the broker is back, a last run sends
    /// the rest and exits 0, and only messages held in doubt are on the broker twice.
    fn the_broker_stopped_or_killed_mid_send_then_back(flavour: Flavour) {
        let t = tempfile::tempdir().unwrap();
        let store = gen_store(t.path(), 3000);
        let (want, uniq_at) = uniq_keys_to_send(&store);
        let total: usize = want.values().sum();
        let mut c = flavour.start(Options::default());
        let journal = t.path().join("journal");
        let target = to(&c);
        let a = args(
            &target,
            &[
                "--create-topics",
                "--deliver-now",
                "--in-flight",
                "4",
                "--rate",
                "800/s",
            ],
        );
        let topics: Vec<String> = ["OrderTopic", "PaymentTopic", "AuditTopic"]
            .map(String::from)
            .to_vec();
        let mut doubted = BTreeSet::new();
        for (i, kill) in [false, true].into_iter().enumerate() {
            let run = spawn_send(&store, &journal, &a, &[], t.path().join(format!("run{i}")));
            std::thread::sleep(Duration::from_millis(1200));
            if kill {
                c.kill_broker();
            } else {
                c.stop_broker();
            }
            let (status, ran) = wait_exit(run);
            eprintln!(
                "broker {}: {}",
                if kill { "killed" } else { "stopped" },
                ran.stderr
            );
            ran.assert_code(2);
            assert!(status.code() == Some(2));
            let s = ran.summary();
            assert!(s["failure"].is_string(), "{s}");
            assert!(ran.stderr.contains("the send stopped"), "{}", ran.stderr);
            let j = read_journal(&journal);
            let doubt = in_doubt(&j, total as u64 + 10);
            assert_eq!(
                j.acked(),
                s["sent"].as_u64().unwrap() + s["skipped"].as_u64().unwrap(),
                "{s}"
            );
            assert_eq!(doubt.len() as u64, s["in_doubt"].as_u64().unwrap(), "{s}");
            assert!(j.acked() > 0 && (j.acked() as usize) < total, "{s}");
            c.restart_broker();
            let acked: Vec<u64> = uniq_at.keys().copied().filter(|&q| j.is_acked(q)).collect();
            let landed = landed_at_least(&c, &topics, acked.len());
            let got = landed.uniq_counts();
            for q in &acked {
                assert!(
                    got.contains_key(&uniq_at[q]),
                    "place {q} acknowledged, not on the broker"
                );
            }
            doubted.extend(doubt);
        }
        let (status, last) =
            wait_exit(spawn_send(&store, &journal, &a, &[], t.path().join("last")));
        assert_eq!(status.code(), Some(0), "{}", last.stderr);
        let s = last.summary();
        assert_eq!(
            s["sent"].as_u64().unwrap() + s["skipped"].as_u64().unwrap(),
            total as u64
        );
        let landed = landed_at_least(&c, &topics, total);
        let got = landed.uniq_counts();
        let doubted_keys: BTreeSet<&String> = doubted.iter().map(|q| &uniq_at[q]).collect();
        let mut duplicates = 0;
        for (u, n) in &want {
            let have = got.get(u).copied().unwrap_or(0);
            assert!(have >= *n, "{u}: {have} on the broker, {n} sent");
            if have > *n {
                duplicates += have - n;
                assert!(
                    doubted_keys.contains(u),
                    "{u}: {have} copies, never in doubt"
                );
            }
        }
        eprintln!(
            "{} in doubt after the faults, {duplicates} extra copies",
            doubted.len()
        );
    }
);

// ---------------------------------------------------------------------------------------------
// ACL

on_every_broker!(
    /// A cluster with plain ACL on: a wrong secret key, and an account without PUB permission,
    /// are refused with the broker's words and exit 2, and the journal records nothing sent; the
    /// admin's keys send everything (`--create-topics` included).
    #[needs(rmqstore_oracle)]
    fn acl_refused_then_granted(flavour: Flavour) {
        let Some(o) = oracle("basic-4.9") else { return };
        let store = o.join("store");
        let t = tempfile::tempdir().unwrap();
        let c = flavour.start(Options {
            auto_create_topics: false,
            acl: Some(vec![ADMIN, READER]),
            ..Options::default()
        });
        for topic in ["TopicA", "TopicB", "TopicC"] {
            c.create_topic(topic, 4);
        }
        let journal = t.path().join("journal");
        let target = to(&c);
        // each broker's own words (tests/all/cluster.rs pins them)
        let (bad_secret, no_pub) = match flavour {
            Flavour::RocketmqRust => (
                "Authentication credentials are invalid",
                "Permission was denied",
            ),
            Flavour::Java4_9 => (
                "AclException: Check signature failed for accessKey=rmqstore-admin",
                "AclException: No default permission for topic:Topic",
            ),
            Flavour::Java5 => (
                "check signature failed.",
                "User:rmqstore-reader has no permission to access Topic:Topic",
            ),
        };
        for (key, secret, said) in [
            (ADMIN.access_key, "not-the-secret", bad_secret),
            (READER.access_key, READER.secret_key, no_pub),
        ] {
            let ran = send(
                &store,
                &journal,
                &args(
                    &target,
                    &[
                        "--now",
                        ORACLE_NOW,
                        "--access-key",
                        key,
                        "--secret-key",
                        secret,
                    ],
                ),
            );
            eprintln!("{key}: {}", ran.stderr);
            ran.assert_code(2);
            assert!(ran.stderr.contains(said), "{}", ran.stderr);
            assert!(ran.stderr.contains("--secret-key"), "{}", ran.stderr);
            assert_eq!(ran.summary()["sent"], 0);
            assert_eq!(ran.summary()["in_doubt"], 0);
            assert_eq!(read_journal(&journal).acked(), 0);
            for topic in ["TopicA", "TopicB", "TopicC"] {
                assert!(c.pull_all(topic).is_empty());
            }
        }
        // the admin's keys: all of it, to a topic they create too
        let ran = send(
            &store,
            &journal,
            &args(
                &target,
                &[
                    "--now",
                    ORACLE_NOW,
                    "--topic-map",
                    "TopicC=TopicC2",
                    "--create-topics",
                    "--access-key",
                    ADMIN.access_key,
                    "--secret-key",
                    ADMIN.secret_key,
                ],
            ),
        );
        ran.assert_code(0);
        assert_eq!(ran.summary()["sent"], 4581);
        let landed = landed_at_least(&c, &["TopicA", "TopicB", "TopicC2"].map(String::from), 4581);
        let n: usize = landed.by_topic.values().map(Vec::len).sum();
        assert!(n >= 4581, "{n}");
        assert!(landed.by_topic["TopicC2"].len() >= 1520);
        assert!(c.pull_all("TopicC").is_empty());
    }
);
