//! The Java peers are the real thing, and rmqstore agrees with them on stores the brokers wrote.
//!
//! - The peer kit's Java store (RocketMQ 4.9.7's and 5.5.0's `DefaultMessageStore`) answers on
//!   the oracle stores what the oracle writers' own Java store (4.9.8, 5.3.3) recorded: load,
//!   commitlog bounds, every queue's bounds, index lookups; and rmqstore serves what it serves,
//!   message by message.
//! - The kit's Java clients drain a real broker in every mode (push, orderly, lite pull, and on
//!   5.x POP and the proxy's gRPC), and mqadmin sees the cluster.
//! - Live oracles at the broker's default geometry (1 GiB commitlog files): a real broker fed
//!   by the real producer, stopped cleanly or killed with SIGKILL in the middle of the writes;
//!   what rmqstore reads and predicts of the store is what the Java store then answers, and every
//!   send the broker acknowledged is there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::broker_loads::{assert_java_serves, assert_same_service, copy_of, served};
use crate::common::cluster::{Cluster, Options};
use crate::common::java::{self, Consume, ConsumeMode, Geometry, JavaStore, JavaVersion};
use crate::common::*;
use serde_json::Value;

/// The oracle stores, the release whose Java store reads them, and their answers file.
const ORACLES: [(&str, JavaVersion, &str); 5] = [
    ("basic-4.9", JavaVersion::V4_9, "queries.json"),
    (
        "crashed-4.9",
        JavaVersion::V4_9,
        "queries-after-java-recovery.json",
    ),
    ("dledger-4.9", JavaVersion::V4_9, "queries.json"),
    ("basic-5.x", JavaVersion::V5, "queries.json"),
    ("timer-5.x", JavaVersion::V5, "queries.json"),
];

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// What the kit's Java store is told to open an oracle store: its geometry, its DLedger
/// member, and `keys` to look up.
fn oracle_options(dir: &Path, keys: Vec<(String, String)>) -> java::LoadOptions {
    let g = read_json(&dir.join("geometry.json"));
    let dledger = (g["dledger"] == true).then(|| {
        (
            g["dledger_group"].as_str().unwrap().to_string(),
            g["dledger_self_id"].as_str().unwrap().to_string(),
        )
    });
    java::LoadOptions {
        geometry: Some(Geometry::of_oracle(dir)),
        messages: true,
        keys,
        dledger,
        // the writers asked for 32 at most
        query_max: Some(32),
        shutdown: false,
    }
}

/// The kit's Java store against one oracle's recorded answers.
fn assert_kit_answers_as_recorded(name: &str, v: JavaVersion, answers: &str) {
    let Some(dir) = oracle(name) else { return };
    let want = read_json(&dir.join(answers));
    let keys: Vec<(String, String)> = want["queryMessage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["topic"].as_str().unwrap().to_string(),
                q["key"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let (_t, copy) = copy_of(&dir.join("store"), false);
    let java = JavaStore::open(&copy, v, &oracle_options(&dir, keys.clone()));
    assert_eq!(java.load["ok"], want["loadOk"], "{name}: {:?}", java.errors);
    let errors: Vec<&Value> = java.errors.iter().filter(|e| e["step"] != "get").collect();
    assert!(errors.is_empty(), "{name}: {errors:?}");
    for k in ["minPhyOffset", "maxPhyOffset"] {
        assert_eq!(java.store[k], want[k], "{name}: {k}");
    }
    let recorded: BTreeMap<(String, i32), (i64, i64)> = want["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                (
                    q["topic"].as_str().unwrap().to_string(),
                    q["queueId"].as_i64().unwrap() as i32,
                ),
                (
                    q["minOffsetInQueue"].as_i64().unwrap(),
                    q["maxOffsetInQueue"].as_i64().unwrap(),
                ),
            )
        })
        .collect();
    for (queue, bounds) in &recorded {
        assert_eq!(java.queues.get(queue), Some(bounds), "{name}: {queue:?}");
    }
    assert_eq!(java.queries.len(), keys.len(), "{name}: index lookups");
    for (got, rec) in java
        .queries
        .iter()
        .zip(want["queryMessage"].as_array().unwrap())
    {
        let set = |v: &Value| -> BTreeSet<i64> {
            v["physicalOffsets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_i64().unwrap())
                .collect()
        };
        assert_eq!(
            set(got),
            set(rec),
            "{name}: {} {}",
            rec["topic"],
            rec["key"]
        );
    }
}

#[test]
#[cfg_attr(
    not(all(rmqstore_java_4_9, rmqstore_java_5, rmqstore_oracle)),
    ignore = "needs the Java 4.9 and 5.x peer kits and ../shared/oracle"
)]
fn the_kits_java_store_answers_on_the_oracle_stores_as_their_writers_recorded() {
    for (name, v, answers) in ORACLES {
        if java::ready(v) {
            assert_kit_answers_as_recorded(name, v, answers);
        }
    }
}

#[test]
#[cfg_attr(
    not(all(rmqstore_java_4_9, rmqstore_java_5, rmqstore_oracle)),
    ignore = "needs the Java 4.9 and 5.x peer kits and ../shared/oracle"
)]
fn rmqstore_serves_on_the_oracle_stores_what_the_java_store_serves() {
    for (name, v, _) in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        if !java::ready(v) || name == "crashed-4.9" {
            continue;
        }
        let g = Geometry::of_oracle(&dir);
        let (_t, copy) = copy_of(&dir.join("store"), false);
        let java = JavaStore::open(&copy, v, &oracle_options(&dir, Vec::new()));
        assert_same_service(&served(&dir.join("store"), g), &java, name);
    }
}

/// The broker's end of the commitlog after its next start, as `verify --explain-recovery`
/// predicts it.
fn predicted_end(store: &Path, g: Geometry) -> i64 {
    let recovery = g.explained_recovery(store);
    recovery["cut"]["commitlog_offset"]
        .as_i64()
        .unwrap_or_else(|| panic!("no cut: {recovery}"))
}

#[test]
#[cfg_attr(
    not(all(rmqstore_java_4_9, rmqstore_oracle)),
    ignore = "needs the Java 4.9 peer kit and ../shared/oracle"
)]
fn after_a_crash_rmqstore_predicts_the_java_recovery_and_reads_its_result() {
    let Some(dir) = oracle("crashed-4.9") else {
        return;
    };
    if !java::ready(JavaVersion::V4_9) {
        return;
    }
    let g = Geometry::of_oracle(&dir);
    let (_t, copy) = copy_of(&dir.join("store"), false);
    let java = JavaStore::open(&copy, JavaVersion::V4_9, &oracle_options(&dir, Vec::new()));
    assert_eq!(
        java.store["maxPhyOffset"],
        predicted_end(&dir.join("store"), g)
    );
    // the files as the Java recovery left them (consume queues dispatched again) read as the
    // Java store reads them
    std::fs::remove_file(copy.join("abort")).ok();
    assert_java_serves(&copy, JavaVersion::V4_9, g, "crashed-4.9 after recovery");
}

// ---------------------------------------------------------------------------------------------
// the Java clients and tools on a real broker

/// Every mode of the kit's consumer drains what the kit's producer sent: each message once.
fn clients_drain_a_real_broker(v: JavaVersion) {
    let c = java::JavaCluster::start(v, Options::default());
    let ns = c.namesrv_addr();
    let topic = "PeerTopic";
    let mut p = java::Produce::new(&ns, topic, 300);
    p.tags = &["TagA", "TagB"];
    let sent = java::produce(v, &p);
    let ids: BTreeSet<String> = sent
        .iter()
        .map(|l| {
            assert_eq!(l["type"], "sent", "{l}");
            l["msgId"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 300);
    let mut modes = vec![
        ConsumeMode::Push,
        ConsumeMode::Orderly,
        ConsumeMode::LitePull,
    ];
    if v == JavaVersion::V5 {
        modes.push(ConsumeMode::Pop);
    }
    for mode in modes {
        let group = format!("PeerGroup{mode:?}");
        let got = java::consume(
            v,
            &Consume {
                mode,
                expect: ids.len(),
                ..Consume::all(&ns, &group, topic)
            },
        );
        let got_ids: Vec<String> = got
            .iter()
            .map(|m| m["msgId"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(got_ids.len(), ids.len(), "{v:?} {mode:?}: deliveries");
        assert_eq!(
            got_ids.into_iter().collect::<BTreeSet<_>>(),
            ids,
            "{v:?} {mode:?}"
        );
    }
    // the tagged half only
    let tagged = java::consume(
        v,
        &Consume {
            tags: Some("TagB"),
            expect: 150,
            ..Consume::all(&ns, "PeerGroupTagB", topic)
        },
    );
    assert_eq!(tagged.len(), 150, "{v:?}");
    assert!(tagged.iter().all(|m| m["tags"] == "TagB"), "{v:?}");
    let clusters = java::mqadmin(v, &["clusterList", "-n", &ns]);
    assert!(
        clusters.contains("DefaultCluster") && clusters.contains("broker-a"),
        "{clusters}"
    );
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn the_49_clients_drain_a_real_49_broker_in_every_mode() {
    if java::ready(JavaVersion::V4_9) {
        clients_drain_a_real_broker(JavaVersion::V4_9);
    }
}

#[test]
#[cfg_attr(not(rmqstore_java_5), ignore = "needs the Java 5.x peer kit")]
fn the_5x_clients_drain_a_real_5x_broker_in_every_mode_and_over_grpc() {
    if !java::ready(JavaVersion::V5) {
        return;
    }
    clients_drain_a_real_broker(JavaVersion::V5);
    let c = java::JavaCluster::start(JavaVersion::V5, Options::default());
    let ns = c.namesrv_addr();
    let grpc = c.proxy_grpc_addr().unwrap();
    // the proxy takes gRPC sends to a topic that exists and receives for a group that exists
    java::mqadmin(
        JavaVersion::V5,
        &[
            "updateTopic",
            "-n",
            &ns,
            "-c",
            "DefaultCluster",
            "-t",
            "GrpcTopic",
        ],
    );
    java::mqadmin(
        JavaVersion::V5,
        &[
            "updateSubGroup",
            "-n",
            &ns,
            "-c",
            "DefaultCluster",
            "-g",
            "GrpcGroup",
        ],
    );
    let sent = java::grpc_produce(&grpc, "GrpcTopic", 100, "TagG");
    let ids: BTreeSet<String> = sent
        .iter()
        .map(|l| {
            assert_eq!(l["type"], "sent", "{l}");
            l["messageId"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 100);
    let got = java::grpc_consume(&grpc, "GrpcGroup", "GrpcTopic", 100);
    let got_ids: BTreeSet<String> = got
        .iter()
        .map(|m| m["messageId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got_ids, ids);
    assert!(got.iter().all(|m| m["tag"] == "TagG"));
}

// ---------------------------------------------------------------------------------------------
// live oracles at the broker's default geometry

/// The acknowledged sends of a producer's lines: (queue id, queue offset) → message id.
fn acknowledged(lines: &[Value]) -> BTreeMap<(i32, i64), String> {
    lines
        .iter()
        .filter(|l| l["type"] == "sent" && l["status"] == "SEND_OK")
        .map(|l| {
            (
                (
                    l["queueId"].as_i64().unwrap() as i32,
                    l["queueOffset"].as_i64().unwrap(),
                ),
                l["msgId"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every acknowledged send is served by the Java store at its queue offset.
fn assert_all_served(
    java: &JavaStore,
    topic: &str,
    acked: &BTreeMap<(i32, i64), String>,
    ctx: &str,
) {
    for ((q, o), id) in acked {
        let m = java
            .messages
            .get(&(topic.to_string(), *q, *o))
            .unwrap_or_else(|| panic!("{ctx}: {topic}:{q}:{o} ({id}) acknowledged, not served"));
        assert_eq!(
            m["uniqKey"].as_str(),
            Some(id.as_str()),
            "{ctx}: {topic}:{q}:{o}"
        );
    }
}

/// A copy of the broker's store, as it is on disk now.
fn copy_store(c: &dyn Cluster) -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let copy = t.path().join("store");
    copy_tree(&c.store_dir(), &copy);
    (t, copy)
}

/// Waits until the broker's queues of `topic` hold `n` units in all (at most a minute).
fn wait_until_written(c: &dyn Cluster, topic: &str, n: i64) {
    let queues = c.topic_config(topic).unwrap()["readQueueNums"]
        .as_i64()
        .unwrap() as i32;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let written: i64 = (0..queues).map(|q| c.max_offset(topic, q)).sum();
        if written >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}: {written} of {n} written in a minute"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn live_stores_at_the_default_geometry(v: JavaVersion) {
    let g = Geometry::BROKER_DEFAULT;
    let topic = "LiveTopic";
    // a clean stop: rmqstore reads exactly what the Java store serves
    let mut c = java::JavaCluster::start(v, Options::default());
    let ns = c.namesrv_addr();
    let mut p = java::Produce::new(&ns, topic, 2000);
    p.threads = 4;
    p.tags = &["TagA", "TagB", "TagC"];
    let acked = acknowledged(&java::produce(v, &p));
    assert_eq!(acked.len(), 2000, "{v:?}");
    c.stop_broker();
    let (_t, clean) = copy_store(&c);
    let java = assert_java_serves(&clean, v, g, &format!("{v:?} clean stop"));
    assert_all_served(&java, topic, &acked, &format!("{v:?} clean stop"));

    // SIGKILL while the producer writes: rmqstore predicts where the Java recovery ends, reads
    // what it leaves, and every acknowledged send survives it
    c.restart_broker();
    p.start = 2000;
    p.count = 1_000_000;
    p.keep_going = true;
    let producing = java::Producing::start(v, &p);
    wait_until_written(&c, topic, 2000 + 200);
    c.kill_broker();
    let lines = producing.kill();
    let mut acked_all = acked;
    acked_all.extend(acknowledged(&lines));
    let (_k, killed) = copy_store(&c);
    assert!(
        killed.join("abort").exists(),
        "{v:?}: no abort file after a kill"
    );
    let end = predicted_end(&killed, g);
    let (_r, recovered) = copy_of(&killed, false);
    let java = JavaStore::load(&recovered, v, g);
    assert_eq!(java.load["ok"], true, "{v:?}: {:?}", java.errors);
    assert!(java.abnormal(), "{v:?}");
    assert_eq!(
        java.store["maxPhyOffset"], end,
        "{v:?}: the end after recovery"
    );
    assert_all_served(&java, topic, &acked_all, &format!("{v:?} after a kill"));
    std::fs::remove_file(recovered.join("abort")).ok();
    assert_java_serves(&recovered, v, g, &format!("{v:?} recovered after a kill"));
    eprintln!(
        "{v:?}: {} acknowledged, {} served after the kill",
        acked_all.len(),
        java.messages.keys().filter(|(t, _, _)| t == topic).count()
    );
}

#[test]
#[cfg_attr(not(rmqstore_java_4_9), ignore = "needs the Java 4.9 peer kit")]
fn a_real_49_broker_stopped_or_killed_leaves_what_rmqstore_reads_and_predicts() {
    if java::ready(JavaVersion::V4_9) {
        live_stores_at_the_default_geometry(JavaVersion::V4_9);
    }
}

#[test]
#[cfg_attr(not(rmqstore_java_5), ignore = "needs the Java 5.x peer kit")]
fn a_real_5x_broker_stopped_or_killed_leaves_what_rmqstore_reads_and_predicts() {
    if java::ready(JavaVersion::V5) {
        live_stores_at_the_default_geometry(JavaVersion::V5);
    }
}
