//! The commitlog pass: the context the workers share, each file walked in pieces, and the
//! pieces of each file joined and merged in file order.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use super::dups::DupWindow;
use super::index_stream::IndexStream;
use super::props::FastMap;
use super::queue_runs::{add_range, CqIndex, QueueRun, QueueRuns};
use super::seg_state::{SegState, TopicCache, MAX_HEADER_EVIDENCE};
use super::{Progress, Sink, VerifyOptions};
use crate::engine::check::headers::{Gap, Suspect};
use crate::engine::check::pieces::{file_piece_size, piece_span, PieceMaps};
use crate::engine::check::recovery::{self, FileWalk};
use crate::engine::store::Store;
use crate::format::commitlog::walk::WALK_CHUNK;
use crate::format::finding::{Code, Finding};
use crate::format::mapped::Mapped;

pub(super) struct Ctx<'a> {
    pub(super) store: &'a Store,
    pub(super) opts: &'a VerifyOptions,
    pub(super) walk_opts: recovery::WalkOptions,
    pub(super) index: Option<&'a IndexStream>,
    pub(super) cq_index: &'a CqIndex<'a>,
    pub(super) dups: DupWindow,
    pub(super) done: AtomicU64,
    pub(super) total: u64,
    pub(super) progress: Option<Progress<'a>>,
    /// Records at or after this offset are dispatched again by the broker.
    pub(super) redispatch_from: u64,
    pub(super) track_queues: bool,
    /// Whether the walk checks each record's consume queue unit as it goes. Not when the store
    /// has more queues than [`MAX_CQ_MAPS`](super::seg_state::MAX_CQ_MAPS): records of that
    /// many queues take turns, so nearly every record would open and map a consume queue file.
    /// The consume queue phase then matches every unit by reading the record it points at.
    pub(super) units_in_scan: bool,
    /// Queue count per topic in topics.json (`max(readQueueNums, writeQueueNums)`).
    pub(super) topic_queues: FastMap<String, i32>,
    /// Consume queue files mapped during the scan, shared by the workers (at most
    /// [`MAX_CQ_MAPS`]; the cache starts over above that).
    pub(super) cq_maps: Mutex<FastMap<PathBuf, Arc<Mapped>>>,
}

#[derive(Default)]
pub(super) struct IndexTally {
    pub(super) checked: u64,
    pub(super) missing: u64,
    pub(super) lag: u64,
    pub(super) first_lag: Option<u64>,
    pub(super) dangling: u64,
    pub(super) duplicates: u64,
    pub(super) time_mismatch: u64,
}

/// Queue runs of one piece (topic, queue id, run), without the worker's file caches: a flat
/// list, as a piece of a store with many queues holds many, each met once.
type Runs = Vec<(Box<str>, i32, QueueRun)>;

pub(super) struct SegScan {
    /// The commitlog file.
    index: usize,
    /// File positions the piece was walked from (`None`: no piece starts near its nominal
    /// start, the piece before covers it) and to, and the file's mapped length.
    from: Option<u64>,
    to: u64,
    file_len: u64,
    walk: Option<FileWalk>,
    sink: Sink,
    queues: Runs,
    idx: IndexTally,
    records: u64,
    bytes: u64,
    data_end: u64,
    max_store_ts: i64,
    suspects: Vec<Suspect>,
    gaps: Vec<Gap>,
}

/// The default [`VerifyOptions::piece_size`].
pub const PIECE: u64 = 64 << 20;

/// Which bytes of a commitlog file a scan walks.
pub(super) enum Span<'m> {
    /// Piece `j`, located by [`piece_span`], on the file's shared map.
    Piece(usize, &'m PieceMaps),
    /// From file position `from` to the end in one go, on a map of its own, continuing the walk
    /// of the bytes before `from` (none when `from` is 0).
    Rest(usize, Option<FileWalk>),
}

/// Walk a span of commitlog file `i` and check its records.
pub(super) fn scan_piece(ctx: &Ctx<'_>, i: usize, span: Span<'_>) -> SegScan {
    let store = ctx.store;
    let mut sink = Sink::new(ctx.opts.max_per_code);
    let empty = |sink, from| SegScan {
        index: i,
        from,
        to: 0,
        file_len: 0,
        walk: None,
        sink,
        queues: Runs::default(),
        idx: IndexTally::default(),
        records: 0,
        bytes: 0,
        data_end: 0,
        max_store_ts: 0,
        suspects: Vec::new(),
        gaps: Vec::new(),
    };
    let Some(seg) = store.commitlog.segments.get(i) else {
        return empty(sink, None);
    };
    // The workers' map, unmapped when the file is done (in parallel with the other workers);
    // the later phases map a file again only if they must read a record in it.
    let map = match &span {
        Span::Piece(_, maps) => maps.get(i, seg),
        Span::Rest(..) => seg.map().ok().map(Arc::new),
    };
    let Some(map) = map else {
        if matches!(span, Span::Piece(j, _) if j > 0) {
            return empty(sink, None);
        }
        sink.push(Finding::new(
            Code::StoreUnreadable,
            &seg.path,
            0,
            "the commitlog file cannot be mapped or read".to_string(),
        ));
        return empty(sink, Some(0));
    };
    let piece_size = file_piece_size(ctx.opts.piece_size, &store.commitlog.segments, i);
    let (from, to, before) = match span {
        Span::Piece(piece, _) => match piece_span(&map, seg, piece_size, piece) {
            Some((from, to)) => (from, to, None),
            None => return empty(sink, None),
        },
        Span::Rest(from, before) => (from, map.len(), before),
    };
    let mut st = SegState {
        ctx,
        path: &seg.path,
        seg_start: seg.start,
        sink,
        queues: QueueRuns::default(),
        idx: IndexTally::default(),
        cursor: ctx
            .index
            .map(|ix| ix.seek(seg.start.saturating_add(from as u64))),
        keys: Vec::new(),
        topics: TopicCache::default(),
        dup_batch: Vec::new(),
        until_sample: 0,
        records: 0,
        bytes: 0,
        data_end: 0,
        max_store_ts: 0,
        unreported: 0,
        open_maps: 0,
        suspects: Vec::new(),
        gaps: Vec::new(),
    };
    let bytes = map.get(..to).unwrap_or(&map);
    // The pages walked are let go as the walk goes, so a piece keeps at most a few MiB resident.
    let mut released = from;
    let walk = recovery::walk_on(before, bytes, from, seg, &ctx.walk_opts, |m, place| {
        st.visit(m, place);
        let at = usize::try_from(m.position.saturating_sub(seg.start)).unwrap_or(0);
        if at.saturating_sub(released) >= WALK_CHUNK {
            map.release(released, at);
            released = at;
        }
    });
    if let Some(ix) = ctx.index {
        st.finish_index(ix, seg.start.saturating_add(to as u64));
    }
    map.release(from, to);
    st.flush_dups();
    // Count the whole piece as done (blank space and zeros included).
    st.unreported += ((to - from.min(to)) as u64).saturating_sub(st.bytes);
    st.report_progress(true);
    SegScan {
        index: i,
        from: Some(from as u64),
        to: to as u64,
        file_len: map.len() as u64,
        walk: Some(walk),
        sink: st.sink,
        queues: st
            .queues
            .queues
            .into_iter()
            .map(|(q, sq)| (sq.topic, q, sq.run))
            .collect(),
        idx: st.idx,
        records: st.records,
        bytes: st.bytes,
        data_end: st.data_end,
        max_store_ts: st.max_store_ts,
        suspects: st.suspects,
        gaps: st.gaps,
    }
}

/// Whether a piece's walk joins the walk of the piece after it: it ends cleanly where the next
/// piece starts, or, for the file's last piece, at the file's end with nothing wrong in it (what
/// follows a stop depends on what came before it). Pieces that are `Some` cover the file without
/// gaps, so a piece's end is where the next one starts.
fn joins_next(p: &SegScan) -> bool {
    p.walk.as_ref().is_some_and(|w| {
        if p.to == p.file_len {
            w.is_clean()
        } else {
            w.ends_cleanly_at(p.to)
        }
    })
}

/// The file being merged: its pieces are joined one by one as they come in, in order. From the
/// first piece that does not join on, the rest of the file is walked again in one go, continuing
/// the walk of the pieces before it, and its later pieces are dropped.
#[derive(Default)]
pub(super) struct FileJoin {
    /// The next piece to join (numbered across files).
    next_piece: usize,
    /// The walk of the pieces joined so far.
    walk: Option<FileWalk>,
    /// A piece that walked something was seen.
    started: bool,
    /// The rest of the file was walked again: its later pieces are dropped.
    rewalked: bool,
}

/// What the commitlog pass leaves for the later phases.
pub(super) struct Merged {
    pub(super) sink: Sink,
    pub(super) walks: Vec<Option<FileWalk>>,
    pub(super) suspects: Vec<Suspect>,
    pub(super) gaps: Vec<Gap>,
    pub(super) queues: HashMap<(String, i32), QueueRun>,
    pub(super) idx: IndexTally,
    pub(super) records: u64,
    pub(super) bytes: u64,
    pub(super) data_end: u64,
    pub(super) max_store_ts: i64,
    /// The next file to merge, the pieces of each file (numbered across files), how far the
    /// file being merged is joined, and the pieces waiting for the ones before them (only those
    /// that finished early: a piece is merged as soon as the pieces before it are).
    pub(super) next: usize,
    pub(super) pieces: Vec<std::ops::Range<usize>>,
    pub(super) joining: FileJoin,
    pub(super) pending: BTreeMap<usize, SegScan>,
}

impl Merged {
    /// Take piece number `piece`; merge, in file order, every piece whose predecessors are all
    /// merged. `again` walks the rest of a file whose pieces do not all join, from a file
    /// position on and continuing a walk.
    pub(super) fn take(
        &mut self,
        piece: usize,
        s: SegScan,
        again: &dyn Fn(usize, usize, Option<FileWalk>) -> SegScan,
    ) {
        self.pending.insert(piece, s);
        while let Some(range) = self.pieces.get(self.next).cloned() {
            let j = &mut self.joining;
            j.next_piece = j.next_piece.max(range.start);
            if j.next_piece >= range.end {
                // Every piece of the file is in: it ends with the joined walk.
                let done = std::mem::take(&mut self.joining);
                if !done.rewalked {
                    if let Some(w) = self.walks.get_mut(self.next) {
                        *w = done.walk;
                    }
                }
                self.joining.next_piece = range.end;
                self.next += 1;
                continue;
            }
            let Some(mut p) = self.pending.remove(&j.next_piece) else {
                break;
            };
            j.next_piece += 1;
            if j.rewalked || p.from.is_none() {
                continue;
            }
            let file = self.next;
            let first = !j.started;
            j.started = true;
            if p.from == Some(0) && joins_next(&p) || !first && joins_next(&p) {
                let w = p.walk.take();
                j.walk = match (j.walk.take(), w) {
                    (Some(a), Some(b)) => Some(a.join(b)),
                    (a, b) => a.or(b),
                };
                self.merge(p);
                continue;
            }
            // This piece does not join: the file is walked again from its start (from the file's
            // start when it is the first), continuing the walk of the pieces before it.
            j.rewalked = true;
            let from = if first {
                0
            } else {
                p.from.and_then(|f| usize::try_from(f).ok()).unwrap_or(0)
            };
            let before = j.walk.take().filter(|_| from > 0);
            let s = again(file, from, before);
            self.merge(s);
        }
    }

    fn merge(&mut self, s: SegScan) {
        self.sink.absorb(s.sink);
        for x in s.suspects {
            if self.suspects.len() < MAX_HEADER_EVIDENCE {
                self.suspects.push(x);
            }
        }
        for g in s.gaps {
            if self.gaps.len() < MAX_HEADER_EVIDENCE {
                self.gaps.push(g);
            }
        }
        if let Some(w) = self.walks.get_mut(s.index) {
            *w = s.walk;
        }
        self.records += s.records;
        self.bytes += s.bytes;
        self.data_end = self.data_end.max(s.data_end);
        self.max_store_ts = self.max_store_ts.max(s.max_store_ts);
        let t = &mut self.idx;
        t.checked += s.idx.checked;
        t.missing += s.idx.missing;
        t.lag += s.idx.lag;
        t.first_lag = t.first_lag.or(s.idx.first_lag);
        t.dangling += s.idx.dangling;
        t.duplicates += s.idx.duplicates;
        t.time_mismatch += s.idx.time_mismatch;
        for (topic, qid, run) in s.queues {
            {
                match self.queues.get_mut(&(topic.to_string(), qid)) {
                    None => {
                        self.queues.insert((topic.to_string(), qid), run);
                    }
                    Some(acc) => {
                        if run.first_q != acc.next_q && self.gaps.len() < MAX_HEADER_EVIDENCE {
                            self.gaps.push(Gap {
                                topic: topic.to_string(),
                                queue_id: qid,
                                expected: acc.next_q,
                                found: run.first_q,
                                offset: run.first_pos,
                                prev_offset: acc.last_pos,
                            });
                        }
                        acc.next_q = run.next_q;
                        acc.last_pos = run.last_pos;
                        acc.count += run.count;
                        acc.matched += run.matched;
                        acc.ranges_overflow |= run.ranges_overflow;
                        for (a, b) in run.ranges {
                            add_range(&mut acc.ranges, &mut acc.ranges_overflow, a, b);
                        }
                        acc.beyond += run.beyond;
                        if acc.first_beyond.is_none() {
                            acc.first_beyond = run.first_beyond;
                        }
                    }
                }
            }
        }
    }
}
