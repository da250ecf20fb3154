//! The rebuild's walk in pieces held to the walk in one go, and its interrupt.

use super::*;

/// What a walk handed on, in order: each unit with its queue, each index record with its
/// key hashes, and the counts.
type Flat = (
    Vec<(String, i32, i64, CqUnit)>,
    Vec<(HashedRecord, Vec<i32>)>,
    (u64, u64, u64),
);

fn flatten(batches: &[Batch]) -> Flat {
    let mut f: Flat = Default::default();
    for b in batches {
        for &(q, qo, unit) in &b.units {
            let (t, id) = b.queues[q as usize].clone();
            f.0.push((t, id, qo, unit));
        }
        for (rec, keys) in &b.index.records {
            f.1.push((*rec, b.index.hashes[keys.clone()].to_vec()));
        }
        f.2 .0 += b.records;
        f.2 .1 += b.bytes;
        f.2 .2 += b.refused;
    }
    f
}

/// The plain walk: the whole file in one go, every record into one batch.
fn walk_in_one(buf: &[u8], seg: &Segment, opts: &RebuildOptions) -> (FileWalk, Flat) {
    let mut b = Batch::default();
    let o = WalkOptions::default();
    let walk = recovery::walk_file(buf, seg, &o, |m, place| {
        if place == RecordPlace::Chain {
            b.add(m, opts, true)
        }
    });
    (walk, flatten(&[b]))
}

#[test]
fn an_interrupt_stops_the_rebuild_and_says_so() {
    let store = crate::engine::store::test_fixture("store-4.9");
    let out = tempfile::tempdir().unwrap();
    let opts = RebuildOptions {
        interrupt: Some(Arc::new(AtomicBool::new(true))),
        ..RebuildOptions::for_geometry(store.geometry.clone())
    };
    match rebuild(&store, out.path(), &opts, &|_| {}) {
        Err(Error::Interrupted { path, what }) => {
            assert_eq!(what, "rebuild");
            assert_eq!(path, store.commitlog.segments[0].path);
        }
        other => panic!("{other:?}"),
    }
    let opts = RebuildOptions {
        interrupt: Some(Arc::new(AtomicBool::new(false))),
        ..opts
    };
    let done = tempfile::tempdir().unwrap();
    assert!(rebuild(&store, done.path(), &opts, &|_| {}).is_ok());
}

#[test]
fn a_file_walked_in_pieces_is_walked_as_in_one_go() {
    let store = crate::engine::store::test_fixture("store-4.9");
    let opts = RebuildOptions::for_geometry(store.geometry.clone());
    let src = Source::whole(&store);
    let mut files = 0;
    for seg in &store.commitlog.segments {
        let map = seg.map().unwrap();
        let len = map.len();
        let mut variants = vec![map.to_vec(), map[..len / 2 + 13].to_vec()];
        // a flipped byte at a third, at half (a record header or body) and on a piece
        // boundary, each walked again from the piece it is in
        for at in [len / 3, len / 2 + 101, 8192] {
            let mut d = map.to_vec();
            d[at] ^= 0x40;
            variants.push(d);
        }
        for buf in &variants {
            let (want_walk, want) = walk_in_one(buf, seg, &opts);
            let held = crate::format::mapped::Mapped::from_vec(&seg.path, buf.clone());
            for piece in [4096 * 2, 4096 * 3 + 17, 1 << 20] {
                let mut got = Vec::new();
                let prepare =
                    |m: &MessageRef<'_>, b: &mut Batch| b.add_kept(&src, seg, m, &opts, true);
                let walk = walk_in_pieces(&held, buf, seg, piece, &prepare, &mut |b| {
                    got.push(b);
                    Ok(())
                })
                .unwrap();
                assert_eq!(
                    serde_json::to_value(&walk).unwrap(),
                    serde_json::to_value(&want_walk).unwrap(),
                    "{} in pieces of {piece}",
                    seg.path.display()
                );
                assert_eq!(
                    flatten(&got),
                    want,
                    "{} in pieces of {piece}",
                    seg.path.display()
                );
            }
        }
        files += 1;
    }
    assert!(files > 3);
}
