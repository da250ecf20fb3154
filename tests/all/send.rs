//! `send`, before a live cluster: its plans (`--dry-run`) count what `dump` and `export` count, on
//! the oracle stores, on an export file and on a salvage store made by `repair`; an export file
//! reads back into the messages it was written from; journals in the wrong place or of another
//! send are refused. (The loop, the journal and the translation rules have unit tests beside
//! them; sending to a real broker is tested with the broker.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use rmqstore::engine::store::message_json::read_line;
use rmqstore::engine::store::reader::Reader;
use rmqstore::engine::Store;
use rmqstore::format::geometry::GeometryInputs;
use serde_json::Value;

/// The JSON lines of a run's stdout.
fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `send ARGS --dry-run --json`: its lines and its summary.
fn plan(args: &[&std::ffi::OsStr]) -> (Vec<Value>, Value) {
    let out = bin()
        .arg("send")
        .args(args)
        .args(["--dry-run", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.code() == Some(0),
        "{args:?}: exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut l = lines(&out.stdout);
    let summary = l.pop().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["command"], "send");
    (l, summary)
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

/// Records of `dump commitlog` per (topic, queue), and every record as its JSON line.
fn dump(store: &Path) -> (BTreeMap<(String, i64), u64>, Vec<Value>) {
    let out = bin()
        .args(["dump", "commitlog"])
        .arg(store)
        .args(["--json", "--body", "none"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let records = lines(&out.stdout);
    let mut per = BTreeMap::new();
    for r in &records {
        *per.entry((
            r["topic"].as_str().unwrap().to_string(),
            r["queue_id"].as_i64().unwrap(),
        ))
        .or_insert(0) += 1;
    }
    (per, records)
}

fn sum_of(v: &Value) -> u64 {
    v.as_object()
        .map(|o| o.values().map(|x| x.as_u64().unwrap()).sum())
        .unwrap_or(0)
}

/// Messages a plan found in `topic`, over every target topic.
fn found_in(summary: &Value, topic: &str) -> u64 {
    summary["topics"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| t["found_in"][topic].as_u64().unwrap_or(0))
        .sum()
}

/// A whole store's plan: every record is a message to send or passed over; every record of a
/// topic is planned for that topic; its undecided transactions are listed.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn dry_run_on_the_oracle_stores_counts_what_dump_counts() {
    for name in ["basic-4.9", "basic-5.x", "timer-5.x"] {
        let Some(o) = oracle(name) else { return };
        let store = o.join("store");
        let (per, records) = dump(&store);
        let (plan_lines, s) = plan(&[store.as_os_str()]);
        assert_eq!(
            s["messages"].as_u64().unwrap() + sum_of(&s["passed_over"]),
            records.len() as u64,
            "{name}"
        );
        let planned: u64 = plan_lines
            .iter()
            .filter(|l| l["type"] == "send_plan")
            .map(|l| l["messages"].as_u64().unwrap())
            .sum();
        assert_eq!(
            planned + s["undecided"].as_u64().unwrap(),
            s["messages"].as_u64().unwrap()
        );
        let mut plain = 0;
        for t in ["TopicA", "TopicB", "TopicC"] {
            let n: u64 = per
                .iter()
                .filter(|((tp, _), _)| tp == t)
                .map(|(_, n)| n)
                .sum();
            assert_eq!(found_in(&s, t), n, "{name} {t}");
            assert_eq!(
                s["topics"][t]["found_in"][t].as_u64().unwrap(),
                n,
                "{name} {t}"
            );
            plain += n;
        }
        assert_eq!(s["by_source"]["topic"].as_u64().unwrap(), plain, "{name}");
        let undecided = plan_lines.iter().filter(|l| l["type"] == "send").count() as u64;
        assert_eq!(undecided, s["undecided"].as_u64().unwrap());
        if name != "timer-5.x" {
            assert_eq!(undecided, 5, "{name}");
            assert_eq!(s["by_source"]["delayed"], 66, "{name}");
        } else {
            assert_eq!(s["by_source"]["timer"], 64);
        }
        // the journal would be beside the store, outside it
        let j = PathBuf::from(s["journal"].as_str().unwrap());
        assert_eq!(j.file_name().unwrap(), "store.send-journal");
        assert!(!j.exists(), "a dry run wrote the journal");
        assert!(s["unchecked"].as_str().unwrap().contains("no --namesrv"));
    }
}

/// `--group` plans what `export --group` exports, and the export file plans the same sends.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn dry_run_of_a_group_and_of_its_export_file_plan_what_export_exports() {
    let Some(o) = oracle("basic-4.9") else { return };
    let store = o.join("store");
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("a.jsonl");
    let out = bin()
        .arg("export")
        .arg(&store)
        .args(["-g", "GroupA", "--include", "all", "--json", "--out"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let export = lines(&out.stdout).pop().unwrap();
    // at the store's own time, the delayed messages keep a delay
    let now = os("2026-11-30T21:11:00Z");
    let journal = t.path().join("j");
    let args = |src: &Path| -> Vec<std::ffi::OsString> {
        vec![
            src.as_os_str().to_owned(),
            "--now".into(),
            now.to_owned(),
            "--journal".into(),
            journal.as_os_str().to_owned(),
        ]
    };
    let mut g = args(&store);
    g.extend([
        "-g".into(),
        "GroupA".into(),
        "--include".into(),
        "all".into(),
    ]);
    let g: Vec<&std::ffi::OsStr> = g.iter().map(|a| a.as_os_str()).collect();
    let (group_lines, gs) = plan(&g);
    assert_eq!(gs["messages"], export["messages"]);
    assert_eq!(gs["by_source"], export["by_source"]);
    assert!(gs["delayed"].as_u64().unwrap() > 0);
    let f = args(&file);
    let f: Vec<&std::ffi::OsStr> = f.iter().map(|a| a.as_os_str()).collect();
    let (file_lines, fs) = plan(&f);
    assert_eq!(fs["source_kind"], "export_file");
    for k in ["messages", "delayed", "released", "undecided", "by_source"] {
        assert_eq!(fs[k], gs[k], "{k}");
    }
    let queues = |l: &[Value]| -> Vec<(String, Value, u64, u64)> {
        l.iter()
            .filter(|l| l["type"] == "send_plan")
            .map(|l| {
                (
                    l["topic"].as_str().unwrap().to_string(),
                    l["queue_id"].clone(),
                    l["messages"].as_u64().unwrap(),
                    l["delayed"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(queues(&file_lines), queues(&group_lines));
}

/// `dump`'s and `query`'s selection: a topic and queue, a range of positions, a key, an id.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn dry_run_selects_as_dump_and_query_do() {
    let Some(o) = oracle("basic-4.9") else { return };
    let store = o.join("store");
    let (per, records) = dump(&store);
    let s = store.as_os_str();
    let (lines_q, q) = plan(&[s, os("--topic"), os("TopicB"), os("--queue"), os("2")]);
    assert_eq!(found_in(&q, "TopicB"), per[&("TopicB".to_string(), 2)]);
    assert!(lines_q
        .iter()
        .filter(|l| l["type"] == "send_plan")
        .all(|l| l["topic"] == "TopicB" && l["queue_id"] == 2));
    // positions: the records of TopicA between two offsets
    let a: Vec<&Value> = records.iter().filter(|r| r["topic"] == "TopicA").collect();
    let (begin, end) = (
        a[100]["commitlog_offset"].as_u64().unwrap(),
        a[400]["commitlog_offset"].as_u64().unwrap(),
    );
    let (b, e) = (begin.to_string(), end.to_string());
    let (_, r) = plan(&[
        s,
        os("--topic"),
        os("TopicA"),
        os("--begin"),
        os(&b),
        os("--end"),
        os(&e),
    ]);
    assert_eq!(found_in(&r, "TopicA"), 300);
    // a key, an id
    let keyed = a
        .iter()
        .find(|r| !r["keys"].as_array().unwrap().is_empty())
        .unwrap();
    let key = keyed["keys"][0].as_str().unwrap();
    let with_key = records
        .iter()
        .filter(|r| {
            r["topic"] == "TopicA" && r["keys"].as_array().unwrap().iter().any(|k| k == key)
        })
        .count() as u64;
    let (_, k) = plan(&[s, os("--topic"), os("TopicA"), os("--key"), os(key)]);
    assert_eq!(found_in(&k, "TopicA"), with_key);
    let id = a[7]["msg_id"].as_str().unwrap();
    let (_, i) = plan(&[s, os("--msg-id"), os(id)]);
    assert_eq!(i["messages"], 1);
    let uniq = a[7]["uniq_key"].as_str().unwrap();
    let (_, u) = plan(&[s, os("--msg-id"), os(uniq)]);
    assert_eq!(found_in(&u, "TopicA"), 1);
}

/// Every line of an export file reads back into the record it was written from.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn an_export_file_reads_back_into_the_exported_messages() {
    for name in ["basic-4.9", "basic-5.x"] {
        let Some(o) = oracle(name) else { return };
        let root = o.join("store");
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("a.jsonl");
        bin()
            .arg("export")
            .arg(&root)
            .args(["-g", "GroupA", "--include", "all", "--out"])
            .arg(&file)
            .assert()
            .success();
        let store = Store::open(&root, &GeometryInputs::default()).unwrap();
        let reader = Reader::new(&store);
        let text = std::fs::read_to_string(&file).unwrap();
        let mut n = 0;
        let mut compressed = 0;
        for line in text.lines() {
            let back = read_line(line.as_bytes()).unwrap();
            let at = reader.message_at(back.commitlog_offset).unwrap().unwrap();
            let was = at.message.to_owned_message();
            let m = &back.message;
            assert_eq!(
                (&m.topic, m.queue_id, m.flag, m.queue_offset, m.sys_flag),
                (
                    &was.topic,
                    was.queue_id,
                    was.flag,
                    was.queue_offset,
                    was.sys_flag
                )
            );
            assert_eq!(
                (
                    m.born_timestamp,
                    m.born_host,
                    m.store_timestamp,
                    m.store_host
                ),
                (
                    was.born_timestamp,
                    was.born_host,
                    was.store_timestamp,
                    was.store_host
                )
            );
            assert_eq!(
                (m.reconsume_times, m.prepared_transaction_offset),
                (was.reconsume_times, was.prepared_transaction_offset)
            );
            assert_eq!(m.properties().to_map(), was.properties().to_map());
            if at.message.is_compressed() {
                compressed += 1;
                let body = |m: &rmqstore::format::commitlog::Message| {
                    rmqstore::format::compression::decompress(m.sys_flag, &m.body).unwrap()
                };
                assert_eq!(body(m), body(&was));
            } else {
                assert_eq!(m.body, was.body);
            }
            assert_eq!(back.msg_id, at.message.offset_msg_id());
            assert!(back.extra.contains_key("export_source"));
            n += 1;
        }
        assert!(n > 2000, "{name}: {n}");
        assert!(compressed > 0, "{name}: no compressed body exported");
    }
}

/// A store made by `repair` from what followed a cut: its plan holds every salvaged record,
/// whether the salvage store or its repair folder is named; the listing is not a source.
#[test]
fn dry_run_on_a_salvage_store() {
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
    let repaired = bin()
        .arg("repair")
        .arg(&damaged)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(repaired.status.success());
    let said = String::from_utf8_lossy(&repaired.stdout);
    let folder = repair_folder(&out).unwrap();
    let salvaged = folder.join("salvaged");
    assert!(
        said.contains(&format!("rmqstore send {}", salvaged.display())),
        "repair does not name the next step: {said}"
    );
    let listed = std::fs::read_to_string(folder.join("salvaged.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert!(listed > 100, "{listed}");
    let (_, s) = plan(&[salvaged.as_os_str()]);
    assert_eq!(s["source_kind"], "salvage_store");
    assert_eq!(
        s["messages"].as_u64().unwrap() + sum_of(&s["passed_over"]),
        listed
    );
    // the default journal is beside the repaired store, outside every store
    let j = PathBuf::from(s["journal"].as_str().unwrap());
    let out_real = out.canonicalize().unwrap();
    assert!(!j.starts_with(&out_real), "{}", j.display());
    assert_eq!(j.parent().unwrap(), out_real.parent().unwrap());
    // the repair folder names the same store
    let (_, f) = plan(&[folder.as_os_str()]);
    assert_eq!(f["messages"], s["messages"]);
    assert_eq!(f["source"], s["source"]);
    // the listing has no bodies: refused, with the way to the store
    let e = bin()
        .arg("send")
        .arg(folder.join("salvaged.jsonl"))
        .arg("--dry-run")
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("salvaged/"));
}

/// A journal inside a store, or written for another source, is refused (exit 2), and neither is
/// touched.
#[test]
fn journals_in_a_store_or_of_another_send_are_refused() {
    use rmqstore::send::journal::{Access, Journal, JournalHeader};
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    let inside = store.join("sent.journal");
    let e = bin()
        .arg("send")
        .arg(&store)
        .arg("--dry-run")
        .arg("--journal")
        .arg(&inside)
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("inside"),
        "{}",
        String::from_utf8_lossy(&e.stderr)
    );
    assert!(!inside.exists());
    // a journal another send wrote
    let j = t.path().join("j");
    let other = JournalHeader {
        source: "/elsewhere/store".into(),
        kind: "store".into(),
        fingerprint: "1 files, 10 bytes, 00".into(),
        selection: "all".into(),
        target: "namesrv 127.0.0.1:9".into(),
    };
    let mut w = Journal::open(&j, &other, Access::Write, std::time::Duration::ZERO).unwrap();
    w.record_acked(&[(0, 0), (1, 200)]).unwrap();
    drop(w);
    let before = std::fs::read(&j).unwrap();
    for dry in [true, false] {
        let mut c = bin();
        c.arg("send")
            .arg(&store)
            .args(["--namesrv", "127.0.0.1:9", "--journal"])
            .arg(&j);
        if dry {
            c.arg("--dry-run");
        }
        let e = c.output().unwrap();
        assert_eq!(e.status.code(), Some(2));
        let err = String::from_utf8_lossy(&e.stderr);
        assert!(
            err.contains("another send") && err.contains("/elsewhere/store"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(&j).unwrap(), before);
}

/// Without a target there is nothing to send to; a send that cannot reach its cluster stops with
/// exit 2 and records nothing.
#[test]
fn a_send_needs_a_cluster() {
    let t = tempfile::tempdir().unwrap();
    let store = fixture("store-4.9");
    let e = bin().arg("send").arg(&store).output().unwrap();
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("--namesrv"));
    let j = t.path().join("j");
    let e = bin()
        .arg("send")
        .arg(&store)
        .args(["--namesrv", "127.0.0.1:9", "--journal"])
        .arg(&j)
        .output()
        .unwrap();
    assert_eq!(
        e.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&e.stderr)
    );
    if j.exists() {
        let text = std::fs::read_to_string(&j).unwrap();
        assert_eq!(text.lines().count(), 1, "more than a header: {text}");
    }
}

#[test]
fn export_help_names_the_way_back() {
    let out = bin().args(["export", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("rmqstore send"));
}

/// A body that fails its CRC is never sent: the walk stops there as the broker's recovery does,
/// said in the plan, exit 1.
#[test]
fn a_damaged_body_is_never_sent() {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    let (_, records) = dump(&store);
    let victim = records[records.len() / 2..]
        .iter()
        .find(|r| r["body_len"].as_u64().unwrap() > 0)
        .unwrap();
    let at = victim["commitlog_offset"].as_u64().unwrap();
    let file = PathBuf::from(victim["file"].as_str().unwrap());
    let start: u64 = file.file_name().unwrap().to_str().unwrap().parse().unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let pos = (at - start) as usize;
    let body_at = match rmqstore::format::commitlog::parse_record(&bytes, pos, start, true) {
        Ok(rmqstore::format::commitlog::Record::Message(m)) => pos + m.body_len_pos + 4,
        _ => panic!("no record at {at}"),
    };
    bytes[body_at] ^= 0x10;
    std::fs::write(&file, bytes).unwrap();
    let out = bin()
        .arg("send")
        .arg(&store)
        .args(["--dry-run", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = lines(&out.stdout).pop().unwrap();
    assert_eq!(s["stopped"]["key"].as_u64(), Some(at), "{s}");
    let before = records
        .iter()
        .filter(|r| r["commitlog_offset"].as_u64().unwrap() < at)
        .count() as u64;
    assert_eq!(
        s["messages"].as_u64().unwrap() + sum_of(&s["passed_over"]),
        before
    );
}

/// `--client-dir`: a broadcasting consumer's group sends what `export --client-dir` exports.
#[test]
fn a_client_dir_group_sends_what_export_exports() {
    use rmqstore::engine::broker::offsets::OffsetFile;
    use rmqstore::engine::broker::rebalance::MessageQueue;
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    bin()
        .arg("gen")
        .arg(&store)
        .args(["--messages", "300", "--commitlog-file-size", "262144"])
        .assert()
        .success();
    let d = t
        .path()
        .join("offsets")
        .join("10.0.0.5@DEFAULT")
        .join("BcastGroup");
    std::fs::create_dir_all(&d).unwrap();
    let mut f = OffsetFile::default();
    f.set(&MessageQueue::new("OrderTopic", "broker-a", 0), 3);
    f.set(&MessageQueue::new("OrderTopic", "broker-a", 1), 5);
    std::fs::write(d.join("offsets.json"), f.to_pretty()).unwrap();
    let before = std::fs::read(d.join("offsets.json")).unwrap();
    let out = bin()
        .arg("export")
        .arg(&store)
        .arg("--client-dir")
        .arg(&d)
        .args(["--json", "--out"])
        .arg(t.path().join("b.jsonl"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let export = lines(&out.stdout).pop().unwrap();
    let (_, s) = plan(&[store.as_os_str(), os("--client-dir"), d.as_os_str()]);
    assert_eq!(s["messages"], export["messages"]);
    assert!(s["messages"].as_u64().unwrap() > 0);
    assert_eq!(std::fs::read(d.join("offsets.json")).unwrap(), before);
}
