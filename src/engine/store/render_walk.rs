//! The commitlog's messages rendered in commitlog order on several threads (`dump commitlog`).
//!
//! One thread walks the files in order ([`walk_map`]) and hands batches of about 1 MiB of
//! records, in place in their file's map, to the rendering threads; the calling thread writes
//! the rendered batches in the order they were walked. Rendering (JSON escaping of bodies) is
//! most of the work, so it is what runs in parallel; memory stays a few batches per thread.

use std::collections::BTreeMap;
use std::ops::{ControlFlow, Range};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use crate::engine::check::recovery::resync;
use crate::engine::store::message_json::RecordFile;
use crate::format::commitlog::read::{parse_record, Record, Segment, SegmentKind};
use crate::format::commitlog::{walk_map, MessageRef, SegmentEnd};
use crate::format::dledger::EntryHeader;
use crate::format::error::Error;
use crate::format::mapped::Mapped;

/// Which messages: from a commitlog offset on, of one topic, at most `limit` of them.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub from: u64,
    pub topic: Option<String>,
    pub limit: Option<u64>,
    /// Also the records of a DLedger log's uncommitted entries (the broker serves none of them).
    pub uncommitted: bool,
}

/// The DLedger entry a record is wrapped in, and whether the broker serves it.
#[derive(Debug, Clone, Copy)]
pub struct EntryPlace {
    pub header: EntryHeader,
    /// At or before the committed position ([`Segment::served_end`]).
    pub committed: bool,
}

/// How the walk went.
#[derive(Debug, Default)]
pub struct WalkOutcome {
    /// Commitlog files walked.
    pub files: u64,
    /// The limit was reached with messages left.
    pub more: bool,
    /// Damage met, said as the broker's recovery would meet it, and where the walk took up
    /// again after it.
    pub problems: Vec<String>,
    /// No record starts at [`Selection::from`]: the walk started at this later record.
    pub started_at: Option<u64>,
}

/// Records of one commitlog file, in place in its map, for rendering.
struct Batch {
    seq: u64,
    segment: usize,
    map: Arc<Mapped>,
    /// Byte range in the map of each record.
    records: Vec<Range<usize>>,
}

/// A batch rendered: its bytes and how many messages they hold.
struct Rendered<E> {
    seq: u64,
    bytes: Result<Vec<u8>, E>,
    count: u64,
}

/// Bytes of records per batch.
const BATCH_BYTES: usize = 1 << 20;

/// Render the messages of `segments` that `sel` keeps with `render` on `workers` threads, and
/// hand each batch's bytes and message count to `write` in commitlog order. `progress` hears
/// the bytes walked so far. An error from `write` stops the walk and is returned.
pub fn render_in_order<E, R, W>(
    segments: &[Segment],
    sel: &Selection,
    workers: usize,
    progress: &(dyn Fn(u64) + Sync),
    render: R,
    mut write: W,
) -> Result<WalkOutcome, E>
where
    E: From<Error> + Send,
    R: Fn(&mut Vec<u8>, &MessageRef<'_>, &RecordFile<'_>, Option<&EntryPlace>) -> Result<(), E>
        + Sync,
    W: FnMut(&[u8], u64) -> Result<(), E>,
{
    let workers = workers.max(1);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (batch_tx, batch_rx) = mpsc::sync_channel::<Batch>(workers * 2);
        let batch_rx = Arc::new(Mutex::new(batch_rx));
        let (out_tx, out_rx) = mpsc::sync_channel::<Rendered<E>>(workers * 2);
        let (stop_ref, render) = (&stop, &render);
        let walker = s.spawn(move || walk_all(segments, sel, progress, stop_ref, batch_tx));
        for _ in 0..workers {
            let (rx, tx) = (Arc::clone(&batch_rx), out_tx.clone());
            s.spawn(move || loop {
                let next = match rx.lock() {
                    Ok(r) => r.recv(),
                    Err(_) => break,
                };
                let Ok(batch) = next else { break };
                if tx.send(render_batch(&batch, segments, render)).is_err() {
                    break;
                }
            });
        }
        drop((out_tx, batch_rx));
        let mut pending = BTreeMap::new();
        let mut next = 0u64;
        let mut failed = None;
        'receive: while let Ok(r) = out_rx.recv() {
            pending.insert(r.seq, r);
            while let Some(r) = pending.remove(&next) {
                next += 1;
                if let Err(e) = r.bytes.and_then(|b| write(&b, r.count)) {
                    failed = Some(e);
                    stop.store(true, Ordering::Relaxed);
                    break 'receive;
                }
            }
        }
        drop(out_rx);
        let walked = walker.join().unwrap_or_else(|_| {
            Err(Error::worker_panicked(
                segments.first().map_or(Path::new("commitlog"), |s| &s.path),
                "the commitlog walk",
            ))
        });
        match failed {
            Some(e) => Err(e),
            None => walked.map_err(E::from),
        }
    })
}

fn render_batch<E, R>(b: &Batch, segments: &[Segment], render: &R) -> Rendered<E>
where
    R: Fn(&mut Vec<u8>, &MessageRef<'_>, &RecordFile<'_>, Option<&EntryPlace>) -> Result<(), E>,
{
    let len: usize = b.records.iter().map(Range::len).sum();
    let mut bytes = Vec::with_capacity(len + len / 2);
    let mut count = 0;
    let Some(seg) = segments.get(b.segment) else {
        return Rendered {
            seq: b.seq,
            bytes: Ok(bytes),
            count,
        };
    };
    let file = RecordFile::new(&seg.path);
    for range in &b.records {
        if let Ok(Record::Message(m)) = parse_record(&b.map, range.start, seg.start, false) {
            let place = match seg.kind {
                SegmentKind::Commitlog => None,
                SegmentKind::Dledger => range
                    .start
                    .checked_sub(seg.header_len())
                    .and_then(|at| b.map.get(at..))
                    .and_then(EntryHeader::from_bytes)
                    .map(|header| EntryPlace {
                        header,
                        committed: !seg.uncommitted(m.position),
                    }),
            };
            if let Err(e) = render(&mut bytes, &m, &file, place.as_ref()) {
                return Rendered {
                    seq: b.seq,
                    bytes: Err(e),
                    count,
                };
            }
            count += 1;
        }
    }
    // the pages rendered are not read again (see `Mapped::release`)
    if let (Some(first), Some(last)) = (b.records.first(), b.records.last()) {
        b.map.release(first.start, last.end);
    }
    Rendered {
        seq: b.seq,
        bytes: Ok(bytes),
        count,
    }
}

/// Walk the commitlog files in order, sending the records `sel` keeps.
fn walk_all(
    segments: &[Segment],
    sel: &Selection,
    progress: &(dyn Fn(u64) + Sync),
    stop: &AtomicBool,
    tx: mpsc::SyncSender<Batch>,
) -> Result<WalkOutcome, Error> {
    let mut out = WalkOutcome::default();
    let limit = sel.limit.unwrap_or(u64::MAX);
    let mut kept = 0u64;
    let mut seq = 0u64;
    let mut done_bytes = 0u64;
    let mut gap: Option<String> = None;
    let mut hung_up = false;
    let mut first = true;
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        let all;
        let seg = if sel.uncommitted && seg.served_end.is_some() {
            all = seg.with_uncommitted();
            &all
        } else {
            seg
        };
        if seg.start.saturating_add(seg.len) <= sel.from {
            done_bytes += seg.len;
            continue;
        }
        out.files += 1;
        let map = Arc::new(seg.map()?);
        let Some(mut file_pos) = start_in_segment(&map, seg, sel.from) else {
            done_bytes += seg.len;
            continue;
        };
        let record_at = seg.start + file_pos + seg.header_len() as u64;
        if first && sel.from > 0 && record_at != sel.from {
            out.started_at = Some(record_at);
        }
        first = false;
        let new_batch = |seq: u64| Batch {
            seq,
            segment: i,
            map: Arc::clone(&map),
            records: Vec::new(),
        };
        let mut batch = new_batch(seq);
        let mut batch_bytes = 0;
        let mut seen = 0u64;
        // The file is walked as the broker's recovery walks it; at damage the walk takes up again
        // at the next record (as verify's walk does), and the damaged range is said.
        let w = loop {
            let w = walk_map(&map, seg, file_pos, true, false, |m| {
                seen += 1;
                if seen.is_multiple_of(4096) {
                    if stop.load(Ordering::Relaxed) {
                        hung_up = true;
                        return ControlFlow::Break(());
                    }
                    progress(done_bytes + (m.position - seg.start));
                }
                if sel.topic.as_deref().is_some_and(|t| m.topic != t) {
                    return ControlFlow::Continue(());
                }
                if kept >= limit {
                    out.more = true;
                    return ControlFlow::Break(());
                }
                kept += 1;
                let at = (m.position - seg.start) as usize;
                batch.records.push(at..at + m.raw.len());
                batch_bytes += m.raw.len();
                if batch_bytes >= BATCH_BYTES {
                    seq += 1;
                    batch_bytes = 0;
                    let full = std::mem::replace(&mut batch, new_batch(seq));
                    if tx.send(full).is_err() {
                        hung_up = true;
                        return ControlFlow::Break(());
                    }
                }
                ControlFlow::Continue(())
            });
            let (Some(e), SegmentEnd::Corrupt { pos }) = (&w.error, &w.end) else {
                break w;
            };
            if w.stopped || hung_up {
                break w;
            }
            let next = resync(seg.served(&map), pos + 1, seg)
                .filter(|&p| matches!(seg.record_at(&map, p, false), Ok(Record::Message(_))));
            let Some(next) = next else {
                break w;
            };
            out.problems.push(format!(
                "{e}; commitlog offsets {}..{next_off} are damaged (the broker's recovery would \
                 stop there, dropping everything after it); the walk goes on at the next record, \
                 offset {next_off}",
                seg.start + *pos as u64,
                next_off = seg.start + next as u64,
            ));
            file_pos = next as u64;
        };
        if !batch.records.is_empty() {
            seq += 1;
            if tx.send(batch).is_err() {
                hung_up = true;
            }
        }
        done_bytes += seg.len;
        if w.stopped || hung_up {
            break;
        }
        // data in a file after one that ended in zeros: a pre-allocated empty next file is normal
        if w.records > 0 {
            out.problems.extend(gap.take());
        }
        if let Some(e) = w.error {
            out.problems.push(format!(
                "{e}; the broker's recovery would stop at this record, dropping everything after it"
            ));
        } else if let (true, SegmentEnd::EndOfData { pos }) = (i != last, &w.end) {
            gap = Some(format!(
                "{}: data ends at byte {pos} without a blank record, but later files hold data \
                 (the broker's recovery stops there)",
                seg.path.display()
            ));
        }
    }
    Ok(out)
}

/// Where the walk of `seg` starts for a walk from `from`: the file's start, the position itself
/// when a record starts there, else the next record after it (`None`: none in this file).
fn start_in_segment(map: &Mapped, seg: &Segment, from: u64) -> Option<u64> {
    if from <= seg.start {
        return Some(0);
    }
    let pos = seg.walk_pos(usize::try_from(from - seg.start).ok()?);
    if matches!(seg.record_at(map, pos, false), Ok(Record::Message(_))) {
        return Some(pos as u64);
    }
    let next = resync(map, pos, seg)?;
    matches!(seg.record_at(map, next, false), Ok(Record::Message(_))).then_some(next as u64)
}
