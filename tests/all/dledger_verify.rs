//! `verify` on DLedger-mode stores: the three oracle stores have no DLedger findings; damaged
//! copies of the plain one (entries, index, checkpoint, currterm, file names and sizes) each
//! give their `dledger.*` code with the file and byte offset, exit 1, never a panic; and
//! `--explain-recovery` says what the Java recovery does to the crashed store.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;

/// `verify --json` lines and exit code.
fn verify(store: &Path, extra: &[&str]) -> (Vec<Value>, String, i32) {
    let out = bin()
        .arg("verify")
        .arg(store)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

fn dledger_findings(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "finding")
        .filter(|l| {
            l["code"]
                .as_str()
                .is_some_and(|c| c.starts_with("dledger."))
        })
        .collect()
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn the_oracle_stores_have_no_dledger_findings() {
    for name in [
        "dledger-4.9",
        "dledger-crashed-4.9",
        "dledger-converted-4.9",
    ] {
        let Some(dir) = oracle(name) else { continue };
        for only in [&[][..], &["--only", "dledger"][..]] {
            let (lines, stderr, code) = verify(&dir.join("store"), only);
            assert_eq!(code, 0, "{name} {only:?}: {stderr}");
            assert!(dledger_findings(&lines).is_empty(), "{name}: {lines:?}");
            let summary = lines.last().unwrap();
            assert!(
                summary["parts"]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from("dledger")),
                "{summary}"
            );
        }
    }
}

/// A writable copy of the plain DLedger oracle store.
fn copy_of_dledger(t: &Path) -> Option<PathBuf> {
    let dir = oracle("dledger-4.9")?;
    let to = t.join("store");
    copy_tree(&dir.join("store"), &to);
    Some(to)
}

fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = std::fs::read(path).unwrap();
    f(&mut b);
    std::fs::write(path, &b).unwrap();
}

fn put_i32(b: &mut [u8], at: usize, v: i32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn put_i64(b: &mut [u8], at: usize, v: i64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

fn get_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

const D1: &str = "dledger-n0/data/00000000000001048576";
const D2: &str = "dledger-n0/data/00000000000002097152";
const LAST: &str = "dledger-n0/data/00000000000005242880";
/// A data file after the last one.
const AFTER_LAST: &str = "dledger-n0/data/00000000000006291456";
/// Where the data ends in the last data file: 5569954 - 5242880.
const LAST_END: u64 = 327_074;

type Damage = fn(&Path);

/// Damage, the code it must give, the file (relative to the store) and byte offset it names.
fn matrix() -> Vec<(
    &'static str,
    Damage,
    &'static str,
    &'static str,
    Option<u64>,
)> {
    vec![
        (
            "flipped entry magic",
            |s| edit(&s.join(D1), |b| put_i32(b, 0, 7)),
            "dledger.entry_magic",
            D1,
            Some(0),
        ),
        (
            "wrong pos",
            |s| {
                edit(&s.join(D1), |b| {
                    let p = get_i64(b, 24);
                    put_i64(b, 24, p + 1)
                })
            },
            "dledger.pos_mismatch",
            D1,
            Some(24),
        ),
        (
            "index gap",
            |s| {
                edit(&s.join(D1), |b| {
                    let i = get_i64(b, 8);
                    put_i64(b, 8, i + 5)
                })
            },
            "dledger.index_gap",
            D1,
            Some(8),
        ),
        (
            "decreasing term",
            // entry 0 gets term 5: entry 1 (term 0) goes back
            |s| {
                edit(&s.join("dledger-n0/data/00000000000000000000"), |b| {
                    put_i64(b, 16, 5)
                })
            },
            "dledger.term_decrease",
            "dledger-n0/data/00000000000000000000",
            None,
        ),
        (
            "index unit disagreeing",
            |s| {
                edit(&s.join("dledger-n0/index/00000000000000000000"), |b| {
                    put_i64(b, 5 * 32 + 24, 3)
                })
            },
            "dledger.index_mismatch",
            "dledger-n0/index/00000000000000000000",
            Some(5 * 32),
        ),
        (
            "checkpoint committed beyond the end",
            |s| {
                std::fs::write(
                    s.join("dledger-n0/checkpoint"),
                    "committedIndex=9999\nendIndex=4209\n",
                )
                .unwrap()
            },
            "dledger.checkpoint_beyond",
            "dledger-n0/checkpoint",
            Some(0),
        ),
        (
            "a data file after the end of the data holding bytes",
            |s| {
                let mut b = vec![0u8; 1 << 20];
                b[4000] = 0xab;
                std::fs::write(s.join(AFTER_LAST), b).unwrap()
            },
            "dledger.blank_tail",
            AFTER_LAST,
            Some(4000),
        ),
        (
            "a foreign file name",
            |s| std::fs::write(s.join("dledger-n0/data/00000000000005242880.bak"), b"x").unwrap(),
            "dledger.file_name",
            "dledger-n0/data/00000000000005242880.bak",
            Some(0),
        ),
        (
            "a short last data file",
            |s| {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(s.join(LAST))
                    .unwrap();
                f.set_len(400_000).unwrap();
            },
            "dledger.file_size",
            LAST,
            Some(400_000),
        ),
        (
            "a truncated data file",
            |s| {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(s.join(D2))
                    .unwrap();
                f.set_len(500_000).unwrap();
            },
            "dledger.entry_size",
            D2,
            None,
        ),
        (
            "currterm garbage",
            |s| std::fs::write(s.join("dledger-n0/currterm"), "currTerm=x7\n").unwrap(),
            "dledger.currterm_unreadable",
            "dledger-n0/currterm",
            Some(9),
        ),
        (
            "currterm missing",
            |s| std::fs::remove_file(s.join("dledger-n0/currterm")).unwrap(),
            "dledger.currterm_unreadable",
            "dledger-n0/currterm",
            Some(0),
        ),
    ]
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn each_damage_gives_its_code_file_and_offset() {
    for (what, damage, code, file, offset) in matrix() {
        let t = tempfile::tempdir().unwrap();
        let Some(store) = copy_of_dledger(t.path()) else {
            return;
        };
        damage(&store);
        for only in [&[][..], &["--only", "dledger"][..]] {
            let (lines, stderr, exit) = verify(&store, only);
            assert_eq!(exit, 1, "{what} {only:?}: {stderr}");
            let found = dledger_findings(&lines);
            let f = found
                .iter()
                .find(|f| f["code"] == code)
                .unwrap_or_else(|| panic!("{what}: no {code} in {found:?}"));
            assert_eq!(f["severity"], "error", "{what}");
            let named = f["file"].as_str().unwrap();
            assert!(
                Path::new(named).ends_with(file),
                "{what}: {named} is not {file}"
            );
            if let Some(o) = offset {
                assert_eq!(f["file_offset"], o, "{what}: {f}");
            }
            assert_eq!(lines.last().unwrap()["healthy"], false, "{what}");
        }
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn explain_recovery_says_what_the_java_recovery_does_to_the_crashed_store() {
    let Some(dir) = oracle("dledger-crashed-4.9") else {
        return;
    };
    let java: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("dledger.json")).unwrap()).unwrap();
    let (lines, stderr, code) = verify(&dir.join("store"), &["--explain-recovery"]);
    // the deleted index file's keys are lost: exit 1
    assert_eq!(code, 1, "{stderr}");
    let plan = &lines[0];
    assert_eq!(plan["type"], "recovery");
    let d = &plan["dledger"];
    let load = &java["afterLoad"];
    assert_eq!(d["ledger_end_index"], load["ledgerEndIndex"]);
    assert_eq!(d["ledger_end_term"], load["ledgerEndTerm"]);
    assert_eq!(d["ledger_begin_index"], load["ledgerBeginIndex"]);
    assert_eq!(d["committed_index_at_load"], load["committedIndex"]);
    assert_eq!(d["committed_pos_at_load"], load["committedPos"]);
    assert_eq!(d["data_cut_pos"], load["dataMaxWrotePosition"]);
    assert_eq!(d["index_cut_pos"], load["indexMaxWrotePosition"]);
    let start = &java["afterStart"];
    assert_eq!(d["committed_index_after_start"], start["committedIndex"]);
    assert_eq!(d["served_end"], start["commitLogMaxOffset"]);
    assert_eq!(
        plan["index_files_deleted"][0]["begin_commitlog_offset"],
        2630855
    );
    assert!(d["index_records_lost"].as_u64().unwrap() > 0);
    // the words
    let out = bin()
        .arg("verify")
        .arg(dir.join("store"))
        .arg("--explain-recovery")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for words in [
        "IndexService.load deletes index file",
        "key lookups find nothing after commitlog offset 2630855",
        "committed index after load: 2597",
        "committed index 3081",
        "cut the data at position 4305353",
        "apache/rocketmq#7355",
        "rmqstore rebuild",
    ] {
        assert!(text.contains(words), "{words}: {text}");
    }
    assert!(!text.contains("scan the commitlog"), "{text}");
    // plain verify's recovery words are DLedger's too
    let (lines, _, _) = verify(&dir.join("store"), &[]);
    let abort = lines
        .iter()
        .find(|l| l["code"] == "store.abort_present")
        .unwrap();
    let action = abort["broker_action"].as_str().unwrap();
    assert!(
        action.starts_with("DLedger recovery: data cut at 4305353"),
        "{action}"
    );
    assert!(!action.contains("dispatch 3082 messages again"), "{action}");
}

/// `DLedgerMmapFileStore.recover` starts at the third-to-last data file only when that file's
/// first entry agrees with its index unit; else it searches backward for the nearest file whose
/// first entry does. Here entry 2236 (the first of the third-to-last file) has a unit with
/// another term: the walk starts one file earlier, and the explanation says why.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn explain_recovery_starts_where_a_first_entry_agrees_with_its_index_unit() {
    const THIRD_TO_LAST: &str = "dledger-n0/data/00000000000003145728";
    let t = tempfile::tempdir().unwrap();
    let Some(store) = copy_of_dledger(t.path()) else {
        return;
    };
    let start = |store: &Path| {
        let (lines, stderr, _) = verify(store, &["--explain-recovery"]);
        let plan = lines
            .iter()
            .find(|l| l["type"] == "recovery")
            .unwrap_or_else(|| panic!("{stderr}"))
            .clone();
        (
            plan["start_file"]["path"].as_str().unwrap().to_string(),
            plan["start_reason"].as_str().unwrap().to_string(),
        )
    };
    let (path, reason) = start(&store);
    assert!(path.ends_with(THIRD_TO_LAST), "{path}");
    assert!(reason.contains("index 2236"), "{reason}");

    // Entry 2236's unit: index file 00000000000000065536, unit 2236 - 2048, its term field.
    let unit = (2236 - 2048) * 32;
    edit(&store.join("dledger-n0/index/00000000000000065536"), |b| {
        put_i64(b, unit + 24, 9)
    });
    let (path, reason) = start(&store);
    assert!(path.ends_with(D2), "{path}");
    assert!(
        reason.contains("1 file(s) before the third-to-last file")
            && reason.contains("00000000000003145728: its first entry: its index unit's term is 9")
            && reason.contains("index 1489"),
        "{reason}"
    );
    let out = bin()
        .arg("verify")
        .arg(&store)
        .arg("--explain-recovery")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("DLedgerMmapFileStore.recover checks the entries from")
            && text.contains("00000000000002097152 on (1 file(s) before"),
        "{text}"
    );
}

/// Bytes after the last entry are a warning, as `commitlog.dirty_tail` is: the recovery ends the
/// data at the last entry and the next append overwrites them; nothing served is lost.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn garbage_after_the_last_entry_is_a_warning_like_a_dirty_tail() {
    let t = tempfile::tempdir().unwrap();
    let Some(store) = copy_of_dledger(t.path()) else {
        return;
    };
    edit(&store.join(LAST), |b| b[LAST_END as usize + 100] = 0xab);
    for only in [&[][..], &["--only", "dledger"][..]] {
        let (lines, stderr, exit) = verify(&store, only);
        assert_eq!(exit, 0, "{only:?}: {stderr}");
        let found = dledger_findings(&lines);
        let [f] = found.as_slice() else {
            panic!("{found:?}")
        };
        assert_eq!(f["code"], "dledger.blank_tail");
        assert_eq!(f["severity"], "warning");
        assert_eq!(f["file_offset"], LAST_END + 100);
        assert!(Path::new(f["file"].as_str().unwrap()).ends_with(LAST));
        assert!(
            f["broker_action"]
                .as_str()
                .unwrap()
                .contains("the next append overwrites these bytes"),
            "{f}"
        );
        if only.is_empty() {
            let dirty = lines
                .iter()
                .find(|l| l["code"] == "commitlog.dirty_tail")
                .unwrap_or_else(|| panic!("{lines:?}"));
            assert_eq!(dirty["severity"], f["severity"]);
        }
    }
}
