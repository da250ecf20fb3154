//! Commitlog files cut into pieces that workers walk in parallel: where each piece starts (the
//! record recovery would resynchronise to after its nominal start, so every worker finds the same
//! place for the same bytes), and each file's map shared while its pieces are walked.
//!
//! The walks of the pieces of a file join into the walk of the whole file when each piece but the
//! last ends cleanly where the next begins ([`FileWalk::ends_cleanly_at`]); a caller walks the
//! rest of the file again in one go from the first piece that does not.
//!
//! [`FileWalk::ends_cleanly_at`]: super::recovery::FileWalk::ends_cleanly_at

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::recovery;
use crate::format::commitlog::Segment;
use crate::format::mapped::Mapped;

/// How far past a piece's nominal start the record it starts with is looked for (more than the
/// largest record a broker accepts).
const PIECE_SEARCH: usize = 8 << 20;

/// Each commitlog file's map while pieces of it are walked: the first piece maps the file and
/// the last one to finish drops the map, so a file is mapped and unmapped once.
pub struct PieceMaps {
    maps: Vec<Mutex<Option<Arc<Mapped>>>>,
    left: Vec<AtomicUsize>,
}

impl PieceMaps {
    pub fn new(segs: &[Segment], piece: u64) -> Self {
        PieceMaps {
            maps: segs.iter().map(|_| Mutex::new(None)).collect(),
            left: segs
                .iter()
                .enumerate()
                .map(|(i, s)| AtomicUsize::new(piece_count(s.len, file_piece_size(piece, segs, i))))
                .collect(),
        }
    }

    /// The map of file `i` (`seg`), made by the first caller.
    pub fn get(&self, i: usize, seg: &Segment) -> Option<Arc<Mapped>> {
        let mut slot = self.maps.get(i)?.lock().ok()?;
        if slot.is_none() {
            *slot = Some(Arc::new(seg.map().ok()?));
        }
        slot.clone()
    }

    /// A piece of file `i` is done: the last one lets the map go.
    pub fn done(&self, i: usize) {
        let last = self
            .left
            .get(i)
            .is_some_and(|n| n.fetch_sub(1, Ordering::AcqRel) == 1);
        if last {
            if let Some(Ok(mut slot)) = self.maps.get(i).map(|m| m.lock()) {
                *slot = None;
            }
        }
    }
}

/// The piece size for commitlog file `i`: a quarter of `piece` for the last file (where the
/// data usually ends, part way in), so that the workers run out of pieces at about the same
/// time.
pub fn file_piece_size(piece: u64, segs: &[Segment], i: usize) -> u64 {
    let piece = piece.max(1);
    if i + 1 == segs.len() {
        (piece / 4).max(1 << 20).min(piece)
    } else {
        piece
    }
}

/// How many pieces a file `len` bytes long is walked in.
pub fn piece_count(len: u64, piece: u64) -> usize {
    usize::try_from(len.div_ceil(piece.max(1)))
        .unwrap_or(usize::MAX)
        .max(1)
}

/// Where the piece nominally starting at `nominal` starts: the first record at or after it (as
/// recovery resynchronises), unless the page there is zero (the end of the data, or a hole the
/// walk will report).
fn piece_start(buf: &[u8], nominal: u64, seg: &Segment) -> Option<usize> {
    let nominal = usize::try_from(nominal).ok()?;
    let page = buf.get(nominal..nominal.checked_add(4096)?)?;
    if page.iter().all(|&b| b == 0) {
        return None;
    }
    let window = buf.get(..nominal.saturating_add(PIECE_SEARCH).min(buf.len()))?;
    recovery::resync(window, nominal, seg).filter(|&p| p > 0)
}

/// The walk positions piece `j` of a file (`buf`, the bytes of `seg`, cut in pieces of
/// `piece_size`) is walked from and to; `None` when no record starts near its
/// nominal start, so the piece before covers its bytes. The pieces that are `Some` cover the
/// file without gaps or overlaps.
pub fn piece_span(buf: &[u8], seg: &Segment, piece_size: u64, j: usize) -> Option<(usize, usize)> {
    let nominal = |j: usize| (j as u64).saturating_mul(piece_size.max(1));
    let from = match j {
        0 => 0,
        j => piece_start(buf, nominal(j), seg)?,
    };
    let to = (j + 1..piece_count(buf.len() as u64, piece_size))
        .find_map(|k| piece_start(buf, nominal(k), seg))
        .unwrap_or(buf.len());
    Some((from, to))
}
