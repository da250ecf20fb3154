//! `rebuild`: broker-identical consume queues and index files, offsets kept after expired files,
//! and an in-place switch that survives a kill at any moment.

use std::path::{Path, PathBuf};
use std::process::Command as Proc;

use crate::common::*;

fn contents(dir: &Path) -> Vec<Vec<u8>> {
    tree(dir).into_iter().map(|(_, b)| b).collect()
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn rebuild_equals_the_brokers_files() {
    for name in ["basic-4.9", "basic-5.x"] {
        let Some(dir) = oracle(name) else { continue };
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("out");
        bin()
            .arg("rebuild")
            .arg(dir.join("store"))
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        assert!(
            tree(&out.join("consumequeue")) == tree(&dir.join("store/consumequeue")),
            "{name}: consume queues differ"
        );
        // index files: identical bytes; only the names (the broker's wall clock) differ
        assert_eq!(
            contents(&out.join("index")),
            contents(&dir.join("store/index")),
            "{name}"
        );
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn rebuild_of_the_crashed_store_matches_java_recovery() {
    let Some(dir) = oracle("crashed-4.9") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    let o = bin()
        .args(["rebuild", "--json", "--consumequeue"])
        .arg(dir.join("store"))
        .arg("--out")
        .arg(&out)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let s: serde_json::Value = serde_json::from_slice(&o).unwrap();
    assert_eq!(
        (&s["type"], &s["command"]),
        (&"summary".into(), &"rebuild".into())
    );
    let q = java_queries(&dir);
    assert_eq!(s["end_commitlog_offset"], q["maxPhyOffset"]);
    for jq in q["queues"].as_array().unwrap() {
        let d = out
            .join("consumequeue")
            .join(jq["topic"].as_str().unwrap())
            .join(jq["queueId"].to_string());
        let units: usize = tree(&d)
            .iter()
            .map(|(_, b)| b.chunks(20).filter(|c| c.iter().any(|&x| x != 0)).count())
            .sum();
        assert_eq!(
            units as i64,
            jq["maxOffsetInQueue"].as_i64().unwrap(),
            "{jq}"
        );
    }
}

#[test]
fn topics_limit_the_rebuild() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    bin()
        .arg("rebuild")
        .arg(fixture("store-4.9"))
        .args([
            "--topic",
            "OrderTopic",
            "--topic",
            "%DLQ%OrderGroup",
            "--out",
        ])
        .arg(&out)
        .assert()
        .success();
    let mut topics: Vec<String> = std::fs::read_dir(out.join("consumequeue"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    topics.sort();
    assert_eq!(topics, vec!["%DLQ%OrderGroup", "OrderTopic"]);
    assert!(
        tree(&out.join("consumequeue/OrderTopic"))
            == tree(&fixture("store-4.9").join("consumequeue/OrderTopic"))
    );
    // refuses to write over what exists
    bin()
        .arg("rebuild")
        .arg(fixture("store-4.9"))
        .arg("--out")
        .arg(&out)
        .assert()
        .code(2);
}

#[test]
fn queue_offsets_survive_expired_commitlog_files() {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("s");
    copy_tree(&fixture("store-4.9"), &store);
    // the broker deleted the first three commitlog files (expired)
    let mut files: Vec<_> = std::fs::read_dir(store.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in &files[..3] {
        std::fs::remove_file(f).unwrap();
    }
    let out = t.path().join("out");
    bin()
        .arg("rebuild")
        .arg(&store)
        .args(["--consumequeue", "--cq-file-units", "100", "--out"])
        .arg(&out)
        .assert()
        .success();
    let before = info(&store);
    let mut after_store = t.path().join("after");
    copy_tree(&store, &after_store);
    std::fs::remove_dir_all(after_store.join("consumequeue")).unwrap();
    copy_tree(&out.join("consumequeue"), &after_store.join("consumequeue"));
    let after = info(&after_store);
    let mut some_min_above_zero = false;
    for t in before["topics"].as_array().unwrap() {
        let a = after["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["topic"] == t["topic"]);
        let Some(a) = a else { continue };
        for (qb, qa) in t["queues"]
            .as_array()
            .unwrap()
            .iter()
            .zip(a["queues"].as_array().unwrap())
        {
            assert_eq!(qb["max_offset"], qa["max_offset"], "{}", t["topic"]);
            assert_eq!(qb["min_offset"], qa["min_offset"], "{}", t["topic"]);
            some_min_above_zero |= qa["min_offset"].as_u64().unwrap() > 0;
        }
    }
    assert!(some_min_above_zero);
    after_store.clear();
}

fn info(store: &Path) -> serde_json::Value {
    let o = bin()
        .arg("info")
        .arg(store)
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    // the `info` line, then the summary
    let text = String::from_utf8(o).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// A store whose consume queues differ from what rebuild makes (one queue lost a file), plus the
/// old and expected new trees of both folders.
struct Case {
    _t: tempfile::TempDir,
    store: PathBuf,
    old_cq: Vec<(PathBuf, Vec<u8>)>,
    old_ix: Vec<(PathBuf, Vec<u8>)>,
    new_cq: Vec<(PathBuf, Vec<u8>)>,
}

fn case() -> Case {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("s");
    copy_tree(&fixture("store-4.9"), &store);
    std::fs::remove_file(store.join("consumequeue/OrderTopic/1/00000000000000002000")).unwrap();
    let (old_cq, old_ix) = (
        tree(&store.join("consumequeue")),
        tree(&store.join("index")),
    );
    let new_cq = tree(&fixture("store-4.9").join("consumequeue"));
    assert_ne!(old_cq, new_cq);
    Case {
        _t: t,
        store,
        old_cq,
        old_ix,
        new_cq,
    }
}

fn assert_old_or_new(c: &Case, ctx: &str) {
    let cq = tree(&c.store.join("consumequeue"));
    assert!(
        cq == c.old_cq || cq == c.new_cq,
        "{ctx}: consumequeue is neither old nor new"
    );
    let ix = contents(&c.store.join("index"));
    let old: Vec<Vec<u8>> = c.old_ix.iter().map(|(_, b)| b.clone()).collect();
    assert_eq!(ix, old, "{ctx}: index content (identical old and new) lost");
}

fn finish_and_check(c: &Case) {
    bin()
        .arg("rebuild")
        .arg("--in-place")
        .arg(&c.store)
        .assert()
        .success();
    assert!(tree(&c.store.join("consumequeue")) == c.new_cq);
    // the old folders are kept in a dated backup
    let backups: Vec<_> = std::fs::read_dir(&c.store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rmqstore-backup-"))
        .collect();
    assert!(!backups.is_empty());
    // somewhere in the backups (an interrupted run's work folder is kept there too)
    assert!(
        backups
            .iter()
            .any(|b| holds_tree(&c.store.join(b), "consumequeue", &c.old_cq)),
        "the old consumequeue folder was not kept"
    );
    assert!(!std::fs::read_dir(&c.store).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains(".rebuild-")));
    // nothing of an interrupted run is left beside the store either
    let parent = c.store.parent().unwrap();
    assert!(!std::fs::read_dir(parent).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains("rebuild-")));
}

/// True when a folder named `name` somewhere below `dir` has exactly `want`.
fn holds_tree(dir: &Path, name: &str, want: &[(PathBuf, Vec<u8>)]) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.filter_map(|e| e.ok()).any(|e| {
        let p = e.path();
        p.is_dir() && ((e.file_name() == name && tree(&p) == want) || holds_tree(&p, name, want))
    })
}

#[test]
fn in_place_survives_a_crash_at_every_step() {
    for point in ["rebuild-staged", "root-exchanged", "rebuild-switched"] {
        let c = case();
        let st = bin()
            .env("RMQSTORE_FAILPOINT", point)
            .arg("rebuild")
            .arg("--in-place")
            .arg(&c.store)
            .assert()
            .get_output()
            .status;
        assert!(!st.success(), "{point}: should have crashed");
        assert_old_or_new(&c, point);
        finish_and_check(&c);
    }
}

#[test]
fn in_place_survives_sigkill_at_random_moments() {
    let exe = assert_cmd::cargo::cargo_bin("rmqstore");
    for delay_ms in [0u64, 3, 7, 12, 20, 30, 45, 70] {
        let c = case();
        let mut child = Proc::new(&exe)
            .arg("rebuild")
            .arg("--in-place")
            .arg(&c.store)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        assert_old_or_new(&c, &format!("kill after {delay_ms} ms"));
        finish_and_check(&c);
    }
}

#[test]
fn in_place_refuses_a_live_store() {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("s");
    copy_tree(&fixture("store-4.9"), &store);
    let sleeper = Proc::new("sleep").arg("20").spawn().unwrap();
    std::fs::write(store.join("abort"), sleeper.id().to_string()).unwrap();
    let err = bin()
        .arg("rebuild")
        .arg("--in-place")
        .arg(&store)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(
        String::from_utf8_lossy(&err).contains("running"),
        "{}",
        String::from_utf8_lossy(&err)
    );
    let mut sleeper = sleeper;
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(tree(&store.join("consumequeue")) == tree(&fixture("store-4.9").join("consumequeue")));
}

#[test]
fn ctrl_c_stops_a_rebuild_and_removes_what_it_wrote() {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    // every file but `lock`, which the first in-place run makes (as a broker does)
    let files = |s: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        tree(s)
            .into_iter()
            .filter(|(p, _)| !p.ends_with("lock"))
            .collect()
    };
    let before = files(&store);
    // --out: the folders it made are removed, the folder too when the run made it
    let out = t.path().join("out");
    let to_out = [
        "rebuild".as_ref(),
        store.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ];
    let (code, said) = interrupted_at("rebuild-walk", &to_out);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("stopping the rebuild"), "{said}");
    assert!(said.contains("rebuild interrupted"), "{said}");
    assert!(!out.exists(), "{said}");
    // an --out folder that was there stays, with what it held
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), b"kept").unwrap();
    let (code, said) = interrupted_at("rebuild-walk", &to_out);
    assert_eq!(code, Some(2), "{said}");
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["notes.txt"], "{said}");
    // --in-place: the stage is removed, the store is as it was and its lock is free again
    let (code, said) = interrupted_at(
        "rebuild-walk",
        &["rebuild".as_ref(), store.as_os_str(), "--in-place".as_ref()],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(files(&store) == before, "the store changed: {said}");
    let beside: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        beside.iter().all(|n| n == "store" || n == "out"),
        "{beside:?}"
    );
    bin()
        .arg("rebuild")
        .arg("--in-place")
        .arg(&store)
        .assert()
        .success();
}

/// `--out` refuses a store whose commitlog walk stops before records that exist, as
/// `--in-place` does (exit 1, nothing written): queues that miss those records must not pass for
/// a good rebuild. `--force` writes them anyway.
#[test]
fn out_refuses_a_damaged_commitlog_unless_forced() {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("s");
    copy_tree(&fixture("store-4.9"), &store);
    let f = store.join("commitlog/00000000000001048576");
    let mut b = std::fs::read(&f).unwrap();
    b[3] ^= 0x01; // the first record's size
    std::fs::write(&f, b).unwrap();
    let out = t.path().join("out");
    let o = bin()
        .arg("rebuild")
        .arg(&store)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("refused") && text.contains("--force"),
        "{text}"
    );
    assert!(!out.exists(), "a refused rebuild wrote {}", out.display());
    bin()
        .arg("rebuild")
        .arg(&store)
        .arg("--out")
        .arg(&out)
        .arg("--force")
        .assert()
        .success();
    assert!(out.join("consumequeue").is_dir());
}
