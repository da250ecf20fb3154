//! DLedger-mode stores (a broker with `enableDLegerCommitLog=true`): the raft log that replaces
//! `commitlog/`, in `dledger-<selfId>/` under the store root (DLEDGER.md).
//!
//! - [`entry`]: the data files' entries (a 48-byte header wrapping one commitlog record) and the
//!   file-end blank marker.
//! - [`index`]: the 32-byte index units, one per entry, at `index * 32`.
//! - [`props`]: the `checkpoint` (end and committed index) and `currterm` (term and vote)
//!   properties files.
//! - [`check`]: the log's invariants as verify findings.
//! - [`start`]: the data file the broker's recovery walk starts at.
//! - [`layout`]: finding the DLedger folder, its self id, files and geometry, and the divide of
//!   a converted store (old records below it in `commitlog/`).
//!
//! Layouts as openmessaging DLedger 0.3.1.x writes them for RocketMQ 4.9.x and 5.x.

pub mod check;
pub mod entry;
pub mod index;
pub mod layout;
pub mod props;
pub mod start;
pub mod walk;

#[cfg(test)]
mod tests;

pub use entry::{EntryHeader, Slot};
pub use index::IndexUnit;
pub use layout::{CommitRule, DledgerGeometry, DledgerLayout};
pub use props::{DledgerCheckpoint, TermFile};

/// `DLedgerEntry.BODY_OFFSET`: header bytes before the wrapped record.
pub const HEADER_SIZE: usize = 48;
/// `DLedgerMmapFileStore.MAGIC_1` (`CURRENT_MAGIC`): the magic of every entry and index unit.
pub const MAGIC: i32 = 1;
/// `MmapFileList.BLANK_MAGIC_CODE`: the file-end marker's magic.
pub const BLANK_MAGIC: i32 = -1;
/// File-end marker: magic and the bytes left in the file.
pub const BLANK_LEN: usize = 8;
/// `DLedgerMmapFileStore.INDEX_UNIT_SIZE`.
pub const INDEX_UNIT: usize = 32;
/// `mappedFileSizeCommitLog` default, which `DLedgerCommitLog` gives the data files (1 GiB).
pub const DEFAULT_DATA_FILE_SIZE: u64 = 1024 * 1024 * 1024;
/// `DLedgerConfig.mappedFileSizeForEntryIndex` default (160 MiB, 5,242,880 units).
pub const DEFAULT_INDEX_FILE_SIZE: u64 = 32 * 5 * 1024 * 1024;
/// Folder name prefix under the store root (`DLedgerConfig.getDefaultPath`).
pub const DIR_PREFIX: &str = "dledger-";
/// Data files folder inside `dledger-<selfId>/`.
pub const DATA_DIR: &str = "data";
/// Index files folder inside `dledger-<selfId>/`.
pub const INDEX_DIR: &str = "index";
/// Properties file with `endIndex` and `committedIndex`.
pub const CHECKPOINT_FILE: &str = "checkpoint";
/// Properties file with `currTerm` and `voteLeader`.
pub const CURRTERM_FILE: &str = "currterm";
