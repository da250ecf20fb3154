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

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::engine::check::headers::{self, QueueSlot};
use crate::engine::check::recovery::{self, FileWalk, RecoveryMode, RecoveryPlan};
use crate::engine::store::{paths, Store};
use crate::format::consumequeue::ConsumeQueue;
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
mod scan;
mod seg_state;
mod sink;
#[cfg(test)]
mod tests;
mod timer;
use crate::engine::check::pieces::{file_piece_size, piece_count, PieceMaps};
use config_check::config_findings;
use dups::DupWindow;
pub use dups::DUP_WINDOW;
use findings::{
    dup_findings, entry_findings, first_missing, gap_findings, header_findings, layout_findings,
    missing_file_findings, missing_findings,
};
use index_stream::{
    entries_outside_commitlog, index_file_findings, index_findings, open_index, IndexStream,
};
use props::FastMap;
use queue_check::{check_queue, CqCtx, CqResult, LazyMaps};
use queue_runs::{topic_queue_counts, CqIndex, QueueRun};
use recovery_findings::{
    checkpoint_findings, mark_blanks_in_place, marker_findings, walk_findings,
};
pub use scan::PIECE;
use scan::{scan_piece, Ctx, IndexTally, Merged, Span};
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

/// What the side thread found: each index file's structure findings, and the config files'.
type SideResult = (Vec<Vec<Finding>>, Sink);

/// [`verify`] after the index stream is open and its file checks have started on `side_thread`.
fn verify_with_side(
    store: &Store,
    opts: &VerifyOptions,
    progress: Option<Progress<'_>>,
    mut sink: Sink,
    index_stream: Option<&IndexStream>,
    side_thread: std::thread::ScopedJoinHandle<'_, SideResult>,
) -> Result<Report> {
    let want_cl = opts.wants(Part::Commitlog);
    let want_cq = opts.wants(Part::ConsumeQueue);
    let want_ix = opts.wants(Part::Index);
    let scan = want_cl || want_cq || want_ix;

    let prep = recovery::prepare(store)?;
    let segs = &store.commitlog.segments;
    let file_size = store.geometry.commitlog_file_size.value;

    if want_cl {
        layout_findings(store, file_size, &prep, &mut sink);
    }
    entry_findings(store, &prep, (want_cl, want_cq, want_ix), &mut sink);

    let maps = LazyMaps::new(segs);

    let mut cq_index: CqIndex<'_> = FastMap::default();
    for ((t, q), cq) in &store.queues {
        let end = prep.queue_ends.get(&(t.clone(), *q)).map_or(0, |e| e.0);
        cq_index
            .entry(t.as_str())
            .or_default()
            .insert(*q, (end, cq));
    }
    let start_offset = prep
        .start_index
        .and_then(|i| segs.get(i))
        .map_or(0, |s| s.start);
    let redispatch_from = match prep.mode {
        RecoveryMode::Abnormal if store.dledger.is_none() => start_offset,
        _ => prep.dispatch_from(store),
    };
    let mut walk_opts = prep.walk_options(store, opts.check_crc);
    walk_opts.check_crc = opts.check_crc;
    let total: u64 = segs.iter().map(|s| s.len).sum();
    let ctx = Ctx {
        store,
        opts,
        walk_opts,
        index: index_stream,
        cq_index: &cq_index,
        dups: DupWindow::new(opts.max_per_code),
        done: AtomicU64::new(0),
        total,
        progress,
        redispatch_from,
        track_queues: want_cq || want_cl,
        units_in_scan: store.queues.len() <= seg_state::MAX_CQ_MAPS,
        topic_queues: topic_queue_counts(store),
        cq_maps: Mutex::new(FastMap::default()),
    };

    let merged = Mutex::new(Merged {
        sink: Sink::new(opts.max_per_code.max(1)),
        walks: (0..segs.len()).map(|_| None).collect(),
        suspects: Vec::new(),
        gaps: Vec::new(),
        queues: HashMap::new(),
        idx: IndexTally::default(),
        records: 0,
        bytes: 0,
        data_end: 0,
        max_store_ts: 0,
        next: 0,
        pieces: {
            let mut at = 0;
            segs.iter()
                .enumerate()
                .map(|(i, seg)| {
                    let n = piece_count(seg.len, file_piece_size(opts.piece_size, segs, i));
                    at += n;
                    at - n..at
                })
                .collect()
        },
        joining: Default::default(),
        pending: BTreeMap::new(),
    });
    let threads = rayon::current_num_threads().max(1);
    if scan {
        // Pieces in file order, so neighbouring ones are read at the same time (the duplicate
        // window and the merge buffer stay small).
        let pieces: Vec<(usize, usize)> = segs
            .iter()
            .enumerate()
            .flat_map(|(i, seg)| {
                let n = piece_count(seg.len, file_piece_size(opts.piece_size, segs, i));
                (0..n).map(move |j| (i, j))
            })
            .collect();
        let again = |i: usize, from: usize, before: Option<FileWalk>| {
            scan_piece(&ctx, i, Span::Rest(from, before))
        };
        let piece_maps = PieceMaps::new(segs, opts.piece_size);
        let next = AtomicUsize::new(0);
        rayon::scope(|s| {
            for _ in 0..threads {
                s.spawn(|_| loop {
                    if opts.interrupted() {
                        break;
                    }
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(i, j)) = pieces.get(k) else { break };
                    let r = scan_piece(&ctx, i, Span::Piece(j, &piece_maps));
                    piece_maps.done(i);
                    if let Ok(mut m) = merged.lock() {
                        m.take(k, r, &again);
                    }
                });
            }
        });
    }
    let (structure, config) = side_thread
        .join()
        .map_err(|_| crate::format::Error::worker_panicked(&store.root, "a verify worker"))?;
    if opts.interrupted() {
        return Err(crate::format::Error::interrupted(&store.root, "verify"));
    }
    let mut merged = merged
        .into_inner()
        .map_err(|_| crate::format::Error::worker_panicked(&store.root, "a verify worker"))?;
    let dups = ctx.dups.finish();
    // the walk's per-piece queue records are freed: the queue phase allocates in other sizes
    crate::format::mapped::give_back_free_heap();

    mark_blanks_in_place(&mut merged.walks);

    let plan = if scan {
        let refs: Vec<Option<&FileWalk>> = merged.walks.iter().map(Option::as_ref).collect();
        let mut plan = recovery::finish(store, &prep, &refs, opts.check_crc)?;
        if want_cq {
            recovery::add_requeues(store, &prep, &mut plan)?;
        }
        Some(plan)
    } else {
        None
    };

    if want_cl {
        walk_findings(store, &merged.walks, plan.as_ref(), opts, &mut sink);
        dup_findings(store, &maps, &dups, &mut sink, opts);
        marker_findings(store, &prep, plan.as_ref(), &mut sink);
        checkpoint_findings(store, &prep, &merged, index_stream, &mut sink);
    }
    let merged_sink = std::mem::take(&mut merged.sink);
    sink.absorb(merged_sink);

    // Consume queues: each checked on its own, then the headers judged with what all of them
    // and the walk saw, then the findings of each.
    let mut cq_units = 0u64;
    let mut queues_checked = 0u64;
    let lone: Vec<(u64, QueueSlot)> = merged
        .queues
        .iter()
        .filter(|((t, q), run)| run.count == 1 && !store.queues.contains_key(&(t.clone(), *q)))
        .map(|((t, q), run)| {
            (
                run.first_pos,
                QueueSlot {
                    topic: t.clone(),
                    queue_id: *q,
                    queue_offset: run.first_q,
                },
            )
        })
        .collect();
    // The records a unit's claim can be judged about (see `headers::judge`): claims about others
    // are never taken, and a store with many wrong units would keep one per unit.
    let claimable: std::collections::HashSet<u64> = merged
        .suspects
        .iter()
        .map(|s| s.offset)
        .chain(lone.iter().map(|(o, _)| *o))
        .chain(merged.gaps.iter().flat_map(|g| [g.offset, g.prev_offset]))
        .collect();
    let mut checked: Vec<(&ConsumeQueue, CqResult)> = Vec::new();
    let cq_sink = Mutex::new(Sink::new(opts.max_per_code));
    if want_cq {
        let cq_maps = std::mem::take(&mut *ctx.cq_maps.lock().unwrap_or_else(|e| e.into_inner()));
        let cctx = CqCtx {
            store,
            opts,
            maps: &maps,
            data_end: merged.data_end,
            cl_min: store.commitlog.min_offset(),
            plan: plan.as_ref(),
            cq_maps: Some(&cq_maps),
            claimable: Some(&claimable),
        };
        let list: Vec<&ConsumeQueue> = store
            .queues
            .values()
            .filter(|q| opts.in_topic(&q.topic))
            .collect();
        let n = list.len() as u64;
        let done = AtomicU64::new(0);
        use rayon::prelude::*;
        let results: Vec<(usize, Result<CqResult>)> = list
            .par_iter()
            .enumerate()
            .map(|(i, cq)| {
                if opts.interrupted() {
                    return (
                        i,
                        Err(crate::format::Error::interrupted(&store.root, "verify")),
                    );
                }
                let run = merged.queues.get(&(cq.topic.clone(), cq.queue_id));
                // Only what the judgement and the missing units need stays: the findings go to
                // the capped sink, the matched ranges are reduced to the first gap in them.
                let r = check_queue(&cctx, cq, run).map(|mut r| {
                    let found = std::mem::take(&mut r.findings);
                    cq_sink
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .absorb(found);
                    r.first_missing = first_missing(run, &r);
                    r.ranges = Vec::new();
                    r
                });
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(p) = progress {
                    p(Phase::ConsumeQueues, d, n);
                }
                (i, r)
            })
            .collect();
        for (i, r) in results {
            let Some(cq) = list.get(i) else { continue };
            checked.push((cq, r?));
        }
    }
    let mut claims = Vec::new();
    let mut claim_findings = Vec::new();
    for (_, r) in checked.iter_mut() {
        for (c, f) in std::mem::take(&mut r.claims) {
            claims.push(c);
            claim_findings.push(f);
        }
    }
    let ends: Vec<headers::QueueEnds> = merged
        .queues
        .iter()
        .map(|((t, q), run)| headers::QueueEnds {
            topic: t.clone(),
            queue_id: *q,
            first_q: run.first_q,
            first_offset: run.first_pos,
            next_q: run.next_q,
            last_offset: run.last_pos,
        })
        .collect();
    let judgement = headers::judge(&merged.suspects, &claims, &merged.gaps, &lone, &ends);
    if want_cl {
        header_findings(store, &judgement, &mut sink);
        gap_findings(store, &merged.gaps, &judgement, &mut sink);
    }
    // Breaks in queue offset sequences that no damaged header explains: the broker's dispatch
    // misplaces (or, for a repeat, skips) the units from there on.
    let queue_breaks: Vec<headers::Gap> = merged
        .gaps
        .iter()
        .enumerate()
        .filter(|(i, _)| !judgement.explained_gaps.contains(i))
        .map(|(_, g)| g.clone())
        .collect();
    for (i, f) in claim_findings.into_iter().enumerate() {
        if !judgement.accepted_claims.contains(&i) {
            sink.push(f);
        }
    }
    // Index entries of a record whose topic changed do not hash to it: one damage, one finding.
    sink.retract(|f| {
        matches!(f.code, Code::IndexDanglingEntry | Code::IndexMissingKey)
            && f.record.is_some_and(|o| judgement.is_damaged(o))
    });
    // What damaged records were counted as in the queues they name.
    let mut miscounted: HashMap<(String, i32), Vec<i64>> = HashMap::new();
    for d in &judgement.damaged {
        if d.field != headers::Field::PhysicalOffset {
            let v = miscounted
                .entry((d.named.topic.clone(), d.named.queue_id))
                .or_default();
            if !v.contains(&d.named.queue_offset) {
                v.push(d.named.queue_offset);
            }
        }
    }
    let corrected = |key: &(String, i32), run: Option<&QueueRun>| -> Option<QueueRun> {
        let mut run = run?.clone();
        for &q in miscounted.get(key).map(Vec::as_slice).unwrap_or(&[]) {
            run.count = run.count.saturating_sub(1);
            if q >= 0 && q as u64 >= run.cq_end {
                run.beyond = run.beyond.saturating_sub(1);
            }
        }
        (run.count > 0).then_some(run)
    };
    if want_cq {
        let mut seen_queues = std::collections::HashSet::new();
        for (cq, r) in checked {
            queues_checked += 1;
            cq_units += r.units;
            let key = (cq.topic.clone(), cq.queue_id);
            let run = corrected(&key, merged.queues.get(&key));
            let requeue = plan.as_ref().and_then(|p| {
                p.requeues
                    .iter()
                    .find(|q| q.topic == cq.topic && q.queue_id == cq.queue_id)
            });
            seen_queues.insert(key);
            missing_findings(
                cq,
                run.as_ref(),
                &r,
                redispatch_from,
                requeue,
                opts,
                &mut sink,
            );
            missing_file_findings(cq, run.as_ref(), redispatch_from, &mut sink);
        }
        sink.absorb(cq_sink.into_inner().unwrap_or_else(|e| e.into_inner()));
        // Queues with records but no consume queue folder at all.
        let mut orphan: Vec<(&(String, i32), &QueueRun)> = merged
            .queues
            .iter()
            .filter(|(k, _)| !seen_queues.contains(*k))
            .collect();
        orphan.sort_by(|a, b| a.0.cmp(b.0));
        for ((t, q), run) in orphan {
            let key = (t.clone(), *q);
            let Some(run) = corrected(&key, Some(run)) else {
                continue;
            };
            let dir = store
                .root
                .join(paths::CONSUMEQUEUE)
                .join(t)
                .join(q.to_string());
            let cq = ConsumeQueue {
                topic: t.clone(),
                queue_id: *q,
                dir,
                files: Vec::new(),
                foreign: Vec::new(),
                odd: Vec::new(),
                file_size: store.geometry.cq_file_size(),
            };
            missing_findings(
                &cq,
                Some(&run),
                &CqResult::default(),
                redispatch_from,
                None,
                opts,
                &mut sink,
            );
        }
    }

    // Index files: structure and headers.
    let mut index_files = 0u64;
    if want_ix {
        index_files = store.index_files.len() as u64;
        index_findings(store, index_stream, &merged, structure, &mut sink);
    }

    sink.absorb(config);

    let (mut findings, per_code, counts) = sink.finish();
    locate::locate(store, &mut findings);
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.file.cmp(&b.file))
            .then_with(|| a.offset.cmp(&b.offset))
    });
    let not_listed = counts.iter().sum::<u64>() - findings.len() as u64;
    let healthy = counts[2] == 0 && !(opts.strict && counts[1] > 0);
    let parts = Part::ALL
        .iter()
        .filter(|p| opts.wants(**p))
        .map(|p| p.name())
        .collect();
    let summary = Summary {
        errors: counts[2],
        warnings: counts[1],
        infos: counts[0],
        messages: merged.records,
        bytes: merged.bytes,
        commitlog_files: segs.len() as u64,
        consume_queues: queues_checked,
        cq_units,
        index_files,
        index_entries_checked: merged.idx.checked,
        duplicate_uniq_keys: dups.found,
        findings_not_listed: not_listed,
        findings_per_code: per_code.iter().map(|(c, n)| (c.as_str(), *n)).collect(),
        healthy,
        strict: opts.strict,
        crc_checked: opts.check_crc,
        parts,
        topic: opts.topic.clone(),
        sample: opts.sample.max(1),
        store_version: format!(
            "{}{}",
            prep.version.version,
            if prep.version.from_evidence {
                ""
            } else {
                " (assumed)"
            }
        ),
        clean_shutdown: !store.abort.present,
        refuses_to_start: prep.refuses_to_start.clone(),
        recovery_mode: plan.as_ref().map(|p| p.mode),
        recovery_cut: plan.as_ref().and_then(|p| p.cut.as_ref()).map(|c| c.offset),
        recovery_drops_messages: plan.as_ref().map_or(0, |p| p.messages_dropped()),
        duplicate_window: format!(
            "every repeat of a UNIQ_KEY within {DUP_WINDOW} keyed records of its first copy is \
             found (re-puts by the broker excluded){}",
            if dups.forgotten > 0 {
                format!("; {} older keys were forgotten", dups.forgotten)
            } else {
                String::new()
            }
        ),
    };
    Ok(Report {
        findings,
        summary,
        recovery: plan,
        damaged_headers: judgement.damaged,
        walks: merged.walks,
        queue_breaks: {
            let mut v = queue_breaks;
            v.sort_unstable_by_key(|g| g.offset);
            v
        },
    })
}
