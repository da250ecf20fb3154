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

/// Queue runs of one file, without the worker's file caches.
type Runs = FastMap<Box<str>, FastMap<i32, QueueRun>>;

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
    let walk = recovery::walk_on(before, bytes, from, seg, &ctx.walk_opts, |m, place| {
        st.visit(m, place)
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
        queues: {
            let mut runs = Runs::default();
            for (q, sq) in st.queues.queues {
                runs.entry(sq.topic).or_default().insert(q, sq.run);
            }
            runs
        },
        idx: st.idx,
        records: st.records,
        bytes: st.bytes,
        data_end: st.data_end,
        max_store_ts: st.max_store_ts,
        suspects: st.suspects,
        gaps: st.gaps,
    }
}

/// The pieces of one file, joined as far as they join: each piece but the last must end
/// cleanly where the next one starts, and nothing may be wrong in any (what follows a stop
/// depends on what came before it). From the first piece that does not join on, the file is
/// walked again in one go, continuing the walk of the pieces before it.
struct Joined {
    scans: Vec<SegScan>,
    /// Where the walk must start again, with the walk of the bytes before it.
    again: Option<(usize, Option<FileWalk>)>,
}

fn join_pieces(pieces: Vec<SegScan>) -> Joined {
    let mut pieces: Vec<SegScan> = pieces.into_iter().filter(|p| p.from.is_some()).collect();
    let n = pieces.len();
    let starts: Vec<Option<u64>> = pieces.iter().map(|p| p.from).collect();
    let joins = |k: usize, p: &SegScan| {
        let Some(w) = p.walk.as_ref() else {
            return false;
        };
        match starts.get(k + 1) {
            Some(&next) => w.ends_cleanly_at(p.to) && next == Some(p.to),
            None => w.is_clean() && p.to == p.file_len,
        }
    };
    let good = match starts.first() {
        Some(Some(0)) => pieces
            .iter()
            .enumerate()
            .position(|(k, p)| !joins(k, p))
            .unwrap_or(n),
        _ => 0,
    };
    let mut walk: Option<FileWalk> = None;
    for p in pieces.iter_mut().take(good) {
        walk = match (walk, p.walk.take()) {
            (Some(w), Some(next)) => Some(w.join(next)),
            (w, next) => w.or(next),
        };
    }
    if good == n {
        if let Some(last) = pieces.last_mut() {
            last.walk = walk;
        }
        return Joined {
            scans: pieces,
            again: None,
        };
    }
    let from = pieces
        .get(good)
        .and_then(|p| p.from)
        .and_then(|f| usize::try_from(f).ok())
        .filter(|_| good > 0)
        .unwrap_or(0);
    pieces.truncate(good);
    Joined {
        scans: pieces,
        again: Some((from, walk.filter(|_| from > 0))),
    }
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
    /// The next file to merge, the pieces of each file (numbered across files) and the pieces
    /// waiting for the ones before them.
    pub(super) next: usize,
    pub(super) pieces: Vec<std::ops::Range<usize>>,
    pub(super) pending: BTreeMap<usize, SegScan>,
}

impl Merged {
    /// Take piece number `piece`; merge, in file order, every file whose pieces are all in.
    /// `again` walks the rest of a file whose pieces do not all join, from a file position on
    /// and continuing a walk.
    pub(super) fn take(
        &mut self,
        piece: usize,
        s: SegScan,
        again: &dyn Fn(usize, usize, Option<FileWalk>) -> SegScan,
    ) {
        self.pending.insert(piece, s);
        while let Some(range) = self.pieces.get(self.next).cloned() {
            if !range.clone().all(|p| self.pending.contains_key(&p)) {
                break;
            }
            let file = self.next;
            self.next += 1;
            let group: Vec<SegScan> = range.filter_map(|p| self.pending.remove(&p)).collect();
            let joined = join_pieces(group);
            for s in joined.scans {
                self.merge(s);
            }
            if let Some((from, before)) = joined.again {
                let s = again(file, from, before);
                self.merge(s);
            }
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
        for (topic, per) in s.queues {
            for (qid, run) in per {
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
