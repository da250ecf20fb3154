//! The steps of one `verify` run after the index stream is open: the commitlog pass, the
//! recovery plan, the consume queues, the judgement of damaged headers, the queues' missing
//! units, the index files, and the summary.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::dups::{DupWindow, Sealed};
use super::findings::{
    dup_findings, entry_findings, first_missing, gap_findings, header_findings, layout_findings,
    missing_file_findings, missing_findings,
};
use super::index_stream::{index_findings, IndexStream};
use super::props::FastMap;
use super::queue_check::{check_queue, CqCtx, CqResult, LazyMaps};
use super::queue_runs::{topic_queue_counts, CqIndex, QueueRun};
use super::recovery_findings::{
    checkpoint_findings, mark_blanks_in_place, marker_findings, walk_findings,
};
use super::scan::{scan_piece, Ctx, IndexTally, Merged, Span};
use super::sink::Sink;
use super::{seg_state, Part, Phase, Progress, Report, Summary, VerifyOptions, DUP_WINDOW};
use crate::engine::check::headers::{self, Judgement, QueueSlot};
use crate::engine::check::pieces::{file_piece_size, piece_count, PieceMaps};
use crate::engine::check::recovery::{self, FileWalk, Prepared, RecoveryMode, RecoveryPlan};
use crate::engine::store::{paths, Store};
use crate::format::commitlog::read::Segment;
use crate::format::consumequeue::ConsumeQueue;
use crate::format::error::Result;
use crate::format::finding::{Code, Finding};

/// What the side thread found: each index file's structure findings, and the config files'.
pub(super) type SideResult = (Vec<Vec<Finding>>, Sink);

/// [`verify`](super::verify) after the index stream is open and its file checks have started on
/// `side_thread`.
pub(super) fn verify_with_side(
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
    if want_cl {
        let file_size = store.geometry.commitlog_file_size.value;
        layout_findings(store, file_size, &prep, &mut sink);
    }
    entry_findings(store, &prep, (want_cl, want_cq, want_ix), &mut sink);

    // The commitlog pass.
    let maps = LazyMaps::new(segs);
    let cq_index = queue_ends_index(store, &prep);
    let redispatch_from = redispatch_from(store, &prep);
    let shared = (index_stream, &cq_index);
    let ctx = scan_context(store, opts, &prep, shared, redispatch_from, progress);
    let merged = Mutex::new(new_merged(segs, opts));
    if scan {
        scan_commitlog(&ctx, segs, opts, &merged);
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
        Some(plan_from_walks(store, &prep, &merged, opts, want_cq)?)
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
    let lone = lone_records(store, &merged);
    let claimable = claimable_offsets(&merged, &lone);
    let (mut checked, cq_sink) = if want_cq {
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
        check_all_queues(store, &cctx, &merged, progress)?
    } else {
        (Vec::new(), Sink::new(opts.max_per_code))
    };
    let judgement = judge_headers(store, &merged, &mut checked, &lone, want_cl, &mut sink);
    let queue_breaks = unexplained_breaks(&merged, &judgement);

    let (mut queues_checked, mut cq_units) = (0u64, 0u64);
    if want_cq {
        let miscounted = miscounted_records(&judgement);
        let steps = QueueSteps {
            store,
            opts,
            merged: &merged,
            miscounted: &miscounted,
            plan: plan.as_ref(),
            redispatch_from,
        };
        let seen: HashSet<(String, i32)> = checked
            .iter()
            .map(|(cq, _)| (cq.topic.clone(), cq.queue_id))
            .collect();
        (queues_checked, cq_units) = steps.missing_unit_findings(checked, &mut sink);
        sink.absorb(cq_sink);
        steps.orphan_queue_findings(&seen, &mut sink);
    }

    // Index files: structure and headers.
    let mut index_files = 0u64;
    if want_ix {
        index_files = store.index_files.len() as u64;
        index_findings(store, index_stream, &merged, structure, &mut sink);
    }
    sink.absorb(config);

    let (findings, summary) = summarize(
        store,
        opts,
        &prep,
        plan.as_ref(),
        &merged,
        &dups,
        sink,
        (queues_checked, cq_units, index_files),
    );
    Ok(Report {
        findings,
        summary,
        recovery: plan,
        damaged_headers: judgement.damaged,
        walks: merged.walks,
        queue_breaks,
    })
}

/// Each topic's queues with where recovery finds them ending, for the walk's unit checks.
fn queue_ends_index<'s>(store: &'s Store, prep: &Prepared) -> CqIndex<'s> {
    let mut cq_index: CqIndex<'_> = FastMap::default();
    for ((t, q), cq) in &store.queues {
        let end = prep.queue_ends.get(&(t.clone(), *q)).map_or(0, |e| e.0);
        cq_index
            .entry(t.as_str())
            .or_default()
            .insert(*q, (end, cq));
    }
    cq_index
}

/// The commitlog offset from which the broker's next start dispatches records again.
fn redispatch_from(store: &Store, prep: &Prepared) -> u64 {
    let start_offset = prep
        .start_index
        .and_then(|i| store.commitlog.segments.get(i))
        .map_or(0, |s| s.start);
    match prep.mode {
        RecoveryMode::Abnormal if store.dledger.is_none() => start_offset,
        _ => prep.dispatch_from(store),
    }
}

/// What every worker of the commitlog pass shares.
fn scan_context<'a>(
    store: &'a Store,
    opts: &'a VerifyOptions,
    prep: &Prepared,
    (index, cq_index): (Option<&'a IndexStream>, &'a CqIndex<'a>),
    redispatch_from: u64,
    progress: Option<Progress<'a>>,
) -> Ctx<'a> {
    let want_cq = opts.wants(Part::ConsumeQueue);
    let want_cl = opts.wants(Part::Commitlog);
    let mut walk_opts = prep.walk_options(store, opts.check_crc);
    walk_opts.check_crc = opts.check_crc;
    Ctx {
        store,
        opts,
        walk_opts,
        index,
        cq_index,
        dups: DupWindow::new(opts.max_per_code),
        done: AtomicU64::new(0),
        total: store.commitlog.segments.iter().map(|s| s.len).sum(),
        progress,
        redispatch_from,
        track_queues: want_cq || want_cl,
        units_in_scan: store.queues.len() <= seg_state::MAX_CQ_MAPS,
        topic_queues: topic_queue_counts(store),
        cq_maps: Mutex::new(FastMap::default()),
    }
}

/// The merge state before the first piece comes in.
fn new_merged(segs: &[Segment], opts: &VerifyOptions) -> Merged {
    let mut at = 0;
    let pieces = segs
        .iter()
        .enumerate()
        .map(|(i, seg)| {
            let n = piece_count(seg.len, file_piece_size(opts.piece_size, segs, i));
            at += n;
            at - n..at
        })
        .collect();
    Merged {
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
        pieces,
        joining: Default::default(),
        pending: BTreeMap::new(),
    }
}

/// The commitlog pass: rayon workers take the pieces in file order (so neighbouring ones are
/// read at the same time and the duplicate window and the merge buffer stay small) and merge
/// each as it is done.
fn scan_commitlog(ctx: &Ctx<'_>, segs: &[Segment], opts: &VerifyOptions, merged: &Mutex<Merged>) {
    let pieces: Vec<(usize, usize)> = segs
        .iter()
        .enumerate()
        .flat_map(|(i, seg)| {
            let n = piece_count(seg.len, file_piece_size(opts.piece_size, segs, i));
            (0..n).map(move |j| (i, j))
        })
        .collect();
    let again = |i: usize, from: usize, before: Option<FileWalk>| {
        scan_piece(ctx, i, Span::Rest(from, before))
    };
    let piece_maps = PieceMaps::new(segs, opts.piece_size);
    let next = AtomicUsize::new(0);
    let threads = rayon::current_num_threads().max(1);
    rayon::scope(|s| {
        for _ in 0..threads {
            s.spawn(|_| loop {
                if opts.interrupted() {
                    break;
                }
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(i, j)) = pieces.get(k) else { break };
                let r = scan_piece(ctx, i, Span::Piece(j, &piece_maps));
                piece_maps.done(i);
                if let Ok(mut m) = merged.lock() {
                    m.take(k, r, &again);
                }
            });
        }
    });
}

/// The recovery plan from the pass's walks, with what the start does to each queue when the
/// consume queues are checked.
fn plan_from_walks(
    store: &Store,
    prep: &Prepared,
    merged: &Merged,
    opts: &VerifyOptions,
    want_cq: bool,
) -> Result<RecoveryPlan> {
    let refs: Vec<Option<&FileWalk>> = merged.walks.iter().map(Option::as_ref).collect();
    let mut plan = recovery::finish(store, prep, &refs, opts.check_crc)?;
    if want_cq {
        recovery::add_requeues(store, prep, &mut plan)?;
    }
    Ok(plan)
}

/// Records alone in a queue that has no consume queue folder: their header may be the damage.
fn lone_records(store: &Store, merged: &Merged) -> Vec<(u64, QueueSlot)> {
    merged
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
        .collect()
}

/// The records a unit's claim can be judged about (see `headers::judge`): claims about others
/// are never taken, and a store with many wrong units would keep one per unit.
fn claimable_offsets(merged: &Merged, lone: &[(u64, QueueSlot)]) -> HashSet<u64> {
    merged
        .suspects
        .iter()
        .map(|s| s.offset)
        .chain(lone.iter().map(|(o, _)| *o))
        .chain(merged.gaps.iter().flat_map(|g| [g.offset, g.prev_offset]))
        .collect()
}

/// Every consume queue (of the topic asked for) checked on its own, in parallel; their findings
/// in one capped sink.
fn check_all_queues<'s>(
    store: &'s Store,
    cctx: &CqCtx<'_>,
    merged: &Merged,
    progress: Option<Progress<'_>>,
) -> Result<(Vec<(&'s ConsumeQueue, CqResult)>, Sink)> {
    let opts = cctx.opts;
    let cq_sink = Mutex::new(Sink::new(opts.max_per_code));
    let list: Vec<&ConsumeQueue> = store
        .queues
        .values()
        .filter(|q| opts.in_topic(&q.topic))
        .collect();
    let n = list.len() as u64;
    let done = AtomicU64::new(0);
    use rayon::prelude::*;
    let results: Vec<Result<CqResult>> = list
        .par_iter()
        .map(|cq| {
            if opts.interrupted() {
                return Err(crate::format::Error::interrupted(&store.root, "verify"));
            }
            let run = merged.queues.get(&(cq.topic.clone(), cq.queue_id));
            // Only what the judgement and the missing units need stays: the findings go to
            // the capped sink, the matched ranges are reduced to the first gap in them.
            let r = check_queue(cctx, cq, run).map(|mut r| {
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
            r
        })
        .collect();
    let mut checked = Vec::with_capacity(list.len());
    for (cq, r) in list.into_iter().zip(results) {
        checked.push((cq, r?));
    }
    Ok((
        checked,
        cq_sink.into_inner().unwrap_or_else(|e| e.into_inner()),
    ))
}

/// Judges the records whose header the walk or a unit doubts, with what every queue saw; the
/// units' claims the judgement does not accept become findings.
fn judge_headers(
    store: &Store,
    merged: &Merged,
    checked: &mut [(&ConsumeQueue, CqResult)],
    lone: &[(u64, QueueSlot)],
    want_cl: bool,
    sink: &mut Sink,
) -> Judgement {
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
    let judgement = headers::judge(&merged.suspects, &claims, &merged.gaps, lone, &ends);
    if want_cl {
        header_findings(store, &judgement, sink);
        gap_findings(store, &merged.gaps, &judgement, sink);
    }
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
    judgement
}

/// Breaks in queue offset sequences that no damaged header explains (the broker's dispatch
/// misplaces, or for a repeat skips, the units from there on), in commitlog order.
fn unexplained_breaks(merged: &Merged, judgement: &Judgement) -> Vec<headers::Gap> {
    let mut v: Vec<headers::Gap> = merged
        .gaps
        .iter()
        .enumerate()
        .filter(|(i, _)| !judgement.explained_gaps.contains(i))
        .map(|(_, g)| g.clone())
        .collect();
    v.sort_unstable_by_key(|g| g.offset);
    v
}

/// The queue offsets damaged records were counted at, by the queue their header names.
fn miscounted_records(judgement: &Judgement) -> HashMap<(String, i32), Vec<i64>> {
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
    miscounted
}

/// What the missing-unit findings of every queue need.
struct QueueSteps<'a> {
    store: &'a Store,
    opts: &'a VerifyOptions,
    merged: &'a Merged,
    miscounted: &'a HashMap<(String, i32), Vec<i64>>,
    plan: Option<&'a RecoveryPlan>,
    redispatch_from: u64,
}

impl QueueSteps<'_> {
    /// A queue's run of records without those a damaged header only seemed to put in it.
    fn corrected(&self, key: &(String, i32), run: Option<&QueueRun>) -> Option<QueueRun> {
        let mut run = run?.clone();
        for &q in self.miscounted.get(key).map(Vec::as_slice).unwrap_or(&[]) {
            run.count = run.count.saturating_sub(1);
            if q >= 0 && q as u64 >= run.cq_end {
                run.beyond = run.beyond.saturating_sub(1);
            }
        }
        (run.count > 0).then_some(run)
    }

    /// The records of each checked queue that no unit serves, with what the next start does to
    /// the queue. Returns the queues and units checked.
    fn missing_unit_findings(
        &self,
        checked: Vec<(&ConsumeQueue, CqResult)>,
        sink: &mut Sink,
    ) -> (u64, u64) {
        let (mut queues, mut units) = (0u64, 0u64);
        for (cq, r) in checked {
            queues += 1;
            units += r.units;
            let key = (cq.topic.clone(), cq.queue_id);
            let run = self.corrected(&key, self.merged.queues.get(&key));
            let requeue = self.plan.and_then(|p| {
                p.requeues
                    .iter()
                    .find(|q| q.topic == cq.topic && q.queue_id == cq.queue_id)
            });
            let from = self.redispatch_from;
            missing_findings(cq, run.as_ref(), &r, from, requeue, self.opts, sink);
            missing_file_findings(cq, run.as_ref(), from, sink);
        }
        (queues, units)
    }

    /// Queues with records but no consume queue folder at all (none of the `checked` ones).
    fn orphan_queue_findings(&self, checked: &HashSet<(String, i32)>, sink: &mut Sink) {
        let mut orphan: Vec<(&(String, i32), &QueueRun)> = self
            .merged
            .queues
            .iter()
            .filter(|(k, _)| !checked.contains(*k))
            .collect();
        orphan.sort_by(|a, b| a.0.cmp(b.0));
        for ((t, q), run) in orphan {
            let key = (t.clone(), *q);
            let Some(run) = self.corrected(&key, Some(run)) else {
                continue;
            };
            let cq = ConsumeQueue {
                topic: t.clone(),
                queue_id: *q,
                dir: self
                    .store
                    .root
                    .join(paths::CONSUMEQUEUE)
                    .join(t)
                    .join(q.to_string()),
                files: Vec::new(),
                foreign: Vec::new(),
                odd: Vec::new(),
                file_size: self.store.geometry.cq_file_size(),
            };
            let none = CqResult::default();
            let from = self.redispatch_from;
            missing_findings(&cq, Some(&run), &none, from, None, self.opts, sink);
        }
    }
}

/// The findings in printed order, and the counts.
#[allow(clippy::too_many_arguments)]
fn summarize(
    store: &Store,
    opts: &VerifyOptions,
    prep: &Prepared,
    plan: Option<&RecoveryPlan>,
    merged: &Merged,
    dups: &Sealed,
    sink: Sink,
    (consume_queues, cq_units, index_files): (u64, u64, u64),
) -> (Vec<Finding>, Summary) {
    let (mut findings, per_code, counts) = sink.finish();
    super::locate::locate(store, &mut findings);
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
    let assumed = if prep.version.from_evidence {
        ""
    } else {
        " (assumed)"
    };
    let forgotten = if dups.forgotten > 0 {
        format!("; {} older keys were forgotten", dups.forgotten)
    } else {
        String::new()
    };
    let summary = Summary {
        errors: counts[2],
        warnings: counts[1],
        infos: counts[0],
        messages: merged.records,
        bytes: merged.bytes,
        commitlog_files: store.commitlog.segments.len() as u64,
        consume_queues,
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
        store_version: format!("{}{assumed}", prep.version.version),
        clean_shutdown: !store.abort.present,
        refuses_to_start: prep.refuses_to_start.clone(),
        recovery_mode: plan.map(|p| p.mode),
        recovery_cut: plan.and_then(|p| p.cut.as_ref()).map(|c| c.offset),
        recovery_drops_messages: plan.map_or(0, |p| p.messages_dropped()),
        duplicate_window: format!(
            "every repeat of a UNIQ_KEY within {DUP_WINDOW} keyed records of its first copy is \
             found (re-puts by the broker excluded){forgotten}"
        ),
    };
    (findings, summary)
}
