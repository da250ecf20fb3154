//! The damage matrix: file kinds (first, middle and last commitlog file, a consume queue file,
//! an index file, the checkpoint, each config file and its `.bak`) times damage kinds (random
//! truncation, truncation to 0, bit flips in each record header field and in the body, a zeroed
//! page, garbage, deletion, a foreign file, a folder, a FIFO or a symlink loop in place of the
//! file, a huge sparse extension), on generated stores and copies of the Java-written stores.
//!
//! For every case: every run ends within its time limit and without a panic; `verify` names the
//! damaged file (exit 1 where the broker itself would lose data or refuse to start); `info` and
//! `repair --dry-run` write nothing anywhere; `repair --out` succeeds, its result verifies clean, every byte of the damaged store is in the
//! repaired store or the repair folder, the damaged store is unchanged, and nothing is written
//! beside it but the output folder.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;

/// The stores the matrix damages: committed generated fixtures, and the Java-written oracles
/// when the build found them (`rmqstore_oracle`; [`oracle_stores_are_damaged_too`] is ignored
/// otherwise, so the runner says the oracle part did not run).
fn sources() -> Vec<(String, PathBuf)> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut v = vec![
        ("store-4.9".to_string(), fixtures.join("store-4.9")),
        ("store-5x".to_string(), fixtures.join("store-5x")),
    ];
    if cfg!(rmqstore_oracle) {
        for name in ORACLES {
            let d = oracle(name).expect("the build found the oracle stores");
            v.push((name.to_string(), d.join("store")));
        }
    }
    v
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_stores_are_damaged_too() {
    let names: Vec<String> = sources().into_iter().map(|(n, _)| n).collect();
    for name in ORACLES {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    FirstCommitlog,
    MiddleCommitlog,
    LastCommitlog,
    ConsumeQueue,
    Index,
    Checkpoint,
    Config(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    TotalSize,
    Magic,
    BodyCrc,
    QueueId,
    QueueIdHigh,
    Flag,
    QueueOffset,
    PhysicalOffset,
    SysFlagTx,
    BornTimestamp,
    StoreTimestamp,
    Body,
    Topic,
    TopicHigh,
    Properties,
}

const FIELDS: [Field; 15] = [
    Field::TotalSize,
    Field::Magic,
    Field::BodyCrc,
    Field::QueueId,
    Field::QueueIdHigh,
    Field::Flag,
    Field::QueueOffset,
    Field::PhysicalOffset,
    Field::SysFlagTx,
    Field::BornTimestamp,
    Field::StoreTimestamp,
    Field::Body,
    Field::Topic,
    Field::TopicHigh,
    Field::Properties,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    Truncate,
    TruncateToZero,
    ZeroPage,
    Garbage,
    Delete,
    Foreign,
    DirInPlace,
    Fifo,
    SymlinkLoop,
    HugeExtension,
    /// A bit of a record header field (commitlog targets), or any bit (other files).
    Flip(Field),
}

const FILE_DAMAGE: [Damage; 10] = [
    Damage::Truncate,
    Damage::TruncateToZero,
    Damage::ZeroPage,
    Damage::Garbage,
    Damage::Delete,
    Damage::Foreign,
    Damage::DirInPlace,
    Damage::Fifo,
    Damage::SymlinkLoop,
    Damage::HugeExtension,
];

/// A small deterministic generator (xorshift), so every run damages the same bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file());
    v.sort();
    v
}

/// Commitlog files that hold records (not the all-zero pre-allocated ones).
fn data_files(store: &Path) -> Vec<PathBuf> {
    sorted_files(&store.join("commitlog"))
        .into_iter()
        .filter(|p| {
            let b = std::fs::read(p).unwrap();
            b.len() >= 8 && b[..8] != [0; 8]
        })
        .collect()
}

/// The file a target names in `store`, if the store has one.
fn target_file(store: &Path, t: Target) -> Option<PathBuf> {
    let data = data_files(store);
    match t {
        Target::FirstCommitlog => data.first().cloned(),
        Target::MiddleCommitlog => data.get(data.len() / 2).cloned(),
        Target::LastCommitlog => data.last().cloned(),
        Target::ConsumeQueue => {
            let mut qs: Vec<PathBuf> = Vec::new();
            for t in sorted_files_dirs(&store.join("consumequeue")) {
                for q in sorted_files_dirs(&t) {
                    qs.extend(sorted_files(&q));
                }
            }
            qs.get(qs.len() / 2).cloned()
        }
        Target::Index => {
            let v = sorted_files(&store.join("index"));
            v.get(v.len() / 2).cloned()
        }
        Target::Checkpoint => Some(store.join("checkpoint")).filter(|p| p.exists()),
        Target::Config(name) => Some(store.join("config").join(name)).filter(|p| p.exists()),
    }
}

fn sorted_files_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_dir());
    v.sort();
    v
}

/// Start of the middle record of a commitlog file, and its record bytes' layout: (position,
/// body length, topic length position).
fn middle_record(b: &[u8]) -> Option<(usize, usize, usize)> {
    let mut starts = Vec::new();
    let mut p = 0usize;
    while p + 8 <= b.len() {
        let size = i32::from_be_bytes(b[p..p + 4].try_into().unwrap());
        let magic = u32::from_be_bytes(b[p + 4..p + 8].try_into().unwrap());
        if size <= 0 || !(magic == 0xDAA3_20A7 || magic == 0xDAA3_20AB) {
            break;
        }
        starts.push(p);
        p += size as usize;
    }
    let pos = *starts.get(starts.len() / 2)?;
    let sys = i32::from_be_bytes(b[pos + 36..pos + 40].try_into().unwrap());
    let born = if sys & 0x10 != 0 { 20 } else { 8 };
    let store = if sys & 0x20 != 0 { 20 } else { 8 };
    let body_len_pos = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8;
    let body_len = i32::from_be_bytes(
        b[pos + body_len_pos..pos + body_len_pos + 4]
            .try_into()
            .unwrap(),
    );
    Some((pos, body_len_pos, body_len.max(0) as usize))
}

/// Damage `file` in place; returns the byte offset in the file the damage is at.
fn damage(file: &Path, d: Damage, rng: &mut Rng) -> u64 {
    use std::os::unix::fs::FileExt;
    let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    let data_len = {
        let b = std::fs::read(file).unwrap_or_default();
        b.iter().rposition(|&x| x != 0).map_or(0, |p| p as u64 + 1)
    };
    let replace = |make: &dyn Fn(&Path)| {
        std::fs::remove_file(file).unwrap();
        make(file);
    };
    match d {
        Damage::Truncate => {
            let at = 1 + rng.below(data_len.max(2) - 1);
            std::fs::OpenOptions::new()
                .write(true)
                .open(file)
                .unwrap()
                .set_len(at)
                .unwrap();
            at
        }
        Damage::TruncateToZero => {
            std::fs::File::create(file).unwrap();
            0
        }
        Damage::ZeroPage => {
            let at = rng.below(data_len.max(1)) & !4095;
            let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
            let n = 4096.min(len.saturating_sub(at));
            f.write_all_at(&vec![0u8; n as usize], at).unwrap();
            at
        }
        Damage::Garbage => {
            let at = rng.below(data_len.max(1));
            let n = 64.min(len - at).max(1);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
            f.write_all_at(&bytes, at).unwrap();
            at
        }
        Damage::Delete => {
            std::fs::remove_file(file).unwrap();
            0
        }
        Damage::Foreign => {
            let mut name = file.file_name().unwrap().to_os_string();
            name.push(".orig-copy");
            std::fs::write(file.with_file_name(name), b"not a store file").unwrap();
            0
        }
        Damage::DirInPlace => {
            replace(&|p| {
                std::fs::create_dir(p).unwrap();
                std::fs::write(p.join("inside"), b"x").unwrap();
            });
            0
        }
        Damage::Fifo => {
            replace(&|p| nix::unistd::mkfifo(p, nix::sys::stat::Mode::S_IRWXU).unwrap());
            0
        }
        Damage::SymlinkLoop => {
            replace(&|p| {
                let other = p.with_extension("loop");
                std::os::unix::fs::symlink(&other, p).unwrap();
                std::os::unix::fs::symlink(p, &other).unwrap();
            });
            0
        }
        Damage::HugeExtension => {
            std::fs::OpenOptions::new()
                .write(true)
                .open(file)
                .unwrap()
                .set_len(3 << 30)
                .unwrap();
            len
        }
        Damage::Flip(field) => {
            let mut b = std::fs::read(file).unwrap();
            let at = match middle_record(&b) {
                Some((pos, blp, body_len)) => {
                    let topic_at = pos + blp + 4 + body_len;
                    let topic_len = b[topic_at] as usize;
                    let props_at = topic_at + 1 + topic_len + 2;
                    let (off, bit) = match field {
                        Field::TotalSize => (pos + 2, 0x10),
                        Field::Magic => (pos + 5, 0x01),
                        Field::BodyCrc => (pos + 10, 0x04),
                        Field::QueueId => (pos + 15, 0x01),
                        Field::QueueIdHigh => (pos + 12, 0x40),
                        Field::Flag => (pos + 19, 0x02),
                        Field::QueueOffset => (pos + 27, 0x02),
                        Field::PhysicalOffset => (pos + 29, 0x08),
                        Field::SysFlagTx => (pos + 39, 0x04),
                        Field::BornTimestamp => (pos + 46, 0x20),
                        Field::StoreTimestamp => (pos + blp - 4 - 8 - 8 - 8 + 5, 0x01),
                        Field::Body => (pos + blp + 4 + body_len / 2, 0x10),
                        Field::Topic => (topic_at + 1, 0x02),
                        Field::TopicHigh => (topic_at + 1, 0x80),
                        Field::Properties => (props_at + 1, 0x01),
                    };
                    b[off] ^= bit;
                    match field {
                        Field::StoreTimestamp | Field::BornTimestamp | Field::Flag => off,
                        _ => pos,
                    }
                }
                None => {
                    let at = rng.below(data_len.max(1)) as usize;
                    if let Some(x) = b.get_mut(at) {
                        *x ^= 1 << (rng.below(8) as u8);
                    }
                    at
                }
            } as u64;
            std::fs::write(file, b).unwrap();
            at
        }
    }
}

/// Damage the broker's own rules make an error (it loses data, misreads, or refuses to start).
fn must_be_error(t: Target, d: Damage) -> bool {
    let commitlog = matches!(
        t,
        Target::FirstCommitlog | Target::MiddleCommitlog | Target::LastCommitlog
    );
    match d {
        Damage::Flip(f) => {
            commitlog
                && !matches!(
                    f,
                    Field::Flag
                        | Field::BornTimestamp
                        | Field::StoreTimestamp
                        | Field::Properties
                        | Field::SysFlagTx
                )
        }
        Damage::Foreign => commitlog || t == Target::ConsumeQueue,
        // A first file gone is what expiry does; the last one gone leaves units past the end.
        Damage::Delete => commitlog && t != Target::FirstCommitlog,
        Damage::Truncate | Damage::TruncateToZero | Damage::HugeExtension => {
            commitlog || t == Target::ConsumeQueue || t == Target::Index
        }
        Damage::DirInPlace | Damage::Fifo | Damage::SymlinkLoop => true,
        Damage::ZeroPage | Damage::Garbage => commitlog,
    }
}

fn names(findings: &[Value], file: &Path) -> bool {
    let want = file.display().to_string();
    findings.iter().any(|f| {
        let p = f["file"].as_str().unwrap_or("");
        p == want || p.starts_with(&format!("{want}/")) || want.starts_with(&format!("{p}/"))
    })
}

fn verify_json(store: &Path, ctx: &str) -> (i32, Vec<Value>) {
    let o = bin()
        .arg("verify")
        .arg(store)
        .arg("--json")
        .output()
        .unwrap_or_else(|e| panic!("{ctx}: verify did not end: {e}"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !stderr.contains("panicked"),
        "{ctx}: verify panicked: {stderr}"
    );
    let code = o.status.code().unwrap_or(-1);
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (code, lines)
}

/// Run one case; `Err` says what went wrong.
/// One damaged store through every command; false when the source has no such file.
fn run_case(name: &str, src: &Path, t: Target, d: Damage, seed: u64) -> bool {
    let ctx = format!("{name} {t:?} {d:?}");
    let tmp = scratch();
    let store = tmp.path().join("store");
    copy_tree(src, &store);
    let Some(file) = target_file(&store, t) else {
        return false;
    };
    let mut rng = Rng(seed | 1);
    let at = damage(&file, d, &mut rng);
    let original = snapshot(&store);
    let beside = snapshot(tmp.path());

    // verify: ends, never panics, names the damaged file.
    let (code, lines) = verify_json(&store, &ctx);
    assert!(
        code == 0 || code == 1,
        "{ctx}: verify exit {code}: {lines:?}"
    );
    let findings: Vec<Value> = lines
        .iter()
        .filter(|l| l["type"] == "finding")
        .cloned()
        .collect();
    let named = match d {
        // The file is gone: the finding is about the hole it leaves.
        Damage::Delete => findings.iter().any(|f| {
            matches!(
                f["code"].as_str(),
                Some("commitlog.gap" | "consumequeue.past_end" | "consumequeue.gap")
            )
        }),
        Damage::Foreign => {
            let mut n = file.file_name().unwrap().to_os_string();
            n.push(".orig-copy");
            names(&findings, &file.with_file_name(n))
        }
        _ => names(&findings, &file),
    };
    if must_be_error(t, d) {
        assert_eq!(code, 1, "{ctx}: verify passed: {findings:#?}");
        assert!(
            named,
            "{ctx}: no finding names {}: {findings:#?}",
            file.display()
        );
        if matches!(d, Damage::Flip(_)) {
            let off_named = findings.iter().any(|x| {
                x["file"].as_str() == Some(&file.display().to_string())
                    && x["file_offset"].as_u64() == Some(at)
            });
            assert!(
                off_named,
                "{ctx}: no finding names offset {at} of {}: {findings:#?}",
                file.display()
            );
        }
    }

    // info and repair --dry-run: end, never panic, write nothing anywhere.
    for args in [vec!["info", "--json"], vec!["repair", "--dry-run"]] {
        let o = bin()
            .arg(args[0])
            .arg(&store)
            .args(&args[1..])
            .output()
            .unwrap_or_else(|e| panic!("{ctx}: {args:?} did not end: {e}"));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !stderr.contains("panicked"),
            "{ctx}: {args:?} panicked: {stderr}"
        );
        let code = o.status.code().unwrap_or(-1);
        assert!(
            code == 0 || (code == 2 && args[0] == "info"),
            "{ctx}: {args:?} exit {code}: {stderr}"
        );
        assert_eq!(
            snapshot(tmp.path()),
            beside,
            "{ctx}: {args:?} wrote something"
        );
    }

    // repair --out: succeeds, its output verifies clean, every byte is kept.
    let out = tmp.path().join("out");
    let r = bin()
        .arg("repair")
        .arg(&store)
        .arg("--out")
        .arg(&out)
        .arg("--json")
        .output()
        .unwrap_or_else(|e| panic!("{ctx}: repair did not end: {e}"));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        r.status.success(),
        "{ctx}: repair failed: {stderr}\n{}",
        String::from_utf8_lossy(&r.stdout)
    );
    let (code, after) = verify_json(&out, &ctx);
    assert_eq!(
        code, 0,
        "{ctx}: the repaired store does not verify: {after:#?}"
    );
    let repair_dir = repair_folder(&out).unwrap_or_else(|| panic!("{ctx}: no repair folder"));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(repair_dir.join("manifest.json")).unwrap()).unwrap();
    assert_every_byte_kept(&store, &out, &repair_dir, &manifest, &ctx);
    assert_eq!(
        snapshot(&store),
        original,
        "{ctx}: repair --out changed the store"
    );
    let mut now: Vec<PathBuf> = snapshot(tmp.path())
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !p.starts_with("out"))
        .collect();
    let mut was: Vec<PathBuf> = beside.into_iter().map(|(p, _)| p).collect();
    now.sort();
    was.sort();
    assert_eq!(now, was, "{ctx}: something was written beside the output");
    true
}

fn targets() -> Vec<Target> {
    let mut t = vec![
        Target::FirstCommitlog,
        Target::MiddleCommitlog,
        Target::LastCommitlog,
        Target::ConsumeQueue,
        Target::Index,
        Target::Checkpoint,
    ];
    for c in [
        "consumerOffset.json",
        "topics.json",
        "subscriptionGroup.json",
        "delayOffset.json",
    ] {
        t.push(Target::Config(c));
    }
    for c in [
        "consumerOffset.json.bak",
        "topics.json.bak",
        "subscriptionGroup.json.bak",
        "delayOffset.json.bak",
    ] {
        t.push(Target::Config(c));
    }
    t
}

fn matrix(filter: impl Fn(Target, Damage) -> bool) {
    let mut n = 0;
    for (si, (name, src)) in sources().iter().enumerate() {
        for (ti, t) in targets().into_iter().enumerate() {
            let commitlog = matches!(
                t,
                Target::FirstCommitlog | Target::MiddleCommitlog | Target::LastCommitlog
            );
            let mut kinds: Vec<Damage> = FILE_DAMAGE.to_vec();
            if commitlog {
                kinds.extend(FIELDS.iter().map(|f| Damage::Flip(*f)));
            } else {
                kinds.push(Damage::Flip(Field::Body));
            }
            for (di, d) in kinds.into_iter().enumerate() {
                if !filter(t, d) {
                    continue;
                }
                if run_case(name, src, t, d, (si * 1000 + ti * 50 + di) as u64 + 7) {
                    n += 1;
                }
            }
        }
    }
    assert!(n > 0);
    eprintln!("{n} damaged stores");
}

#[test]
fn commitlog_record_fields() {
    matrix(|t, d| {
        matches!(
            t,
            Target::FirstCommitlog | Target::MiddleCommitlog | Target::LastCommitlog
        ) && matches!(d, Damage::Flip(_))
    });
}

#[test]
fn commitlog_files() {
    matrix(|t, d| {
        matches!(
            t,
            Target::FirstCommitlog | Target::MiddleCommitlog | Target::LastCommitlog
        ) && !matches!(d, Damage::Flip(_))
    });
}

#[test]
fn consume_queue_and_index_files() {
    matrix(|t, _| matches!(t, Target::ConsumeQueue | Target::Index));
}

#[test]
fn checkpoint_and_config_files() {
    matrix(|t, _| matches!(t, Target::Checkpoint | Target::Config(_)));
}
