//! The replicas of a DLedger group: who raft elects and what the others drop when they rejoin.
//!
//! Every replica holds the same entry at the same index (the leader pushes its encoded entry,
//! pos included). Raft elects the replica with the highest last entry's term, then index
//! (`DLedgerLeaderElector.handleVote` refuses a candidate whose log is behind); ties go to the
//! first store given, and the replicas with the same last entry are up to date. The leader's
//! `EntryDispatcher` compares each follower from the end of the shorter log downwards and
//! truncates it after the last index where the entries are equal (`DLedgerEntry.equals`: every
//! header field and the body), or from the leader's first index when they share none; a
//! follower whose last entry matches is only appended to.
//!
//! The first pass walks every replica once, index by index, comparing each with the leader and
//! reading each replica's own log state (begin and end index, term, committed index, vote). The
//! second walks the truncated tails: an entry dropped from a replica is lost (one copy counted,
//! whichever replicas hold it), with the record it wraps read through the record parser.
//!
//! Converted replicas hold records below the divide in `commitlog/`: no raft entry, each
//! broker's own (a slave's copy of its master's from before the switch). Those are compared by
//! [`super::normal`] with the leader as the store that carries on: it serves its own below the
//! divide, so what only another replica holds there is lost while it leads.

use serde::Serialize;

use super::tally::{GroupOffsets, Tally};
use super::{CompareReport, Divergence, Mode, OnlyKind, OnlyRecord, Opened, Sink, StoreSide};
use crate::engine::store::dledger::{summary, DledgerInfo};
use crate::format::commitlog::message_in;
use crate::format::commitlog::read::{Segment, SegmentKind};
use crate::format::dledger::walk::{EntryCursor, IndexReader};
use crate::format::dledger::{DledgerLayout, EntryHeader, HEADER_SIZE};

/// A replica's log and votes.
#[derive(Debug, Clone, Serialize)]
pub struct Replica {
    pub self_id: String,
    /// `currterm`: the replica's term and whom it voted for.
    pub current_term: Option<i64>,
    pub vote_leader: Option<String>,
    pub ledger_begin_index: Option<i64>,
    pub ledger_end_index: Option<i64>,
    pub ledger_end_term: Option<i64>,
    /// The committed index it starts with (its checkpoint's, at most its end).
    pub committed_index: Option<i64>,
    pub entries: u64,
}

/// What one replica drops and receives when it rejoins the leader.
#[derive(Debug, Clone, Serialize)]
pub struct Truncation {
    #[serde(serialize_with = "crate::engine::check::compare::one_based")]
    pub store: usize,
    #[serde(serialize_with = "crate::engine::check::compare::one_based")]
    pub leader: usize,
    /// The last index it keeps (the last entry it shares with the leader); null when it keeps
    /// none of its entries from the leader's first index on.
    pub keeps_to_index: Option<i64>,
    /// Entries it drops: count and index range (null when none).
    pub drops_entries: u64,
    pub drops_from_index: Option<i64>,
    pub drops_to_index: Option<i64>,
    /// Of the dropped entries, those at or below its own committed index (raft never drops a
    /// committed entry: a sign that the replica or its checkpoint is not what it seems).
    pub drops_committed: u64,
    /// Leader entries it receives after the cut.
    pub appends_entries: u64,
}

#[derive(Debug, Clone, Default)]
struct Walked {
    records: u64,
    bytes: u64,
    first: Option<u64>,
    end: Option<u64>,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    last: Option<EntryHeader>,
    first_index: Option<i64>,
    stopped: Option<String>,
}

/// Against the leader.
#[derive(Debug, Clone, Default)]
struct VsLeader {
    common_records: u64,
    common_bytes: u64,
    first_diff: Option<(i64, &'static str, Option<&'static str>)>,
    last_equal: Option<i64>,
}

fn differing_field(a: &[u8], b: &[u8]) -> &'static str {
    let (Some(x), Some(y)) = (EntryHeader::from_bytes(a), EntryHeader::from_bytes(b)) else {
        return "header";
    };
    if x.term != y.term {
        "term"
    } else if x.pos != y.pos {
        "pos"
    } else if a.get(HEADER_SIZE..) != b.get(HEADER_SIZE..) {
        "body"
    } else {
        "header"
    }
}

/// A cursor before entry `index` of `layout`, found through the index (or by walking).
fn cursor_at(layout: &DledgerLayout, index: i64) -> anyhow::Result<EntryCursor<'_>> {
    if let Ok(Some(u)) = IndexReader::new(layout).unit(index) {
        if u.index == index && u.pos >= 0 {
            if let Some(mut c) = EntryCursor::at_pos(layout, u.pos as u64) {
                if c.step()? && c.visit().is_some_and(|v| v.header.index == index) {
                    return Ok(EntryCursor::at_pos(layout, u.pos as u64).unwrap_or(c));
                }
            }
        }
    }
    // the index does not lead there: walk up to it
    let mut c = EntryCursor::new(layout, 0);
    let mut before = EntryCursor::new(layout, 0);
    while c.step()? {
        if c.visit().is_some_and(|v| v.header.index >= index) {
            return Ok(before);
        }
        before.step()?;
    }
    Ok(c)
}

pub fn compare(opened: &Opened, sink: &mut dyn Sink) -> anyhow::Result<CompareReport> {
    let stores = &opened.stores;
    let n = stores.len();
    let not_dledger = |s: &crate::engine::Store| {
        anyhow::anyhow!("{}: not a DLedger-mode store", s.root.display())
    };
    let layouts: Vec<&DledgerLayout> = stores
        .iter()
        .map(|s| s.dledger.as_ref().ok_or_else(|| not_dledger(s)))
        .collect::<anyhow::Result<_>>()?;
    let mut infos: Vec<DledgerInfo> = Vec::with_capacity(n);
    for s in stores {
        infos.push(summary(s)?.ok_or_else(|| not_dledger(s))?);
    }
    let offsets = stores
        .iter()
        .map(GroupOffsets::read)
        .collect::<Result<Vec<_>, _>>()?;
    let last = |s: usize| (infos[s].ledger_end_term, infos[s].ledger_end_index);
    let leader = (0..n)
        .max_by_key(|&s| (last(s), std::cmp::Reverse(s)))
        .unwrap_or(0);

    // Pass 1: every replica once, index by index.
    let mut walked = vec![Walked::default(); n];
    let mut vs = vec![VsLeader::default(); n];
    let mut cursors: Vec<EntryCursor<'_>> =
        layouts.iter().map(|l| EntryCursor::new(l, 0)).collect();
    for c in &mut cursors {
        c.step()?;
    }
    let index_of = |c: &EntryCursor<'_>| c.visit().map(|v| v.header.index);
    while let Some(i) = cursors.iter().filter_map(index_of).min() {
        let held: Vec<Option<&[u8]>> = cursors
            .iter()
            .map(|c| {
                if index_of(c) == Some(i) {
                    c.entry_bytes()
                } else {
                    None
                }
            })
            .collect();
        for f in 0..n {
            if f == leader {
                continue;
            }
            if let (Some(a), Some(b)) = (held[f], held[leader]) {
                let v = &mut vs[f];
                if a == b {
                    v.common_records += 1;
                    v.common_bytes += a.len() as u64;
                    v.last_equal = Some(i);
                } else if v.first_diff.is_none() {
                    v.first_diff = Some((i, "differs", Some(differing_field(a, b))));
                }
            }
        }
        for s in 0..n {
            if held[s].is_none() {
                continue;
            }
            let Some(v) = cursors[s].visit() else {
                continue;
            };
            let w = &mut walked[s];
            w.first_index.get_or_insert(v.header.index);
            w.last = Some(v.header);
            let Some(m) = message_in(v.body, v.header.record_offset()) else {
                continue;
            };
            w.records += 1;
            w.bytes += m.raw.len() as u64;
            w.first.get_or_insert(m.position);
            w.end = Some(m.position + m.raw.len() as u64);
            w.first_ts.get_or_insert(m.store_timestamp);
            w.last_ts = Some(m.store_timestamp);
        }
        let step: Vec<bool> = held.iter().map(Option::is_some).collect();
        for (c, step) in cursors.iter_mut().zip(step) {
            if step {
                c.step()?;
            }
        }
    }
    for (s, c) in cursors.into_iter().enumerate() {
        if let Some(e) = c.into_end().stopped {
            walked[s].stopped = Some(e.to_string());
        }
    }
    // where one log ends before the other, the first index only one holds
    for f in 0..n {
        if f == leader || vs[f].first_diff.is_some() {
            continue;
        }
        let (fe, le) = (
            walked[f].last.map(|h| h.index),
            walked[leader].last.map(|h| h.index),
        );
        vs[f].first_diff = match (fe, le) {
            (Some(a), Some(b)) if a < b => Some((a + 1, "store_ends", None)),
            (Some(a), Some(b)) if a > b => Some((b + 1, "against_ends", None)),
            (None, Some(b)) => Some((walked[leader].first_index.unwrap_or(b), "store_ends", None)),
            _ => None,
        };
    }

    // What each replica drops.
    let leader_begin = walked[leader].first_index;
    let leader_end = walked[leader].last.map(|h| h.index);
    let mut truncations = Vec::new();
    let mut cut_from: Vec<Option<i64>> = vec![None; n];
    for f in 0..n {
        if f == leader {
            continue;
        }
        let (fb, fe) = (walked[f].first_index, walked[f].last.map(|h| h.index));
        let keeps_to = vs[f].last_equal;
        let from = match (fe, keeps_to) {
            (None, _) => None,
            (Some(e), Some(k)) if k >= e => None,
            (Some(_), Some(k)) => Some(k + 1),
            (Some(_), None) => match (fb, leader_begin) {
                (Some(b), Some(lb)) => Some(b.max(lb)),
                (Some(b), None) => Some(b),
                _ => None,
            },
        };
        let drops = match (from, fe) {
            (Some(a), Some(e)) if e >= a => (e - a + 1) as u64,
            _ => 0,
        };
        let committed = infos[f].committed_index;
        let drops_committed = match (from, committed) {
            (Some(a), Some(c)) if c >= a => (c.min(fe.unwrap_or(c)) - a + 1).max(0) as u64,
            _ => 0,
        };
        let kept_end = match from {
            Some(a) => Some(a - 1),
            None => fe,
        };
        let appends = match (leader_end, kept_end) {
            (Some(le), Some(k)) if le > k => (le - k) as u64,
            (Some(le), None) => leader_begin.map_or(0, |lb| (le - lb + 1).max(0) as u64),
            _ => 0,
        };
        if drops > 0 {
            cut_from[f] = from;
        }
        truncations.push(Truncation {
            store: f,
            leader,
            keeps_to_index: kept_end.filter(|&k| Some(k) >= fb),
            drops_entries: drops,
            drops_from_index: from.filter(|_| drops > 0),
            drops_to_index: fe.filter(|_| drops > 0),
            drops_committed,
            appends_entries: appends,
        });
    }

    // Pass 2: the dropped tails.
    let mut only = vec![Tally::default(); n];
    let mut lost_records = 0u64;
    let mut lost_bytes = 0u64;
    let mut cursors: Vec<Option<EntryCursor<'_>>> = Vec::new();
    for f in 0..n {
        cursors.push(match cut_from[f] {
            Some(a) => {
                let mut c = cursor_at(layouts[f], a)?;
                c.step()?;
                Some(c)
            }
            None => None,
        });
    }
    let index_at = |c: &Option<EntryCursor<'_>>| c.as_ref().and_then(index_of);
    while let Some(i) = cursors.iter().filter_map(index_at).min() {
        let holders: Vec<usize> = (0..n)
            .filter(|&s| index_at(&cursors[s]) == Some(i))
            .collect();
        let mut done: Vec<usize> = Vec::new();
        for &s in &holders {
            let Some(c) = cursors[s].as_ref() else {
                continue;
            };
            let Some(v) = c.visit() else { continue };
            let Some(m) = message_in(v.body, v.header.record_offset()) else {
                continue;
            };
            let unconsumed_by = offsets[s].unconsumed_by(&m);
            only[s].add(&m, &unconsumed_by);
            if done.contains(&s) {
                continue;
            }
            let bytes = c.entry_bytes();
            let same: Vec<usize> = holders
                .iter()
                .copied()
                .filter(|&x| cursors[x].as_ref().and_then(|c| c.entry_bytes()) == bytes)
                .collect();
            done.extend(&same);
            lost_records += 1;
            lost_bytes += m.raw.len() as u64;
            let missing_from = (0..n).filter(|x| !same.contains(x)).collect();
            let entry = Some((v.header.index, v.header.term));
            let r = OnlyRecord::of(
                &m,
                OnlyKind::Lost,
                s,
                (same, missing_from),
                unconsumed_by,
                entry,
            );
            sink.record(&r, &m, v.file)?;
        }
        for &s in &holders {
            if let Some(c) = cursors[s].as_mut() {
                c.step()?;
            }
        }
    }

    let up_to_date = |s: usize| {
        s == leader
            || (last(s) == last(leader)
                && truncations
                    .iter()
                    .any(|t| t.store == s && t.drops_entries == 0 && t.appends_entries == 0))
    };
    let sides = (0..n)
        .map(|s| {
            let w = &walked[s];
            let info = &infos[s];
            let role = if s == leader {
                "keeps"
            } else if cut_from[s].is_some() {
                "truncated"
            } else if up_to_date(s) {
                "up_to_date"
            } else {
                "lags"
            };
            StoreSide {
                store: s,
                root: stores[s].root.display().to_string(),
                mode: Mode::Dledger,
                role,
                min_commitlog_offset: w.first,
                max_commitlog_offset: w.end,
                records: w.records,
                bytes: w.bytes,
                first_store_timestamp: w.first_ts,
                last_store_timestamp: w.last_ts,
                file_size: Some(info.geometry.data_file_size.value),
                stopped: w.stopped.clone(),
                cluster: None,
                broker_name: None,
                only: std::mem::take(&mut only[s]),
                before_keeper: None,
                dledger: Some(Replica {
                    self_id: info.self_id.clone(),
                    current_term: info.current_term,
                    vote_leader: info.vote_leader.clone(),
                    ledger_begin_index: w.first_index,
                    ledger_end_index: w.last.map(|h| h.index),
                    ledger_end_term: w.last.map(|h| h.term),
                    committed_index: info.committed_index,
                    entries: w.records,
                }),
            }
        })
        .collect();
    let divergences = (0..n)
        .filter(|&s| s != leader)
        .map(|s| {
            let v = &vs[s];
            let (index, kind, field) = match v.first_diff {
                Some((i, k, f)) => (Some(i), k, f),
                None => (None, "same", None),
            };
            Divergence {
                store: s,
                against: leader,
                commitlog_offset: None,
                index,
                kind,
                field,
                common_records: v.common_records,
                common_bytes: v.common_bytes,
            }
        })
        .collect();
    let leader_reason = {
        let ties: Vec<String> = (0..n)
            .filter(|&s| s != leader && last(s) == last(leader))
            .map(|s| format!("store {}", s + 1))
            .collect();
        let (t, i) = last(leader);
        let t = t.map_or("none".into(), |t| t.to_string());
        let i = i.map_or("none".into(), |i| i.to_string());
        if ties.is_empty() {
            format!("raft elects it: its last entry has the highest term ({t}), then index ({i})")
        } else {
            format!(
                "raft elects it or {} (the same last entry: term {t}, index {i}); the first \
                 given is taken",
                ties.join(", ")
            )
        }
    };
    // Below a converted replica's divide: each broker's own `commitlog/`, which the leader
    // serves for its own part.
    let below_divide = match layouts.iter().any(|l| l.converted) {
        true => {
            let logs: Vec<&[Segment]> = stores
                .iter()
                .map(|s| {
                    let segs = &s.commitlog.segments[..];
                    &segs[..segs.partition_point(|x| x.kind == SegmentKind::Commitlog)]
                })
                .collect();
            let why = "raft's leader: below the divide it serves its own commitlog/ files";
            let r = super::normal::compare_logs(opened, &logs, Some((leader, why.into())), sink)?;
            lost_records += r.lost_records;
            lost_bytes += r.lost_bytes;
            Some(Box::new(r))
        }
        false => None,
    };
    Ok(CompareReport {
        mode: Mode::Dledger,
        stores: sides,
        keeper: leader,
        keeper_reason: leader_reason,
        divergences,
        truncations,
        config: Vec::new(),
        lost_records,
        lost_bytes,
        below_divide,
    })
}
