//! The `checkpoint` file (FORMAT.md 8.1) and the `abort`/`lock` markers (8.2). [`check`] judges
//! the checkpoint file alone; its times and offsets against the data are checked by the
//! store-level verify.

use std::path::Path;

use serde::Serialize;

use super::bytes::i64_at;
use super::error::{ErrorKind, ParseError, Result};
use super::finding::{Code, Finding};

/// `StoreCheckpoint` maps one OS page.
pub const CHECKPOINT_FILE_SIZE: usize = 4096;
/// Bytes 4.9 uses (three timestamps).
pub const CHECKPOINT_V4_LEN: usize = 24;

/// The flush checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Checkpoint {
    /// Store time of the last record of the last flushed commitlog file (ms).
    pub physic_msg_timestamp: i64,
    /// Store time of the last record put into a consume queue (ms).
    pub logics_msg_timestamp: i64,
    /// End timestamp of the last full index file flushed (ms).
    pub index_msg_timestamp: i64,
    /// 5.0.0+: slave-acting-master flushed offset.
    pub master_flushed_offset: i64,
    /// 5.1.1+: confirm offset (`confirmPhyOffset`; `confirm_commitlog_offset` in JSON).
    #[serde(rename = "confirm_commitlog_offset")]
    pub confirm_phy_offset: i64,
}

impl Checkpoint {
    /// Parse a checkpoint. At least the 24 bytes of 4.9 must be there; 5.x fields read as 0
    /// when the file is shorter than 40 bytes.
    pub fn from_bytes(b: &[u8]) -> Result<Self, ParseError> {
        if b.len() < CHECKPOINT_V4_LEN {
            return Err(ParseError::new(
                0,
                ErrorKind::Truncated {
                    what: "checkpoint",
                    needed: CHECKPOINT_V4_LEN as u64,
                    left: b.len() as u64,
                },
            ));
        }
        Ok(Checkpoint {
            physic_msg_timestamp: i64_at(b, 0).unwrap_or(0),
            logics_msg_timestamp: i64_at(b, 8).unwrap_or(0),
            index_msg_timestamp: i64_at(b, 16).unwrap_or(0),
            master_flushed_offset: i64_at(b, 24).unwrap_or(0),
            confirm_phy_offset: i64_at(b, 32).unwrap_or(0),
        })
    }

    /// The 4096-byte file, unused bytes zero.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; CHECKPOINT_FILE_SIZE];
        for (i, x) in [
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ]
        .iter()
        .enumerate()
        {
            v[i * 8..i * 8 + 8].copy_from_slice(&x.to_be_bytes());
        }
        v
    }

    /// `getMinTimestamp`: `min(physic, logics) - 3000` (wrapping, as Java), at least 0.
    pub fn min_timestamp(&self) -> i64 {
        // Java long arithmetic: the subtraction wraps
        self.physic_msg_timestamp
            .min(self.logics_msg_timestamp)
            .wrapping_sub(3000)
            .max(0)
    }

    /// `getMinTimestampIndex`: `min(getMinTimestamp(), indexMsgTimestamp)`.
    pub fn min_timestamp_index(&self) -> i64 {
        self.min_timestamp().min(self.index_msg_timestamp)
    }
}

/// Read the checkpoint file at `path` (its first [`CHECKPOINT_FILE_SIZE`] bytes, from a regular
/// file only); `Ok(None)` when nothing is there.
pub fn read_file(path: &Path) -> Result<Option<Checkpoint>> {
    if super::entry::probe(path).kind == super::entry::Kind::Missing {
        return Ok(None);
    }
    let b = super::entry::read_prefix(path, CHECKPOINT_FILE_SIZE as u64)?;
    Checkpoint::from_bytes(&b)
        .map(Some)
        .map_err(|e| e.in_file(path, 0))
}

/// Findings about the checkpoint file at `path` alone, from what [`read_file`] gave (`Err`: why
/// it does not read): one that does not read (not a regular file, shorter than the 24 bytes of
/// 4.9), and a missing one when the store has commitlog files (`has_commitlog`).
pub fn check(
    path: &Path,
    read: std::result::Result<Option<&Checkpoint>, &str>,
    has_commitlog: bool,
) -> Vec<Finding> {
    match read {
        Err(e) => vec![Finding::new(Code::CheckpointBadFile, path, 0, e)
            .with_action("StoreCheckpoint maps it anyway; times read as garbage or 0")],
        Ok(None) if has_commitlog => vec![Finding::new(
            Code::CheckpointMissing,
            path,
            0,
            "no checkpoint file".to_string(),
        )
        .with_action("the broker starts with all checkpoint times 0")],
        Ok(_) => Vec::new(),
    }
}

/// What the `abort` file says about the last shutdown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AbortMarker {
    /// True when `abort` exists: the last exit was unclean.
    pub present: bool,
    /// The broker pid 5.x writes into it, if any.
    pub pid: Option<u32>,
}

impl AbortMarker {
    /// What `<root>/abort` says. Anything at that name counts as present (the broker only
    /// tests that it exists); a pid is read from the first bytes of a regular file only.
    pub fn read(root: &Path) -> Self {
        let path = root.join("abort");
        let found = super::entry::probe(&path);
        if matches!(
            found.kind,
            super::entry::Kind::Missing | super::entry::Kind::DanglingSymlink
        ) {
            return AbortMarker {
                present: false,
                pid: None,
            };
        }
        let pid = super::entry::read_prefix(&path, 64)
            .ok()
            .and_then(|b| std::str::from_utf8(&b).ok()?.trim().parse().ok());
        AbortMarker { present: true, pid }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_and_round_trip() {
        let c = Checkpoint {
            physic_msg_timestamp: 0x0102030405060708,
            logics_msg_timestamp: 1700000000123,
            index_msg_timestamp: 0,
            master_flushed_offset: 0,
            confirm_phy_offset: 139,
        };
        let b = c.to_bytes();
        assert_eq!(b.len(), 4096);
        assert_eq!(&b[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[8..16], &[0, 0, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x7B]);
        assert_eq!(&b[32..40], &[0, 0, 0, 0, 0, 0, 0, 0x8B]);
        assert!(b[40..].iter().all(|&x| x == 0));
        assert_eq!(Checkpoint::from_bytes(&b).unwrap(), c);
        assert_eq!(
            Checkpoint::from_bytes(&b[..24]).unwrap().confirm_phy_offset,
            0
        );
        let e = Checkpoint::from_bytes(&b[..10]).unwrap_err();
        assert_eq!(e.offset, 0);
        assert_eq!(c.min_timestamp(), 1700000000123 - 3000);
    }

    #[test]
    fn the_file_alone_is_read_and_judged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        let judge = |has_commitlog| {
            let read = read_file(&path);
            let e = read.as_ref().err().map(|e| e.to_string());
            let found = read.as_ref().ok().copied().flatten();
            let findings = match &e {
                Some(e) => check(&path, Err(e), has_commitlog),
                None => check(&path, Ok(found.as_ref()), has_commitlog),
            };
            (found, findings)
        };
        // missing: a finding only where there is data the broker would have checkpointed
        let (found, f) = judge(false);
        assert!(found.is_none() && f.is_empty(), "{f:?}");
        let (_, f) = judge(true);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].code, f[0].offset), (Code::CheckpointMissing, 0));
        assert_eq!(f[0].message, "no checkpoint file");
        // a whole file, and the 24 bytes of 4.9: nothing to say
        let c = Checkpoint {
            physic_msg_timestamp: 1_700_000_000_000,
            logics_msg_timestamp: 1_700_000_000_000,
            ..Checkpoint::default()
        };
        std::fs::write(&path, c.to_bytes()).unwrap();
        assert_eq!(judge(true), (Some(c), Vec::new()));
        std::fs::write(&path, &c.to_bytes()[..24]).unwrap();
        assert_eq!(judge(true), (Some(c), Vec::new()));
        // too short: the reason it does not read, with the file's name
        std::fs::write(&path, [0u8; 10]).unwrap();
        let (found, f) = judge(false);
        assert!(found.is_none());
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].code, f[0].offset), (Code::CheckpointBadFile, 0));
        assert!(f[0].message.contains("checkpoint"), "{}", f[0].message);
        assert!(f[0].broker_action.is_some());
        // a folder where the file belongs
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let (_, f) = judge(true);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].code, Code::CheckpointBadFile);
    }
}
