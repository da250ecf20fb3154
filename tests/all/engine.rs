//! The engine against the Java broker's own answers (`../shared/oracle`: pulls, send-backs,
//! schedule deliveries, pending delayed messages and transactions) and against ENGINE.md with a
//! fake clock: the 16-step retry schedule and the DLQ, every delay level, filters, offsets in
//! both message models, orderly locks, and an overlay that is itself a store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use assert_cmd::Command;
use rmqstore::engine::broker::clock::FakeClock;
use rmqstore::engine::broker::offsets::{LocalOffsetStore, ReadOffsetType};
use rmqstore::engine::broker::orderly::{OrderlyOutcome, OrderlyQueue, OrderlyStatus};
use rmqstore::engine::broker::pull::{
    BrokerRole, GetMessageStatus, MessageFilter, PullRequest, PullResult,
};
use rmqstore::engine::broker::rebalance::{allocate, AllocateStrategy, MessageQueue};
use rmqstore::engine::broker::retry::{retry_schedule, SendBackOutcome};
use rmqstore::engine::broker::schedule::DeliveryOutcome;
use rmqstore::engine::broker::timer::TimerRefused;
use rmqstore::engine::broker::transaction::HalfState;
use rmqstore::engine::broker::{Engine, EngineError, EngineOptions};
use rmqstore::engine::filter::sql::SqlFilter;
use rmqstore::engine::filter::TagFilter;
use rmqstore::engine::store::dispatch::SCHEDULE_TOPIC;
use rmqstore::engine::store::dispatch::{dlq_topic, retry_topic};
use rmqstore::engine::store::version::BrokerVersion;
use rmqstore::engine::Store;
use rmqstore::format::commitlog::{encode_properties, Host, Message, MessageVersion};
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::format::timer::Slot;
use serde_json::Value;

/// A time after every fixture's records (2030).
const T0: i64 = 1_900_000_000_000;

fn open_store(root: &Path) -> Store {
    Store::open(root, &GeometryInputs::default()).unwrap()
}

fn engine_at(root: &Path, overlay: Option<&Path>, clock: &FakeClock, role: BrokerRole) -> Engine {
    let store = open_store(root);
    let mut opts = EngineOptions::for_store(&store);
    opts.role = role;
    Engine::open(store, overlay, Arc::new(clock.clone()), opts).unwrap()
}

fn message(topic: &str, queue_id: i32, props: &[(&str, &str)], body: &str) -> Message {
    Message {
        topic: topic.into(),
        queue_id,
        flag: 0,
        queue_offset: 0,
        physical_offset: 0,
        sys_flag: 0,
        born_timestamp: T0,
        born_host: Host::v4([10, 0, 0, 1], 50000),
        store_timestamp: 0,
        store_host: Host::v4([192, 168, 0, 10], 10911),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: body.as_bytes().to_vec(),
        properties: encode_properties(props, false),
        version: MessageVersion::V1,
    }
}

fn pull(e: &Engine, topic: &str, queue_id: i32, offset: i64, max: i32) -> PullResult {
    e.pull(&PullRequest {
        topic,
        queue_id,
        offset,
        max_msgs: max,
        filter: None,
    })
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rmqstore-engine-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn props_of(m: &Message) -> BTreeMap<String, String> {
    m.properties().to_map()
}

fn json_props(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Oracle: pulls

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn pulls_return_what_the_java_store_returned() {
    for name in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        let q = java_queries(&dir);
        let cases = q["getMessage"].as_array().unwrap();
        for role in [BrokerRole::Slave, BrokerRole::Master] {
            let clock = FakeClock::new(T0);
            let store = open_store(&dir.join("store"));
            let mut opts = EngineOptions::for_store(&store);
            opts.role = role;
            let e = Engine::open_read_only(store, None, Arc::new(clock), opts).unwrap();
            assert_eq!(
                e.commitlog_max(),
                q["maxPhyOffset"].as_i64().unwrap(),
                "{name}"
            );
            // every queue's bounds
            for qb in q["queues"].as_array().unwrap() {
                let b = e.queue_bounds(
                    qb["topic"].as_str().unwrap(),
                    qb["queueId"].as_i64().unwrap() as i32,
                );
                assert_eq!(
                    b,
                    (
                        qb["minOffsetInQueue"].as_i64().unwrap(),
                        qb["maxOffsetInQueue"].as_i64().unwrap()
                    ),
                    "{name}: bounds of {qb}"
                );
            }
            let (mut same, mut master_badly) = (0, 0);
            for c in cases {
                let offset = c["offset"].as_i64().unwrap();
                let r = pull(
                    &e,
                    c["topic"].as_str().unwrap(),
                    c["queueId"].as_i64().unwrap() as i32,
                    offset,
                    c["maxMsgNums"].as_i64().unwrap() as i32,
                );
                let phys: Vec<i64> = r.messages.iter().map(|m| m.commitlog_offset).collect();
                let want: Vec<i64> = c["physicalOffsets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_i64().unwrap())
                    .collect();
                let ctx = format!("{name} {role:?} {c}");
                assert_eq!(r.status.as_str(), c["status"].as_str().unwrap(), "{ctx}");
                assert_eq!(r.min_offset, c["minOffset"].as_i64().unwrap(), "{ctx}");
                assert_eq!(r.max_offset, c["maxOffset"].as_i64().unwrap(), "{ctx}");
                assert_eq!(phys, want, "{ctx}");
                assert_eq!(
                    r.buffer_total_size as i64,
                    c["bufferTotalSize"].as_i64().unwrap(),
                    "{ctx}"
                );
                let java_next = c["nextBeginOffset"].as_i64().unwrap();
                if role == BrokerRole::Master && r.status == GetMessageStatus::OffsetOverflowBadly {
                    // a master corrects the consumer to the max offset (ENGINE.md 1.2)
                    assert_eq!(java_next, offset, "{ctx}");
                    assert_eq!(r.next_begin_offset, r.max_offset, "{ctx}");
                    master_badly += 1;
                } else {
                    assert_eq!(r.next_begin_offset, java_next, "{ctx}");
                    same += 1;
                }
            }
            eprintln!(
                "{name} as {role:?}: {same} of {} Java getMessage answers identical, \
                 {master_badly} OFFSET_OVERFLOW_BADLY answers corrected to maxOffset",
                cases.len()
            );
            if role == BrokerRole::Slave {
                assert_eq!(same, cases.len(), "{name}");
            }
        }
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn replay_rebuilds_missing_and_stale_consume_queues() {
    let Some(dir) = oracle("basic-4.9") else {
        return;
    };
    let copy = temp_dir("replay");
    copy_tree(&dir.join("store"), &copy);
    // TopicA's consume queues are gone, TopicB queue 0 lost its second file
    std::fs::remove_dir_all(copy.join("consumequeue/TopicA")).unwrap();
    let b0 = copy.join("consumequeue/TopicB/0");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&b0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    std::fs::remove_file(files.last().unwrap()).unwrap();
    let q = java_queries(&dir);
    let clock = FakeClock::new(T0);
    let e = engine_at(&copy, None, &clock, BrokerRole::Slave);
    assert!(e.replay_summary().units > 0);
    for c in q["getMessage"].as_array().unwrap() {
        let r = pull(
            &e,
            c["topic"].as_str().unwrap(),
            c["queueId"].as_i64().unwrap() as i32,
            c["offset"].as_i64().unwrap(),
            c["maxMsgNums"].as_i64().unwrap() as i32,
        );
        let phys: Vec<Value> = r
            .messages
            .iter()
            .map(|m| m.commitlog_offset.into())
            .collect();
        assert_eq!(r.status.as_str(), c["status"], "{c}");
        assert_eq!(r.next_begin_offset, c["nextBeginOffset"], "{c}");
        assert_eq!(r.max_offset, c["maxOffset"], "{c}");
        assert_eq!(&phys, c["physicalOffsets"].as_array().unwrap(), "{c}");
    }
    drop(e);
    let _ = std::fs::remove_dir_all(&copy);
}

fn cli_summary(args: &[&str]) -> (Vec<Value>, Value) {
    let out = Command::cargo_bin("rmqstore")
        .unwrap()
        .env_clear()
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the messages on stdout; the queue's `pull` line and the summary on stderr
    let msgs: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let side: Vec<Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (last, pulls) = side.split_last().unwrap();
    assert_eq!(last["type"], "summary");
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0]["type"], "pull");
    (msgs, pulls[0].clone())
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn cli_pull_on_oracle_stores() {
    for name in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        let store = dir.join("store");
        let store = store.to_str().unwrap();
        let q = java_queries(&dir);
        for c in q["getMessage"].as_array().unwrap().iter().take(8) {
            let (topic, queue, offset, max) = (
                c["topic"].as_str().unwrap(),
                c["queueId"].to_string(),
                c["offset"].to_string(),
                c["maxMsgNums"].to_string(),
            );
            let args = [
                "pull",
                store,
                "--group",
                "OracleGroup",
                "--topic",
                topic,
                "--queue",
                &queue,
                "--offset",
                &offset,
                "--max",
                &max,
                "--json",
                "--role",
                "slave",
            ];
            let (msgs, s) = cli_summary(&args);
            assert_eq!(s["status"], c["status"], "{name} {c}");
            assert_eq!(s["next_begin_offset"], c["nextBeginOffset"], "{name} {c}");
            assert_eq!(s["min_offset"], c["minOffset"], "{name} {c}");
            assert_eq!(s["max_offset"], c["maxOffset"], "{name} {c}");
            let phys: Vec<&Value> = msgs.iter().map(|m| &m["commitlog_offset"]).collect();
            let want: Vec<&Value> = c["physicalOffsets"].as_array().unwrap().iter().collect();
            assert_eq!(phys, want, "{name} {c}");
            for m in &msgs {
                assert_eq!(m["topic"], c["topic"]);
                assert!(m.get("msg_id").is_some() && m.get("body_encoding").is_some());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Oracle: what the broker writes

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn send_backs_write_what_the_java_broker_wrote() {
    let Some(dir) = oracle("basic-4.9") else {
        return;
    };
    let clock = FakeClock::new(T0);
    let mut e = engine_at(&dir.join("store"), None, &clock, BrokerRole::Master);
    let mut checked = 0;
    for line in json_lines(&manifest(&dir)) {
        let kind = line["kind"].as_str().unwrap_or_default();
        if kind != "retry" && kind != "dlq" {
            continue;
        }
        let group = line["group"].as_str().unwrap();
        let src = line["sourceCommitLogOffset"].as_i64().unwrap();
        let source_rc = e.message_at(src).unwrap().reconsume_times;
        let (level, max) = match (kind, group) {
            ("dlq", "GroupB") => (-1, None),
            ("dlq", _) => (0, Some(source_rc)),
            _ => (0, None),
        };
        let put = match e.send_back(group, src, level, max).unwrap() {
            SendBackOutcome::Retry { put, .. } => {
                assert_eq!(kind, "retry", "{line}");
                put
            }
            SendBackOutcome::DeadLetter { put } => {
                assert_eq!(kind, "dlq", "{line}");
                put
            }
            SendBackOutcome::Acknowledged => panic!("{line}"),
        };
        let ours = e.message_at(put.commitlog_offset as i64).unwrap();
        let ctx = format!("seq {}", line["seq"]);
        assert_eq!(ours.topic, line["storedTopic"].as_str().unwrap(), "{ctx}");
        assert_eq!(
            ours.queue_id as i64,
            line["storedQueueId"].as_i64().unwrap(),
            "{ctx}"
        );
        assert_eq!(
            props_of(&ours),
            json_props(&line["storedProperties"]),
            "{ctx}"
        );
        assert_eq!(
            ours.sys_flag as i64,
            line["storedSysFlag"].as_i64().unwrap(),
            "{ctx}"
        );
        assert_eq!(
            ours.reconsume_times as i64,
            line["reconsumeTimes"].as_i64().unwrap(),
            "{ctx}"
        );
        assert_eq!(
            ours.born_timestamp,
            line["bornTimestamp"].as_i64().unwrap(),
            "{ctx}"
        );
        assert_eq!(
            java_host(&ours.born_host),
            line["bornHost"].as_str().unwrap(),
            "{ctx}"
        );
        assert_eq!(
            java_host(&ours.store_host),
            line["storeHost"].as_str().unwrap(),
            "{ctx}"
        );
        assert_eq!(
            sha256_hex(&ours.body),
            line["bodySha256"].as_str().unwrap(),
            "{ctx}"
        );
        checked += 1;
    }
    assert_eq!(checked, 52);
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn schedule_deliveries_match_the_java_schedule_service() {
    let Some(dir) = oracle("basic-4.9") else {
        return;
    };
    // The Java service delivered levels 1 to 3 ({1:40,2:40,3:55}); deliver them again.
    let java: Vec<Value> = java_messages(&dir)
        .into_iter()
        .filter(|m| m["topic"] != SCHEDULE_TOPIC && m["properties"].get("REAL_TOPIC").is_some())
        .filter(|m| m["properties"].get("DELAY").is_some())
        .collect();
    let clock = FakeClock::new(T0);
    let mut e = engine_at(&dir.join("store"), None, &clock, BrokerRole::Master);
    for level in 1..=18 {
        let (_, max) = e.queue_bounds(SCHEDULE_TOPIC, level - 1);
        e.set_delay_offset(level, if level <= 3 { 0 } else { max });
    }
    let done = e.deliver_due().unwrap();
    assert_eq!(done.len(), 40 + 40 + 55);
    for d in &done {
        let DeliveryOutcome::Delivered(put) = &d.outcome else {
            panic!("{d:?}");
        };
        let ours = e.message_at(put.commitlog_offset as i64).unwrap();
        let props = props_of(&ours);
        let hit = java.iter().any(|j| {
            j["topic"].as_str() == Some(ours.topic.as_str())
                && j["queueId"].as_i64() == Some(ours.queue_id as i64)
                && j["reconsumeTimes"].as_i64() == Some(ours.reconsume_times as i64)
                && j["bornTimestamp"].as_i64() == Some(ours.born_timestamp)
                && j["sysFlag"].as_i64() == Some(ours.sys_flag as i64)
                && j["flag"].as_i64() == Some(ours.flag as i64)
                && j["bornHost"].as_str() == Some(java_host(&ours.born_host).as_str())
                && j["storeHost"].as_str() == Some(java_host(&ours.store_host).as_str())
                && j["bodySha256"].as_str() == Some(sha256_hex(&ours.body).as_str())
                && json_props(&j["properties"]) == props
        });
        assert!(hit, "no Java delivery like ours: {ours:?}");
    }
    // progress went to the end of each level, nothing else moved
    assert_eq!(
        (e.delay_offset(1), e.delay_offset(2), e.delay_offset(3)),
        (40, 40, 55)
    );
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn pending_on_oracle_stores() {
    for name in ["basic-4.9", "basic-5.x"] {
        let Some(dir) = oracle(name) else { continue };
        let store = dir.join("store");
        let out = Command::cargo_bin("rmqstore")
            .unwrap()
            .env_clear()
            .args(["pending", store.to_str().unwrap(), "--json"])
            .args(["--now", "1796076665615"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // a line per group, delay level and transaction, then the summary: gathered by type
        let mut p = serde_json::json!({"groups": [], "delayed": [], "transactions": []});
        for l in String::from_utf8(out.stdout).unwrap().lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            let key = match v["type"].as_str().unwrap() {
                "group" => "groups",
                "delay_level" => "delayed",
                "transaction" => "transactions",
                "summary" => continue,
                t => panic!("{t}"),
            };
            p[key].as_array_mut().unwrap().push(v);
        }
        let level = |l: i64| {
            p["delayed"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["level"] == l)
                .cloned()
                .unwrap_or(Value::Null)
        };
        // levels 1-3 were delivered; 4, 5, 10 and 18 still wait
        for (l, n) in [(1, 0), (2, 0), (3, 0), (4, 6), (5, 20), (10, 20), (18, 20)] {
            assert_eq!(level(l)["pending"], n, "{name} level {l}");
        }
        assert_eq!(level(18)["due_now"], 0, "{name}: 2 h level not due yet");
        assert_eq!(level(5)["due_now"], 20, "{name}");
        let txs = p["transactions"].as_array().unwrap();
        assert_eq!(
            txs.len(),
            5,
            "{name}: 30 halves, 15 committed, 10 rolled back"
        );
        assert!(txs.iter().all(|t| t["live"]["state"] == "pending_check"));
        let group_a = p["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == "GroupA")
            .unwrap();
        assert_eq!(
            group_a["retries_waiting"].as_array().unwrap().len(),
            6,
            "{name}"
        );
        assert_eq!(group_a["dlq_messages"], 6, "{name}");
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn transactions_commit_and_rollback() {
    let Some(dir) = oracle("basic-4.9") else {
        return;
    };
    let clock = FakeClock::new(1_796_076_665_615);
    let mut e = engine_at(&dir.join("store"), None, &clock, BrokerRole::Master);
    let pending = e.pending_transactions();
    assert_eq!(pending.len(), 5);
    let view = e.transactions();
    let decided = view[0]
        .records
        .iter()
        .filter(|r| r.state == HalfState::Decided)
        .count();
    assert_eq!(decided, 25);
    let (a, b) = (&pending[0].live, &pending[1].live);
    let (_, topic_max) = e.queue_bounds("TopicB", a.real_queue_id.unwrap());
    let end = e
        .end_transaction(a.commitlog_offset, true, Some("TxProducerGroup"))
        .unwrap();
    let committed = end.committed.unwrap();
    assert_eq!(committed.topic, "TopicB");
    assert_eq!(committed.queue_offset, topic_max);
    let m = e.message_at(committed.commitlog_offset as i64).unwrap();
    assert_eq!(m.sys_flag & 0xC, 0x8);
    assert_eq!(m.prepared_transaction_offset, a.commitlog_offset);
    let op = e.message_at(end.op.commitlog_offset as i64).unwrap();
    assert_eq!(op.body, a.queue_offset.to_string().into_bytes());
    assert_eq!(op.topic, "RMQ_SYS_TRANS_OP_HALF_TOPIC");
    let r = e.end_transaction(b.commitlog_offset, false, None).unwrap();
    assert!(r.committed.is_none());
    assert_eq!(e.pending_transactions().len(), 3);
    // refusals
    assert!(e.end_transaction(0, true, None).is_err());
    assert!(e
        .end_transaction(pending[2].live.commitlog_offset, true, Some("Other"))
        .is_err());
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn filters_on_java_written_messages() {
    let Some(dir) = oracle("basic-4.9") else {
        return;
    };
    let java: Vec<Value> = java_messages(&dir)
        .into_iter()
        .filter(|m| m["topic"] == "TopicA" && m["queueId"] == 0)
        .collect();
    let clock = FakeClock::new(T0);
    let e = engine_at(&dir.join("store"), None, &clock, BrokerRole::Master);
    let run = |f: &MessageFilter| -> Vec<i64> {
        let mut got = Vec::new();
        let mut off = 0;
        loop {
            let r = e.pull(&PullRequest {
                topic: "TopicA",
                queue_id: 0,
                offset: off,
                max_msgs: 32,
                filter: Some(f),
            });
            for pm in &r.messages {
                if f.client_keeps(&pm.message().unwrap()) {
                    got.push(pm.queue_offset);
                }
            }
            if r.next_begin_offset == off || r.next_begin_offset >= r.max_offset {
                break;
            }
            off = r.next_begin_offset;
        }
        got
    };
    let want = |pred: &dyn Fn(&Value) -> bool| -> Vec<i64> {
        java.iter()
            .filter(|m| pred(&m["properties"]))
            .map(|m| m["queueOffset"].as_i64().unwrap())
            .collect()
    };
    let tag = MessageFilter::Tag(TagFilter::parse("TagA || TagC").unwrap());
    let got = run(&tag);
    assert!(!got.is_empty());
    assert_eq!(
        got,
        want(&|p| matches!(p["TAGS"].as_str(), Some("TagA" | "TagC")))
    );
    let sql = MessageFilter::Sql(
        SqlFilter::parse(
            "a = 1 AND TAGS IN ('TagA', 'TagB') OR region IS NOT NULL AND TAGS IS NULL",
        )
        .unwrap(),
    );
    assert_eq!(
        run(&sql),
        want(&|p| {
            (p["a"].as_str() == Some("1") && matches!(p["TAGS"].as_str(), Some("TagA" | "TagB")))
                || (p.get("region").is_some() && p.get("TAGS").is_none())
        })
    );
    let none = MessageFilter::Sql(SqlFilter::parse("traceId BETWEEN 1 AND 2").unwrap());
    // traceId values are "t..." strings: Integer.valueOf fails, nothing matches
    assert!(run(&none).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Fake clock: retries and delays

#[test]
fn retry_schedule_follows_the_16_steps_then_dlq() {
    let clock = FakeClock::new(T0);
    let mut e = engine_at(&fixture("store-4.9"), None, &clock, BrokerRole::Master);
    e.deliver_due().unwrap(); // the fixture's own overdue delayed messages
    let put = e
        .put_message(message("RetryTopic", 0, &[("TAGS", "t")], "hello"))
        .unwrap();
    let group = "RetryGroup";
    let table: Vec<i64> = retry_schedule(&e.source().geometry, 16)
        .iter()
        .filter_map(|s| s.delay_ms)
        .collect();
    assert_eq!(table.len(), 16);
    let retry = retry_topic(group);
    let origin_id = put.msg_id.clone();
    let mut phy = put.commitlog_offset as i64;
    for (n, delay) in table.iter().enumerate() {
        let now = clock.advance(1);
        let SendBackOutcome::Retry {
            delay_level,
            due_at,
            ..
        } = e.send_back(group, phy, 0, None).unwrap()
        else {
            panic!("failure {} should be retried", n + 1);
        };
        assert_eq!(delay_level, 3 + n as i32);
        assert_eq!(due_at - now, *delay, "retry {}", n + 1);
        clock.set(due_at - 1);
        assert!(e.deliver_due().unwrap().is_empty(), "retry {} early", n + 1);
        let offset = e
            .pull_from_where(group, &retry, 0, Default::default())
            .unwrap();
        assert_eq!(
            e.queue_bounds(&retry, 0).1,
            offset,
            "retry {} visible early",
            n + 1
        );
        clock.set(due_at);
        assert_eq!(e.deliver_due().unwrap().len(), 1);
        let r = pull(&e, &retry, 0, offset, 32);
        assert_eq!(r.messages.len(), 1, "retry {}", n + 1);
        let m = e.message_at(r.messages[0].commitlog_offset).unwrap();
        assert_eq!(m.reconsume_times, n as i32 + 1);
        let p = props_of(&m);
        assert_eq!(p["RETRY_TOPIC"], "RetryTopic");
        assert_eq!(p["ORIGIN_MESSAGE_ID"], origin_id);
        assert_eq!(p["REAL_TOPIC"], retry);
        e.commit_offset(group, &retry, 0, r.next_begin_offset);
        phy = r.messages[0].commitlog_offset;
    }
    // the 17th failure goes to the DLQ, at once
    let SendBackOutcome::DeadLetter { put } = e.send_back(group, phy, 0, None).unwrap() else {
        panic!("the 17th failure should go to the DLQ");
    };
    assert_eq!(put.topic, dlq_topic(group));
    let r = pull(&e, &dlq_topic(group), 0, 0, 32);
    assert_eq!(r.messages.len(), 1);
    let m = e.message_at(r.messages[0].commitlog_offset).unwrap();
    assert_eq!(
        (m.reconsume_times, props_of(&m)["DELAY"].as_str()),
        (17, "0")
    );
    assert!(e.topic_configs().get(&dlq_topic(group)).is_some());
    assert_eq!(e.subscription_groups().retry_max_times(group), Some(16));
}

#[test]
fn every_delay_level_delivers_on_time_and_not_before() {
    let clock = FakeClock::new(T0);
    let mut e = engine_at(&fixture("store-4.9"), None, &clock, BrokerRole::Master);
    e.deliver_due().unwrap();
    let g = e.source().geometry.clone();
    let levels = g.max_delay_level();
    for level in 1..=levels {
        let body = format!("level {level}");
        let p = e
            .put_message(message(
                "DelayTopic",
                level % 4,
                &[("DELAY", &level.to_string())],
                &body,
            ))
            .unwrap();
        assert_eq!((p.topic.as_str(), p.queue_id), (SCHEDULE_TOPIC, level - 1));
    }
    let mut by_time: Vec<(i64, i32)> = (1..=levels)
        .map(|l| (T0 + g.delay_millis(l).unwrap(), l))
        .collect();
    by_time.sort();
    let mut delivered = 0;
    for (due, level) in by_time {
        clock.set(due - 1);
        let early = e.deliver_due().unwrap();
        assert!(
            early.iter().all(|d| d.level != level),
            "level {level} early"
        );
        delivered += early.len();
        clock.set(due);
        let on_time = e.deliver_due().unwrap();
        assert!(
            on_time.iter().any(|d| d.level == level),
            "level {level} late"
        );
        delivered += on_time.len();
        let (_, max) = e.queue_bounds(SCHEDULE_TOPIC, level - 1);
        assert_eq!(e.delay_offset(level), max);
    }
    assert_eq!(delivered, levels as usize);
    // delivered to the real topic and queue, DELAY kept in the stored bytes
    let mut seen = 0;
    for q in 0..4 {
        let r = pull(&e, "DelayTopic", q, 0, 32);
        for pm in &r.messages {
            let m = e.message_at(pm.commitlog_offset).unwrap();
            let p = props_of(&m);
            assert_eq!(p["REAL_TOPIC"], "DelayTopic");
            assert_eq!(p["REAL_QID"], q.to_string());
            assert!(m.store_timestamp >= T0 + 1000);
            seen += 1;
        }
    }
    assert_eq!(seen, levels);
    assert!(e.next_delivery_time().is_none());
}

// ---------------------------------------------------------------------------------------------
// Offsets, rebalance, orderly

#[test]
fn clustering_and_broadcasting_offsets() {
    let overlay = temp_dir("offsets");
    let clock = FakeClock::new(T0);
    {
        let mut e = engine_at(
            &fixture("store-4.9"),
            Some(&overlay),
            &clock,
            BrokerRole::Master,
        );
        let in_file = rmqstore::format::config::load::<rmqstore::format::config::ConsumerOffsets>(
            &fixture("store-4.9").join("config"),
        )
        .unwrap()
        .value
        .get("OrderTopic", "OrderGroup", 0)
        .unwrap();
        assert!(in_file > 0);
        assert_eq!(e.committed_offset("OrderGroup", "OrderTopic", 0), in_file);
        assert_eq!(e.committed_offset("NewGroup", "OrderTopic", 0), -1);
        // a new group on a queue whose head is in memory starts at 0 (ENGINE.md 4.1)
        assert_eq!(
            e.pull_from_where("NewGroup", "OrderTopic", 0, Default::default()),
            Some(0)
        );
        // clustering: one offset per queue per group, shared by all its consumers
        e.commit_offset("OrderGroup", "OrderTopic", 0, 95);
        e.commit_offset("NewGroup", "OrderTopic", 1, 7);
        e.close().unwrap();
    }
    let written = std::fs::read_to_string(overlay.join("config/consumerOffset.json")).unwrap();
    assert!(
        written.contains("\"OrderTopic@NewGroup\":{1:7"),
        "{written}"
    );
    let source =
        std::fs::read_to_string(fixture("store-4.9").join("config/consumerOffset.json")).unwrap();
    assert!(!source.contains("NewGroup"));
    let e = engine_at(
        &fixture("store-4.9"),
        Some(&overlay),
        &clock,
        BrokerRole::Master,
    );
    assert_eq!(e.committed_offset("OrderGroup", "OrderTopic", 0), 95);
    assert_eq!(e.committed_offset("NewGroup", "OrderTopic", 1), 7);
    e.close().unwrap();

    // broadcasting: every client consumes every queue and keeps its own offsets.json
    let dir = temp_dir("broadcast");
    let mqs = e_queues("OrderTopic");
    for (client, step) in [("10.0.0.1@DEFAULT", 1), ("10.0.0.2@DEFAULT", 2)] {
        let mut s = LocalOffsetStore::new(&dir, client, "BcGroup");
        for mq in &mqs {
            assert_eq!(s.read_offset(mq, ReadOffsetType::ReadFromStore), -1);
            s.update_offset(mq, i64::from(mq.queue_id) * step, false);
        }
        s.persist_all(&mqs).unwrap();
    }
    for (client, step) in [("10.0.0.1@DEFAULT", 1), ("10.0.0.2@DEFAULT", 2)] {
        let mut s = LocalOffsetStore::new(&dir, client, "BcGroup");
        let text = std::fs::read_to_string(s.path()).unwrap();
        assert!(
            text.starts_with("{\n\t\"offsetTable\":{{\n\t\t\t\"brokerName\":"),
            "{text}"
        );
        for mq in &mqs {
            assert_eq!(
                s.read_offset(mq, ReadOffsetType::ReadFromStore),
                i64::from(mq.queue_id) * step
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&overlay);
}

fn e_queues(topic: &str) -> Vec<MessageQueue> {
    (0..4)
        .map(|q| MessageQueue::new(topic, "broker-a", q))
        .collect()
}

#[test]
fn allocation_table() {
    // the seed documents' 4 queues and 2 consumers, and ENGINE.md 5.3's 8 queues and 3
    let four = e_queues("T");
    let two = ["consumer1".to_string(), "consumer2".to_string()];
    let ids = |v: Vec<MessageQueue>| v.iter().map(|q| q.queue_id).collect::<Vec<_>>();
    let cases: [(AllocateStrategy, [Vec<i32>; 2]); 2] = [
        (AllocateStrategy::Averagely, [vec![0, 1], vec![2, 3]]),
        (
            AllocateStrategy::AveragelyByCircle,
            [vec![0, 2], vec![1, 3]],
        ),
    ];
    for (s, want) in cases {
        for (c, w) in two.iter().zip(want) {
            assert_eq!(
                ids(allocate(&s, c, &four, &two).unwrap()),
                w,
                "{}",
                s.name()
            );
        }
    }
    let eight: Vec<MessageQueue> = ["broker-a", "broker-b"]
        .iter()
        .flat_map(|b| (0..4).map(move |q| MessageQueue::new("TopicTest", *b, q)))
        .collect();
    let three: Vec<String> = ["10.0.0.1@1001", "10.0.0.2@1002", "10.0.0.3@1003"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let name = |v: Vec<MessageQueue>| {
        v.iter()
            .map(|q| format!("{}/{}", &q.broker_name[7..], q.queue_id))
            .collect::<Vec<_>>()
    };
    let table = [
        (
            AllocateStrategy::Averagely,
            [
                vec!["a/0", "a/1", "a/2"],
                vec!["a/3", "b/0", "b/1"],
                vec!["b/2", "b/3"],
            ],
        ),
        (
            AllocateStrategy::AveragelyByCircle,
            [
                vec!["a/0", "a/3", "b/2"],
                vec!["a/1", "b/0", "b/3"],
                vec!["a/2", "b/1"],
            ],
        ),
        (
            AllocateStrategy::ConsistentHash { virtual_nodes: 10 },
            [
                vec!["a/0", "b/2"],
                vec!["a/2", "b/0", "b/1"],
                vec!["a/1", "a/3", "b/3"],
            ],
        ),
    ];
    for (s, want) in table {
        for (c, w) in three.iter().zip(want) {
            assert_eq!(
                name(allocate(&s, c, &eight, &three).unwrap()),
                w,
                "{}",
                s.name()
            );
        }
    }
}

#[test]
fn orderly_queue_locks_and_retries_in_place() {
    let clock = FakeClock::new(T0);
    let mut e = engine_at(&fixture("store-4.9"), None, &clock, BrokerRole::Master);
    let mqs = e.message_queues("OrderTopic");
    assert_eq!(mqs.len(), 4);
    assert_eq!(e.lock_batch("OrderGroup", "c1", &mqs).len(), 4);
    assert!(e.lock_batch("OrderGroup", "c2", &mqs).is_empty());
    assert_eq!(e.queue_owner("OrderGroup", &mqs[0]).as_deref(), Some("c1"));
    // the queue is held: a failure retries in place, nothing is written
    let mut oq = OrderlyQueue::new(mqs[0].clone());
    oq.locked(clock.advance(0));
    let r = pull(&e, "OrderTopic", 0, 93, 1);
    let first = r.messages[0].queue_offset;
    let before = e.queue_bounds(&retry_topic("OrderGroup"), 0);
    let out = oq.on_result(
        &[(first, 0)],
        OrderlyStatus::SuspendCurrentQueueAMoment,
        clock.advance(0),
    );
    assert!(matches!(out, OrderlyOutcome::Suspended { first_offset, .. } if first_offset == first));
    assert_eq!(e.queue_bounds(&retry_topic("OrderGroup"), 0), before);
    clock.advance(1_000);
    assert_eq!(
        oq.on_result(&[(first, 0)], OrderlyStatus::Success, clock.advance(0)),
        OrderlyOutcome::Commit(first + 1)
    );
    // after 60 s without a refresh another client may take the queue
    clock.advance(61_000);
    assert_eq!(e.lock_batch("OrderGroup", "c2", &mqs[..1]).len(), 1);
    e.unlock_batch("OrderGroup", "c2", &mqs[..1]);
    assert_eq!(e.queue_owner("OrderGroup", &mqs[0]), None);
    // past maxReconsumeTimes the 4.9 send-back reaches the DLQ after the client's delay
    let phy = r.messages[0].commitlog_offset;
    match e.orderly_send_back("OrderGroup", phy, 2, 2).unwrap() {
        SendBackOutcome::DeadLetter { put } => {
            assert_eq!(put.topic, SCHEDULE_TOPIC);
            let m = e.message_at(put.commitlog_offset as i64).unwrap();
            assert_eq!(props_of(&m)["REAL_TOPIC"], dlq_topic("OrderGroup"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn five_x_orderly_send_back_goes_to_the_dlq_at_once() {
    let clock = FakeClock::new(T0);
    let store = open_store(&fixture("store-4.9"));
    let mut opts = EngineOptions::for_store(&store);
    opts.version = BrokerVersion::V5;
    let mut e = Engine::open(store, None, Arc::new(clock), opts).unwrap();
    let r = pull(&e, "OrderTopic", 1, 0, 1);
    let out = e
        .orderly_send_back("OrderGroup", r.messages[0].commitlog_offset, 3, 3)
        .unwrap();
    let SendBackOutcome::DeadLetter { put } = out else {
        panic!("{out:?}")
    };
    assert_eq!(put.topic, dlq_topic("OrderGroup"));
    let m = e.message_at(put.commitlog_offset as i64).unwrap();
    assert_eq!(props_of(&m)["DELAY"], "-1");
    assert_eq!(m.reconsume_times, 4);
}

// ---------------------------------------------------------------------------------------------
// The overlay

#[test]
fn overlay_is_a_store_and_a_second_run_continues_it() {
    let overlay = temp_dir("overlay");
    let clock = FakeClock::new(T0);
    let source_max = {
        let e = engine_at(
            &fixture("store-4.9"),
            Some(&overlay),
            &clock,
            BrokerRole::Master,
        );
        e.queue_bounds("OrderTopic", 2).1
    };
    let (first, start) = {
        let mut e = engine_at(
            &fixture("store-4.9"),
            Some(&overlay),
            &clock,
            BrokerRole::Master,
        );
        let start = e.overlay_start();
        assert_eq!(start % e.source().geometry.commitlog_file_size.value, 0);
        let a = e
            .put_message(message("OrderTopic", 2, &[("TAGS", "x")], "one"))
            .unwrap();
        assert_eq!((a.commitlog_offset, a.queue_offset), (start, source_max));
        e.put_message(message("OrderTopic", 2, &[("DELAY", "2")], "later"))
            .unwrap();
        e.commit_offset("OrderGroup", "OrderTopic", 2, source_max);
        e.close().unwrap();
        (a, start)
    };
    // the overlay opens as a store on its own: commitlog from `start`, queue offsets continued
    let o = open_store(&overlay);
    assert_eq!(o.commitlog.segments[0].start, start);
    let cq = o.queue("OrderTopic", 2).unwrap();
    assert_eq!(cq.max_offset().unwrap() as i64, source_max + 1);
    assert_eq!(
        cq.unit_at(source_max as u64).unwrap().unwrap().offset as u64,
        start
    );
    assert!(overlay.join("config/delayOffset.json").exists());
    // a second run reads it back and goes on where the first stopped
    let mut e = engine_at(
        &fixture("store-4.9"),
        Some(&overlay),
        &clock,
        BrokerRole::Master,
    );
    assert_eq!(e.replay_summary().overlay_records, 2);
    let r = pull(&e, "OrderTopic", 2, source_max, 32);
    assert_eq!(
        r.messages[0].commitlog_offset as u64,
        first.commitlog_offset
    );
    let b = e.put_message(message("OrderTopic", 2, &[], "two")).unwrap();
    assert_eq!(b.queue_offset, source_max + 1);
    assert!(b.commitlog_offset > first.commitlog_offset);
    clock.advance(5_000);
    let d = e.deliver_due().unwrap();
    assert!(d
        .iter()
        .any(|x| matches!(&x.outcome, DeliveryOutcome::Delivered(p) if p.topic == "OrderTopic")));
    e.close().unwrap();
    // the CLI reads store + overlay, and --commit writes the group's offset there
    let (msgs, s) = cli_summary(&[
        "pull",
        fixture("store-4.9").to_str().unwrap(),
        "--overlay",
        overlay.to_str().unwrap(),
        "--group",
        "OrderGroup",
        "--topic",
        "OrderTopic",
        "--queue",
        "2",
        "--json",
        "--commit",
    ]);
    // "one", "two", "later" once delivered, and the fixture's own overdue delayed messages
    assert_eq!(s["queue_offset"], source_max);
    assert_eq!(s["committed_offset"], s["next_begin_offset"]);
    let max = s["max_offset"].as_i64().unwrap();
    assert!(max >= source_max + 3);
    assert_eq!(msgs.len() as i64, max - source_max);
    assert_eq!(s["next_begin_offset"], max);
    assert!(msgs.iter().any(|m| m["body"] == "later") && msgs.iter().any(|m| m["body"] == "two"));
    let (msgs, s) = cli_summary(&[
        "pull",
        fixture("store-4.9").to_str().unwrap(),
        "--overlay",
        overlay.to_str().unwrap(),
        "--group",
        "OrderGroup",
        "--topic",
        "OrderTopic",
        "--queue",
        "2",
        "--json",
    ]);
    assert!(msgs.is_empty());
    assert_eq!(s["status"], "OFFSET_OVERFLOW_ONE");
    let _ = std::fs::remove_dir_all(&overlay);
}

#[test]
fn cli_pull_filters_and_refusals() {
    let store = fixture("store-4.9");
    let store = store.to_str().unwrap();
    let (msgs, s) = cli_summary(&[
        "pull",
        store,
        "--group",
        "G",
        "--topic",
        "OrderTopic",
        "--queue",
        "0",
        "--offset",
        "0",
        "--json",
        "--tag",
        "TagA",
    ]);
    assert!(msgs.iter().all(|m| m["tags"] == "TagA"));
    assert_eq!(
        s["status"],
        if msgs.is_empty() {
            "NO_MATCHED_MESSAGE"
        } else {
            "FOUND"
        }
    );
    // a topic the store does not know: said, with the close names, instead of the broker's
    // NO_MESSAGE_IN_QUEUE for it
    let out = Command::cargo_bin("rmqstore")
        .unwrap()
        .env_clear()
        .args([
            "pull",
            store,
            "--group",
            "G",
            "--topic",
            "NoSuchTopic",
            "--offset",
            "3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown topic \"NoSuchTopic\""));
    for bad in [
        vec!["--sql", "a > 'x'"],
        vec!["--tag", "||"],
        vec!["--commit"],
    ] {
        Command::cargo_bin("rmqstore")
            .unwrap()
            .env_clear()
            .args(["pull", store, "--group", "G", "--topic", "OrderTopic"])
            .args(&bad)
            .assert()
            .code(2);
    }
}

#[test]
fn writer_resume_continues_byte_for_byte() {
    use rmqstore::engine::store::index_builder::IndexNaming;
    use rmqstore::engine::store::writer::{StoreWriter, WriterOptions};
    use rmqstore::format::geometry::Geometry;
    let mut g = Geometry::default();
    g.commitlog_file_size.value = 4096;
    g.cq_file_units.value = 8;
    g.index_slots.value = 8;
    g.index_entries.value = 16;
    let opts = || WriterOptions {
        geometry: g.clone(),
        consumequeue: true,
        index: true,
        index_naming: IndexNaming::Utc,
        dledger: None,
    };
    let msgs: Vec<Message> = (0..40)
        .map(|i| {
            let mut m = message(
                "ResumeTopic",
                i % 3,
                &[("KEYS", &format!("k{i}")), ("TAGS", "t")],
                &"x".repeat(50 + i as usize * 7),
            );
            m.store_timestamp = T0 + i64::from(i) * 1000;
            m
        })
        .collect();
    let (one, two) = (temp_dir("resume-one"), temp_dir("resume-two"));
    let mut w = StoreWriter::create(&one, opts()).unwrap();
    for m in &msgs {
        w.append(m.clone()).unwrap();
    }
    w.finish().unwrap();
    let mut w = StoreWriter::create(&two, opts()).unwrap();
    for m in &msgs[..13] {
        w.append(m.clone()).unwrap();
    }
    w.finish().unwrap();
    for part in [&msgs[13..21], &msgs[21..]] {
        let mut w = StoreWriter::resume(&two, opts()).unwrap();
        for m in part {
            w.append(m.clone()).unwrap();
        }
        w.finish().unwrap();
    }
    fn files(root: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            if e.path().is_dir() {
                files(root, &r, out);
            } else {
                out.insert(r, std::fs::read(e.path()).unwrap());
            }
        }
    }
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    files(&one, Path::new(""), &mut a);
    files(&two, Path::new(""), &mut b);
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in &a {
        assert!(v == &b[k], "{} differs", k.display());
    }
    let _ = std::fs::remove_dir_all(&one);
    let _ = std::fs::remove_dir_all(&two);
}

#[test]
fn a_49_master_records_offset_moved_events() {
    let clock = FakeClock::new(T0);
    let mut e = engine_at(&fixture("store-4.9"), None, &clock, BrokerRole::Master);
    let (_, max) = e.queue_bounds("OrderTopic", 0);
    let req = PullRequest {
        topic: "OrderTopic",
        queue_id: 0,
        offset: max + 100,
        max_msgs: 32,
        filter: None,
    };
    let r = e.process_pull("G", &req, Some(5)).unwrap();
    assert_eq!(r.status, GetMessageStatus::OffsetOverflowBadly);
    assert_eq!(r.next_begin_offset, max);
    assert_eq!(e.committed_offset("G", "OrderTopic", 0), 5);
    let ev = pull(&e, "OFFSET_MOVED_EVENT", 0, 0, 32);
    assert_eq!(ev.messages.len(), 1);
    let m = e.message_at(ev.messages[0].commitlog_offset).unwrap();
    assert_eq!(
        String::from_utf8(m.body.clone()).unwrap(),
        format!(
            "{{\"consumerGroup\":\"G\",\"messageQueue\":{{\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\":\"OrderTopic\"}},\"offsetNew\":{max},\"offsetRequest\":{}}}",
            max + 100
        )
    );
    assert_eq!(props_of(&m)["KEYS"], "G");
    // a slave neither moves the consumer nor writes the event
    let mut s = engine_at(&fixture("store-4.9"), None, &clock, BrokerRole::Slave);
    let r = s.process_pull("G", &req, Some(5)).unwrap();
    assert_eq!(r.next_begin_offset, max + 100);
    assert_eq!(s.committed_offset("G", "OrderTopic", 0), -1);
    assert_eq!(s.queue_bounds("OFFSET_MOVED_EVENT", 0), (0, 0));
}

#[test]
fn reset_a_group_to_a_time() {
    let clock = FakeClock::new(T0);
    let mut e = engine_at(&fixture("store-4.9"), None, &clock, BrokerRole::Master);
    let committed = e.committed_offset("OrderGroup", "OrderTopic", 0);
    let unit = e.unit_at("OrderTopic", 0, 40).unwrap();
    let t40 = e.message_at(unit.offset).unwrap().store_timestamp;
    assert_eq!(e.offset_by_time("OrderTopic", 0, t40), 40);
    // not forced: an offset only moves back; forced: to the target
    let plan = e
        .reset_offsets_by_time("OrderGroup", "OrderTopic", t40, false)
        .unwrap();
    let q0 = plan.iter().find(|(q, _, _)| *q == 0).unwrap();
    assert_eq!(*q0, (0, committed, 40.min(committed)));
    assert_eq!(
        e.committed_offset("OrderGroup", "OrderTopic", 0),
        40.min(committed)
    );
    let plan = e
        .reset_offsets_by_time("OrderGroup", "OrderTopic", -1, true)
        .unwrap();
    for (q, _, new) in plan {
        assert_eq!(new, e.queue_bounds("OrderTopic", q).1);
    }
    // 4.9 needs the group's committed offsets
    assert!(e
        .reset_offsets_by_time("Nobody", "OrderTopic", t40, true)
        .is_err());
}

// ---------------------------------------------------------------------------------------------
// 5.x timer messages against RocketMQ 5.3.3's own timer store (oracle/timer-5.x)

fn timer_oracle() -> Option<(PathBuf, Value, Value)> {
    let dir = oracle("timer-5.x")?;
    let read = |n: &str| -> Value {
        serde_json::from_slice(&std::fs::read(dir.join(n)).unwrap()).unwrap()
    };
    Some((
        dir.clone(),
        read("timer-state.json"),
        read("timer-messages.json"),
    ))
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn timer_files_decode_as_the_java_classes_read_them() {
    use rmqstore::engine::store::timer_files::TimerFiles;
    use rmqstore::format::timer::check::{check_checkpoint, check_log, check_wheel};
    let Some((dir, state, _)) = timer_oracle() else {
        return;
    };
    let files = TimerFiles::open(&dir.join("store")).unwrap();
    let cp = files.checkpoint().expect("timercheck");
    let j = &state["timercheck(TimerCheckpoint)"];
    assert_eq!(cp.last_read_time_ms, j["lastReadTimeMs"].as_i64().unwrap());
    assert_eq!(
        cp.last_timer_log_flush_pos,
        j["lastTimerLogFlushPos"].as_i64().unwrap()
    );
    assert_eq!(
        cp.last_timer_queue_offset,
        j["lastTimerQueueOffset"].as_i64().unwrap()
    );
    assert_eq!(
        cp.master_timer_queue_offset,
        j["masterTimerQueueOffset"].as_i64().unwrap()
    );
    assert_eq!(
        cp.data_counter,
        j["dataVersion"]["counter"].as_i64().unwrap()
    );
    assert_eq!(
        cp.state_version,
        j["dataVersion"]["stateVersion"].as_i64().unwrap()
    );
    assert_eq!(
        cp.data_timestamp,
        j["dataVersion"]["timestamp"].as_i64().unwrap()
    );
    let raw = std::fs::read(dir.join("store/config/timercheck")).unwrap();
    assert_eq!(cp.to_bytes(), raw, "timercheck written back byte for byte");

    let metrics = files.metrics.as_ref().unwrap().as_ref().unwrap();
    let jm = state["timermetrics(TimerMetrics.timingCount)"]
        .as_object()
        .unwrap();
    assert_eq!(metrics.len(), jm.len());
    for t in metrics {
        assert_eq!(
            t.count,
            jm[&t.topic]["count"].as_i64().unwrap(),
            "{}",
            t.topic
        );
        assert_eq!(t.timestamp, jm[&t.topic]["timeStamp"].as_i64().unwrap());
    }

    let wheel = files.wheel().expect("timerwheel");
    let slots: Vec<_> = wheel.non_empty().collect();
    let js = state["timerwheelNonEmptySlots(decoded from bytes)"]
        .as_array()
        .unwrap();
    assert_eq!(slots.len(), js.len());
    for ((i, s), j) in slots.iter().zip(js) {
        assert_eq!(*i as i64, j["slotIndex"].as_i64().unwrap());
        assert_eq!(
            s.time_div_precision,
            j["timeDivPrecision"].as_i64().unwrap()
        );
        assert_eq!(s.first_pos, j["firstPos"].as_i64().unwrap());
        assert_eq!(s.last_pos, j["lastPos"].as_i64().unwrap());
        assert_eq!(s.num as i64, j["num"].as_i64().unwrap());
        assert_eq!(s.magic as i64, j["magic"].as_i64().unwrap());
        assert_eq!(Slot::from_bytes(&s.to_bytes()), Some(*s));
    }
    for j in state["timerwheelGetSlot(real TimerWheel.getSlot)"]
        .as_array()
        .unwrap()
    {
        let s = wheel.get_slot(j["timeMs"].as_i64().unwrap(), 1000);
        assert_eq!(
            (s.first_pos, s.last_pos, s.num as i64),
            (
                j["firstPos"].as_i64().unwrap(),
                j["lastPos"].as_i64().unwrap(),
                j["num"].as_i64().unwrap()
            )
        );
    }
    assert_eq!(wheel.get_slot(1_000_000_000_000, 1000), Slot::EMPTY);

    let log = files.log.as_ref().expect("timerlog");
    let units: Vec<_> = log.units().collect();
    let ju = state["timerlogUnits(decoded from bytes)"]
        .as_array()
        .unwrap();
    assert_eq!(units.len(), ju.len());
    for ((pos, u), j) in units.iter().zip(ju) {
        assert_eq!(*pos as i64, j["pos"].as_i64().unwrap());
        assert_eq!(u.size as i64, j["size"].as_i64().unwrap());
        assert_eq!(u.prev_pos, j["prevPos"].as_i64().unwrap());
        assert_eq!(u.magic as i64, j["magic"].as_i64().unwrap());
        assert_eq!(u.write_time_ms, j["currWriteTimeMs"].as_i64().unwrap());
        assert_eq!(u.slot_time_ms(), j["delayedTimeMs"].as_i64().unwrap());
        assert_eq!(u.commitlog_offset, j["offsetPy"].as_i64().unwrap());
        assert_eq!(u.record_size as i64, j["sizePy"].as_i64().unwrap());
        assert_eq!(
            u.real_topic_hash as i64,
            j["realTopicHashCode"].as_i64().unwrap()
        );
        assert_eq!(log.unit_at(*pos as i64), Some(*u));
    }

    let mut findings = Vec::new();
    let lc = check_log(log, &mut findings);
    assert_eq!(lc.units, 129);
    assert_eq!(lc.data_end as i64, cp.last_timer_log_flush_pos);
    check_wheel(wheel, log, Some(cp), 1000, &mut findings);
    check_checkpoint(&files.checkpoint_path, cp, lc.data_end, 129, &mut findings);
    assert!(findings.is_empty(), "{findings:#?}");
}

fn timer_engine(root: &Path, overlay: Option<&Path>, clock: &FakeClock) -> Engine {
    let store = open_store(root);
    let opts = EngineOptions::for_store(&store);
    assert_eq!(opts.version, BrokerVersion::V5);
    Engine::open(store, overlay, Arc::new(clock.clone()), opts).unwrap()
}

fn assert_same_timer_message(ours: &rmqstore::engine::broker::timer::TimerMessage, j: &Value) {
    let key = j["uniqKey"].as_str().unwrap();
    assert_eq!(ours.uniq_key.as_deref(), Some(key));
    assert_eq!(ours.real_topic.as_deref(), j["topic"].as_str(), "{key}");
    assert_eq!(
        ours.real_queue_id.map(i64::from),
        j["queueId"].as_i64(),
        "{key}"
    );
    assert_eq!(
        ours.timer_out_timestamp,
        j["timerOutMs"].as_i64().unwrap(),
        "{key}"
    );
    assert_eq!(
        ours.commitlog_offset,
        j["timerTopicOffset"].as_i64().unwrap(),
        "{key}"
    );
    assert_eq!(
        ours.queue_offset,
        j["timerTopicQueueOffset"].as_i64().unwrap(),
        "{key}"
    );
    assert_eq!(
        ours.store_timestamp,
        j["storeTimestamp"].as_i64().unwrap(),
        "{key}"
    );
    let requested = ours.requested.clone();
    let jr: BTreeMap<String, String> = j["requested"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    assert_eq!(requested, jr, "{key}");
    let u = ours.unit.expect("enqueued");
    let ju = &j["timerlog"];
    assert_eq!(
        u.timerlog_position as i64,
        ju["pos"].as_i64().unwrap(),
        "{key}"
    );
    assert_eq!(
        u.slot_timestamp,
        ju["slotTimeMs"].as_i64().unwrap(),
        "{key}"
    );
    assert_eq!(u.magic as i64, ju["magic"].as_i64().unwrap(), "{key}");
    assert_eq!(u.rolled, ju["rolled"].as_bool().unwrap(), "{key}");
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn timer_messages_pending_and_delivered_equal_the_java_answers() {
    use rmqstore::engine::broker::timer::TimerState;
    let Some((dir, _, java)) = timer_oracle() else {
        return;
    };
    let clock = FakeClock::new(java["shutdownStatus"]["now"].as_i64().unwrap());
    let engine = timer_engine(&dir.join("store"), None, &clock);
    let report = engine.timer_report(true);
    let pending: Vec<_> = report.pending().collect();
    let jp = java["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 64);
    assert_eq!(pending.len(), jp.len());
    for (ours, j) in pending.iter().zip(jp) {
        assert_same_timer_message(ours, j);
        assert_eq!(ours.release_timestamp, ours.timer_out_timestamp + 1000);
        assert!(ours.delivered.is_none());
    }
    let mut delivered: Vec<_> = report.delivered().collect();
    let mut jd: Vec<&Value> = java["delivered"].as_array().unwrap().iter().collect();
    assert_eq!(delivered.len(), 65);
    assert_eq!(delivered.len(), jd.len());
    delivered.sort_by_key(|m| m.commitlog_offset);
    jd.sort_by_key(|j| j["timerTopicOffset"].as_i64().unwrap());
    for (ours, j) in delivered.iter().zip(jd) {
        assert_same_timer_message(ours, j);
        let c = ours.delivered.as_ref().expect("copy found");
        let jc = &j["deliveredCopy"];
        assert_eq!(c.commitlog_offset, jc["physicalOffset"].as_i64().unwrap());
        assert_eq!(c.topic, jc["topic"].as_str().unwrap());
        assert_eq!(c.queue_id as i64, jc["queueId"].as_i64().unwrap());
        assert_eq!(c.queue_offset, jc["queueOffset"].as_i64().unwrap());
        assert_eq!(c.store_timestamp, jc["storeTimestamp"].as_i64().unwrap());
        let deq: i64 = jc["timerProperties"]["TIMER_DEQUEUE_MS"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(c.dequeue_timestamp, Some(deq));
    }
    assert!(report
        .messages
        .iter()
        .all(|m| m.state != TimerState::RolledOver));
    assert_eq!(report.unreadable, 0);
    let counts = report.counts(java["shutdownStatus"]["now"].as_i64().unwrap());
    let by_topic: Vec<(&str, usize)> = counts
        .topics
        .iter()
        .map(|t| (t.topic.as_str(), t.pending))
        .collect();
    assert_eq!(
        by_topic,
        vec![("TopicA", 22), ("TopicB", 21), ("TopicC", 21)]
    );
    assert_eq!(
        (counts.pending, counts.rolled, counts.delivered),
        (64, 16, 65)
    );
    assert_eq!(counts.due_now, 0);
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn timer_messages_are_delivered_when_due_and_the_progress_persists() {
    let Some((dir, _, java)) = timer_oracle() else {
        return;
    };
    let overlay = scratch();
    let ov = overlay.path().join("overlay");
    let jp = java["pending"].as_array().unwrap();
    let first_out = jp[0]["timerOutMs"].as_i64().unwrap();
    let second_out = jp[1]["timerOutMs"].as_i64().unwrap();
    assert!(second_out > first_out);
    // one step before the first release: nothing moves
    let clock = FakeClock::new(first_out + 999);
    let mut engine = timer_engine(&dir.join("store"), Some(&ov), &clock);
    assert_eq!(engine.next_timer_release(), Some(first_out + 1000));
    assert!(engine.deliver_due_timers().unwrap().is_empty());
    clock.set(first_out + 1000);
    let done = engine.deliver_due_timers().unwrap();
    assert_eq!(done.len(), 1);
    let put = &done[0];
    assert_eq!(put.topic, jp[0]["topic"].as_str().unwrap());
    assert_eq!(put.queue_id as i64, jp[0]["queueId"].as_i64().unwrap());
    let copy = engine.message_at(put.commitlog_offset as i64).unwrap();
    let props = rmqstore::engine::broker::property_pairs(&copy.properties);
    let get = |k: &str| props.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(
        get("TIMER_DEQUEUE_MS"),
        Some((first_out + 1000).to_string())
    );
    assert_eq!(get("TIMER_OUT_MS"), Some(first_out.to_string()));
    assert_eq!(get("UNIQ_KEY").as_deref(), jp[0]["uniqKey"].as_str());
    assert!(get("TIMER_ENQUEUE_MS").is_some());
    let report = engine.timer_report(true);
    assert_eq!(report.pending().count(), 63);
    assert_eq!(report.delivered().count(), 66);
    engine.close().unwrap();
    // a new engine on the overlay continues from the overlay's timercheck
    let clock = FakeClock::new(first_out + 1000);
    let engine = timer_engine(&dir.join("store"), Some(&ov), &clock);
    assert_eq!(engine.timer_report(false).pending().count(), 63);
    assert_eq!(engine.next_timer_release(), Some(second_out + 1000));
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_5x_put_with_a_timer_property_is_parked_on_the_timer_topic() {
    use rmqstore::format::timer::TIMER_TOPIC;
    let Some((dir, _, _)) = timer_oracle() else {
        return;
    };
    let clock = FakeClock::new(T0);
    let mut engine = timer_engine(&dir.join("store"), None, &clock);
    let before = engine.timer_report(false).pending().count();
    let put = engine
        .put_message(message("TopicA", 1, &[("TIMER_DELAY_SEC", "10")], "later"))
        .unwrap();
    assert_eq!((put.topic.as_str(), put.queue_id), (TIMER_TOPIC, 0));
    let report = engine.timer_report(false);
    assert_eq!(report.pending().count(), before + 1);
    let m = report
        .pending()
        .find(|m| m.commitlog_offset == put.commitlog_offset as i64)
        .unwrap();
    assert_eq!(m.timer_out_timestamp, T0 + 10_000 - 1000);
    assert_eq!(m.real_topic.as_deref(), Some("TopicA"));
    // a time in the past is stored on its real topic; beyond three days is refused
    let past = (T0 - 5).to_string();
    let now = engine
        .put_message(message("TopicA", 1, &[("TIMER_DELIVER_MS", &past)], "now"))
        .unwrap();
    assert_eq!(now.topic, "TopicA");
    let far = engine.put_message(message("TopicA", 1, &[("TIMER_DELAY_SEC", "345600")], "x"));
    let far = far.unwrap_err();
    assert!(
        matches!(
            far,
            EngineError::TimerRefused(TimerRefused::TooFarAhead {
                ahead_ms: 345_600_000,
                max_delay_sec: 259_200
            })
        ),
        "{far}"
    );
    assert!(far.to_string().contains("WHEEL_TIMER_MSG_ILLEGAL"));
    let bad = engine.put_message(message("TopicA", 1, &[("TIMER_DELAY_MS", "soon")], "x"));
    let bad = bad.unwrap_err();
    assert!(
        matches!(
            &bad,
            EngineError::TimerRefused(TimerRefused::NotANumber { property: "TIMER_DELAY_MS", value })
                if value == "soon"
        ),
        "{bad}"
    );
    // a delay level wins and drops the timer properties
    let lvl = engine
        .put_message(message(
            "TopicA",
            1,
            &[("DELAY", "2"), ("TIMER_DELAY_SEC", "10")],
            "d",
        ))
        .unwrap();
    assert_eq!(lvl.topic, SCHEDULE_TOPIC);
    let m = engine.message_at(lvl.commitlog_offset as i64).unwrap();
    assert!(!rmqstore::engine::broker::property_pairs(&m.properties)
        .iter()
        .any(|(k, _)| k == "TIMER_DELAY_SEC"));
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn timer_messages_are_exported_with_their_release_time_and_delivered_by_pull() {
    let Some((dir, _, java)) = timer_oracle() else {
        return;
    };
    let store = dir.join("store");
    let t = scratch();
    // GroupA consumes TopicA: its 22 pending timer messages are handed on for TopicA
    let out = t.path().join("timers.jsonl");
    bin()
        .args([
            "export",
            "--group",
            "GroupA",
            "--include",
            "timers",
            "--out",
        ])
        .arg(&out)
        .arg(&store)
        .assert()
        .success();
    let lines = json_lines(&out);
    let expected: BTreeMap<&str, i64> = java["pending"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["topic"] == "TopicA")
        .map(|p| {
            (
                p["uniqKey"].as_str().unwrap(),
                p["timerOutMs"].as_i64().unwrap() + 1000,
            )
        })
        .collect();
    // JSON Lines: the parked record as stored, where to send it and when it is released
    let timers: Vec<&Value> = lines
        .iter()
        .filter(|l| l["export_source"] == "timer")
        .collect();
    assert_eq!(timers.len(), 22);
    assert_eq!(timers.len(), expected.len());
    for m in &timers {
        let key = m["uniq_key"].as_str().unwrap();
        assert_eq!(m["topic"], "rmq_sys_wheel_timer", "{key}");
        assert_eq!(m["resend_topic"], "TopicA", "{key}");
        assert_eq!(m["due_timestamp"].as_i64(), Some(expected[key]), "{key}");
    }
    // a store: records for TopicA that a 5.x broker parks until their release time
    let exported = t.path().join("exported");
    bin()
        .args([
            "export",
            "--group",
            "GroupA",
            "--include",
            "timers",
            "--out",
        ])
        .arg(&exported)
        .arg(&store)
        .assert()
        .success();
    let o = bin()
        .args(["dump", "commitlog", "--json"])
        .arg(&exported)
        .output()
        .unwrap();
    let records: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v["properties"]["RMQSTORE_EXPORT_SOURCE"] == "timer")
        .collect();
    assert_eq!(records.len(), 22);
    for m in &records {
        let p = &m["properties"];
        let key = p["UNIQ_KEY"].as_str().unwrap();
        assert_eq!(m["topic"], "TopicA", "{key}");
        let deliver: i64 = p["TIMER_DELIVER_MS"].as_str().unwrap().parse().unwrap();
        assert_eq!(deliver, expected[key], "{key}");
        for gone in ["TIMER_OUT_MS", "REAL_TOPIC", "REAL_QID", "TIMER_DELAY_SEC"] {
            assert!(p.get(gone).is_none(), "{key}: {gone} kept");
        }
    }
    // pull --deliver-due at a time past 11 of the pending releases puts them into the overlay;
    // pending on that overlay counts them delivered
    let ov = t.path().join("overlay");
    let now = "2026-12-01T00:00:00Z";
    let o = bin()
        .args([
            "pull",
            "--topic",
            "TopicA",
            "--group",
            "GroupA",
            "--deliver-due",
            "--now",
            now,
        ])
        .arg("--overlay")
        .arg(&ov)
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("0 delayed and 11 timer message(s)"),
        "{stderr}"
    );
    let o = bin()
        .args(["pending", "--json", "--now", now, "--overlay"])
        .arg(&ov)
        .arg(&store)
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    let timers: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "timers")
        .unwrap();
    assert_eq!(timers["pending"], 53);
    assert_eq!(timers["delivered"], 76);
    assert_eq!(timers["due_now"], 0);
}
