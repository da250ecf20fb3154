//! Offline administration: `rmqstore offsets` and `rmqstore config`. Plans that change nothing
//! until `--apply`, writes in the broker's form read back by the library, the previous file kept,
//! the broker's lock refused when held.

use std::path::{Path, PathBuf};

use crate::common::*;
use rmqstore::format::config::{load, ConfigFile, ConsumerOffsets};
use serde_json::Value;

fn store_copy() -> (tempfile::TempDir, PathBuf) {
    let work = scratch();
    let store = work.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    (work, store)
}

/// `rmqstore <command> <store> <args>`: (exit code, stdout, stderr).
fn run(command: &str, store: &Path, args: &[&str]) -> (i32, String, String) {
    let o = bin().arg(command).arg(store).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        said(&o.stderr),
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

/// `offsets set` of OrderGroup on OrderTopic to each queue's first offset.
const SET_ORDER_GROUP_TO_FIRST: [&str; 7] = [
    "set",
    "-g",
    "OrderGroup",
    "-t",
    "OrderTopic",
    "--to",
    "first",
];

#[test]
fn set_plans_then_writes_the_broker_form_and_keeps_the_old_file() {
    let (_work, store) = store_copy();
    let before = config_bytes(&store);
    // the plan: old, new, re-delivered per queue; nothing written
    let (code, out, err) = offsets(&store, &[&SET_ORDER_GROUP_TO_FIRST[..], &["-J"]].concat());
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
    let lock = rmqstore::engine::store::safedir::StoreLock::acquire(&store).unwrap();
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
    let lock = rmqstore::engine::store::safedir::StoreLock::acquire(&store).unwrap();
    let (code, _, _) = config(
        &store,
        &["groups", "set", "X", "retryMaxTimes=1", "--apply"],
    );
    assert_eq!(code, 2);
    drop(lock);
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
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

// ---------------------------------------------------------------------------------------------
// A broadcasting consumer's offsets.json (--client-dir)

use rmqstore::engine::broker::client_offsets::{ClientDir, ClientOffsets};
use rmqstore::engine::broker::offsets::{LocalOffsetStore, OffsetFile, ReadOffsetType};
use rmqstore::engine::broker::rebalance::MessageQueue;

const CLIENT: &str = "10.0.0.5@DEFAULT";
const BCAST: &str = "BcastGroup";

/// A store written by `rmqstore gen` (small commitlog files) in `work`.
fn gen_store(work: &Path) -> PathBuf {
    let store = work.join("store");
    let o = bin()
        .arg("gen")
        .arg(&store)
        .args(["--messages", "300", "--commitlog-file-size", "262144"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    store
}

/// `<work>/offsets/<CLIENT>/<group>`, created, with `file` as its offsets.json (when given).
fn client_dir(work: &Path, group: &str, file: Option<&OffsetFile>) -> PathBuf {
    let d = work.join("offsets").join(CLIENT).join(group);
    std::fs::create_dir_all(&d).unwrap();
    if let Some(f) = file {
        std::fs::write(d.join("offsets.json"), f.to_pretty()).unwrap();
    }
    d
}

fn mq(topic: &str, q: i32) -> MessageQueue {
    MessageQueue::new(topic, "broker-a", q)
}

/// OrderTopic queues 0 and 1, a queue of another topic and one of another broker.
fn broadcast_file() -> OffsetFile {
    let mut f = OffsetFile::default();
    f.set(&mq("OrderTopic", 0), 3);
    f.set(&mq("AuditTopic", 2), 7);
    f.set(&MessageQueue::new("OrderTopic", "broker-b", 0), 1);
    f.set(&mq("OrderTopic", 1), 5);
    f
}

fn json_rows(text: &str, kind: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == kind)
        .collect()
}

/// (min, max) of each queue as the store-wide `offsets show -J` prints them (gen's groups read
/// every queue of OrderTopic and AuditTopic).
fn store_bounds(store: &Path) -> std::collections::BTreeMap<(String, i64), (i64, i64)> {
    let (code, out, err) = offsets(store, &["show", "-J"]);
    assert_eq!(code, 0, "{err}");
    json_rows(&out, "queue_offset")
        .into_iter()
        .map(|r| {
            (
                (
                    r["topic"].as_str().unwrap().to_string(),
                    r["queue_id"].as_i64().unwrap(),
                ),
                (
                    r["min_offset"].as_i64().unwrap(),
                    r["max_offset"].as_i64().unwrap(),
                ),
            )
        })
        .collect()
}

fn dir_listing(d: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn client_dir_show_and_set_write_what_the_client_reads() {
    let work = scratch();
    let store = gen_store(work.path());
    let bounds = store_bounds(&store);
    let file = broadcast_file();
    let dir = client_dir(work.path(), BCAST, Some(&file));
    let d = dir.to_str().unwrap();
    // show: the client's committed offsets, the store's min and max, this broker's queues only
    let (code, out, err) = offsets(&store, &["--client-dir", d, "show", "-J"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("broker \"broker-b\"") && err.contains("offsets.json"),
        "the other broker's queue is reported: {err}"
    );
    let rows = json_rows(&out, "queue_offset");
    let got: Vec<(String, i64, i64)> = rows
        .iter()
        .map(|r| {
            assert_eq!(r["group"], BCAST);
            let key = (
                r["topic"].as_str().unwrap().to_string(),
                r["queue_id"].as_i64().unwrap(),
            );
            let (min, max) = bounds[&key];
            assert_eq!(
                (r["min_offset"].as_i64(), r["max_offset"].as_i64()),
                (Some(min), Some(max))
            );
            let c = r["committed_offset"].as_i64().unwrap();
            assert_eq!(r["lag"].as_i64(), Some((max - c.max(min)).max(0)));
            (key.0, key.1, c)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("AuditTopic".into(), 2, 7),
            ("OrderTopic".into(), 0, 3),
            ("OrderTopic".into(), 1, 5)
        ]
    );
    // set without --apply: the plan from the client's offsets, nothing written
    let before = dir_listing(&dir);
    let (code, out, err) = offsets(
        &store,
        &[
            "--client-dir",
            d,
            "set",
            "-t",
            "OrderTopic",
            "--to",
            "first",
            "-J",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let changes = json_rows(&out, "offset_change");
    assert_eq!(changes.len(), 4);
    assert_eq!(changes[0]["old_offset"], 3);
    assert_eq!(changes[1]["old_offset"], 5);
    assert!(changes[2]["old_offset"].is_null());
    assert_eq!(dir_listing(&dir), before, "a plan writes nothing");
    let old_bytes = std::fs::read(dir.join("offsets.json")).unwrap();
    // --apply: the client's pretty form, merged (other topics and brokers kept), .bak and a
    // dated copy of the old file
    let (code, _, err) = offsets(
        &store,
        &[
            "--client-dir",
            d,
            "set",
            "-g",
            BCAST,
            "-t",
            "OrderTopic",
            "-q",
            "1",
            "--to-offset",
            "9",
            "--apply",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("wrote"), "{err}");
    let mut want = file.clone();
    want.set(&mq("OrderTopic", 1), 9);
    assert_eq!(
        std::fs::read(dir.join("offsets.json")).unwrap(),
        want.to_pretty().as_bytes()
    );
    assert_eq!(
        std::fs::read(dir.join("offsets.json.bak")).unwrap(),
        old_bytes
    );
    let dated: Vec<(String, Vec<u8>)> = dir_listing(&dir)
        .into_iter()
        .filter(|(n, _)| n.starts_with("offsets.json.before-offsets-"))
        .collect();
    assert_eq!(dated.len(), 1);
    assert_eq!(dated[0].1, old_bytes);
    // the library reads back what the client would
    let mut local = LocalOffsetStore::new(&work.path().join("offsets"), CLIENT, BCAST);
    assert_eq!(
        local.read_offset(&mq("OrderTopic", 1), ReadOffsetType::ReadFromStore),
        9
    );
    assert_eq!(
        local.read_offset(&mq("OrderTopic", 0), ReadOffsetType::ReadFromStore),
        3
    );
    assert_eq!(
        local.read_offset(&mq("AuditTopic", 2), ReadOffsetType::ReadFromStore),
        7
    );
    let c = ClientOffsets::load(ClientDir::open(&dir).unwrap(), "broker-b").unwrap();
    assert_eq!(
        c.get("OrderTopic", 0),
        Some(1),
        "the other broker's entry is kept"
    );
    // --broker-name reads the other broker's queues
    let (code, out, err) = offsets(
        &store,
        &["--client-dir", d, "--broker-name", "broker-b", "show", "-J"],
    );
    assert_eq!(code, 0, "{err}");
    let rows = json_rows(&out, "queue_offset");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["committed_offset"], 1);
    // the store was only read
    assert!(std::fs::read_dir(store.join("config")).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains(".before-")));
}

#[test]
fn client_dir_errors_name_the_folder_or_the_file() {
    let work = scratch();
    let store = gen_store(work.path());
    let dir = client_dir(work.path(), BCAST, Some(&broadcast_file()));
    let d = dir.to_str().unwrap();
    // a --group that is not DIR's group, on every command that takes --client-dir
    let out = work.path().join("x.jsonl");
    for (cmd, args) in [
        (
            "offsets",
            vec!["--client-dir", d, "show", "-g", "OrderGroup"],
        ),
        (
            "offsets",
            vec![
                "--client-dir",
                d,
                "set",
                "-g",
                "OrderGroup",
                "-t",
                "OrderTopic",
                "--to",
                "last",
            ],
        ),
        (
            "pull",
            vec!["--client-dir", d, "-g", "OrderGroup", "-t", "OrderTopic"],
        ),
        ("pending", vec!["--client-dir", d, "-g", "OrderGroup"]),
        (
            "export",
            vec![
                "--client-dir",
                d,
                "-g",
                "OrderGroup",
                "--out",
                out.to_str().unwrap(),
            ],
        ),
        (
            "replay",
            vec![
                "--client-dir",
                d,
                "-g",
                "OrderGroup",
                "--exec",
                "true",
                "--until-idle",
            ],
        ),
    ] {
        let (code, _, err) = run(cmd, &store, &args);
        assert_eq!(code, 2, "{cmd} {args:?}: {err}");
        assert!(
            err.contains("--group \"OrderGroup\" is not the group of --client-dir")
                && err.contains(BCAST),
            "{cmd}: {err}"
        );
    }
    assert!(!out.exists());
    // clone and delete are the broker table's
    let (code, _, err) = offsets(&store, &["--client-dir", d, "delete", "-g", BCAST]);
    assert_eq!(code, 2);
    assert!(err.contains("only show and set"), "{err}");
    // a missing folder, names that are no client id or group
    let missing = work.path().join("offsets").join(CLIENT).join("Nope");
    let no_client = work.path().join("offsets/not-a-client/G");
    let bad_group = work.path().join("offsets").join(CLIENT).join("bad.group");
    std::fs::create_dir_all(&no_client).unwrap();
    std::fs::create_dir_all(&bad_group).unwrap();
    for (p, why) in [
        (&missing, "no such directory"),
        (&no_client, "client id \"not-a-client\""),
        (&bad_group, "group \"bad.group\""),
    ] {
        let (code, _, err) = offsets(&store, &["--client-dir", p.to_str().unwrap(), "show"]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(why) && err.contains(&*p.to_string_lossy()),
            "{err}"
        );
    }
    // a broken offsets.json: the .bak, as the client reads it, and said
    let good = std::fs::read(dir.join("offsets.json")).unwrap();
    std::fs::write(dir.join("offsets.json.bak"), &good).unwrap();
    std::fs::write(dir.join("offsets.json"), b"{\"offsetTable\":{{\"brok").unwrap();
    let (code, out, err) = offsets(&store, &["--client-dir", d, "show", "-J"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("offsets.json is unparsable") && err.contains("offsets.json.bak"),
        "{err}"
    );
    assert_eq!(json_rows(&out, "queue_offset").len(), 3);
    // ... and a broken .bak too: exit 2, naming it
    std::fs::write(dir.join("offsets.json.bak"), b"{bad").unwrap();
    let (code, _, err) = offsets(&store, &["--client-dir", d, "show"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("offsets.json.bak") && err.contains("unparsable"),
        "{err}"
    );
    // a symlinked .bak is never written through
    std::fs::remove_file(dir.join("offsets.json.bak")).unwrap();
    std::fs::write(dir.join("offsets.json"), &good).unwrap();
    let outside = work.path().join("outside");
    std::fs::write(&outside, b"keep").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("offsets.json.bak")).unwrap();
    let (code, _, err) = offsets(
        &store,
        &[
            "--client-dir",
            d,
            "set",
            "-t",
            "OrderTopic",
            "--to",
            "last",
            "--apply",
        ],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("symlink") && err.contains("offsets.json.bak"),
        "{err}"
    );
    assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    assert_eq!(std::fs::read(dir.join("offsets.json")).unwrap(), good);
}

#[test]
fn pull_pending_export_and_replay_use_the_clients_offsets() {
    let work = scratch();
    let store = gen_store(work.path());
    let bounds = store_bounds(&store);
    let file = broadcast_file();
    let dir = client_dir(work.path(), BCAST, Some(&file));
    let d = dir.to_str().unwrap();
    let broker_table = config_bytes(&store);
    // pending: the group's lag measured from the client's file (a queue it lacks: from min)
    let (code, out, err) = run("pending", &store, &["--client-dir", d, "--json"]);
    assert_eq!(code, 0, "{err}");
    let groups = json_rows(&out, "group");
    assert_eq!(groups.len(), 1, "{out}");
    assert_eq!(groups[0]["group"], BCAST);
    let mut lag = 0;
    for q in groups[0]["queues"].as_array().unwrap() {
        let key = (
            q["topic"].as_str().unwrap().to_string(),
            q["queue_id"].as_i64().unwrap(),
        );
        let (min, max) = bounds[&key];
        let committed = file.get(&mq(&key.0, key.1 as i32)).unwrap_or(-1);
        assert_eq!(q["committed_offset"], committed, "{key:?}");
        let from = if committed < 0 {
            min
        } else {
            committed.max(min)
        };
        assert_eq!(q["lag"].as_i64(), Some(max - from), "{key:?}");
        lag += max - from;
    }
    assert_eq!(groups[0]["lag"].as_i64(), Some(lag));
    assert_eq!(
        groups[0]["queues"].as_array().unwrap().len(),
        8,
        "OrderTopic and AuditTopic"
    );
    // export: exactly what pending counts
    let jsonl = work.path().join("bcast.jsonl");
    let (code, _, err) = run(
        "export",
        &store,
        &["--client-dir", d, "--out", jsonl.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let exported = json_lines(&jsonl);
    assert_eq!(exported.len() as i64, lag);
    let first_q0 = exported
        .iter()
        .filter(|m| m["topic"] == "OrderTopic" && m["queue_id"] == 0)
        .map(|m| m["queue_offset"].as_i64().unwrap())
        .min();
    assert_eq!(first_q0, Some(3), "from the client's offset");
    // pull: starts at the client's offset; --commit writes the client's file (no overlay)
    let (code, _, err) = run(
        "pull",
        &store,
        &[
            "--client-dir",
            d,
            "-t",
            "OrderTopic",
            "-q",
            "0",
            "--max",
            "2",
            "--commit",
            "-J",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let answer = err
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "pull")
        .unwrap_or_else(|| panic!("no pull line in {err}"));
    assert_eq!(answer["queue_offset"], 3);
    let next = answer["next_begin_offset"].as_i64().unwrap();
    assert_eq!(next, 5);
    let mut want = file.clone();
    want.set(&mq("OrderTopic", 0), next);
    assert_eq!(
        std::fs::read(dir.join("offsets.json")).unwrap(),
        want.to_pretty().as_bytes()
    );
    assert_eq!(
        std::fs::read(dir.join("offsets.json.bak")).unwrap(),
        file.to_pretty().as_bytes()
    );
    // a queue the client file lacks starts at its max (CONSUME_FROM_LAST_OFFSET, no broker)
    let (code, _, err) = run(
        "pull",
        &store,
        &["--client-dir", d, "-t", "OrderTopic", "-q", "3", "-J"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "\"queue_offset\":{}",
            bounds[&("OrderTopic".to_string(), 3)].1
        )),
        "{err}"
    );
    // replay: consumes from the client's offsets and saves them in its file when it ends
    let (code, out, err) = run(
        "replay",
        &store,
        &[
            "--client-dir",
            d,
            "-t",
            "AuditTopic",
            "--exec",
            "true",
            "--until-idle",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let summary: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    // only queue 2 has an offset in the file; the others start at their max
    let (_, max2) = bounds[&("AuditTopic".to_string(), 2)];
    assert_eq!(
        summary["stats"]["delivered"].as_i64(),
        Some(max2 - 7),
        "{summary}"
    );
    let c = ClientOffsets::load(ClientDir::open(&dir).unwrap(), "broker-a").unwrap();
    assert_eq!(c.get("AuditTopic", 2), Some(max2));
    for q in [0, 1, 3] {
        let (_, max) = bounds[&("AuditTopic".to_string(), q)];
        let got = c.get("AuditTopic", q as i32);
        assert!(got.is_none_or(|v| v == max), "AuditTopic {q}: {got:?}");
    }
    assert_eq!(c.get("OrderTopic", 0), Some(next), "other topics kept");
    assert_eq!(
        c.file.get(&MessageQueue::new("OrderTopic", "broker-b", 0)),
        Some(1)
    );
    assert_eq!(config_bytes(&store), broker_table, "the store is only read");
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn client_dir_on_the_oracle_stores_shows_the_java_bounds() {
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
        let java = java_queries(&dir);
        let work = scratch();
        let store = work.path().join("store");
        copy_tree(&dir.join("store"), &store);
        let mut file = OffsetFile::default();
        for q in 0..4 {
            file.set(&mq("TopicA", q), 10 * i64::from(q));
        }
        let cd = client_dir(work.path(), BCAST, Some(&file));
        let (code, out, err) = offsets(
            &store,
            &["--client-dir", cd.to_str().unwrap(), "show", "-J"],
        );
        assert_eq!(code, 0, "{name}: {err}");
        let rows = json_rows(&out, "queue_offset");
        assert_eq!(rows.len(), 4, "{name}");
        for r in rows {
            let q = r["queue_id"].as_i64().unwrap();
            let j = java["queues"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["topic"] == "TopicA" && x["queueId"] == q)
                .unwrap_or_else(|| panic!("{name}: no Java answer for TopicA {q}"));
            assert_eq!(r["min_offset"], j["minOffsetInQueue"], "{name} {q}");
            assert_eq!(r["max_offset"], j["maxOffsetInQueue"], "{name} {q}");
            assert_eq!(r["committed_offset"].as_i64(), Some(10 * q), "{name} {q}");
        }
        // set --to last --apply: each queue at Java's max offset, in the client's form
        let (code, _, err) = offsets(
            &store,
            &[
                "--client-dir",
                cd.to_str().unwrap(),
                "set",
                "-t",
                "TopicA",
                "--to",
                "last",
                "--apply",
            ],
        );
        assert_eq!(code, 0, "{name}: {err}");
        let mut want = file.clone();
        for q in 0..4 {
            let j = java["queues"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["topic"] == "TopicA" && x["queueId"] == q)
                .unwrap();
            want.set(&mq("TopicA", q), j["maxOffsetInQueue"].as_i64().unwrap());
        }
        assert_eq!(
            std::fs::read(cd.join("offsets.json")).unwrap(),
            want.to_pretty().as_bytes(),
            "{name}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// An interrupted config write: the old file or the new one, never a torn one

/// The arguments of a run that changes a config file, given the file's current bytes.
type ArgsFor = Box<dyn Fn(&[u8]) -> Vec<String>>;
/// Whether `new` is what that run writes over `old`.
type IsNew = Box<dyn Fn(&[u8], &[u8]) -> bool>;

/// One config write the binary makes, and what the file may hold after it was interrupted.
struct ConfigWrite {
    name: &'static str,
    file: PathBuf,
    /// The arguments of a run that changes the file (given its current bytes).
    args: ArgsFor,
    /// Whether `bytes` is what that run writes over `old`.
    is_new: IsNew,
}

fn write_cases(work: &Path, store: &Path) -> Vec<ConfigWrite> {
    use rmqstore::format::config::{save, TopicConfig, TopicConfigs};
    let config = store.join("config");
    // large files: many groups, topics and client queues
    let mut table = table(store);
    for g in 0..1500 {
        for q in 0..4 {
            table.set("AuditTopic", &format!("Group{g:05}"), q, i64::from(q));
        }
    }
    save(&config, &table).unwrap();
    let mut topics = load::<TopicConfigs>(&config).unwrap().value;
    for t in 0..1500 {
        topics.insert(TopicConfig::new(format!("Topic{t:05}")));
    }
    save(&config, &topics).unwrap();
    let mut file = OffsetFile::default();
    for t in 0..1500 {
        file.set(&mq(&format!("Topic{t:05}"), 0), i64::from(t));
    }
    let cd = client_dir(work, BCAST, Some(&file));
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let cds = cd.to_str().unwrap().to_string();
    // each run moves AuditTopic queue 0 (or its perm) between two values
    let offsets_target = |now: Option<i64>| if now == Some(5) { 6 } else { 5 };
    vec![
        ConfigWrite {
            name: "consumerOffset.json",
            file: config.join("consumerOffset.json"),
            args: Box::new(move |old| {
                let t = ConsumerOffsets::from_bytes(old).unwrap();
                let v = offsets_target(t.get("AuditTopic", "Group00000", 0));
                s(&[
                    "set",
                    "-g",
                    "Group00000",
                    "-t",
                    "AuditTopic",
                    "-q",
                    "0",
                    "--to-offset",
                    &v.to_string(),
                    "--apply",
                ])
            }),
            is_new: Box::new(move |old, new| {
                let mut t = ConsumerOffsets::from_bytes(old).unwrap();
                let v = offsets_target(t.get("AuditTopic", "Group00000", 0));
                t.set("AuditTopic", "Group00000", 0, v);
                new == t.to_pretty().as_bytes()
            }),
        },
        ConfigWrite {
            name: "topics.json",
            file: config.join("topics.json"),
            args: Box::new(move |old| {
                let t = TopicConfigs::from_bytes(old).unwrap();
                let p = if t.get("Topic00000").unwrap().perm == 6 {
                    7
                } else {
                    6
                };
                vec![
                    "topics".into(),
                    "set".into(),
                    "Topic00000".into(),
                    format!("perm={p}"),
                    "--apply".into(),
                ]
            }),
            is_new: Box::new(move |old, new| {
                let (o, Ok(n)) = (
                    TopicConfigs::from_bytes(old).unwrap(),
                    TopicConfigs::from_bytes(new),
                ) else {
                    return false;
                };
                let mut want = o.clone();
                let mut c = want.get("Topic00000").unwrap().clone();
                c.perm = if c.perm == 6 { 7 } else { 6 };
                want.insert(c);
                let counter = |t: &TopicConfigs| t.data_version.as_ref().map(|d| d.counter);
                want.table == n.table && counter(&n) == counter(&o).map(|c| c + 1)
            }),
        },
        ConfigWrite {
            name: "offsets.json",
            file: cd.join("offsets.json"),
            args: Box::new(move |old| {
                let f = OffsetFile::from_bytes(old).unwrap();
                let v = offsets_target(f.get(&mq("AuditTopic", 0)));
                s(&[
                    "--client-dir",
                    &cds,
                    "set",
                    "-t",
                    "AuditTopic",
                    "-q",
                    "0",
                    "--to-offset",
                    &v.to_string(),
                    "--apply",
                ])
            }),
            is_new: Box::new(move |old, new| {
                let mut f = OffsetFile::from_bytes(old).unwrap();
                let v = offsets_target(f.get(&mq("AuditTopic", 0)));
                f.set(&mq("AuditTopic", 0), v);
                new == f.to_pretty().as_bytes()
            }),
        },
    ]
}

impl ConfigWrite {
    fn command(&self) -> &'static str {
        if self.name == "topics.json" {
            "config"
        } else {
            "offsets"
        }
    }

    fn process(&self, store: &Path, old: &[u8]) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("rmqstore"));
        c.env_clear()
            .env("TZ", "UTC")
            .arg(self.command())
            .arg(store)
            .args((self.args)(old))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    }

    /// The file is the old one or the new one, whole; a `.tmp` beside it is not read.
    fn check(&self, store: &Path, old: &[u8], ctx: &str) -> bool {
        let now = std::fs::read(&self.file).unwrap();
        let new = (self.is_new)(old, &now);
        assert!(
            now == old || new,
            "{}: {ctx}: neither the old nor the new file ({} bytes)",
            self.name,
            now.len()
        );
        if rmqstore::format::config::with_suffix(&self.file, ".tmp").exists() {
            // readers take the main file, whatever the .tmp holds
            let args: Vec<&str> = match self.name {
                "topics.json" => vec!["topics", "show"],
                "offsets.json" => vec!["--client-dir", "", "show"],
                _ => vec!["show"],
            };
            let dir = self.file.parent().unwrap().to_str().unwrap().to_string();
            let args: Vec<&str> = args
                .into_iter()
                .map(|a| if a.is_empty() { dir.as_str() } else { a })
                .collect();
            let (code, _, err) = run(self.command(), store, &args);
            assert_eq!(
                code, 0,
                "{}: {ctx}: a reader with a .tmp left: {err}",
                self.name
            );
            assert!(!err.contains(".tmp"), "{err}");
        }
        new
    }
}

#[test]
fn an_interrupted_config_write_leaves_the_old_or_the_new_file() {
    let work = scratch();
    let store = gen_store(work.path());
    let cases = write_cases(work.path(), &store);
    for w in &cases {
        // at each step of the write (the failpoints abort the process there)
        for (point, expect_new) in [
            ("config-tmp-written", false),
            ("config-bak-written", false),
            ("config-renamed", true),
        ] {
            let old = std::fs::read(&w.file).unwrap();
            let st = w
                .process(&store, &old)
                .env("RMQSTORE_FAILPOINT", point)
                .status()
                .unwrap();
            assert!(
                !st.success(),
                "{}: {point}: the process was not stopped",
                w.name
            );
            assert_eq!(
                w.check(&store, &old, point),
                expect_new,
                "{}: {point}",
                w.name
            );
        }
        // killed at varied moments of a whole run: spawn, wait a few ms, SIGKILL
        let t0 = std::time::Instant::now();
        let old = std::fs::read(&w.file).unwrap();
        assert!(
            w.process(&store, &old).status().unwrap().success(),
            "{}",
            w.name
        );
        assert!(w.check(&store, &old, "not killed"), "{}", w.name);
        let whole = t0.elapsed().as_micros().max(1000) as u64;
        let (mut olds, mut news) = (0, 0);
        for i in 0..16u64 {
            let old = std::fs::read(&w.file).unwrap();
            let mut child = w.process(&store, &old).spawn().unwrap();
            std::thread::sleep(std::time::Duration::from_micros(whole * i / 14));
            let _ = child.kill();
            child.wait().unwrap();
            if w.check(&store, &old, &format!("killed after {}us", whole * i / 14)) {
                news += 1;
            } else {
                olds += 1;
            }
        }
        eprintln!(
            "{}: killed runs left {olds} old and {news} new files",
            w.name
        );
    }
}

#[test]
fn offsets_set_and_config_set_take_the_geometry_flags_after_their_action() {
    let (_work, store) = store_copy();
    let first = std::fs::read_dir(store.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    let size = std::fs::metadata(first).unwrap().len().to_string();
    let set = SET_ORDER_GROUP_TO_FIRST;
    let geometry = ["--commitlog-file-size", &size, "--cq-file-units", "300000"];
    let before = offsets(&store, &[&geometry[..], &set[..], &["-J"]].concat());
    let after = offsets(&store, &[&set[..], &geometry[..], &["-J"]].concat());
    assert_eq!(after.0, 0, "{}", after.2);
    assert_eq!(after.1, before.1, "the same plan wherever the flags stand");
    let (code, _, err) = config(
        &store,
        &[
            &["topics", "set", "OrderTopic", "perm=6"][..],
            &geometry[..],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    // the flags are read, not only parsed: a broker config that is not there is said
    for args in [
        &[&set[..], &["--broker-conf", "/nonexistent/broker.conf"]].concat(),
        &[
            "topics",
            "set",
            "OrderTopic",
            "perm=6",
            "--broker-conf",
            "/nonexistent/broker.conf",
        ][..]
            .to_vec(),
    ] {
        let command = if args[0] == "set" {
            "offsets"
        } else {
            "config"
        };
        let (code, _, err) = run(command, &store, args);
        assert_eq!(code, 2, "{command} {args:?}: {err}");
        assert!(err.contains("/nonexistent/broker.conf"), "{err}");
    }
}
