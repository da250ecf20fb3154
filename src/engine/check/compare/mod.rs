//! `rmqstore compare`: what a failover lost, across the stores of one broker: a master and its
//! slaves (normal mode), or the replicas of a DLedger group.
//!
//! - Normal mode ([`normal`]): a slave's commitlog is a byte copy of its master's up to where it
//!   got, at the same offsets. A merge walk over the logs proves the common prefix record by
//!   record and finds where each store leaves the one that carries on (the keeper); the records
//!   past that point are only in that store, and lost when the keeper is the one that serves.
//! - DLedger mode ([`replicas`]): raft elects the replica with the highest (last entry's term,
//!   then its index); each other replica is compared with it from its end downwards and
//!   truncated after the last entry they share when it rejoins. The entries it drops, held by no
//!   replica that keeps them, are lost. Converted replicas' `commitlog/` files below the divide
//!   are this broker's own, never replicated by raft: they are compared as in normal mode, with
//!   the leader as the store that carries on (it serves its own below the divide).
//!
//! Every record found only in some stores is handed to a [`Sink`] as the walk meets it (nothing
//! is collected: memory does not grow with the stores), with the consumer groups that had not
//! consumed it according to the holder's `consumerOffset.json`. Stores of different brokers or
//! clusters, or one store given twice, are refused unless forced. Nothing is written.

pub mod config_diff;
pub mod normal;
pub mod replicas;
pub mod signals;
pub mod tally;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::Store;
use crate::format::commitlog::MessageRef;
use crate::format::error::Error;
use crate::format::geometry::GeometryInputs;

pub use config_diff::ConfigDifference;
pub use signals::{BrokerSignals, Signal};
pub use tally::{GroupCount, QueueTally, Tally};

/// Stores are counted from 0 inside and from 1 where they are shown (as given on the command
/// line).
pub fn one_based<S: serde::Serializer>(i: &usize, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(*i as u64 + 1)
}

/// [`one_based`] of a list.
pub fn one_based_all<S: serde::Serializer>(v: &[usize], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|i| i + 1))
}

/// What to compare and how.
#[derive(Debug, Clone, Default)]
pub struct CompareOptions {
    /// Compare stores that look like different brokers, or one store given twice.
    pub force: bool,
    /// Normal mode: the store that carries on (index into the stores); default chosen from the
    /// logs (see [`normal`]).
    pub keep: Option<usize>,
}

/// Why the stores cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("compare needs at least two stores")]
    TooFew,
    #[error(
        "{} and {} are the same store ({why}): compare two stores of one broker (--force \
         compares it with itself)",
        .first.display(), .second.display()
    )]
    SameStore {
        first: PathBuf,
        second: PathBuf,
        why: &'static str,
    },
    #[error(transparent)]
    DifferentBrokers(Box<BrokerConflict>),
    #[error(
        "{} is a DLedger-mode store and {} is not: the replicas of a DLedger group are compared \
         with each other, a master with its slaves",
        .dledger.display(), .normal.display()
    )]
    MixedModes { dledger: PathBuf, normal: PathBuf },
    #[error("--keep {0}: there are only {1} stores")]
    KeepOutOfRange(usize, usize),
    #[error("--keep applies to master and slave stores; in a DLedger group raft picks the leader")]
    KeepInDledger,
    #[error(transparent)]
    Store(#[from] Error),
}

/// Two stores that look like different brokers, and what says so.
#[derive(Debug, thiserror::Error)]
#[error(
    "{} and {} are stores of different brokers: {what} {a:?} against {b:?} (from {signal}); \
     --force compares them anyway",
    .first.display(), .second.display()
)]
pub struct BrokerConflict {
    pub first: PathBuf,
    pub second: PathBuf,
    pub what: &'static str,
    pub a: String,
    pub b: String,
    pub signal: String,
}

/// How a record is only in some stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnlyKind {
    /// In a store that does not carry on (or is truncated), and in none that does: lost.
    Lost,
    /// In the store that carries on, missing from some other store (that store lags or left).
    Kept,
}

/// One record found only in some of the stores, as the walk meets it.
#[derive(Debug, Clone, Serialize)]
pub struct OnlyRecord {
    pub kind: OnlyKind,
    /// The store it is read from (0-based index of the stores given).
    #[serde(serialize_with = "crate::engine::check::compare::one_based")]
    pub store: usize,
    /// Every store that holds this very record (same bytes at the same place).
    #[serde(serialize_with = "crate::engine::check::compare::one_based_all")]
    pub held_by: Vec<usize>,
    /// The stores that lack it.
    #[serde(serialize_with = "crate::engine::check::compare::one_based_all")]
    pub missing_from: Vec<usize>,
    pub commitlog_offset: u64,
    pub size: i32,
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub store_timestamp: i64,
    pub msg_id: String,
    pub uniq_key: Option<String>,
    pub keys: Vec<String>,
    pub tags: Option<String>,
    /// Groups that had not consumed it, by the holder's `consumerOffset.json`.
    pub unconsumed_by: Vec<String>,
    /// DLedger mode: the entry's index and term.
    pub dledger_index: Option<i64>,
    pub dledger_term: Option<i64>,
}

impl OnlyRecord {
    /// The record `m` of store `store`, with who holds it and who had not consumed it; `entry`
    /// is its DLedger entry's index and term.
    pub fn of(
        m: &MessageRef<'_>,
        kind: OnlyKind,
        store: usize,
        (held_by, missing_from): (Vec<usize>, Vec<usize>),
        unconsumed_by: Vec<String>,
        entry: Option<(i64, i64)>,
    ) -> Self {
        OnlyRecord {
            kind,
            store,
            held_by,
            missing_from,
            commitlog_offset: m.position,
            size: m.total_size,
            topic: m.topic.to_string(),
            queue_id: m.queue_id,
            queue_offset: m.queue_offset,
            store_timestamp: m.store_timestamp,
            msg_id: m.offset_msg_id(),
            uniq_key: m.uniq_key().map(|u| u.into_owned()),
            keys: m.keys(),
            tags: m.tags().map(|t| t.into_owned()),
            unconsumed_by,
            dledger_index: entry.map(|e| e.0),
            dledger_term: entry.map(|e| e.1),
        }
    }
}

/// Where the records found only in some stores go (a printer, an export writer).
pub trait Sink {
    /// `m` is the record as read from `file` of store `r.store`.
    fn record(&mut self, r: &OnlyRecord, m: &MessageRef<'_>, file: &Path) -> anyhow::Result<()>;
}

/// The mode the stores are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Normal,
    Dledger,
}

/// The stores, opened and checked to be one broker's.
pub struct Opened {
    pub stores: Vec<Store>,
    pub mode: Mode,
    pub signals: Vec<BrokerSignals>,
}

/// `(device, inode)` of a folder.
fn identity(p: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = p;
        None
    }
}

/// Open every store and refuse what cannot be compared: fewer than two, a store given twice,
/// normal and DLedger stores mixed, stores of different brokers (unless `force`).
pub fn open(
    roots: &[PathBuf],
    inputs: &GeometryInputs,
    opts: &CompareOptions,
) -> Result<Opened, CompareError> {
    if roots.len() < 2 {
        return Err(CompareError::TooFew);
    }
    if !opts.force {
        for (i, a) in roots.iter().enumerate() {
            for b in &roots[i + 1..] {
                let same_path = match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
                    (Ok(x), Ok(y)) => x == y,
                    _ => false,
                };
                let why = if same_path {
                    Some("the same folder")
                } else if identity(a).is_some() && identity(a) == identity(b) {
                    Some("the same device and inode")
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(CompareError::SameStore {
                        first: a.clone(),
                        second: b.clone(),
                        why,
                    });
                }
            }
        }
    }
    let mut stores = Vec::new();
    for r in roots {
        stores.push(Store::open(r, inputs)?);
    }
    let mode = if stores[0].dledger.is_some() {
        Mode::Dledger
    } else {
        Mode::Normal
    };
    if let Some(odd) = stores
        .iter()
        .find(|s| s.dledger.is_some() != (mode == Mode::Dledger))
    {
        let (d, n) = if mode == Mode::Dledger {
            (&stores[0], odd)
        } else {
            (odd, &stores[0])
        };
        return Err(CompareError::MixedModes {
            dledger: d.root.clone(),
            normal: n.root.clone(),
        });
    }
    if let Some(k) = opts.keep {
        if mode == Mode::Dledger {
            return Err(CompareError::KeepInDledger);
        }
        if k >= stores.len() {
            return Err(CompareError::KeepOutOfRange(k + 1, stores.len()));
        }
    }
    let signals = stores
        .iter()
        .map(BrokerSignals::read)
        .collect::<Result<Vec<_>, Error>>()?;
    if !opts.force {
        for i in 0..stores.len() {
            for j in i + 1..stores.len() {
                if let Some((what, a, b, signal)) = signals[i].conflict(&signals[j]) {
                    return Err(CompareError::DifferentBrokers(Box::new(BrokerConflict {
                        first: stores[i].root.clone(),
                        second: stores[j].root.clone(),
                        what,
                        a,
                        b,
                        signal,
                    })));
                }
            }
        }
    }
    Ok(Opened {
        stores,
        mode,
        signals,
    })
}

/// One store as the comparison found it.
#[derive(Debug, Clone, Serialize)]
pub struct StoreSide {
    /// 0-based index of the stores given.
    #[serde(serialize_with = "crate::engine::check::compare::one_based")]
    pub store: usize,
    pub root: String,
    pub mode: Mode,
    /// What carries on: `keeps` (the keeper, or raft's leader), `up_to_date` (a replica with
    /// the leader's log), `lags` (missing records only), `truncated` (loses records when it
    /// rejoins), `dropped` (normal mode: its records past the common prefix are not served).
    pub role: &'static str,
    /// The first record's offset and the end of the data (normal mode; in DLedger mode the
    /// wrapped records' offsets).
    pub min_commitlog_offset: Option<u64>,
    pub max_commitlog_offset: Option<u64>,
    pub records: u64,
    pub bytes: u64,
    pub first_store_timestamp: Option<i64>,
    pub last_store_timestamp: Option<i64>,
    /// Commitlog (DLedger: data) file size.
    pub file_size: Option<u64>,
    /// Where the walk stopped on bytes that are not a record (file, offset, what was expected).
    pub stopped: Option<String>,
    pub cluster: Option<Signal>,
    pub broker_name: Option<Signal>,
    /// Records only in this store ([`OnlyKind`]), with the groups that had not consumed them.
    pub only: Tally,
    /// Normal mode: records below the keeper's first record (never on the keeper; not counted
    /// as lost).
    pub before_keeper: Option<Tally>,
    /// DLedger mode: the replica's log and votes.
    pub dledger: Option<replicas::Replica>,
}

/// Where a store leaves the keeper (normal mode) or raft's leader (DLedger mode).
#[derive(Debug, Clone, Serialize)]
pub struct Divergence {
    #[serde(serialize_with = "crate::engine::check::compare::one_based")]
    pub store: usize,
    #[serde(serialize_with = "crate::engine::check::compare::one_based")]
    pub against: usize,
    /// Normal mode: the first commitlog offset where they differ.
    pub commitlog_offset: Option<u64>,
    /// DLedger mode: the first index where the entries differ.
    pub index: Option<i64>,
    /// `differs` (both hold a record or entry there, not the same: `field` says what),
    /// `store_ends`, `against_ends` (one has nothing more), `misaligned` (records start at
    /// different offsets), `same` (no difference: the logs are identical).
    pub kind: &'static str,
    /// DLedger: `term`, `pos`, `body` or `header`; normal mode: null.
    pub field: Option<&'static str>,
    /// Records (entries) both hold before it, proven equal byte for byte.
    pub common_records: u64,
    pub common_bytes: u64,
}

/// Everything the comparison found.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    pub mode: Mode,
    pub stores: Vec<StoreSide>,
    /// The store that carries on (normal mode) or raft's leader.
    #[serde(serialize_with = "crate::engine::check::compare::one_based")]
    pub keeper: usize,
    pub keeper_reason: String,
    pub divergences: Vec<Divergence>,
    /// DLedger mode: what each replica drops when it rejoins.
    pub truncations: Vec<replicas::Truncation>,
    pub config: Vec<ConfigDifference>,
    /// Records that would be lost (each counted once, whichever stores hold it), below a
    /// converted store's divide too.
    pub lost_records: u64,
    pub lost_bytes: u64,
    /// DLedger replicas of which one is converted: their `commitlog/` files below the divide,
    /// compared as a master's and its slaves' (the leader serves its own; what only the others
    /// hold there is lost while it leads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub below_divide: Option<Box<CompareReport>>,
}

/// Compare the opened stores, handing every record found only in some of them to `sink`.
pub fn compare(
    opened: &Opened,
    opts: &CompareOptions,
    sink: &mut dyn Sink,
) -> anyhow::Result<CompareReport> {
    let mut report = match opened.mode {
        Mode::Normal => normal::compare(opened, opts, sink)?,
        Mode::Dledger => replicas::compare(opened, sink)?,
    };
    report.config = config_diff::differences(&opened.stores, report.keeper)?;
    let below = report
        .below_divide
        .iter_mut()
        .flat_map(|b| b.stores.iter_mut());
    for side in report.stores.iter_mut().chain(below) {
        let sig = &opened.signals[side.store];
        side.cluster = sig.cluster.clone();
        side.broker_name = sig.broker_name.clone();
    }
    Ok(report)
}
