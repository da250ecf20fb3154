//! Memory bounded by output (findings capped per code, every one counted), unfinished writer
//! output that no read command takes for a store, and the small rules of verify, info, dump,
//! query and config: each on real files through the real binary.

use crate::common::{bin, fixture, interrupted_at};

use std::path::{Path, PathBuf};

use rmqstore::engine::Store;
use rmqstore::format::commitlog::{RecordIter, Segment};
use rmqstore::format::consumequeue::UNIT_SIZE;
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::format::mapped::Mapped;
use serde_json::Value;

fn copy_store(src: &Path) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("store");
    crate::common::copy_tree(src, &root);
    (t, root)
}

/// `verify --json`: exit code, findings, summary.
fn verify_json(root: &Path, args: &[&str]) -> (i32, Vec<Value>, Value) {
    let out = bin()
        .arg("verify")
        .arg(root)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let mut lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.pop().expect("a summary line");
    assert_eq!(summary["type"], "summary");
    (out.status.code().unwrap(), lines, summary)
}

fn with_code<'a>(findings: &'a [Value], code: &str) -> Vec<&'a Value> {
    findings.iter().filter(|f| f["code"] == code).collect()
}

/// Every unit of OrderTopic/0's first file made to point at the record of the unit after it.
fn shift_units(root: &Path) -> PathBuf {
    let cq = root.join("consumequeue/OrderTopic/0/00000000000000000000");
    let mut b = std::fs::read(&cq).unwrap();
    let units = b.len() / UNIT_SIZE;
    for i in 0..units - 1 {
        let next: Vec<u8> = b[(i + 1) * UNIT_SIZE..(i + 2) * UNIT_SIZE].to_vec();
        if next.iter().all(|&x| x == 0) {
            break;
        }
        b[i * UNIT_SIZE..(i + 1) * UNIT_SIZE].copy_from_slice(&next);
    }
    std::fs::write(&cq, b).unwrap();
    cq
}

#[test]
fn findings_over_the_cap_are_counted_not_kept() {
    let (_t, root) = copy_store(&fixture("store-4.9"));
    let cq = shift_units(&root);
    let (code, all, summary) = verify_json(&root, &[]);
    assert_eq!(code, 1);
    let mismatches = with_code(&all, "consumequeue.unit_mismatch");
    assert!(mismatches.len() > 10, "{}", mismatches.len());
    assert_eq!(
        summary["findings_per_code"]["consumequeue.unit_mismatch"],
        mismatches.len() as u64
    );
    assert_eq!(summary["findings_not_listed"], 0);

    let (code, capped, s) = verify_json(&root, &["--max-findings", "3"]);
    assert_eq!(code, 1);
    let kept = with_code(&capped, "consumequeue.unit_mismatch");
    // the first three as printed: the lowest byte offsets of the file
    let offsets: Vec<u64> = kept
        .iter()
        .map(|f| f["file_offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 20, 40], "{kept:#?}");
    assert!(kept.iter().all(|f| f["file"] == cq.display().to_string()));
    // the count is exact, and so are the totals
    assert_eq!(
        s["findings_per_code"]["consumequeue.unit_mismatch"],
        mismatches.len() as u64
    );
    assert_eq!(s["errors"], summary["errors"]);
    let listed = capped.len() as u64;
    let total: u64 = s["findings_per_code"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(s["findings_not_listed"].as_u64().unwrap(), total - listed);
    // the human table says the count and how many are listed
    let out = bin()
        .arg("verify")
        .arg(&root)
        .args(["--max-findings", "3"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("{} (3 listed)", mismatches.len())),
        "{text}"
    );
}

#[test]
fn a_deleted_first_consume_queue_file_is_named() {
    let (_t, root) = copy_store(&fixture("store-4.9"));
    let gone = root.join("consumequeue/OrderTopic/0/00000000000000000000");
    std::fs::remove_file(&gone).unwrap();
    let (code, f, _) = verify_json(&root, &[]);
    assert_eq!(code, 1);
    let m = with_code(&f, "consumequeue.missing_file");
    assert_eq!(m.len(), 1, "{f:#?}");
    assert_eq!(m[0]["file"], gone.display().to_string());
    assert!(m[0]["message"].as_str().unwrap().contains("OrderTopic/0"));
    // and info sees it without reading the data
    let out = bin().arg("info").arg(&root).arg("--json").output().unwrap();
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[1]["needs_verify"], true, "{lines:#?}");
}

#[test]
fn info_flags_an_empty_queue_folder_and_an_unclean_shutdown() {
    let (_t, root) = copy_store(&fixture("store-4.9"));
    let healthy = bin().arg("info").arg(&root).output().unwrap();
    let text = String::from_utf8(healthy.stdout).unwrap();
    assert!(!text.contains("SIGNS OF DAMAGE"), "{text}");
    let q = root.join("consumequeue/AuditTopic/1");
    for e in std::fs::read_dir(&q).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    std::fs::write(root.join("abort"), b"").unwrap();
    let out = bin().arg("info").arg(&root).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("SIGNS OF DAMAGE: run `rmqstore verify`"),
        "{text}"
    );
    assert!(text.contains("damage: unclean shutdown"), "{text}");
    assert!(
        text.contains("damage: AuditTopic/1: the queue folder holds no consume queue file"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("AuditTopic") && l.contains("no file"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.split_whitespace().nth(1) == Some("1"), "{row}");
}

#[test]
fn a_folder_marked_as_a_stage_is_refused_by_every_reader() {
    let (_t, root) = copy_store(&fixture("store-4.9"));
    std::fs::write(root.join(".rmqstore-stage"), b"").unwrap();
    let r = root.to_str().unwrap();
    for args in [
        vec!["verify", r],
        vec!["info", r],
        vec!["dump", "commitlog", r],
        vec!["query", r, "--topic", "OrderTopic", "--key", "x"],
        vec!["config", r, "topics", "show"],
    ] {
        let mut c = bin();
        c.args(&args);
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(".rmqstore-stage"), "{args:?}: {err}");
        assert!(err.contains("remove the folder"), "{args:?}: {err}");
    }
}

#[test]
fn a_killed_repair_leaves_a_marked_folder_and_an_interrupted_one_nothing() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("store");
    crate::common::copy_tree(&fixture("store-4.9"), &root);
    let cq = shift_units(&root);
    assert!(cq.exists());
    // SIGINT at the last step before the marker goes: the folder is removed
    let out = t.path().join("out");
    let (code, said) = interrupted_at(
        "repair-checked",
        &[
            "repair".as_ref(),
            root.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(!out.exists(), "{said}");
    // killed there (abort): the folder stays, marked, and verify refuses it
    let killed = bin()
        .env("RMQSTORE_FAILPOINT", "repair-checked")
        .arg("repair")
        .arg(&root)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(!killed.status.success());
    assert!(out.join(".rmqstore-stage").exists());
    let v = bin().arg("verify").arg(&out).output().unwrap();
    assert_eq!(v.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&v.stderr).contains(".rmqstore-stage"));
    // a run left alone leaves a store without the marker that verifies clean
    std::fs::remove_dir_all(&out).unwrap();
    bin()
        .arg("repair")
        .arg(&root)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    assert!(!out.join(".rmqstore-stage").exists());
    bin().arg("verify").arg(&out).assert().code(0);
}

#[test]
fn a_killed_gen_leaves_a_marked_folder() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("gen");
    let killed = bin()
        .env("RMQSTORE_FAILPOINT", "gen-written")
        .arg("gen")
        .arg(&dir)
        .args(["--messages", "50"])
        .args(crate::common::SMALL_GEOMETRY)
        .output()
        .unwrap();
    assert!(!killed.status.success());
    assert!(dir.join(".rmqstore-stage").exists());
    let v = bin().arg("verify").arg(&dir).output().unwrap();
    assert_eq!(v.status.code(), Some(2));
    // a run left alone leaves no marker
    let bad = t.path().join("done");
    bin()
        .arg("gen")
        .arg(&bad)
        .args(["--messages", "50"])
        .args(crate::common::SMALL_GEOMETRY)
        .assert()
        .success();
    assert!(!bad.join(".rmqstore-stage").exists());
    bin().arg("verify").arg(&bad).assert().code(0);
}

#[test]
fn verify_help_gives_the_exit_rule() {
    let out = bin().args(["verify", "--help"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("0 healthy, or warnings only; 1 errors (with --strict, warnings too"),
        "{text}"
    );
}

#[test]
fn duplicate_keys_and_negative_offsets_in_consumer_offsets_are_findings() {
    let (_t, root) = copy_store(&fixture("store-4.9"));
    let co = root.join("config/consumerOffset.json");
    std::fs::write(
        &co,
        "{\n\t\"offsetTable\":{\n\t\t\"OrderTopic@OrderGroup\":{0:90,1:-5,1:87\n\t\t},\n\t\t\
         \"OrderTopic@OrderGroup\":{0:91\n\t\t}\n\t}\n}",
    )
    .unwrap();
    let (_, f, _) = verify_json(&root, &[]);
    let dups = with_code(&f, "config.duplicate_key");
    assert_eq!(dups.len(), 2, "{f:#?}");
    assert!(dups
        .iter()
        .any(|d| d["message"].as_str().unwrap().contains("more than once")));
    assert!(dups.iter().any(|d| d["message"]
        .as_str()
        .unwrap()
        .contains("queue 1 more than once")));
    assert!(dups[0]["broker_action"]
        .as_str()
        .unwrap()
        .contains("keeps the last"));
    // fastjson keeps the last: the -5 is overwritten by 87, so no negative offset is read
    assert!(with_code(&f, "config.negative_offset").is_empty(), "{f:#?}");
    std::fs::write(&co, "{\"offsetTable\":{\"OrderTopic@OrderGroup\":{0:-3}}}").unwrap();
    let (_, f, _) = verify_json(&root, &[]);
    let neg = with_code(&f, "config.negative_offset");
    assert_eq!(neg.len(), 1, "{f:#?}");
    assert!(neg[0]["message"]
        .as_str()
        .unwrap()
        .contains("OrderTopic/0 is at offset -3"));
}

#[test]
fn config_topics_show_lists_many_topics_in_one_pass() {
    let (_t, root) = copy_store(&fixture("store-4.9"));
    let n = 20_000;
    let mut text = String::from("{\"topicConfigTable\":{");
    for i in 0..n {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!(
            "\"T{i:05}\":{{\"topicName\":\"T{i:05}\",\"readQueueNums\":4,\"writeQueueNums\":4,\"perm\":6}}"
        ));
    }
    text.push_str("}}");
    std::fs::write(root.join("config/topics.json"), text).unwrap();
    let out = bin()
        .arg("config")
        .arg(&root)
        .args(["topics", "show"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), n);
    assert!(text.lines().last().unwrap().starts_with("T19999 "));
}

/// The records of a store's last commitlog file.
fn last_file_records(root: &Path) -> (PathBuf, u64, Vec<(u64, u64, u64)>) {
    let store = Store::open(root, &GeometryInputs::default()).unwrap();
    let seg = store.commitlog.segments.last().unwrap().clone();
    let map = Mapped::open(&seg.path).unwrap();
    let recs = RecordIter::new(&map, &seg, true)
        .map(|m| {
            let m = m.unwrap();
            let pos = m.position - seg.start;
            (pos, m.raw.len() as u64, pos + m.body_len_pos as u64 + 4)
        })
        .collect();
    (seg.path.clone(), seg.start, recs)
}

#[test]
fn dump_from_an_offset_says_where_it_starts_and_goes_past_damage() {
    let (_t, root) = copy_store(&fixture("store-4.9"));
    let (file, start, recs) = last_file_records(&root);
    let (second, _, _) = recs[1];
    let asked = start + second - 3;
    let out = bin()
        .args(["dump", "commitlog"])
        .arg(&root)
        .args(["--from", &asked.to_string(), "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "no record starts at offset {asked}; starting at the next record, offset {}",
            start + second
        )),
        "{err}"
    );
    // a record's size field broken in the middle of the file: the dump goes on after it
    let mid = recs.len() / 2;
    let (pos, _, _) = recs[mid];
    let mut b = std::fs::read(&file).unwrap();
    b[pos as usize] ^= 0x40;
    std::fs::write(&file, b).unwrap();
    let out = bin()
        .args(["dump", "commitlog"])
        .arg(&root)
        .args(["--from", &(start + recs[mid - 1].0).to_string(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("are damaged"), "{err}");
    assert!(
        err.contains(&format!(
            "the walk goes on at the next record, offset {}",
            start + recs[mid + 1].0
        )),
        "{err}"
    );
    let printed = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"type\":\"message\""))
        .count();
    assert_eq!(
        printed,
        recs.len() - mid,
        "the record before and all after the damaged one"
    );
}

#[test]
fn query_warns_of_a_body_whose_crc_fails() {
    let (_t, root) = copy_store(&fixture("store-4.9"));
    let (file, start, recs) = last_file_records(&root);
    let (pos, _, body) = recs[recs.len() / 2];
    let store = Store::open(&root, &GeometryInputs::default()).unwrap();
    let host = {
        let map = Mapped::open(&file).unwrap();
        let seg = Segment::commitlog(file.clone(), start, 0);
        let m = RecordIter::new(&map, &seg, true)
            .nth(recs.len() / 2)
            .unwrap()
            .unwrap();
        m.store_host
    };
    drop(store);
    let id = rmqstore::format::msgid::offset_msg_id(&host, (start + pos) as i64);
    let ok = bin()
        .arg("query")
        .arg(&root)
        .args(["-i", &id, "--body-only"])
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0));
    let mut b = std::fs::read(&file).unwrap();
    b[body as usize] ^= 0x01;
    std::fs::write(&file, b).unwrap();
    let out = bin()
        .arg("query")
        .arg(&root)
        .args(["-i", &id, "--body-only"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!out.stdout.is_empty(), "the body is still printed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fails its CRC"), "{err}");
    let json = bin()
        .arg("query")
        .arg(&root)
        .args(["-i", &id, "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8(json.stderr).unwrap();
    let summary: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(summary["body_crc_failed"][0], start + pos, "{text}");
}

#[test]
fn a_killed_rebuild_to_a_new_folder_leaves_it_marked() {
    let (t, root) = copy_store(&fixture("store-4.9"));
    let out = t.path().join("rebuilt");
    let killed = bin()
        .env("RMQSTORE_FAILPOINT", "rebuild-walk")
        .arg("rebuild")
        .arg(&root)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(!killed.status.success());
    assert!(out.join(".rmqstore-stage").exists());
    let v = bin().arg("info").arg(&out).output().unwrap();
    assert_eq!(v.status.code(), Some(2));
    std::fs::remove_dir_all(&out).unwrap();
    bin()
        .arg("rebuild")
        .arg(&root)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    assert!(!out.join(".rmqstore-stage").exists());
}

/// A store of `topics` topics of one queue with two records each, written as a broker writes
/// them (topics in turn), consume queues included.
fn many_queues_store(root: &Path, topics: usize) {
    use rmqstore::engine::store::index_builder::IndexNaming;
    use rmqstore::engine::store::writer::{StoreWriter, WriterOptions};
    use rmqstore::format::commitlog::{Host, Message, MessageVersion};
    use rmqstore::format::geometry::{resolve, GeometryOverrides};
    let geometry = resolve(&GeometryInputs {
        flags: GeometryOverrides {
            commitlog_file_size: Some(256 << 10),
            cq_file_units: Some(4),
            ..Default::default()
        },
        ..Default::default()
    });
    let options = WriterOptions {
        geometry,
        consumequeue: true,
        index: false,
        index_naming: IndexNaming::Utc,
        dledger: None,
    };
    let mut w = StoreWriter::create(root, options).unwrap();
    for q in 0..2i64 {
        for t in 0..topics {
            w.append(Message {
                topic: format!("Topic{t:05}"),
                queue_id: 0,
                flag: 0,
                queue_offset: 0,
                physical_offset: 0,
                sys_flag: 0,
                born_timestamp: 1_800_000_000_000 + q,
                born_host: Host::v4([10, 0, 0, 1], 5000),
                store_timestamp: 1_800_000_000_000 + q,
                store_host: Host::v4([10, 0, 0, 2], 10911),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: format!("message {q} of {t:05}").into_bytes(),
                properties: Vec::new(),
                version: MessageVersion::V1,
            })
            .unwrap();
        }
    }
    w.finish().unwrap();
}

/// With more queues than the walk keeps consume queue files mapped for, the units are matched in
/// the consume queue phase instead: a healthy store stays clean, and a store whose every unit
/// points at another topic's record gets every mismatch and every queue's missing unit counted.
#[test]
fn many_queues_are_matched_by_their_units() {
    const TOPICS: usize = 2100;
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("store");
    many_queues_store(&root, TOPICS);
    let (code, all, summary) = verify_json(&root, &["--only", "consumequeue"]);
    assert_eq!(code, 0, "{all:#?}");
    assert_eq!(summary["errors"], 0);
    assert_eq!(summary["cq_units"], 2 * TOPICS as u64);
    // every topic's units now name the records of the topic after it
    let file = |t: usize| {
        root.join(format!(
            "consumequeue/Topic{:05}/0/00000000000000000000",
            t % TOPICS
        ))
    };
    let units: Vec<Vec<u8>> = (0..TOPICS)
        .map(|t| std::fs::read(file(t)).unwrap())
        .collect();
    for (t, _) in units.iter().enumerate() {
        std::fs::write(file(t), &units[(t + 1) % TOPICS]).unwrap();
    }
    let (code, listed, summary) = verify_json(&root, &["--max-findings", "10"]);
    assert_eq!(code, 1);
    let per_code = &summary["findings_per_code"];
    assert_eq!(
        per_code["consumequeue.unit_mismatch"],
        2 * TOPICS as u64,
        "{per_code}"
    );
    assert_eq!(
        per_code["consumequeue.missing_unit"], TOPICS as u64,
        "{per_code}"
    );
    assert_eq!(with_code(&listed, "consumequeue.unit_mismatch").len(), 10);
}
