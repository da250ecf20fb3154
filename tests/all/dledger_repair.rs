//! `repair` on DLedger-mode stores: copies of the plain DLedger oracle store damaged (garbage
//! after the last entry, a torn last entry, a flipped entry magic, a lying index unit, a
//! checkpoint past the log) repair to stores that verify clean, with every entry before the
//! damage kept as it was (index, term, pos, bytes), the cut records salvaged and named, every
//! byte in the repaired store or the repair folder, and a dry run that writes nothing.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;

/// The DLedger entries of `store` (`dump dledger --json`), in log order.
fn entries(store: &Path) -> Vec<Value> {
    let out = bin()
        .args(["dump", "dledger", "--json"])
        .arg(store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "dledger_entry")
        .collect()
}

/// A copy of the plain DLedger oracle store in `t`, damaged by `damage` (given the copy and the
/// original's entries); the original store.
fn damaged(t: &Path, damage: impl FnOnce(&Path, &[Value])) -> Option<(PathBuf, PathBuf)> {
    let orig = oracle("dledger-4.9")?.join("store");
    let store = t.join("store");
    copy_tree(&orig, &store);
    damage(&store, &entries(&orig));
    Some((orig, store))
}

fn write_at(p: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
    f.write_all_at(bytes, at).unwrap();
}

const LAST_FILE: &str = "dledger-n0/data/00000000000005242880";
const LAST_START: u64 = 5242880;

fn pos(e: &Value) -> u64 {
    e["pos"].as_u64().unwrap()
}

/// Repair `store` (a damaged copy of `orig`) and check every promise: the dry run writes
/// nothing, `--out` verifies clean, entries `0..kept` are the original's (index, term, pos,
/// bytes), `salvaged` records are salvaged and named, every byte is kept or saved. Returns the
/// JSON summary and the manifest.
fn repair_checked(orig: &Path, store: &Path, kept: usize, salvaged: usize) -> (Value, Value) {
    let before = snapshot(store);
    let out = bin()
        .args(["repair", "--dry-run", "--json"])
        .arg(store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out.stderr));
    assert_eq!(snapshot(store), before, "the dry run wrote");

    let dest = store.parent().unwrap().join("repaired");
    let out = bin()
        .args(["repair", "--json", "--out"])
        .arg(&dest)
        .arg(store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out.stderr));
    let summary: Value = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "summary")
        .unwrap();
    assert_eq!(snapshot(store), before, "repair --out wrote into the store");

    let v = bin().arg("verify").arg(&dest).output().unwrap();
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );

    // The kept entries are the original's, at the same place, with the same bytes.
    let want = entries(orig);
    let have = entries(&dest);
    assert_eq!(have.len(), kept, "entries kept");
    for (h, w) in have.iter().zip(&want) {
        for k in ["index", "term", "pos", "size"] {
            assert_eq!(h[k], w[k], "{k} of entry {}", w["index"]);
        }
    }
    let data = |root: &Path, name: &str| std::fs::read(root.join("dledger-n0/data").join(name));
    let end = have
        .last()
        .map_or(0, |e| pos(e) + e["size"].as_u64().unwrap());
    for f in std::fs::read_dir(dest.join("dledger-n0/data")).unwrap() {
        let name = f.unwrap().file_name().to_string_lossy().into_owned();
        let start: u64 = name.parse().unwrap();
        let (a, b) = (data(orig, &name).unwrap(), data(&dest, &name).unwrap());
        assert_eq!(a.len(), b.len(), "{name} size");
        let upto = end.saturating_sub(start).min(a.len() as u64) as usize;
        assert!(
            a[..upto] == b[..upto],
            "{name}: kept entries' bytes changed"
        );
        assert!(
            b[upto..].iter().all(|&x| x == 0),
            "{name}: not zero after the kept entries"
        );
    }

    // Every byte is in the repaired store or saved in the repair folder.
    let folder = repair_folder(&dest).unwrap();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(folder.join("manifest.json")).unwrap()).unwrap();
    assert_every_byte_kept(store, &dest, &folder, &manifest, "dledger repair");
    let lines: Vec<Value> = std::fs::read_to_string(folder.join("salvaged.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), salvaged, "salvaged records");
    assert_eq!(summary["salvaged_records"], salvaged as u64);
    for l in &lines {
        assert!(l["topic"].is_string() && l["msg_id"].is_string(), "{l}");
        assert!(l["commitlog_offset"].as_u64().unwrap() >= end, "{l}");
    }
    (summary, manifest)
}

/// The manifest saves bytes of `file` from `at` on.
fn saves(manifest: &Value, file: &str, at: u64) -> bool {
    manifest["removed"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["file"] == file && x["offset"].as_u64() == Some(at) && x["saved_as"].is_string())
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn garbage_after_the_last_entry_is_zeroed_and_saved() {
    let t = scratch();
    let mut end = 0;
    let Some((orig, store)) = damaged(t.path(), |s, e| {
        let last = e.last().unwrap();
        end = pos(last) + last["size"].as_u64().unwrap();
        write_at(&s.join(LAST_FILE), end - LAST_START, b"GARBAGE-GARBAGE");
    }) else {
        return;
    };
    let (summary, manifest) = repair_checked(&orig, &store, 4210, 0);
    assert!(saves(&manifest, LAST_FILE, end - LAST_START), "{manifest}");
    assert_eq!(summary["dledger"]["caught_up_from_leader"], false);
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_torn_last_entry_is_cut_and_the_replica_caught_up() {
    let t = scratch();
    let mut at = 0;
    let Some((orig, store)) = damaged(t.path(), |s, e| {
        let last = e.last().unwrap();
        at = pos(last) - LAST_START;
        let size = last["size"].as_u64().unwrap();
        write_at(
            &s.join(LAST_FILE),
            at + 500,
            &vec![0u8; size as usize - 500],
        );
    }) else {
        return;
    };
    let (summary, manifest) = repair_checked(&orig, &store, 4209, 0);
    assert!(saves(&manifest, LAST_FILE, at), "{manifest}");
    let d = &summary["dledger"];
    assert_eq!(d["caught_up_from_leader"], true, "{summary}");
    assert_eq!(d["last_index"], 4208);
    assert_eq!(d["first_cut_index"], 4209);
    assert_eq!(d["checkpoint"]["committed_index"], 4208);
    assert_eq!(manifest["dledger"]["first_cut_index"], 4209);
    let cp = std::fs::read_to_string(
        store
            .parent()
            .unwrap()
            .join("repaired/dledger-n0/checkpoint"),
    )
    .unwrap();
    assert!(
        cp.contains("committedIndex=4208") && cp.contains("endIndex=4208"),
        "{cp}"
    );
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_flipped_magic_cuts_there_and_salvages_the_records_after_it() {
    let t = scratch();
    let mut at = 0;
    let Some((orig, store)) = damaged(t.path(), |s, e| {
        at = pos(&e[4100]) - LAST_START;
        write_at(&s.join(LAST_FILE), at + 3, &[0x7f]);
    }) else {
        return;
    };
    // The damaged entry's record is intact: it is salvaged with the 109 after it.
    let (summary, manifest) = repair_checked(&orig, &store, 4100, 110);
    assert!(saves(&manifest, LAST_FILE, at), "{manifest}");
    assert_eq!(summary["dledger"]["first_cut_index"], 4100);
    assert_eq!(summary["cut"]["file"], LAST_FILE);
    // Nothing was bridged: no tombstone or filler in a replica's log.
    assert_eq!(summary["tombstones"], 0);
    assert_eq!(summary["fillers"], 0);
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_lying_index_unit_is_rebuilt_from_the_data() {
    let t = scratch();
    let idx = "dledger-n0/index/00000000000000000000";
    let Some((orig, store)) = damaged(t.path(), |s, _| {
        write_at(&s.join(idx), 100 * 32 + 31, &[5]);
    }) else {
        return;
    };
    let (summary, manifest) = repair_checked(&orig, &store, 4210, 0);
    let repaired = store.parent().unwrap().join("repaired");
    assert_eq!(
        std::fs::read(repaired.join(idx)).unwrap(),
        std::fs::read(orig.join(idx)).unwrap()
    );
    assert!(saves(&manifest, idx, 0), "{manifest}");
    assert_eq!(summary["dledger"]["index_rebuilt"], true);
    assert!(summary["cut"].is_null());
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_checkpoint_past_the_log_is_clamped() {
    let t = scratch();
    let Some((orig, store)) = damaged(t.path(), |s, _| {
        std::fs::write(
            s.join("dledger-n0/checkpoint"),
            "committedIndex=5000\nendIndex=5000\n",
        )
        .unwrap();
    }) else {
        return;
    };
    let (summary, manifest) = repair_checked(&orig, &store, 4210, 0);
    assert!(saves(&manifest, "dledger-n0/checkpoint", 0), "{manifest}");
    assert_eq!(summary["dledger"]["checkpoint"]["committed_index"], 4209);
    assert_eq!(summary["dledger"]["caught_up_from_leader"], true);
    let cp = std::fs::read_to_string(
        store
            .parent()
            .unwrap()
            .join("repaired/dledger-n0/checkpoint"),
    )
    .unwrap();
    assert!(cp.contains("committedIndex=4209"), "{cp}");
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_clean_dledger_store_needs_nothing() {
    let Some(dir) = oracle("dledger-4.9") else {
        return;
    };
    let store = dir.join("store");
    let out = bin()
        .args(["repair", "--dry-run"])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("nothing to repair"), "{text}");

    let t = scratch();
    let copy = t.path().join("store");
    copy_tree(&store, &copy);
    let dest = t.path().join("repaired");
    let out = bin()
        .args(["repair", "--json", "--out"])
        .arg(&dest)
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out.stderr));
    let folder = repair_folder(&dest).unwrap();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(folder.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["actions"].as_array().unwrap().len(), 0);
    assert_eq!(
        tree(&copy.join("dledger-n0")),
        tree(&dest.join("dledger-n0"))
    );
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_converted_store_is_still_refused() {
    let Some(dir) = oracle("dledger-converted-4.9") else {
        return;
    };
    let t = scratch();
    let out = bin()
        .args(["repair", "--out"])
        .arg(t.path().join("out"))
        .arg(dir.join("store"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        said(&out.stderr).contains("repair does not handle a converted store"),
        "{}",
        said(&out.stderr)
    );
    assert!(!t.path().join("out").exists());
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn an_entry_breaking_the_index_chain_is_cut_not_renumbered() {
    let t = scratch();
    let mut at = 0;
    let Some((orig, store)) = damaged(t.path(), |s, e| {
        at = pos(&e[4100]) - LAST_START;
        write_at(&s.join(LAST_FILE), at + 8, &7000i64.to_be_bytes());
    }) else {
        return;
    };
    let (summary, _) = repair_checked(&orig, &store, 4100, 110);
    assert_eq!(summary["dledger"]["first_cut_index"], 4100);
    assert!(
        summary["cut"]["reason"]
            .as_str()
            .unwrap()
            .contains("breaks the chain"),
        "{summary}"
    );
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn in_place_switches_in_a_cut_replica() {
    let t = scratch();
    let Some((_, store)) = damaged(t.path(), |s, e| {
        let last = e.last().unwrap();
        let at = pos(last) - LAST_START;
        write_at(&s.join(LAST_FILE), at + 100, &[0u8; 200]);
    }) else {
        return;
    };
    let out = bin()
        .args(["repair", "--in-place"])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("will be caught up from the group's leader"),
        "{text}"
    );
    let v = bin().arg("verify").arg(&store).output().unwrap();
    assert_eq!(v.status.code(), Some(0));
    assert_eq!(entries(&store).len(), 4209);
    assert!(repair_folder(&store).is_some());
}
