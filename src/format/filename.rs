//! Names of mapped files: a 20-digit zero-padded decimal start offset (`UtilAll.offset2FileName`).

use std::path::{Path, PathBuf};

use super::entry::{self, Entry, Kind};
use super::error::Result;

/// `UtilAll.offset2FileName`: the start offset as 20 zero-padded decimal digits.
pub fn offset_to_name(offset: u64) -> String {
    format!("{offset:020}")
}

/// The start offset a mapped file's name stands for, read as the broker's `Long.parseLong`
/// reads it (`MappedFile.init`): an optional `+` or `-`, then decimal digits of any count,
/// within a Java long. The broker names its files with 20 digits, but loads any name that
/// parses (19 digits included); a negative offset names no file here.
pub fn name_to_offset(name: &str) -> Option<u64> {
    let (negative, digits) = match name.as_bytes().first() {
        Some(b'+') => (false, &name[1..]),
        Some(b'-') => (true, &name[1..]),
        _ => (false, name),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v = digits.trim_start_matches('0');
    let v: i64 = if v.is_empty() { 0 } else { v.parse().ok()? };
    match (negative, v) {
        (_, 0) => Some(0),
        (true, _) => None,
        (false, v) => Some(v as u64),
    }
}

/// A file of a mapped file queue: its path, start offset (from the name) and length on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFile {
    pub path: PathBuf,
    pub start: u64,
    pub len: u64,
}

/// What a mapped file queue directory holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Regular files (or symlinks to them) named by a 20-digit offset, sorted by start offset;
    /// a symlink's length is its target's.
    pub files: Vec<QueueFile>,
    /// Regular files whose names are not 20 digits (the broker's `Long.parseLong` fails on them).
    pub foreign: Vec<PathBuf>,
    /// Everything that is not a regular file: folders, FIFOs, devices, symlink loops, dangling
    /// symlinks. Never opened.
    pub odd: Vec<Entry>,
}

/// The entries of a mapped file queue directory, sorted (see [`Listing`]).
pub fn list_queue_dir(dir: &Path) -> Result<Listing> {
    let mut out = Listing::default();
    for e in entry::list(dir)? {
        let start = e.name.as_deref().and_then(name_to_offset);
        match (e.kind, start) {
            (Kind::File { len }, Some(start)) => out.files.push(QueueFile {
                path: e.path,
                start,
                len,
            }),
            (Kind::File { .. }, None) => out.foreign.push(e.path),
            _ => out.odd.push(e),
        }
    }
    out.files.sort_by_key(|f| f.start);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(offset_to_name(1073741824), "00000000001073741824");
        assert_eq!(name_to_offset("00000000001073741824"), Some(1073741824));
        // Long.parseLong takes any count of digits and a sign
        assert_eq!(name_to_offset("0000000000107374182"), Some(107374182));
        assert_eq!(name_to_offset("0000000000004194304"), Some(4194304));
        assert_eq!(name_to_offset("+4194304"), Some(4194304));
        assert_eq!(name_to_offset("-0"), Some(0));
        assert_eq!(name_to_offset("-1"), None);
        assert_eq!(name_to_offset(""), None);
        assert_eq!(name_to_offset("+"), None);
        assert_eq!(name_to_offset(" 1"), None);
        assert_eq!(name_to_offset("0000000000107374182x"), None);
        assert_eq!(name_to_offset("99999999999999999999"), None);
        assert_eq!(name_to_offset("09223372036854775808"), None);
        assert_eq!(
            name_to_offset("09223372036854775807"),
            Some(i64::MAX as u64)
        );
    }
}
