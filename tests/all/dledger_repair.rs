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
    damaged_copy("dledger-4.9", t, damage)
}

/// [`damaged`] for the oracle store `name`.
fn damaged_copy(
    name: &str,
    t: &Path,
    damage: impl FnOnce(&Path, &[Value]),
) -> Option<(PathBuf, PathBuf)> {
    let orig = oracle(name)?.join("store");
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
    repair_checked_with(orig, store, kept, salvaged, &[])
}

/// [`repair_checked`] with `args` (a broker config) given to repair and verify.
fn repair_checked_with(
    orig: &Path,
    store: &Path,
    kept: usize,
    salvaged: usize,
    args: &[&str],
) -> (Value, Value) {
    let before = snapshot(store);
    let out = bin()
        .args(["repair", "--dry-run", "--json"])
        .args(args)
        .arg(store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out.stderr));
    assert_eq!(snapshot(store), before, "the dry run wrote");

    let dest = store.parent().unwrap().join("repaired");
    let out = bin()
        .args(["repair", "--json"])
        .args(args)
        .arg("--out")
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

    let v = bin().arg("verify").args(args).arg(&dest).output().unwrap();
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
fn a_missing_dledger_index_is_rebuilt_at_the_size_given_else_dledgers_default_and_says_which() {
    let t = scratch();
    let dir = "dledger-n0/index";
    let Some((orig, store)) = damaged(t.path(), |s, _| {
        for e in std::fs::read_dir(s.join(dir)).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
    }) else {
        return;
    };
    // With the size the files had, the rebuilt index is the broker's, byte for byte.
    let given = ["--dledger-index-file-size", "65536"];
    let (summary, _) = repair_checked_with(&orig, &store, 4210, 0, &given);
    assert_eq!(summary["dledger"]["index_file_size"], 65536, "{summary}");
    assert_eq!(
        summary["dledger"]["index_file_size_source"],
        "command-line flag"
    );
    let repaired = store.parent().unwrap().join("repaired");
    let names = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&repaired), names(&orig));
    for n in names(&orig) {
        let file = Path::new(dir).join(n);
        assert_eq!(
            std::fs::read(repaired.join(&file)).unwrap(),
            std::fs::read(orig.join(&file)).unwrap()
        );
    }
    // Without it, nothing on the disk says the size: DLedger's default, named as such.
    let out = bin()
        .args(["repair", "--dry-run", "--json"])
        .arg(&store)
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap();
    assert_eq!(
        summary["dledger"]["index_file_size"],
        160 << 20,
        "{summary}"
    );
    assert_eq!(
        summary["dledger"]["index_file_size_source"],
        "broker default"
    );
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

/// The records of `store` (`dump commitlog --json`) below commitlog offset `below`: offset,
/// topic, and whether it is a repair's tombstone.
fn records_below(store: &Path, below: u64) -> Vec<(u64, String, bool)> {
    let out = bin()
        .args(["dump", "commitlog", "--json", "--body", "none"])
        .arg(store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "message")
        .map(|v| {
            (
                v["commitlog_offset"].as_u64().unwrap(),
                v["topic"].as_str().unwrap().to_string(),
                v["properties"]["RMQSTORE_TOMBSTONE"].is_string(),
            )
        })
        .filter(|(o, _, _)| *o < below)
        .collect()
}

const CONVERTED_DIVIDE: u64 = 2097152;
const CONVERTED_LAST: &str = "dledger-n0/data/00000000000004194304";
const CONVERTED_LAST_START: u64 = 4194304;

/// A converted store damaged on both sides of the divide: a record of `commitlog/` whose body
/// fails its CRC is bridged by the normal rules (a tombstone in its place, every other record
/// at its offset), and a flipped entry magic above it cuts the DLedger log there by the DLedger
/// rules (earlier entries kept as they were, the records after the cut salvaged and named), in
/// one plan that verifies clean.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_converted_store_is_bridged_below_the_divide_and_cut_above_it() {
    let t = scratch();
    let (mut old, mut at) = (0, 0);
    let Some((orig, store)) = damaged_copy("dledger-converted-4.9", t.path(), |s, e| {
        let recs = records_below(s, CONVERTED_DIVIDE);
        old = recs[100].0;
        write_at(&s.join("commitlog/00000000000000000000"), old + 100, b"X");
        at = pos(&e[2300]) - CONVERTED_LAST_START;
        write_at(&s.join(CONVERTED_LAST), at + 3, &[0x7f]);
    }) else {
        return;
    };
    // Entries 0..2300 kept; the damaged entry's record and the 101 after it salvaged.
    let (summary, manifest) = repair_checked(&orig, &store, 2300, 102);
    assert_eq!(summary["tombstones"], 1, "{summary}");
    assert_eq!(summary["fillers"], 0);
    let lost = &summary["lost"][0];
    assert_eq!(lost["commitlog_offset"], old);
    assert_eq!(lost["replaced_by"], "tombstone");
    assert!(lost["msg_id"].is_string(), "{lost}");
    let d = &summary["dledger"];
    assert_eq!(d["first_cut_index"], 2300, "{summary}");
    assert_eq!(d["caught_up_from_leader"], true);
    assert_eq!(summary["cut"]["file"], CONVERTED_LAST);
    assert!(saves(&manifest, CONVERTED_LAST, at), "{manifest}");
    // Below the divide, every record keeps its offset; the damaged one is a tombstone there.
    let dest = store.parent().unwrap().join("repaired");
    let (was, now) = (
        records_below(&orig, CONVERTED_DIVIDE),
        records_below(&dest, CONVERTED_DIVIDE),
    );
    assert_eq!(was.len(), 1500);
    assert_eq!(now.len(), was.len());
    for (w, n) in was.iter().zip(&now) {
        assert_eq!((w.0, &w.1), (n.0, &n.1));
        assert_eq!(n.2, w.0 == old, "record at {}", w.0);
    }
}

/// Damage only below the divide: the DLedger log is not touched (every entry kept, nothing for
/// the leader to send), the old file bridged in place.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn damage_below_the_divide_leaves_the_dledger_log_alone() {
    let t = scratch();
    let Some((orig, store)) = damaged_copy("dledger-converted-4.9", t.path(), |s, _| {
        let recs = records_below(s, CONVERTED_DIVIDE);
        let o = recs[1200].0;
        let f = if o >= 1048576 {
            "commitlog/00000000000001048576"
        } else {
            "commitlog/00000000000000000000"
        };
        write_at(&s.join(f), o % 1048576 + 100, b"XYZ");
    }) else {
        return;
    };
    let (summary, _) = repair_checked(&orig, &store, 2402, 0);
    assert_eq!(summary["tombstones"], 1, "{summary}");
    assert!(summary["cut"].is_null(), "{summary}");
    let d = &summary["dledger"];
    assert_eq!(d["caught_up_from_leader"], false, "{summary}");
    assert_eq!(d["index_rebuilt"], false);
    assert_eq!(d["last_index"], 2401);
}

/// A break below the divide that cannot be bridged (an old file gone) is refused, nothing
/// written: a cut there would take the DLedger log with it.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn an_unbridgeable_break_below_the_divide_is_refused() {
    let t = scratch();
    let Some((_, store)) = damaged_copy("dledger-converted-4.9", t.path(), |s, _| {
        std::fs::remove_file(s.join("commitlog/00000000000001048576")).unwrap();
    }) else {
        return;
    };
    let before = snapshot(&store);
    let out = bin()
        .args(["repair", "--out"])
        .arg(t.path().join("out"))
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = said(&out.stderr);
    assert!(
        err.contains("damage below the divide") && err.contains("take the DLedger log of n0"),
        "{err}"
    );
    assert!(!t.path().join("out").exists());
    assert_eq!(snapshot(&store), before);
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_clean_converted_store_needs_nothing() {
    let Some(dir) = oracle("dledger-converted-4.9") else {
        return;
    };
    let out = bin()
        .args(["repair", "--dry-run"])
        .arg(dir.join("store"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("nothing to repair"), "{text}");
}

/// `--broker-conf` naming two more members: the checkpoint rule.
fn peers_conf(dir: &Path, t: &Path) -> String {
    let conf: String = std::fs::read_to_string(dir.join("broker.conf"))
        .unwrap()
        .lines()
        .map(|l| match l.starts_with("dLegerPeers=") {
            true => "dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913\n".into(),
            false => format!("{l}\n"),
        })
        .collect();
    let p = t.join("peers.conf");
    std::fs::write(&p, conf).unwrap();
    p.display().to_string()
}

/// A crashed replica of a group with peers: entries 2598..=3081 are past the checkpoint's
/// committedIndex 2597. They are not damage: repair keeps every one as it is (a peer may hold
/// them, the leader decides), keeps the committed index, and rebuilds the queues from the
/// committed records only, as the broker dispatches; the result verifies clean by that rule.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_replica_with_peers_keeps_its_uncommitted_entries() {
    let t = scratch();
    let Some(dir) = oracle("dledger-crashed-4.9") else {
        return;
    };
    let conf = peers_conf(&dir, t.path());
    let Some((orig, store)) = damaged_copy("dledger-crashed-4.9", t.path(), |_, _| {}) else {
        return;
    };
    let (summary, manifest) =
        repair_checked_with(&orig, &store, 3082, 0, &["--broker-conf", &conf]);
    let d = &summary["dledger"];
    assert_eq!(d["commit_rule"], "checkpoint", "{summary}");
    assert_eq!(d["uncommitted_kept"], serde_json::json!([2598, 3081]));
    assert_eq!(d["checkpoint"]["committed_index"], 2597);
    assert_eq!(d["caught_up_from_leader"], false);
    assert!(d["first_cut_index"].is_null());
    assert!(summary["cut"].is_null());
    assert_eq!(summary["messages_kept"], 2598);
    assert_eq!(
        manifest["dledger"]["uncommitted_kept"],
        d["uncommitted_kept"]
    );
    let cp = std::fs::read_to_string(
        store
            .parent()
            .unwrap()
            .join("repaired/dledger-n0/checkpoint"),
    )
    .unwrap();
    assert!(cp.contains("committedIndex=2597"), "{cp}");
    // The text says which rule kept them.
    let out = bin()
        .args(["repair", "--dry-run", "--broker-conf", &conf])
        .arg(&store)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "DLedger entries 2598..=3081 of n0 are past the checkpoint's committedIndex 2597"
        ) && text.contains("the group's leader decides"),
        "{text}"
    );
}

/// With peers, a torn last entry (its record damaged, past the committed position the commitlog
/// walks stop at) is cut there and nowhere earlier: the uncommitted entries before it stay, the
/// committed index is not moved, the leader sends the entry again.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_replica_with_peers_is_cut_only_where_recovery_cuts() {
    let t = scratch();
    let Some(dir) = oracle("dledger-crashed-4.9") else {
        return;
    };
    let conf = peers_conf(&dir, t.path());
    let mut file = String::new();
    let mut at = 0;
    let Some((orig, store)) = damaged_copy("dledger-crashed-4.9", t.path(), |s, e| {
        let last = e.last().unwrap();
        file = last["file"].as_str().unwrap().to_string();
        file = file[file.find("dledger-n0").unwrap()..].to_string();
        let start: u64 = file.rsplit('/').next().unwrap().parse().unwrap();
        at = pos(last) - start;
        let size = last["size"].as_u64().unwrap();
        write_at(&s.join(&file), at + 60, &vec![0u8; size as usize - 60]);
    }) else {
        return;
    };
    let (summary, manifest) =
        repair_checked_with(&orig, &store, 3081, 0, &["--broker-conf", &conf]);
    assert!(saves(&manifest, &file, at), "{manifest}");
    let d = &summary["dledger"];
    assert_eq!(d["first_cut_index"], 3081, "{summary}");
    assert_eq!(d["caught_up_from_leader"], true);
    assert_eq!(d["uncommitted_kept"], serde_json::json!([2598, 3080]));
    assert_eq!(d["checkpoint"]["committed_index"], 2597);
}

/// With peers, garbage after the last (uncommitted) entry is zeroed and saved; no entry is cut.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_replica_with_peers_has_garbage_after_its_log_zeroed() {
    let t = scratch();
    let Some(dir) = oracle("dledger-crashed-4.9") else {
        return;
    };
    let conf = peers_conf(&dir, t.path());
    let mut file = String::new();
    let mut end = 0;
    let Some((orig, store)) = damaged_copy("dledger-crashed-4.9", t.path(), |s, e| {
        let last = e.last().unwrap();
        let f = last["file"].as_str().unwrap();
        file = f[f.find("dledger-n0").unwrap()..].to_string();
        let start: u64 = file.rsplit('/').next().unwrap().parse().unwrap();
        end = pos(last) + last["size"].as_u64().unwrap() - start;
        write_at(&s.join(&file), end, b"GARBAGE");
    }) else {
        return;
    };
    let (summary, manifest) =
        repair_checked_with(&orig, &store, 3082, 0, &["--broker-conf", &conf]);
    assert!(saves(&manifest, &file, end), "{manifest}");
    let d = &summary["dledger"];
    assert_eq!(d["caught_up_from_leader"], false, "{summary}");
    assert!(summary["cut"].is_null());
    assert_eq!(d["uncommitted_kept"], serde_json::json!([2598, 3081]));
}
