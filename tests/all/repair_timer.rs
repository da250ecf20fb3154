//! `repair` of the 5.x timer files on copies of oracle/timer-5.x (written by RocketMQ 5.3.3):
//! for each damage, `repair --out` succeeds, the output verifies clean (all parts and `--only
//! timer`), every byte that left is in the repair folder, and the original is unchanged. Also
//! the wheel rebuilt from the Java timer log against the Java wheel, and a garbage `checkpoint`.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::common::*;
use rmqstore::format::timer::check::check_log_replay;
use rmqstore::format::timer::{TimerCheckpoint, TimerLog, TimerWheel, DEFAULT_PRECISION_MS};

const LOG: &str = "timerlog/00000000000000000000";
const UNIT: u64 = 52;
/// The oracle's timer log data end (129 units) and the timer topic's queue length.
const LOG_END: u64 = 6708;
const TIMER_QUEUE: i64 = 129;

/// A copy of a store tree with the holes of sparse files kept (the wheel is 40 MB, mostly hole).
fn copy_sparse(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dst = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_sparse(&p, &dst);
            continue;
        }
        let src = std::fs::File::open(&p).unwrap();
        let out = std::fs::File::create(&dst).unwrap();
        for (a, b) in data_ranges(&p) {
            let mut buf = vec![0u8; (b - a) as usize];
            src.read_exact_at(&mut buf, a).unwrap();
            out.write_all_at(&buf, a).unwrap();
        }
        out.set_len(src.metadata().unwrap().len()).unwrap();
    }
}

/// Deterministic bytes that are not a timer structure.
fn garbage(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

fn write_at(p: &Path, at: u64, bytes: &[u8]) {
    let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
    f.write_all_at(bytes, at).unwrap();
}

fn checkpoint(root: &Path) -> TimerCheckpoint {
    TimerCheckpoint::from_bytes(&std::fs::read(root.join("config/timercheck")).unwrap()).unwrap()
}

struct Repaired {
    _t: tempfile::TempDir,
    original: PathBuf,
    out: PathBuf,
    manifest: serde_json::Value,
}

/// `verify --json`: its exit code and the codes of the findings it reports above info.
fn verify(root: &Path, args: &[&str]) -> (Option<i32>, Vec<String>) {
    let o = bin()
        .arg("verify")
        .arg("--json")
        .args(args)
        .arg(root)
        .output()
        .unwrap();
    let codes = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "finding" && v["severity"] != "info")
        .map(|v| v["code"].as_str().unwrap_or_default().to_string())
        .collect();
    (o.status.code(), codes)
}

/// Damage a copy of `store`, check that verify reports `seen`, repair it to a new folder and
/// check the result: exit 0, verify clean, every byte kept, the original untouched.
fn repaired(store: &Path, ctx: &str, seen: &str, damage: impl FnOnce(&Path)) -> Repaired {
    let t = scratch();
    let s = t.path().join("store");
    copy_sparse(store, &s);
    damage(&s);
    let (_, before) = verify(&s, &[]);
    assert!(before.iter().any(|c| c == seen), "{ctx}: {before:?}");
    let before = snapshot(&s);
    let out = t.path().join("out");
    bin()
        .arg("repair")
        .arg(&s)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    for only in [&[][..], &["--only", "timer"][..]] {
        let (code, left) = verify(&out, only);
        assert_eq!(
            (code, &left[..]),
            (Some(0), &[][..]),
            "{ctx}: verify {only:?}"
        );
    }
    let repair = repair_folder(&out).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repair.join("manifest.json")).unwrap()).unwrap();
    assert_every_byte_kept(&s, &out, &repair, &manifest, ctx);
    assert_eq!(snapshot(&s), before, "{ctx}: --out changed the original");
    Repaired {
        _t: t,
        original: s,
        out,
        manifest,
    }
}

/// The timer log of the repaired store holds the original's first `units` units, then zeros.
fn assert_log_cut(r: &Repaired, units: u64, ctx: &str) {
    let was = std::fs::read(r.original.join(LOG)).unwrap_or_default();
    let now = std::fs::read(r.out.join(LOG)).unwrap();
    let keep = (units * UNIT) as usize;
    assert_eq!(now[..keep], was[..keep], "{ctx}: kept units");
    assert!(
        now[keep..].iter().all(|&b| b == 0),
        "{ctx}: zero after the cut"
    );
    let cp = checkpoint(&r.out);
    assert_eq!(cp.last_timer_log_flush_pos, keep as i64, "{ctx}: flush pos");
    // the broker enqueues the messages after the last kept unit's again
    assert_eq!(
        cp.last_timer_queue_offset, units as i64,
        "{ctx}: queue offset"
    );
    assert_eq!(cp.master_timer_queue_offset, units as i64, "{ctx}");
    assert!(
        r.manifest["actions"]
            .to_string()
            .contains("cut it after its last valid unit"),
        "{ctx}: {}",
        r.manifest["actions"]
    );
}

/// Two wheels hold the same bytes: the same size, the same non-zero slots.
fn assert_same_wheel(a: &Path, b: &Path, ctx: &str) {
    let slots = |p: &Path| TimerWheel::open(p).unwrap().non_empty().collect::<Vec<_>>();
    let (x, y) = (slots(a), slots(b));
    assert!(!x.is_empty(), "{ctx}: empty wheel");
    assert!(x == y, "{ctx}: the rebuilt wheel differs from the broker's");
}

/// The repaired wheel is the Java one, byte for byte.
fn assert_java_wheel(r: &Repaired, java: &Path, ctx: &str) {
    assert_same_wheel(&r.out.join("timerwheel"), &java.join("timerwheel"), ctx);
}

fn timer_store() -> Option<PathBuf> {
    oracle("timer-5.x").map(|d| d.join("store"))
}

#[test]
fn wheel_rebuilt_from_the_java_log_is_the_java_wheel() {
    let Some(java) = timer_store() else { return };
    let log = TimerLog::open(&java.join("timerlog")).unwrap().unwrap();
    let replay = check_log_replay(&log, DEFAULT_PRECISION_MS);
    assert!(replay.stop.is_none(), "{:?}", replay.stop);
    assert_eq!((replay.units, replay.end), (129, LOG_END));
    let wheel = TimerWheel::open(&java.join("timerwheel")).unwrap();
    assert_eq!(replay.wheel.slots().count(), 59);
    assert!(replay.wheel.same_as(&wheel));
    let t = scratch();
    let p = t.path().join("timerwheel");
    let f = std::fs::File::create(&p).unwrap();
    replay.wheel.write_to(&f, &p).unwrap();
    assert_same_wheel(&p, &java.join("timerwheel"), "written");
}

#[test]
fn timer_log_truncated_mid_unit() {
    let Some(java) = timer_store() else { return };
    let r = repaired(&java, "truncated", "timer.log_bad_entry", |s| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(s.join(LOG))
            .unwrap();
        f.set_len(100 * UNIT + 20).unwrap();
    });
    assert_log_cut(&r, 100, "truncated");
    // the lone torn file is extended to the default file size, so that the broker loads it
    let len = std::fs::metadata(r.out.join(LOG)).unwrap().len();
    assert_eq!(len, rmqstore::format::timer::DEFAULT_TIMERLOG_FILE_SIZE);
    assert!(r.manifest["actions"]
        .to_string()
        .contains("extended with zeros"));
}

#[test]
fn timer_log_zeroed_range() {
    let Some(java) = timer_store() else { return };
    let r = repaired(&java, "zeroed", "timer.slot_chain", |s| {
        write_at(&s.join(LOG), 60 * UNIT, &[0u8; 10 * UNIT as usize]);
    });
    assert_log_cut(&r, 60, "zeroed");
}

#[test]
fn timer_log_garbage() {
    let Some(java) = timer_store() else { return };
    let r = repaired(&java, "garbage", "timer.log_bad_entry", |s| {
        write_at(&s.join(LOG), 70 * UNIT, &garbage(300, 7));
    });
    assert_log_cut(&r, 70, "garbage");
}

#[test]
fn timer_log_deleted() {
    let Some(java) = timer_store() else { return };
    let r = repaired(&java, "deleted", "timer.slot_chain", |s| {
        std::fs::remove_file(s.join(LOG)).unwrap();
    });
    let cp = checkpoint(&r.out);
    // nothing is left in the wheel, and every timer message is enqueued again
    assert_eq!(cp.last_timer_log_flush_pos, 0);
    assert_eq!(cp.last_timer_queue_offset, 0);
    let wheel = TimerWheel::open(&r.out.join("timerwheel")).unwrap();
    assert_eq!(wheel.non_empty().count(), 0);
}

#[test]
fn timer_log_unit_linked_to_itself() {
    let Some(java) = timer_store() else { return };
    let r = repaired(&java, "self-linked", "timer.slot_chain", |s| {
        let at = 90 * UNIT;
        write_at(&s.join(LOG), at + 4, &(at as i64).to_be_bytes());
    });
    assert_log_cut(&r, 90, "self-linked");
}

/// Slot `i` of the oracle's wheel at byte `i * 32`: 1027985 holds 4 units (0..936).
const BUSY_SLOT: u64 = 1_027_985 * 32;

#[test]
fn wheel_slots_random() {
    let Some(java) = timer_store() else { return };
    let r = repaired(&java, "random slots", "timer.slot_chain", |s| {
        let mut g = garbage(96, 3);
        // positive positions, so that verify follows them
        g[16] &= 0x7f;
        write_at(&s.join("timerwheel"), BUSY_SLOT, &g[..32]);
        write_at(&s.join("timerwheel"), 12_345 * 32, &g[32..]);
    });
    assert_java_wheel(&r, &java, "random slots");
}

#[test]
fn wheel_slot_pointing_past_the_log() {
    let Some(java) = timer_store() else { return };
    let r = repaired(&java, "lying slot", "timer.slot_chain", |s| {
        write_at(
            &s.join("timerwheel"),
            BUSY_SLOT + 16,
            &5_000_000i64.to_be_bytes(),
        );
    });
    assert_java_wheel(&r, &java, "lying slot");
}

#[test]
fn wheel_truncated() {
    let Some(java) = timer_store() else { return };
    let r = repaired(&java, "truncated wheel", "timer.wheel_size", |s| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(s.join("timerwheel"))
            .unwrap();
        f.set_len(1_000_000).unwrap();
    });
    assert_java_wheel(&r, &java, "truncated wheel");
}

#[test]
fn timercheck_past_the_log() {
    let Some(java) = timer_store() else { return };
    let r = repaired(
        &java,
        "timercheck past the log",
        "timer.checkpoint_ahead",
        |s| {
            write_at(&s.join("config/timercheck"), 8, &900_000i64.to_be_bytes());
        },
    );
    let (was, now) = (checkpoint(&java), checkpoint(&r.out));
    assert_eq!(now.last_timer_log_flush_pos, LOG_END as i64);
    assert_eq!(now.last_timer_queue_offset, TIMER_QUEUE);
    assert_eq!(now.last_read_time_ms, was.last_read_time_ms);
}

#[test]
fn timercheck_past_the_timer_queue() {
    let Some(java) = timer_store() else { return };
    let r = repaired(
        &java,
        "timercheck past the queue",
        "timer.checkpoint_ahead",
        |s| {
            write_at(&s.join("config/timercheck"), 16, &5_000i64.to_be_bytes());
            write_at(&s.join("config/timercheck"), 24, &5_000i64.to_be_bytes());
        },
    );
    let now = checkpoint(&r.out);
    assert_eq!(now.last_timer_queue_offset, TIMER_QUEUE);
    assert_eq!(now.master_timer_queue_offset, TIMER_QUEUE);
}

#[test]
fn timercheck_empty() {
    let Some(java) = timer_store() else { return };
    let r = repaired(&java, "empty timercheck", "timer.checkpoint_bad", |s| {
        std::fs::write(s.join("config/timercheck"), b"").unwrap();
    });
    let (was, now) = (checkpoint(&java), checkpoint(&r.out));
    assert_eq!(now.last_timer_log_flush_pos, LOG_END as i64);
    assert_eq!(now.last_timer_queue_offset, TIMER_QUEUE);
    // the read cursor the delivered copies prove: past the last delivered slot, not past a
    // pending one
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(java.parent().unwrap().join("timer-messages.json")).unwrap(),
    )
    .unwrap();
    let outs = |k: &str| {
        state[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["timerOutMs"].as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    let last_delivered = outs("delivered").into_iter().max().unwrap();
    let first_pending = outs("pending").into_iter().min().unwrap();
    assert_eq!(now.last_read_time_ms, last_delivered + 1000);
    assert!(now.last_read_time_ms <= first_pending && was.last_read_time_ms <= first_pending);
}

#[test]
fn garbage_checkpoint_is_rewritten_from_the_data() {
    let Some(dir) = oracle("basic-4.9") else {
        return;
    };
    let r = repaired(
        &dir.join("store"),
        "garbage checkpoint",
        "checkpoint.ahead",
        |s| {
            let mut g = garbage(4096, 11);
            // positive times and confirmPhyOffset, far ahead of the data
            for at in [0, 8, 32] {
                g[at] = g[at] & 0x7f | 0x10;
            }
            std::fs::write(s.join("checkpoint"), g).unwrap();
        },
    );
    let cp = rmqstore::format::checkpoint::read_file(&r.out.join("checkpoint"))
        .unwrap()
        .unwrap();
    let q = java_queries(&dir);
    let max = q["maxPhyOffset"].as_i64().unwrap();
    assert_eq!(cp.confirm_phy_offset, max);
    assert!((0..=max).contains(&cp.master_flushed_offset));
    let o = bin()
        .arg("verify")
        .arg("--json")
        .arg(&r.out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("checkpoint."), "{text}");
}
