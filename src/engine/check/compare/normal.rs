//! Master and slaves in normal mode: a merge walk over the commitlogs.
//!
//! A slave's commitlog is a byte copy of its master's from where its first file starts (a new
//! slave starts at the start of the master's last file) to where it got, at the same offsets. The
//! first pass walks every log once, all at the same offset: where two stores both hold a record
//! at an offset they are compared byte for byte, and the first offset where they do not agree
//! (a record differs, one has none, or one ended) is where they diverge. Records below the
//! other store's first file are older than it and not compared.
//!
//! The store that carries on (the keeper) is `--keep`, or else the one whose log is a prefix of
//! every other's (the slave of an asynchronous pair: the failover goes to it, and its master's
//! tail is lost), or, where the logs diverged (a slave that was promoted and took writes), the one
//! written last. The second pass walks the tails past each store's divergence from the keeper:
//! a non-keeper's records there are lost (one copy counted, whichever stores hold it); the
//! keeper's are kept, missing from the stores that diverged before them.

use super::tally::{GroupOffsets, Tally};
use super::{
    CompareOptions, CompareReport, Divergence, Mode, OnlyKind, OnlyRecord, Opened, Sink, StoreSide,
};
use crate::format::commitlog::read::Segment;
use crate::format::commitlog::walk::{LogCursor, LogEnd};

/// Two stores (in this order) as the first pass found them.
#[derive(Debug, Clone, Default)]
struct Pair {
    common_records: u64,
    common_bytes: u64,
    /// Where they diverge and how, from the first store's side.
    diverged: Option<(u64, &'static str)>,
    /// The first store's first record at or past the divergence.
    first_tail: Option<u64>,
    /// The first store's records below the second's first file.
    before: Tally,
}

/// What the first pass learned of one store.
#[derive(Debug, Clone, Default)]
struct Walked {
    records: u64,
    bytes: u64,
    first: Option<u64>,
    end: Option<u64>,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    stopped: Option<String>,
}

fn kind_when_one_lacks(lacking_ended: bool) -> &'static str {
    if lacking_ended {
        "ends"
    } else {
        "misaligned"
    }
}

pub fn compare(
    opened: &Opened,
    opts: &CompareOptions,
    sink: &mut dyn Sink,
) -> anyhow::Result<CompareReport> {
    let logs: Vec<&[Segment]> = opened
        .stores
        .iter()
        .map(|s| &s.commitlog.segments[..])
        .collect();
    let keeper = opts.keep.map(|k| (k, "given (--keep)".to_string()));
    compare_logs(opened, &logs, keeper, sink)
}

/// [`compare`] over `logs[s]`, the commitlog files of store `s` to walk (all of them, or the
/// `commitlog/` files below a converted DLedger store's divide), with the keeper given or found.
pub fn compare_logs(
    opened: &Opened,
    logs: &[&[Segment]],
    keep: Option<(usize, String)>,
    sink: &mut dyn Sink,
) -> anyhow::Result<CompareReport> {
    let stores = &opened.stores;
    let n = stores.len();
    let offsets = stores
        .iter()
        .map(GroupOffsets::read)
        .collect::<Result<Vec<_>, _>>()?;
    let mins: Vec<u64> = logs
        .iter()
        .map(|l| l.first().map_or(0, |s| s.start))
        .collect();
    let mut pairs = vec![vec![Pair::default(); n]; n];
    let mut walked = vec![Walked::default(); n];

    // Pass 1: every log once, all at the same offset.
    let mut cursors: Vec<LogCursor<'_>> = logs.iter().map(|l| LogCursor::new(l, false)).collect();
    for c in &mut cursors {
        c.step()?;
    }
    let mut every_pair_diverged = n < 2;
    while let Some(o) = cursors.iter().filter_map(LogCursor::offset).min() {
        let held: Vec<Option<&[u8]>> = cursors
            .iter()
            .map(|c| if c.offset() == Some(o) { c.raw() } else { None })
            .collect();
        if !every_pair_diverged {
            every_pair_diverged = true;
            for a in 0..n {
                for b in a + 1..n {
                    if pairs[a][b].diverged.is_some() {
                        continue;
                    }
                    every_pair_diverged = false;
                    if o < mins[a].max(mins[b]) {
                        continue;
                    }
                    let (ka, kb) = match (held[a], held[b]) {
                        (Some(x), Some(y)) if x == y => {
                            for (p, q) in [(a, b), (b, a)] {
                                pairs[p][q].common_records += 1;
                                pairs[p][q].common_bytes += x.len() as u64;
                            }
                            continue;
                        }
                        (Some(_), Some(_)) => ("differs", "differs"),
                        (Some(_), None) => {
                            let k = kind_when_one_lacks(cursors[b].offset().is_none());
                            (
                                if k == "ends" { "against_ends" } else { k },
                                if k == "ends" { "store_ends" } else { k },
                            )
                        }
                        (None, Some(_)) => {
                            let k = kind_when_one_lacks(cursors[a].offset().is_none());
                            (
                                if k == "ends" { "store_ends" } else { k },
                                if k == "ends" { "against_ends" } else { k },
                            )
                        }
                        (None, None) => continue,
                    };
                    pairs[a][b].diverged = Some((o, ka));
                    pairs[b][a].diverged = Some((o, kb));
                }
            }
        }
        for s in 0..n {
            if held[s].is_none() {
                continue;
            }
            let Some(m) = cursors[s].message() else {
                continue;
            };
            let w = &mut walked[s];
            w.records += 1;
            w.bytes += m.raw.len() as u64;
            w.first.get_or_insert(o);
            w.end = Some(o + m.raw.len() as u64);
            w.first_ts.get_or_insert(m.store_timestamp);
            w.last_ts = Some(m.store_timestamp);
            for k in 0..n {
                if k == s {
                    continue;
                }
                let p = &mut pairs[s][k];
                if o < mins[k] {
                    p.before.add(&m, &offsets[s].unconsumed_by(&m));
                }
                if p.diverged.is_some_and(|(d, _)| o >= d) {
                    p.first_tail.get_or_insert(o);
                }
            }
        }
        let step: Vec<bool> = held.iter().map(Option::is_some).collect();
        for (c, step) in cursors.iter_mut().zip(step) {
            if step {
                c.step()?;
            }
        }
    }
    for (s, c) in cursors.iter().enumerate() {
        if let LogEnd::Corrupt { error, .. } = c.end() {
            walked[s].stopped = Some(error.to_string());
        }
    }
    drop(cursors);

    // The keeper.
    let has_tail = |s: usize| (0..n).any(|k| k != s && pairs[s][k].first_tail.is_some());
    let (keeper, keeper_reason) = match keep {
        Some(k) => k,
        None => match (0..n).find(|&s| !has_tail(s)) {
            Some(k) if (0..n).all(|s| !has_tail(s)) => (
                k,
                "the logs hold the same records: nothing is only in one store".to_string(),
            ),
            Some(k) => (
                k,
                "its log is a prefix of every other store's (a slave behind its master): a \
                 failover to it loses the records the others hold past it; --keep chooses \
                 another"
                    .to_string(),
            ),
            None => {
                let k = (0..n)
                    .max_by_key(|&s| (walked[s].last_ts, std::cmp::Reverse(s)))
                    .unwrap_or(0);
                (
                    k,
                    "the logs diverged: the store written last (it took writes after the \
                     others stopped) carries on; --keep chooses another"
                        .to_string(),
                )
            }
        },
    };

    // Pass 2: the tails past each store's divergence from the keeper.
    let mut only = vec![Tally::default(); n];
    let mut lost_records = 0u64;
    let mut lost_bytes = 0u64;
    let diverged_at: Vec<Option<u64>> = (0..n)
        .map(|s| {
            if s == keeper {
                None
            } else {
                pairs[s][keeper].diverged.map(|(d, _)| d)
            }
        })
        .collect();
    let starts: Vec<Option<u64>> = (0..n)
        .map(|s| {
            if s == keeper {
                (0..n)
                    .filter(|&o| o != keeper)
                    .filter_map(|o| pairs[keeper][o].first_tail)
                    .min()
            } else {
                pairs[s][keeper].first_tail
            }
        })
        .collect();
    let mut cursors: Vec<LogCursor<'_>> = logs
        .iter()
        .zip(&starts)
        .map(|(l, at)| match at {
            Some(o) => LogCursor::starting_at(l, *o, false),
            None => LogCursor::new(&[], false),
        })
        .collect();
    for c in &mut cursors {
        c.step()?;
    }
    while let Some(o) = cursors.iter().filter_map(LogCursor::offset).min() {
        let holders: Vec<usize> = (0..n).filter(|&s| cursors[s].offset() == Some(o)).collect();
        let mut done: Vec<usize> = Vec::new();
        for &s in &holders {
            let (Some(m), Some(file)) = (cursors[s].message(), cursors[s].file()) else {
                continue;
            };
            let missing_here: Vec<usize> = (0..n)
                .filter(|&x| x != keeper && diverged_at[x].is_some_and(|d| d <= o))
                .collect();
            if s == keeper && missing_here.is_empty() {
                continue;
            }
            let unconsumed_by = offsets[s].unconsumed_by(&m);
            only[s].add(&m, &unconsumed_by);
            if done.contains(&s) {
                continue;
            }
            let (kind, held_by, missing_from): (OnlyKind, Vec<usize>, Vec<usize>) = if s == keeper {
                (OnlyKind::Kept, vec![keeper], missing_here)
            } else {
                let raw = m.raw;
                let same: Vec<usize> = holders
                    .iter()
                    .copied()
                    .filter(|&x| x != keeper && cursors[x].raw() == Some(raw))
                    .collect();
                done.extend(&same);
                let missing = (0..n).filter(|x| !same.contains(x)).collect();
                lost_records += 1;
                lost_bytes += raw.len() as u64;
                (OnlyKind::Lost, same, missing)
            };
            let r = OnlyRecord::of(&m, kind, s, (held_by, missing_from), unconsumed_by, None);
            sink.record(&r, &m, file)?;
        }
        for &s in &holders {
            cursors[s].step()?;
        }
    }

    let role = |s: usize| -> &'static str {
        if s == keeper {
            "keeps"
        } else if pairs[s][keeper].first_tail.is_some() {
            "dropped"
        } else if pairs[keeper][s].first_tail.is_some() {
            "lags"
        } else {
            "up_to_date"
        }
    };
    let sides = (0..n)
        .map(|s| {
            let w = &walked[s];
            StoreSide {
                store: s,
                root: stores[s].root.display().to_string(),
                mode: Mode::Normal,
                role: role(s),
                min_commitlog_offset: w.first,
                max_commitlog_offset: w.end,
                records: w.records,
                bytes: w.bytes,
                first_store_timestamp: w.first_ts,
                last_store_timestamp: w.last_ts,
                file_size: stores[s].commitlog.common_file_size(),
                stopped: w.stopped.clone(),
                cluster: None,
                broker_name: None,
                only: std::mem::take(&mut only[s]),
                before_keeper: (s != keeper).then(|| pairs[s][keeper].before.clone()),
                dledger: None,
            }
        })
        .collect();
    let divergences = (0..n)
        .filter(|&s| s != keeper)
        .map(|s| {
            let p = &pairs[s][keeper];
            let (at, kind) = match p.diverged {
                Some((d, k)) => (Some(d), k),
                None => (None, "same"),
            };
            Divergence {
                store: s,
                against: keeper,
                commitlog_offset: at,
                index: None,
                kind,
                field: None,
                common_records: p.common_records,
                common_bytes: p.common_bytes,
            }
        })
        .collect();
    Ok(CompareReport {
        mode: Mode::Normal,
        stores: sides,
        keeper,
        keeper_reason,
        divergences,
        truncations: Vec::new(),
        config: Vec::new(),
        lost_records,
        lost_bytes,
        below_divide: None,
    })
}
