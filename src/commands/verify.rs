//! `rmqstore verify`: check every invariant of a healthy store, or (`--explain-recovery`) say what
//! the broker would do to it on its next start. Read-only; works on a live store too.
//!
//! `--json` prints JSON Lines (docs/json.md): one `{"type":"finding",...}` per finding, then
//! `{"type":"summary","command":"verify",...}` last. With `--explain-recovery` it prints a
//! `{"type":"recovery",...}` line (the engine's `RecoveryPlan`) and its summary.
//!
//! Exit status: 0 healthy or warnings only, 1 errors (with `--strict`, warnings too; with
//! `--explain-recovery`, recovery would lose data or refuse to start), 2 could not run.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::{output, ExitStatus, GeometryArgs};
use crate::engine::check::recovery::{self, RecoveryPlan};
use crate::engine::check::verify::{
    verify, Part, Phase, Report, VerifyOptions, DEFAULT_MAX_PER_CODE,
};
use crate::engine::Store;
use crate::format::finding::{Finding, Location, Severity};

/// A part of the store `--only` restricts the checks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnlyPart {
    /// Commitlog files and records, checkpoint, abort marker.
    Commitlog,
    /// Consume queues against the commitlog.
    Consumequeue,
    /// Index files against the commitlog.
    Index,
    /// Config JSON files and the offsets in them.
    Config,
    /// 5.x timer files: timerlog/, timerwheel, config/timercheck, config/timermetrics.
    Timer,
    /// A DLedger-mode store's log: entries, index, checkpoint, currterm (DLEDGER.md).
    Dledger,
}

impl From<OnlyPart> for Part {
    fn from(p: OnlyPart) -> Self {
        match p {
            OnlyPart::Commitlog => Part::Commitlog,
            OnlyPart::Consumequeue => Part::ConsumeQueue,
            OnlyPart::Index => Part::Index,
            OnlyPart::Config => Part::Config,
            OnlyPart::Timer => Part::Timer,
            OnlyPart::Dledger => Part::Dledger,
        }
    }
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The store root (the broker's storePathRootDir).
    pub store: PathBuf,
    #[command(flatten)]
    pub geometry: GeometryArgs,
    /// JSON Lines: one `finding` object per finding, then a `summary` (docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// Do not check body CRCs (faster; the broker checks them during recovery).
    #[arg(long)]
    pub no_crc: bool,
    /// Check only these parts (comma-separated or repeated).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "PART")]
    pub only: Vec<OnlyPart>,
    /// Check records, queues and offsets of this topic only (file structure is always checked).
    #[arg(long, value_name = "TOPIC")]
    pub topic: Option<String>,
    /// Also check what the broker does not (__CRC32# property, PHYSICALOFFSET, queue offset
    /// continuity, stale records, odd fields), and exit 1 on warnings too (not only errors).
    #[arg(long)]
    pub strict: bool,
    /// Check the index and consume queue contents of one record or unit in N.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub sample: u64,
    /// Say what the broker would do on its next start (recovery mode, scan start, cut, deleted
    /// files, dropped units and index files, and what each step loses), and nothing else.
    #[arg(long)]
    pub explain_recovery: bool,
    /// Findings listed per code (all are counted in the summary).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PER_CODE)]
    pub max_findings: usize,
}

/// The summary of `--explain-recovery`.
#[derive(Serialize)]
struct RecoverySummary {
    loses_nothing: bool,
    messages_dropped: u64,
}

pub fn run(a: &VerifyArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    if let Some(n) = crate::engine::store::dledger::reading_note(&store) {
        output::note(&n);
    }
    if a.explain_recovery {
        let plan = recovery::plan(&store, !a.no_crc)?;
        if a.json {
            output::typed_line(out, "recovery", &plan)?;
            output::summary_line(
                out,
                "verify --explain-recovery",
                &RecoverySummary {
                    loses_nothing: plan.loses_nothing(),
                    messages_dropped: plan.messages_dropped(),
                },
            )?;
        } else {
            print_plan(&plan, out)?;
        }
        return Ok(if plan.loses_nothing() {
            ExitStatus::Success
        } else {
            ExitStatus::Findings
        });
    }
    let opts = VerifyOptions {
        check_crc: !a.no_crc,
        strict: a.strict,
        parts: a.only.iter().map(|&p| p.into()).collect(),
        topic: a.topic.clone(),
        sample: a.sample,
        max_per_code: a.max_findings.max(1),
        ..VerifyOptions::default()
    };
    let total = output::commitlog_data_bytes(&store.commitlog.segments);
    let pb = output::progress(total, "verifying commitlog");
    let progress = |phase: Phase, done: u64, n: u64| match phase {
        Phase::Commitlog => pb.set_position(done),
        Phase::ConsumeQueues => pb.set_message(format!("consume queues {done}/{n}")),
        Phase::Index => {}
    };
    let report = verify(&store, &opts, Some(&progress))?;
    pb.finish_and_clear();
    if a.json {
        for f in &report.findings {
            output::typed_line(out, "finding", f)?;
        }
        // the plan the text shows, on the same condition
        if let Some(plan) = shown_plan(&report) {
            output::typed_line(out, "recovery", plan)?;
        }
        output::summary_line(out, "verify", &report.summary)?;
    } else {
        print_human(&report, opts.max_per_code, out)?;
    }
    Ok(if report.summary.healthy {
        ExitStatus::Success
    } else {
        ExitStatus::Findings
    })
}

fn print_plan(plan: &RecoveryPlan, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "On its next start the broker would ({} rules{}):",
        plan.version.version,
        if plan.version.from_evidence {
            ""
        } else {
            ", assumed"
        }
    )?;
    for (i, s) in plan.steps().iter().enumerate() {
        writeln!(out, "  {:>2}. {s}", i + 1)?;
    }
    writeln!(out, "Assumed: {}", plan.version.assumption)?;
    for e in &plan.version.evidence {
        writeln!(out, "  evidence: {e}")?;
    }
    writeln!(
        out,
        "Result: {}",
        if plan.loses_nothing() {
            "nothing is lost".to_string()
        } else {
            format!(
                "{} messages dropped from the commitlog, {} consume queue units dropped, {} messages lose their index entries{}",
                plan.messages_dropped(),
                plan.queue_truncations.iter().map(|q| q.units).sum::<u64>(),
                plan.index_records_lost,
                if plan.refuses_to_start.is_empty() {
                    ""
                } else {
                    "; the broker refuses to start"
                }
            )
        }
    )?;
    writeln!(out, "Nothing was changed.")
}

fn sev_label(s: Severity) -> &'static str {
    match s {
        Severity::Error => "ERROR",
        Severity::Warning => "WARNING",
        Severity::Info => "info",
    }
}

fn print_finding(f: &Finding, out: &mut dyn Write) -> std::io::Result<()> {
    let label = format!("{:<7}", sev_label(f.severity));
    let label = match f.severity {
        Severity::Error => output::painted(&label, output::Paint::Red, false),
        Severity::Warning => output::painted(&label, output::Paint::Yellow, false),
        Severity::Info => label,
    };
    write!(
        out,
        "{} {:<30} {} @ {}",
        label,
        f.code,
        f.file.display(),
        f.offset
    )?;
    match &f.location {
        Location::File => writeln!(out)?,
        place => writeln!(out, " ({place})")?,
    }
    writeln!(out, "        {}", f.message)?;
    if let Some(a) = &f.broker_action {
        writeln!(out, "        broker: {a}")?;
    }
    Ok(())
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The recovery plan both outputs show: after an unclean shutdown, or when it loses data.
fn shown_plan(r: &Report) -> Option<&RecoveryPlan> {
    r.recovery
        .as_ref()
        .filter(|p| !r.summary.clean_shutdown || !p.loses_nothing())
}

fn print_human(r: &Report, cap: usize, out: &mut dyn Write) -> std::io::Result<()> {
    for f in &r.findings {
        print_finding(f, out)?;
    }
    let s = &r.summary;
    if let Some(plan) = shown_plan(r) {
        writeln!(out)?;
        writeln!(out, "Recovery on the next start:")?;
        for (i, step) in plan.steps().iter().enumerate() {
            writeln!(out, "  {:>2}. {step}", i + 1)?;
        }
    }
    // Per code: every finding counted, and how many of them are listed above.
    let mut listed: BTreeMap<&str, (Severity, u64)> = BTreeMap::new();
    for f in &r.findings {
        listed.entry(f.code.as_str()).or_insert((f.severity, 0)).1 += 1;
    }
    let mut per_code: BTreeMap<(std::cmp::Reverse<Severity>, &str), (u64, u64)> = BTreeMap::new();
    for (code, n) in &s.findings_per_code {
        let (sev, shown) = listed.get(code).copied().unwrap_or((Severity::Info, 0));
        per_code.insert((std::cmp::Reverse(sev), code), (*n, shown));
    }
    writeln!(out)?;
    if !per_code.is_empty() {
        writeln!(out, "{:<8} {:<32} {:>8}", "SEVERITY", "CODE", "COUNT")?;
        for ((sev, code), (n, shown)) in &per_code {
            writeln!(
                out,
                "{:<8} {:<32} {:>8}{}",
                sev_label(sev.0),
                code,
                grouped(*n),
                if shown < n {
                    format!(" ({} listed)", grouped(*shown))
                } else {
                    String::new()
                }
            )?;
        }
        if s.findings_not_listed > 0 {
            writeln!(
                out,
                "{} findings over the cap of {} per code are counted, not listed (--max-findings)",
                grouped(s.findings_not_listed),
                grouped(cap as u64)
            )?;
        }
        writeln!(out)?;
    }
    let mode = format!(
        "{}CRC {}, {} mode{}",
        if s.sample > 1 {
            format!("1 in {} sampled, ", s.sample)
        } else {
            String::new()
        },
        if s.crc_checked { "on" } else { "off" },
        if s.strict { "strict" } else { "broker" },
        s.topic
            .as_ref()
            .map(|t| format!(", topic {t}"))
            .unwrap_or_default()
    );
    let recovery = match (s.recovery_mode, s.recovery_cut) {
        _ if !s.refuses_to_start.is_empty() => format!(
            "the broker REFUSES TO START: {}{}",
            s.refuses_to_start[0],
            match s.refuses_to_start.len() {
                1 => String::new(),
                n => format!(" (and {} more reasons)", n - 1),
            }
        ),
        (Some(m), Some(c)) => format!(
            "{} on next start, data ends at {}, {} messages dropped",
            match m {
                recovery::RecoveryMode::Normal => "normal",
                recovery::RecoveryMode::Abnormal => "abnormal",
            },
            grouped(c),
            grouped(s.recovery_drops_messages)
        ),
        _ if s.parts.contains(&"commitlog")
            || s.parts.contains(&"consumequeue")
            || s.parts.contains(&"index") =>
        {
            "no commitlog files".to_string()
        }
        _ => "not worked out (commitlog, consume queues and index not checked)".to_string(),
    };
    let rows: Vec<(&str, String)> = vec![
        (
            "result",
            if s.healthy {
                "healthy".to_string()
            } else {
                "PROBLEMS FOUND".to_string()
            },
        ),
        ("checked", format!("{} ({mode})", s.parts.join(", "))),
        (
            "store",
            format!(
                "{} rules, {} shutdown",
                s.store_version,
                if s.clean_shutdown { "clean" } else { "UNCLEAN" }
            ),
        ),
        (
            "messages",
            format!(
                "{} ({} bytes) in {} commitlog files",
                grouped(s.messages),
                grouped(s.bytes),
                s.commitlog_files
            ),
        ),
        (
            "consume queues",
            format!("{} queues, {} units", s.consume_queues, grouped(s.cq_units)),
        ),
        (
            "index",
            format!(
                "{} files, {} entries checked",
                s.index_files,
                grouped(s.index_entries_checked)
            ),
        ),
        (
            "duplicates",
            format!("{} repeated UNIQ_KEYs", grouped(s.duplicate_uniq_keys)),
        ),
        ("recovery", recovery),
        ("errors", grouped(s.errors)),
        ("warnings", grouped(s.warnings)),
        ("info", grouped(s.infos)),
    ];
    writeln!(out, "SUMMARY")?;
    for (k, v) in rows {
        writeln!(out, "  {k:<15} {v}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
