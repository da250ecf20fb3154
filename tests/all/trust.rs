//! What every writing command promises: names read from disk never become paths outside the
//! target, outputs inside a store are refused, in-place writers hold the broker's lock for the
//! whole run (and are refused while someone else holds it), hostile layouts end in bounded time
//! and memory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command as Proc, Stdio};

use crate::common::*;
use rmqstore::engine::store::index_builder::IndexNaming;
use rmqstore::engine::store::writer::{StoreWriter, WriterOptions};
use rmqstore::format::commitlog::{encode_properties, Host, Message, MessageVersion};
use rmqstore::format::geometry::{resolve, GeometryInputs, GeometryOverrides};

/// A command line split at spaces (the paths here have none).
fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

/// `pull` that commits its offset to an overlay store.
fn pull_commit(store: &dyn std::fmt::Display, overlay: &dyn std::fmt::Display) -> String {
    format!(
        "pull {store} --group OrderGroup --topic OrderTopic --queue 0 --commit --overlay {overlay}"
    )
}

/// `replay` with an overlay store, until nothing is left to consume.
fn replay_until_idle(store: &dyn std::fmt::Display, overlay: &dyn std::fmt::Display) -> String {
    format!("replay {store} --group OrderGroup --exec true --until-idle --overlay {overlay}")
}

fn message(topic: &str, queue_id: i32, n: i64) -> Message {
    Message {
        topic: topic.into(),
        queue_id,
        flag: 0,
        queue_offset: 0,
        physical_offset: 0,
        sys_flag: 0,
        born_timestamp: 1_800_000_000_000 + n,
        born_host: Host::v4([10, 0, 0, 1], 5000),
        store_timestamp: 1_800_000_000_000 + n,
        store_host: Host::v4([10, 0, 0, 2], 10911),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: format!("body {n}").into_bytes(),
        properties: encode_properties(
            &[("UNIQ_KEY", format!("U{n:08}").as_str()), ("KEYS", "k")],
            false,
        ),
        version: MessageVersion::V1,
    }
}

/// A store with ordinary records and records whose topics are paths: `../../x`, an absolute
/// path under `evil` (a folder that must stay empty), `a/b`.
fn evil_store(root: &Path, evil: &Path) -> Vec<String> {
    let geometry = resolve(&GeometryInputs {
        flags: GeometryOverrides {
            commitlog_file_size: Some(64 << 10),
            cq_file_units: Some(50),
            index_slots: Some(16),
            index_entries: Some(64),
            delay_levels: None,
            dledger_peers: None,
            dledger_index_file_size: None,
        },
        ..Default::default()
    });
    let mut w = StoreWriter::create(
        root,
        WriterOptions {
            geometry,
            consumequeue: true,
            index: true,
            index_naming: IndexNaming::Utc,
            dledger: None,
        },
    )
    .unwrap();
    let topics = vec![
        "../../x".to_string(),
        format!("{}/abs", evil.display()),
        "a/b".to_string(),
    ];
    for n in 0..120 {
        let t = match n % 40 {
            13 => topics[(n as usize / 40) % topics.len()].clone(),
            _ => "GoodTopic".to_string(),
        };
        w.append(message(&t, (n % 2) as i32, n)).unwrap();
    }
    w.finish().unwrap();
    std::fs::create_dir_all(root.join("config")).unwrap();
    let mut co = rmqstore::format::config::ConsumerOffsets::new();
    co.set("GoodTopic", "G", 0, 3);
    co.set("../../x", "G", 0, 1);
    rmqstore::format::config::save(&root.join("config"), &co).unwrap();
    topics
}

/// Every path below `dir` (names only, symlinks not followed).
fn paths(dir: &Path) -> Vec<PathBuf> {
    snapshot(dir).into_iter().map(|(p, _)| p).collect()
}

/// Paths that appeared below `top` since `before`, outside `allowed` (relative to `top`).
fn new_outside(top: &Path, before: &[PathBuf], allowed: &[&str]) -> Vec<PathBuf> {
    paths(top)
        .into_iter()
        .filter(|p| !before.contains(p))
        .filter(|p| !allowed.iter().any(|a| p.starts_with(a)))
        .collect()
}

#[test]
fn topics_that_are_paths_never_leave_the_target() {
    let t = scratch();
    let top = t.path().join("work");
    let store = top.join("store");
    let evil = t.path().join("evil");
    std::fs::create_dir_all(&evil).unwrap();
    evil_store(&store, &evil);
    let runs: Vec<(Vec<String>, Vec<&str>)> = vec![
        (vec!["verify".into()], vec![]),
        (
            vec![
                "rebuild".into(),
                "--out".into(),
                top.join("rebuilt").display().to_string(),
            ],
            vec!["rebuilt"],
        ),
        (vec!["repair".into(), "--dry-run".into()], vec![]),
        (
            vec![
                "repair".into(),
                "--out".into(),
                top.join("repaired").display().to_string(),
            ],
            vec!["repaired"],
        ),
        (
            vec![
                "export".into(),
                "--group".into(),
                "G".into(),
                "--topic".into(),
                "GoodTopic".into(),
                "--out".into(),
                top.join("exported").display().to_string(),
            ],
            vec!["exported"],
        ),
        (
            vec![
                "pull".into(),
                "--group".into(),
                "G".into(),
                "--topic".into(),
                "GoodTopic".into(),
                "--queue".into(),
                "0".into(),
                "--commit".into(),
                "--overlay".into(),
                top.join("overlay").display().to_string(),
            ],
            vec!["overlay"],
        ),
        (
            vec!["rebuild".into(), "--in-place".into(), "--force".into()],
            vec!["store", "store.before-rebuild-"],
        ),
        (
            vec!["repair".into(), "--in-place".into()],
            vec!["store", ".store.repair-", "store.before-repair-"],
        ),
    ];
    // verify names each such record; rebuild --in-place refuses without --force.
    let o = bin()
        .arg("verify")
        .arg(&store)
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("commitlog.bad_header") && l.contains("TOPIC"))
            .count(),
        3,
        "{text}"
    );
    let before = snapshot(&top);
    bin()
        .arg("rebuild")
        .arg(&store)
        .arg("--in-place")
        .assert()
        .code(1);
    // Only the broker's `lock` file, made to take the lock (as a broker's start makes it).
    let mut after = snapshot(&top);
    after.retain(|(p, _)| p != Path::new("store/lock"));
    assert_eq!(after, before, "a refused rebuild changed something");
    for (args, allowed) in runs {
        let before = paths(&top);
        let mut c = bin();
        c.arg(&args[0]).arg(&store).args(&args[1..]);
        let o = c.output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        let code = o.status.code().unwrap_or(-1);
        assert!(code == 0 || code == 1, "{args:?}: exit {code}: {stderr}");
        let mut allowed: Vec<&str> = allowed.clone();
        allowed.push("store");
        let outside: Vec<PathBuf> = new_outside(&top, &before, &allowed)
            .into_iter()
            .filter(|p| {
                let s = p.display().to_string();
                !(s.starts_with("store.before-") || s.starts_with(".store."))
            })
            .collect();
        assert!(outside.is_empty(), "{args:?} wrote {outside:?}");
        assert!(
            paths(&evil).is_empty(),
            "{args:?} wrote into {}",
            evil.display()
        );
        assert!(
            !t.path().join("x").exists() && !top.join("x").exists(),
            "{args:?}: ../../x"
        );
        // No folder of a bad topic inside any store either.
        for p in paths(&top) {
            let s = p.display().to_string();
            assert!(
                !s.contains("consumequeue/a/b") && !s.ends_with("consumequeue/x"),
                "{args:?} made {s}"
            );
        }
    }
    // The in-place repair cut at the first record whose topic names no folder, and kept the
    // rest in the salvage; the result verifies clean.
    bin().arg("verify").arg(&store).assert().code(0);
    let repair = repair_folder(&store).unwrap();
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repair.join("manifest.json")).unwrap()).unwrap();
    assert!(
        m["cut"]["reason"].as_str().unwrap().contains("TOPIC"),
        "{m}"
    );
    assert!(m["salvaged_records"].as_u64().unwrap() > 90, "{m}");
}

#[test]
fn outputs_inside_a_store_are_refused() {
    let t = scratch();
    let store = t.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    let before = snapshot(&store);
    let inside = |p: &str| store.join(p).display().to_string();
    let s = store.display();
    let cases: Vec<Vec<String>> = [
        format!("repair {s} --out {}", inside("sub")),
        format!("rebuild {s} --out {}", inside("r")),
        format!("export {s} --group OrderGroup --out {}", inside("x.jsonl")),
        format!("export {s} --group OrderGroup --out {}", inside("exported")),
        pull_commit(&s, &inside("ov")),
        replay_until_idle(&s, &inside("ov")),
        format!("gen {} --messages 10", inside("commitlog")),
        format!("gen {} --messages 10", inside("sub/new")),
    ]
    .iter()
    .map(|c| words(c))
    .collect();
    for args in cases {
        let o = bin()
            .env("PATH", "/usr/bin:/bin")
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("inside the store"), "{args:?}: {stderr}");
        assert_eq!(snapshot(&store), before, "{args:?} wrote into the store");
    }
}

/// A process holding the broker's lock on `lock` (a POSIX `F_SETLK` write lock, what
/// `FileChannel.tryLock` takes), until it is killed.
fn hold_lock(lock: &Path) -> Option<Child> {
    let mut c = Proc::new("python3")
        .arg("-c")
        .arg("import fcntl,sys,time; f=open(sys.argv[1],'a+'); fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB); print('ok', flush=True); time.sleep(60)")
        .arg(lock)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(c.stdout.as_mut()?)
        .read_line(&mut line)
        .ok()?;
    if line.trim() == "ok" {
        Some(c)
    } else {
        let _ = c.kill();
        None
    }
}

/// Can another process take the lock right now?
fn lock_is_free(lock: &Path) -> bool {
    Proc::new("python3")
        .arg("-c")
        .arg("import fcntl,sys; f=open(sys.argv[1],'a+'); fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB)")
        .arg(lock)
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn python_ok() -> bool {
    let ok = Proc::new("python3")
        .arg("-c")
        .arg("import fcntl")
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 is needed for the lock tests"
        );
        eprintln!("SKIPPED: no python3 to hold a lock from another process");
    }
    ok
}

#[test]
fn in_place_writers_are_refused_while_another_process_holds_the_lock() {
    if !python_ok() {
        return;
    }
    let t = scratch();
    let store = t.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    std::fs::write(store.join("lock"), b"lock").unwrap();
    let overlay = t.path().join("ov");
    bin()
        .arg("pull")
        .arg(&store)
        .args([
            "--group",
            "OrderGroup",
            "--topic",
            "OrderTopic",
            "--queue",
            "0",
            "--commit",
            "--overlay",
        ])
        .arg(&overlay)
        .assert()
        .success();
    let before = snapshot(t.path());
    let held_store = hold_lock(&store.join("lock")).expect("lock held");
    let held_overlay = hold_lock(&overlay.join("lock")).expect("overlay lock held");
    let (s, ov) = (store.display(), overlay.display());
    let cases: Vec<Vec<String>> = [
        format!("rebuild {s} --in-place"),
        format!("repair {s} --in-place"),
        format!("repair {s} --out {}", t.path().join("o").display()),
        pull_commit(&s, &ov),
        replay_until_idle(&s, &ov),
    ]
    .iter()
    .map(|c| words(c))
    .collect();
    for args in cases {
        let o = bin()
            .env("PATH", "/usr/bin:/bin")
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("holds the store lock"),
            "{args:?}: {stderr}"
        );
        assert_eq!(snapshot(t.path()), before, "{args:?} wrote something");
    }
    for mut c in [held_store, held_overlay] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn in_place_writers_hold_the_lock_for_the_whole_run() {
    if !python_ok() {
        return;
    }
    for (args, pause) in [
        (vec!["repair", "--in-place"], "repair-staged"),
        (vec!["rebuild", "--in-place"], "rebuild-staged"),
    ] {
        let t = scratch();
        let store = t.path().join("store");
        copy_tree(&fixture("store-4.9"), &store);
        // damage that both fix: a lost consume queue file
        std::fs::remove_file(store.join("consumequeue/OrderTopic/1/00000000000000002000")).unwrap();
        let exe = assert_cmd::cargo::cargo_bin("rmqstore");
        let mut child = Proc::new(exe)
            .arg(args[0])
            .arg(&store)
            .args(&args[1..])
            .env("RMQSTORE_PAUSEPOINT", format!("{pause}:3000"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::BufRead;
        let mut line = String::new();
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        while !line.contains("paused at") {
            line.clear();
            if err.read_line(&mut line).unwrap() == 0 {
                break;
            }
        }
        assert!(line.contains("paused at"), "{args:?}: {line}");
        // The run is between its stage and its switch: a broker starting now is refused.
        assert!(
            !lock_is_free(&store.join("lock")),
            "{args:?}: the lock is not held"
        );
        assert!(child.wait().unwrap().success(), "{args:?}");
        assert!(
            lock_is_free(&store.join("lock")),
            "{args:?}: the lock was not released"
        );
        bin().arg("verify").arg(&store).assert().code(0);
    }
}

#[test]
fn symlinks_and_loops_in_the_store() {
    let t = scratch();
    let store = t.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    // A commitlog file kept elsewhere through a symlink is read as its target: no false finding.
    let cl = store.join("commitlog/00000000000000262144");
    let moved = t.path().join("elsewhere-262144");
    std::fs::rename(&cl, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &cl).unwrap();
    bin().arg("verify").arg(&store).assert().code(0);
    // Folder loops under consumequeue/: every command ends.
    std::os::unix::fs::symlink(store.join("consumequeue"), store.join("consumequeue/Loop"))
        .unwrap();
    std::os::unix::fs::symlink(
        store.join("consumequeue/OrderTopic"),
        store.join("consumequeue/OrderTopic/0/back"),
    )
    .unwrap();
    let before = snapshot(&store);
    for args in [vec!["verify"], vec!["info"], vec!["repair", "--dry-run"]] {
        let o = bin()
            .arg(args[0])
            .arg(&store)
            .args(&args[1..])
            .output()
            .unwrap();
        let code = o.status.code().unwrap_or(-1);
        assert!(
            code == 0 || code == 1,
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let out = t.path().join("out");
    repair_out(&store, &out);
    bin().arg("verify").arg(&out).assert().code(0);
    assert_eq!(snapshot(&store), before);
    // The symlinked commitlog file is a symlink in the repaired store too (hard-linked as is).
    assert!(
        std::fs::symlink_metadata(out.join("commitlog/00000000000000262144"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// `sh -c 'ulimit -v KB; exec ...'`: the command runs with at most `kb` KiB of address space.
fn limited(kb: u64, args: &[&str]) -> std::process::Output {
    let exe = assert_cmd::cargo::cargo_bin("rmqstore");
    let mut s = format!("ulimit -v {kb}; exec {}", exe.display());
    for a in args {
        s.push_str(&format!(" '{a}'"));
    }
    Proc::new("sh").arg("-c").arg(s).output().unwrap()
}

#[test]
fn huge_and_lying_sizes_take_bounded_memory() {
    let t = scratch();
    let store = t.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    // A 3 GiB topics.json (sparse) is not read: the .bak is used.
    let topics = store.join("config/topics.json");
    if !topics.exists() {
        std::fs::write(&topics, b"{}").unwrap();
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&topics)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    // A record header claiming 1 GB in the last file.
    let last = store.join("commitlog/00000000000002097152");
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
        f.write_all_at(&(1_000_000_000i32).to_be_bytes(), 0)
            .unwrap();
    }
    let root = store.display().to_string();
    let last_s = last.display().to_string();
    // 1.5 GiB of address space: far less than the files claim (maps of the small commitlog
    // files, thread stacks and the binary fit).
    for args in [
        vec!["verify", root.as_str()],
        vec!["info", root.as_str()],
        vec!["dump", "commitlog", last_s.as_str()],
        vec!["repair", "--dry-run", root.as_str()],
    ] {
        let o = limited(1_536 * 1024, &args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("memory allocation"), "{args:?}: {stderr}");
        let code = o.status.code();
        assert!(
            matches!(code, Some(0..=2)),
            "{args:?}: ended with {:?}: {stderr}",
            o.status
        );
    }
    let o = limited(1_536 * 1024, &["verify", "--json", root.as_str()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("config.too_large"), "{out}");
    assert!(out.contains("commitlog.bad_record"), "{out}");
}

/// `repair STORE --out OUT`, which must succeed.
fn repair_out(store: &Path, out: &Path) {
    bin()
        .arg("repair")
        .arg(store)
        .arg("--out")
        .arg(out)
        .assert()
        .success();
}

/// A broker started on a repaired store writes in place into the commitlog file where the data
/// ends, the newest index file, and files such as `timerwheel`: none of them may be shared (a
/// hard link) with the original store, whose bytes must stay as they were, for `--out` as for
/// the old store an in-place repair keeps. Full commitlog files, which no broker writes again,
/// are shared.
#[test]
fn a_repaired_store_shares_no_file_a_broker_writes_in_place() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let dir = scratch();
    let store = dir.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    // a sparse wheel of the broker's size, its first page written
    let wheel_size = rmqstore::format::timer::wheel::WHEEL_FILE_SIZE;
    std::fs::write(store.join("timerwheel"), vec![7u8; 4096]).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(store.join("timerwheel"))
        .unwrap()
        .set_len(wheel_size)
        .unwrap();
    // Something to repair that leaves the commitlog as it is: a consume queue unit overwritten.
    let cq = store.join("consumequeue/OrderTopic/0/00000000000000000000");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cq)
        .unwrap()
        .write_all_at(&[0xff; 20], 200)
        .unwrap();
    let out = dir.path().join("out");
    repair_out(&store, &out);
    let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
    let files = |d: &Path| {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    let segs = files(&store.join("commitlog"));
    assert!(segs.len() > 2);
    for (i, s) in segs.iter().enumerate() {
        let o = out.join("commitlog").join(s.file_name().unwrap());
        assert_eq!(std::fs::read(s).unwrap(), std::fs::read(&o).unwrap());
        let last = i + 1 == segs.len();
        assert_eq!(ino(s) == ino(&o), !last, "{}", s.display());
    }
    let index = files(&store.join("index"));
    let newest = index.last().unwrap();
    let o = out.join("index").join(newest.file_name().unwrap());
    assert_eq!(std::fs::read(newest).unwrap(), std::fs::read(&o).unwrap());
    assert_ne!(ino(newest), ino(&o), "the newest index file is shared");
    assert_ne!(ino(&store.join("timerwheel")), ino(&out.join("timerwheel")));
    let copied = std::fs::read(out.join("timerwheel")).unwrap();
    assert_eq!(copied.len() as u64, wheel_size);
    assert!(copied[..4096].iter().all(|&b| b == 7) && copied[4096..].iter().all(|&b| b == 0));
}
