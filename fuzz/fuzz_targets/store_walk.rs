//! Arbitrary bytes as a whole store: two commitlog files, a consume queue file, an index file and
//! consumerOffset.json, in a small geometry. `verify` walks all of it; `repair` plans and stages
//! a repaired copy; the copy must verify clean. Nothing may panic, and every finding must name a
//! byte offset inside the file it names.
//!
//! Input: `[u16 commitlog len][commitlog bytes][u16 cq len][cq bytes][u16 index len][index bytes]
//! [consumerOffset.json bytes]` (lengths little-endian, cut to what is there).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rmqstore::engine::check::repair::{apply, fixed_geometry, plan};
use rmqstore::engine::check::verify::{verify, VerifyOptions};
use rmqstore::engine::Store;
use rmqstore::format::geometry::{GeometryInputs, GeometryOverrides};

const FILE: usize = 32 << 10;

fn take<'a>(b: &mut &'a [u8]) -> &'a [u8] {
    let n = match b {
        [x, y, ..] => u16::from_le_bytes([*x, *y]) as usize,
        _ => 0,
    };
    let rest = b.get(2..).unwrap_or_default();
    let (head, tail) = rest.split_at(n.min(rest.len()));
    *b = tail;
    head
}

fn write(p: &Path, bytes: &[u8], len: usize) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
    if len > bytes.len() {
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(len as u64)
            .unwrap();
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = data;
    let cl = take(&mut b);
    let cq = take(&mut b);
    let ix = take(&mut b);
    let offsets = b;
    let base = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let root = base.path().join("store");
    let (a, rest) = cl.split_at(cl.len().min(FILE));
    write(&root.join("commitlog/00000000000000000000"), a, FILE);
    if !rest.is_empty() {
        write(&root.join("commitlog/00000000000000032768"), rest, FILE);
    }
    write(
        &root.join("consumequeue/TopicA/0/00000000000000000000"),
        cq,
        1000,
    );
    if !ix.is_empty() {
        write(&root.join("index/20261130000000000"), ix, ix.len());
    }
    write(&root.join("config/consumerOffset.json"), offsets, offsets.len());
    let geometry = GeometryInputs {
        flags: GeometryOverrides {
            commitlog_file_size: Some(FILE as u64),
            cq_file_units: Some(50),
            index_slots: Some(8),
            index_entries: Some(16),
            delay_levels: None,
        },
        ..Default::default()
    };
    let store = Store::open(&root, &geometry).unwrap();
    let report = verify(&store, &VerifyOptions::default(), None).unwrap();
    for f in &report.findings {
        if let Ok(m) = std::fs::metadata(&f.file) {
            if m.is_file() && m.len() > 0 {
                assert!(f.offset <= m.len(), "{f:?} is past the end of its file");
            }
        }
    }
    let p = plan(&store).unwrap();
    let stage = base.path().join("repaired");
    apply(&store, &p, &stage, "repair-fuzz").unwrap();
    let staged = Store::open(&stage, &fixed_geometry(&store)).unwrap();
    let again = verify(&staged, &VerifyOptions::default(), None).unwrap();
    assert!(
        again.summary.healthy,
        "the repaired store does not verify: {:#?}\nfindings before: {:#?}",
        again.findings,
        report.findings
    );
});
