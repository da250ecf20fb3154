//! Arbitrary bytes as an index file. The first two bytes pick a small geometry (1-16 slots,
//! 1-40 entries), the rest is the file, cut or zero-padded to that geometry's size. Geometry
//! inference runs on the raw bytes and on the padded file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmqstore::format::indexfile::{
    build_key, check_file, check_geometry, index_key_hash, infer_geometry, query_offsets,
    IndexFile, IndexFileBuilder, IndexGeometry, IndexHeader, InferResult, INDEX_HEADER_SIZE,
};

/// Every geometry the inference lists must pass the detailed check.
fn infer_consistent(bytes: &[u8]) -> InferResult {
    let inf = infer_geometry(bytes);
    let _ = inf.reason.len();
    match &inf.result {
        InferResult::Unique(g) => {
            assert_eq!(g.file_size(), bytes.len() as u64);
            if let Err(why) = check_geometry(bytes, *g) {
                panic!("inferred {g} fails the check: {why} ({})", inf.reason);
            }
        }
        InferResult::Ambiguous { candidates, total } => {
            assert!(*total >= 2 && !candidates.is_empty());
            for g in candidates {
                assert_eq!(g.file_size(), bytes.len() as u64);
                if let Err(why) = check_geometry(bytes, *g) {
                    panic!("candidate {g} fails the check: {why} ({})", inf.reason);
                }
            }
        }
        InferResult::None => {}
    }
    inf.result
}

fuzz_target!(|data: &[u8]| {
    infer_consistent(data);
    let (Some(&a), Some(&b)) = (data.first(), data.get(1)) else {
        return;
    };
    let g = IndexGeometry::new(1 + a as u32 % 16, 1 + b as u32 % 40);
    let raw = &data[2..];
    if raw.len() as u64 != g.file_size() {
        let e = IndexFile::new(raw, g).unwrap_err();
        assert_eq!(e.offset, (raw.len() as u64).min(g.file_size()));
    }
    let mut bytes = raw.to_vec();
    bytes.resize(g.file_size() as usize, 0);
    let f = IndexFile::new(&bytes[..], g).expect("the size fits the geometry");
    assert_eq!(*f.header(), IndexHeader::from_bytes(&bytes).unwrap());
    assert_eq!(f.header().to_bytes()[..], bytes[..INDEX_HEADER_SIZE]);

    for s in 0..g.slots {
        f.slot(s).unwrap();
    }
    assert!(f.slot(g.slots).is_err());
    for n in 0..g.entries {
        f.entry(n).unwrap();
    }
    assert!(f.entry(g.entries).is_err());
    let mut seen = 0u32;
    for e in f.entries() {
        match e {
            Ok((n, _)) => {
                seen += 1;
                assert_eq!(n, seen);
            }
            Err(e) => assert_eq!(e.offset, g.entry_pos(g.entries)),
        }
    }
    assert!(seen < g.entries);

    // Lookups: fixed keys, and one made of input bytes; time bounds from the input.
    let tail = String::from_utf8_lossy(&raw[raw.len().saturating_sub(6)..]).into_owned();
    let begin = f.header().begin_timestamp;
    let end = f.header().end_timestamp;
    for key in ["a", "b", "UNIQ", tail.as_str()] {
        for (lo, hi) in [
            (0, i64::MAX),
            (i64::MIN, i64::MAX),
            (begin, end),
            (end, begin),
        ] {
            let got = f.select_phy_offsets(&build_key("T", key), 32, lo, hi);
            assert!(got.len() <= 32);
            let r = query_offsets([&f, &f], "T", key, 64, lo, hi);
            assert!(r.phy_offsets.len() <= 64);
        }
    }

    let problems = check_file(&bytes, g);
    let fits = check_geometry(&bytes, g);
    if fits.is_ok() {
        // The inference does not miss a geometry that passes the check.
        match infer_consistent(&bytes) {
            InferResult::Unique(u) => assert_eq!(u, g),
            InferResult::Ambiguous { candidates, total } => {
                assert!(candidates.contains(&g) || total as usize > candidates.len())
            }
            InferResult::None => panic!("{g} fits but nothing was inferred"),
        }
    }
    let _ = problems;

    // Continue writing the file as the broker would.
    if let Ok(mut builder) = IndexFileBuilder::from_file(&f) {
        if fits.is_ok() {
            assert_eq!(
                builder.to_bytes(),
                bytes,
                "a clean file round-trips through the builder"
            );
        }
        let key = build_key("T", &tail);
        let put = builder.put_key(&key, 12345, begin.saturating_add(5000));
        let out = builder.to_bytes();
        let f2 = IndexFile::new(&out[..], g).expect("the builder writes the geometry's size");
        if put {
            assert!(f2
                .select_phy_offsets(&key, 64, i64::MIN, i64::MAX)
                .contains(&12345));
            let _ = index_key_hash(&key);
        }
    }
});
