//! The broker loads what we write: the output of every writer (`gen`, `gen --dledger
//! [--converted]`, `repair --out` and `--in-place` over the damage classes of the repair tests,
//! `rebuild`, `export --out` to a store) opened by the real Apache RocketMQ store of the
//! matching release (`DefaultMessageStore` through the Java peer kit, common/java.rs), once as
//! after a clean stop and once with an `abort` file (the abnormal recovery, which checks every
//! record's CRC again); `offsets ... --apply` and `config ... --apply` loaded by the real broker,
//! which answers the offsets and configs written. Every message rmqstore says is in service is
//! returned by the Java store at the same queue offset, equal field by field; the queue bounds
//! agree; nothing the Java store answers is missing from rmqstore's reading; and what a repair
//! takes out of service is exactly what it names (`lost`, the salvaged records).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::cluster::{command, Cluster, Options};
use crate::common::java::{self, assert_same_message, Geometry, JavaStore, JavaVersion};
use crate::common::*;
use rmqstore::engine::broker::clock::SystemClock;
use rmqstore::engine::broker::{Engine, EngineOptions};
use rmqstore::engine::store::reader::Reader;
use rmqstore::engine::Store;
use rmqstore::format::commitlog::{parse_record, Record};
use rmqstore::format::geometry::{GeometryInputs, GeometryOverrides};
use rmqstore::remoting::codes;
use serde_json::Value;

/// A queue of a store: topic and queue id.
type Queue = (String, i32);
/// A place in a queue: topic, queue id, queue offset.
type Place = (String, i32, i64);

/// rmqstore's inputs for `g`.
pub(crate) fn inputs(g: Geometry) -> GeometryInputs {
    GeometryInputs {
        flags: GeometryOverrides {
            commitlog_file_size: Some(g.commitlog_file_size),
            cq_file_units: Some(g.cq_file_units),
            index_slots: Some(g.index_slots as u32),
            index_entries: Some(g.index_entries as u32),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// What rmqstore says a store serves: each queue's bounds and the record (its commitlog
/// position and bytes) at each queue offset in them.
pub(crate) struct Served {
    pub(crate) queues: BTreeMap<Queue, (i64, i64)>,
    pub(crate) records: BTreeMap<Place, (u64, Vec<u8>)>,
}

pub(crate) fn served(root: &Path, g: Geometry) -> Served {
    let store = Store::open(root, &inputs(g)).unwrap();
    let opts = EngineOptions::for_store(&store);
    let engine = Engine::open_read_only(store, None, Arc::new(SystemClock), opts).unwrap();
    let store = Store::open(root, &inputs(g)).unwrap();
    let reader = Reader::new(&store);
    let mut out = Served {
        queues: BTreeMap::new(),
        records: BTreeMap::new(),
    };
    for (topic, q) in engine.queue_keys() {
        let (min, max) = engine.queue_bounds(&topic, q);
        out.queues.insert((topic.clone(), q), (min, max));
        for o in min..max {
            let Some(unit) = engine.unit_at(&topic, q, o) else {
                continue;
            };
            if let Ok(Some(l)) = reader.message_at(unit.offset as u64) {
                let m = &l.message;
                out.records
                    .insert((topic.clone(), q, o), (m.position, m.raw.to_vec()));
            }
        }
    }
    out
}

/// A copy of `root` for the Java store to change (its recovery truncates and dispatches).
pub(crate) fn copy_of(root: &Path, abort: bool) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let copy = t.path().join("store");
    copy_tree(root, &copy);
    if abort {
        std::fs::write(copy.join("abort"), b"").unwrap();
    }
    (t, copy)
}

/// The Java store of release `v` opens `root` (a copy, after a clean stop and with an `abort`
/// file) and serves what rmqstore reads there: the same queue bounds, the same message at each
/// offset, field by field, no exception. Returns the answer of the clean load.
pub(crate) fn assert_java_serves(root: &Path, v: JavaVersion, g: Geometry, ctx: &str) -> JavaStore {
    let ours = served(root, g);
    assert!(!ours.records.is_empty(), "{ctx}: nothing in service");
    let mut clean = None;
    for abort in [false, true] {
        let ctx = format!("{ctx} ({})", if abort { "abort" } else { "clean" });
        let (_t, copy) = copy_of(root, abort);
        let java = JavaStore::load(&copy, v, g);
        assert_eq!(
            java.load["ok"], true,
            "{ctx}: load() failed: {:?}",
            java.errors
        );
        assert!(java.errors.is_empty(), "{ctx}: {:?}", java.errors);
        assert_eq!(java.abnormal(), abort, "{ctx}");
        assert_same_service(&ours, &java, &ctx);
        if !abort {
            clean = Some(java);
        }
    }
    clean.unwrap()
}

/// `java` serves `ours`: bounds of every queue that has units on either side, and the message
/// at every offset.
pub(crate) fn assert_same_service(ours: &Served, java: &JavaStore, ctx: &str) {
    let with_units = |q: &(i64, i64)| q.1 > q.0;
    let our_queues: BTreeMap<&Queue, &(i64, i64)> =
        ours.queues.iter().filter(|(_, b)| with_units(b)).collect();
    let java_queues: BTreeMap<&Queue, &(i64, i64)> =
        java.queues.iter().filter(|(_, b)| with_units(b)).collect();
    assert_eq!(our_queues, java_queues, "{ctx}: queue bounds");
    for (place, (pos, raw)) in &ours.records {
        let j = java
            .messages
            .get(place)
            .unwrap_or_else(|| panic!("{ctx}: Java serves nothing at {place:?}"));
        let Ok(Record::Message(m)) = parse_record(raw, 0, *pos, true) else {
            panic!("{ctx}: {place:?} is no message")
        };
        assert_same_message(j, &m, &format!("{ctx} {place:?}"));
    }
    let extra: Vec<&Place> = java
        .messages
        .keys()
        .filter(|p| !ours.records.contains_key(*p))
        .collect();
    assert!(extra.is_empty(), "{ctx}: Java serves more: {extra:?}");
}

/// `rmqstore ARGS` succeeds (exit 0, or `ok` codes); its stdout.
fn run(args: &[&str], ok: &[i32]) -> String {
    let out = bin().args(args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || ok.contains(&code),
        "rmqstore {args:?}: exit {code}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `gen DIR ARGS` in the small geometry.
fn gen(dir: &Path, args: &[&str]) -> PathBuf {
    let root = dir.join("gen");
    let mut a = vec!["gen", root.to_str().unwrap()];
    a.extend_from_slice(args);
    a.extend_from_slice(&SMALL_GEOMETRY);
    run(&a, &[]);
    root
}

fn skip(v: JavaVersion) -> bool {
    !java::ready(v)
}

// ---------------------------------------------------------------------------------------------
// gen, rebuild, export

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn gen_stores_load_in_the_49_store() {
    if skip(JavaVersion::V4_9) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = gen(t.path(), &["--messages", "1500"]);
    assert_java_serves(&root, JavaVersion::V4_9, Geometry::SMALL, "gen");
    // and at the broker's default geometry: 1 GiB commitlog files, 300,000-unit consume queue
    // files and full-size index files (all sparse)
    let big = t.path().join("big");
    run(&["gen", big.to_str().unwrap(), "--messages", "600"], &[]);
    assert_java_serves(
        &big,
        JavaVersion::V4_9,
        Geometry::BROKER_DEFAULT,
        "gen, default",
    );
}

#[test]
#[cfg_attr(not(rmqstore_java_5), ignore = "needs the Java 5.x peer kit")]
fn gen_stores_of_the_5x_format_load_in_the_5x_store() {
    if skip(JavaVersion::V5) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = gen(t.path(), &["--messages", "1500", "--message-version", "2"]);
    assert_java_serves(&root, JavaVersion::V5, Geometry::SMALL, "gen v2");
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn dledger_stores_gen_writes_load_in_dledger_mode() {
    if skip(JavaVersion::V4_9) {
        return;
    }
    for converted in [false, true] {
        let t = tempfile::tempdir().unwrap();
        let mut args = vec!["--messages", "1200", "--dledger"];
        if converted {
            args.push("--converted");
        }
        let root = gen(t.path(), &args);
        let ctx = if converted { "converted" } else { "dledger" };
        let ours = served(&root, Geometry::SMALL);
        for abort in [false, true] {
            let (_c, copy) = copy_of(&root, abort);
            let java = JavaStore::open(
                &copy,
                JavaVersion::V4_9,
                &java::LoadOptions {
                    geometry: Some(Geometry::SMALL),
                    messages: true,
                    dledger: Some(("broker-a".into(), "n0".into())),
                    ..Default::default()
                },
            );
            assert_eq!(java.load["ok"], true, "{ctx}: {:?}", java.errors);
            assert!(java.errors.is_empty(), "{ctx}: {:?}", java.errors);
            assert_same_service(&ours, &java, &format!("{ctx} abort={abort}"));
        }
    }
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn rebuilt_queues_and_index_load_and_answer_key_lookups() {
    if skip(JavaVersion::V4_9) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    copy_tree(&fixture("store-4.9"), &src);
    std::fs::remove_dir_all(src.join("consumequeue")).unwrap();
    std::fs::remove_dir_all(src.join("index")).unwrap();
    // `--out` writes the queues and the index beside the store: put them in a copy of it
    // (the geometry given: with the queues gone nothing shows their file size)
    let built = t.path().join("rebuilt");
    let mut args = vec![
        "rebuild",
        src.to_str().unwrap(),
        "--out",
        built.to_str().unwrap(),
    ];
    args.extend_from_slice(&SMALL_GEOMETRY);
    run(&args, &[]);
    let out = t.path().join("assembled");
    copy_tree(&src, &out);
    for part in ["consumequeue", "index"] {
        std::fs::rename(built.join(part), out.join(part)).unwrap();
    }
    let java = assert_java_serves(&out, JavaVersion::V4_9, Geometry::SMALL, "rebuild --out");
    // `--in-place` switches them into the store itself
    let mut args = vec!["rebuild", src.to_str().unwrap(), "--in-place"];
    args.extend_from_slice(&SMALL_GEOMETRY);
    run(&args, &[]);
    assert_java_serves(
        &src,
        JavaVersion::V4_9,
        Geometry::SMALL,
        "rebuild --in-place",
    );
    // what the fixture served, the rebuilt store serves
    let before = served(&fixture("store-4.9"), Geometry::SMALL);
    assert_eq!(before.queues, served(&out, Geometry::SMALL).queues);
    // the Java store finds keys through the rebuilt index as rmqstore does
    let (_t, copy) = copy_of(&out, false);
    let keys: Vec<(String, String)> = ["OrderTopic", "PaymentTopic"]
        .iter()
        .flat_map(|t| {
            java.messages
                .iter()
                .filter(|((topic, _, _), m)| topic == t && m["keys"].is_string())
                .take(5)
                .map(|(_, m)| {
                    let k = m["keys"].as_str().unwrap().split(' ').next().unwrap();
                    (t.to_string(), k.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(keys.len() >= 6, "{keys:?}");
    let looked = JavaStore::open(
        &copy,
        JavaVersion::V4_9,
        &java::LoadOptions {
            geometry: Some(Geometry::SMALL),
            keys: keys.clone(),
            ..Default::default()
        },
    );
    for (q, (topic, key)) in looked.queries.iter().zip(&keys) {
        let ours = run(
            &[
                "query",
                out.to_str().unwrap(),
                "--topic",
                topic,
                "--key",
                key,
                "--json",
            ],
            &[],
        );
        let mut our_offsets: BTreeSet<i64> = BTreeSet::new();
        for l in ours.lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            if let Some(o) = v["commitlog_offset"].as_i64() {
                our_offsets.insert(o);
            }
        }
        let theirs: BTreeSet<i64> = q["physicalOffsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_i64().unwrap())
            .collect();
        assert_eq!(our_offsets, theirs, "{topic} {key}");
    }
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn an_export_store_loads() {
    if skip(JavaVersion::V4_9) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("export");
    run(
        &[
            "export",
            fixture("store-4.9").to_str().unwrap(),
            "--group",
            "OrderGroup",
            "--include",
            "retry,delayed,dlq,transactions",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    // an export store has its source's geometry
    assert_java_serves(&out, JavaVersion::V4_9, Geometry::SMALL, "export");
}

// ---------------------------------------------------------------------------------------------
// repair

/// A damage of the repair tests (tests/all/repair.rs), by name.
type Damage = (&'static str, fn(&Path));

fn damages() -> Vec<Damage> {
    use crate::repair::{commitlog_file, patch, record_pos};
    vec![
        ("flipped body bit", |s| {
            let f = commitlog_file(s, 3);
            let p = record_pos(&f, 5);
            patch(&f, p + 100, |b| b[0] ^= 0x10);
        }),
        ("flipped size field", |s| {
            let f = commitlog_file(s, 1);
            let p = record_pos(&f, 7);
            patch(&f, p + 2, |b| b[0] ^= 0x01);
        }),
        ("torn last record", |s| {
            let f = commitlog_file(s, 8);
            let p = record_pos(&f, 12);
            let b = std::fs::read(&f).unwrap();
            std::fs::write(&f, &b[..p + 40]).unwrap();
        }),
        ("zeroed page", |s| {
            let f = commitlog_file(s, 2);
            patch(&f, 40960, |b| b[..4096].fill(0));
        }),
        ("missing commitlog file", |s| {
            std::fs::remove_file(commitlog_file(s, 4)).unwrap();
        }),
        ("deleted cq file", |s| {
            std::fs::remove_file(s.join("consumequeue/OrderTopic/1/00000000000000002000")).unwrap();
        }),
        ("truncated cq file", |s| {
            let f = s.join("consumequeue/AuditTopic/2/00000000000000000000");
            let b = std::fs::read(&f).unwrap();
            std::fs::write(&f, &b[..777]).unwrap();
        }),
        ("deleted index", |s| {
            std::fs::remove_dir_all(s.join("index")).unwrap();
        }),
        ("abort left behind", |s| {
            std::fs::write(s.join("abort"), b"").unwrap();
        }),
    ]
}

/// What left service between `before` and `after` (by the Java store's reading of `after`):
/// the places whose message is gone or another one.
fn left_service(before: &Served, after: &JavaStore) -> BTreeSet<Place> {
    before
        .records
        .iter()
        .filter(|(place, (_, raw))| {
            let Ok(Record::Message(m)) = parse_record(raw, 0, 0, true) else {
                return true;
            };
            match after.messages.get(*place) {
                None => true,
                Some(j) => {
                    j["bodySha256"].as_str() != Some(&sha256_hex(m.body))
                        || j["uniqKey"].as_str() != m.uniq_key().as_deref()
                }
            }
        })
        .map(|(p, _)| p.clone())
        .collect()
}

/// The places a repair says left service: its `lost` list (bridged) and the salvaged records.
fn named_out_of_service(summary: &Value, repair_folder: &Path) -> BTreeSet<Place> {
    let mut out = BTreeSet::new();
    for l in summary["lost"].as_array().into_iter().flatten() {
        if let (Some(t), Some(q), Some(o)) = (
            l["topic"].as_str(),
            l["queue_id"].as_i64(),
            l["queue_offset"].as_i64(),
        ) {
            out.insert((t.to_string(), q as i32, o));
        }
    }
    if let Ok(text) = std::fs::read_to_string(repair_folder.join("salvaged.jsonl")) {
        for l in text.lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            if v["queued"] != true {
                continue; // a transaction half or rollback record: never in service
            }
            if let (Some(t), Some(q), Some(o)) = (
                v["topic"].as_str(),
                v["queue_id"].as_i64(),
                v["queue_offset"].as_i64(),
            ) {
                out.insert((t.to_string(), q as i32, o));
            }
        }
    }
    out
}

/// The `--json` summary line of a repair.
fn summary_of(stdout: &str) -> Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no summary in {stdout}"))
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn repaired_stores_load_and_lose_exactly_what_repair_named() {
    if skip(JavaVersion::V4_9) {
        return;
    }
    let before = served(&fixture("store-4.9"), Geometry::SMALL);
    for (i, (name, damage)) in damages().into_iter().enumerate() {
        let t = tempfile::tempdir().unwrap();
        let store = t.path().join("store");
        copy_tree(&fixture("store-4.9"), &store);
        damage(&store);
        // half of them --out, half --in-place
        let in_place = i % 2 == 1;
        let (repaired, folder_parent) = if in_place {
            (store.clone(), store.clone())
        } else {
            (t.path().join("out"), t.path().join("out"))
        };
        let mut args = vec!["repair", store.to_str().unwrap(), "--json"];
        if in_place {
            args.push("--in-place");
        } else {
            args.extend(["--out", repaired.to_str().unwrap()]);
        }
        let summary = summary_of(&run(&args, &[1]));
        let folder = repair_folder(&folder_parent).unwrap();
        let ctx = format!("{name} ({})", if in_place { "in place" } else { "out" });
        let java = assert_java_serves(&repaired, JavaVersion::V4_9, Geometry::SMALL, &ctx);
        let lost = left_service(&before, &java);
        let named = named_out_of_service(&summary, &folder);
        eprintln!("{ctx}: {} left service, {} named", lost.len(), named.len());
        let unnamed: Vec<&Place> = lost.difference(&named).collect();
        let still_served: Vec<&Place> = named.difference(&lost).collect();
        assert!(
            unnamed.is_empty() && still_served.is_empty(),
            "{ctx}: left service unnamed: {unnamed:?}; named but still served: {still_served:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// offsets and config, loaded by the real broker

/// QUERY_CONSUMER_OFFSET (14) of one queue on the broker: the committed offset, or `None`
/// (QUERY_NOT_FOUND).
fn broker_offset(c: &dyn Cluster, group: &str, topic: &str, q: i32) -> Option<i64> {
    let q = q.to_string();
    let req = command(
        codes::QUERY_CONSUMER_OFFSET,
        &[("consumerGroup", group), ("topic", topic), ("queueId", &q)],
    );
    let r = c.call_broker(req, &[]).unwrap();
    if r.command.code != codes::SUCCESS {
        return None;
    }
    r.command
        .ext_fields
        .get("offset")
        .map(|o| o.parse().unwrap())
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): `subscriptionGroupTable`.
fn broker_groups(c: &dyn Cluster) -> Value {
    let r = c
        .call_broker(command(codes::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, &[]), &[])
        .unwrap();
    assert_eq!(r.command.code, codes::SUCCESS, "{:?}", r.command);
    serde_json::from_slice::<Value>(&r.body).unwrap()["subscriptionGroupTable"].clone()
}

fn offsets_and_config_are_what_the_broker_loads(v: JavaVersion) {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    let s = store.to_str().unwrap();
    run(
        &[
            "offsets",
            s,
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "--to-offset",
            "7",
            "--apply",
        ],
        &[],
    );
    run(
        &[
            "offsets",
            s,
            "clone",
            "--from",
            "OrderGroup",
            "--to",
            "CloneGroup",
            "--apply",
        ],
        &[],
    );
    run(
        &[
            "config",
            s,
            "topics",
            "set",
            "PaymentTopic",
            "perm=4",
            "--apply",
        ],
        &[],
    );
    run(
        &[
            "config",
            s,
            "groups",
            "set",
            "OrderGroup",
            "retryMaxTimes=5",
            "--apply",
        ],
        &[],
    );
    let ours = served(&store, Geometry::SMALL);
    let c = java::JavaCluster::start(
        v,
        Options {
            store: Some(store.clone()),
            broker_conf: Geometry::SMALL.broker_conf(),
            ..Options::default()
        },
    );
    for q in 0..4 {
        let (min, max) = ours.queues[&("OrderTopic".to_string(), q)];
        let want = 7.clamp(min, max);
        assert_eq!(
            broker_offset(&c, "OrderGroup", "OrderTopic", q),
            Some(want),
            "{v:?} OrderGroup q{q}"
        );
        assert_eq!(
            broker_offset(&c, "CloneGroup", "OrderTopic", q),
            Some(want),
            "{v:?} CloneGroup q{q}"
        );
    }
    let topic = c.topic_config("PaymentTopic").unwrap();
    assert_eq!(topic["perm"], 4, "{topic}");
    let groups = broker_groups(&c);
    assert_eq!(
        groups["OrderGroup"]["retryMaxTimes"], 5,
        "{}",
        groups["OrderGroup"]
    );
    // and the broker serves the messages rmqstore reads, at their offsets (a master broker's
    // schedule service also delivers the delayed messages due since the store's last write,
    // appended after them)
    let pulled: BTreeMap<(i32, i64), _> = c
        .pull_all("OrderTopic")
        .into_iter()
        .map(|m| ((m.queue_id, m.queue_offset), m))
        .collect();
    for ((topic, q, o), (pos, raw)) in &ours.records {
        if topic != "OrderTopic" {
            continue;
        }
        let Ok(Record::Message(m)) = parse_record(raw, 0, *pos, true) else {
            panic!("{v:?}: {topic}:{q}:{o} is no message")
        };
        let got = pulled
            .get(&(*q, *o))
            .unwrap_or_else(|| panic!("{v:?}: the broker serves nothing at {topic}:{q}:{o}"));
        assert_eq!(got.body, m.body, "{v:?} {topic}:{q}:{o}");
        assert_eq!(
            got.property("UNIQ_KEY"),
            m.property("UNIQ_KEY"),
            "{v:?} {topic}:{q}:{o}"
        );
    }
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn offsets_and_config_written_are_what_the_49_broker_loads() {
    if !skip(JavaVersion::V4_9) {
        offsets_and_config_are_what_the_broker_loads(JavaVersion::V4_9);
    }
}

#[test]
#[cfg_attr(not(rmqstore_java_5), ignore = "needs the Java 5.x peer kit")]
fn offsets_and_config_written_are_what_the_5x_broker_loads() {
    if !skip(JavaVersion::V5) {
        offsets_and_config_are_what_the_broker_loads(JavaVersion::V5);
    }
}
