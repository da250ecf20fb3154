//! DLedger-mode stores: `dump dledger` and `info` against the Java answers of the three DLedger
//! oracle stores (plain, crashed, converted from normal mode), the consume queues pointing at
//! the wrapped records, damaged entries named by file and offset; the records, queries, pulls, offsets and
//! rebuilt files of every read command against the Java answers, and the commit rules.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::common::*;

const DLEDGER: [&str; 3] = DLEDGER_ORACLES;

/// JSON lines on stdout (the summary last), stderr, exit code.
fn run(args: &[&str]) -> (Vec<Value>, String, i32) {
    let out = bin().args(args).output().unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (lines, stderr, out.status.code().unwrap_or(-1))
}

fn store_arg(dir: &Path) -> String {
    dir.join("store").display().to_string()
}

fn java_json(dir: &Path, file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap()
}

/// The Java store's records that live in DLedger entries, in log order.
fn java_entries(dir: &Path) -> Vec<Value> {
    json_lines(&dir.join("messages.jsonl.gz"))
        .into_iter()
        .filter(|m| m["region"] == "dledger")
        .collect()
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn dump_dledger_lists_the_java_entries() {
    for name in DLEDGER {
        let Some(dir) = oracle(name) else { continue };
        let (mut lines, _, code) = run(&["dump", "dledger", &store_arg(&dir), "--json"]);
        assert_eq!(code, 0, "{name}");
        let summary = lines.pop().unwrap();
        let java = java_entries(&dir);
        assert!(java.len() > 2000, "{name}: {}", java.len());
        assert_eq!(lines.len(), java.len(), "{name}: entry count");
        assert_eq!(summary["entries"], java.len(), "{name}");
        assert_eq!(summary["gaps"], 0, "{name}");
        assert_eq!(summary["stopped"], Value::Null, "{name}");
        let mut pos = java[0]["dledgerPos"].as_i64().unwrap();
        for (i, (ours, j)) in lines.iter().zip(&java).enumerate() {
            assert_eq!(ours["type"], "dledger_entry");
            // index and term continuous, pos right after the last entry or at a file's start
            assert_eq!(ours["index"], i as i64, "{name}");
            assert_eq!(ours["index"], j["dledgerIndex"], "{name} {i}");
            assert_eq!(ours["term"], j["dledgerTerm"], "{name} {i}");
            assert_eq!(ours["pos"], j["dledgerPos"], "{name} {i}");
            assert_eq!(ours["size"], j["entrySize"], "{name} {i}");
            let p = ours["pos"].as_i64().unwrap();
            assert!(p == pos || p % 1_048_576 == 0 && p > pos, "{name} {i}");
            pos = p + ours["size"].as_i64().unwrap();
            // the wrapped record sits at pos + 48, where the Java store says the message is
            assert_eq!(ours["record_offset"], j["physicalOffset"], "{name} {i}");
            assert_eq!(
                ours["physical_offset"], j["storedPhysicalOffset"],
                "{name} {i}"
            );
            assert_eq!(ours["topic"], j["topic"], "{name} {i}");
            assert_eq!(ours["queue_id"], j["queueId"], "{name} {i}");
            assert_eq!(ours["queue_offset"], j["queueOffset"], "{name} {i}");
            assert_eq!(
                ours["uncommitted"],
                !j["committedAtLoad"].as_bool().unwrap(),
                "{name} {i}"
            );
            assert_eq!(ours["gap"], Value::Null);
        }
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn the_dledger_index_agrees_with_the_data() {
    for name in DLEDGER {
        let Some(dir) = oracle(name) else { continue };
        let (mut lines, _, code) = run(&["dump", "dledger", &store_arg(&dir), "--index", "--json"]);
        assert_eq!(code, 0, "{name}");
        let summary = lines.pop().unwrap();
        let entries = java_entries(&dir).len();
        assert_eq!(lines.len(), entries, "{name}");
        assert_eq!(summary["index_units"], entries, "{name}");
        assert_eq!(summary["index_disagreements"], 0, "{name}");
        for (i, u) in lines.iter().enumerate() {
            assert_eq!(u["type"], "dledger_index");
            assert_eq!(u["index"], i as i64);
            assert_eq!(u["magic"], 1);
            assert_eq!(u["state"], "agrees", "{name}: {u}");
        }
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn consume_queues_point_at_the_wrapped_records() {
    for name in DLEDGER {
        let Some(dir) = oracle(name) else { continue };
        let (mut lines, _, _) = run(&["dump", "dledger", &store_arg(&dir), "--json"]);
        lines.pop();
        let by_offset: HashMap<i64, &Value> = lines
            .iter()
            .map(|e| (e["record_offset"].as_i64().unwrap(), e))
            .collect();
        let divide = lines[0]["pos"].as_i64().unwrap();
        let mut checked = 0;
        for (topic, qid) in [("TopicA", 0), ("TopicB", 1), ("TopicC", 3)] {
            let qdir = dir
                .join("store/consumequeue")
                .join(topic)
                .join(qid.to_string());
            let first = std::fs::read_dir(&qdir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .min()
                .unwrap();
            let start: i64 = first
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            let bytes = std::fs::read(&first).unwrap();
            for (n, unit) in bytes.chunks_exact(20).enumerate() {
                let offset = i64::from_be_bytes(unit[0..8].try_into().unwrap());
                let size = i32::from_be_bytes(unit[8..12].try_into().unwrap());
                if offset == 0 && size == 0 {
                    break;
                }
                if offset < divide {
                    continue; // a converted store's record in commitlog/
                }
                let e = by_offset
                    .get(&offset)
                    .unwrap_or_else(|| panic!("{name} {topic}/{qid}: no entry record at {offset}"));
                assert_eq!(e["topic"], topic);
                assert_eq!(e["queue_id"], qid);
                assert_eq!(e["queue_offset"], start / 20 + n as i64);
                // the unit's size is the record's, not the entry's
                assert_eq!(e["size"].as_i64().unwrap(), i64::from(size) + 48);
                checked += 1;
            }
        }
        assert!(checked > 100, "{name}: {checked}");
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn info_gives_the_java_figures() {
    for name in DLEDGER {
        let Some(dir) = oracle(name) else { continue };
        let (lines, _, code) = run(&["info", &store_arg(&dir), "--json"]);
        assert_eq!(code, 0, "{name}");
        let info = &lines[0];
        assert_eq!(info["type"], "dledger_info");
        assert_eq!(lines.last().unwrap()["type"], "summary");
        let d = &info["dledger"];
        let java = java_json(&dir, "dledger.json");
        let j = &java["afterLoad"];
        assert_eq!(d["self_id"], "n0");
        for (ours, theirs) in [
            ("ledger_begin_index", "ledgerBeginIndex"),
            ("ledger_end_index", "ledgerEndIndex"),
            ("ledger_end_term", "ledgerEndTerm"),
            ("committed_index", "committedIndex"),
            ("committed_pos", "committedPos"),
            ("data_end_pos", "dataMaxWrotePosition"),
            ("index_end_pos", "indexMaxWrotePosition"),
            ("divided_commitlog_offset", "dividedCommitlogOffset"),
            ("current_term", "currTerm"),
            ("vote_leader", "voteFor"),
        ] {
            assert_eq!(d[ours], j[theirs], "{name}: {ours}");
        }
        let converted = name.contains("converted");
        assert_eq!(d["converted"], converted);
        assert_eq!(
            info["mode"],
            if converted {
                "dledger_converted"
            } else {
                "dledger"
            }
        );
        assert_eq!(
            info["commitlog_min_offset"], j["commitLogMinOffset"],
            "{name}"
        );
        assert_eq!(info["clean_shutdown"], !name.contains("crashed"));
        let g = java_json(&dir, "geometry.json");
        assert_eq!(
            d["geometry"]["data_file_size"]["value"],
            g["dledger_data_file_size"]
        );
        assert_eq!(
            d["geometry"]["index_file_size"]["value"],
            g["dledger_index_file_size"]
        );
        assert_eq!(d["geometry"]["data_file_size"]["source"], "inferred");
        let files = java["dataFiles"].as_array().unwrap();
        assert_eq!(d["data_files"].as_array().unwrap().len(), files.len());
        for (ours, theirs) in d["data_files"].as_array().unwrap().iter().zip(files) {
            assert_eq!(ours["name"], theirs["file"]);
            assert_eq!(ours["start"], theirs["fileFromOffset"]);
            assert_eq!(ours["size"], theirs["fileSize"]);
        }
        // and in text: never an empty commitlog
        let out = bin().args(["info", &store_arg(&dir)]).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("mode       DLedger, member n0"), "{text}");
        assert!(!text.contains("commitlog  0 files"), "{text}");
        let committed = format!(
            "committed  index {}, position {}",
            j["committedIndex"], j["committedPos"]
        );
        assert!(text.contains(&committed), "{text}");
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn the_broker_conf_gives_the_data_file_size() {
    let Some(dir) = oracle("dledger-4.9") else {
        return;
    };
    let conf = dir.join("broker.conf").display().to_string();
    let (lines, _, code) = run(&["info", &store_arg(&dir), "--json", "--broker-conf", &conf]);
    assert_eq!(code, 0);
    let g = &lines[0]["dledger"]["geometry"];
    assert_eq!(g["data_file_size"]["value"], 1_048_576);
    assert_eq!(g["data_file_size"]["source"], "broker_conf");
    assert_eq!(g["index_file_size"]["source"], "inferred");
}

/// A copy of the plain DLedger store, for damage.
fn copy_of_dledger(t: &Path) -> Option<std::path::PathBuf> {
    let dir = oracle("dledger-4.9")?;
    let to = t.join("store");
    let status = std::process::Command::new("cp")
        .args(["-r", "--no-preserve=mode"])
        .arg(dir.join("store"))
        .arg(&to)
        .status()
        .unwrap();
    assert!(status.success());
    Some(to)
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_damaged_entry_stops_the_dump_where_it_is() {
    let t = tempfile::tempdir().unwrap();
    let Some(store) = copy_of_dledger(t.path()) else {
        return;
    };
    let file = store.join("dledger-n0/data/00000000000001048576");
    let mut bytes = std::fs::read(&file).unwrap();
    let size: [u8; 4] = bytes[4..8].try_into().unwrap();
    // the entry at the start of the second file: a lying size, then a wrong magic
    bytes[4..8].copy_from_slice(&2_000_000i32.to_be_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let s = store.display().to_string();
    let (mut lines, stderr, code) = run(&["dump", "dledger", &s, "--json"]);
    assert_eq!(code, 1, "{stderr}");
    let summary = lines.pop().unwrap();
    let stopped = summary["stopped"].as_str().unwrap();
    assert!(
        stopped.contains("00000000000001048576: at byte 4"),
        "{stopped}"
    );
    assert!(
        stopped.contains("record size 2000000 is out of bounds"),
        "{stopped}"
    );
    assert!(lines.len() > 100 && lines.len() < 1000, "{}", lines.len());
    bytes[4..8].copy_from_slice(&size);
    bytes[0..4].copy_from_slice(&7i32.to_be_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let (mut lines, _, code) = run(&["dump", "dledger", &s, "--json"]);
    assert_eq!(code, 1);
    let stopped = lines.pop().unwrap()["stopped"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        stopped.contains("DLedger entry magic: expected 1 (entry) or -1 (file end), found 7"),
        "{stopped}"
    );
    // info says where the data stops instead of failing
    let out = bin().args(["info", &s]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("note       "));
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn an_index_unit_that_lies_is_named() {
    let t = tempfile::tempdir().unwrap();
    let Some(store) = copy_of_dledger(t.path()) else {
        return;
    };
    let file = store.join("dledger-n0/index/00000000000000000000");
    let mut bytes = std::fs::read(&file).unwrap();
    // unit 5: pos off by one
    let pos = i64::from_be_bytes(bytes[5 * 32 + 4..5 * 32 + 12].try_into().unwrap());
    bytes[5 * 32 + 4..5 * 32 + 12].copy_from_slice(&(pos + 1).to_be_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let (mut lines, _, code) = run(&[
        "dump",
        "dledger",
        &store.display().to_string(),
        "--index",
        "--json",
    ]);
    assert_eq!(code, 1);
    assert_eq!(lines.pop().unwrap()["index_disagreements"], 1);
    assert_eq!(lines[5]["state"], "disagrees");
    assert_eq!(lines[5]["field"], "pos");
    assert_eq!(lines[5]["unit_value"], pos + 1);
    assert_eq!(lines[5]["entry_value"], pos);
}

#[test]
fn dump_dledger_on_a_normal_store_says_so() {
    let (_, stderr, code) = run(&["dump", "dledger", fixture("store-4.9").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("not a DLedger-mode store: no dledger-<selfId>/data folder"),
        "{stderr}"
    );
}

/// The broker config of a DLedger oracle store with two more members in `dLegerPeers`: the
/// checkpoint rule then decides what is committed.
fn three_member_conf(dir: &Path, t: &Path) -> String {
    let conf = std::fs::read_to_string(dir.join("broker.conf")).unwrap();
    let conf: String = conf
        .lines()
        .map(|l| {
            if l.starts_with("dLegerPeers=") {
                "dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913\n".into()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let p = t.join("broker.conf");
    std::fs::write(&p, conf).unwrap();
    p.display().to_string()
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn dump_commitlog_lists_every_java_record_with_its_entry() {
    for name in DLEDGER {
        let Some(dir) = oracle(name) else { continue };
        let out = bin()
            .args([
                "dump",
                "commitlog",
                &store_arg(&dir),
                "--json",
                "--body",
                "none",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}");
        let ours: Vec<Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let summary: Value = String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["type"] == "summary")
            .unwrap();
        let java = json_lines(&dir.join("messages.jsonl.gz"));
        assert_eq!(ours.len(), java.len(), "{name}: record count");
        assert_eq!(summary["messages"], java.len(), "{name}");
        assert_eq!(summary["uncommitted"], 0, "{name}: single replica");
        let mut entries = 0;
        for (o, j) in ours.iter().zip(&java) {
            let ctx = format!("{name} @{}", j["physicalOffset"]);
            for (ours_k, java_k) in [
                ("commitlog_offset", "physicalOffset"),
                ("size", "size"),
                ("topic", "topic"),
                ("queue_id", "queueId"),
                ("queue_offset", "queueOffset"),
                ("sys_flag", "sysFlag"),
                ("store_timestamp", "storeTimestamp"),
                ("born_timestamp", "bornTimestamp"),
                ("body_crc", "bodyCRC"),
                ("msg_id", "offsetMsgId"),
                ("body_len", "bodyLen"),
                ("uniq_key", "uniqKey"),
                ("properties", "properties"),
            ] {
                assert_eq!(o[ours_k], j[java_k], "{ctx}: {ours_k}");
            }
            if j["region"] == "dledger" {
                entries += 1;
                assert_eq!(o["dledger_index"], j["dledgerIndex"], "{ctx}");
                assert_eq!(o["dledger_term"], j["dledgerTerm"], "{ctx}");
                assert_eq!(o["dledger_pos"], j["dledgerPos"], "{ctx}");
                assert_eq!(
                    o["commitlog_offset"].as_i64().unwrap(),
                    j["dledgerPos"].as_i64().unwrap() + 48,
                    "{ctx}"
                );
                assert_eq!(o["dledger_committed"], true, "{ctx}");
                assert!(o["file"].as_str().unwrap().contains("dledger-n0/data/"));
            } else {
                assert_eq!(j["region"], "commitlog");
                assert!(o.get("dledger_index").is_none(), "{ctx}");
                assert!(o["file"].as_str().unwrap().contains("/commitlog/"));
            }
        }
        assert!(entries > 2000, "{name}: {entries} entries");
        assert_eq!(
            entries < java.len(),
            name.contains("converted"),
            "{name}: the converted store's old records come first"
        );
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn rebuild_equals_the_brokers_files() {
    for name in DLEDGER {
        let Some(dir) = oracle(name) else { continue };
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("out");
        let o = bin()
            .args(["rebuild", &store_arg(&dir), "--json", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{name}");
        let s: Value = serde_json::from_slice(&o.stdout).unwrap();
        let q = java_queries(&dir);
        assert_eq!(s["end_commitlog_offset"], q["maxPhyOffset"], "{name}");
        assert_eq!(s["records"], q["messagesInCommitLog"], "{name}");
        assert!(
            tree(&out.join("consumequeue")) == tree(&dir.join("store/consumequeue")),
            "{name}: consume queues differ"
        );
        // index files: identical bytes; only the names (the broker's wall clock) differ
        let contents = |d: &Path| -> Vec<Vec<u8>> { tree(d).into_iter().map(|(_, b)| b).collect() };
        assert_eq!(
            contents(&out.join("index")),
            contents(&dir.join("store/index")),
            "{name}"
        );
        // the DLedger index from the data: the broker's files
        let di = t.path().join("di");
        let o = bin()
            .args([
                "rebuild",
                &store_arg(&dir),
                "--dledger-index",
                "--json",
                "--out",
            ])
            .arg(&di)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{name}");
        let s: Value = serde_json::from_slice(&o.stdout).unwrap();
        let java = java_json(&dir, "dledger.json");
        let end = java["afterLoad"]["ledgerEndIndex"].as_i64().unwrap();
        assert_eq!(s["dledger_index_units"], end + 1, "{name}");
        assert!(
            !di.join("consumequeue").exists(),
            "{name}: only the DLedger index"
        );
        assert!(
            tree(&di.join("dledger-n0/index")) == tree(&dir.join("store/dledger-n0/index")),
            "{name}: DLedger index differs"
        );
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn min_and_max_offsets_equal_java() {
    use rmqstore::engine::Store;
    use rmqstore::format::geometry::GeometryInputs;
    for name in DLEDGER {
        let Some(dir) = oracle(name) else { continue };
        let store = Store::open(&dir.join("store"), &GeometryInputs::default()).unwrap();
        let q = java_queries(&dir);
        assert_eq!(
            store.commitlog.min_offset() as i64,
            q["minPhyOffset"].as_i64().unwrap(),
            "{name}"
        );
        assert_eq!(
            store.commitlog.max_offset().unwrap() as i64,
            q["maxPhyOffset"].as_i64().unwrap(),
            "{name}"
        );
        let min = store.commitlog.min_offset();
        for jq in q["queues"].as_array().unwrap() {
            let topic = jq["topic"].as_str().unwrap();
            let qid = jq["queueId"].as_i64().unwrap() as i32;
            let Some(cq) = store.queue(topic, qid) else {
                // a queue the Java store makes at its start (the schedule levels): empty
                assert_eq!(jq["maxOffsetInQueue"], 0, "{name} {topic}/{qid}");
                continue;
            };
            assert_eq!(
                cq.max_offset().unwrap() as i64,
                jq["maxOffsetInQueue"].as_i64().unwrap(),
                "{name} {topic}/{qid}"
            );
            assert_eq!(
                cq.min_offset(min).unwrap() as i64,
                jq["minOffsetInQueue"].as_i64().unwrap(),
                "{name} {topic}/{qid}"
            );
        }
        // info says the rule and where the served records end
        let (lines, _, _) = run(&["info", &store_arg(&dir), "--json"]);
        let d = &lines[0]["dledger"];
        assert_eq!(d["commit_rule"], "single_replica", "{name}");
        assert_eq!(
            d["served_end"],
            java_json(&dir, "dledger.json")["afterStart"]["commitLogMaxOffset"],
            "{name}"
        );
    }
}

/// Our answers (the real binary) against the Java store's queries.json: queryMessage by key,
/// lookMessageByOffset by offset message id, getMessage by pull.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn queries_and_pulls_equal_java() {
    for name in DLEDGER {
        let Some(dir) = oracle(name) else { continue };
        let t = tempfile::tempdir().unwrap();
        let s = if name.contains("crashed") {
            // Java answered after its abnormal recovery deleted the newest index file (its end
            // time is past the checkpoint's index time) and re-dispatched nothing into the index
            // (the consume queues were whole): its key lookups miss what that file held
            let copy = t.path().join("store");
            copy_tree(&dir.join("store"), &copy);
            let mut index: Vec<_> = std::fs::read_dir(copy.join("index"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            index.sort();
            std::fs::remove_file(index.last().unwrap()).unwrap();
            copy.display().to_string()
        } else {
            store_arg(&dir)
        };
        let q = java_queries(&dir);
        let side = |stderr: &str, kind: &str| -> Value {
            stderr
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .rfind(|v| v["type"] == kind)
                .unwrap_or(Value::Null)
        };
        let mut keys = 0;
        for j in q["queryMessage"].as_array().unwrap() {
            let (topic, key) = (j["topic"].as_str().unwrap(), j["key"].as_str().unwrap());
            let max = j["maxNum"].to_string();
            let (ours, err, code) = run(&[
                "query", &s, "--topic", topic, "--key", key, "--max", &max, "--json", "--body",
                "none",
            ]);
            let mut want: Vec<i64> = j["physicalOffsets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            want.sort_unstable();
            if code == 2 {
                assert!(want.is_empty(), "{name} {topic}#{key}: {err}");
                continue;
            }
            let got: Vec<i64> = ours
                .iter()
                .map(|o| o["commitlog_offset"].as_i64().unwrap())
                .collect();
            assert_eq!(got, want, "{name} {topic}#{key}");
            let summary = side(&err, "summary");
            if !want.is_empty() {
                keys += 1;
                assert_eq!(
                    summary["index_last_update_commitlog_offset"], j["indexLastUpdatePhyoffset"],
                    "{name}"
                );
            }
        }
        assert!(keys > 10, "{name}: {keys} keys found");
        for j in q["lookMessageByOffset"].as_array().unwrap() {
            let id = j["msgId"].as_str().unwrap();
            let (ours, _, code) = run(&["query", &s, "--msg-id", id, "--json", "--body", "none"]);
            assert_eq!(code, 0, "{name} {id}");
            assert_eq!(ours.len(), 1, "{name} {id}");
            assert_eq!(ours[0]["commitlog_offset"], j["commitLogOffset"], "{name}");
            assert_eq!(ours[0]["size"], j["storeSize"], "{name}");
            assert_eq!(ours[0]["queue_offset"], j["queueOffset"], "{name}");
            assert_eq!(ours[0]["properties"], j["properties"], "{name}");
        }
        for c in q["getMessage"].as_array().unwrap() {
            let (topic, queue, offset, max) = (
                c["topic"].as_str().unwrap(),
                c["queueId"].to_string(),
                c["offset"].to_string(),
                c["maxMsgNums"].to_string(),
            );
            let (msgs, err, code) = run(&[
                "pull",
                &s,
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
            ]);
            assert!(code <= 1, "{name} {c}: {err}");
            let p = side(&err, "pull");
            assert_eq!(p["status"], c["status"], "{name} {c}");
            assert_eq!(p["next_begin_offset"], c["nextBeginOffset"], "{name} {c}");
            assert_eq!(p["min_offset"], c["minOffset"], "{name} {c}");
            assert_eq!(p["max_offset"], c["maxOffset"], "{name} {c}");
            let phys: Vec<&Value> = msgs.iter().map(|m| &m["commitlog_offset"]).collect();
            let want: Vec<&Value> = c["physicalOffsets"].as_array().unwrap().iter().collect();
            assert_eq!(phys, want, "{name} {c}");
        }
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn verify_checks_queues_and_index_against_the_dledger_records() {
    for name in DLEDGER {
        let Some(dir) = oracle(name) else { continue };
        let (lines, stderr, code) = run(&["verify", &store_arg(&dir), "--json"]);
        let summary = lines.last().unwrap();
        assert_eq!(summary["type"], "summary", "{name}");
        assert_eq!(summary["errors"], 0, "{name}: {lines:?}");
        // the crashed store's warnings (the abort file, an index file its start deletes) are
        // not errors
        assert_eq!(code, 0, "{name}");
        assert_eq!(summary["healthy"], true, "{name}");
        let java = java_queries(&dir);
        assert_eq!(summary["messages"], java["messagesInCommitLog"], "{name}");
        assert!(
            stderr.contains("DLedger-mode store (member n0") && stderr.contains("single-replica"),
            "{name}: {stderr}"
        );
    }
}

/// With other members in `dLegerPeers`, the checkpoint proves only entries 0..=2597 of the
/// crashed store: the 484 after them are shown as uncommitted and never served.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn uncommitted_entries_are_shown_and_never_served() {
    let Some(dir) = oracle("dledger-crashed-4.9") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let conf = three_member_conf(&dir, t.path());
    let s = store_arg(&dir);
    let java = java_json(&dir, "dledger.json");
    let committed_pos = java["afterLoad"]["committedPos"].as_u64().unwrap();
    let (lines, _, _) = run(&["info", &s, "--broker-conf", &conf, "--json"]);
    assert_eq!(lines[0]["dledger"]["commit_rule"], "checkpoint");
    assert_eq!(lines[0]["dledger"]["served_end"], committed_pos);
    // dump: every record, the uncommitted ones marked, as Java's committedAtLoad says
    let out = bin()
        .args([
            "dump",
            "commitlog",
            &s,
            "--broker-conf",
            &conf,
            "--json",
            "--body",
            "none",
        ])
        .output()
        .unwrap();
    let ours: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let records = json_lines(&dir.join("messages.jsonl.gz"));
    assert_eq!(ours.len(), records.len());
    let mut uncommitted = Vec::new();
    for (o, j) in ours.iter().zip(&records) {
        assert_eq!(
            o["dledger_committed"], j["committedAtLoad"],
            "{}",
            j["dledgerIndex"]
        );
        if o["dledger_committed"] == false {
            uncommitted.push(o.clone());
        }
    }
    assert_eq!(uncommitted.len(), 484);
    assert_eq!(uncommitted[0]["dledger_index"], 2598);
    assert_eq!(uncommitted[0]["dledger_pos"], committed_pos);
    assert!(stderr.contains("\"uncommitted\":484"), "{stderr}");
    assert!(
        stderr.contains("484 records are in uncommitted DLedger entries"),
        "{stderr}"
    );
    // never served: by offset id, by queue offset, by key, by pull, by rebuild
    let u = &uncommitted[0];
    let (found, _, code) = run(&[
        "query",
        &s,
        "--broker-conf",
        &conf,
        "--msg-id",
        u["msg_id"].as_str().unwrap(),
        "--json",
    ]);
    assert!(found.is_empty() && code == 1, "{found:?}");
    let (topic, queue, qoff) = (
        u["topic"].as_str().unwrap(),
        u["queue_id"].to_string(),
        u["queue_offset"].to_string(),
    );
    let (found, _, _) = run(&[
        "query",
        &s,
        "--broker-conf",
        &conf,
        "--topic",
        topic,
        "--queue",
        &queue,
        "--offset",
        &qoff,
        "--json",
    ]);
    assert!(found.is_empty(), "{found:?}");
    let (pulled, _, _) = run(&[
        "pull",
        &s,
        "--broker-conf",
        &conf,
        "--group",
        "G",
        "--topic",
        topic,
        "--queue",
        &queue,
        "--offset",
        "0",
        "--max",
        "1000",
        "--json",
        "--role",
        "slave",
    ]);
    assert!(!pulled.is_empty());
    assert!(
        pulled
            .iter()
            .all(|m| m["commitlog_offset"].as_u64().unwrap() < committed_pos),
        "a pull served an uncommitted record"
    );
    let out = t.path().join("out");
    let o = bin()
        .args(["rebuild", &s, "--broker-conf", &conf, "--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["end_commitlog_offset"], committed_pos);
    assert_eq!(r["records"], 2598);
    assert_eq!(r["units"], 2598);
}

/// The Java broker's records, re-appended through the store writer in DLedger mode (the
/// converted store: its old records first, then the switch), against the Java files: every entry
/// field by field and its wrapped record byte for byte, the data and DLedger index files, the
/// checkpoint and currterm, the old commitlog with the blank at its old end, and the consume
/// queues and index files dispatched from the DLedger positions.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn the_writer_in_dledger_mode_writes_the_brokers_files() {
    use rmqstore::engine::store::index_builder::IndexNaming;
    use rmqstore::engine::store::writer::{DledgerOutput, StoreWriter, WriterOptions};
    use rmqstore::format::commitlog::read::{parse_record, Record};
    use rmqstore::format::commitlog::{Commitlog, RecordIter};
    use rmqstore::format::dledger::walk::walk;
    use rmqstore::format::dledger::DledgerLayout;
    use rmqstore::format::geometry::{Geometry, GeometryInputs, Source, Sourced};
    use std::ops::ControlFlow;

    let entries = |store: &Path| {
        let l = DledgerLayout::find(store, &GeometryInputs::default())
            .unwrap()
            .unwrap();
        let mut out = Vec::new();
        let end = walk(&l, |v| {
            out.push((v.header, v.body.to_vec()));
            ControlFlow::Continue(())
        })
        .unwrap();
        assert!(
            end.stopped.is_none(),
            "{}: {:?}",
            store.display(),
            end.stopped
        );
        out
    };
    let mut compared = 0;
    for name in ["dledger-4.9", "dledger-converted-4.9"] {
        let Some(dir) = oracle(name) else { continue };
        compared += 1;
        let store = dir.join("store");
        let theirs = entries(&store);
        let t = tempfile::tempdir().unwrap();
        let ours_root = t.path().join("ours");
        let geometry = Geometry {
            commitlog_file_size: Sourced::new(1 << 20, Source::Flag),
            cq_file_units: Sourced::new(500, Source::Flag),
            index_slots: Sourced::new(1000, Source::Flag),
            index_entries: Sourced::new(4000, Source::Flag),
            ..Geometry::default()
        };
        let member = DledgerOutput {
            self_id: "n0".into(),
            term: 0,
            index_file_size: 65536,
        };
        let converted = store.join("commitlog").is_dir();
        let mut w = StoreWriter::create(
            &ours_root,
            WriterOptions {
                geometry,
                consumequeue: true,
                index: true,
                index_naming: IndexNaming::Utc,
                dledger: (!converted).then(|| member.clone()),
            },
        )
        .unwrap();
        if converted {
            let cl = Commitlog::open(&store.join("commitlog")).unwrap();
            for seg in &cl.segments {
                let map = seg.map().unwrap();
                for r in RecordIter::new(&map, seg, true) {
                    w.append_record(&r.unwrap()).unwrap();
                }
            }
            w.convert_to_dledger(member).unwrap();
        }
        for (h, body) in &theirs {
            let m = match parse_record(body, 0, h.record_offset() as u64, false).unwrap() {
                Record::Message(m) => m,
                other => panic!("{name}: entry {}: {other:?}", h.index),
            };
            let a = w.append_record(&m).unwrap();
            assert_eq!(a.wrote_offset as i64, h.record_offset(), "{name}");
        }
        w.finish().unwrap();

        // entry by entry, field by field, against the Java reader's view and the Java bytes
        let ours = entries(&ours_root);
        let java = java_entries(&dir);
        assert_eq!(ours.len(), theirs.len(), "{name}");
        assert_eq!(ours.len(), java.len(), "{name}");
        for (((o, ob), (th, tb)), j) in ours.iter().zip(&theirs).zip(&java) {
            let i = th.index;
            assert_eq!(o.index, j["dledgerIndex"].as_i64().unwrap(), "{name} {i}");
            assert_eq!(o.term, j["dledgerTerm"].as_i64().unwrap(), "{name} {i}");
            assert_eq!(o.pos, j["dledgerPos"].as_i64().unwrap(), "{name} {i}");
            assert_eq!(
                o.size as i64,
                j["entrySize"].as_i64().unwrap(),
                "{name} {i}"
            );
            assert_eq!(
                o.magic as i64,
                j["dledgerMagic"].as_i64().unwrap(),
                "{name} {i}"
            );
            assert_eq!(
                o.channel as i64,
                j["dledgerChannel"].as_i64().unwrap(),
                "{name} {i}"
            );
            assert_eq!(
                o.chain_crc as i64,
                j["dledgerChainCrc"].as_i64().unwrap(),
                "{name} {i}"
            );
            assert_eq!(
                o.body_crc as i64,
                j["dledgerBodyCrc"].as_i64().unwrap(),
                "{name} {i}"
            );
            assert_eq!(o, th, "{name} {i}: header");
            assert!(ob == tb, "{name} {i}: wrapped record bytes differ");
        }
        // the files: data (blank markers, zero tails), DLedger index, checkpoint, currterm
        for sub in ["data", "index"] {
            assert!(
                tree(&ours_root.join("dledger-n0").join(sub))
                    == tree(&store.join("dledger-n0").join(sub)),
                "{name}: dledger-n0/{sub} differs"
            );
        }
        for f in ["checkpoint", "checkpoint.bak", "currterm"] {
            assert_eq!(
                std::fs::read_to_string(ours_root.join("dledger-n0").join(f)).unwrap(),
                std::fs::read_to_string(store.join("dledger-n0").join(f)).unwrap(),
                "{name}: {f}"
            );
        }
        if converted {
            assert!(
                tree(&ours_root.join("commitlog")) == tree(&store.join("commitlog")),
                "{name}: commitlog/ (and the blank at its old end) differs"
            );
        }
        assert!(
            tree(&ours_root.join("consumequeue")) == tree(&store.join("consumequeue")),
            "{name}: consume queues differ"
        );
        let contents = |d: &Path| -> Vec<Vec<u8>> { tree(d).into_iter().map(|(_, b)| b).collect() };
        assert_eq!(
            contents(&ours_root.join("index")),
            contents(&store.join("index")),
            "{name}: index files differ"
        );
    }
    assert_eq!(compared, 2, "the DLedger oracle stores are missing");
}

/// `gen --dledger` (plain and converted) writes stores that verify clean, whose consume queues
/// and index files `rebuild` reproduces, with the same messages as the normal-mode store.
#[test]
fn gen_dledger_stores_verify_clean_and_rebuild_the_same() {
    let t = tempfile::tempdir().unwrap();
    let small = [
        "--messages",
        "2500",
        "--commitlog-file-size",
        "1048576",
        "--cq-file-units",
        "500",
        "--index-slots",
        "1000",
        "--index-entries",
        "4000",
        "--json",
    ];
    let gen = |name: &str, extra: &[&str]| -> (std::path::PathBuf, Value) {
        let d = t.path().join(name);
        let o = bin()
            .arg("gen")
            .arg(&d)
            .args(small)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", said(&o.stderr));
        (d, serde_json::from_slice(&o.stdout).unwrap())
    };
    let (normal, ns) = gen("normal", &[]);
    let (plain, ps) = gen(
        "dledger",
        &["--dledger", "--dledger-index-file-size", "4096"],
    );
    let (conv, cs) = gen(
        "converted",
        &["--dledger", "--converted", "--dledger-term", "3"],
    );
    assert_eq!(ps["records"], ns["records"]);
    assert_eq!(ps["dledger_entries"], ns["records"]);
    assert_eq!(ps["divided_commitlog_offset"], Value::Null);
    assert_eq!(cs["divided_commitlog_offset"], 2097152);
    let old = cs["records"].as_u64().unwrap() - cs["dledger_entries"].as_u64().unwrap();
    assert!(
        old > 0 && cs["dledger_entries"].as_u64().unwrap() > 0,
        "{cs}"
    );
    // the DLedger index of 4096-byte files: 128 units each, the last padded
    let ix: Vec<_> = std::fs::read_dir(plain.join("dledger-n0/index"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    let entries = ps["dledger_entries"].as_u64().unwrap();
    assert_eq!(ix.len() as u64, entries.div_ceil(128));
    assert!(ix.iter().all(|&l| l == 4096));
    assert_eq!(
        std::fs::read_to_string(conv.join("dledger-n0/currterm")).unwrap(),
        "voteLeader=n0\ncurrTerm=3\n"
    );
    for d in [&normal, &plain, &conv] {
        let s = d.display().to_string();
        let (lines, stderr, code) = run(&["verify", &s, "--json"]);
        assert_eq!(code, 0, "{s}: {stderr} {lines:?}");
        let sum = lines.last().unwrap();
        assert_eq!(sum["errors"], 0, "{s}");
        assert_eq!(sum["warnings"], 0, "{s}");
        let out = t.path().join(format!(
            "{}-rebuilt",
            d.file_name().unwrap().to_str().unwrap()
        ));
        let (lines, stderr, code) = run(&["rebuild", &s, "--json", "--out", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{s}: {stderr}");
        assert_eq!(lines.last().unwrap()["records"], ns["records"], "{s}");
        assert!(
            tree(&out.join("consumequeue")) == tree(&d.join("consumequeue")),
            "{s}: consume queues differ"
        );
        let contents = |d: &Path| -> Vec<Vec<u8>> { tree(d).into_iter().map(|(_, b)| b).collect() };
        assert_eq!(
            contents(&out.join("index")),
            contents(&d.join("index")),
            "{s}"
        );
    }
    // the same messages in every mode: bodies and keys by queue offset
    let dump = |d: &Path| -> Vec<(Value, Value, Value, Value)> {
        let (lines, _, code) = run(&["dump", "commitlog", d.to_str().unwrap(), "--json"]);
        assert_eq!(code, 0);
        lines
            .iter()
            .filter(|l| l["type"] == "message")
            .map(|l| {
                (
                    l["topic"].clone(),
                    l["queue_offset"].clone(),
                    l["body_crc"].clone(),
                    l["keys"].clone(),
                )
            })
            .collect()
    };
    let n = dump(&normal);
    assert_eq!(n.len() as u64, ns["records"].as_u64().unwrap());
    assert!(dump(&plain) == n);
    assert!(dump(&conv) == n);
}

/// What a group left behind on a DLedger-mode store, exported and replayed: GroupA's 25 DLQ
/// messages (all it had not consumed), each found again at its offset by its id, and a replay of
/// the group that runs to idle and keeps the group's offsets.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn export_and_replay_hand_on_what_a_group_left() {
    for name in ["dledger-4.9", "dledger-converted-4.9"] {
        let Some(dir) = oracle(name) else { continue };
        let store = dir.join("store");
        let s = store.to_str().unwrap();
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("left.jsonl");
        let out = bin()
            .args([
                "export",
                s,
                "--group",
                "GroupA",
                "--include",
                "retry,delayed,dlq",
            ])
            .arg("--out")
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
        let lines: Vec<Value> = std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 25, "{name}");
        for m in &lines {
            assert_eq!(m["topic"], "%DLQ%GroupA", "{name}");
            let id = m["msg_id"].as_str().unwrap();
            let (found, _, code) = run(&["query", s, "--msg-id", id, "--json"]);
            assert_eq!(code, 0, "{name}: {id}");
            assert_eq!(
                found[0]["commitlog_offset"], m["commitlog_offset"],
                "{name}"
            );
            assert_eq!(found[0]["body_crc"], m["body_crc"], "{name}");
        }
        let overlay = t.path().join("overlay");
        let out = bin()
            .args([
                "replay",
                s,
                "--group",
                "GroupA",
                "--exec",
                "true",
                "--until-idle",
            ])
            .arg("--overlay")
            .arg(&overlay)
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
        // nothing was left to consume: the group's offsets are where they were
        let topic_a = |file: &Path| -> String {
            let text = std::fs::read_to_string(file).unwrap();
            let at = text.find("\"TopicA@GroupA\"").expect("TopicA@GroupA");
            text[at..]
                .split('}')
                .next()
                .unwrap()
                .replace(char::is_whitespace, "")
        };
        assert_eq!(
            topic_a(&overlay.join("config/consumerOffset.json")),
            topic_a(&store.join("config/consumerOffset.json")),
            "{name}"
        );
    }
}
