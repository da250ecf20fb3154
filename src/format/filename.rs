//! Names of mapped files: a 20-digit zero-padded decimal start offset (`UtilAll.offset2FileName`).

use std::path::{Path, PathBuf};

use super::error::{Error, Result};

/// `UtilAll.offset2FileName`: the start offset as 20 zero-padded decimal digits.
pub fn offset_to_name(offset: u64) -> String {
    format!("{offset:020}")
}

/// The start offset a mapped file's name stands for, if the name is 20 decimal digits within a
/// Java long (the broker's `Long.parseLong` rejects anything larger).
pub fn name_to_offset(name: &str) -> Option<u64> {
    if name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()) {
        name.parse::<i64>().ok().map(|v| v as u64)
    } else {
        None
    }
}

/// A file of a mapped file queue: its path, start offset (from the name) and length on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFile {
    pub path: PathBuf,
    pub start: u64,
    pub len: u64,
}

/// The files of a mapped file queue directory sorted by start offset. Names that are not 20 digits
/// are returned in `foreign` (the broker refuses or ignores them); subdirectories are skipped.
pub fn list_queue_dir(dir: &Path) -> Result<(Vec<QueueFile>, Vec<PathBuf>)> {
    let mut files = Vec::new();
    let mut foreign = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let meta = entry.metadata().map_err(|e| Error::io(&path, e))?;
        if meta.is_dir() {
            continue;
        }
        let name = entry.file_name();
        match name.to_str().and_then(name_to_offset) {
            Some(start) => files.push(QueueFile {
                path,
                start,
                len: meta.len(),
            }),
            None => foreign.push(path),
        }
    }
    files.sort_by_key(|f| f.start);
    foreign.sort();
    Ok((files, foreign))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(offset_to_name(1073741824), "00000000001073741824");
        assert_eq!(name_to_offset("00000000001073741824"), Some(1073741824));
        assert_eq!(name_to_offset("0000000000107374182"), None);
        assert_eq!(name_to_offset("0000000000107374182x"), None);
        assert_eq!(name_to_offset("99999999999999999999"), None);
        assert_eq!(name_to_offset("09223372036854775808"), None);
        assert_eq!(
            name_to_offset("09223372036854775807"),
            Some(i64::MAX as u64)
        );
    }
}
