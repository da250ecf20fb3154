//! `dump dledger`: the entries of a DLedger-mode store's data files in log order (index, term,
//! position, size, the wrapped record's topic, queue and queue offset, whether it is past the
//! committed index), or with `--index` its index units, each checked against the entry it names.

use std::io::Write;
use std::ops::ControlFlow;

use serde::Serialize;

use super::DledgerArgs;
use crate::commands::{output, ExitStatus};
use crate::format::commitlog::read::message_in;
use crate::format::dledger::entry::{Break, EntryHeader};
use crate::format::dledger::walk::{walk, IndexReader, Visit};
use crate::format::dledger::{DledgerLayout, IndexUnit};
use crate::format::error::DledgerError;

/// One entry (`dledger_entry`).
#[derive(Debug, Serialize)]
struct EntryLine<'a> {
    index: i64,
    term: i64,
    pos: i64,
    size: i32,
    file: String,
    /// pos + 48: the commitlog offset consume queues point at.
    record_offset: i64,
    topic: Option<&'a str>,
    queue_id: Option<i32>,
    queue_offset: Option<i64>,
    /// The record's PHYSICALOFFSET field (the broker sets it to `record_offset`).
    physical_offset: Option<i64>,
    /// Past the checkpoint's committed index: the broker does not serve it until it commits.
    uncommitted: bool,
    /// How it breaks the chain of entries before it (index, term or pos).
    gap: Option<&'a Break>,
}

/// One index unit (`dledger_index`) and whether it agrees with the entry it names.
#[derive(Debug, Serialize)]
struct IndexLine {
    index: i64,
    magic: i32,
    pos: i64,
    size: i32,
    term: i64,
    /// `agrees`, `disagrees` (see `field`), `no_unit` (no index file holds it), `no_entry`.
    state: &'static str,
    /// The first field that differs, with the unit's and the entry's value.
    field: Option<&'static str>,
    unit_value: Option<i64>,
    entry_value: Option<i64>,
}

#[derive(Debug, Serialize)]
struct Summary {
    entries: u64,
    first_index: Option<i64>,
    last_index: Option<i64>,
    committed_index: Option<i64>,
    end_pos: u64,
    gaps: u64,
    /// Bad bytes where the walk stopped.
    stopped: Option<String>,
    index_units: u64,
    index_disagreements: u64,
}

pub(super) fn dledger(a: &DledgerArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let inputs = a.geometry.inputs()?;
    let layout =
        DledgerLayout::find(&a.store, &inputs)?.ok_or_else(|| DledgerError::NotDledger {
            root: a.store.clone(),
        })?;
    let committed = layout.checkpoint()?.and_then(|c| c.committed_index);
    let mut index = a.index.then(|| IndexReader::new(&layout));
    let mut s = Summary {
        entries: 0,
        first_index: None,
        last_index: None,
        committed_index: committed,
        end_pos: 0,
        gaps: 0,
        stopped: None,
        index_units: 0,
        index_disagreements: 0,
    };
    if !a.json {
        if a.index {
            writeln!(
                out,
                "{:>10} {:>12} {:>8} {:>6}  state",
                "index", "pos", "size", "term"
            )?;
        } else {
            writeln!(
                out,
                "{:>10} {:>6} {:>12} {:>8}  topic / queue / queue offset",
                "index", "term", "pos", "size"
            )?;
        }
    }
    let mut failed: Option<anyhow::Error> = None;
    let end = walk(&layout, |v| {
        s.first_index.get_or_insert(v.header.index);
        s.gaps += u64::from(v.gap.is_some());
        let r = match &mut index {
            Some(ix) => ix
                .unit(v.header.index)
                .map_err(anyhow::Error::from)
                .and_then(|u| index_line(a.json, u, Some(&v.header), v.header.index, &mut s, out)),
            None => entry_line(a.json, v, committed, out),
        };
        match r {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some(ix) = &mut index {
        // units past the last entry: the broker's recovery cuts the index there
        let mut i = end.last.map_or(0, |h| h.index + 1);
        while i < ix.capacity() {
            match ix.unit(i)? {
                Some(u) if !u.is_empty() => index_line(a.json, Some(u), None, i, &mut s, out)?,
                _ => break,
            }
            i += 1;
        }
    }
    s.entries = end.entries;
    s.last_index = end.last.map(|h| h.index);
    s.end_pos = end.end_pos;
    s.stopped = end.stopped.as_ref().map(ToString::to_string);
    if let Some(e) = &end.stopped {
        output::note(&format!("the data stops being a chain of entries: {e}"));
    }
    if a.json {
        output::summary_line(out, "dump dledger", &s)?;
    } else {
        output::note(&format!(
            "{} entries{}, data ends at position {}{}",
            s.entries,
            match (s.first_index, s.last_index) {
                (Some(f), Some(l)) => format!(" ({f}..={l})"),
                _ => String::new(),
            },
            s.end_pos,
            if a.index {
                format!(
                    ", {} index units, {} disagreeing",
                    s.index_units, s.index_disagreements
                )
            } else {
                String::new()
            }
        ));
    }
    Ok(
        if s.stopped.is_some() || s.gaps > 0 || s.index_disagreements > 0 {
            ExitStatus::Findings
        } else {
            ExitStatus::Success
        },
    )
}

fn entry_line(
    json: bool,
    v: &Visit<'_>,
    committed: Option<i64>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let h = &v.header;
    let m = message_in(v.body, h.record_offset());
    let line = EntryLine {
        index: h.index,
        term: h.term,
        pos: h.pos,
        size: h.size,
        file: v.file.display().to_string(),
        record_offset: h.record_offset(),
        topic: m.as_ref().map(|m| m.topic.as_ref()),
        queue_id: m.as_ref().map(|m| m.queue_id),
        queue_offset: m.as_ref().map(|m| m.queue_offset),
        physical_offset: m.as_ref().map(|m| m.physical_offset),
        uncommitted: committed.is_some_and(|c| h.index > c),
        gap: v.gap.as_ref(),
    };
    if json {
        return output::typed_line(out, "dledger_entry", &line);
    }
    let record = match &m {
        Some(m) => format!("{} / {} / {}", m.topic, m.queue_id, m.queue_offset),
        None => "(the body is not a commitlog record)".into(),
    };
    let mut flags = String::new();
    if line.uncommitted {
        flags.push_str("  UNCOMMITTED");
    }
    if let Some(p) = line.physical_offset.filter(|&p| p != line.record_offset) {
        flags.push_str(&format!(
            "  PHYSICALOFFSET {p} (expected {})",
            line.record_offset
        ));
    }
    if let Some(g) = &v.gap {
        flags.push_str(&format!(
            "  GAP {}: expected {}, found {}",
            g.what, g.expected, g.found
        ));
    }
    writeln!(
        out,
        "{:>10} {:>6} {:>12} {:>8}  {record}{flags}",
        h.index, h.term, h.pos, h.size
    )?;
    Ok(())
}

fn index_line(
    json: bool,
    unit: Option<IndexUnit>,
    entry: Option<&EntryHeader>,
    index: i64,
    s: &mut Summary,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let u = unit.unwrap_or(IndexUnit {
        magic: 0,
        pos: 0,
        size: 0,
        index,
        term: 0,
    });
    let diff = entry.and_then(|e| u.disagreement(e));
    let state = match (unit, entry, diff) {
        (None, _, _) => "no_unit",
        (Some(_), None, _) => "no_entry",
        (Some(_), Some(_), Some(_)) => "disagrees",
        (Some(_), Some(_), None) => "agrees",
    };
    s.index_units += u64::from(unit.is_some());
    s.index_disagreements += u64::from(state != "agrees");
    let line = IndexLine {
        index,
        magic: u.magic,
        pos: u.pos,
        size: u.size,
        term: u.term,
        state,
        field: diff.map(|d| d.0),
        unit_value: diff.map(|d| d.1),
        entry_value: diff.map(|d| d.2),
    };
    if json {
        return output::typed_line(out, "dledger_index", &line);
    }
    let what = match (state, diff) {
        ("disagrees", Some((f, uv, ev))) => {
            format!("DISAGREES: {f} {uv} in the unit, {ev} in the entry")
        }
        ("no_unit", _) => "NO UNIT: no index file holds it".into(),
        ("no_entry", _) => "NO ENTRY: past the last entry of the data".into(),
        _ => "agrees".into(),
    };
    writeln!(
        out,
        "{:>10} {:>12} {:>8} {:>6}  {what}",
        index, u.pos, u.size, u.term
    )?;
    Ok(())
}
