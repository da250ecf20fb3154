//! `compare`: master and slave pairs made from generated stores (a slave cut from a copy at a
//! record boundary, with its consume queues cut as a slave would have them; a promoted slave with
//! a tail of its own; three stores; different file sizes), DLedger groups made from the oracle
//! `dledger-4.9` store (replicas cut at different indexes, one given a tail of a higher term), the
//! three DLedger oracle stores against themselves (refused) and against cut copies, and the
//! refusals. Every expected answer is computed from how the stores were made.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;
use rmqstore::engine::store::index_builder::IndexNaming;
use rmqstore::engine::store::writer::{StoreWriter, WriterOptions};
use rmqstore::engine::Store;
use rmqstore::format::commitlog::walk::LogCursor;
use rmqstore::format::commitlog::{encode_properties, message_in, Commitlog};
use rmqstore::format::config::{load, save, ConsumerOffsets, TopicConfig, TopicConfigs};
use rmqstore::format::dledger::entry::{encode_entry, encode_file_end};
use rmqstore::format::dledger::walk::EntryCursor;
use rmqstore::format::dledger::{DledgerLayout, EntryHeader, IndexUnit, HEADER_SIZE};
use rmqstore::format::geometry::GeometryInputs;

/// One record of a generated store.
#[derive(Debug, Clone)]
struct Rec {
    offset: u64,
    size: u64,
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    uniq: Option<String>,
    queued: bool,
}

fn gen(dir: &Path, messages: u32, file_size: &str) {
    bin()
        .arg("gen")
        .arg(dir)
        .args(["--messages", &messages.to_string()])
        .args(["--commitlog-file-size", file_size])
        .args(&SMALL_GEOMETRY[2..])
        .assert()
        .success();
}

fn records(root: &Path) -> Vec<Rec> {
    let cl = Commitlog::open(&root.join("commitlog")).unwrap();
    let mut c = LogCursor::new(&cl.segments, true);
    let mut out = Vec::new();
    while c.step().unwrap() {
        let m = c.message().unwrap();
        out.push(Rec {
            offset: m.position,
            size: m.raw.len() as u64,
            topic: m.topic.to_string(),
            queue_id: m.queue_id,
            queue_offset: m.queue_offset,
            uniq: m.uniq_key().map(|u| u.into_owned()),
            queued: m.transaction_type().is_queued(),
        });
    }
    out
}

/// Zero `path` from byte `from` to its end.
fn zero_from(path: &Path, from: u64) {
    let mut b = std::fs::read(path).unwrap();
    let from = (from as usize).min(b.len());
    b[from..].fill(0);
    std::fs::write(path, b).unwrap();
}

/// Files of a folder named by their start offset, sorted.
fn numbered(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| Some((p.file_name()?.to_str()?.parse().ok()?, p)))
        .collect();
    v.sort();
    v
}

/// A slave of `master` that got as far as commitlog offset `cut` (a record boundary): a copy
/// whose commitlog is zero from `cut` on (later files absent) and whose consume queues hold no
/// unit at or past it, as the slave's own dispatch would have left them.
fn slave_of(master: &Path, dir: &Path, cut: u64) -> PathBuf {
    copy_tree(master, dir);
    for (start, p) in numbered(&dir.join("commitlog")) {
        let len = std::fs::metadata(&p).unwrap().len();
        if start >= cut {
            std::fs::remove_file(&p).unwrap();
        } else if cut < start + len {
            zero_from(&p, cut - start);
        }
    }
    let cq = dir.join("consumequeue");
    for topic in std::fs::read_dir(&cq).unwrap() {
        for queue in std::fs::read_dir(topic.unwrap().path()).unwrap() {
            let mut cutting = false;
            for (_, p) in numbered(&queue.unwrap().path()) {
                if cutting {
                    std::fs::remove_file(&p).unwrap();
                    continue;
                }
                let b = std::fs::read(&p).unwrap();
                let at = b.chunks_exact(20).position(|u| {
                    let off = i64::from_be_bytes(u[0..8].try_into().unwrap());
                    let size = i32::from_be_bytes(u[8..12].try_into().unwrap());
                    size > 0 && off >= cut as i64
                });
                if let Some(i) = at {
                    zero_from(&p, i as u64 * 20);
                    cutting = true;
                }
            }
        }
    }
    dir.to_path_buf()
}

/// Append `n` messages of its own to `root` (a slave promoted to master), stored after
/// `after_ts`; their UNIQ_KEYs.
fn own_tail(root: &Path, n: usize, after_ts: i64) -> Vec<String> {
    let store = Store::open(root, &GeometryInputs::default()).unwrap();
    let template = {
        let mut c = LogCursor::new(&store.commitlog.segments, false);
        assert!(c.step().unwrap());
        c.message().unwrap().to_owned_message()
    };
    let mut w = StoreWriter::resume(
        root,
        WriterOptions {
            geometry: store.geometry.clone(),
            consumequeue: true,
            index: true,
            index_naming: IndexNaming::Local,
            dledger: None,
        },
    )
    .unwrap();
    let mut keys = Vec::new();
    for i in 0..n {
        let key = format!("PROMOTED{i:04}");
        let mut m = template.clone();
        m.topic = "OrderTopic".into();
        m.queue_id = (i % 4) as i32;
        m.sys_flag = 0;
        m.body = format!("written by the promoted slave {i}").into_bytes();
        m.properties =
            encode_properties(&[("UNIQ_KEY", key.as_str()), ("KEYS", "promoted")], false);
        m.store_timestamp = after_ts + 1000 * (i as i64 + 1);
        w.append(m).unwrap();
        keys.push(key);
    }
    w.finish().unwrap();
    keys
}

/// JSON lines on stdout, stderr, exit code.
fn run(args: &[&std::ffi::OsStr]) -> (Vec<Value>, String, i32) {
    let out = bin().arg("compare").args(args).output().unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (lines, stderr, out.status.code().unwrap_or(-1))
}

fn of_type<'a>(lines: &'a [Value], t: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == t).collect()
}

fn summary(lines: &[Value]) -> &Value {
    let last = lines.last().expect("a summary");
    assert_eq!(last["type"], "summary");
    assert_eq!(last["command"], "compare");
    last
}

fn os(p: &Path) -> &std::ffi::OsStr {
    p.as_os_str()
}

/// The groups that had not consumed `r`, by `root`'s consumerOffset.json, computed here.
fn unconsumed(root: &Path, r: &Rec) -> Vec<String> {
    if !r.queued {
        return Vec::new();
    }
    let offsets = load::<ConsumerOffsets>(&root.join("config")).unwrap().value;
    let mut v: Vec<String> = offsets
        .iter()
        .filter(|(t, _, _)| *t == r.topic)
        .filter(|(_, _, qs)| {
            qs.iter()
                .find(|(q, _)| *q == r.queue_id)
                .is_none_or(|(_, c)| *c <= r.queue_offset)
        })
        .map(|(_, g, _)| g.to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn a_slave_cut_at_a_record_loses_the_masters_tail() {
    let t = scratch();
    let master = t.path().join("master");
    gen(&master, 1500, "262144");
    let recs = records(&master);
    let k = recs.len() * 2 / 3;
    let cut = recs[k].offset;
    let slave = slave_of(&master, &t.path().join("slave"), cut);
    let lost = &recs[k..];
    let lost_bytes: u64 = lost.iter().map(|r| r.size).sum();
    let export = t.path().join("lost.jsonl");

    let (lines, err, code) = run(&[
        os(&master),
        os(&slave),
        "--json".as_ref(),
        "--export".as_ref(),
        os(&export),
    ]);
    assert_eq!(code, 1, "{err}");
    let s = summary(&lines);
    assert_eq!(s["mode"], "normal");
    assert_eq!(s["keeper"], 2, "the slave carries on: {s}");
    assert_eq!(s["lost_records"], lost.len() as u64);
    assert_eq!(s["lost_bytes"], lost_bytes);
    let d = &s["divergences"][0];
    assert_eq!(d["store"], 1);
    assert_eq!(d["against"], 2);
    assert_eq!(d["commitlog_offset"], cut);
    assert_eq!(d["kind"], "against_ends");
    assert_eq!(d["common_records"], k as u64);
    assert_eq!(
        d["common_bytes"],
        recs[..k].iter().map(|r| r.size).sum::<u64>()
    );

    let got = of_type(&lines, "compare_record");
    assert_eq!(got.len(), lost.len());
    for (g, r) in got.iter().zip(lost) {
        assert_eq!(g["kind"], "lost");
        assert_eq!(g["store"], 1);
        assert_eq!(g["held_by"], serde_json::json!([1]));
        assert_eq!(g["missing_from"], serde_json::json!([2]));
        assert_eq!(g["commitlog_offset"], r.offset);
        assert_eq!(g["topic"], r.topic.as_str());
        assert_eq!(g["queue_offset"], r.queue_offset);
        assert_eq!(g["uniq_key"].as_str(), r.uniq.as_deref());
        let mut by: Vec<String> = g["unconsumed_by"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        by.sort();
        assert_eq!(by, unconsumed(&master, r), "{g}");
    }
    let stores = of_type(&lines, "compare_store");
    assert_eq!(stores.len(), 2);
    assert_eq!(stores[0]["role"], "dropped");
    assert_eq!(stores[1]["role"], "keeps");
    let last = recs.last().unwrap();
    assert_eq!(stores[0]["max_commitlog_offset"], last.offset + last.size);
    assert_eq!(stores[1]["max_commitlog_offset"], cut);
    assert_eq!(stores[1]["records"], k as u64);
    assert_eq!(stores[0]["only"]["records"], lost.len() as u64);
    let per_queue: u64 = stores[0]["only"]["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["records"].as_u64().unwrap())
        .sum();
    assert_eq!(per_queue, lost.len() as u64);
    assert_eq!(stores[0]["cluster"]["value"], "DefaultCluster");
    assert_eq!(stores[0]["cluster"]["source"], "records");

    // the export holds exactly the lost messages (the broker's op records aside)
    let sendable: Vec<&Rec> = lost
        .iter()
        .filter(|r| r.topic != "RMQ_SYS_TRANS_OP_HALF_TOPIC")
        .collect();
    let exported = json_lines(&export);
    assert_eq!(exported.len(), sendable.len());
    for (e, r) in exported.iter().zip(&sendable) {
        assert_eq!(e["type"], "message");
        assert_eq!(e["commitlog_offset"], r.offset);
        assert_eq!(e["uniq_key"].as_str(), r.uniq.as_deref());
        assert!(e["export_source"].is_string() && e["resend_topic"].is_string());
    }
    assert_eq!(s["export"]["messages"], sendable.len() as u64);
    assert_eq!(
        s["export"]["not_exported"],
        (lost.len() - sendable.len()) as u64
    );

    // the same in words
    let out = bin()
        .arg("compare")
        .args([&master, &slave])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "lost: {} records ({lost_bytes} bytes)",
            lost.len()
        )),
        "{text}"
    );
    assert!(text.contains("store 2 carries on"), "{text}");

    // an existing export is not replaced without --force
    let (_, err, code) = run(&[os(&master), os(&slave), "--export".as_ref(), os(&export)]);
    assert_eq!(code, 2, "{err}");

    // keeping the master, nothing is lost: the slave only lacks the tail
    let (lines, err, code) = run(&[
        os(&master),
        os(&slave),
        "--keep".as_ref(),
        "1".as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    let s = summary(&lines);
    assert_eq!(s["keeper"], 1);
    assert_eq!(s["lost_records"], 0);
    let kept = of_type(&lines, "compare_record");
    assert_eq!(kept.len(), lost.len());
    assert!(kept
        .iter()
        .all(|r| r["kind"] == "kept" && r["missing_from"] == serde_json::json!([2])));
    assert_eq!(of_type(&lines, "compare_store")[1]["role"], "lags");
}

#[test]
fn a_promoted_slave_with_a_tail_of_its_own_keeps_it_and_the_old_masters_tail_is_lost() {
    let t = scratch();
    let master = t.path().join("master");
    gen(&master, 900, "262144");
    let recs = records(&master);
    let k = recs.len() / 2;
    let cut = recs[k].offset;
    let promoted = slave_of(&master, &t.path().join("promoted"), cut);
    let last_ts = {
        let cl = Commitlog::open(&master.join("commitlog")).unwrap();
        let mut c = LogCursor::new(&cl.segments, false);
        let mut ts = 0;
        while c.step().unwrap() {
            ts = ts.max(c.message().unwrap().store_timestamp);
        }
        ts
    };
    let own = own_tail(&promoted, 7, last_ts);
    let out_store = t.path().join("lost-store");

    let (lines, err, code) = run(&[
        os(&master),
        os(&promoted),
        "--json".as_ref(),
        "--export".as_ref(),
        os(&out_store),
    ]);
    assert_eq!(code, 1, "{err}");
    let s = summary(&lines);
    assert_eq!(s["keeper"], 2, "the store written last carries on: {s}");
    assert!(s["keeper_reason"].as_str().unwrap().contains("diverged"));
    assert_eq!(s["lost_records"], (recs.len() - k) as u64);
    let d = &s["divergences"][0];
    assert_eq!(d["commitlog_offset"], cut);
    assert_eq!(d["kind"], "differs");
    assert_eq!(d["common_records"], k as u64);
    let rec = of_type(&lines, "compare_record");
    let kept: Vec<_> = rec.iter().filter(|r| r["kind"] == "kept").collect();
    let lost: Vec<_> = rec.iter().filter(|r| r["kind"] == "lost").collect();
    assert_eq!(lost.len(), recs.len() - k);
    assert_eq!(
        kept.iter()
            .map(|r| r["uniq_key"].as_str().unwrap().to_string())
            .collect::<Vec<_>>(),
        own
    );
    assert!(kept
        .iter()
        .all(|r| r["store"] == 2 && r["missing_from"] == serde_json::json!([1])));
    let roles: Vec<_> = of_type(&lines, "compare_store")
        .iter()
        .map(|s| s["role"].clone())
        .collect();
    assert_eq!(roles, ["dropped", "keeps"]);

    // the exported store holds the lost messages, to be sent again
    let sendable: Vec<&Rec> = recs[k..]
        .iter()
        .filter(|r| r.topic != "RMQ_SYS_TRANS_OP_HALF_TOPIC")
        .collect();
    assert_eq!(s["export"]["format"], "store");
    assert_eq!(s["export"]["messages"], sendable.len() as u64);
    let written = records(&out_store);
    assert_eq!(written.len(), sendable.len());
    let mut a: Vec<_> = written.iter().map(|r| r.uniq.clone()).collect();
    let mut b: Vec<_> = sendable.iter().map(|r| r.uniq.clone()).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    // the master's and the promoted slave's topics.json are the same: no config difference
    assert_eq!(
        s["config_differences"],
        of_type(&lines, "config_difference").len() as u64
    );
}

#[test]
fn a_slave_that_started_at_the_masters_last_file_does_not_lose_the_older_records() {
    let t = scratch();
    let master = t.path().join("master");
    gen(&master, 900, "262144");
    let recs = records(&master);
    let k = recs.len() - 40;
    let slave = slave_of(&master, &t.path().join("slave"), recs[k].offset);
    // a new slave starts at the start of its master's last file at the time
    let first = numbered(&slave.join("commitlog"));
    let start = first[1].0;
    std::fs::remove_file(&first[0].1).unwrap();
    let older = recs.iter().filter(|r| r.offset < start).count();
    let (lines, err, code) = run(&[os(&master), os(&slave), "--json".as_ref()]);
    assert_eq!(code, 1, "{err}");
    let s = summary(&lines);
    assert_eq!(s["keeper"], 2);
    assert_eq!(s["lost_records"], 40);
    assert_eq!(s["divergences"][0]["common_records"], (k - older) as u64);
    let stores = of_type(&lines, "compare_store");
    assert_eq!(stores[0]["before_keeper"]["records"], older as u64);
    assert_eq!(
        stores[0]["before_keeper"]["max_commitlog_offset"],
        recs[older - 1].offset
    );
    assert_eq!(stores[1]["min_commitlog_offset"], start);
    assert_eq!(of_type(&lines, "compare_record").len(), 40);
}

#[test]
fn three_stores_count_a_record_two_of_them_hold_once() {
    let t = scratch();
    let master = t.path().join("master");
    gen(&master, 800, "262144");
    let recs = records(&master);
    let (k1, k2) = (recs.len() / 3, recs.len() * 2 / 3);
    let s1 = slave_of(&master, &t.path().join("s1"), recs[k1].offset);
    let s2 = slave_of(&master, &t.path().join("s2"), recs[k2].offset);
    let (lines, err, code) = run(&[os(&master), os(&s1), os(&s2), "--json".as_ref()]);
    assert_eq!(code, 1, "{err}");
    let s = summary(&lines);
    assert_eq!(s["keeper"], 2, "the slave every other log extends: {s}");
    assert_eq!(s["lost_records"], (recs.len() - k1) as u64);
    let lost = of_type(&lines, "compare_record");
    assert_eq!(lost.len(), recs.len() - k1);
    for (l, r) in lost.iter().zip(&recs[k1..]) {
        assert_eq!(l["commitlog_offset"], r.offset);
        let held = if r.offset < recs[k2].offset {
            serde_json::json!([1, 3])
        } else {
            serde_json::json!([1])
        };
        assert_eq!(l["held_by"], held, "{l}");
    }
    let stores = of_type(&lines, "compare_store");
    assert_eq!(stores[2]["only"]["records"], (k2 - k1) as u64);
    assert_eq!(stores[2]["role"], "dropped");
}

#[test]
fn stores_of_different_file_sizes_are_compared_where_they_agree() {
    let t = scratch();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    gen(&a, 600, "262144");
    gen(&b, 600, "524288");
    let ra = records(&a);
    let (lines, err, code) = run(&[
        os(&a),
        os(&b),
        "--keep".as_ref(),
        "2".as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 1, "{err}");
    let d = &summary(&lines)["divergences"][0];
    // the first file of a ends with a blank where b goes on with records
    let first_in_second_file = ra.iter().position(|r| r.offset >= 262144).unwrap();
    assert_eq!(d["common_records"], first_in_second_file as u64);
    assert!(d["commitlog_offset"].as_u64().unwrap() <= 262144, "{d}");
    let stores = of_type(&lines, "compare_store");
    assert_eq!(stores[0]["file_size"], 262144);
    assert_eq!(stores[1]["file_size"], 524288);
}

#[test]
fn one_store_twice_or_two_brokers_are_refused_unless_forced() {
    let t = scratch();
    let a = t.path().join("a");
    gen(&a, 200, "262144");
    let (_, err, code) = run(&[os(&a), os(&a)]);
    assert_eq!(code, 2);
    assert!(
        err.contains("same store") && err.contains("--force"),
        "{err}"
    );
    let link = t.path().join("link");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let (_, err, code) = run(&[os(&a), os(&link)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("same store"), "{err}");
    let (lines, err, code) = run(&[os(&a), os(&link), "--force".as_ref(), "--json".as_ref()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(summary(&lines)["lost_records"], 0);

    // two brokers: the topic each broker creates under its own name
    let b = t.path().join("b");
    copy_tree(&a, &b);
    for (root, name) in [(&a, "broker-a"), (&b, "broker-b")] {
        let dir = root.join("config");
        let mut topics = load::<TopicConfigs>(&dir).unwrap().value;
        let mut c = TopicConfig::new(name);
        c.read_queue_nums = 1;
        c.write_queue_nums = 1;
        c.perm = 7;
        topics.insert(c);
        save(&dir, &topics).unwrap();
    }
    let (_, err, code) = run(&[os(&a), os(&b)]);
    assert_eq!(code, 2);
    assert!(
        err.contains("different brokers")
            && err.contains("broker-b")
            && err.contains("topics.json"),
        "{err}"
    );
    let (lines, err, code) = run(&[os(&a), os(&b), "--force".as_ref(), "--json".as_ref()]);
    assert_eq!(code, 0, "{err}");
    let s = summary(&lines);
    assert_eq!(s["lost_records"], 0);
    // and the topic that differs is a config difference
    let diffs = of_type(&lines, "config_difference");
    assert_eq!(diffs.len(), 2, "{diffs:?}");
    assert!(diffs.iter().all(|d| d["file"] == "topics.json"));

    // one store is not a comparison
    let out = bin().arg("compare").arg(&a).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

// ---- DLedger groups -------------------------------------------------------------------------

/// `(index, term, pos, size)` of every entry of `root`'s DLedger log.
fn entries(root: &Path) -> Vec<EntryHeader> {
    let layout = DledgerLayout::find(root, &GeometryInputs::default())
        .unwrap()
        .unwrap();
    let mut c = EntryCursor::new(&layout, 0);
    let mut out = Vec::new();
    while c.step().unwrap() {
        out.push(c.visit().unwrap().header);
    }
    out
}

/// A copy of an oracle DLedger store as replica `id`.
fn replica(oracle_dir: &Path, dir: &Path, id: &str) -> PathBuf {
    copy_tree(&oracle_dir.join("store"), dir);
    std::fs::rename(dir.join("dledger-n0"), dir.join(format!("dledger-{id}"))).unwrap();
    dir.to_path_buf()
}

fn member_dir(root: &Path) -> PathBuf {
    let name = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with("dledger-"))
        .unwrap();
    root.join(name)
}

/// Cut the replica at `root` so that its last entry is `keep - 1`: the data after that entry
/// zeroed (later files gone), the index units from `keep` on zeroed, the checkpoint set back.
fn cut_replica(root: &Path, keep: usize) {
    let all = entries(root);
    let dir = member_dir(root);
    let end = all[keep - 1].pos as u64 + all[keep - 1].size as u64;
    for (start, p) in numbered(&dir.join("data")) {
        let len = std::fs::metadata(&p).unwrap().len();
        if start > end || (start == end && start > 0) {
            std::fs::remove_file(&p).unwrap();
        } else if end < start + len {
            zero_from(&p, end - start);
        }
    }
    let at = keep as u64 * 32;
    for (start, p) in numbered(&dir.join("index")) {
        let len = std::fs::metadata(&p).unwrap().len();
        if start >= at && start > 0 {
            std::fs::remove_file(&p).unwrap();
        } else if at < start + len {
            zero_from(&p, at - start);
        }
    }
    let last = keep - 1;
    std::fs::write(
        dir.join("checkpoint"),
        format!("committedIndex={last}\nendIndex={last}\n"),
    )
    .unwrap();
}

/// Write `bytes` at absolute position `at` of the numbered files in `dir` (`file_size` each,
/// created zeroed when missing).
fn write_at(dir: &Path, file_size: u64, at: u64, bytes: &[u8]) {
    let start = at / file_size * file_size;
    let p = dir.join(format!("{start:020}"));
    let mut b = std::fs::read(&p).unwrap_or_else(|_| vec![0; file_size as usize]);
    let from = (at - start) as usize;
    b[from..from + bytes.len()].copy_from_slice(bytes);
    std::fs::write(&p, b).unwrap();
}

/// Append `n` entries of `term` to the replica at `root` (cut first): messages of its own
/// (new bodies and UNIQ_KEYs), as a leader elected in `term` appends them; its currterm says
/// it voted for itself in that term. Their UNIQ_KEYs.
fn leader_tail(root: &Path, term: i64, n: usize, self_id: &str) -> Vec<String> {
    let all = entries(root);
    let dir = member_dir(root);
    let data_size = std::fs::metadata(numbered(&dir.join("data"))[0].1.clone())
        .unwrap()
        .len();
    let index_size = std::fs::metadata(numbered(&dir.join("index"))[0].1.clone())
        .unwrap()
        .len();
    let last = *all.last().unwrap();
    let template = {
        let layout = DledgerLayout::find(root, &GeometryInputs::default())
            .unwrap()
            .unwrap();
        let mut c = EntryCursor::new(&layout, 0);
        assert!(c.step().unwrap());
        let v = c.visit().unwrap();
        message_in(v.body, v.header.record_offset())
            .unwrap()
            .to_owned_message()
    };
    let mut pos = last.pos as u64 + last.size as u64;
    let mut keys = Vec::new();
    for i in 0..n {
        let index = last.index + 1 + i as i64;
        let key = format!("TERM{term}ENTRY{index}");
        let mut m = template.clone();
        m.topic = "TopicA".into();
        m.queue_id = 0;
        m.sys_flag = 0;
        m.body = format!("appended in term {term}").into_bytes();
        m.properties = encode_properties(&[("UNIQ_KEY", key.as_str())], false);
        m.store_timestamp += 1_000_000 + i as i64;
        let size = HEADER_SIZE as u64 + m.encoded_len() as u64;
        let left = data_size - pos % data_size;
        if size + 8 > left {
            write_at(
                &dir.join("data"),
                data_size,
                pos,
                &encode_file_end(left as i32),
            );
            pos += left;
        }
        m.physical_offset = (pos + HEADER_SIZE as u64) as i64;
        let entry = encode_entry(index, term, pos as i64, &m.encode().unwrap());
        write_at(&dir.join("data"), data_size, pos, &entry);
        let h = EntryHeader::from_bytes(&entry).unwrap();
        write_at(
            &dir.join("index"),
            index_size,
            index as u64 * 32,
            &IndexUnit::of(&h).to_bytes(),
        );
        pos += entry.len() as u64;
        keys.push(key);
    }
    let end = last.index + n as i64;
    std::fs::write(
        dir.join("checkpoint"),
        format!("committedIndex={end}\nendIndex={end}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("currterm"),
        format!("voteLeader={self_id}\ncurrTerm={term}\n"),
    )
    .unwrap();
    keys
}

/// UNIQ_KEYs of the records wrapped by entries `from..` of `root`.
fn uniq_keys_from(root: &Path, from: i64) -> Vec<(i64, Option<String>, String)> {
    let layout = DledgerLayout::find(root, &GeometryInputs::default())
        .unwrap()
        .unwrap();
    let mut c = EntryCursor::new(&layout, 0);
    let mut out = Vec::new();
    while c.step().unwrap() {
        let v = c.visit().unwrap();
        if v.header.index >= from {
            let m = message_in(v.body, v.header.record_offset()).unwrap();
            out.push((
                v.header.index,
                m.uniq_key().map(|u| u.into_owned()),
                m.topic.to_string(),
            ));
        }
    }
    out
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_dledger_group_elects_the_higher_term_and_the_old_leaders_tail_is_lost() {
    let Some(oracle_dir) = oracle("dledger-4.9") else {
        return;
    };
    let t = scratch();
    let full = replica(&oracle_dir, &t.path().join("n0"), "n0");
    let all = entries(&full);
    let end = all.last().unwrap().index;
    let (k, k2) = (3000usize, 3100usize);
    // n1 got entries below k, was elected in term 1 and appended five of its own
    let n1 = replica(&oracle_dir, &t.path().join("n1"), "n1");
    cut_replica(&n1, k);
    let own = leader_tail(&n1, 1, 5, "n1");
    // n2 got entries below k2 from the old leader
    let n2 = replica(&oracle_dir, &t.path().join("n2"), "n2");
    cut_replica(&n2, k2);
    let export = t.path().join("lost.jsonl");

    let (lines, err, code) = run(&[
        os(&n1),
        os(&full),
        os(&n2),
        "--json".as_ref(),
        "--export".as_ref(),
        os(&export),
    ]);
    assert_eq!(code, 1, "{err}");
    let s = summary(&lines);
    assert_eq!(s["mode"], "dledger");
    assert_eq!(s["keeper"], 1, "the term-1 replica is elected: {s}");
    let dropped = (end - k as i64 + 1) as u64;
    assert_eq!(s["lost_records"], dropped);
    let tr = s["truncations"].as_array().unwrap();
    assert_eq!(tr.len(), 2);
    assert_eq!(tr[0]["store"], 2);
    assert_eq!(tr[0]["keeps_to_index"], k as i64 - 1);
    assert_eq!(tr[0]["drops_entries"], dropped);
    assert_eq!(tr[0]["drops_from_index"], k as i64);
    assert_eq!(tr[0]["drops_to_index"], end);
    assert_eq!(tr[0]["appends_entries"], 5);
    // its checkpoint had committed everything: dropping committed entries is flagged
    assert_eq!(tr[0]["drops_committed"], dropped);
    assert_eq!(tr[1]["store"], 3);
    assert_eq!(tr[1]["keeps_to_index"], k as i64 - 1);
    assert_eq!(tr[1]["drops_entries"], (k2 - k) as u64);
    assert_eq!(tr[1]["appends_entries"], 5);
    for d in s["divergences"].as_array().unwrap() {
        assert_eq!(d["index"], k as i64);
        assert_eq!(d["kind"], "differs");
        assert_eq!(d["field"], "term");
        assert_eq!(d["common_records"], k as u64);
    }
    let lost = of_type(&lines, "compare_record");
    let expected = uniq_keys_from(&full, k as i64);
    assert_eq!(lost.len(), expected.len());
    for (l, (index, uniq, _)) in lost.iter().zip(&expected) {
        assert_eq!(l["kind"], "lost");
        assert_eq!(l["dledger_index"], *index);
        assert_eq!(l["dledger_term"], 0);
        assert_eq!(l["uniq_key"].as_str(), uniq.as_deref());
        let held = if *index < k2 as i64 {
            serde_json::json!([2, 3])
        } else {
            serde_json::json!([2])
        };
        assert_eq!(l["held_by"], held);
    }
    let stores = of_type(&lines, "compare_store");
    let roles: Vec<_> = stores.iter().map(|s| s["role"].clone()).collect();
    assert_eq!(roles, ["keeps", "truncated", "truncated"]);
    assert_eq!(stores[0]["dledger"]["self_id"], "n1");
    assert_eq!(stores[0]["dledger"]["current_term"], 1);
    assert_eq!(stores[0]["dledger"]["vote_leader"], "n1");
    assert_eq!(stores[0]["dledger"]["ledger_end_index"], k as i64 + 4);
    assert_eq!(stores[0]["dledger"]["ledger_end_term"], 1);
    assert_eq!(stores[1]["dledger"]["ledger_end_index"], end);
    assert_eq!(stores[2]["dledger"]["committed_index"], k2 as i64 - 1);
    assert_eq!(stores[1]["only"]["records"], dropped);
    assert_eq!(stores[2]["only"]["records"], (k2 - k) as u64);
    assert!(!own.is_empty());

    let sendable: Vec<_> = expected
        .iter()
        .filter(|(_, _, t)| t != "RMQ_SYS_TRANS_OP_HALF_TOPIC")
        .collect();
    let exported = json_lines(&export);
    assert_eq!(exported.len(), sendable.len());
    for (e, (_, uniq, _)) in exported.iter().zip(&sendable) {
        assert_eq!(e["uniq_key"].as_str(), uniq.as_deref());
    }

    // given in another order, the same leader
    let (lines, _, code) = run(&[os(&full), os(&n2), os(&n1), "--json".as_ref()]);
    assert_eq!(code, 1);
    assert_eq!(summary(&lines)["keeper"], 3);
    assert_eq!(summary(&lines)["lost_records"], dropped);
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn the_dledger_oracle_stores_against_themselves_and_cut_copies() {
    for (name, behind) in [
        ("dledger-4.9", 50usize),
        ("dledger-crashed-4.9", 82),
        ("dledger-converted-4.9", 102),
    ] {
        let Some(dir) = oracle(name) else { continue };
        let store = dir.join("store");
        let (_, err, code) = run(&[os(&store), os(&store)]);
        assert_eq!(code, 2, "{name}");
        assert!(err.contains("same store"), "{name}: {err}");

        let t = scratch();
        let copy = replica(&dir, &t.path().join("n1"), "n1");
        let all = entries(&copy);
        let keep = all.len() - behind;
        cut_replica(&copy, keep);
        let (lines, err, code) = run(&[os(&copy), os(&store), "--json".as_ref()]);
        assert_eq!(code, 0, "{name}: {err}");
        let s = summary(&lines);
        assert_eq!(
            s["keeper"], 2,
            "{name}: the longer log of the same term leads"
        );
        assert_eq!(s["lost_records"], 0);
        let tr = &s["truncations"][0];
        assert_eq!(tr["drops_entries"], 0, "{name}");
        assert_eq!(tr["appends_entries"], behind as u64, "{name}");
        assert_eq!(tr["keeps_to_index"], all[keep - 1].index, "{name}");
        let d = &s["divergences"][0];
        assert_eq!(d["kind"], "store_ends", "{name}");
        assert_eq!(d["index"], all[keep].index, "{name}");
        assert_eq!(d["common_records"], keep as u64, "{name}");
        let roles: Vec<_> = of_type(&lines, "compare_store")
            .iter()
            .map(|s| s["role"].clone())
            .collect();
        assert_eq!(roles, ["lags", "keeps"], "{name}");
        assert!(of_type(&lines, "compare_record").is_empty());
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_dledger_store_and_a_normal_one_are_refused() {
    let Some(dir) = oracle("dledger-4.9") else {
        return;
    };
    let t = scratch();
    let a = t.path().join("a");
    gen(&a, 100, "262144");
    let (_, err, code) = run(&[os(&dir.join("store")), os(&a)]);
    assert_eq!(code, 2);
    assert!(err.contains("DLedger-mode store"), "{err}");
}

/// Close the `commitlog/` of a converted replica at its `n`-th record below the divide, as the
/// switch to DLedger closes a broker's old commitlog: a blank record there, zeros after it.
/// Returns the offset of the blank.
fn end_old_commitlog_at(root: &Path, n: usize) -> u64 {
    let old: Vec<u64> = records(root)
        .into_iter()
        .map(|r| r.offset)
        .filter(|&o| o < 2097152)
        .collect();
    let at = old[n];
    let (start, file) = numbered(&root.join("commitlog"))
        .into_iter()
        .rfind(|(s, _)| *s <= at)
        .unwrap();
    zero_from(&file, at - start);
    let left = (std::fs::metadata(&file).unwrap().len() - (at - start)) as i32;
    let mut blank = left.to_be_bytes().to_vec();
    blank.extend_from_slice(&(0xcbd43194u32 as i32).to_be_bytes());
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.write_all_at(&blank, at - start).unwrap();
    at
}

/// Converted replicas hold records below the divide in `commitlog/`, each broker's own (no raft
/// entry): compare walks them as a master's and its slaves', with the leader carrying on. A
/// replica whose old commitlog ended 100 records early (a slave behind its master when the group
/// switched to DLedger) that leads loses the other's 100 records there, each named without a
/// DLedger entry; led by the other, it only lags there and nothing is lost.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn converted_replicas_are_compared_below_the_divide() {
    let Some(dir) = oracle("dledger-converted-4.9") else {
        return;
    };
    let t = scratch();
    let full = replica(&dir, &t.path().join("n0"), "n0");
    let short = replica(&dir, &t.path().join("n1"), "n1");
    let cut = end_old_commitlog_at(&short, 1400);
    let tail: Vec<Rec> = records(&full)
        .into_iter()
        .filter(|r| r.offset >= cut && r.offset < 2097152)
        .collect();
    assert_eq!(tail.len(), 100);

    // The short one leads (the same log above the divide: the first given is taken).
    let (lines, err, code) = run(&[os(&short), os(&full), "--json".as_ref()]);
    assert_eq!(code, 1, "{err}");
    let s = summary(&lines);
    assert_eq!(s["keeper"], 1);
    assert_eq!(s["truncations"][0]["drops_entries"], 0);
    let b = &s["below_divide"];
    assert_eq!(b["keeper"], 1, "{s}");
    assert_eq!(b["lost_records"], 100);
    assert_eq!(s["lost_records"], 100);
    let d = &b["divergences"][0];
    assert_eq!(d["commitlog_offset"], cut);
    assert_eq!(d["kind"], "against_ends");
    assert_eq!(d["common_records"], 1400);
    let roles: Vec<_> = b["stores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["role"].clone())
        .collect();
    assert_eq!(roles, ["keeps", "dropped"]);
    let lost = of_type(&lines, "compare_record");
    assert_eq!(lost.len(), 100);
    for (l, r) in lost.iter().zip(&tail) {
        assert_eq!(l["kind"], "lost");
        assert_eq!(l["store"], 2);
        assert_eq!(l["commitlog_offset"], r.offset);
        assert_eq!(l["uniq_key"].as_str(), r.uniq.as_deref());
        assert!(l["dledger_index"].is_null(), "{l}");
    }

    // The full one leads: the short one lags below the divide, nothing is lost.
    let (lines, err, code) = run(&[os(&full), os(&short), "--json".as_ref()]);
    assert_eq!(code, 0, "{err}");
    let s = summary(&lines);
    assert_eq!(s["lost_records"], 0);
    let b = &s["below_divide"];
    assert_eq!(b["stores"][1]["role"], "lags", "{s}");
    assert_eq!(b["divergences"][0]["kind"], "store_ends");
    assert_eq!(
        of_type(&lines, "compare_record").len(),
        100,
        "kept records are listed"
    );
    assert!(of_type(&lines, "compare_record")
        .iter()
        .all(|l| l["kind"] == "kept"));

    // The words.
    let out = bin()
        .arg("compare")
        .arg(&short)
        .arg(&full)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("below the divide") && text.contains("lost below the divide: 100 records"),
        "{text}"
    );
}
