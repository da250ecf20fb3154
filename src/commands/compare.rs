//! `rmqstore compare`: what a failover lost, across a master and its slaves or the replicas of a
//! DLedger group (see `engine::check::compare`).
//!
//! Every record only in some stores is printed as the walk meets it (`compare_record` lines with
//! `--json`), then each store (`compare_store`), each config difference (`config_difference`)
//! and the summary. `--export FILE.jsonl` (also `.json`, `.ndjson`) writes the records that
//! would be lost in `export`'s JSON Lines shape; any other path is a new store directory with
//! them, through the export's store writer. Nothing is written into the stores.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use super::export::ExportJson;
use super::output::{self, format_time, BodyMode, MessageJson};
use super::{ExitStatus, GeometryArgs};
use crate::engine::check::compare::{
    self, CompareOptions, CompareReport, OnlyKind, OnlyRecord, Sink, StoreSide, Tally,
};
use crate::engine::consume::export::{
    item_of_record, resend_record, ExportSource, StoreExportWriter,
};
use crate::format::commitlog::MessageRef;
use crate::format::config::{load, TopicConfigs};

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The stores (read-only): a master and its slaves, or the replicas of a DLedger group.
    #[arg(required = true, num_args = 2.., value_name = "STORE")]
    pub stores: Vec<PathBuf>,
    /// Normal mode: the store that carries on after the failover (1 = the first given). By
    /// default the one whose log every other extends (a slave behind its master), or, where the
    /// logs diverged, the one written last.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub keep: Option<u64>,
    /// Write the messages that would be lost: FILE.jsonl (also .json, .ndjson) in `export`'s
    /// JSON Lines shape, else a new store directory (it must not exist, or be empty).
    #[arg(long, value_name = "FILE.jsonl|DIR")]
    pub export: Option<PathBuf>,
    /// Compare stores that look like different brokers or clusters, or one store given twice;
    /// replace an existing --export FILE.jsonl.
    #[arg(long)]
    pub force: bool,
    /// How bodies are written in --export JSON Lines.
    #[arg(long, value_parser = super::output::body_mode_parser(), default_value = "auto")]
    pub body: BodyMode,
    /// Print JSON Lines (docs/json.md).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

fn is_json_lines(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jsonl" | "json" | "ndjson"))
}

/// Where the lost messages go.
enum ExportOut {
    Lines {
        tmp: PathBuf,
        path: PathBuf,
        w: BufWriter<std::fs::File>,
        n: usize,
    },
    Store(Box<StoreExportWriter>),
}

struct Printer<'o> {
    out: &'o mut dyn Write,
    json: bool,
    body: BodyMode,
    export: Option<ExportOut>,
    /// Lost records not exported (the broker's own transaction op records).
    not_exported: u64,
    exported_by_source: std::collections::BTreeMap<&'static str, u64>,
    lines: u64,
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(|i| (i + 1).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl Sink for Printer<'_> {
    fn record(&mut self, r: &OnlyRecord, m: &MessageRef<'_>, file: &Path) -> anyhow::Result<()> {
        if self.json {
            output::typed_line(self.out, "compare_record", r)?;
        } else {
            if self.lines == 0 {
                writeln!(self.out, "records only in some stores:")?;
            }
            let what = match r.kind {
                OnlyKind::Lost => "lost",
                OnlyKind::Kept => "kept",
            };
            let mut line = format!(
                "  {what} store {} @{} {} q{} #{} {} id {}",
                list(&r.held_by),
                r.commitlog_offset,
                r.topic,
                r.queue_id,
                r.queue_offset,
                format_time(r.store_timestamp),
                r.msg_id
            );
            if let Some(i) = r.dledger_index {
                line.push_str(&format!(" entry {i} term {}", r.dledger_term.unwrap_or(0)));
            }
            if let Some(u) = &r.uniq_key {
                line.push_str(&format!(" uniq {u}"));
            }
            if !r.keys.is_empty() {
                line.push_str(&format!(" keys {}", r.keys.join(" ")));
            }
            if !r.unconsumed_by.is_empty() {
                line.push_str(&format!(" not consumed by {}", r.unconsumed_by.join(",")));
            }
            line.push_str(&format!(" (missing from store {})", list(&r.missing_from)));
            writeln!(self.out, "{line}")?;
        }
        self.lines += 1;
        if r.kind != OnlyKind::Lost {
            return Ok(());
        }
        let Some(export) = self.export.as_mut() else {
            return Ok(());
        };
        let Some(item) = item_of_record(m) else {
            self.not_exported += 1;
            return Ok(());
        };
        match export {
            ExportOut::Lines { w, n, .. } => {
                let line = ExportJson {
                    message: MessageJson::new(m, file, self.body),
                    export_source: item.source,
                    resend_topic: item.resend_topic.clone(),
                    resend_queue_id: item.resend_queue_id,
                    origin_message_id: item.origin_message_id.clone(),
                    due_timestamp: item.due,
                    transaction_state: None,
                };
                output::json_line(w, &line)?;
                *n += 1;
            }
            ExportOut::Store(s) => s.push(resend_record(m.to_owned_message(), &item))?,
        }
        *self
            .exported_by_source
            .entry(ExportSource::as_str(item.source))
            .or_default() += 1;
        Ok(())
    }
}

fn open_export(a: &CompareArgs, first_store: &Path) -> anyhow::Result<Option<ExportOut>> {
    let Some(path) = &a.export else {
        return Ok(None);
    };
    crate::format::layout::ensure_outside_stores(path, "--export", false)?;
    if is_json_lines(path) {
        let exists = crate::format::entry::probe(path).kind != crate::format::entry::Kind::Missing;
        if exists && !a.force {
            anyhow::bail!(
                "{}: already exists: refusing to overwrite it (--force replaces it)",
                path.display()
            );
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "lost.jsonl".into());
        let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        let f =
            std::fs::File::create(&tmp).map_err(|e| anyhow::anyhow!("{}: {e}", tmp.display()))?;
        return Ok(Some(ExportOut::Lines {
            tmp,
            path: path.clone(),
            w: BufWriter::with_capacity(1 << 16, f),
            n: 0,
        }));
    }
    let store = crate::engine::Store::open(first_store, &a.geometry.inputs()?)?;
    Ok(Some(ExportOut::Store(Box::new(StoreExportWriter::create(
        path,
        store.geometry.clone(),
    )?))))
}

/// What `--export` wrote.
#[derive(Debug, Serialize)]
struct ExportDone {
    out: String,
    format: &'static str,
    messages: usize,
    by_source: std::collections::BTreeMap<&'static str, u64>,
    /// Lost records not written: the broker's transaction op records.
    not_exported: u64,
}

fn finish_export(p: &mut Printer<'_>, keeper_root: &Path) -> anyhow::Result<Option<ExportDone>> {
    let Some(export) = p.export.take() else {
        return Ok(None);
    };
    let (out, format, messages) = match export {
        ExportOut::Lines { tmp, path, w, n } => {
            let f = w.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            (path, "jsonl", n)
        }
        ExportOut::Store(s) => {
            let topics = load::<TopicConfigs>(&keeper_root.join("config"))?.value;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let done = s.finish(&topics, now)?;
            (done.dir, "store", done.records)
        }
    };
    Ok(Some(ExportDone {
        out: out.display().to_string(),
        format,
        messages,
        by_source: std::mem::take(&mut p.exported_by_source),
        not_exported: p.not_exported,
    }))
}

fn abandon_export(p: &mut Printer<'_>) {
    match p.export.take() {
        Some(ExportOut::Lines { tmp, .. }) => {
            let _ = std::fs::remove_file(tmp);
        }
        Some(ExportOut::Store(s)) => s.abandon(),
        None => {}
    }
}

/// The closing line.
#[derive(Debug, Serialize)]
struct CompareSummary<'a> {
    mode: compare::Mode,
    stores: usize,
    #[serde(serialize_with = "compare::one_based")]
    keeper: usize,
    keeper_reason: &'a str,
    divergences: &'a [compare::Divergence],
    truncations: &'a [compare::replicas::Truncation],
    config_differences: usize,
    lost_records: u64,
    lost_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    below_divide: Option<BelowDivide<'a>>,
    export: Option<ExportDone>,
}

/// Converted DLedger replicas: their `commitlog/` files below the divide, compared as a master's
/// and its slaves'.
#[derive(Debug, Serialize)]
struct BelowDivide<'a> {
    #[serde(serialize_with = "compare::one_based")]
    keeper: usize,
    keeper_reason: &'a str,
    stores: &'a [StoreSide],
    divergences: &'a [compare::Divergence],
    lost_records: u64,
    lost_bytes: u64,
}

fn range<T: std::fmt::Display>(a: Option<T>, b: Option<T>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{a}..{b}"),
        _ => "none".into(),
    }
}

fn time_range(a: Option<i64>, b: Option<i64>) -> String {
    range(a.map(format_time), b.map(format_time))
}

fn write_tally(out: &mut dyn Write, what: &str, t: &Tally) -> std::io::Result<()> {
    if t.records == 0 {
        return Ok(());
    }
    writeln!(
        out,
        "  {what}: {} records, {} bytes, offsets {}, stored {}",
        t.records,
        t.bytes,
        range(t.min_commitlog_offset, t.max_commitlog_offset),
        time_range(t.min_store_timestamp, t.max_store_timestamp)
    )?;
    for q in &t.queues {
        writeln!(
            out,
            "    {} queue {}: {} records, {} bytes, queue offsets {}..{}",
            q.topic, q.queue_id, q.records, q.bytes, q.min_queue_offset, q.max_queue_offset
        )?;
    }
    if !t.unconsumed.is_empty() {
        let g: Vec<String> = t
            .unconsumed
            .iter()
            .map(|g| format!("{} {}", g.group, g.records))
            .collect();
        writeln!(out, "    not consumed yet: {}", g.join(", "))?;
    }
    Ok(())
}

fn write_store(out: &mut dyn Write, s: &StoreSide, keeper: usize) -> std::io::Result<()> {
    writeln!(out, "store {}: {} ({})", s.store + 1, s.root, s.role)?;
    writeln!(
        out,
        "  commitlog {} ({} records, {} bytes), stored {}{}",
        range(s.min_commitlog_offset, s.max_commitlog_offset),
        s.records,
        s.bytes,
        time_range(s.first_store_timestamp, s.last_store_timestamp),
        s.file_size
            .map(|f| format!(", file size {f}"))
            .unwrap_or_default()
    )?;
    let sig = |x: &Option<compare::Signal>| {
        x.as_ref()
            .map_or("unknown".into(), |s| format!("{} ({})", s.value, s.source))
    };
    writeln!(
        out,
        "  cluster {}, broker {}",
        sig(&s.cluster),
        sig(&s.broker_name)
    )?;
    if let Some(d) = &s.dledger {
        let o = |v: Option<i64>| v.map_or("none".into(), |v| v.to_string());
        writeln!(
            out,
            "  dledger {}: term {} (voted {}), entries {} ({}..{}, last term {}), committed {}",
            d.self_id,
            o(d.current_term),
            d.vote_leader.as_deref().unwrap_or("none"),
            d.entries,
            o(d.ledger_begin_index),
            o(d.ledger_end_index),
            o(d.ledger_end_term),
            o(d.committed_index)
        )?;
    }
    if let Some(e) = &s.stopped {
        writeln!(out, "  the walk stopped: {e}")?;
    }
    let what = if s.store == keeper {
        "only here (missing from another store)".to_string()
    } else if s.mode == compare::Mode::Dledger {
        "dropped when it rejoins (lost)".to_string()
    } else {
        format!("only here, not on store {} (lost)", keeper + 1)
    };
    write_tally(out, &what, &s.only)?;
    if let Some(b) = &s.before_keeper {
        write_tally(
            out,
            &format!(
                "older than store {}'s first file (not counted as lost)",
                keeper + 1
            ),
            b,
        )?;
    }
    Ok(())
}

fn write_divergences(out: &mut dyn Write, ds: &[compare::Divergence]) -> std::io::Result<()> {
    for d in ds {
        let at = match (d.commitlog_offset, d.index) {
            (Some(o), _) => format!("at commitlog offset {o}"),
            (_, Some(i)) => format!("at index {i}"),
            _ => String::new(),
        };
        let how = match (d.kind, d.field) {
            ("same", _) => "the same log".to_string(),
            ("differs", Some(f)) => format!("differs {at} ({f})"),
            ("differs", None) => format!("differs {at}"),
            ("store_ends", _) => format!("ends {at}"),
            ("against_ends", _) => format!("goes on past its end {at}"),
            (k, _) => format!("{k} {at}"),
        };
        writeln!(
            out,
            "store {} against store {}: {how}, after {} records ({} bytes) proven equal",
            d.store + 1,
            d.against + 1,
            d.common_records,
            d.common_bytes
        )?;
    }
    Ok(())
}

fn write_report(
    out: &mut dyn Write,
    r: &CompareReport,
    export: &Option<ExportDone>,
) -> std::io::Result<()> {
    for s in &r.stores {
        write_store(out, s, r.keeper)?;
    }
    let who = match r.mode {
        compare::Mode::Normal => "carries on",
        compare::Mode::Dledger => "leads",
    };
    writeln!(out, "store {} {who}: {}", r.keeper + 1, r.keeper_reason)?;
    write_divergences(out, &r.divergences)?;
    for t in &r.truncations {
        let keeps = t
            .keeps_to_index
            .map_or("none of its entries".into(), |k| format!("entries to {k}"));
        if t.drops_entries > 0 {
            writeln!(
                out,
                "store {} rejoining store {}: keeps {keeps}, drops {} entries ({}..{}){}, receives {}",
                t.store + 1,
                t.leader + 1,
                t.drops_entries,
                t.drops_from_index.unwrap_or(0),
                t.drops_to_index.unwrap_or(0),
                if t.drops_committed > 0 {
                    format!(", {} of them at or below its committed index", t.drops_committed)
                } else {
                    String::new()
                },
                t.appends_entries
            )?;
        } else {
            writeln!(
                out,
                "store {} rejoining store {}: keeps {keeps}, drops nothing, receives {}",
                t.store + 1,
                t.leader + 1,
                t.appends_entries
            )?;
        }
    }
    for c in &r.config {
        writeln!(
            out,
            "config: {} {}{}: store {} {}, store {} {}",
            c.file,
            c.name,
            c.queue_id
                .map(|q| format!(" queue {q}"))
                .unwrap_or_default(),
            c.store + 1,
            c.store_value.as_deref().unwrap_or("missing"),
            c.against + 1,
            c.against_value.as_deref().unwrap_or("missing"),
        )?;
    }
    if let Some(b) = &r.below_divide {
        writeln!(
            out,
            "below the divide (the converted stores' commitlog/, each broker's own):"
        )?;
        for s in &b.stores {
            write_store(out, s, b.keeper)?;
        }
        writeln!(
            out,
            "store {} carries on: {}",
            b.keeper + 1,
            b.keeper_reason
        )?;
        write_divergences(out, &b.divergences)?;
        writeln!(
            out,
            "lost below the divide: {} records ({} bytes)",
            b.lost_records, b.lost_bytes
        )?;
    }
    if r.lost_records > 0 {
        writeln!(
            out,
            "lost: {} records ({} bytes)",
            r.lost_records, r.lost_bytes
        )?;
    } else {
        writeln!(out, "nothing is lost")?;
    }
    if let Some(e) = export {
        writeln!(
            out,
            "exported {} message(s) to {} ({}){}",
            e.messages,
            e.out,
            e.format,
            if e.not_exported > 0 {
                format!("; {} transaction op record(s) not exported", e.not_exported)
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

pub fn run(a: &CompareArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let opts = CompareOptions {
        force: a.force,
        keep: a.keep.map(|k| (k - 1) as usize),
    };
    let opened = compare::open(&a.stores, &a.geometry.inputs()?, &opts)?;
    let export = open_export(a, &opened.stores[0].root)?;
    let mut p = Printer {
        out,
        json: a.json,
        body: a.body,
        export,
        not_exported: 0,
        exported_by_source: Default::default(),
        lines: 0,
    };
    let report = match compare::compare(&opened, &opts, &mut p) {
        Ok(r) => r,
        Err(e) => {
            abandon_export(&mut p);
            return Err(e);
        }
    };
    let export = finish_export(&mut p, &opened.stores[report.keeper].root)?;
    let out = p.out;
    if a.json {
        for s in &report.stores {
            output::typed_line(out, "compare_store", s)?;
        }
        for c in &report.config {
            output::typed_line(out, "config_difference", c)?;
        }
        output::summary_line(
            out,
            "compare",
            &CompareSummary {
                mode: report.mode,
                stores: report.stores.len(),
                keeper: report.keeper,
                keeper_reason: &report.keeper_reason,
                divergences: &report.divergences,
                truncations: &report.truncations,
                config_differences: report.config.len(),
                lost_records: report.lost_records,
                lost_bytes: report.lost_bytes,
                below_divide: report.below_divide.as_deref().map(|b| BelowDivide {
                    keeper: b.keeper,
                    keeper_reason: &b.keeper_reason,
                    stores: &b.stores,
                    divergences: &b.divergences,
                    lost_records: b.lost_records,
                    lost_bytes: b.lost_bytes,
                }),
                export,
            },
        )?;
    } else {
        write_report(out, &report, &export)?;
    }
    Ok(if report.lost_records > 0 {
        ExitStatus::Findings
    } else {
        ExitStatus::Success
    })
}
