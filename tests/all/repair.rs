//! `repair`: for each kind of damage, the repaired store is consistent, no readable message is
//! lost (it is kept or salvaged), and the original bytes are all in the repaired store plus the
//! repair folder. `--in-place` survives a kill at any moment.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::common::*;
use assert_cmd::Command;
use rmqstore::engine::Store;
use rmqstore::format::commitlog::Record;
use rmqstore::format::commitlog::{parse_record, RecordIter};
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::format::mapped::Mapped;

/// Relative path -> bytes of every file below `dir`, skipping repair folders and markers.
pub(crate) fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    common::tree(dir)
        .into_iter()
        .filter(|(r, _)| {
            let top = r.components().next().unwrap().as_os_str().to_string_lossy();
            // `lock` is made by an in-place run (the broker's lock is taken on it).
            !(top.starts_with("repair-") || top == ".rmqstore-stage" || top == "lock")
        })
        .collect()
}

/// Records readable before: each commitlog file walked from its start until its first error.
pub(crate) fn readable(root: &Path) -> BTreeMap<u64, Vec<u8>> {
    let mut out = BTreeMap::new();
    let Ok(store) = Store::open(root, &GeometryInputs::default()) else {
        return out;
    };
    for seg in &store.commitlog.segments {
        let map = Mapped::open(&seg.path).unwrap();
        for r in RecordIter::new(&map, seg, true) {
            let Ok(m) = r else { break };
            out.insert(m.position, m.raw.to_vec());
        }
    }
    out
}

pub(crate) struct Repaired {
    pub(crate) _t: tempfile::TempDir,
    pub(crate) original: PathBuf,
    pub(crate) out: PathBuf,
    pub(crate) repair: PathBuf,
    pub(crate) manifest: serde_json::Value,
}

pub(crate) fn damaged(from: &Path, damage: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("store");
    copy_tree(from, &s);
    damage(&s);
    (t, s)
}

fn repair_out(t: tempfile::TempDir, original: PathBuf) -> Repaired {
    repair_out_with(t, original, &[])
}

pub(crate) fn repair_out_with(t: tempfile::TempDir, original: PathBuf, args: &[&str]) -> Repaired {
    let out = t.path().join("out");
    bin()
        .arg("repair")
        .arg(&original)
        .arg("--out")
        .arg(&out)
        .args(args)
        .assert()
        .success();
    let repair = repair_folder(&out).unwrap();
    let manifest =
        serde_json::from_slice(&std::fs::read(repair.join("manifest.json")).unwrap()).unwrap();
    Repaired {
        _t: t,
        original,
        out,
        repair,
        manifest,
    }
}

/// The repaired store: walks cleanly to its end, and its consume queues and index are what a
/// rebuild from its commitlog gives (a consistent store).
pub(crate) fn assert_consistent(r: &Repaired, ctx: &str) {
    let store = Store::open(&r.out, &GeometryInputs::default()).unwrap();
    for seg in &store.commitlog.segments {
        let map = Mapped::open(&seg.path).unwrap();
        for rec in RecordIter::new(&map, seg, true) {
            rec.unwrap_or_else(|e| panic!("{ctx}: repaired commitlog: {e}"));
        }
    }
    assert!(!r.out.join("abort").exists(), "{ctx}: abort left");
    let again = r.out.parent().unwrap().join("again");
    bin()
        .arg("rebuild")
        .arg(&r.out)
        .arg("--out")
        .arg(&again)
        .assert()
        .success();
    assert_eq!(
        tree(&again.join("consumequeue")),
        tree(&r.out.join("consumequeue")),
        "{ctx}: consume queues differ from a rebuild"
    );
    let ix = |d: &Path| tree(d).into_values().collect::<Vec<_>>();
    assert_eq!(
        ix(&again.join("index")),
        ix(&r.out.join("index")),
        "{ctx}: index differs"
    );
    bin().arg("info").arg(&r.out).assert().success();
    if let Ok(v) = Command::cargo_bin("rmqstore")
        .unwrap()
        .arg("--help")
        .output()
    {
        if String::from_utf8_lossy(&v.stdout).contains("verify") {
            bin().arg("verify").arg(&r.out).assert().code(0);
        }
    }
}

/// Every record readable before is in the repaired store at the same offset (with the header
/// fields the manifest says were written back), or salvaged.
pub(crate) fn assert_nothing_lost(r: &Repaired, before: &BTreeMap<u64, Vec<u8>>, ctx: &str) {
    let kept = readable(&r.out);
    let mut salvaged: HashMap<u64, String> = HashMap::new();
    let in_salvage = readable(&r.repair.join("salvaged"));
    let mut files: HashMap<PathBuf, Vec<u8>> = HashMap::new();
    if let Ok(text) = std::fs::read_to_string(r.repair.join("salvaged.jsonl")) {
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let off = v["commitlog_offset"].as_u64().unwrap();
            // the line names where the record is in the salvage store: the same message
            let now = &in_salvage[&v["salvaged_offset"].as_u64().unwrap()];
            let file = r.original.join(v["file"].as_str().unwrap());
            let start: u64 = file.file_name().unwrap().to_str().unwrap().parse().unwrap();
            let bytes = files
                .entry(file.clone())
                .or_insert_with(|| std::fs::read(&file).unwrap());
            let was = &bytes[(off - start) as usize..];
            let message = |raw: &[u8]| match parse_record(raw, 0, 0, true).unwrap() {
                Record::Message(m) => (m.topic.to_string(), m.body.to_vec(), m.queue_id),
                _ => panic!("{ctx}: not a message"),
            };
            assert_eq!(message(now), message(was), "{ctx}: salvaged record {off}");
            salvaged.insert(off, v["msg_id"].as_str().unwrap().to_string());
        }
    }
    // header fields repair wrote back: commitlog offset of the record -> (place in it, old bytes)
    let mut mended: HashMap<u64, Vec<(usize, Vec<u8>)>> = HashMap::new();
    for h in r.manifest["headers"].as_array().into_iter().flatten() {
        let record = h["record"].as_u64().unwrap();
        let file_start: u64 = h["file"].as_str().unwrap()["commitlog/".len()..]
            .parse()
            .unwrap();
        let at = (h["position"].as_u64().unwrap() - (record - file_start)) as usize;
        let old = (0..h["old_bytes"].as_str().unwrap().len() / 2)
            .map(|i| u8::from_str_radix(&h["old_bytes"].as_str().unwrap()[2 * i..2 * i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .unwrap();
        mended.entry(record).or_default().push((at, old));
    }
    for (off, raw) in before {
        let mut now = kept.get(off).cloned();
        if let (Some(now), Some(fields)) = (now.as_mut(), mended.get(off)) {
            for (at, old) in fields {
                now[*at..*at + old.len()].copy_from_slice(old);
            }
        }
        if now.as_ref() == Some(raw) {
            continue;
        }
        assert!(salvaged.contains_key(off), "{ctx}: record at {off} lost");
    }
    assert_eq!(
        r.manifest["salvaged_records"].as_u64().unwrap() as usize,
        salvaged.len()
    );
}

/// Original bytes == repaired store + repair folder, file by file.
pub(crate) fn assert_bytes_kept(r: &Repaired, original: &BTreeMap<PathBuf, Vec<u8>>, ctx: &str) {
    let repaired = tree(&r.out);
    let mut removed: HashMap<PathBuf, Vec<(u64, Vec<u8>)>> = HashMap::new();
    for x in r.manifest["removed"].as_array().unwrap() {
        let len = x["length"].as_u64().unwrap();
        let bytes = match x["saved_as"].as_str() {
            Some(saved) => {
                let at = x["saved_offset"].as_u64().unwrap() as usize;
                let all = std::fs::read(r.repair.join(saved)).unwrap();
                all[at..at + len as usize].to_vec()
            }
            // only zeros: listed, nothing to keep
            None => vec![0; len as usize],
        };
        assert_eq!(bytes.len() as u64, len);
        removed
            .entry(PathBuf::from(x["file"].as_str().unwrap()))
            .or_default()
            .push((x["offset"].as_u64().unwrap(), bytes));
    }
    for (path, orig) in original {
        let pieces = removed.get(path).cloned().unwrap_or_default();
        // a file saved whole (then rewritten or dropped) comes back from the saved copy alone
        if let Some((_, whole)) = pieces
            .iter()
            .find(|(o, b)| *o == 0 && b.len() == orig.len())
        {
            assert!(
                whole == orig,
                "{ctx}: saved copy of {} differs",
                path.display()
            );
            continue;
        }
        let mut rebuilt = repaired.get(path).cloned().unwrap_or_default();
        for (off, bytes) in &pieces {
            let end = *off as usize + bytes.len();
            if rebuilt.len() < end {
                rebuilt.resize(end, 0);
            }
            rebuilt[*off as usize..end].copy_from_slice(bytes);
        }
        // a torn file was extended with zeros
        let tail_zero =
            rebuilt.len() >= orig.len() && rebuilt[orig.len()..].iter().all(|&b| b == 0);
        assert!(
            tail_zero && rebuilt[..orig.len()] == orig[..],
            "{ctx}: bytes of {} not kept",
            path.display()
        );
    }
}

pub(crate) fn check(from: &Path, ctx: &str, damage: impl FnOnce(&Path)) -> Repaired {
    let (t, s) = damaged(from, damage);
    let before = readable(&s);
    let original = tree(&s);
    let r = repair_out(t, s);
    assert_consistent(&r, ctx);
    assert_nothing_lost(&r, &before, ctx);
    assert_bytes_kept(&r, &original, ctx);
    // the damaged store itself was not touched
    assert_eq!(
        tree(&r.original),
        original,
        "{ctx}: --out changed the original"
    );
    r
}

pub(crate) fn commitlog_file(s: &Path, i: usize) -> PathBuf {
    let mut v: Vec<_> = std::fs::read_dir(s.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v[i].clone()
}

/// Position of the `n`th record of a commitlog file.
pub(crate) fn record_pos(f: &Path, n: usize) -> usize {
    let b = std::fs::read(f).unwrap();
    let mut p = 0;
    for _ in 0..n {
        p += i32::from_be_bytes(b[p..p + 4].try_into().unwrap()) as usize;
    }
    p
}

pub(crate) fn patch(f: &Path, at: usize, edit: impl FnOnce(&mut [u8])) {
    let mut b = std::fs::read(f).unwrap();
    edit(&mut b[at..]);
    std::fs::write(f, b).unwrap();
}

#[test]
fn flipped_body_bit() {
    let r = check(&fixture("store-4.9"), "flipped body bit", |s| {
        let f = commitlog_file(s, 3);
        let p = record_pos(&f, 5);
        patch(&f, p + 100, |b| b[0] ^= 0x10);
    });
    // bridged in place: the record is tombstoned, nothing is cut or salvaged
    assert!(r.manifest["cut"].is_null(), "{}", r.manifest["cut"]);
    let b = &r.manifest["bridges"][0];
    assert!(b["why"].as_str().unwrap().contains("CRC"));
    assert_eq!(b["tombstones"], 1);
    assert_eq!(r.manifest["salvaged_records"], 0);
}

#[test]
fn flipped_size_field() {
    check(&fixture("store-4.9"), "flipped size", |s| {
        let f = commitlog_file(s, 1);
        let p = record_pos(&f, 7);
        patch(&f, p + 2, |b| b[0] ^= 0x01);
    });
}

#[test]
fn torn_last_record() {
    let r = check(&fixture("store-4.9"), "torn last record", |s| {
        let f = commitlog_file(s, 8);
        let p = record_pos(&f, 12);
        let b = std::fs::read(&f).unwrap();
        std::fs::write(&f, &b[..p + 40]).unwrap();
    });
    assert_eq!(r.manifest["salvaged_records"], 0);
}

#[test]
fn zeroed_page_in_the_middle() {
    check(&fixture("store-4.9"), "zeroed page", |s| {
        let f = commitlog_file(s, 2);
        patch(&f, 40960, |b| b[..4096].fill(0));
    });
}

#[test]
fn missing_commitlog_file_in_the_middle() {
    check(&fixture("store-4.9"), "missing commitlog file", |s| {
        std::fs::remove_file(commitlog_file(s, 4)).unwrap();
    });
}

#[test]
fn consume_queue_damage() {
    check(&fixture("store-4.9"), "deleted cq file", |s| {
        std::fs::remove_file(s.join("consumequeue/OrderTopic/1/00000000000000002000")).unwrap();
    });
    check(&fixture("store-4.9"), "truncated cq file", |s| {
        let f = s.join("consumequeue/AuditTopic/2/00000000000000000000");
        let b = std::fs::read(&f).unwrap();
        std::fs::write(&f, &b[..777]).unwrap();
    });
    check(&fixture("store-4.9"), "extra cq file and queue", |s| {
        let d = s.join("consumequeue/GhostTopic/0");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("00000000000000000000"), vec![7u8; 2000]).unwrap();
    });
    check(&fixture("store-4.9"), "unit past the end", |s| {
        let d = s.join("consumequeue/PaymentTopic/0");
        let mut files: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let f = files.last().unwrap().clone();
        let b = std::fs::read(&f).unwrap();
        let n = b
            .chunks(20)
            .take_while(|c| c.iter().any(|&x| x != 0))
            .count();
        patch(&f, n * 20, |u| {
            u[..8].copy_from_slice(&(1u64 << 40).to_be_bytes());
            u[8..12].copy_from_slice(&500i32.to_be_bytes());
        });
    });
}

#[test]
fn index_and_shutdown_damage() {
    check(&fixture("store-4.9"), "deleted index folder", |s| {
        std::fs::remove_dir_all(s.join("index")).unwrap();
    });
    let r = check(&fixture("store-4.9"), "abort left behind", |s| {
        std::fs::write(s.join("abort"), b"").unwrap();
    });
    assert!(r.manifest["actions"].to_string().contains("abort"));
}

#[test]
fn config_damage() {
    let r = check(
        &fixture("store-4.9"),
        "corrupt consumerOffset.json with .bak",
        |s| {
            std::fs::write(
                s.join("config/consumerOffset.json"),
                b"{\"offsetTable\":{\"x",
            )
            .unwrap();
        },
    );
    let repaired = std::fs::read(r.out.join("config/consumerOffset.json")).unwrap();
    let bak = std::fs::read(r.original.join("config/consumerOffset.json.bak")).unwrap();
    assert_eq!(repaired, bak, "restored from .bak");
    check(
        &fixture("store-4.9"),
        "corrupt consumerOffset.json without .bak",
        |s| {
            std::fs::write(s.join("config/consumerOffset.json"), b"garbage").unwrap();
            std::fs::remove_file(s.join("config/consumerOffset.json.bak")).unwrap();
        },
    );
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_stores() {
    if let Some(dir) = oracle("crashed-4.9") {
        let r = check(&dir.join("store"), "crashed-4.9", |_| {});
        // cut where Java's recovery cut
        let q = java_queries(&dir);
        let _ = &r;
        let store = Store::open(&r.out, &GeometryInputs::default()).unwrap();
        assert_eq!(
            store.commitlog.max_offset().unwrap() as i64,
            q["maxPhyOffset"].as_i64().unwrap()
        );
    }
    if let Some(dir) = oracle("basic-4.9") {
        let r = check(&dir.join("store"), "basic-4.9 flipped bit", |s| {
            let f = commitlog_file(s, 2);
            let p = record_pos(&f, 3);
            patch(&f, p + 120, |b| b[0] ^= 0x80);
        });
        assert_eq!(r.manifest["bridges"][0]["tombstones"], 1);
        assert_eq!(r.manifest["salvaged_records"], 0);
    }
}

#[test]
fn dry_run_changes_nothing() {
    let (t, s) = damaged(&fixture("store-4.9"), |s| {
        std::fs::write(s.join("abort"), b"").unwrap();
    });
    let before = tree(t.path());
    let o = bin()
        .arg("repair")
        .arg("--dry-run")
        .arg("--json")
        .arg(&s)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(o).unwrap();
    assert!(text.lines().last().unwrap().contains("\"summary\""));
    assert!(text.contains("abort"));
    assert_eq!(tree(t.path()), before);
}

#[test]
fn in_place_survives_kills() {
    let damage = |s: &Path| {
        let f = commitlog_file(s, 3);
        let p = record_pos(&f, 5);
        patch(&f, p + 100, |b| b[0] ^= 0x10);
    };
    let exe = assert_cmd::cargo::cargo_bin("rmqstore");
    // the expected new form, made once with --out
    let (t0, s0) = damaged(&fixture("store-4.9"), damage);
    let new_form = tree(&repair_out(t0, s0).out);
    let check_old_or_new = |s: &Path, old: &BTreeMap<PathBuf, Vec<u8>>, ctx: &str| {
        let now = tree(s);
        assert!(
            &now == old || now == new_form,
            "{ctx}: store is neither old nor new"
        );
    };
    for point in ["repair-staged", "root-exchanged"] {
        let (_t, s) = damaged(&fixture("store-4.9"), damage);
        let old = tree(&s);
        let st = bin()
            .env("RMQSTORE_FAILPOINT", point)
            .arg("repair")
            .arg("--in-place")
            .arg(&s)
            .assert()
            .get_output()
            .status;
        assert!(!st.success());
        check_old_or_new(&s, &old, point);
        bin()
            .arg("repair")
            .arg("--in-place")
            .arg(&s)
            .assert()
            .success();
        assert!(tree(&s) == new_form, "{point}: rerun did not finish");
    }
    for delay in [0u64, 5, 15, 30, 60, 100] {
        let (_t, s) = damaged(&fixture("store-4.9"), damage);
        let old = tree(&s);
        let mut child = std::process::Command::new(&exe)
            .arg("repair")
            .arg("--in-place")
            .arg(&s)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        check_old_or_new(&s, &old, &format!("kill after {delay} ms"));
        bin()
            .arg("repair")
            .arg("--in-place")
            .arg(&s)
            .assert()
            .success();
        assert!(
            tree(&s) == new_form,
            "kill after {delay} ms: rerun did not finish"
        );
    }
}

/// QUEUEOFFSET of the record at `p` (header bytes 20..28).
fn queue_offset_at(f: &Path, p: usize) -> i64 {
    let b = std::fs::read(f).unwrap();
    i64::from_be_bytes(b[p + 20..p + 28].try_into().unwrap())
}

/// Found by the `store_walk` fuzz target: a record whose QUEUEOFFSET repeats the one before it
/// in its queue. The broker's dispatch takes it for a repeat and writes no unit, so every later
/// unit of the queue is one place off; the repaired store kept the record and failed verify.
/// Now the field is written back where the unit or the record's neighbours prove its value, and
/// the commitlog is cut where a break in a queue's offsets is left unexplained.
#[test]
fn regression_13_repeated_queue_offset() {
    let f = commitlog_file(&fixture("store-4.9"), 2);
    let p = (4..40)
        .map(|n| record_pos(&f, n))
        .find(|&p| queue_offset_at(&f, p) > 0)
        .unwrap();
    let repeat = (queue_offset_at(&f, p) - 1).to_be_bytes();
    let r = check(&fixture("store-4.9"), "repeated queue offset", |s| {
        patch(&commitlog_file(s, 2), p + 20, |b| {
            b[..8].copy_from_slice(&repeat)
        });
    });
    bin().arg("verify").arg(&r.original).assert().code(1);
}

/// Found by the `store_walk` fuzz target: a record with a negative QUEUEOFFSET. The broker's
/// consume queue writer skips it (an offset below the queue's end is a repeat); the repaired
/// store gave it a unit and failed verify. It is header damage now: it gets no unit, and repair
/// writes the value the consume queue unit proves back.
#[test]
fn regression_13_negative_queue_offset() {
    let r = check(&fixture("store-4.9"), "negative queue offset", |s| {
        let f = commitlog_file(s, 2);
        let p = record_pos(&f, 6);
        patch(&f, p + 20, |b| {
            b[..8].copy_from_slice(&(-3i64).to_be_bytes())
        });
    });
    bin().arg("verify").arg(&r.original).assert().code(1);
}

/// Found by the `store_walk` fuzz target: a record whose QUEUEOFFSET is so large that its unit's
/// position (offset x 20) overflows made the consume queue writer add with overflow
/// (src/format/consumequeue/write.rs, `put`). Such an offset names no unit (the broker's
/// `cqOffset * 20` overflows a long): header damage like a negative one.
#[test]
fn regression_13_queue_offset_past_a_long() {
    for q in [i64::MAX / 20 + 1, i64::MAX] {
        let r = check(&fixture("store-4.9"), "queue offset past a long", |s| {
            let f = commitlog_file(s, 2);
            let p = record_pos(&f, 6);
            patch(&f, p + 20, |b| b[..8].copy_from_slice(&q.to_be_bytes()));
        });
        let o = bin()
            .arg("verify")
            .arg(&r.original)
            .assert()
            .code(1)
            .get_output()
            .stdout
            .clone();
        assert!(String::from_utf8_lossy(&o).contains("commitlog.bad_header"));
    }
}

/// Found by the `store_walk` fuzz target: a SCHEDULE_TOPIC_XXXX record whose DELAY is not a
/// number right at the cut made the salvage stop with an error (the salvage store's writer
/// cannot dispatch it, as the broker cannot). The broker's recovery rejects such a record, so
/// verify cuts there and the salvage leaves it out: its bytes are in the repair folder.
#[test]
fn regression_13_schedule_record_with_a_bad_delay() {
    let f = commitlog_file(&fixture("store-4.9"), 2);
    let b = std::fs::read(&f).unwrap();
    let (mut p, mut at) = (0, None);
    while p + 4 <= b.len() && at.is_none() {
        let size = i32::from_be_bytes(b[p..p + 4].try_into().unwrap());
        if size <= 0 {
            break;
        }
        let rec = &b[p..p + size as usize];
        let has = |n: &[u8]| rec.windows(n.len()).position(|w| w == n);
        if let (Some(_), Some(d)) = (has(b"SCHEDULE_TOPIC_XXXX"), has(b"DELAY\x01")) {
            at = Some(p + d + 6);
        }
        p += size as usize;
    }
    let at = at.expect("a schedule record in the fixture");
    let (t, s) = damaged(&fixture("store-4.9"), |s| {
        patch(&commitlog_file(s, 2), at, |b| b[0] = b'x');
    });
    let original = tree(&s);
    let o = bin()
        .arg("verify")
        .arg(&s)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    assert!(String::from_utf8_lossy(&o).contains("DELAY"));
    let r = repair_out(t, s);
    assert_consistent(&r, "bad delay");
    assert_bytes_kept(&r, &original, "bad delay");
    assert!(r.manifest["salvaged_records"].as_u64().unwrap() > 100);
}

/// Found by the `store_walk` fuzz target: the first record of a queue with both PHYSICALOFFSET
/// and QUEUEOFFSET damaged (negative), nothing proving the queue offset. Only PHYSICALOFFSET was
/// judged (one rule a record), so repair mended it, kept the record, and the repaired store
/// failed verify on the queue offset. Each rule a record breaks is judged now: the commitlog is
/// cut at the record, and its bytes are in the repair folder.
#[test]
fn regression_13_two_fields_of_one_record() {
    let f = commitlog_file(&fixture("store-4.9"), 0);
    let p = (1..40)
        .map(|n| record_pos(&f, n))
        .find(|&p| queue_offset_at(&f, p) == 0)
        .unwrap();
    let (t, s) = damaged(&fixture("store-4.9"), |s| {
        std::fs::remove_dir_all(s.join("consumequeue")).unwrap();
        patch(&commitlog_file(s, 0), p + 20, |b| {
            b[..8].copy_from_slice(&(-7i64).to_be_bytes());
            b[8..16].copy_from_slice(&12345i64.to_be_bytes());
        });
    });
    let original = tree(&s);
    let r = repair_out(t, s);
    assert_consistent(&r, "two fields");
    assert_bytes_kept(&r, &original, "two fields");
    assert_eq!(r.manifest["cut"]["offset"].as_u64(), Some(p as u64));
}

#[test]
fn ctrl_c_stops_a_repair_before_its_switch_and_removes_its_stage() {
    let (t, s) = damaged(&fixture("store-4.9"), |s| {
        let f = commitlog_file(s, 3);
        let p = record_pos(&f, 5);
        patch(&f, p + 100, |b| b[0] ^= 0x10);
    });
    // every file but `lock`, which the in-place run makes (as a broker does)
    let files = |s: &Path| {
        let mut t = tree(s);
        t.retain(|p, _| !p.ends_with("lock"));
        t
    };
    let before = files(&s);
    let (code, said) = interrupted_at(
        "repair-staged",
        &["repair".as_ref(), s.as_os_str(), "--in-place".as_ref()],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("stopping the repair"), "{said}");
    assert!(said.contains("repair interrupted"), "{said}");
    assert!(files(&s) == before, "the store changed: {said}");
    let beside: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["store"], "{said}");
    let out = t.path().join("out");
    let (code, said) = interrupted_at(
        "repair-staged",
        &[
            "repair".as_ref(),
            s.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(!out.exists(), "{said}");
    // and a run left alone repairs it
    bin()
        .arg("repair")
        .arg(&s)
        .arg("--in-place")
        .assert()
        .success();
    bin().arg("verify").arg(&s).assert().code(0);
}
