//! Reading the whole commitlog fast: files in parallel (a record never spans two files), each
//! walked front to back over its read-only map, results folded per file and merged in offset order.

use rayon::prelude::*;

use crate::engine::store::Store;
use crate::format::commitlog::MessageRef;
use crate::format::commitlog::{RecordIter, Segment, SegmentEnd};
use crate::format::error::{Error, Result};

/// What the walk of one file found, besides what the visitor folded.
#[derive(Debug)]
pub struct SegmentScan<T> {
    pub segment: Segment,
    pub records: u64,
    pub bytes: u64,
    pub end: SegmentEnd,
    /// The error that stopped the walk, if any.
    pub error: Option<Error>,
    pub value: T,
}

/// Walk every commitlog file of `store` in parallel. For each file, `init` makes an accumulator
/// and `visit` folds each record into it. Results come back in offset order.
pub fn scan_segments<T, I, V>(
    store: &Store,
    check_crc: bool,
    init: I,
    visit: V,
) -> Result<Vec<SegmentScan<T>>>
where
    T: Send,
    I: Fn() -> T + Sync,
    V: Fn(&mut T, &MessageRef<'_>) + Sync,
{
    store
        .commitlog
        .segments
        .par_iter()
        .map(|seg| {
            let map = seg.map()?;
            let mut value = init();
            let mut it = RecordIter::new(&map, seg, check_crc);
            let (mut records, mut bytes, mut error) = (0u64, 0u64, None);
            for r in it.by_ref() {
                match r {
                    Ok(m) => {
                        records += 1;
                        bytes += m.raw.len() as u64;
                        visit(&mut value, &m);
                    }
                    Err(e) => error = Some(e),
                }
            }
            Ok(SegmentScan {
                segment: seg.clone(),
                records,
                bytes,
                end: it.end().clone(),
                error,
                value,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::geometry::GeometryInputs;

    #[test]
    fn scan_counts_every_record_of_the_fixture() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/store-4.9");
        let store = Store::open(&root, &GeometryInputs::default()).unwrap();
        let scans = scan_segments(&store, true, || 0u64, |n, m| *n += m.body.len() as u64).unwrap();
        assert_eq!(scans.len(), store.commitlog.segments.len());
        assert!(scans.iter().all(|s| s.error.is_none()));
        // the same records as a plain walk of each file
        let mut walked = 0u64;
        for seg in &store.commitlog.segments {
            let map = seg.map().unwrap();
            for r in crate::format::commitlog::RecordIter::new(&map, seg, true) {
                r.unwrap();
                walked += 1;
            }
        }
        assert!(walked > 1000);
        assert_eq!(scans.iter().map(|s| s.records).sum::<u64>(), walked);
        // every file but the last ends with a blank record, the last with zeros
        let (last, rest) = scans.split_last().unwrap();
        assert!(rest
            .iter()
            .all(|s| matches!(s.end, SegmentEnd::Blank { .. })));
        assert!(matches!(last.end, SegmentEnd::EndOfData { .. }));
        assert!(scans
            .windows(2)
            .all(|w| w[0].segment.start < w[1].segment.start));
    }
}
