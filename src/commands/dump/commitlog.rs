//! `dump commitlog`: messages in commitlog order, rendered on several threads.

use std::io::Write;

use serde_json::json;

use crate::commands::line_format::Style;
use crate::commands::message_printer::{render, MessagePrinter};
use crate::commands::output::{self};
use crate::commands::ExitStatus;
use crate::engine::store::render_walk::{render_in_order, Selection, WalkOutcome};
use crate::engine::store::StorePath;
use crate::engine::Store;
use crate::format::commitlog::read::Segment;

use super::CommitlogArgs;

pub(super) fn commitlog(a: &CommitlogArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let segments: Vec<Segment> = match StorePath::classify(&a.path)? {
        StorePath::Root(root) => Store::open(&root, &a.geometry.inputs()?)?
            .commitlog
            .segments
            .clone(),
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
    };
    let walked = render_in_order(
        &segments,
        &sel,
        workers,
        &|done| pb.set_position(done),
        |buf, m, file| render(buf, m, file, &style, a.body),
        |lines, n| printer.write_rendered(lines, n),
    );
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
    printer.summary(
        "dump commitlog",
        json!({
            "messages": printer.printed(),
            "files": files,
            "truncated": more,
            "problems": problems.len(),
            "started_at": started_at,
        }),
    )?;
    printer.flush()?;
    Ok(if problems.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Findings
    })
}
