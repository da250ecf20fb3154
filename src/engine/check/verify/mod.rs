//! `verify`: the invariants of a healthy store, checked across files (FORMAT.md section 12), as
//! [`Finding`]s with what the broker would do about each on its next start.
//!
//! One parallel pass reads the commitlog: rayon workers take the files in pieces of
//! [`VerifyOptions::piece_size`], in order (a piece starts at the record recovery would
//! resynchronise to; a record never spans two files), and the index file structure checks run
//! on one more thread beside them. Each piece is walked as recovery walks a file
//! ([`recovery::walk_on`]); the pieces of a file are joined into the walk of the whole file, and
//! from the first piece that does not join cleanly (damage) on, the file is walked again in one
//! go, so damage is judged exactly as recovery judges it. Per record the pass checks the CRC,
//! compares the consume queue unit at its queue offset with it (units of one queue are read in
//! order through a shared map), merge-joins the index entries against the records in offset
//! order (index entries are appended in commitlog order, so both streams are sorted), and feeds
//! UNIQ_KEYs to a bounded duplicate window (module `dups`). Everything read in that loop is
//! prefetched a little ahead, and the properties are read once per record. Then each consume
//! queue is read front to back for its structure, and only the units no record matched are
//! checked against the bytes they point at. The checkpoint and the config files come last. The
//! recovery plan is built from the same walks and says, per commitlog finding, what recovery
//! would do.
//!
//! The broker's mode checks what the broker checks (body CRC as recovery does: masked to 31
//! bits, skipped for an empty body). `strict` adds what it misses: the `__CRC32#` property,
//! PHYSICALOFFSET against the position, queue offset continuity, stale records after the end of
//! the data, a non-zero BODYCRC on an empty body and odd fields.
//!
//! Memory does not grow with the store: per-queue state is one small run per queue, findings are
//! capped per code (the summary counts them all), per-file results are merged in file order as
//! they come in, and the duplicate-key window holds at most three generations of [`DUP_WINDOW`]
//! keys (about 30 MB). Checking an index file's chains takes four bytes per hash slot
//! (20 MB for the broker's default geometry).
//!
//! Nothing here prints; `commands::verify` presents the [`Report`].

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::engine::check::headers;
use crate::engine::check::recovery::{FileWalk, RecoveryMode, RecoveryPlan};
use crate::engine::store::Store;
use crate::format::error::Result;
use crate::format::finding::{Code, Finding};

mod config_check;
mod dups;
mod findings;
mod index_stream;
mod locate;
mod names;
mod props;
mod queue_check;
mod queue_runs;
mod recovery_findings;
mod run;
mod scan;
mod seg_state;
mod sink;
#[cfg(test)]
mod tests;
mod timer;
use config_check::config_findings;
pub use dups::DUP_WINDOW;
use index_stream::{entries_outside_commitlog, index_file_findings, open_index};
use run::verify_with_side;
pub use scan::PIECE;
use sink::Sink;
/// Default cap of findings listed per code.
pub const DEFAULT_MAX_PER_CODE: usize = 1000;

/// The parts of a store `verify` can check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// Commitlog files and records, the checkpoint and the abort marker.
    Commitlog,
    ConsumeQueue,
    Index,
    Config,
    /// 5.x timer files: timerlog/, timerwheel, config/timercheck and timermetrics.
    Timer,
    /// A DLedger-mode store's log: entries, index, checkpoint and currterm.
    Dledger,
}

impl Part {
    pub const ALL: [Part; 6] = [
        Part::Commitlog,
        Part::ConsumeQueue,
        Part::Index,
        Part::Config,
        Part::Timer,
        Part::Dledger,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Part::Commitlog => "commitlog",
            Part::ConsumeQueue => "consumequeue",
            Part::Index => "index",
            Part::Config => "config",
            Part::Timer => "timer",
            Part::Dledger => "dledger",
        }
    }
}

/// What to check and how.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// Check body CRCs (what the broker's recovery does by default).
    pub check_crc: bool,
    /// Add what the broker does not check: the `__CRC32#` property, PHYSICALOFFSET against the
    /// position, queue offset continuity, stale records, odd fields.
    pub strict: bool,
    /// Parts to check; empty means all.
    pub parts: Vec<Part>,
    /// Restrict record, queue and config checks to one topic (file structure is always checked).
    pub topic: Option<String>,
    /// Check the index and consume queue contents of one record or unit in `sample` (1 = all).
    pub sample: u64,
    /// Findings listed per code; the summary counts all of them.
    pub max_per_code: usize,
    /// Commitlog files are walked in pieces of about this many bytes (a quarter of it in the
    /// last file), so the workers finish together even when a store has only a few files. The
    /// findings do not depend on it.
    pub piece_size: u64,
    /// Set it to stop a run early: the workers finish the piece, queue or file at hand, and
    /// `verify` returns an error saying it was interrupted.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            check_crc: true,
            strict: false,
            parts: Vec::new(),
            topic: None,
            sample: 1,
            max_per_code: DEFAULT_MAX_PER_CODE,
            piece_size: PIECE,
            interrupt: None,
        }
    }
}

impl VerifyOptions {
    /// Whether [`VerifyOptions::interrupt`] was set.
    pub fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    pub fn wants(&self, p: Part) -> bool {
        self.parts.is_empty() || self.parts.contains(&p)
    }

    fn in_topic(&self, topic: &str) -> bool {
        self.topic.as_deref().is_none_or(|t| t == topic)
    }

    /// Dangling entries cannot be attributed to a topic: report them only without `--topic`.
    fn in_topic_any(&self) -> bool {
        self.topic.is_none()
    }
}

/// The phase a progress report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the commitlog: `done` and `total` are bytes.
    Commitlog,
    /// Checking consume queues: `done` and `total` are queues.
    ConsumeQueues,
    /// Checking index files: `done` and `total` are files.
    Index,
}

/// Progress callback: phase, done, total. Called from worker threads.
pub type Progress<'a> = &'a (dyn Fn(Phase, u64, u64) + Sync);

/// Counts for the end of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub errors: u64,
    pub warnings: u64,
    pub infos: u64,
    /// Records read in the commitlog, and their bytes.
    pub messages: u64,
    pub bytes: u64,
    pub commitlog_files: u64,
    pub consume_queues: u64,
    pub cq_units: u64,
    pub index_files: u64,
    pub index_entries_checked: u64,
    /// Records whose UNIQ_KEY was already stored at an earlier offset.
    pub duplicate_uniq_keys: u64,
    /// Findings counted but not listed (over the per-code cap).
    pub findings_not_listed: u64,
    /// Every finding counted, per code (listed or not), sorted by code.
    pub findings_per_code: BTreeMap<&'static str, u64>,
    /// No errors (and, with `strict`, no warnings).
    pub healthy: bool,
    pub strict: bool,
    pub crc_checked: bool,
    pub parts: Vec<&'static str>,
    pub topic: Option<String>,
    pub sample: u64,
    /// The release whose rules were applied ("4.9" or "5.x") and whether the files said so.
    pub store_version: String,
    pub clean_shutdown: bool,
    /// Why the broker would not start on the store as it is (empty: it starts).
    pub refuses_to_start: Vec<String>,
    pub recovery_mode: Option<RecoveryMode>,
    /// The commitlog max offset after recovery, and what recovery drops.
    pub recovery_cut: Option<u64>,
    pub recovery_drops_messages: u64,
    /// What the duplicate-key check guarantees.
    pub duplicate_window: String,
}

/// What `verify` found: every finding listed (up to the per-code cap), the counts, the recovery
/// plan.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub summary: Summary,
    pub recovery: Option<RecoveryPlan>,
    /// Records whose header contradicts the store, with the values the store proves.
    #[serde(skip)]
    pub damaged_headers: Vec<headers::DamagedHeader>,
    /// The walk of each commitlog file, as recovery walks it (`None` when not walked).
    #[serde(skip)]
    pub walks: Vec<Option<FileWalk>>,
    /// Records whose queue offset breaks their queue's sequence with no damaged header to
    /// explain it, in commitlog order.
    #[serde(skip)]
    pub queue_breaks: Vec<headers::Gap>,
}

// ---------------------------------------------------------------------------------------------
// The run.

/// Check the store. Read-only; safe on a live store (the tail may move while it is read).
pub fn verify(
    store: &Store,
    opts: &VerifyOptions,
    progress: Option<Progress<'_>>,
) -> Result<Report> {
    let mut sink = Sink::new(opts.max_per_code.max(1));
    let want_cl = opts.wants(Part::Commitlog);
    let want_cq = opts.wants(Part::ConsumeQueue);
    let want_ix = opts.wants(Part::Index);
    let want_conf = opts.wants(Part::Config);
    let scan = want_cl || want_cq || want_ix;

    // Index stream. Its files' structure checks and the config files run on one more thread
    // beside the recovery plan and the workers (neither needs the commitlog); the workers take
    // the commitlog in pieces, so the one that shares its core with it takes fewer.
    let index_stream = if scan && !store.index_files.is_empty() {
        open_index(store, want_ix, &mut sink)
    } else {
        None
    };
    let n_idx = match (&index_stream, want_ix) {
        (Some(ix), true) => ix.files.len(),
        _ => 0,
    };
    let check_index_files = || -> Vec<Vec<Finding>> {
        let Some(ix) = index_stream.as_ref().filter(|_| n_idx > 0) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(n_idx);
        for (j, f) in ix.files.iter().enumerate() {
            if opts.interrupted() {
                break;
            }
            let mut found = index_file_findings(ix, f);
            found.extend(entries_outside_commitlog(store, ix, f));
            out.push(found);
            if let Some(p) = progress {
                p(Phase::Index, j as u64 + 1, n_idx as u64);
            }
        }
        out
    };
    let side = || {
        let structure = if scan {
            check_index_files()
        } else {
            Vec::new()
        };
        let mut config = Sink::new(opts.max_per_code.max(1));
        if want_conf {
            config_findings(store, opts, &mut config);
        }
        if opts.wants(Part::Timer) && opts.topic.is_none() {
            for f in timer::timer_findings(store) {
                config.push(f);
            }
        }
        if let Some(layout) = store.dledger.as_ref().filter(|_| opts.wants(Part::Dledger)) {
            if let Err(e) = crate::format::dledger::check::check(layout, &mut |f| config.push(f)) {
                config.push(Finding::new(
                    Code::StoreUnreadable,
                    &layout.dir,
                    e.offset().unwrap_or(0),
                    e.to_string(),
                ));
            }
        }
        (structure, config)
    };
    std::thread::scope(|scope| {
        let side_thread = scope.spawn(side);
        verify_with_side(
            store,
            opts,
            progress,
            sink,
            index_stream.as_ref(),
            side_thread,
        )
    })
}
