//! The real binary on real files: gen reproduces the committed fixtures, info's JSON contract,
//! exit statuses.

mod common;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use common::*;
use serde_json::Value;

fn bin() -> Command {
    let mut c = Command::cargo_bin("rmqstore").unwrap();
    c.env_clear().env("TZ", "UTC");
    c
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn fixture_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_suffix(".args").map(str::to_string)
        })
        .collect();
    v.sort();
    assert!(!v.is_empty());
    v
}

#[test]
fn gen_reproduces_every_fixture_byte_for_byte() {
    for name in fixture_names() {
        let args = std::fs::read_to_string(fixtures().join(format!("{name}.args"))).unwrap();
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join(&name);
        bin()
            .arg("gen")
            .arg(&dir)
            .args(args.split_whitespace())
            .assert()
            .success();
        let (ours, committed) = (tree(&dir), tree(&fixtures().join(&name)));
        let names = |t: &[(PathBuf, Vec<u8>)]| t.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
        assert_eq!(names(&ours), names(&committed), "{name}: file lists differ");
        for ((p, a), (_, b)) in ours.iter().zip(&committed) {
            assert!(a == b, "{name}: {} differs", p.display());
        }
    }
}

#[test]
fn gen_depends_on_the_seed_only() {
    let t = tempfile::tempdir().unwrap();
    let run = |dir: &str, seed: &str| {
        let d = t.path().join(dir);
        bin()
            .args([
                "gen",
                "--messages",
                "300",
                "--commitlog-file-size",
                "65536",
                "--seed",
                seed,
            ])
            .arg(&d)
            .assert()
            .success();
        tree(&d)
    };
    let a = run("a", "5");
    assert_eq!(a, run("b", "5"));
    assert_ne!(a, run("c", "6"));
    // refuses to write over an existing commitlog
    bin()
        .args(["gen", "--messages", "10"])
        .arg(t.path().join("a"))
        .assert()
        .code(2);
}

fn info_json(store: &Path, extra: &[&str]) -> Value {
    let out = bin()
        .arg("info")
        .arg(store)
        .arg("--json")
        .args(extra)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    // the `info` line, then the summary
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["type"], "info");
    v
}

#[test]
fn info_json_contract_on_the_fixture() {
    let store = fixtures().join("store-4.9");
    let v = info_json(&store, &[]);
    for k in [
        "commitlog",
        "topics",
        "consumer_groups",
        "index_files",
        "checkpoint",
        "clean_shutdown",
    ] {
        assert!(v.get(k).is_some(), "missing key {k}");
    }
    assert_eq!(v["clean_shutdown"], true);
    let cl = &v["commitlog"];
    assert_eq!(cl["files"].as_array().unwrap().len(), 9);
    assert_eq!(cl["min_offset"], 0);
    assert!(cl["max_offset"].as_u64().unwrap() > 2_000_000);
    // geometry came from the files and says so
    assert_eq!(v["geometry"]["index_slots"]["value"], 64);
    assert_eq!(v["geometry"]["index_slots"]["source"], "inferred");
    // each queue's max equals the number of its consume queue units
    let topics = v["topics"].as_array().unwrap();
    let order = topics.iter().find(|t| t["topic"] == "OrderTopic").unwrap();
    for q in order["queues"].as_array().unwrap() {
        let dir = store
            .join("consumequeue/OrderTopic")
            .join(q["queue_id"].to_string());
        let mut units = 0;
        for f in std::fs::read_dir(dir).unwrap() {
            let b = std::fs::read(f.unwrap().path()).unwrap();
            units += b.chunks(20).filter(|c| c.iter().any(|&x| x != 0)).count();
        }
        assert_eq!(q["max_offset"].as_u64().unwrap(), units as u64);
        assert_eq!(q["min_offset"], 0);
    }
    // lag = max - offset for every group queue
    let groups = v["consumer_groups"].as_array().unwrap();
    assert!(groups
        .iter()
        .any(|g| g["group"] == "OrderGroup" && g["topic"] == "OrderTopic"));
    for g in groups {
        for q in g["queues"].as_array().unwrap() {
            let (o, m, l) = (
                q["committed_offset"].as_i64().unwrap(),
                q["max_offset"].as_i64().unwrap(),
                q["lag"].as_i64().unwrap(),
            );
            assert_eq!(l, (m - o).max(0));
        }
    }
    assert!(v["index_files"].as_array().unwrap().len() > 3);
}

#[test]
fn info_agrees_with_java_on_oracle_stores() {
    for name in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        let v = info_json(&dir.join("store"), &[]);
        let q = java_queries(&dir);
        assert_eq!(v["commitlog"]["min_offset"], q["minPhyOffset"], "{name}");
        assert_eq!(v["commitlog"]["max_offset"], q["maxPhyOffset"], "{name}");
        assert_eq!(v["clean_shutdown"], !name.starts_with("crashed"), "{name}");
        if name.starts_with("basic") {
            for jq in q["queues"].as_array().unwrap() {
                let t = v["topics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["topic"] == jq["topic"])
                    .unwrap();
                let ours = t["queues"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|x| x["queue_id"] == jq["queueId"])
                    .unwrap();
                assert_eq!(ours["max_offset"], jq["maxOffsetInQueue"], "{name}");
                assert_eq!(ours["min_offset"], jq["minOffsetInQueue"], "{name}");
            }
        }
    }
}

#[test]
fn info_fails_cleanly_on_what_is_not_a_store() {
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("nope");
    let out = bin()
        .arg("info")
        .arg(&missing)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8_lossy(&out);
    assert!(err.contains("nope"), "{err}");
    let out = bin()
        .arg("info")
        .arg(t.path())
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&out).contains("not a RocketMQ store"));
    // a bad broker config names the key
    let conf = t.path().join("broker.conf");
    std::fs::write(&conf, "maxIndexNum=lots\n").unwrap();
    let out = bin()
        .arg("info")
        .arg(fixtures().join("store-4.9"))
        .arg("--broker-conf")
        .arg(&conf)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&out).contains("maxIndexNum"));
}

#[test]
fn flags_override_inferred_geometry() {
    let v = info_json(
        &fixtures().join("store-4.9"),
        &["--index-slots", "64", "--index-entries", "256"],
    );
    assert_eq!(v["geometry"]["index_slots"]["source"], "flag");
    assert_eq!(v["geometry"]["cq_file_units"]["source"], "inferred");
}

const SUBCOMMANDS: [&str; 12] = [
    "gen", "dump", "query", "info", "pull", "pending", "rebuild", "repair", "export", "replay",
    "tui", "verify",
];

fn stdout_of(args: &[&str]) -> String {
    let o = bin().args(args).assert().success();
    String::from_utf8(o.get_output().stdout.clone()).unwrap()
}

#[test]
fn completion_scripts_know_every_subcommand_and_option() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
        assert!(script.contains("in-place"), "{shell}: no repair --in-place");
    }
    bin().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn the_manual_page_has_every_subcommand_and_its_options() {
    let page = stdout_of(&["man"]);
    assert!(
        page.contains(".TH rmqstore 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    assert_eq!(page.matches(".TH ").count(), 1, "one page");
    for sub in SUBCOMMANDS {
        assert!(
            page.contains(&format!("rmqstore\\-{sub}")),
            "no section for {sub}"
        );
    }
    assert!(
        page.contains("\\-\\-explain\\-recovery"),
        "verify's options are missing"
    );
    assert!(
        page.contains("\\-\\-dry\\-run"),
        "repair's options are missing"
    );
}
