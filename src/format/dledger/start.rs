//! Where `DLedgerMmapFileStore.recover` starts its walk over the data files: at the
//! third-to-last file (the first when there are fewer than three), or, when that file's first
//! entry is not one it trusts, at the nearest earlier file whose first entry is. A first entry is
//! trusted when its magic is a known one, its size holds more than the 44-byte header, its pos
//! is the file's start, its body size plus 48 is its size, and the index unit of its index
//! agrees with it (magic, pos, size, index, term). When no file from there back to the first
//! passes, the walk starts at the first file.

use std::path::PathBuf;

use super::entry::EntryHeader;
use super::walk::IndexReader;
use super::{DledgerLayout, BLANK_MAGIC, HEADER_SIZE, MAGIC};
use crate::format::error::Result;
use crate::format::mapped::Mapped;

/// `DLedgerEntry.HEADER_SIZE`: the header without the body size field.
const RECOVERY_HEADER_SIZE: i32 = 44;

/// The data file the recovery walk starts at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryStart {
    /// Data file number.
    pub file: usize,
    /// The trusted first entry's index; `None` when no file passed (the walk starts at the first
    /// file anyway).
    pub first_index: Option<i64>,
    /// Files tried before it and passed over (from the third-to-last backwards), and why.
    pub passed_over: Vec<(PathBuf, String)>,
}

/// Find where the recovery walk of `layout` starts (`None` without data files).
pub fn recovery_start(layout: &DledgerLayout) -> Result<Option<RecoveryStart>> {
    let files = &layout.data.files;
    if files.is_empty() {
        return Ok(None);
    }
    let mut index = IndexReader::new(layout);
    let mut passed_over = Vec::new();
    for n in (0..=files.len().saturating_sub(3)).rev() {
        let f = &files[n];
        let map = Mapped::open(&f.path)?;
        let header = EntryHeader::from_bytes(map.get(..HEADER_SIZE).unwrap_or_default());
        map.release(0, map.len());
        let why = match header {
            None => Some("the file is shorter than an entry header".to_string()),
            Some(h) => match untrusted(&h, f.start) {
                Some(why) => Some(why),
                None => match index.unit(h.index) {
                    Ok(Some(u)) => u.disagreement(&h).map(|(what, unit, entry)| {
                        format!("its index unit's {what} is {unit}, the entry's is {entry}")
                    }),
                    Ok(None) => Some(format!("no index file holds the unit of entry {}", h.index)),
                    Err(e) => Some(format!("its index unit does not read: {e}")),
                },
            },
        };
        match why {
            None => {
                return Ok(Some(RecoveryStart {
                    file: n,
                    first_index: header.map(|h| h.index),
                    passed_over,
                }))
            }
            Some(why) => passed_over.push((f.path.clone(), format!("its first entry: {why}"))),
        }
    }
    Ok(Some(RecoveryStart {
        file: 0,
        first_index: None,
        passed_over,
    }))
}

/// Why the recovery does not trust `h` as the first entry of a file starting at `start`.
fn untrusted(h: &EntryHeader, start: u64) -> Option<String> {
    if h.magic == BLANK_MAGIC || h.magic < MAGIC {
        return Some(format!("magic {}, not an entry's", h.magic));
    }
    if h.size <= RECOVERY_HEADER_SIZE {
        return Some(format!("size {} does not hold a header and a body", h.size));
    }
    if h.pos < 0 || h.pos as u64 != start {
        return Some(format!("pos {} is not the file's start {start}", h.pos));
    }
    if i64::from(h.body_size) + HEADER_SIZE as i64 != i64::from(h.size) {
        return Some(format!(
            "body size {} + {HEADER_SIZE} is not its size {}",
            h.body_size, h.size
        ));
    }
    None
}
