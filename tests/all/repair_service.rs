//! `repair` keeps every intact message in service: damage between intact records is bridged in
//! place (tombstones where the store proves a destroyed record, fillers for the rest), every
//! later record keeps its offsets, every record that leaves service is named, and `--mode cut`
//! keeps the broker's own cut.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::*;
use crate::repair::{check, commitlog_file, damaged, patch, record_pos, repair_out_with};
use rmqstore::engine::Store;
use rmqstore::format::commitlog::{RecordIter, Segment};
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::format::mapped::Mapped;

/// A small generated store: 3000 operations over 1 MiB commitlog files.
fn gen_store(dir: &Path, file_size: u64) -> PathBuf {
    let s = dir.join("gen");
    bin()
        .arg("gen")
        .arg(&s)
        .args(["--messages", "3000", "--commitlog-file-size"])
        .arg(file_size.to_string())
        .args(["--cq-file-units", "1000", "--index-slots", "1000"])
        .args(["--index-entries", "4000"])
        .assert()
        .success();
    s
}

/// (commitlog offset, size) of every record of a commitlog file, walked from its start.
fn records_of(f: &Path) -> Vec<(u64, u64)> {
    let start: u64 = f.file_name().unwrap().to_str().unwrap().parse().unwrap();
    let map = Mapped::open(f).unwrap();
    let seg = Segment::commitlog(f.to_path_buf(), start, 0);
    RecordIter::new(&map, &seg, false)
        .map_while(Result::ok)
        .map(|m| (m.position, m.raw.len() as u64))
        .collect()
}

fn verify_json(root: &Path, extra: &[&str]) -> (i32, Vec<serde_json::Value>) {
    let out = bin()
        .arg("verify")
        .arg(root)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out.status.code().unwrap(), lines)
}

fn codes(lines: &[serde_json::Value], code: &str) -> usize {
    lines.iter().filter(|l| l["code"] == code).count()
}

fn lost_offsets(manifest: &serde_json::Value) -> BTreeSet<u64> {
    manifest["bridges"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["lost"].as_array().unwrap().clone())
        .map(|l| l["commitlog_offset"].as_u64().unwrap())
        .collect()
}

#[test]
fn flipped_bit_in_the_first_file_of_the_oracle_store_keeps_every_message() {
    let Some(dir) = oracle("basic-4.9") else {
        return;
    };
    let r = check(&dir.join("store"), "first file flipped bit", |s| {
        patch(&s.join("commitlog/00000000000000000000"), 100000, |b| {
            b[0] ^= 0x04
        });
    });
    let first = commitlog_file(&r.original, 0);
    let hit: Vec<(u64, u64)> = records_of(&dir.join("store/commitlog/00000000000000000000"))
        .into_iter()
        .filter(|(o, n)| *o <= 100000 && 100000 < o + n)
        .collect();
    assert_eq!(hit.len(), 1);
    assert!(r.manifest["cut"].is_null());
    assert_eq!(r.manifest["salvaged_records"], 0);
    assert_eq!(lost_offsets(&r.manifest), BTreeSet::from([hit[0].0]));
    let lost = &r.manifest["bridges"][0]["lost"][0];
    assert_eq!(lost["replaced_by"], "tombstone");
    assert!(lost["topic"].is_string() && lost["msg_id"].is_string());
    // every message stays: the damaged one as its tombstone, at its offsets
    assert_eq!(r.manifest["messages_kept"], 4771);
    assert_eq!(
        std::fs::read(r.out.join("config/consumerOffset.json")).unwrap(),
        std::fs::read(r.original.join("config/consumerOffset.json")).unwrap(),
        "group offsets changed"
    );
    let (code, lines) = verify_json(&r.out, &[]);
    assert_eq!(code, 0);
    assert_eq!(codes(&lines, "commitlog.repair_tombstone"), 1);
    let text = bin()
        .arg("verify")
        .arg(&r.out)
        .arg("--explain-recovery")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("nothing is lost"));
    let _ = first;
}

#[test]
fn zeroed_page_with_an_abort_file_is_bridged_with_tombstones() {
    let t = scratch();
    let g = gen_store(t.path(), 1 << 20);
    let f = g.join("commitlog/00000000000001048576");
    let (from, to) = (40960u64, 45056u64);
    let start = 1u64 << 20;
    let destroyed: BTreeSet<u64> = records_of(&f)
        .into_iter()
        .filter(|(o, n)| o - start < to && o - start + n > from)
        .map(|(o, _)| o)
        .collect();
    assert!(destroyed.len() >= 3, "the page should span several records");
    let r = check(&g, "zeroed page with abort", |s| {
        std::fs::write(s.join("abort"), b"").unwrap();
        patch(
            &s.join("commitlog/00000000000001048576"),
            from as usize,
            |b| b[..4096].fill(0),
        );
    });
    assert!(r.manifest["cut"].is_null(), "{}", r.manifest["cut"]);
    assert_eq!(r.manifest["salvaged_records"], 0);
    // each destroyed record is named, as a tombstone at its own offset (its unit proves it)
    assert_eq!(lost_offsets(&r.manifest), destroyed);
    let b = &r.manifest["bridges"][0];
    assert_eq!(b["tombstones"].as_u64().unwrap() as usize, destroyed.len());
    assert_eq!(b["fillers"], 0);
    for l in b["lost"].as_array().unwrap() {
        assert!(l["topic"].is_string() && l["queue_offset"].is_i64(), "{l}");
    }
    // the damaged bytes are kept in the repair folder
    assert!(r.manifest["removed"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["why"].as_str().unwrap().contains("tombstone")
            && x["offset"].as_u64().unwrap() <= from));
    let (code, lines) = verify_json(&r.out, &[]);
    assert_eq!(code, 0);
    assert_eq!(codes(&lines, "commitlog.repair_tombstone"), destroyed.len());
    // the queues end where they ended: no group offset moved
    assert_eq!(
        std::fs::read(r.out.join("config/consumerOffset.json")).unwrap(),
        std::fs::read(r.original.join("config/consumerOffset.json")).unwrap()
    );
}

#[test]
fn the_output_names_each_destroyed_message() {
    let t = scratch();
    let g = gen_store(t.path(), 1 << 20);
    patch(&g.join("commitlog/00000000000001048576"), 40960, |b| {
        b[..4096].fill(0)
    });
    let out = bin()
        .arg("repair")
        .arg(&g)
        .arg("--dry-run")
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.last().unwrap();
    let lost = summary["lost"].as_array().unwrap();
    assert!(lost.len() >= 3);
    assert_eq!(summary["tombstones"].as_u64().unwrap() as usize, lost.len());
    assert!(summary["cut"].is_null());
    let text = bin()
        .arg("repair")
        .arg(&g)
        .arg("--dry-run")
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    for l in lost {
        let off = l["commitlog_offset"].as_u64().unwrap();
        assert!(
            text.contains(&format!("commitlog offset {off} (")),
            "{off} not named in:\n{text}"
        );
    }
}

#[test]
fn mode_cut_keeps_the_brokers_cut_and_salvages() {
    let (t, s) = damaged(&fixture("store-4.9"), |s| {
        let f = commitlog_file(s, 3);
        let p = record_pos(&f, 5);
        patch(&f, p + 100, |b| b[0] ^= 0x10);
    });
    let r = repair_out_with(t, s, &["--mode", "cut"]);
    assert!(r.manifest["cut"]["reason"]
        .as_str()
        .unwrap()
        .contains("CRC"));
    assert!(r.manifest["bridges"].as_array().unwrap().is_empty());
    assert!(r.manifest["salvaged_records"].as_u64().unwrap() > 1000);
    bin().arg("verify").arg(&r.out).assert().code(0);
}

#[test]
fn the_salvage_store_carries_each_groups_offsets_translated() {
    let t = scratch();
    let g = gen_store(t.path(), 1 << 20);
    let (t2, s) = damaged(&g, |s| {
        patch(&s.join("commitlog/00000000000001048576"), 30003, |b| {
            b[0] ^= 0x04
        });
    });
    let r = repair_out_with(t2, s, &["--mode", "cut"]);
    let salvaged = r.repair.join("salvaged");
    assert!(salvaged.join("config/consumerOffset.json").is_file());
    // what OrderGroup had not consumed: salvaged records at or past its committed offsets
    let committed = |q: i64| match q {
        0 | 1 => 126,
        2 => 151,
        _ => 136,
    };
    let text = std::fs::read_to_string(r.repair.join("salvaged.jsonl")).unwrap();
    let want = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["topic"] == "OrderTopic")
        .filter(|v| {
            v["queue_offset"].as_i64().unwrap() >= committed(v["queue_id"].as_i64().unwrap())
        })
        .count();
    assert!(want > 0);
    let out = r._t.path().join("export.jsonl");
    bin()
        .arg("export")
        .arg(&salvaged)
        .args(["--group", "OrderGroup", "--topic", "OrderTopic", "--out"])
        .arg(&out)
        .assert()
        .success();
    let got = std::fs::read_to_string(&out).unwrap().lines().count();
    assert_eq!(got, want);
    let _ = t;
}

#[test]
fn a_file_past_a_gap_in_the_names_is_salvaged_whole() {
    let (t, s) = damaged(&fixture("store-4.9"), |s| {
        let last = commitlog_file(s, 8);
        let start: u64 = last.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let to = last.with_file_name(format!("{:020}", start + 262144));
        std::fs::rename(&last, to).unwrap();
    });
    let last = commitlog_file(&s, 8);
    let n = records_of(&last).len();
    assert!(n > 0);
    let (_, lines) = verify_json(&s, &[]);
    assert_eq!(codes(&lines, "commitlog.gap"), 1);
    let r = repair_out_with(t, s, &[]);
    let reason = r.manifest["cut"]["reason"].as_str().unwrap();
    assert!(reason.contains("no commitlog file holds"), "{reason}");
    // the cut is where service ends, the end of the file before the gap, not the renamed file's
    // own offset
    let service_end: u64 = reason
        .rsplit(' ')
        .next()
        .unwrap()
        .split("..")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let renamed: u64 = last.file_name().unwrap().to_str().unwrap().parse().unwrap();
    assert_eq!(service_end + 262144, renamed);
    assert_eq!(r.manifest["cut"]["offset"], service_end);
    assert_eq!(r.manifest["cut"]["position"], 0);
    // every record of the file past the gap is kept in the salvage store
    assert_eq!(r.manifest["salvaged_records"].as_u64().unwrap() as usize, n);
}

#[test]
fn a_nineteen_digit_name_is_read_as_the_broker_reads_it() {
    let (_t, s) = damaged(&fixture("store-4.9"), |s| {
        let last = commitlog_file(s, 8);
        let name = last.file_name().unwrap().to_str().unwrap().to_string();
        std::fs::rename(&last, last.with_file_name(&name[1..])).unwrap();
    });
    let store = Store::open(&s, &GeometryInputs::default()).unwrap();
    assert_eq!(store.commitlog.segments.len(), 9);
    assert!(store.commitlog.foreign.is_empty());
    let (code, lines) = verify_json(&s, &[]);
    assert_eq!(code, 0, "{lines:#?}");
    let out = bin()
        .arg("repair")
        .arg(&s)
        .arg("--dry-run")
        .arg("--json")
        .output()
        .unwrap();
    let summary: serde_json::Value = serde_json::from_str(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert!(summary["cut"].is_null());
    assert_eq!(summary["salvaged_records"], 0);
}

#[test]
fn the_plan_speaks_of_the_files_there_are() {
    let t = scratch();
    let g = gen_store(t.path(), 64 << 20);
    assert_eq!(std::fs::read_dir(g.join("commitlog")).unwrap().count(), 1);
    let out = bin()
        .arg("verify")
        .arg(&g)
        .arg("--explain-recovery")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("third-to-last"), "{text}");
    assert!(text.contains("the first file"), "{text}");
}

#[test]
fn the_cut_step_says_only_what_happens() {
    let (t, s) = damaged(&fixture("store-4.9"), |s| {
        let f = commitlog_file(s, 8);
        let p = record_pos(&f, 12);
        let b = std::fs::read(&f).unwrap();
        std::fs::write(&f, &b[..p + 40]).unwrap();
    });
    let text = bin()
        .arg("repair")
        .arg(&s)
        .arg("--dry-run")
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(!text.contains("move 0"), "{text}");
    let r = repair_out_with(t, s, &[]);
    for x in r.manifest["removed"].as_array().unwrap() {
        let why = x["why"].as_str().unwrap();
        assert!(
            !why.contains("zeros after the end of the kept data"),
            "{why}"
        );
    }
}

#[test]
fn a_record_whose_unit_is_lost_gets_a_tombstone_from_its_queues_offsets() {
    let t = scratch();
    let g = gen_store(t.path(), 1 << 20);
    let (from, to) = (40960u64, 45056u64);
    let r = check(&g, "zeroed page, a queue folder deleted", |s| {
        std::fs::write(s.join("abort"), b"").unwrap();
        patch(
            &s.join("commitlog/00000000000001048576"),
            from as usize,
            |b| b[..4096].fill(0),
        );
        std::fs::remove_dir_all(s.join("consumequeue/OrderTopic/0")).unwrap();
    });
    // nothing cut: the record of OrderTopic/0 in the page is tombstoned in filler space at the
    // queue offset its queue is missing, and no group offset moves
    assert!(r.manifest["cut"].is_null(), "{}", r.manifest["cut"]);
    let b = &r.manifest["bridges"][0];
    assert!(b["fillers"].as_u64().unwrap() >= 1);
    let lost = b["lost"].as_array().unwrap();
    let inferred: Vec<_> = lost
        .iter()
        .filter(|l| l["topic"] == "OrderTopic" && l["queue_id"] == 0)
        .collect();
    assert_eq!(inferred.len(), 1, "{lost:#?}");
    assert!(inferred[0]["proof"].as_str().unwrap().contains("jump"));
    assert!(lost.iter().any(|l| l["replaced_by"] == "filler"));
    let start = b["offset"].as_u64().unwrap() - b["position"].as_u64().unwrap();
    let at = inferred[0]["commitlog_offset"].as_u64().unwrap() - start;
    assert!(at < to + 4096);
    assert_eq!(
        std::fs::read(r.out.join("config/consumerOffset.json")).unwrap(),
        std::fs::read(r.original.join("config/consumerOffset.json")).unwrap()
    );
    let (code, lines) = verify_json(&r.out, &[]);
    assert_eq!(code, 0);
    assert!(codes(&lines, "commitlog.repair_filler") >= 1);
}
