//! `dump consumequeue`: the units of a topic's queues.

use std::io::Write;
use std::ops::ControlFlow;

use serde::Serialize;
use serde_json::json;

use crate::commands::output::{self};
use crate::commands::ExitStatus;
use crate::engine::store::reader::Reader;
use crate::engine::Store;
use crate::format::consumequeue::{ConsumeQueue, UNIT_SIZE};

use super::ConsumeQueueArgs;

#[derive(Serialize)]
struct UnitJson<'a> {
    topic: &'a str,
    queue_id: i32,
    queue_offset: u64,
    commitlog_offset: i64,
    size: i32,
    tags_code: i64,
    /// A `fillPreBlank` placeholder, never a message.
    pre_blank: bool,
    /// The tags code is a ConsumeQueueExt address.
    ext_address: bool,
    /// Points below the commitlog's first offset (deleted data).
    stale: bool,
    file: String,
}

pub(super) fn consumequeue(
    a: &ConsumeQueueArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitStatus> {
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let queues: Vec<&ConsumeQueue> = match a.queue {
        Some(q) => store.queue(&a.topic, q).into_iter().collect(),
        None => store.topic_queues(&a.topic).collect(),
    };
    if queues.is_empty() {
        anyhow::bail!(
            "no consume queue for topic {:?}{} under {}",
            a.topic,
            a.queue.map(|q| format!(" queue {q}")).unwrap_or_default(),
            store.root.join("consumequeue").display()
        );
    }
    let reader = Reader::new(&store);
    let cl_min = store.commitlog.min_offset() as i64;
    let limit = a.count.unwrap_or(u64::MAX);
    let mut summary = Vec::new();
    let mut truncated = Vec::new();
    for cq in queues {
        let min = cq.min_offset(store.commitlog.min_offset())?;
        let max = cq.max_offset()?;
        let first = cq
            .files
            .first()
            .map(|f| f.start / UNIT_SIZE as u64)
            .unwrap_or(0);
        let from = a.from.unwrap_or(first);
        if !a.json {
            writeln!(
                out,
                "{}/{}: min offset {min}, max offset {max}, {} file(s)",
                cq.topic,
                cq.queue_id,
                cq.files.len()
            )?;
            writeln!(
                out,
                "{:>10} {:>14} {:>8} {:>20}  NOTE",
                "QOFFSET", "COMMITLOG", "SIZE", "TAGS_CODE"
            )?;
        }
        let mut n = 0u64;
        let mut more = false;
        let mut failed: Option<anyhow::Error> = None;
        reader.for_each_unit_from(cq, from, |q, u| {
            if n >= limit {
                more = true;
                return ControlFlow::Break(());
            }
            n += 1;
            let pre_blank = u.is_pre_blank();
            let ext = u.has_ext_addr();
            let stale = !pre_blank && u.offset < cl_min;
            let r = if a.json {
                let file = file_of(cq, q);
                output::typed_line(
                    out,
                    "unit",
                    &UnitJson {
                        topic: &cq.topic,
                        queue_id: cq.queue_id,
                        queue_offset: q,
                        commitlog_offset: u.offset,
                        size: u.size,
                        tags_code: u.tags_code,
                        pre_blank,
                        ext_address: ext,
                        stale,
                        file,
                    },
                )
            } else {
                let note = [
                    (pre_blank, "pre-blank"),
                    (ext, "ext address"),
                    (stale, "below commitlog min"),
                ]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, s)| *s)
                .collect::<Vec<_>>()
                .join(", ");
                writeln!(
                    out,
                    "{:>10} {:>14} {:>8} {:>20}  {note}",
                    q, u.offset, u.size, u.tags_code
                )
                .map_err(Into::into)
            };
            if let Err(e) = r {
                failed = Some(e);
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        if more {
            truncated.push(format!("{}/{}", cq.topic, cq.queue_id));
        }
        summary.push(json!({
            "topic": cq.topic, "queue_id": cq.queue_id, "min_offset": min, "max_offset": max,
            "units": n, "truncated": more,
        }));
    }
    if a.json {
        output::summary_line(out, "dump consumequeue", &json!({ "queues": summary }))?;
    }
    out.flush()?;
    if !truncated.is_empty() {
        output::note_truncated(&format!(
            "--count {limit} reached in {}: more units follow",
            truncated.join(", ")
        ));
    }
    Ok(ExitStatus::Success)
}

fn file_of(cq: &ConsumeQueue, q: u64) -> String {
    let pos = q.saturating_mul(UNIT_SIZE as u64);
    cq.files
        .iter()
        .rev()
        .find(|f| f.start <= pos)
        .map(|f| f.path.display().to_string())
        .unwrap_or_default()
}
