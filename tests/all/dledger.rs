//! DLedger-mode stores: `dump dledger` and `info` against the Java answers of the three DLedger
//! oracle stores (plain, crashed, converted from normal mode), the consume queues pointing at
//! the wrapped records, damaged entries named by file and offset, and every command that does
//! not read DLedger data yet refusing such a store.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::common::*;

const DLEDGER: [&str; 3] = [
    "dledger-4.9",
    "dledger-crashed-4.9",
    "dledger-converted-4.9",
];

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

/// `args` (the store inserted after the first `words` words) exit 2 naming the command.
fn refuses(words: usize, args: &[&str]) {
    let Some(dir) = oracle("dledger-4.9") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let out_dir = t.path().join("out").display().to_string();
    let store = store_arg(&dir);
    let mut a: Vec<&str> = args[..words].to_vec();
    a.push(&store);
    a.extend(
        args[words..]
            .iter()
            .map(|s| if *s == "OUT" { out_dir.as_str() } else { s }),
    );
    let out = bin().args(&a).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{a:?}: {stderr}");
    let command = args[..words].join(" ");
    assert!(
        stderr.contains(&format!(
            "DLedger-mode store: {command} does not read DLedger data yet"
        )),
        "{a:?}: {stderr}"
    );
    assert!(out.stdout.is_empty(), "{a:?}");
    assert!(!t.path().join("out").exists(), "{a:?} wrote its output");
}

macro_rules! refusal {
    ($($name:ident: $words:expr, [$($arg:expr),*];)*) => {$(
        #[test]
        #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
        fn $name() {
            refuses($words, &[$($arg),*]);
        }
    )*};
}

refusal! {
    verify_refuses_a_dledger_store: 1, ["verify"];
    verify_explain_recovery_refuses_a_dledger_store: 1, ["verify", "--explain-recovery", "--json"];
    repair_refuses_a_dledger_store: 1, ["repair", "--dry-run"];
    repair_out_refuses_a_dledger_store: 1, ["repair", "--out", "OUT"];
    rebuild_refuses_a_dledger_store: 1, ["rebuild", "--out", "OUT"];
    dump_commitlog_refuses_a_dledger_store: 2, ["dump", "commitlog"];
    dump_consumequeue_refuses_a_dledger_store: 2, ["dump", "consumequeue", "-t", "TopicA"];
    dump_index_refuses_a_dledger_store: 2, ["dump", "index"];
    query_refuses_a_dledger_store: 1, ["query", "-t", "TopicA", "-q", "0", "-o", "0"];
    pull_refuses_a_dledger_store: 1, ["pull", "-g", "GroupA", "-t", "TopicA"];
    trace_refuses_a_dledger_store: 1, ["trace", "--msg-id", "7F00000100002A9F0000000000000030"];
    pending_refuses_a_dledger_store: 1, ["pending"];
    export_refuses_a_dledger_store: 1, ["export", "-g", "GroupA", "--out", "OUT"];
    replay_refuses_a_dledger_store: 1, ["replay", "-g", "GroupA", "--exec", "true"];
    offsets_refuses_a_dledger_store: 1, ["offsets", "show"];
    config_refuses_a_dledger_store: 1, ["config", "topics", "show"];
    serve_refuses_a_dledger_store: 1, ["serve", "--listen", "127.0.0.1:0"];
}
