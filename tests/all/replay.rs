//! `export` and `replay`: what a group has not consumed, and consuming it with real semantics.
//!
//! - export of a group plus what it consumed is exactly the topic's messages (on the fixture,
//!   and on the Java-written oracle stores against Java's own dump);
//! - the optional kinds (retry, delayed, DLQ, transactions) carry their origin, `--dedupe` keeps
//!   one copy per UNIQ_KEY, and a store directory output holds one record per message, bound
//!   for the topic it should be sent to again;
//! - the replayer with a fake clock runs the whole 16-step retry schedule: every message ends
//!   consumed or in the DLQ, and a second run consumes nothing again; orderly keeps queue order;
//! - the real binary with a script that fails some messages, and a run stopped with SIGINT
//!   then finished by a second run: every message consumed exactly once or dead-lettered.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use rmqstore::engine::broker::clock::{Clock, FakeClock};
use rmqstore::engine::broker::pull::PullRequest;
use rmqstore::engine::broker::{Engine, EngineOptions};
use rmqstore::engine::consume::replay::{Outcome, ReplayOptions, Replayer, RunEnd};
use rmqstore::engine::store::dispatch::dlq_topic;
use rmqstore::engine::store::index_builder::IndexNaming;
use rmqstore::engine::store::writer::{StoreWriter, WriterOptions};
use rmqstore::engine::Store;
use rmqstore::format::commitlog::RecordIter;
use rmqstore::format::commitlog::{encode_properties, Host, Message, MessageVersion};
use rmqstore::format::config::ConsumerOffsets;
use rmqstore::format::geometry::{Geometry, GeometryInputs};
use serde_json::Value;

/// A time after every fixture's records (2030).
const T0: i64 = 1_900_000_000_000;
const TOPIC: &str = "ReplayTopic";

fn temp_dir(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("rmqstore-replay-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One commitlog record, read with the format layer only.
#[derive(Debug, Clone)]
struct Rec {
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    position: u64,
    queued: bool,
    uniq_key: Option<String>,
    props: BTreeMap<String, String>,
    body_crc: i32,
}

fn records(root: &Path) -> Vec<Rec> {
    let store = Store::open(root, &GeometryInputs::default()).unwrap();
    let mut out = Vec::new();
    for seg in &store.commitlog.segments {
        let map = seg.map().unwrap();
        for m in RecordIter::new(&map, seg, false).map_while(Result::ok) {
            out.push(Rec {
                topic: m.topic.to_string(),
                queue_id: m.queue_id,
                queue_offset: m.queue_offset,
                position: m.position,
                queued: m.transaction_type().is_queued(),
                uniq_key: m.uniq_key().map(|s| s.into_owned()),
                props: m.properties.to_map(),
                body_crc: m.body_crc,
            });
        }
    }
    out
}

fn offsets_of(root: &Path) -> ConsumerOffsets {
    ConsumerOffsets::from_bytes(&std::fs::read(root.join("config/consumerOffset.json")).unwrap())
        .unwrap()
}

/// Export `group` with the binary; the JSON lines.
fn export(root: &Path, group: &str, extra: &[&str], name: &str) -> Vec<Value> {
    let dir = temp_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.jsonl");
    let mut args = vec![
        "export".to_string(),
        root.display().to_string(),
        "--group".into(),
        group.into(),
        "--out".into(),
        out.display().to_string(),
        "--now".into(),
        T0.to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    bin_with_path().args(&args).assert().success();
    let lines = read_lines(&out);
    let _ = std::fs::remove_dir_all(&dir);
    lines
}

// ---------------------------------------------------------------------------------------------
// export

/// Export of each group plus what it consumed (queue offsets below its committed offsets) is
/// exactly the queued records of its topics, with no overlap.
fn check_export_plus_consumed(root: &Path, all: &[(String, i32, i64, u64)], name: &str) {
    let offsets = offsets_of(root);
    let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (t, g, _) in offsets.iter() {
        if !t.starts_with('%') {
            groups
                .entry(g.to_string())
                .or_default()
                .insert(t.to_string());
        }
    }
    assert!(!groups.is_empty(), "{name}: no groups");
    for (group, topics) in &groups {
        let lines = export(root, group, &[], &format!("{name}-{group}"));
        let exported: BTreeSet<u64> = lines
            .iter()
            .map(|l| l["commitlog_offset"].as_u64().unwrap())
            .collect();
        assert_eq!(
            exported.len(),
            lines.len(),
            "{name} {group}: a record twice"
        );
        let mut consumed = BTreeSet::new();
        let mut every = BTreeSet::new();
        for (t, q, qo, pos) in all.iter().filter(|r| topics.contains(&r.0)) {
            every.insert(*pos);
            let c = offsets.get(t, group, *q).unwrap_or(-1);
            if *qo < c {
                consumed.insert(*pos);
            }
        }
        assert!(
            exported.is_disjoint(&consumed),
            "{name} {group}: consumed exported"
        );
        let union: BTreeSet<u64> = exported.union(&consumed).copied().collect();
        assert_eq!(union, every, "{name} {group}: export + consumed != topic");
        for l in &lines {
            assert_eq!(l["export_source"], "topic");
            assert_eq!(l["resend_topic"], l["topic"]);
            assert_eq!(l["resend_queue_id"], l["queue_id"]);
            for k in [
                "msg_id",
                "uniq_key",
                "keys",
                "tags",
                "properties",
                "body",
                "body_encoding",
            ] {
                assert!(l.get(k).is_some(), "{name} {group}: no {k}");
            }
        }
        eprintln!(
            "{name} {group}: {} exported + {} consumed = {}",
            exported.len(),
            consumed.len(),
            every.len()
        );
    }
}

#[test]
fn export_plus_consumed_equals_the_topic_on_the_fixture() {
    let root = fixture("store-4.9");
    let all: Vec<(String, i32, i64, u64)> = records(&root)
        .into_iter()
        .filter(|r| r.queued)
        .map(|r| (r.topic, r.queue_id, r.queue_offset, r.position))
        .collect();
    check_export_plus_consumed(&root, &all, "fixture");
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn export_plus_consumed_equals_the_topic_on_java_stores() {
    for name in ["basic-4.9", "basic-5.x"] {
        let Some(dir) = oracle(name) else { continue };
        // Java's own dump of every record.
        let all: Vec<(String, i32, i64, u64)> = java_messages(&dir)
            .iter()
            .filter(|m| {
                let tx = m["sysFlag"].as_i64().unwrap() & 0xC;
                tx == 0 || tx == 0x8
            })
            .map(|m| {
                (
                    m["topic"].as_str().unwrap().to_string(),
                    m["queueId"].as_i64().unwrap() as i32,
                    m["queueOffset"].as_i64().unwrap(),
                    m["physicalOffset"].as_u64().unwrap(),
                )
            })
            .collect();
        check_export_plus_consumed(&dir.join("store"), &all, name);
    }
}

/// `--include all`: each kind found where it should be, with its origin; checked against the
/// records read with the format layer. Returns the count of each kind.
fn check_includes(root: &Path, group: &str, name: &str) -> BTreeMap<String, usize> {
    let recs = records(root);
    let offsets = offsets_of(root);
    let retry = format!("%RETRY%{group}");
    let dlq = format!("%DLQ%{group}");
    let topics: BTreeSet<String> = offsets
        .iter()
        .filter(|(t, g, _)| *g == group && !t.starts_with('%'))
        .map(|(t, _, _)| t.to_string())
        .collect();
    let lines = export(root, group, &["--include", "all"], &format!("{name}-all"));
    let mut by: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for l in &lines {
        by.entry(l["export_source"].as_str().unwrap().to_string())
            .or_default()
            .push(l);
    }
    let props = |l: &Value, k: &str| l["properties"][k].as_str().map(str::to_string);
    // retry: the retry queue past the group's offset, sent back to RETRY_TOPIC
    let want_retry = recs
        .iter()
        .filter(|r| {
            r.topic == retry
                && r.queued
                && r.queue_offset >= offsets.get(&retry, group, r.queue_id).unwrap_or(0)
        })
        .count();
    let retries = by.get("retry").cloned().unwrap_or_default();
    assert_eq!(retries.len(), want_retry, "{name}: retries");
    // dlq: all of it
    let want_dlq = recs.iter().filter(|r| r.topic == dlq && r.queued).count();
    let dlqs = by.get("dlq").cloned().unwrap_or_default();
    assert_eq!(dlqs.len(), want_dlq, "{name}: dlq");
    for l in retries.iter().chain(dlqs.iter()) {
        assert_eq!(
            l["resend_topic"].as_str().map(str::to_string),
            props(l, "RETRY_TOPIC")
        );
        assert_eq!(
            l["origin_message_id"].as_str().map(str::to_string),
            props(l, "ORIGIN_MESSAGE_ID")
        );
        assert!(topics.contains(l["resend_topic"].as_str().unwrap()) || name == "fixture");
    }
    for l in by.get("delayed").cloned().unwrap_or_default() {
        assert_eq!(l["topic"], "SCHEDULE_TOPIC_XXXX");
        let rt = props(l, "REAL_TOPIC").unwrap();
        assert!(topics.contains(&rt) || rt == retry || rt == dlq, "{rt}");
        assert!(l["due_timestamp"].is_i64());
        if rt.starts_with('%') {
            assert_eq!(
                l["resend_topic"].as_str().map(str::to_string),
                props(l, "RETRY_TOPIC")
            );
        } else {
            assert_eq!(l["resend_topic"].as_str().unwrap(), rt);
        }
    }
    for l in by.get("transaction").cloned().unwrap_or_default() {
        assert_eq!(l["topic"], "RMQ_SYS_TRANS_HALF_TOPIC");
        assert!(topics.contains(&props(l, "REAL_TOPIC").unwrap()));
        let st = l["transaction_state"].as_str().unwrap();
        assert!(!st.starts_with("decided"), "{st}");
    }
    eprintln!(
        "{name} {group}: {:?}",
        by.iter().map(|(k, v)| (k, v.len())).collect::<Vec<_>>()
    );
    // --dedupe: one per UNIQ_KEY, the rest counted
    let deduped = export(
        root,
        group,
        &["--include", "all", "--dedupe"],
        &format!("{name}-dedupe"),
    );
    let keys: Vec<&str> = deduped
        .iter()
        .filter_map(|l| l["uniq_key"].as_str())
        .collect();
    let unique: BTreeSet<&str> = keys.iter().copied().collect();
    assert_eq!(
        keys.len(),
        unique.len(),
        "{name}: duplicates after --dedupe"
    );
    let all_keys: BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l["uniq_key"].as_str())
        .collect();
    assert_eq!(unique, all_keys, "{name}: --dedupe lost a message");
    by.iter().map(|(k, v)| (k.clone(), v.len())).collect()
}

#[test]
fn export_includes_carry_their_origin() {
    let n = check_includes(&fixture("store-4.9"), "OrderGroup", "fixture");
    for kind in ["topic", "retry", "delayed", "dlq"] {
        assert!(n.get(kind).is_some_and(|&c| c > 0), "fixture: no {kind}");
    }
    let n = check_includes(&fixture("store-4.9"), "PaymentGroup", "fixture");
    assert!(
        n.get("transaction").is_some_and(|&c| c > 0),
        "fixture: {n:?}"
    );
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn export_includes_carry_their_origin_on_a_java_store() {
    let dir = oracle("basic-4.9").expect("basic-4.9");
    let n = check_includes(&dir.join("store"), "GroupA", "basic-4.9");
    for kind in ["topic", "retry", "delayed", "dlq"] {
        assert!(n.get(kind).is_some_and(|&c| c > 0), "basic-4.9: no {kind}");
    }
    let n = check_includes(&dir.join("store"), "GroupB", "basic-4.9");
    assert_eq!(n.get("transaction"), Some(&5), "basic-4.9 GroupB: {n:?}");
}

#[test]
fn export_to_a_store_directory() {
    let root = fixture("store-4.9");
    let work = temp_dir("export-store");
    std::fs::create_dir_all(&work).unwrap();
    let lines_path = work.join("all.jsonl");
    let out = work.join("store");
    for o in [&lines_path, &out] {
        bin_with_path()
            .args(["export", root.to_str().unwrap(), "--group", "OrderGroup"])
            .args(["--include", "all", "--now", &T0.to_string(), "--out"])
            .arg(o)
            .assert()
            .success();
    }
    let lines = read_lines(&lines_path);
    let recs = records(&out);
    assert_eq!(recs.len(), lines.len());
    let mut moved = 0;
    for (l, r) in lines.iter().zip(&recs) {
        assert_eq!(r.topic, l["resend_topic"].as_str().unwrap());
        assert_eq!(
            i64::from(r.queue_id),
            l["resend_queue_id"].as_i64().unwrap()
        );
        assert_eq!(r.uniq_key.as_deref(), l["uniq_key"].as_str());
        assert_eq!(i64::from(r.body_crc), l["body_crc"].as_i64().unwrap());
        assert!(r.queued);
        // the original properties are kept; a moved copy names where it was stored
        for (k, v) in l["properties"].as_object().unwrap() {
            assert_eq!(r.props.get(k).map(String::as_str), v.as_str(), "{k}");
        }
        if r.topic != l["topic"].as_str().unwrap() {
            moved += 1;
            assert_eq!(
                r.props.get("RMQSTORE_STORED_TOPIC").map(String::as_str),
                l["topic"].as_str()
            );
            assert_eq!(
                r.props.get("RMQSTORE_EXPORT_SOURCE").map(String::as_str),
                l["export_source"].as_str()
            );
        }
    }
    assert!(moved > 0);
    // the new store is a store: its queues hold every record, and the engine reads it
    let store = Store::open(&out, &GeometryInputs::default()).unwrap();
    let e = Engine::open_read_only(
        store,
        None,
        Arc::new(FakeClock::new(T0)),
        EngineOptions::for_store(&Store::open(&out, &GeometryInputs::default()).unwrap()),
    )
    .unwrap();
    let queued: i64 = e
        .queue_keys()
        .iter()
        .map(|(t, q)| e.queue_bounds(t, *q).1)
        .sum();
    assert_eq!(queued as usize, recs.len());
    // an existing non-empty directory is refused
    bin_with_path()
        .args([
            "export",
            root.to_str().unwrap(),
            "--group",
            "OrderGroup",
            "--out",
        ])
        .arg(&out)
        .assert()
        .failure();
    // an existing FILE.jsonl is refused, and left as it was, unless --force
    let file = work.join("old.jsonl");
    std::fs::write(&file, b"keep me\n").unwrap();
    let to_file = |force: bool| {
        let mut c = bin_with_path();
        c.args([
            "export",
            root.to_str().unwrap(),
            "--group",
            "OrderGroup",
            "--out",
        ])
        .arg(&file);
        if force {
            c.arg("--force");
        }
        c.assert()
    };
    let refused = to_file(false).code(2);
    let err = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me\n");
    to_file(true).success();
    assert!(!read_lines(&file).is_empty());
    // a group without offsets needs --topic
    bin_with_path()
        .args([
            "export",
            root.to_str().unwrap(),
            "--group",
            "NoSuchGroup",
            "--out",
            "-",
        ])
        .assert()
        .failure();
    let _ = std::fs::remove_dir_all(&work);
}

// ---------------------------------------------------------------------------------------------
// replay: a store of our own

fn geometry() -> Geometry {
    let mut g = Geometry::default();
    g.commitlog_file_size.value = 64 * 1024;
    g.cq_file_units.value = 16;
    g.index_slots.value = 16;
    g.index_entries.value = 64;
    g
}

/// What a message of the test store asks of the consumer.
fn kind(i: usize) -> &'static str {
    match i % 6 {
        0 => "fail",
        1 => "flaky",
        _ => "ok",
    }
}

/// `n` messages over 4 queues of ReplayTopic: UNIQ_KEY `u<i>`, body `<kind>-<i>`.
fn make_store(dir: &Path, n: usize) -> Vec<(String, &'static str)> {
    let mut w = StoreWriter::create(
        dir,
        WriterOptions {
            geometry: geometry(),
            consumequeue: true,
            index: true,
            index_naming: IndexNaming::Utc,
            dledger: None,
        },
    )
    .unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let key = format!("u{i:04}");
        let body = format!("{}-{i}", kind(i));
        let m = Message {
            topic: TOPIC.into(),
            queue_id: (i % 4) as i32,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp: T0 - 60_000,
            born_host: Host::v4([10, 0, 0, 1], 50000),
            store_timestamp: T0 - 60_000 + i as i64,
            store_host: Host::v4([192, 168, 0, 10], 10911),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: body.into_bytes(),
            properties: encode_properties(
                &[
                    ("TAGS", kind(i)),
                    ("KEYS", &format!("k{i}")),
                    ("UNIQ_KEY", &key),
                ],
                false,
            ),
            version: MessageVersion::V1,
        };
        w.append(m).unwrap();
        out.push((key, kind(i)));
    }
    w.finish().unwrap();
    out
}

fn open_engine(root: &Path, overlay: &Path, clock: &FakeClock) -> Engine {
    let store = Store::open(root, &GeometryInputs::default()).unwrap();
    let opts = EngineOptions::for_store(&store);
    Engine::open(store, Some(overlay), Arc::new(clock.clone()), opts).unwrap()
}

/// UNIQ_KEYs in the group's DLQ.
fn dlq_keys(e: &Engine, group: &str) -> Vec<String> {
    let t = dlq_topic(group);
    let (_, max) = e.queue_bounds(&t, 0);
    let mut keys = Vec::new();
    let mut o = 0;
    while o < max {
        let r = e.pull(&PullRequest {
            topic: &t,
            queue_id: 0,
            offset: o,
            max_msgs: 32,
            filter: None,
        });
        for pm in &r.messages {
            let m = pm.message().unwrap();
            keys.push(m.uniq_key().unwrap().into_owned());
        }
        assert!(r.next_begin_offset > o);
        o = r.next_begin_offset;
    }
    keys
}

#[test]
fn replay_with_a_fake_clock_runs_the_whole_retry_schedule() {
    let work = temp_dir("fake-clock");
    let (src, ov) = (work.join("store"), work.join("overlay"));
    let msgs = make_store(&src, 36);
    let group = "ReplayGroup";
    let clock = FakeClock::new(T0);
    let mut rp = Replayer::new(
        open_engine(&src, &ov, &clock),
        ReplayOptions::new(group, vec![TOPIC.into()]),
    );
    // key -> reconsume counts seen, and successes
    let mut seen: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let mut ok: BTreeMap<String, usize> = BTreeMap::new();
    let mut consume = |m: &rmqstore::engine::consume::replay::ReplayMessage| {
        let r = m.message().unwrap();
        let key = r.uniq_key().unwrap().into_owned();
        assert_eq!(
            m.consumer_topic, TOPIC,
            "the listener sees the original topic"
        );
        seen.entry(key.clone()).or_default().push(m.reconsume_times);
        let body = String::from_utf8_lossy(r.body).into_owned();
        let fail = body.starts_with("fail") || (body.starts_with("flaky") && m.reconsume_times < 2);
        if fail {
            Outcome::Failure
        } else {
            *ok.entry(key).or_default() += 1;
            Outcome::Success
        }
    };
    let c = clock.clone();
    let mut wait = |t: i64| {
        c.set(t);
        true
    };
    let end = rp
        .run(&mut consume, &mut wait, &AtomicBool::new(false))
        .unwrap();
    assert_eq!(end, RunEnd::Idle);
    // 16 retries of the always-failing ones take 4 h 45 min 40 s of engine time
    assert!(clock.now_ms() - T0 >= (4 * 3600 + 45 * 60 + 40) * 1000);
    let dlq: Vec<String> = dlq_keys(rp.engine(), group);
    for (key, kind) in &msgs {
        let counts = &seen[key];
        match *kind {
            "fail" => {
                assert_eq!(*counts, (0..=16).collect::<Vec<_>>(), "{key}");
                assert!(!ok.contains_key(key));
                assert_eq!(dlq.iter().filter(|k| *k == key).count(), 1, "{key}");
            }
            "flaky" => {
                assert_eq!(*counts, [0, 1, 2], "{key}");
                assert_eq!(ok[key], 1);
            }
            _ => {
                assert_eq!(*counts, [0], "{key}");
                assert_eq!(ok[key], 1);
            }
        }
    }
    assert_eq!(dlq.len(), msgs.iter().filter(|m| m.1 == "fail").count());
    let stats = rp.stats().clone();
    assert_eq!(stats.dead_lettered as usize, dlq.len());
    assert_eq!(stats.consumed as usize, ok.len());
    // every queue committed to its end
    for p in rp.progress() {
        assert_eq!(p.committed, p.max_offset, "{p:?}");
    }
    rp.close().unwrap();
    // a second run over the overlay consumes nothing again
    let mut rp = Replayer::new(
        open_engine(&src, &ov, &clock),
        ReplayOptions::new(group, vec![TOPIC.into()]),
    );
    let mut again = 0;
    let end = rp
        .run(
            &mut |_| {
                again += 1;
                Outcome::Success
            },
            &mut |_| false,
            &AtomicBool::new(false),
        )
        .unwrap();
    assert_eq!((end, again), (RunEnd::Idle, 0));
    assert_eq!(dlq_keys(rp.engine(), group).len(), dlq.len());
    rp.close().unwrap();
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn orderly_replay_keeps_queue_order_and_dead_letters_past_the_max() {
    let work = temp_dir("orderly");
    let (src, ov) = (work.join("store"), work.join("overlay"));
    let msgs = make_store(&src, 24);
    let group = "OrderlyGroup";
    let clock = FakeClock::new(T0);
    let mut opts = ReplayOptions::new(group, vec![TOPIC.into()]);
    opts.orderly = true;
    opts.max_reconsume_times = 3;
    let mut rp = Replayer::new(open_engine(&src, &ov, &clock), opts);
    let mut order: BTreeMap<(String, i32), Vec<i64>> = BTreeMap::new();
    let mut attempts: BTreeMap<String, usize> = BTreeMap::new();
    let c = clock.clone();
    let end = rp
        .run(
            &mut |m| {
                let r = m.message().unwrap();
                let key = r.uniq_key().unwrap().into_owned();
                order
                    .entry((m.queue_topic.clone(), m.queue_id))
                    .or_default()
                    .push(m.queue_offset);
                let n = attempts.entry(key).or_default();
                *n += 1;
                let body = String::from_utf8_lossy(r.body);
                if body.starts_with("fail") || (body.starts_with("flaky") && *n < 2) {
                    Outcome::Failure
                } else {
                    Outcome::Success
                }
            },
            &mut |t| {
                c.set(t);
                true
            },
            &AtomicBool::new(false),
        )
        .unwrap();
    assert_eq!(end, RunEnd::Idle);
    for ((t, q), offs) in &order {
        assert!(
            offs.windows(2).all(|w| w[0] <= w[1]),
            "{t}:{q} out of order: {offs:?}"
        );
    }
    for (key, kind) in &msgs {
        let want = match *kind {
            "fail" => 4, // consumed, then 3 retries in place, then the DLQ
            "flaky" => 2,
            _ => 1,
        };
        assert_eq!(attempts[key], want, "{key}");
    }
    // 4.9: the orderly send-back parks DLQ-bound copies with the client's delay; the run waits
    let dlq = dlq_keys(rp.engine(), group);
    let want: BTreeSet<String> = msgs
        .iter()
        .filter(|m| m.1 == "fail")
        .map(|m| m.0.clone())
        .collect();
    assert_eq!(dlq.iter().cloned().collect::<BTreeSet<_>>(), want);
    assert_eq!(dlq.len(), want.len());
    rp.close().unwrap();
    let _ = std::fs::remove_dir_all(&work);
}

// ---------------------------------------------------------------------------------------------
// replay: the binary

/// The consumer script: logs `<UNIQ_KEY> <reconsume times> ok|fail` to `log`; `fail-*` bodies
/// always fail, `flaky-*` ones fail on their first delivery; sleeps `pause` first.
fn script(dir: &Path, log: &Path, pause: &str) -> PathBuf {
    let p = dir.join("consume.sh");
    let mut f = std::fs::File::create(&p).unwrap();
    write!(
        f,
        r#"#!/bin/sh
body=$(cat)
sleep {pause}
case "$body" in
  fail-*) echo "$RMQ_MSG_ID $RMQ_RECONSUME_TIMES fail" >> {log}; exit 1 ;;
  flaky-*) if [ "$RMQ_RECONSUME_TIMES" -lt 1 ]; then echo "$RMQ_MSG_ID $RMQ_RECONSUME_TIMES fail" >> {log}; exit 7; fi ;;
esac
echo "$RMQ_MSG_ID $RMQ_RECONSUME_TIMES ok" >> {log}
"#,
        log = log.display()
    )
    .unwrap();
    p
}

fn log_lines(log: &Path) -> Vec<(String, i32, bool)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            (p[0].to_string(), p[1].parse().unwrap(), p[2] == "ok")
        })
        .collect()
}

/// The DLQ of the overlay, by UNIQ_KEY, read with `export`.
fn overlay_dlq(src: &Path, ov: &Path, group: &str) -> Vec<String> {
    export(
        src,
        group,
        &[
            "--topic",
            TOPIC,
            "--include",
            "dlq",
            "--overlay",
            ov.to_str().unwrap(),
        ],
        "overlay-dlq",
    )
    .iter()
    .filter(|l| l["export_source"] == "dlq")
    .map(|l| {
        assert_eq!(l["resend_topic"], TOPIC);
        l["uniq_key"].as_str().unwrap().to_string()
    })
    .collect()
}

/// Every message consumed exactly once, or (the `fail` ones) dead-lettered exactly once after
/// `1 + max` failed deliveries.
fn check_outcome(msgs: &[(String, &str)], log: &[(String, i32, bool)], dlq: &[String], max: i32) {
    for (key, kind) in msgs {
        let oks = log.iter().filter(|l| l.0 == *key && l.2).count();
        let fails: Vec<i32> = log
            .iter()
            .filter(|l| l.0 == *key && !l.2)
            .map(|l| l.1)
            .collect();
        let dead = dlq.iter().filter(|k| *k == key).count();
        match *kind {
            "fail" => {
                assert_eq!((oks, dead), (0, 1), "{key}");
                assert_eq!(fails, (0..=max).collect::<Vec<_>>(), "{key}");
            }
            "flaky" => assert_eq!((oks, dead, fails), (1, 0, vec![0]), "{key}"),
            _ => assert_eq!((oks, dead, fails.len()), (1, 0, 0), "{key}"),
        }
    }
    assert_eq!(dlq.len(), msgs.iter().filter(|m| m.1 == "fail").count());
}

#[test]
fn replay_binary_with_a_failing_script() {
    let work = temp_dir("binary");
    let (src, ov, log) = (work.join("store"), work.join("overlay"), work.join("log"));
    let msgs = make_store(&src, 30);
    let sh = script(&work, &log, "0");
    let t = Instant::now();
    let out = bin_with_path()
        .args([
            "replay",
            src.to_str().unwrap(),
            "--group",
            "BinGroup",
            "--topic",
            TOPIC,
        ])
        .args(["--exec", &format!("/bin/sh {}", sh.display())])
        .args([
            "--body-only",
            "--concurrency",
            "4",
            "--max-reconsume-times",
            "2",
        ])
        .args([
            "--time-scale",
            "1000",
            "--until-idle",
            "--json",
            "--overlay",
        ])
        .arg(&ov)
        .timeout(Duration::from_secs(60))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let summary: Value =
        serde_json::from_str(String::from_utf8_lossy(&out).lines().last().unwrap()).unwrap();
    assert_eq!(summary["command"], "replay");
    let s = &summary;
    assert_eq!(s["end"], "idle");
    eprintln!("replay took {:?}: {}", t.elapsed(), s["stats"]);
    let fails = msgs.iter().filter(|m| m.1 == "fail").count() as u64;
    assert_eq!(s["stats"]["dead_lettered"], fails);
    for q in s["offsets"].as_array().unwrap() {
        assert_eq!(q["committed_offset"], q["max_offset"], "{q}");
    }
    let dlq = overlay_dlq(&src, &ov, "BinGroup");
    check_outcome(&msgs, &log_lines(&log), &dlq, 2);
    // a second run has nothing to do
    bin_with_path()
        .args([
            "replay",
            src.to_str().unwrap(),
            "--group",
            "BinGroup",
            "--topic",
            TOPIC,
        ])
        .args([
            "--exec",
            "exit 1",
            "--until-idle",
            "--time-scale",
            "1000",
            "--overlay",
        ])
        .arg(&ov)
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    check_outcome(
        &msgs,
        &log_lines(&log),
        &overlay_dlq(&src, &ov, "BinGroup"),
        2,
    );
    // JSON on stdin: the dump shape plus the delivery
    let seen = work.join("seen.jsonl");
    bin_with_path()
        .args([
            "replay",
            src.to_str().unwrap(),
            "--group",
            "JsonGroup",
            "--topic",
            TOPIC,
        ])
        .args([
            "--exec",
            &format!("cat >> {}", seen.display()),
            "--until-idle",
        ])
        .assert()
        .success();
    let lines = read_lines(&seen);
    assert_eq!(lines.len(), msgs.len());
    for l in &lines {
        assert_eq!(l["topic"], TOPIC);
        assert_eq!(l["replay"]["group"], "JsonGroup");
        assert_eq!(l["replay"]["consumer_topic"], TOPIC);
        assert!(l["uniq_key"].as_str().unwrap().starts_with('u'));
        assert!(l["body"].is_string() && l["msg_id"].is_string());
        assert!(l["file"].as_str().unwrap().contains("commitlog"));
    }
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn replay_stopped_with_sigint_goes_on_where_it_stopped() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let work = temp_dir("sigint");
    let (src, ov, log) = (work.join("store"), work.join("overlay"), work.join("log"));
    let msgs = make_store(&src, 48);
    let sh = script(&work, &log, "0.02");
    let args = |cmd: &mut std::process::Command| {
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .args([
                "replay",
                src.to_str().unwrap(),
                "--group",
                "SigGroup",
                "--topic",
                TOPIC,
            ])
            .args(["--exec", &format!("/bin/sh {}", sh.display())])
            .args([
                "--body-only",
                "--concurrency",
                "3",
                "--max-reconsume-times",
                "2",
            ])
            .args([
                "--time-scale",
                "1000",
                "--until-idle",
                "--json",
                "--overlay",
            ])
            .arg(&ov)
            .stdout(std::process::Stdio::piped());
    };
    let exe = assert_cmd::cargo::cargo_bin("rmqstore");
    let mut cmd = std::process::Command::new(&exe);
    args(&mut cmd);
    let child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while log_lines(&log).iter().filter(|l| l.2).count() < 8 {
        assert!(Instant::now() < deadline, "the replay made no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    let first: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(first["end"], "stopped", "{first}");
    // every message the first run started was finished and recorded: none is in progress
    let first_stats = &first["stats"];
    assert_eq!(first_stats["interrupted"], 0, "{first}");
    assert_eq!(
        first_stats["delivered"].as_u64().unwrap() as usize,
        log_lines(&log).len(),
        "{first}"
    );
    // the second run finishes the job
    let mut cmd = std::process::Command::new(&exe);
    args(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    let second: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(second["end"], "idle");
    let delivered = |v: &Value| v["stats"]["delivered"].as_u64().unwrap() as usize;
    assert!(
        delivered(&second) > 0,
        "the first run was not stopped early"
    );
    assert_eq!(
        delivered(&first) + delivered(&second),
        log_lines(&log).len()
    );
    let dlq = overlay_dlq(&src, &ov, "SigGroup");
    check_outcome(&msgs, &log_lines(&log), &dlq, 2);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn replay_exits_1_when_every_message_went_to_the_dlq() {
    let work = temp_dir("all-dlq");
    let (src, ov) = (work.join("store"), work.join("overlay"));
    let msgs = make_store(&src, 6);
    let out = bin_with_path()
        .args([
            "replay",
            src.to_str().unwrap(),
            "--group",
            "DeadGroup",
            "--topic",
            TOPIC,
        ])
        .args(["--exec", "exit 1", "--max-reconsume-times", "0"])
        .args(["--time-scale", "1000", "--until-idle", "--overlay"])
        .arg(&ov)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "every message delivered failed: {} went to %DLQ%DeadGroup, none was consumed",
            msgs.len()
        )),
        "{stderr}"
    );
    assert_eq!(overlay_dlq(&src, &ov, "DeadGroup").len(), msgs.len());
}
