//! Geometry inference, the structural checks of one file and of a sequence, and corrupt input:
//! errors that name their offset, chains that loop, and never a panic.

use proptest::prelude::*;

use super::*;

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn infer_oracle_files() {
    for name in ["basic-4.9", "basic-5.x", "crashed-4.9"] {
        let Some(dir) = oracle_dir(name) else {
            continue;
        };
        for (fname, bytes) in oracle_index_files(&dir) {
            let inf = infer_geometry(&bytes);
            assert_eq!(
                inf.result,
                InferResult::Unique(IndexGeometry::new(1000, 4000)),
                "{name}/{fname}: {}",
                inf.reason
            );
            eprintln!("{name}/{fname}: {}", inf.reason);
        }
    }
}

#[test]
fn infer_built_geometries() {
    let recs = synthetic(3000);
    for (s, e) in [
        (7, 50),
        (5000, 20000),
        (300, 300),
        (1, 200),
        (3, 2000),
        (997, 13),
        (64, 4096),
        (4096, 64),
    ] {
        let g = IndexGeometry::new(s, e);
        let files = build_files(g, &recs);
        let mut unique = 0;
        for (i, f) in files.iter().enumerate() {
            let bytes = f.file.to_bytes();
            let inf = infer_geometry(&bytes);
            assert_eq!(check_geometry(&bytes, g), Ok(()), "{g} file {i}");
            assert!(
                check_file(&bytes, g).is_empty(),
                "{g} file {i}: {:?}",
                check_file(&bytes, g)
            );
            match &inf.result {
                InferResult::Unique(found) => {
                    assert_eq!(*found, g, "{g} file {i}: {}", inf.reason);
                    unique += 1;
                }
                InferResult::Ambiguous { candidates, total } => {
                    // Only tiny files with one or two entries can be ambiguous.
                    assert!(f.file.entries().len() <= 2, "{g} file {i}: {}", inf.reason);
                    assert!(*total as usize >= candidates.len());
                }
                InferResult::None => panic!("{g} file {i}: {}", inf.reason),
            }
        }
        assert!(unique >= 1, "{g}");
    }
}

#[test]
fn infer_default_geometry_file() {
    // A 420 MB file of the broker's default geometry with a few thousand entries, written sparse
    // and read through a map: inferred uniquely, quickly.
    let g = IndexGeometry::DEFAULT;
    let files = build_files(g, &synthetic(4000));
    assert_eq!(files.len(), 1);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("20260101000000000");
    files[0].file.write_to(&p).unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 420_000_040);
    let map = crate::format::Mapped::open(&p).unwrap();
    let t = std::time::Instant::now();
    let inf = infer_geometry(&map);
    let took = t.elapsed();
    assert_eq!(inf.result, InferResult::Unique(g), "{}", inf.reason);
    let t = std::time::Instant::now();
    assert_eq!(check_file(&map, g), vec![]);
    eprintln!(
        "default geometry: inferred in {took:?}, checked in {:?}: {}",
        t.elapsed(),
        inf.reason
    );
    let f = IndexFile::open(&p, g).unwrap();
    let r = query_offsets([&f], "TopicA", "UNIQ00000000", 32, 0, i64::MAX);
    assert_eq!(r.phy_offsets, vec![0]);
}

#[test]
fn infer_empty_file_is_ambiguous() {
    let g = IndexGeometry::new(1000, 4000);
    let empty = IndexFileBuilder::new(g, 500, 1_700_000_000_000)
        .unwrap()
        .to_bytes();
    let inf = infer_geometry(&empty);
    match &inf.result {
        InferResult::Ambiguous { candidates, total } => {
            // 84000 = 4s + 20e: s = 5, 10, ..., 20995 -> 4199 pairs.
            assert_eq!(*total, 4199, "{}", inf.reason);
            assert_eq!(candidates.len(), infer::MAX_LISTED);
            assert_eq!(candidates[0], IndexGeometry::new(5, 4199));
        }
        other => panic!("{other:?}"),
    }
    assert!(check_geometry(&empty, g).is_ok());
    assert!(check_geometry(&empty, IndexGeometry::new(5, 4199)).is_ok());
    let other = IndexGeometry::new(6, 4199);
    assert_eq!(
        check_geometry(&empty, other),
        Err(GeometryMismatch::Size {
            len: empty.len() as u64,
            geometry: other,
            expected: other.file_size(),
        })
    );
    let mut used = empty.clone();
    let e0 = g.entry_pos(0) as usize;
    used[e0 + 3] = 1;
    let e = check_geometry(&used, g).unwrap_err();
    assert_eq!(e, GeometryMismatch::EntryZeroUsed { at: e0 + 3 });
    assert_eq!(
        e.to_string(),
        format!("entry 0 (never used) has a non-zero byte {}", e0 + 3)
    );
    // The default size: its empty file cannot tell (5000000, 20000000) from millions of others.
    let default_empty_len = IndexGeometry::DEFAULT.file_size() as usize;
    let mut v = vec![0u8; default_empty_len];
    v[..40].copy_from_slice(&IndexHeader::default().to_bytes());
    let inf = infer_geometry(&v);
    assert!(matches!(inf.result, InferResult::Ambiguous { total, .. } if total > 1_000_000));
    assert!(inf.reason.contains("default"), "{}", inf.reason);
    // A size no geometry makes, and non-zero bytes in a file without entries.
    assert_eq!(
        infer_geometry(&empty[..empty.len() - 2]).result,
        InferResult::None
    );
    let mut dirty = empty.clone();
    dirty[100] = 1;
    assert_eq!(infer_geometry(&dirty).result, InferResult::None);
    assert_eq!(infer_geometry(&[0u8; 10]).result, InferResult::None);
}

// ---------------------------------------------------------------- checks

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn check_oracle_files_clean() {
    for name in ["basic-4.9", "basic-5.x", "crashed-4.9"] {
        let Some(dir) = oracle_dir(name) else {
            continue;
        };
        let g = oracle_geometry(&dir);
        let files = oracle_index_files(&dir);
        for (fname, bytes) in &files {
            assert_eq!(check_file(bytes, g), vec![], "{name}/{fname}");
        }
        let seq: Vec<(&str, IndexHeader)> = files
            .iter()
            .map(|(n, b)| (n.as_str(), IndexHeader::from_bytes(b).unwrap()))
            .collect();
        assert_eq!(check_sequence(&seq), vec![], "{name}");
    }
}

#[test]
fn check_finds_corruption() {
    let g = IndexGeometry::new(7, 500);
    let files = build_files(g, &synthetic(100));
    assert_eq!(files.len(), 1);
    let good = files[0].file.to_bytes();
    assert!(check_file(&good, g).is_empty());
    let f = IndexFile::new(good.as_slice(), g).unwrap();
    let c = f.header().index_count as u32;

    // A slot pointing past indexCount.
    let mut b = good.clone();
    let p = g.slot_pos(3) as usize;
    b[p..p + 4].copy_from_slice(&(c as i32 + 5).to_be_bytes());
    assert!(check_file(&b, g)
        .iter()
        .any(|x| x.offset == p as u64 && x.what.contains("slot 3")));
    // A prev pointing forward.
    let mut b = good.clone();
    let p = g.entry_pos(2) as usize + 16;
    b[p..p + 4].copy_from_slice(&7i32.to_be_bytes());
    assert!(check_file(&b, g).iter().any(|x| x.offset == p as u64));
    // A hash moved to another bucket.
    let mut b = good.clone();
    let p = g.entry_pos(5) as usize;
    let h = i32::from_be_bytes(b[p..p + 4].try_into().unwrap());
    b[p..p + 4].copy_from_slice(&(h ^ 1).to_be_bytes());
    assert!(!check_file(&b, g).is_empty());
    // Garbage after the last entry.
    let mut b = good.clone();
    let p = g.entry_pos(c) as usize + 3;
    b[p] = 9;
    assert!(check_file(&b, g).iter().any(|x| x.offset == p as u64));
    // Header disagreeing with its entries.
    let mut b = good.clone();
    b[24..32].copy_from_slice(&1i64.to_be_bytes());
    assert!(check_file(&b, g).iter().any(|x| x.offset == 24));
    b[32..36].copy_from_slice(&99i32.to_be_bytes());
    assert!(check_file(&b, g).iter().any(|x| x.offset == 32));
    // indexCount beyond the file, and a truncated file.
    let mut b = good.clone();
    b[36..40].copy_from_slice(&1000i32.to_be_bytes());
    assert!(!check_file(&b, g).is_empty());
    assert!(IndexFile::new(b.as_slice(), g).is_ok());
    assert!(!check_file(&good[..good.len() - 1], g).is_empty());
    assert!(!check_file(&good[..30], g).is_empty());
    // Sequence: bad name, overlapping offsets.
    let files = build_files(IndexGeometry::new(7, 50), &synthetic(100));
    let h1 = IndexHeader::from_bytes(&files[0].file.to_bytes()).unwrap();
    let h2 = IndexHeader::from_bytes(&files[1].file.to_bytes()).unwrap();
    assert!(check_sequence(&[("20260101000000000", h1), ("20260101000000001", h2)]).is_empty());
    assert_eq!(
        check_sequence(&[("20260101000000001", h2), ("20260101000000002", h1)]).len(),
        2
    );
    assert_eq!(check_sequence(&[("index.bak", h1)]).len(), 1);
}

#[test]
fn fast_chain_check_agrees_with_the_entry_by_entry_one() {
    let g = IndexGeometry::new(7, 500);
    let good = build_files(g, &synthetic(300))[0].file.to_bytes();
    let count = IndexHeader::from_bytes(&good).unwrap().index_count.max(1);
    let used = count as u32;
    let slow = |b: &[u8]| {
        let mut sink = check::Sink::new();
        let n = check::check_chains(b, g, used, count, &mut sink);
        (n, sink.finish())
    };
    let (slots, problems) = slow(&good);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(slots > 0);
    assert_eq!(check::chains_as_written(&good, g, used), Some(slots));
    // Flip bits in the slot table and the entries: the one-pass check accepts exactly the files
    // the entry-by-entry check finds nothing wrong with, and counts the same slots.
    let (from, to) = (g.slot_pos(0) as usize, g.entry_pos(used) as usize);
    let mut x: u64 = 0x9E37_79B9;
    let mut rejected = 0;
    for _ in 0..3000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let at = from + (x >> 33) as usize % (to - from);
        let mut b = good.clone();
        b[at] ^= 1 << ((x >> 20) % 8);
        let (n, problems) = slow(&b);
        match check::chains_as_written(&b, g, used) {
            Some(fast) => {
                assert!(problems.is_empty(), "byte {at}: {problems:?}");
                assert_eq!(fast, n, "byte {at}");
            }
            None => {
                assert!(
                    !problems.is_empty(),
                    "byte {at}: rejected by the one-pass check only"
                );
                rejected += 1;
            }
        }
    }
    assert!(rejected > 100, "{rejected}");
}

#[test]
fn open_errors_name_offsets() {
    let g = IndexGeometry::new(7, 50);
    let good = build_files(g, &synthetic(20))[0].file.to_bytes();
    let e = IndexFile::new(&good[..100], g).unwrap_err();
    assert_eq!(e.offset, 100);
    assert!(e.to_string().contains("1068 bytes"), "{e}");
    let e = IndexFile::new(good.as_slice(), IndexGeometry::new(0, 270)).unwrap_err();
    assert!(matches!(e.kind, crate::format::ErrorKind::Invalid { .. }));
    let f = IndexFile::new(good.as_slice(), g).unwrap();
    assert!(f.slot(7).is_err());
    assert_eq!(f.entry(50).unwrap_err().offset, g.entry_pos(50));
    // A count beyond the capacity: iteration ends with an error, lookups stop quietly.
    let mut b = good.clone();
    b[36..40].copy_from_slice(&1000i32.to_be_bytes());
    let f = IndexFile::new(b.as_slice(), g).unwrap();
    let items: Vec<_> = f.entries().collect();
    assert_eq!(items.len(), 50);
    assert!(items.last().unwrap().is_err());
    let _ = f.select_phy_offsets("TopicA#hot-key-1", 64, 0, i64::MAX);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("20260101000000000");
    std::fs::write(&p, &good[..500]).unwrap();
    let err = IndexFile::open(&p, g).unwrap_err();
    assert!(err.to_string().contains("20260101000000000"), "{err}");
}

#[test]
fn cyclic_chain_terminates() {
    // Two entries pointing at each other: Java would spin forever when neither matches.
    let g = IndexGeometry::new(1, 10);
    let mut b = IndexFileBuilder::new(g, 0, 0).unwrap();
    b.put_key("x#1", 10, 1000);
    b.put_key("x#2", 20, 1000);
    let mut bytes = b.to_bytes();
    let p = g.entry_pos(1) as usize + 16;
    bytes[p..p + 4].copy_from_slice(&2i32.to_be_bytes());
    let f = IndexFile::new(bytes, g).unwrap();
    assert!(f
        .select_phy_offsets("x#nothing", 64, 0, i64::MAX)
        .is_empty());
    // When an entry of the cycle matches, Java collects it again until maxNum.
    let got = f.select_phy_offsets("x#1", 5, 0, i64::MAX);
    assert_eq!(got, vec![10; 5]);
}

fn exercise(bytes: &[u8], g: IndexGeometry) {
    let _ = IndexHeader::from_bytes(bytes);
    let _ = infer_geometry(bytes);
    let _ = check_file(bytes, g);
    let _ = check_geometry(bytes, g);
    if let Ok(f) = IndexFile::new(bytes, g) {
        for item in f.entries().take(10_000) {
            let _ = item;
        }
        for i in 0..g.slots.min(50) {
            let _ = f.slot(i);
        }
        for key in ["TopicA#hot-key-0", "TopicB#key-1", "x#y", ""] {
            let _ = f.select_phy_offsets(key, 64, 0, i64::MAX);
            let _ = f.select_phy_offsets(key, 3, 1_796_073_060_000, 1_796_073_070_000);
        }
        let files = [f];
        let _ = query_offsets(files.iter(), "TopicA", "hot-key-1", 32, 0, i64::MAX);
        if let Ok(b) = IndexFileBuilder::from_file(&files[0]) {
            let mut b = b;
            let _ = b.put_key("TopicA#k", 1, 2);
        }
    }
}

fn oracle_sample() -> Option<(Vec<u8>, IndexGeometry)> {
    let dir = oracle_dir("basic-4.9")?;
    let g = oracle_geometry(&dir);
    Some((oracle_index_files(&dir).swap_remove(2).1, g))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(s in 1u32..20, e in 1u32..40, seed in any::<u64>(), dense in any::<bool>()) {
        let g = IndexGeometry::new(s, e);
        let n = g.file_size() as usize;
        // A small PRNG so that shrinking stays cheap; `dense` makes small ints (plausible slots).
        let mut x = seed | 1;
        let bytes: Vec<u8> = (0..n).map(|_| {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            if dense { if x % 4 == 0 { (x >> 8) as u8 % 8 } else { 0 } } else { (x >> 8) as u8 }
        }).collect();
        exercise(&bytes, g);
        exercise(&bytes[..n / 2], g);
    }

    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn mutated_oracle_never_panics(flips in proptest::collection::vec((0usize..84040, any::<u8>()), 1..20), cut in 0usize..84100) {
        let Some((mut bytes, g)) = oracle_sample() else { return Ok(()) };
        for (p, v) in flips {
            if let Some(b) = bytes.get_mut(p) { *b ^= v | 1; }
        }
        exercise(&bytes, g);
        let cut = cut.min(bytes.len());
        exercise(&bytes[..cut], g);
    }

    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn mutated_header_never_panics(vals in proptest::collection::vec(any::<i32>(), 10)) {
        let Some((mut bytes, g)) = oracle_sample() else { return Ok(()) };
        for (i, v) in vals.iter().enumerate() {
            bytes[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
        }
        exercise(&bytes, g);
    }

    #[test]
    fn build_then_read_agrees(n in 1usize..300, s in 1u32..40, e in 2u32..60) {
        let g = IndexGeometry::new(s, e);
        let recs = synthetic(n);
        let files = build_files(g, &recs);
        let opened: Vec<_> = files.iter().map(|f| IndexFile::new(f.file.to_bytes(), g).unwrap()).collect();
        for f in &opened {
            prop_assert!(check_file(f.bytes(), g).is_empty());
        }
        // Every indexed key of the newest 3 records is found (within the 64 cap).
        for m in recs.iter().rev().take(3).filter(|m| !IndexRecord::is_rollback_sys_flag(m.sys_flag)) {
            if let Some(u) = &m.uniq {
                let r = query_offsets(opened.iter().rev(), &m.topic, u, 64, 0, i64::MAX);
                prop_assert!(r.phy_offsets.contains(&m.offset));
            }
        }
    }
}
