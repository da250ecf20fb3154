//! Offline administration: `rmqstore offsets` and `rmqstore config`. Plans that change nothing
//! until `--apply`, writes in the broker's form read back by the library, the previous file kept,
//! the broker's lock refused when held.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use rmqstore::format::config::{load, ConfigFile, ConsumerOffsets};
use serde_json::Value;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/store-4.9")
}

fn store_copy() -> (tempfile::TempDir, PathBuf) {
    let work = scratch();
    let store = work.path().join("store");
    copy_tree(&fixture(), &store);
    (work, store)
}

/// `rmqstore <command> <store> <args>`: (exit code, stdout, stderr).
fn run(command: &str, store: &Path, args: &[&str]) -> (i32, String, String) {
    let o = bin().arg(command).arg(store).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn offsets(store: &Path, args: &[&str]) -> (i32, String, String) {
    run("offsets", store, args)
}

fn config(store: &Path, args: &[&str]) -> (i32, String, String) {
    run("config", store, args)
}

fn table(store: &Path) -> ConsumerOffsets {
    load::<ConsumerOffsets>(&store.join("config"))
        .unwrap()
        .value
}

fn config_bytes(store: &Path) -> Vec<u8> {
    std::fs::read(store.join("config/consumerOffset.json")).unwrap()
}

#[test]
fn set_plans_then_writes_the_broker_form_and_keeps_the_old_file() {
    let (_work, store) = store_copy();
    let before = config_bytes(&store);
    // the plan: old, new, re-delivered per queue; nothing written
    let (code, out, err) = offsets(
        &store,
        &[
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "--to",
            "first",
            "-J",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let queues: Vec<&Value> = rows
        .iter()
        .filter(|r| r.get("queue_id").is_some())
        .collect();
    assert_eq!(queues.len(), 4);
    let old = table(&store);
    for q in &queues {
        let id = q["queue_id"].as_i64().unwrap() as i32;
        let was = old.get("OrderTopic", "OrderGroup", id).unwrap();
        assert_eq!(q["old_offset"], was);
        assert_eq!(q["new_offset"], 0);
        assert_eq!(q["redelivered"], was);
    }
    assert_eq!(config_bytes(&store), before, "a plan writes nothing");
    // --apply: the library reads exactly the new offsets, everything else unchanged
    let (code, _, err) = offsets(
        &store,
        &[
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "-q",
            "2",
            "--to-offset",
            "100000",
            "--apply",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let new = table(&store);
    assert_eq!(
        new.get("OrderTopic", "OrderGroup", 2),
        Some(146),
        "clamped to max"
    );
    for (t, g, qs) in old.iter() {
        for &(q, o) in qs {
            if (t, g, q) != ("OrderTopic", "OrderGroup", 2) {
                assert_eq!(new.get(t, g, q), Some(o), "{t}@{g}/{q}");
            }
        }
    }
    // the broker's form: what the library writes for the table, byte for byte; .bak and the
    // dated backup hold the previous file
    assert_eq!(config_bytes(&store), new.to_pretty().as_bytes());
    assert_eq!(
        std::fs::read(store.join("config/consumerOffset.json.bak")).unwrap(),
        before
    );
    let dated: Vec<PathBuf> = std::fs::read_dir(store.join("config"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".before-offsets-"))
        .collect();
    assert_eq!(dated.len(), 1);
    assert_eq!(std::fs::read(&dated[0]).unwrap(), before);
    // a change to what is already there writes nothing
    let now = config_bytes(&store);
    let (code, out, _) = offsets(
        &store,
        &[
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "-q",
            "2",
            "--to",
            "last",
            "--apply",
        ],
    );
    assert_eq!(code, 0);
    assert!(out.contains("nothing changes"), "{out}");
    assert_eq!(config_bytes(&store), now);
}

#[test]
fn set_by_time_is_the_brokers_offset_by_time() {
    let (_work, store) = store_copy();
    let t = "1796000001000";
    let (code, out, err) = offsets(
        &store,
        &[
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "--to-time",
            t,
            "-J",
        ],
    );
    assert_eq!(code, 0, "{err}");
    for l in out.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let Some(q) = v["queue_id"].as_i64() else {
            continue;
        };
        // what query's time window says getOffsetInQueueByTime answers for the queue
        let o = bin()
            .args(["query"])
            .arg(&store)
            .args([
                "-t",
                "OrderTopic",
                "-q",
                &q.to_string(),
                "--begin",
                t,
                "-J",
                "--body",
                "none",
            ])
            .output()
            .unwrap();
        let text =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        let summary = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v.to_string().contains("offset_in_queue_by_time"))
            .unwrap_or_else(|| panic!("no summary in {text}"));
        let by_time = summary.to_string();
        assert!(
            by_time.contains(&format!("\"offset_in_queue_by_time\":{}", v["new_offset"])),
            "queue {q}: {by_time} vs {v}"
        );
    }
}

#[test]
fn clone_and_delete() {
    let (_work, store) = store_copy();
    let (code, _, err) = offsets(
        &store,
        &[
            "clone",
            "--from",
            "OrderGroup",
            "--to",
            "ReplayGroup",
            "--apply",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let t = table(&store);
    for q in 0..4 {
        assert_eq!(
            t.get("OrderTopic", "ReplayGroup", q),
            t.get("OrderTopic", "OrderGroup", q)
        );
    }
    // the source group's own retry topic is not the target's
    assert_eq!(t.queues("%RETRY%OrderGroup", "ReplayGroup"), None);
    let (code, _, err) = offsets(
        &store,
        &["delete", "-g", "OrderGroup", "-t", "OrderTopic", "--apply"],
    );
    assert_eq!(code, 0, "{err}");
    let t = table(&store);
    assert_eq!(t.queues("OrderTopic", "OrderGroup"), None);
    assert!(t.queues("%RETRY%OrderGroup", "OrderGroup").is_some());
    assert!(t.queues("OrderTopic", "ReplayGroup").is_some());
    let (code, _, err) = offsets(&store, &["delete", "-g", "OrderGrup"]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean \"OrderGroup\"?"), "{err}");
}

#[test]
fn a_held_lock_refuses_the_write() {
    let (_work, store) = store_copy();
    let before = config_bytes(&store);
    let lock = rmqstore::engine::safedir::StoreLock::acquire(&store).unwrap();
    let (code, _, err) = offsets(
        &store,
        &[
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "--to",
            "first",
            "--apply",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("lock"), "{err}");
    assert_eq!(config_bytes(&store), before);
    // the plan alone reads only
    let (code, _, err) = offsets(
        &store,
        &[
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "--to",
            "first",
        ],
    );
    assert_eq!(code, 0, "{err}");
    drop(lock);
}

#[test]
fn config_set_and_delete_write_what_the_broker_reads() {
    use rmqstore::format::config::{SubscriptionGroups, TopicConfigs};
    let (_work, store) = store_copy();
    let topics = store.join("config/topics.json");
    let before = std::fs::read(&topics).unwrap();
    let old = load::<TopicConfigs>(&store.join("config")).unwrap().value;
    // a plan writes nothing; a value equal to the current one changes nothing
    let (code, out, err) = config(&store, &["topics", "set", "OrderTopic", "readQueueNums=8"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("readQueueNums") && out.contains("4 -> 8"),
        "{out}"
    );
    let (code, out, _) = config(
        &store,
        &["topics", "set", "OrderTopic", "perm=6", "--apply"],
    );
    assert_eq!(code, 0);
    assert!(out.contains("nothing changes"), "{out}");
    assert_eq!(std::fs::read(&topics).unwrap(), before);
    // refused: fewer read queues than consume queues, unknown keys, values the broker rejects
    for (args, why) in [
        (
            &["topics", "set", "OrderTopic", "readQueueNums=2", "--apply"][..],
            "below the 4 consume queue(s)",
        ),
        (
            &["topics", "set", "OrderTopic", "bogus=1"][..],
            "unknown property \"bogus\"",
        ),
        (&["topics", "set", "OrderTopic", "perm=99"][..], "perm=99"),
        (&["topics", "set", "Bad.Topic", "perm=6"][..], "Bad.Topic"),
        (
            &["groups", "set", "OrderGroup", "retryMaxTimes=x"][..],
            "expected an integer",
        ),
        (
            &["groups", "delete", "OrderGrup"][..],
            "did you mean \"OrderGroup\"?",
        ),
    ] {
        let (code, _, err) = config(&store, args);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&topics).unwrap(), before);
    // --apply: the new values, the rest as it was, dataVersion bumped, the old file kept
    let (code, _, err) = config(
        &store,
        &[
            "topics",
            "set",
            "OrderTopic",
            "readQueueNums=8",
            "writeQueueNums=8",
            "--apply",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let new = load::<TopicConfigs>(&store.join("config")).unwrap().value;
    let t = new.get("OrderTopic").unwrap();
    assert_eq!((t.read_queue_nums, t.write_queue_nums, t.perm), (8, 8, 6));
    for (name, c) in &old.table {
        if name != "OrderTopic" {
            assert_eq!(new.get(name), Some(c), "{name}");
        }
    }
    let (o, n) = (old.data_version.unwrap(), new.data_version.clone().unwrap());
    assert_eq!(n.counter, o.counter + 1);
    assert_eq!(std::fs::read(&topics).unwrap(), new.to_pretty().as_bytes());
    assert_eq!(
        std::fs::read(store.join("config/topics.json.bak")).unwrap(),
        before
    );
    // groups: a new group gets Java's defaults and the value set; delete removes it
    let (code, _, err) = config(
        &store,
        &["groups", "set", "ReplayGroup", "retryMaxTimes=3", "--apply"],
    );
    assert_eq!(code, 0, "{err}");
    let g = load::<SubscriptionGroups>(&store.join("config"))
        .unwrap()
        .value;
    let r = g.get("ReplayGroup").unwrap();
    assert_eq!(
        (r.retry_max_times, r.retry_queue_nums, r.consume_enable),
        (3, 1, true)
    );
    let (code, _, err) = config(&store, &["groups", "delete", "ReplayGroup", "--apply"]);
    assert_eq!(code, 0, "{err}");
    let g = load::<SubscriptionGroups>(&store.join("config"))
        .unwrap()
        .value;
    assert!(g.get("ReplayGroup").is_none());
    // the lock
    let lock = rmqstore::engine::safedir::StoreLock::acquire(&store).unwrap();
    let (code, _, _) = config(
        &store,
        &["groups", "set", "X", "retryMaxTimes=1", "--apply"],
    );
    assert_eq!(code, 2);
    drop(lock);
}

#[test]
fn config_set_to_the_same_values_leaves_a_java_written_file_as_it_is() {
    for name in ["basic-4.9", "basic-5.x"] {
        let dir = match oracle(name) {
            Some(d) => d,
            None if std::env::var_os("CI").is_some() => {
                panic!("oracle store {name} missing under CI")
            }
            None => {
                eprintln!("SKIPPED: oracle store {name} not found");
                continue;
            }
        };
        let work = scratch();
        let store = work.path().join("store");
        copy_tree(&dir.join("store"), &store);
        let file = store.join("config/topics.json");
        let before = std::fs::read(&file).unwrap();
        let old = load::<rmqstore::format::config::TopicConfigs>(&store.join("config"))
            .unwrap()
            .value;
        let (name0, c) = &old.table[0];
        let same = format!("readQueueNums={}", c.read_queue_nums);
        let (code, out, err) = config(&store, &["topics", "set", name0, &same, "--apply"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("nothing changes"), "{out}");
        assert_eq!(std::fs::read(&file).unwrap(), before, "{name}");
        // and what the writer makes of the table is the Java file, byte for byte
        assert_eq!(old.to_pretty().as_bytes(), &before[..], "{name}");
    }
}
