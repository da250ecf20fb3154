//! Findings about the store's entries and file layout, damaged record headers, breaks in queue
//! offset sequences, duplicate UNIQ_KEYs and records no consume queue unit points at.

use super::dups;
use super::queue_check::{
    first_unmatched, normalized, record_at, unit_location, CqCtx, CqResult, LazyMaps,
};
use super::queue_runs::QueueRun;
use super::{Sink, VerifyOptions};
use crate::engine::check::headers::{self, Gap};
use crate::engine::check::recovery::{requeue_step, Prepared, Requeue};
use crate::engine::store::version::BrokerVersion;
use crate::engine::store::{paths, Store};
use crate::format::commitlog::prop;
use crate::format::consumequeue::ConsumeQueue;
use crate::format::entry::{Entry, Kind};
use crate::format::finding::{Code, Finding};

/// One `commitlog.bad_header` finding per damaged field.
pub(super) fn header_findings(store: &Store, j: &headers::Judgement, sink: &mut Sink) {
    for d in &j.damaged {
        let Some(seg) = store.commitlog.segment_for(d.offset) else {
            continue;
        };
        let proven = match &d.fix {
            Some(p) => format!("; it was {}: {}", p.value, p.evidence),
            None => "; nothing in the store proves what it was".to_string(),
        };
        let action = match d.field {
            headers::Field::PhysicalOffset => format!(
                "the broker does not check it: units and index entries dispatched from this \
                 record point at offset {}, and its offset message id names that offset",
                d.found
            ),
            headers::Field::SysFlag => "the broker does not check it: its transaction type \
                gets no unit on a dispatch, and the units after it in its queue are misplaced"
                .to_string(),
            headers::Field::QueueOffset => format!(
                "the broker does not check it: a dispatch puts this record at queue offset {} of \
                 {}/{}, and misplaces the units after it",
                d.found, d.named.topic, d.named.queue_id
            ),
            headers::Field::Topic | headers::Field::QueueId => {
                match crate::format::layout::check_topic(&d.named.topic)
                    .and_then(|_| crate::format::layout::check_queue_id(d.named.queue_id))
                {
                    Ok(()) => format!(
                        "the broker does not check it: a dispatch puts this record into \
                         consumequeue/{}/{}/ at queue offset {}, not into its own queue{}",
                        d.named.topic,
                        d.named.queue_id,
                        d.named.queue_offset,
                        if store
                            .queues
                            .contains_key(&(d.named.topic.clone(), d.named.queue_id))
                        {
                            ""
                        } else {
                            " (a queue the store never had)"
                        }
                    ),
                    Err(e) => format!(
                        "the broker does not check it: a dispatch makes a consume queue path of \
                         it ({e})"
                    ),
                }
            }
        };
        sink.push(
            Finding::new(
                Code::CommitlogBadHeader,
                &seg.path,
                d.offset - seg.start,
                format!("{}: {}{proven}", d.title(), d.why),
            )
            .about_record(d.offset)
            .with_action(action),
        );
    }
}

/// Breaks in queue offset sequences that no damaged header explains.
pub(super) fn gap_findings(store: &Store, gaps: &[Gap], j: &headers::Judgement, sink: &mut Sink) {
    for (i, g) in gaps.iter().enumerate() {
        if j.explained_gaps.contains(&i) {
            continue;
        }
        let Some(seg) = store.commitlog.segment_for(g.offset) else {
            continue;
        };
        let (code, what) = if g.found > g.expected {
            (Code::CommitlogQueueOffsetGap, "jumps")
        } else {
            (Code::CommitlogQueueOffsetRepeat, "goes back")
        };
        sink.push(
            Finding::new(
                code,
                &seg.path,
                g.offset - seg.start,
                format!(
                    "queue {}/{}: QUEUEOFFSET {what} from {} to {} at commitlog offset {}",
                    g.topic,
                    g.queue_id,
                    g.expected.wrapping_sub(1),
                    g.found,
                    g.offset
                ),
            )
            .about_record(g.offset)
            .with_action(if g.found > g.expected {
                "the broker does not check it; its consume queue writer appends at its own \
                 position, so this and later units of the queue are misplaced"
            } else {
                "the broker does not check it; its consume queue writer takes this record for a \
                 repeat and gives it no unit (or, at queue offset 0, appends it at its own \
                 position): consumers miss it or read the queue misplaced"
            }),
        );
    }
}

/// The loader's answer to an entry of a mapped file folder that is not a regular file: 4.9
/// compares every entry's length with the file size and refuses to start; 5.x skips folders.
fn loader_action(e: &Entry, v5: bool) -> &'static str {
    if v5 && e.kind == Kind::Dir {
        "5.x skips folders here; the data a file of this name would hold is missing"
    } else {
        "MappedFileQueue.load fails on it (its length is not the file size): the broker does not start"
    }
}

/// Entries of the store that are not what the broker can load: never opened, reported.
pub(super) fn entry_findings(
    store: &Store,
    prep: &Prepared,
    parts: (bool, bool, bool),
    sink: &mut Sink,
) {
    let (cl, cq, ix) = parts;
    let v5 = prep.version.version == BrokerVersion::V5;
    let what = |e: &Entry| {
        format!(
            "{}{}",
            if e.symlink { "a symlink to " } else { "" },
            e.kind.describe()
        )
    };
    if cl {
        for e in &store.commitlog.odd {
            sink.push(
                Finding::new(
                    Code::CommitlogNotAFile,
                    &e.path,
                    0,
                    format!(
                        "{} in commitlog/, where only commitlog files belong",
                        what(e)
                    ),
                )
                .with_action(loader_action(e, v5)),
            );
        }
        for name in [paths::CHECKPOINT, paths::ABORT, paths::LOCK] {
            let e = crate::format::entry::probe(&store.root.join(name));
            if !matches!(e.kind, Kind::File { .. } | Kind::Missing) {
                sink.push(
                    Finding::new(
                        Code::StoreNotAFile,
                        &e.path,
                        0,
                        format!("{name} is {}", what(&e)),
                    )
                    .with_action(match name {
                        paths::CHECKPOINT => "the broker cannot map it: it does not start",
                        paths::ABORT => {
                            "the broker takes it for an unclean shutdown and fails to replace it"
                        }
                        _ => "the broker cannot open it to take its lock: it does not start",
                    }),
                );
            }
        }
    }
    if cq {
        for q in store.queues.values() {
            for p in &q.foreign {
                sink.push(
                    Finding::new(
                        Code::ConsumequeueForeignFile,
                        p,
                        0,
                        format!(
                            "a file in the queue folder of {}/{} whose name is not a 20-digit offset",
                            q.topic, q.queue_id
                        ),
                    )
                    .with_action("Long.parseLong fails on its name: the broker does not start"),
                );
            }
            for e in &q.odd {
                sink.push(
                    Finding::new(
                        Code::ConsumequeueNotAFile,
                        &e.path,
                        0,
                        format!(
                            "{} in the queue folder of {}/{}",
                            what(e),
                            q.topic,
                            q.queue_id
                        ),
                    )
                    .with_action(loader_action(e, v5)),
                );
            }
        }
        for e in &store.consumequeue_odd {
            sink.push(
                Finding::new(
                    Code::ConsumequeueForeignEntry,
                    &e.path,
                    0,
                    format!("{} under consumequeue/ that is not a queue folder", what(e)),
                )
                .with_action("the broker skips it"),
            );
        }
        for (p, e) in &store.bad_topic_dirs {
            sink.push(
                Finding::new(
                    Code::ConsumequeueBadTopicDir,
                    p,
                    0,
                    format!("the folder name is no topic the broker accepts: {e}"),
                )
                .with_action("the broker loads it as a topic; no client can name it"),
            );
        }
    }
    if ix {
        for e in &store.index_odd {
            sink.push(
                Finding::new(
                    Code::IndexNotAFile,
                    &e.path,
                    0,
                    format!("{} in index/, where only index files belong", what(e)),
                )
                .with_action("IndexService.load cannot open it: the broker does not start"),
            );
        }
    }
}

pub(super) fn layout_findings(store: &Store, file_size: u64, prep: &Prepared, sink: &mut Sink) {
    use crate::format::commitlog::read::LayoutIssue;
    let refuse = "MappedFileQueue.load fails: the broker does not start";
    for issue in store.commitlog.layout_issues(file_size) {
        match issue {
            LayoutIssue::Foreign { path } => sink.push(
                Finding::new(
                    Code::CommitlogForeignFile,
                    &path,
                    0,
                    "a file in commitlog/ whose name is not a 20-digit offset".to_string(),
                )
                .with_action(refuse),
            ),
            LayoutIssue::OddSize {
                path,
                len,
                expected,
            } => {
                let last_empty = prep.version.version == BrokerVersion::V5
                    && len == 0
                    && store
                        .commitlog
                        .segments
                        .last()
                        .is_some_and(|s| s.path == path);
                sink.push(
                    Finding::new(
                        Code::CommitlogFileSize,
                        &path,
                        len.min(expected),
                        format!("commitlog file is {len} bytes, expected {expected}"),
                    )
                    .with_action(if last_empty {
                        "5.x deletes an empty last file before loading"
                    } else {
                        refuse
                    }),
                );
            }
            LayoutIssue::Gap { from, to } => {
                let path = store
                    .commitlog
                    .segments
                    .iter()
                    .find(|s| s.start == to)
                    .map_or_else(|| store.commitlog.dir.clone(), |s| s.path.clone());
                sink.push(
                    Finding::new(
                        Code::CommitlogGap,
                        &path,
                        0,
                        format!("no commitlog file holds offsets {from}..{to}"),
                    )
                    .with_action("checkSelf only logs it; messages in the gap are lost"),
                );
            }
            LayoutIssue::Overlap { first, second } => sink.push(Finding::new(
                Code::CommitlogOverlap,
                &second,
                0,
                format!("starts before {} ends", first.display()),
            )),
        }
    }
    if file_size > 0 {
        for s in &store.commitlog.segments {
            if s.start % file_size != 0 {
                sink.push(Finding::new(
                    Code::CommitlogMisnamed,
                    &s.path,
                    0,
                    format!(
                        "start offset {} is not a multiple of the file size {file_size}",
                        s.start
                    ),
                ));
            }
        }
    }
}

pub(super) fn dup_findings(
    store: &Store,
    maps: &LazyMaps<'_>,
    dups: &dups::Sealed,
    sink: &mut Sink,
    opts: &VerifyOptions,
) {
    let cctx = CqCtx {
        store,
        opts,
        maps,
        data_end: u64::MAX,
        cl_min: 0,
        plan: None,
        cq_maps: None,
        claimable: None,
    };
    let uniq = |off: u64| -> Option<String> {
        record_at(&cctx, off)
            .ok()
            .and_then(|m| m.property(prop::UNIQ_KEY).map(|u| u.into_owned()))
    };
    for &(first, dup) in &dups.pairs {
        let (Some(a), Some(b)) = (uniq(first), uniq(dup)) else {
            continue;
        };
        if a != b {
            continue;
        }
        if let Some(seg) = store.commitlog.segment_for(dup) {
            sink.push(Finding::new(
                Code::CommitlogDuplicateUniqKey,
                &seg.path,
                dup - seg.start,
                format!(
                    "UNIQ_KEY {b} at commitlog offset {dup} is also stored at offset {first} \
                     (a producer retry, or a message sent again after a failover or recovery)"
                ),
            ));
        }
    }
}

/// The first queue offset below the queue's end that neither the walk nor the queue's check
/// matched with its record (`None` when it is not known or there is none).
pub(super) fn first_missing(run: Option<&QueueRun>, r: &CqResult) -> Option<u64> {
    let run = run?;
    if run.ranges_overflow || r.ranges_overflow {
        return None;
    }
    // queue offsets as the records store them; the units of a queue start at 0
    let lo = u64::try_from(run.first_q).unwrap_or(0);
    let hi = u64::try_from(run.next_q).unwrap_or(0).min(run.cq_end);
    let mut all = run.ranges.clone();
    all.extend_from_slice(&r.ranges);
    first_unmatched(&normalized(all), lo, hi)
}

pub(super) fn missing_findings(
    cq: &ConsumeQueue,
    run: Option<&QueueRun>,
    r: &CqResult,
    redispatch_from: u64,
    requeue: Option<&Requeue>,
    opts: &VerifyOptions,
    sink: &mut Sink,
) {
    let Some(run) = run else { return };
    let name = format!("{}/{}", cq.topic, cq.queue_id);
    // what the next start does to the queue, when its re-dispatch or truncation leave it wrong
    let requeued = requeue.map(requeue_step);
    let cq_end = run.cq_end;
    let below = run.count - run.beyond;
    let matched = run.matched + r.matched;
    if opts.sample.max(1) == 1 && below > matched {
        let missing = below - matched;
        let lo = u64::try_from(run.first_q).unwrap_or(0);
        let first = r.first_missing;
        let (path, pos) = unit_location(cq, first.unwrap_or(lo));
        sink.push(
            Finding::new(
                Code::ConsumequeueMissingUnit,
                &path,
                pos,
                format!(
                    "{name}: {missing} records below the queue's end ({cq_end}) have no unit pointing at them{}",
                    first
                        .map(|q| format!("; the first at queue offset {q}"))
                        .unwrap_or_default()
                ),
            )
            .with_action(requeued.clone().unwrap_or_else(|| {
                format!(
                    "never dispatched again: the broker re-dispatches only from offset \
                     {redispatch_from}; consumers of {name} cannot read these messages"
                )
            })),
        );
    }
    if run.beyond > 0 {
        let (first_pos, first_q) = run.first_beyond.unwrap_or((0, 0));
        let (path, pos) = unit_location(cq, u64::try_from(first_q).unwrap_or(0));
        let lag = first_pos >= redispatch_from;
        let msg = format!(
            "{name}: {} records (queue offsets {first_q}.., from commitlog offset {first_pos}) are past the queue's end {cq_end}{}",
            run.beyond,
            zero_file_note(cq, cq_end).unwrap_or_default()
        );
        if let Some(mut action) = requeued {
            if !lag && requeue.is_some_and(|r| r.out_of_service == 0) {
                action.push_str(&format!(
                    "; these records are never dispatched again: the broker re-dispatches only \
                     from offset {redispatch_from}"
                ));
            }
            sink.push(
                Finding::new(Code::ConsumequeueMissingUnit, &path, pos, msg).with_action(action),
            );
        } else if lag {
            sink.push(
                Finding::new(Code::ConsumequeueLag, &path, pos, msg)
                    .with_action("dispatch lag: the broker dispatches them on its next start"),
            );
        } else {
            sink.push(
                Finding::new(Code::ConsumequeueMissingUnit, &path, pos, msg).with_action(format!(
                    "never dispatched again: the broker re-dispatches only from offset \
                     {redispatch_from}"
                )),
            );
        }
    }
}

/// When the queue ends where one of its files starts and that file is all zeros, says so: the
/// units a full file's successor held were lost (an async flush that lost the page cache,
/// apache/rocketmq#9728).
fn zero_file_note(cq: &ConsumeQueue, cq_end: u64) -> Option<String> {
    let start = cq_end.checked_mul(crate::format::consumequeue::UNIT_SIZE as u64)?;
    let f = cq.files.iter().find(|f| f.start == start && start > 0)?;
    let map = crate::format::mapped::Mapped::open(&f.path).ok()?;
    map.iter().all(|&b| b == 0).then(|| {
        format!(
            "; its file from queue offset {cq_end} on is all zeros after a full one (its units \
             never reached the disk)"
        )
    })
}

/// The consume queue files missing before a queue's first file (or all of them, in an empty
/// folder) where the commitlog holds records of the queue below the broker's re-dispatch point:
/// named, as the units those files held are gone for good. (A file missing between two others is
/// `consumequeue.gap`.)
pub(super) fn missing_file_findings(
    cq: &ConsumeQueue,
    run: Option<&QueueRun>,
    redispatch_from: u64,
    sink: &mut Sink,
) {
    let Some(run) = run else { return };
    if run.count == 0 || run.first_pos >= redispatch_from {
        return;
    }
    let unit = crate::format::consumequeue::UNIT_SIZE as u64;
    let fs = cq.file_size.max(unit);
    let first_q = u64::try_from(run.first_q).unwrap_or(0);
    let next_q = u64::try_from(run.next_q).unwrap_or(0).max(first_q + 1);
    let from = first_q.saturating_mul(unit) / fs * fs;
    let to = match cq.files.first() {
        Some(f) if f.start > from => f.start,
        Some(_) => return,
        None => next_q.saturating_mul(unit).div_ceil(fs).saturating_mul(fs),
    };
    let files = (to - from).div_ceil(fs);
    let first = crate::format::filename::offset_to_name(from);
    sink.push(
        Finding::new(
            Code::ConsumequeueMissingFile,
            &cq.dir.join(&first),
            0,
            format!(
                "{}/{}: consume queue file {first}{} missing: the commitlog holds records of the \
                 queue from queue offset {first_q} (commitlog offset {}), whose units it held",
                cq.topic,
                cq.queue_id,
                if files > 1 {
                    format!(" and the {} after it are", files - 1)
                } else {
                    " is".to_string()
                },
                run.first_pos
            ),
        )
        .with_action(format!(
            "the broker loads the files it finds and re-dispatches only from commitlog offset \
             {redispatch_from}: consumers cannot read the records whose units were in the missing \
             files"
        )),
    );
}
