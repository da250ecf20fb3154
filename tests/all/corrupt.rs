//! Damaged stores: copies of the committed fixture and of the 4.9 oracle store, broken in one
//! specific way each, read through the library and through the real `rmqstore info` binary.
//!
//! The house rule under test: bad bytes on disk give an error that names the file, the byte
//! offset and what was expected, never a panic; and every good record before the damage is still
//! read. The originals are never touched: every case works on a copy in a temp dir.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

use rmqstore::engine::Store;
use rmqstore::format::checkpoint::Checkpoint;
use rmqstore::format::commitlog::read::LayoutIssue;
use rmqstore::format::commitlog::{
    parse_record, Commitlog, Record, RecordIter, Segment, SegmentEnd,
};
use rmqstore::format::config::{
    load, ConfigFile, ConfigSource, ConsumerOffsets, DelayOffsets, SubscriptionGroups, TopicConfigs,
};
use rmqstore::format::consumequeue::{valid_units, ConsumeQueue, CqUnit, UNIT_SIZE};
use rmqstore::format::error::QueueFileError;
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::format::indexfile::{
    build_key, check_file, index_key_hash, infer_geometry, slot_of, IndexEntry, IndexFile,
    IndexGeometry, IndexHeader, InferResult,
};
use rmqstore::format::{Error, Mapped};

// ---------------------------------------------------------------------------------------------
// Sources, copies, damage.

/// The store roots every case runs on: the committed fixture, and the 4.9 oracle when the build
/// found it (`rmqstore_oracle`; [`the_oracle_is_a_source`] is ignored otherwise, so the runner
/// says the oracle part did not run).
fn sources() -> Vec<(&'static str, PathBuf)> {
    let mut v = vec![(
        "fixture store-4.9",
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/store-4.9"),
    )];
    if cfg!(rmqstore_oracle) {
        let o = common::oracle("basic-4.9").expect("the build found the oracle stores");
        v.push(("oracle basic-4.9", o.join("store")));
    }
    v
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn the_oracle_is_a_source() {
    assert!(sources().iter().any(|(n, _)| *n == "oracle basic-4.9"));
}

/// A writable copy of a store root; the temp dir lives as long as the returned guard.
fn copy_store(src: &Path) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("store");
    common::copy_tree(src, &root);
    (t, root)
}

fn open(root: &Path) -> Store {
    Store::open(root, &GeometryInputs::default()).unwrap()
}

/// Deterministic garbage (an LCG), so failures reproduce.
fn garbage(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

fn patch(path: &Path, at: u64, bytes: &[u8]) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, b).unwrap();
}

fn flip(path: &Path, at: u64, mask: u8) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= mask;
    std::fs::write(path, b).unwrap();
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn name_of(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// The binary.

struct InfoRun {
    code: i32,
    json: Option<Value>,
    stderr: String,
}

/// `rmqstore info <root> --json`: must exit 0 or 2 and never panic; stdout is JSON on 0.
fn info(root: &Path) -> InfoRun {
    let out = Command::cargo_bin("rmqstore")
        .unwrap()
        .env_clear()
        .env("TZ", "UTC")
        .arg("info")
        .arg(root)
        .arg("--json")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("info killed by a signal on {}: {stderr}", root.display()));
    assert!(
        !stderr.contains("panicked"),
        "info panicked on {}:\n{stderr}",
        root.display()
    );
    assert!(
        code == 0 || code == 2,
        "info exit code {code} on {}:\n{stderr}",
        root.display()
    );
    // the `info` line (the summary follows it)
    let json = (code == 0).then(|| {
        let text = String::from_utf8_lossy(&out.stdout);
        let first = text.lines().next().unwrap_or_default();
        let v: Value = serde_json::from_str(first)
            .unwrap_or_else(|e| panic!("info --json printed no JSON ({e}): {stderr}"));
        assert_eq!(v["type"], "info");
        v
    });
    InfoRun { code, json, stderr }
}

/// `info` succeeded; its JSON.
fn info_ok(root: &Path) -> Value {
    let r = info(root);
    assert_eq!(r.code, 0, "info failed on {}: {}", root.display(), r.stderr);
    r.json.unwrap()
}

fn notes(v: &Value) -> Vec<String> {
    v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

fn assert_note(v: &Value, needles: &[&str]) {
    let ns = notes(v);
    assert!(
        ns.iter().any(|n| needles.iter().all(|x| n.contains(x))),
        "no note contains all of {needles:?}: {ns:#?}"
    );
}

fn queue_json<'a>(v: &'a Value, topic: &str, qid: i32) -> &'a Value {
    v["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == topic)
        .and_then(|t| {
            t["queues"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["queue_id"] == qid)
        })
        .unwrap_or_else(|| panic!("no queue {topic}/{qid} in info"))
}

// ---------------------------------------------------------------------------------------------
// Commitlog walks.

/// What walking one commitlog file gives: the good records (file position, raw bytes), the
/// error that stopped the walk, and how it ended.
#[derive(Debug)]
struct Walk {
    good: Vec<(u64, Vec<u8>)>,
    err: Option<Error>,
    end: SegmentEnd,
}

fn walk(path: &Path, start: u64, check_crc: bool) -> Walk {
    let map = Mapped::open(path).unwrap();
    let seg = Segment::commitlog(path.to_path_buf(), start, 0);
    let mut it = RecordIter::new(&map, &seg, check_crc);
    let mut good = Vec::new();
    let mut err = None;
    for r in it.by_ref() {
        assert!(err.is_none(), "the walk went on after an error");
        match r {
            Ok(m) => good.push((m.position - start, m.raw.to_vec())),
            Err(e) => err = Some(e),
        }
    }
    let end = it.end().clone();
    Walk { good, err, end }
}

/// The walk yielded exactly `base`'s first `k` records, then an error for `path` at file
/// position `pos` whose message contains `what`.
fn assert_stops_at(w: &Walk, base: &Walk, k: usize, pos: u64, path: &Path, what: &str) {
    assert_eq!(
        w.good.len(),
        k,
        "{}: expected {k} good records before byte {pos}, got {} (error {:?})",
        path.display(),
        w.good.len(),
        w.err.as_ref().map(|e| e.to_string())
    );
    assert!(w.good[..] == base.good[..k], "good records differ");
    let e = w
        .err
        .as_ref()
        .unwrap_or_else(|| panic!("{}: no error, walk ended {:?}", path.display(), w.end));
    let msg = e.to_string();
    assert_eq!(e.path(), path, "{msg}");
    assert!(msg.contains(&name_of(path)), "{msg}");
    assert!(msg.contains(&format!("at byte {pos}:")), "{msg}");
    assert!(msg.contains(what), "{msg} does not contain {what:?}");
    match e {
        Error::Data { offset, .. } => assert_eq!(*offset, pos),
        other => panic!("not a data error: {other:?}"),
    }
    assert_eq!(w.end, SegmentEnd::Corrupt { pos: pos as usize });
}

/// A commitlog case: a copy of the store, the damaged file (the third-to-last, so that `info`'s
/// max offset, which walks the last three files, stops at the damage), and its clean walk.
struct ClCase {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    path: PathBuf,
    start: u64,
    base: Walk,
}

fn cl_case(src: &Path) -> ClCase {
    let (tmp, root) = copy_store(src);
    let cl = Commitlog::open(&root.join("commitlog")).unwrap();
    assert!(cl.segments.len() >= 3);
    let seg = cl.segments[cl.segments.len() - 3].clone();
    let base = walk(&seg.path, seg.start, true);
    assert!(base.err.is_none(), "{:?}", base.err);
    assert!(base.good.len() >= 10, "too few records to damage");
    assert!(
        matches!(base.end, SegmentEnd::Blank { .. }),
        "the third-to-last file is full"
    );
    ClCase {
        _tmp: tmp,
        root,
        path: seg.path,
        start: seg.start,
        base,
    }
}

impl ClCase {
    /// Position and length of good record `k`.
    fn rec(&self, k: usize) -> (u64, u64) {
        (self.base.good[k].0, self.base.good[k].1.len() as u64)
    }

    fn mid(&self) -> usize {
        self.base.good.len() / 2
    }

    /// `info` runs, and its max offset is where the broker's recovery would cut: `file_pos`.
    fn assert_info_max_offset(&self, file_pos: u64) {
        let v = info_ok(&self.root);
        assert_eq!(
            v["commitlog"]["max_offset"].as_u64().unwrap(),
            self.start + file_pos,
            "{}",
            self.root.display()
        );
    }
}

#[test]
fn commitlog_truncated_in_the_middle_of_a_record() {
    for (src_name, src) in sources() {
        let c = cl_case(&src);
        let k = c.mid();
        let (pos, len) = c.rec(k);
        truncate(&c.path, pos + len / 2);
        let w = walk(&c.path, c.start, true);
        assert_stops_at(
            &w,
            &c.base,
            k,
            pos,
            &c.path,
            &format!(
                "expected {len} bytes for message record, only {} left",
                len / 2
            ),
        );
        // The short file is also a layout issue.
        let cl = Commitlog::open(&c.root.join("commitlog")).unwrap();
        let size = open(&c.root).geometry.commitlog_file_size.value;
        assert!(
            cl.layout_issues(size).contains(&LayoutIssue::OddSize {
                path: c.path.clone(),
                len: pos + len / 2,
                expected: size
            }),
            "{src_name}"
        );
        c.assert_info_max_offset(pos);
    }
}

#[test]
fn commitlog_zeroed_page_in_the_middle_of_a_file() {
    for (src_name, src) in sources() {
        let c = cl_case(&src);
        // The first 4 KiB page boundary after the middle record that falls strictly inside a
        // record (a page starting exactly at a record would read as the end of data).
        let (mid_pos, _) = c.rec(c.mid());
        let mut page = (mid_pos / 4096 + 1) * 4096;
        let j = loop {
            let j = c
                .base
                .good
                .iter()
                .position(|(p, r)| *p <= page && page < p + r.len() as u64)
                .expect("the page lies inside the data");
            if c.base.good[j].0 < page {
                break j;
            }
            page += 4096;
        };
        patch(&c.path, page, &[0u8; 4096]);
        let w = walk(&c.path, c.start, true);
        let (pos, _) = c.rec(j);
        assert_stops_at(&w, &c.base, j, pos, &c.path, "");
        // Without the CRC check the walk may accept the record whose tail was zeroed, but then
        // reads the zeros as the end of data: it never yields a record past the page.
        let w = walk(&c.path, c.start, false);
        assert!(w.good.len() <= j + 1, "{src_name}");
        assert!(w.good[..j] == c.base.good[..j]);
        c.assert_info_max_offset(pos);
    }
}

#[test]
fn commitlog_flipped_body_bit_is_a_crc_error_at_that_record() {
    for (src_name, src) in sources() {
        let c = cl_case(&src);
        let k = (c.mid()..c.base.good.len())
            .find(|&k| {
                let Ok(Record::Message(m)) = parse_record(&c.base.good[k].1, 0, 0, false) else {
                    panic!()
                };
                m.body.len() > 2
            })
            .expect("a record with a body");
        let (pos, raw) = (c.base.good[k].0, &c.base.good[k].1);
        let Ok(Record::Message(m)) = parse_record(raw, 0, 0, false) else {
            panic!()
        };
        let body_at = pos + m.body_len_pos as u64 + 4 + 1;
        let stored = m.body_crc as u32;
        flip(&c.path, body_at, 0x10);
        let w = walk(&c.path, c.start, true);
        assert_stops_at(
            &w,
            &c.base,
            k,
            pos,
            &c.path,
            &format!("body CRC stored {stored} but computed"),
        );
        // Without the CRC check every record still parses; only that body differs.
        let w = walk(&c.path, c.start, false);
        assert!(w.err.is_none(), "{src_name}: {:?}", w.err);
        assert_eq!(w.good.len(), c.base.good.len());
        for (i, (a, b)) in w.good.iter().zip(&c.base.good).enumerate() {
            assert_eq!(a.0, b.0);
            assert_eq!(a.1 == b.1, i != k, "record {i}");
        }
        c.assert_info_max_offset(pos);
    }
}

#[test]
fn commitlog_flipped_totalsize() {
    // (byte of TOTALSIZE to change, xor mask, what the error says)
    let cases: [(u64, u8, &str); 3] = [
        // negative size
        (0, 0x80, "record size -"),
        // +/- 65536: past the file's end, or a size the fields do not add up to
        (1, 0x01, ""),
        // +1 or -1 byte
        (3, 0x01, ""),
    ];
    for (src_name, src) in sources() {
        for (byte, mask, what) in cases {
            let c = cl_case(&src);
            let k = c.mid();
            let (pos, len) = c.rec(k);
            flip(&c.path, pos + byte, mask);
            let w = walk(&c.path, c.start, true);
            let new_size = i32::from_be_bytes(
                std::fs::read(&c.path).unwrap()[pos as usize..pos as usize + 4]
                    .try_into()
                    .unwrap(),
            );
            if byte == 3 && (new_size as u64) < len {
                // One byte short: the record's last field is cut, and the error names that
                // field's position inside the record.
                let Ok(Record::Message(m)) = parse_record(&c.base.good[k].1, 0, 0, false) else {
                    panic!()
                };
                assert!(!m.properties.0.is_empty());
                let props_at = pos + len - m.properties.0.len() as u64;
                assert_eq!(w.good.len(), k);
                let msg = w.err.as_ref().unwrap().to_string();
                assert!(
                    msg.contains(&format!("at byte {props_at}: expected"))
                        && msg.contains("PROPERTIES"),
                    "{src_name}: {msg}"
                );
                assert_eq!(w.end, SegmentEnd::Corrupt { pos: pos as usize });
            } else {
                assert_stops_at(&w, &c.base, k, pos, &c.path, what);
            }
            c.assert_info_max_offset(pos);
        }
    }
}

#[test]
fn commitlog_bad_magic() {
    for (_, src) in sources() {
        let c = cl_case(&src);
        let k = c.mid();
        let (pos, _) = c.rec(k);
        patch(&c.path, pos + 4, &0xDEAD_BEEF_u32.to_be_bytes());
        let w = walk(&c.path, c.start, true);
        assert_stops_at(&w, &c.base, k, pos, &c.path, "bad magic code 0xdeadbeef");
        c.assert_info_max_offset(pos);
    }
}

#[test]
fn commitlog_garbage_bytes() {
    for (src_name, src) in sources() {
        // Garbage over the start of a record.
        let c = cl_case(&src);
        let k = c.mid();
        let (pos, len) = c.rec(k);
        let g = garbage(64, 1);
        let magic = i32::from_be_bytes(g[4..8].try_into().unwrap());
        assert!(![
            0xDAA3_20A7_u32 as i32,
            0xDAA3_20AB_u32 as i32,
            0xCBD4_3194_u32 as i32
        ]
        .contains(&magic));
        patch(&c.path, pos, &g);
        let w = walk(&c.path, c.start, true);
        assert_stops_at(&w, &c.base, k, pos, &c.path, "bad magic code");
        c.assert_info_max_offset(pos);

        // Garbage inside a record (after its size and magic): the error points into that
        // record, never past it, and nothing after it is read.
        let c = cl_case(&src);
        patch(&c.path, pos + 8, &garbage((len - 8).min(96) as usize, 2));
        let w = walk(&c.path, c.start, true);
        assert!(w.good[..] == c.base.good[..k], "{src_name}");
        let e = w.err.as_ref().expect("an error");
        let Error::Data { offset, .. } = e else {
            panic!("{e:?}")
        };
        assert!(
            (pos..pos + len).contains(offset),
            "{src_name}: error at {offset}, record at {pos}..{}: {e}",
            pos + len
        );
        assert!(e.to_string().contains(&name_of(&c.path)));
    }
}

#[test]
fn commitlog_missing_file_in_the_middle_is_a_layout_gap() {
    for (src_name, src) in sources() {
        let (_t, root) = copy_store(&src);
        let cl = Commitlog::open(&root.join("commitlog")).unwrap();
        let size = open(&root).geometry.commitlog_file_size.value;
        assert!(cl.layout_issues(size).is_empty(), "{src_name}");
        let i = cl.segments.len() / 2;
        let gone = cl.segments[i].clone();
        std::fs::remove_file(&gone.path).unwrap();
        let after = Commitlog::open(&root.join("commitlog")).unwrap();
        assert_eq!(
            after.layout_issues(size),
            vec![LayoutIssue::Gap {
                from: gone.start,
                to: gone.start + size
            }],
            "{src_name}"
        );
        assert!(after.segment_for(gone.start).is_none());
        assert!(after.segment_for(gone.start + size).is_some());
        // The other files still read in full.
        for s in &after.segments {
            let w = walk(&s.path, s.start, true);
            assert!(w.err.is_none(), "{}: {:?}", s.path.display(), w.err);
        }
        let v = info_ok(&root);
        assert_note(
            &v,
            &[
                "commitlog layout",
                "Gap",
                &format!("from: {}", gone.start),
                &format!("to: {}", gone.start + size),
            ],
        );
        assert_eq!(
            v["commitlog"]["files"].as_array().unwrap().len(),
            after.segments.len()
        );
    }
}

#[test]
fn commitlog_zero_length_file() {
    for (src_name, src) in sources() {
        let c = cl_case(&src);
        truncate(&c.path, 0);
        let w = walk(&c.path, c.start, true);
        assert!(w.good.is_empty() && w.err.is_none(), "{src_name}");
        assert_eq!(w.end, SegmentEnd::EndOfData { pos: 0 });
        let cl = Commitlog::open(&c.root.join("commitlog")).unwrap();
        let size = open(&c.root).geometry.commitlog_file_size.value;
        assert_eq!(
            cl.layout_issues(size),
            vec![LayoutIssue::OddSize {
                path: c.path.clone(),
                len: 0,
                expected: size
            }]
        );
        // The broker's recovery ends the data at an empty file.
        let v = info_ok(&c.root);
        assert_eq!(v["commitlog"]["max_offset"].as_u64().unwrap(), c.start);
        assert_note(&v, &["OddSize", &name_of(&c.path), "len: 0"]);
    }
}

#[test]
fn commitlog_file_that_cannot_be_opened_is_named() {
    for (_, src) in sources() {
        let (_t, root) = copy_store(&src);
        let cl = Commitlog::open(&root.join("commitlog")).unwrap();
        let victim = cl.segments[cl.segments.len() / 2].path.clone();
        std::fs::remove_file(&victim).unwrap();
        std::os::unix::fs::symlink(root.join("no-such-file"), &victim).unwrap();
        // A dangling link is no commitlog file: it is set aside (never opened), and named.
        let cl = Commitlog::open(&root.join("commitlog")).unwrap();
        assert!(cl.segments.iter().all(|s| s.path != victim));
        assert!(cl.odd.iter().any(|e| e.path == victim));
        let v = info_ok(&root);
        assert_note(&v, &[&victim.display().to_string(), "dangling symlink"]);
    }
}

// ---------------------------------------------------------------------------------------------
// Consume queues.

/// A copy of the store and its first queue with at least two files.
fn cq_case(src: &Path) -> (tempfile::TempDir, PathBuf, ConsumeQueue, u64) {
    let (t, root) = copy_store(src);
    let store = open(&root);
    let cq = store
        .queues
        .values()
        .find(|q| q.files.len() >= 2)
        .expect("a queue with two files")
        .clone();
    let max = cq.max_offset().unwrap();
    assert!(max > cq.file_size / UNIT_SIZE as u64);
    (t, root, cq, max)
}

fn reopen(cq: &ConsumeQueue) -> ConsumeQueue {
    ConsumeQueue::open(&cq.dir, &cq.topic, cq.queue_id, cq.file_size).unwrap()
}

#[test]
fn consumequeue_truncated_to_a_non_multiple_of_20() {
    for (src_name, src) in sources() {
        let (_t, root, cq, _) = cq_case(&src);
        let first = cq.files[0].path.clone();
        let units = 50u64;
        truncate(&first, units * 20 + 7);
        let after = reopen(&cq);
        let e = after
            .file_size_issue(&after.files[0])
            .expect("a size issue");
        assert!(
            matches!(
                &e,
                Error::QueueFile(QueueFileError::WrongSize { path, len, expected })
                    if *path == first && *len == units * 20 + 7 && *expected == cq.file_size
            ),
            "{e}"
        );
        let msg = e.to_string();
        assert!(msg.contains(&first.display().to_string()), "{msg}");
        assert!(
            msg.contains(&format!(
                "is {} bytes, expected {}",
                units * 20 + 7,
                cq.file_size
            )),
            "{msg}"
        );
        let map = Mapped::open(&first).unwrap();
        assert_eq!(valid_units(&map).count() as u64, units);
        // The queue ends where the short file's whole units end; the units of the next file
        // are not reached (the broker's recovery stops at a file that is not full).
        assert_eq!(after.max_offset().unwrap(), units, "{src_name}");
        let mut n = 0;
        after
            .for_each_unit(|q, _| {
                assert_eq!(q, n);
                n += 1;
                true
            })
            .unwrap();
        assert_eq!(n, units);
        let v = info_ok(&root);
        let q = queue_json(&v, &cq.topic, cq.queue_id);
        assert_eq!(q["max_offset"], units, "{src_name}");
    }
}

#[test]
fn consumequeue_garbage_unit() {
    for (src_name, src) in sources() {
        // Garbage that is not a valid unit (negative offset): the queue ends there.
        let (_t, root, cq, max) = cq_case(&src);
        let first = cq.files[0].path.clone();
        let j = 30u64;
        let mut g = garbage(UNIT_SIZE, 3);
        g[0] |= 0x80;
        assert!(!CqUnit::from_bytes(&g).unwrap().is_valid());
        patch(&first, j * 20, &g);
        let after = reopen(&cq);
        assert_eq!(after.max_offset().unwrap(), j, "{src_name}");
        assert_eq!(after.unit_at(j).unwrap(), CqUnit::from_bytes(&g));
        let v = info_ok(&root);
        assert_eq!(queue_json(&v, &cq.topic, cq.queue_id)["max_offset"], j);

        // Garbage that looks like a unit (offset and size positive) is read as one: nothing in
        // the consume queue alone says it is wrong, the queue keeps its length.
        let (_t, _root, cq, _) = cq_case(&src);
        let first = cq.files[0].path.clone();
        let mut g = garbage(UNIT_SIZE, 4);
        g[0] &= 0x7F;
        g[8] &= 0x7F;
        g[11] |= 1;
        let u = CqUnit::from_bytes(&g).unwrap();
        assert!(u.is_valid());
        patch(&first, j * 20, &g);
        let after = reopen(&cq);
        assert_eq!(after.max_offset().unwrap(), max);
        assert_eq!(after.unit_at(j).unwrap(), Some(u));
    }
}

#[test]
fn consumequeue_all_ff() {
    for (src_name, src) in sources() {
        // First file all 0xFF: no valid unit at all.
        let (_t, root, cq, _) = cq_case(&src);
        let len = cq.files[0].len as usize;
        std::fs::write(&cq.files[0].path, vec![0xFF; len]).unwrap();
        let after = reopen(&cq);
        assert_eq!(after.max_offset().unwrap(), 0, "{src_name}");
        assert_eq!(after.min_offset(0).unwrap(), 0);
        let v = info_ok(&root);
        let q = queue_json(&v, &cq.topic, cq.queue_id);
        assert_eq!(
            (q["min_offset"].as_u64(), q["max_offset"].as_u64()),
            (Some(0), Some(0))
        );

        // Second file all 0xFF: the queue ends with the first file.
        let (_t, root, cq, _) = cq_case(&src);
        let len = cq.files[1].len as usize;
        std::fs::write(&cq.files[1].path, vec![0xFF; len]).unwrap();
        let after = reopen(&cq);
        let units = cq.file_size / UNIT_SIZE as u64;
        assert_eq!(after.max_offset().unwrap(), units, "{src_name}");
        let v = info_ok(&root);
        assert_eq!(queue_json(&v, &cq.topic, cq.queue_id)["max_offset"], units);
    }
}

#[test]
fn consumequeue_file_that_cannot_be_opened_is_named() {
    for (_, src) in sources() {
        let (_t, root, cq, _) = cq_case(&src);
        let victim = cq.files[1].path.clone();
        std::fs::remove_file(&victim).unwrap();
        std::os::unix::fs::symlink(root.join("no-such-file"), &victim).unwrap();
        let cq = reopen(&cq);
        assert!(cq.files.iter().all(|f| f.path != victim));
        assert!(cq.odd.iter().any(|e| e.path == victim));
        let v = info_ok(&root);
        assert_note(&v, &[&victim.display().to_string(), "dangling symlink"]);
    }
}

// ---------------------------------------------------------------------------------------------
// Index files.

/// A copy of the store, its index geometry, and a full index file from the middle.
fn index_case(src: &Path) -> (tempfile::TempDir, PathBuf, IndexGeometry, PathBuf) {
    let (t, root) = copy_store(src);
    let store = open(&root);
    let g = IndexGeometry::new(
        store.geometry.index_slots.value,
        store.geometry.index_entries.value,
    );
    let full: Vec<&PathBuf> = store
        .index_files
        .iter()
        .filter(|p| {
            let f = IndexFile::open(p, g).unwrap();
            f.header().index_count as u32 == g.entries
        })
        .collect();
    assert!(!full.is_empty(), "a full index file");
    let p = full[full.len() / 2].clone();
    (t, root, g, p)
}

/// Every `topic#key` the broker would index, by key hash, from the store's commitlog.
fn built_keys(root: &Path) -> BTreeMap<i32, Vec<String>> {
    let cl = Commitlog::open(&root.join("commitlog")).unwrap();
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for s in &cl.segments {
        let map = s.map().unwrap();
        for m in RecordIter::new(&map, s, false) {
            let m = m.unwrap();
            for key in m
                .uniq_key()
                .into_iter()
                .map(|k| k.into_owned())
                .chain(m.keys())
            {
                let b = build_key(&m.topic, &key);
                out.entry(index_key_hash(&b)).or_default().push(b);
            }
        }
    }
    out
}

/// A key that lands in `slot` with a hash none of `avoid` has (so it matches no entry).
fn key_in_slot(slot: u32, slots: u32, avoid: &[i32]) -> String {
    (0..)
        .map(|i| format!("NoSuchTopic#k{i}"))
        .find(|k| {
            let h = index_key_hash(k);
            slot_of(h, slots) == slot && !avoid.contains(&h)
        })
        .unwrap()
}

#[test]
fn index_file_truncated() {
    for (_, src) in sources() {
        let (_t, root, g, path) = index_case(&src);
        let want = g.file_size();
        truncate(&path, want - 100);
        let e = IndexFile::open(&path, g).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains(&format!("at byte {}:", want - 100)), "{msg}");
        assert!(
            msg.contains(&format!(
                "expected {want} bytes for {g}, found {} bytes",
                want - 100
            )),
            "{msg}"
        );
        let bytes = std::fs::read(&path).unwrap();
        assert_ne!(infer_geometry(&bytes).result, InferResult::Unique(g));
        assert!(check_file(&bytes, g).iter().any(|p| p.offset == want - 100));
        let v = info_ok(&root);
        let listed = v["index_files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name_of(&path).as_str())
            .expect("the short file is still listed");
        assert_eq!(listed["size"], want - 100);

        // Shorter than the header: info says which file and where.
        truncate(&path, 20);
        let e = IndexFile::open(&path, g).unwrap_err();
        assert!(e.to_string().contains(&name_of(&path)), "{e}");
        let v = info_ok(&root);
        assert_note(
            &v,
            &[
                &path.display().to_string(),
                "at byte 0: expected 40 bytes for index file header, only 20 left",
            ],
        );
    }
}

#[test]
fn index_file_garbage_header() {
    for (src_name, src) in sources() {
        let (_t, root, g, path) = index_case(&src);
        let before = IndexFile::open(&path, g).unwrap();
        let keys = built_keys(&root);
        let good = std::fs::read(&path).unwrap();
        let g40 = garbage(40, 5);
        patch(&path, 0, &g40);
        let f = IndexFile::open(&path, g).expect("only the size is checked on open");
        let h = *f.header();
        assert_eq!(h, IndexHeader::from_bytes(&g40).unwrap());
        // Entries: as many as indexCount says, an error for the first one past the file.
        let items: Vec<_> = f.entries().collect();
        let c = h.effective_index_count() as u64;
        if c > g.entries as u64 {
            assert_eq!(items.len() as u64, g.entries as u64);
            let e = items.last().unwrap().as_ref().unwrap_err();
            assert_eq!(e.offset, g.entry_pos(g.entries));
        } else {
            assert_eq!(items.len() as u64, c - 1);
            assert!(items.iter().all(|r| r.is_ok()));
        }
        // The checker names the header fields that no longer match the entries.
        let problems = check_file(f.bytes(), g);
        if h.index_count < 0 {
            assert_eq!(problems[0].offset, 36, "{src_name}: {problems:#?}");
            assert!(problems[0].what.contains("indexCount is negative"));
        }
        // Header fields are compared last; with many bad slots (the oracle's 1000) the list is
        // cut at 100 problems before them.
        let capped = problems
            .last()
            .is_some_and(|p| p.what.contains("more problems not listed"));
        // With indexCount <= 1 only begin/end offsets are compared with each other.
        let fields: &[u64] = match (capped, c <= 1) {
            (true, _) => &[],
            (false, true) => &[16, 32],
            (false, false) => &[16, 24, 32],
        };
        for &off in fields {
            assert!(
                problems.iter().any(|p| p.offset == off),
                "{src_name}: no problem at header byte {off}: {problems:#?}"
            );
        }
        // Lookups still terminate and only return offsets of this file's entries.
        let all: Vec<i64> = (1..g.entries)
            .map(|n| {
                IndexEntry::read_at(&good, g.entry_pos(n) as usize)
                    .unwrap()
                    .phy_offset
            })
            .collect();
        for e in before.entries().take(20) {
            let (_, e) = e.unwrap();
            let key = &keys[&e.key_hash][0];
            for o in f.select_phy_offsets(key, 32, 0, i64::MAX) {
                assert!(all.contains(&o));
            }
        }
        let _ = infer_geometry(f.bytes());
        info_ok(&root);
    }
}

#[test]
fn index_slot_pointing_past_index_count() {
    for (src_name, src) in sources() {
        let (_t, root, g, path) = index_case(&src);
        let f = IndexFile::open(&path, g).unwrap();
        let keys = built_keys(&root);
        let count = f.header().index_count;
        // A used slot, and the newest entry it names.
        let s = (0..g.slots).find(|&s| f.slot(s).unwrap() > 0).unwrap();
        let head = f.entry(f.slot(s).unwrap() as u32).unwrap();
        let key = keys[&head.key_hash][0].clone();
        assert!(f
            .select_phy_offsets(&key, 32, 0, i64::MAX)
            .contains(&head.phy_offset));
        // Another slot's lookup, for comparison.
        let s2 = (0..g.slots)
            .rev()
            .find(|&x| x != s && f.slot(x).unwrap() > 0)
            .unwrap();
        let head2 = f.entry(f.slot(s2).unwrap() as u32).unwrap();
        let key2 = keys[&head2.key_hash][0].clone();
        let other_before = f.select_phy_offsets(&key2, 32, 0, i64::MAX);

        patch(&path, g.slot_pos(s), &(count + 5).to_be_bytes());
        let f = IndexFile::open(&path, g).unwrap();
        assert_eq!(f.slot(s).unwrap(), count + 5);
        // The broker ignores a slot past indexCount: nothing found, nothing read out of range.
        assert!(f.select_phy_offsets(&key, 32, 0, i64::MAX).is_empty());
        assert_eq!(f.select_phy_offsets(&key2, 32, 0, i64::MAX), other_before);
        let problems = check_file(f.bytes(), g);
        assert!(
            problems
                .iter()
                .any(|p| p.offset == g.slot_pos(s) && p.what.contains(&format!("slot {s} holds"))),
            "{src_name}: {problems:#?}"
        );
        // The slot values now bound the slot table below its real size: no geometry fits.
        assert!(check_geometry_fails(f.bytes(), g));
        assert_ne!(infer_geometry(f.bytes()).result, InferResult::Unique(g));
        // Huge and negative slot values too.
        for v in [i32::MAX, -1, i32::MIN] {
            patch(&path, g.slot_pos(s), &v.to_be_bytes());
            let f = IndexFile::open(&path, g).unwrap();
            assert!(f.select_phy_offsets(&key, 32, 0, i64::MAX).is_empty());
            let _ = check_file(f.bytes(), g);
            let _ = infer_geometry(f.bytes());
        }
        info_ok(&root);
    }
}

fn check_geometry_fails(bytes: &[u8], g: IndexGeometry) -> bool {
    rmqstore::format::indexfile::check_geometry(bytes, g).is_err()
}

#[test]
fn index_chain_loop() {
    for (src_name, src) in sources() {
        let (_t, root, g, path) = index_case(&src);
        let f = IndexFile::open(&path, g).unwrap();
        let keys = built_keys(&root);
        // A slot whose chain has at least two entries: head -> p.
        let (s, h, p) = (0..g.slots)
            .find_map(|s| {
                let h = f.slot(s).unwrap();
                if h <= 0 {
                    return None;
                }
                let p = f.entry(h as u32).unwrap().prev;
                (p > 0).then_some((s, h, p))
            })
            .expect("a chain of two");
        let (eh, ep) = (f.entry(h as u32).unwrap(), f.entry(p as u32).unwrap());
        let key = keys[&eh.key_hash][0].clone();
        let stranger = key_in_slot(s, g.slots, &[eh.key_hash, ep.key_hash]);
        // p now points back to h: h -> p -> h -> ...
        patch(&path, g.entry_pos(p as u32) + 16, &h.to_be_bytes());
        let f = IndexFile::open(&path, g).unwrap();
        // Matching key: Java collects until maxNum; so do we, and stop there.
        let got = f.select_phy_offsets(&key, 32, 0, i64::MAX);
        assert_eq!(got.len(), 32, "{src_name}");
        assert_eq!(got[0], eh.phy_offset);
        assert!(got
            .iter()
            .all(|o| *o == eh.phy_offset || *o == ep.phy_offset));
        // A key of the same slot that matches nothing: the walk ends instead of looping forever.
        assert!(f.select_phy_offsets(&stranger, 32, 0, i64::MAX).is_empty());
        let r = rmqstore::format::indexfile::query_offsets(
            [&f],
            "NoSuchTopic",
            &stranger[12..],
            64,
            0,
            i64::MAX,
        );
        assert!(r.phy_offsets.is_empty());
        let problems = check_file(f.bytes(), g);
        assert!(
            problems
                .iter()
                .any(|x| x.offset == g.entry_pos(p as u32) + 16
                    && x.what.contains(&format!("entry {p} has prev {h}"))),
            "{src_name}: {problems:#?}"
        );
        assert!(check_geometry_fails(f.bytes(), g));
        info_ok(&root);
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoint.

#[test]
fn checkpoint_shorter_than_24_bytes() {
    for (_, src) in sources() {
        for len in [0u64, 16, 23] {
            let (_t, root) = copy_store(&src);
            let path = root.join("checkpoint");
            let full = std::fs::read(&path).unwrap();
            truncate(&path, len);
            let e = open(&root).checkpoint().unwrap_err();
            let msg = e.to_string();
            assert_eq!(
                msg,
                format!(
                    "{}: at byte 0: expected 24 bytes for checkpoint, only {len} left",
                    path.display()
                )
            );
            // 24 bytes are enough (the 5.x fields read as 0).
            std::fs::write(&path, &full[..24]).unwrap();
            let cp = open(&root).checkpoint().unwrap().unwrap();
            assert_eq!(cp, Checkpoint::from_bytes(&full[..24]).unwrap());
            truncate(&path, len);
            let v = info_ok(&root);
            assert!(v["checkpoint"].is_null());
            assert_note(&v, &[&msg]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Config JSON.

const JSON_GARBAGE_PREFIX: &[u8] = b"{\"offsetTable\":{\"T@G\":{0:";

fn json_garbage() -> Vec<u8> {
    let mut b = JSON_GARBAGE_PREFIX.to_vec();
    b.extend_from_slice(&[0x00, 0xFF, b'}']);
    b
}

/// Garbage in `T`'s main file: the `.bak` is used when there is one and says why, else the
/// empty state with both reasons.
fn config_fallback<T: ConfigFile + PartialEq + std::fmt::Debug>(root: &Path) {
    let dir = root.join("config");
    let main = dir.join(T::FILE_NAME);
    let bak = dir.join(format!("{}.bak", T::FILE_NAME));
    std::fs::write(&main, json_garbage()).unwrap();
    let l = load::<T>(&dir).unwrap();
    let at = format!("unparsable: at byte {}:", JSON_GARBAGE_PREFIX.len());
    if bak.exists() {
        let ConfigSource::Backup { reason } = &l.source else {
            panic!("{}: {:?}", T::FILE_NAME, l.source)
        };
        assert!(reason.starts_with(&at), "{reason}");
        assert_eq!(l.path, bak);
        assert_eq!(
            l.value,
            T::from_bytes(&std::fs::read(&bak).unwrap()).unwrap()
        );
    } else {
        let ConfigSource::Empty { reason } = &l.source else {
            panic!("{}: {:?}", T::FILE_NAME, l.source)
        };
        assert!(reason.contains(&main.display().to_string()), "{reason}");
        assert!(reason.contains(&at), "{reason}");
        assert!(
            reason.contains(&format!("{}: missing", bak.display())),
            "{reason}"
        );
        assert_eq!(l.value, T::empty());
    }
}

#[test]
fn config_garbage_falls_back_to_bak_and_says_so() {
    for (_, src) in sources() {
        let (_t, root) = copy_store(&src);
        config_fallback::<ConsumerOffsets>(&root);
        config_fallback::<DelayOffsets>(&root);
        config_fallback::<TopicConfigs>(&root);
        config_fallback::<SubscriptionGroups>(&root);
        // info reads consumer offsets: it says it used the .bak and shows the .bak's groups.
        let bak = root.join("config/consumerOffset.json.bak");
        let from_bak = ConsumerOffsets::from_bytes(&std::fs::read(&bak).unwrap()).unwrap();
        let v = info_ok(&root);
        assert_note(
            &v,
            &[
                &format!(
                    "consumerOffset.json unparsable: at byte {}",
                    JSON_GARBAGE_PREFIX.len()
                ),
                "read consumerOffset.json.bak instead",
            ],
        );
        let groups = v["consumer_groups"].as_array().unwrap();
        assert_eq!(groups.len(), from_bak.iter().count());
        assert!(!groups.is_empty());
    }
}

#[test]
fn config_garbage_and_bad_bak() {
    for (_, src) in sources() {
        let (_t, root) = copy_store(&src);
        let dir = root.join("config");
        let main = dir.join("consumerOffset.json");
        let bak = dir.join("consumerOffset.json.bak");
        std::fs::write(&main, json_garbage()).unwrap();
        std::fs::write(&bak, b"{\"offsetTable\":[1,2").unwrap();
        let e = load::<ConsumerOffsets>(&dir).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with(&main.display().to_string()), "{msg}");
        assert!(
            msg.contains(&format!(
                "unparsable: at byte {}",
                JSON_GARBAGE_PREFIX.len()
            )),
            "{msg}"
        );
        assert!(
            msg.contains(&format!(
                "the backup is unusable: {}: at byte",
                bak.display()
            )),
            "{msg}"
        );
        let v = info_ok(&root);
        assert_note(
            &v,
            &["consumer offsets unreadable", &bak.display().to_string()],
        );
        assert!(v["consumer_groups"].as_array().unwrap().is_empty());

        // Main file empty and .bak garbage: same, the broker would refuse to start.
        std::fs::write(&main, b"").unwrap();
        let msg = load::<ConsumerOffsets>(&dir).unwrap_err().to_string();
        assert!(msg.contains("empty; and the backup is unusable"), "{msg}");
        info_ok(&root);
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions found by the fuzzers and by the cases above.

/// A consumer offset of `i64::MIN` (a damaged or hand-edited consumerOffset.json) made `info`
/// compute `max - offset` with an overflowing subtraction (src/commands/info.rs, the `lag`).
#[test]
fn info_survives_extreme_consumer_offsets() {
    let (_t, root) = copy_store(&sources()[0].1);
    let main = root.join("config/consumerOffset.json");
    let text = std::fs::read_to_string(&main).unwrap();
    let v: ConsumerOffsets = ConsumerOffsets::from_bytes(text.as_bytes()).unwrap();
    let (topic, group, queues) = v.entries().remove(0);
    for offset in [i64::MIN, i64::MAX, -1] {
        let mut w = v.clone();
        w.set(&topic, &group, queues[0].0, offset);
        std::fs::write(&main, w.to_pretty()).unwrap();
        let json = info_ok(&root);
        let g = json["consumer_groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["topic"] == topic.as_str() && g["group"] == group.as_str())
            .unwrap();
        let q = g["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["queue_id"] == queues[0].0)
            .unwrap();
        assert_eq!(q["committed_offset"], offset);
        assert!(q["lag"].as_i64().unwrap() >= 0);
    }
}

/// A commitlog (or consume queue) file whose 20-digit name was near `u64::MAX` made the readers
/// add positions to the start offset with an overflowing `+` (src/format/commitlog/read.rs
/// `parse_record` and `Commitlog::max_offset`, src/format/consumequeue/mod.rs `end_pos`). Names
/// now count only within a Java long, as the broker's `Long.parseLong` reads them: a larger name
/// is a foreign file, and the largest accepted start (`i64::MAX`) still leaves room in a u64.
#[test]
fn commitlog_file_named_near_u64_max_does_not_panic() {
    let (_t, root) = copy_store(&sources()[0].1);
    let dir = root.join("commitlog");
    let cl = Commitlog::open(&dir).unwrap();
    let last = cl.segments.last().unwrap().clone();
    let huge = dir.join(u64::MAX.to_string());
    std::fs::copy(&last.path, &huge).unwrap();
    let cl = Commitlog::open(&dir).unwrap();
    assert!(cl.foreign.contains(&huge), "{:?}", cl.foreign);
    info(&root);
    std::fs::remove_file(&huge).unwrap();

    let name = format!("{:020}", i64::MAX);
    let path = dir.join(&name);
    std::fs::copy(&last.path, &path).unwrap();
    let cl = Commitlog::open(&dir).unwrap();
    assert_eq!(cl.segments.last().unwrap().start, i64::MAX as u64);
    let map = Mapped::open(&path).unwrap();
    let n = RecordIter::new(
        &map,
        &Segment::commitlog(path.clone(), i64::MAX as u64, 0),
        false,
    )
    .filter(|r| r.is_ok())
    .count();
    assert!(n > 0);
    let _ = cl.max_offset().unwrap();
    info(&root);
}

#[test]
fn consumequeue_file_named_near_u64_max_does_not_panic() {
    for name in [u64::MAX.to_string(), format!("{:020}", i64::MAX)] {
        let (_t, root, cq, _) = cq_case(&sources()[0].1);
        // The queue's only file has that name.
        let bytes = std::fs::read(&cq.files[0].path).unwrap();
        for f in &cq.files {
            std::fs::remove_file(&f.path).unwrap();
        }
        std::fs::write(cq.dir.join(&name), bytes).unwrap();
        let after = reopen(&cq);
        match after.files.first() {
            Some(f) => assert_eq!(f.start, i64::MAX as u64),
            None => assert_eq!(after.foreign, vec![cq.dir.join(&name)]),
        }
        let _ = after.max_offset().unwrap();
        let _ = after.min_offset(0).unwrap();
        after.for_each_unit(|_, _| true).unwrap();
        info(&root);
    }
}

/// Found by the `checkpoint` fuzz target: a checkpoint whose physic or logics timestamp is below
/// `i64::MIN + 3000` made `Checkpoint::min_timestamp` subtract with overflow
/// (src/format/checkpoint.rs, `min_timestamp`). Java's `getMinTimestamp` wraps (long arithmetic)
/// and then clamps negatives to 0, so it returns `i64::MIN.wrapping_sub(3000)`.
#[test]
fn checkpoint_min_timestamp_of_extreme_values() {
    // The fuzzer's input: physic 1796..., logics i64::MIN, index 1796....
    let input = [
        0x00, 0x00, 0x01, 0xa2, 0x2e, 0x4c, 0x0c, 0x8f, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01, 0xa2, 0x2e, 0x4c, 0x0c, 0x8b, 0x00, 0x00, 0x01, 0xa2, 0x2e, 0x4b,
        0xe3, 0x81,
    ];
    let c = Checkpoint::from_bytes(&input).unwrap();
    assert_eq!(c.logics_msg_timestamp, i64::MIN);
    assert_eq!(c.min_timestamp(), i64::MIN.wrapping_sub(3000));
    let _ = c.min_timestamp_index();
    // Through the binary too (info does not call min_timestamp today; it must not start to
    // panic when it does).
    let (_t, root) = copy_store(&sources()[0].1);
    let mut b = std::fs::read(root.join("checkpoint")).unwrap();
    b[..input.len()].copy_from_slice(&input);
    std::fs::write(root.join("checkpoint"), b).unwrap();
    info_ok(&root);
}

/// Found with the `consumequeue_units` fuzz target: a batch consume queue unit whose
/// msgBaseOffset is near `i64::MAX` made `find_unit` add `msg_base_offset + batch_size` with
/// overflow (src/format/consumequeue/batch.rs, `find_unit`).
#[test]
fn batch_unit_near_i64_max_does_not_panic() {
    use rmqstore::format::consumequeue::batch::{batch_units, find_unit, BATCH_UNIT_SIZE};
    let mut b = vec![0u8; BATCH_UNIT_SIZE];
    b[8..12].copy_from_slice(&100i32.to_be_bytes()); // size
    b[28..36].copy_from_slice(&i64::MAX.to_be_bytes()); // msgBaseOffset
    b[36..38].copy_from_slice(&1i16.to_be_bytes()); // batchSize
    let units: Vec<_> = batch_units(&b).collect();
    assert_eq!(units.len(), 1);
    assert_eq!(
        find_unit(&units, i64::MAX).map(|u| u.msg_base_offset),
        Some(i64::MAX)
    );
    assert!(find_unit(&units, 0).is_none());
}

/// Found by the `index_file` fuzz target (a timeout): a lookup whose chain loops without a match
/// stops only after `indexCount + 1` steps, and indexCount comes from the (corrupt) header, not
/// from the file's capacity (src/format/indexfile/read.rs, `select_phy_offsets_into`, the
/// `since_last_add` guard). With indexCount = i32::MAX one lookup in a 124-byte file walks about
/// 2^31 entries. Bounded by the geometry's entry count it ends at once.
#[test]
fn index_lookup_on_a_loop_is_bounded_by_the_file_not_the_header() {
    let g = IndexGeometry::new(1, 4);
    let mut b = vec![0u8; g.file_size() as usize];
    let header = IndexHeader {
        index_count: i32::MAX,
        ..Default::default()
    };
    b[..40].copy_from_slice(&header.to_bytes());
    b[40..44].copy_from_slice(&1i32.to_be_bytes()); // slot 0 -> entry 1
    let e = |prev| IndexEntry {
        key_hash: 7,
        phy_offset: 10,
        time_diff: 0,
        prev,
    };
    // entry 1 -> entry 2 -> entry 1 -> ...
    let p1 = g.entry_pos(1) as usize;
    b[p1..p1 + 20].copy_from_slice(&e(2).to_bytes());
    let p2 = g.entry_pos(2) as usize;
    b[p2..p2 + 20].copy_from_slice(&e(1).to_bytes());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let f = IndexFile::new(&b[..], g).unwrap();
        // A key whose hash is not 7: nothing matches, the walk must give up.
        let key = "T#x";
        assert_ne!(index_key_hash(key), 7);
        tx.send(f.select_phy_offsets(key, 32, 0, i64::MAX)).unwrap();
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(3))
        .expect("a lookup in a 4-entry file walked for more than 3 s");
    assert!(got.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Every damage above, through the binary, on a store that has all of them at once.

#[test]
fn info_never_panics_on_a_store_with_everything_broken() {
    for (_, src) in sources() {
        let (_t, root) = copy_store(&src);
        let store = open(&root);
        for (i, s) in store.commitlog.segments.iter().enumerate() {
            match i % 4 {
                0 => patch(&s.path, 100, &garbage(4096, i as u64)),
                1 => truncate(&s.path, s.len / 3 + 1),
                2 => truncate(&s.path, 0),
                _ => {}
            }
        }
        for (i, q) in store.queues.values().enumerate() {
            for f in &q.files {
                match i % 3 {
                    0 => truncate(&f.path, f.len / 2 + 3),
                    1 => std::fs::write(&f.path, vec![0xFF; f.len as usize]).unwrap(),
                    _ => std::fs::write(&f.path, garbage(f.len as usize, i as u64)).unwrap(),
                }
            }
        }
        for (i, p) in store.index_files.iter().enumerate() {
            let len = std::fs::metadata(p).unwrap().len();
            match i % 3 {
                0 => truncate(p, 17),
                1 => patch(p, 0, &garbage(40, i as u64)),
                _ => std::fs::write(p, garbage(len as usize, i as u64)).unwrap(),
            }
        }
        truncate(&root.join("checkpoint"), 5);
        for f in std::fs::read_dir(root.join("config")).unwrap() {
            std::fs::write(f.unwrap().path(), garbage(50, 9)).unwrap();
        }
        let r = info(&root);
        if let Some(v) = r.json {
            assert_note(&v, &["checkpoint", "at byte 0"]);
        }
    }
}

/// A missing part is not a panic either.
#[test]
fn info_on_stores_missing_whole_parts() {
    for part in ["consumequeue", "index", "config", "checkpoint"] {
        let (_t, root) = copy_store(&sources()[0].1);
        let p = root.join(part);
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
        info_ok(&root);
    }
    // Only a consume queue folder and no commitlog.
    let (_t, root) = copy_store(&sources()[0].1);
    std::fs::remove_dir_all(root.join("commitlog")).unwrap();
    info(&root);
}
