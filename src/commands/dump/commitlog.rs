//! `dump commitlog`: messages in commitlog order, rendered on several threads.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use crate::commands::line_format::Style;
use crate::commands::message_printer::{render, MessagePrinter};
use crate::commands::output::{self};
use crate::commands::ExitStatus;
use crate::engine::store::render_walk::{render_in_order, EntryPlace, Selection, WalkOutcome};
use crate::engine::store::StorePath;
use crate::engine::Store;
use crate::format::commitlog::read::Segment;

use super::CommitlogArgs;

pub(super) fn commitlog(a: &CommitlogArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let mut segments_store = None;
    let segments: Vec<Segment> = match StorePath::classify(&a.path)? {
        StorePath::Root(root) => {
            let store = Store::open(&root, &a.geometry.inputs()?)?;
            let segs = store.commitlog.segments.clone();
            segments_store = Some(store);
            segs
        }
        StorePath::CommitlogFile { path, start } => {
            let len = std::fs::metadata(&path)?.len();
            vec![Segment::commitlog(path, start, len)]
        }
        _ => anyhow::bail!(
            "{}: give a store root or a commitlog file (commitlog/<20 digits>)",
            a.path.display()
        ),
    };
    let total = output::commitlog_data_bytes(&segments);
    let pb = output::progress(total, "dumping");
    let style = Style::from_flags(a.json, &a.lines)?;
    let mut printer = MessagePrinter::new(out, style.clone(), a.body);
    let limit = a.count.unwrap_or(u64::MAX);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let sel = Selection {
        from: a.from.unwrap_or(0),
        topic: a.topic.clone(),
        limit: a.count,
        uncommitted: true,
    };
    let uncommitted = AtomicU64::new(0);
    let walked = render_in_order(
        &segments,
        &sel,
        workers,
        &|done| pb.set_position(done),
        |buf, m, file, place| {
            render(buf, m, file, &style, a.body)?;
            if let Some(p) = place {
                if !p.committed {
                    uncommitted.fetch_add(1, Ordering::Relaxed);
                }
                mark_entry(buf, p, &style);
            }
            Ok::<(), anyhow::Error>(())
        },
        |lines, n| printer.write_rendered(lines, n),
    );
    let uncommitted = uncommitted.into_inner();
    pb.finish_and_clear();
    let WalkOutcome {
        files,
        more,
        problems,
        started_at,
    } = walked?;
    // notes first: the summary is the last line of stderr (docs/json.md)
    if let Some(at) = started_at {
        output::note(&format!(
            "no record starts at offset {}; starting at the next record, offset {at}",
            sel.from
        ));
    }
    if more {
        output::note_truncated(&format!(
            "--count {limit} reached: more messages follow (continue with --from)"
        ));
    }
    for p in &problems {
        output::say(&p.to_string());
    }
    if uncommitted > 0 {
        output::note(&format!(
            "{uncommitted} records are in uncommitted DLedger entries (marked): the broker does \
             not serve them{}",
            rule_note(&segments_store)
        ));
    }
    printer.summary(
        "dump commitlog",
        json!({
            "messages": printer.printed(),
            "files": files,
            "truncated": more,
            "problems": problems.len(),
            "started_at": started_at,
            "uncommitted": uncommitted,
        }),
    )?;
    printer.flush()?;
    Ok(if problems.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Findings
    })
}

/// Say which DLedger entry a rendered record (the last line of `buf`) is wrapped in: the JSON
/// line gets `dledger_index`, `dledger_term`, `dledger_pos` and `dledger_committed`; a table row
/// ends with the entry, and says `UNCOMMITTED` when the broker does not serve it.
fn mark_entry(buf: &mut Vec<u8>, p: &EntryPlace, style: &Style) {
    let h = &p.header;
    match style {
        Style::Json if buf.ends_with(b"}\n") => {
            buf.truncate(buf.len() - 2);
            let _ = writeln!(
                buf,
                ",\"dledger_index\":{},\"dledger_term\":{},\"dledger_pos\":{},\
                 \"dledger_committed\":{}}}",
                h.index, h.term, h.pos, p.committed
            );
        }
        Style::Table if buf.ends_with(b"\n") => {
            buf.pop();
            let _ = writeln!(
                buf,
                "  [entry {} term {} pos {}{}]",
                h.index,
                h.term,
                h.pos,
                if p.committed { "" } else { " UNCOMMITTED" }
            );
        }
        _ => {}
    }
}

/// The commit rule a DLedger-mode store was read with, for a note.
fn rule_note(store: &Option<Store>) -> String {
    match store.as_ref().and_then(|s| s.dledger.as_ref()) {
        Some(l) => format!(" (commit rule: {})", l.commit_rule.describe()),
        None => String::new(),
    }
}
