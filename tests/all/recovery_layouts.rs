//! `verify --explain-recovery` against the real Java store on the layouts of RocketMQ's own bug
//! reports: a queue's last consume queue file all zeros after a full one (an async flush that
//! lost it, apache/rocketmq#9728 and #10108), a queue's last file deleted (#7355), each after a
//! clean stop and an unclean one, and with the commitlog's tail lost too. The Java store of 4.9
//! (`DefaultMessageStore` from the peer kit, common/java.rs) recovers each copy; every queue's
//! max offset is what rmqstore predicted, the first message it said would be served at another
//! offset is served there, the messages it said would be served nowhere are not, and a unit it
//! said is no message is answered without one.

use std::collections::BTreeMap;
use std::path::Path;

use crate::broker_loads::copy_of;
use crate::common::java::{self, Geometry, JavaStore, JavaVersion};
use crate::common::*;
use serde_json::Value;

/// The queue the layouts damage: two consume queue files, the first full.
const TOPIC: &str = "PaymentTopic";
const QUEUE: i32 = 0;

/// What rmqstore's explanation says of the next start.
struct Explained {
    /// The `recovery` line of `verify --explain-recovery --json`.
    recovery: Value,
    /// Each queue's max offset after the start, as the explanation makes it.
    max_offsets: BTreeMap<(String, i32), i64>,
}

fn explain(store: &Path, g: Geometry) -> Explained {
    let recovery = g.explained_recovery(store);
    // the queues' ends as recovery finds them, then what truncation and re-dispatch make them
    let mut max_offsets = queue_ends(store, g);
    for t in recovery["queue_truncations"].as_array().unwrap() {
        let k = (
            t["topic"].as_str().unwrap().to_string(),
            t["queue_id"].as_i64().unwrap() as i32,
        );
        max_offsets.insert(k, t["from_queue_offset"].as_i64().unwrap());
    }
    for r in recovery["requeues"].as_array().unwrap() {
        let k = (
            r["topic"].as_str().unwrap().to_string(),
            r["queue_id"].as_i64().unwrap() as i32,
        );
        max_offsets.insert(k, r["max_offset"].as_i64().unwrap());
    }
    Explained {
        recovery,
        max_offsets,
    }
}

/// Each queue's max offset as `info` reads it (`ConsumeQueue.recover`'s end).
fn queue_ends(store: &Path, g: Geometry) -> BTreeMap<(String, i32), i64> {
    let mut args = vec![
        "info".to_string(),
        store.display().to_string(),
        "--json".into(),
    ];
    args.extend(g.rmqstore_args());
    let out = bin().args(&args).output().unwrap();
    let info: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "info")
        .expect("an info line");
    let mut ends = BTreeMap::new();
    for t in info["topics"].as_array().unwrap() {
        for q in t["queues"].as_array().unwrap() {
            ends.insert(
                (
                    t["topic"].as_str().unwrap().to_string(),
                    q["queue_id"].as_i64().unwrap() as i32,
                ),
                q["max_offset"].as_i64().unwrap(),
            );
        }
    }
    ends
}

/// The Java store recovers `store` (a copy) as rmqstore explained it would.
fn assert_java_recovers_as_explained(store: &Path, v: JavaVersion, ctx: &str) -> Value {
    let g = Geometry::SMALL;
    let ours = explain(store, g);
    let (_t, copy) = copy_of(store, false);
    let java = JavaStore::load(&copy, v, g);
    assert_eq!(java.load["ok"], true, "{ctx}: {:?}", java.load);
    for (k, &(_, max)) in &java.queues {
        let predicted = ours.max_offsets.get(k).copied().unwrap_or(0);
        assert_eq!(
            max, predicted,
            "{ctx}: {}/{}: the Java store's max offset; rmqstore's explanation: {:#}",
            k.0, k.1, ours.recovery
        );
    }
    for r in ours.recovery["requeues"].as_array().unwrap() {
        eprintln!("{v:?} {ctx}: {r}");
        let (t, q) = (
            r["topic"].as_str().unwrap(),
            r["queue_id"].as_i64().unwrap() as i32,
        );
        let served: Vec<(i64, i64)> = java
            .messages
            .iter()
            .filter(|((mt, mq, _), _)| mt == t && *mq == q)
            .map(|((_, _, at), m)| (*at, m["queueOffset"].as_i64().unwrap()))
            .collect();
        if let Some(first) = r["first_misplaced"].as_array() {
            let (own, at) = (first[0].as_i64().unwrap(), first[1].as_i64().unwrap());
            assert!(
                served.contains(&(at, own)),
                "{ctx}: the message of queue offset {own} is not served at {at}: {served:?}"
            );
            let misplaced = served.iter().filter(|(at, own)| at != own).count();
            assert_eq!(misplaced as i64, r["misplaced"].as_i64().unwrap(), "{ctx}");
        }
        let out = r["out_of_service"].as_i64().unwrap();
        let from = r["recovered_end"].as_i64().unwrap();
        if out > 0 {
            let hit: Vec<_> = served
                .iter()
                .filter(|(_, own)| (from..from + out).contains(own))
                .collect();
            assert!(
                hit.is_empty(),
                "{ctx}: served although out of service: {hit:?}"
            );
        }
        for b in r["bogus_units"].as_array().unwrap() {
            let b = b.as_i64().unwrap();
            assert!(
                !java.messages.contains_key(&(t.to_string(), q, b)),
                "{ctx}: a message at {b}"
            );
            assert!(
                java.not_found
                    .iter()
                    .any(|e| e["offset"] == b && e["status"] == "FOUND" && e["noMessage"] == true),
                "{ctx}: the Java store does not answer FOUND with no message at {b}: {:?}",
                java.not_found
            );
        }
    }
    ours.recovery
}

/// The generated store, checked to have the layout the cases damage.
fn generated(dir: &Path, v: JavaVersion) -> std::path::PathBuf {
    let root = dir.join("gen");
    let mut args = vec![
        "gen",
        root.to_str().unwrap(),
        "--messages",
        "2000",
        "--seed",
        "7",
    ];
    if v == JavaVersion::V5 {
        args.extend(["--message-version", "2"]);
    }
    args.extend_from_slice(&SMALL_GEOMETRY);
    let out = bin().args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files = std::fs::read_dir(
        root.join("consumequeue")
            .join(TOPIC)
            .join(QUEUE.to_string()),
    )
    .unwrap()
    .count();
    assert_eq!(files, 2, "the generated queue's files");
    root
}

fn last_cq_file(store: &Path) -> std::path::PathBuf {
    let dir = store
        .join("consumequeue")
        .join(TOPIC)
        .join(QUEUE.to_string());
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.pop().unwrap()
}

fn zero_file(p: &Path) {
    let len = std::fs::metadata(p).unwrap().len();
    std::fs::write(p, vec![0u8; len as usize]).unwrap();
}

/// The requeue the explanation gives for the damaged queue.
fn requeue_of(recovery: &Value) -> Option<&Value> {
    recovery["requeues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["topic"] == TOPIC && r["queue_id"] == QUEUE)
}

/// `verify`'s finding on the damaged queue's missing units.
fn missing_unit_finding(store: &Path, ctx: &str) -> Value {
    let mut args = vec![
        "verify".to_string(),
        store.display().to_string(),
        "--json".into(),
    ];
    args.extend(Geometry::SMALL.rmqstore_args());
    let out = bin().args(&args).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| {
            v["code"] == "consumequeue.missing_unit"
                && v["location"]["topic"] == TOPIC
                && v["location"]["queue_id"] == QUEUE
        })
        .unwrap_or_else(|| panic!("{ctx}: no missing_unit finding"))
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn explain_recovery_matches_the_49_store_on_the_layouts_of_rocketmq_bug_reports() {
    layouts(JavaVersion::V4_9);
}

#[test]
#[cfg_attr(not(rmqstore_java_5), ignore = "needs the Java 5.x peer kit")]
fn explain_recovery_matches_the_5x_store_on_the_layouts_of_rocketmq_bug_reports() {
    layouts(JavaVersion::V5);
}

/// Each layout of the module doc, recovered by the Java store of release `v`.
fn layouts(v: JavaVersion) {
    if !java::ready(v) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = generated(t.path(), v);

    // healthy, unclean: nothing is wrong
    let (_h, healthy) = copy_of(&root, true);
    let r = assert_java_recovers_as_explained(&healthy, v, "healthy, abort");
    assert_eq!(r["requeues"], Value::Array(Vec::new()), "{r:#}");

    // the last file all zeros after a full one
    for abort in [true, false] {
        let ctx = format!("zero last file, abort {abort}");
        let (_z, zeroed) = copy_of(&root, abort);
        zero_file(&last_cq_file(&zeroed));
        let r = assert_java_recovers_as_explained(&zeroed, v, &ctx);
        let q = requeue_of(&r).unwrap_or_else(|| panic!("{ctx}: no requeue: {r:#}"));
        let f = missing_unit_finding(&zeroed, &ctx);
        assert!(
            f["message"]
                .as_str()
                .unwrap()
                .contains("all zeros after a full one"),
            "{f}"
        );
        let action = f["broker_action"].as_str().unwrap();
        assert!(action.contains("its max offset becomes"), "{ctx}: {f}");
        if abort {
            // the re-dispatch appends the scanned records at offset 100 on
            assert!(q["misplaced"].as_u64().unwrap() > 0, "{ctx}: {q}");
            assert!(q["out_of_service"].as_u64().unwrap() > 0, "{ctx}: {q}");
        } else {
            // the rescan keeps the zero unit at 100
            assert_eq!(q["bogus_units"], serde_json::json!([100]), "{ctx}: {q}");
            assert_eq!(q["max_offset"], 101, "{ctx}: {q}");
        }
    }

    // the last file deleted after a clean stop: the queue ends at 100, nothing is dispatched
    let (_d, deleted) = copy_of(&root, false);
    std::fs::remove_file(last_cq_file(&deleted)).unwrap();
    assert_java_recovers_as_explained(&deleted, v, "last file deleted");

    // the last file deleted, then an unclean stop
    let (_d, deleted) = copy_of(&root, true);
    std::fs::remove_file(last_cq_file(&deleted)).unwrap();
    let r = assert_java_recovers_as_explained(&deleted, v, "last file deleted, abort");
    let q = requeue_of(&r).unwrap_or_else(|| panic!("deleted: no requeue: {r:#}"));
    assert!(q["misplaced"].as_u64().unwrap() > 0, "{q}");

    // the zero file with the commitlog's last file lost too
    let (_c, cut) = copy_of(&root, true);
    zero_file(&last_cq_file(&cut));
    let mut logs: Vec<_> = std::fs::read_dir(cut.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    logs.sort();
    std::fs::remove_file(logs.pop().unwrap()).unwrap();
    assert_java_recovers_as_explained(&cut, v, "zero last file, commitlog tail lost, abort");
}
