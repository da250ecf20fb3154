//! `rmqstore repair`: plan, then stage a repaired store and switch it in (or write it elsewhere).
//!
//! `--dry-run` prints the plan and writes nothing. `--out DIR` writes the repaired store to a new
//! folder outside every store. `--in-place` holds the broker's lock for the whole run, stages
//! the repaired store beside the original, checks that it verifies clean, and exchanges the two
//! folders in one atomic rename; the old store stays beside it.
//!
//! Ctrl-C (or SIGTERM) stops the run at its next step before the switch (the check of the store,
//! each salvaged record, each piece of the commitlog rebuilt, the check of the result) and
//! removes the stage it made; a second one quits at once (the next `--in-place` run clears what
//! such a run left).
//!
//! Exit status: 0 repaired (or nothing to repair), 1 the repaired store still has errors (it is
//! left for inspection, never switched in), 2 could not run or interrupted.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use clap::Args;

use super::{interrupt, output, ExitStatus, GeometryArgs};
use crate::engine::check::repair::{apply, fixed_geometry, plan_mode, Manifest, Mode, Plan, CUT};
use crate::engine::check::verify::{verify, VerifyOptions};
use crate::engine::store::safedir::{
    failpoint, finish_interrupted, remove_stage, stamp, switch_root, StoreLock,
};
use crate::engine::Store;
use crate::format::error::Error;
use crate::format::layout::ensure_outside_stores;

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The store root.
    pub store: PathBuf,
    /// Print the plan and change nothing (nothing is written anywhere).
    #[arg(long)]
    pub dry_run: bool,
    /// Write the repaired store to DIR, a new folder outside any store (default:
    /// <STORE>/../<name>.repaired).
    #[arg(long, value_name = "DIR", conflicts_with = "in_place")]
    pub out: Option<PathBuf>,
    /// Replace the store: the repaired copy is staged beside it, verified, and switched in
    /// atomically while the broker's lock is held; the old one stays as
    /// <name>.before-repair-<time>, as it was (it shares its full commitlog files with the
    /// repaired store as hard links; remove it when it is no longer needed).
    #[arg(long)]
    pub in_place: bool,
    /// What to do with a damaged range between intact records: `bridge` replaces it in place by
    /// tombstones and fillers (every intact record stays in service at its offsets); `cut` cuts
    /// the commitlog there as the broker's recovery would and salvages what follows. A
    /// DLedger log is always cut (a replica's entries are never rewritten); a converted store's
    /// `commitlog/` below the divide follows this option.
    #[arg(long, value_enum, default_value = "bridge")]
    pub mode: ModeArg,
    #[command(flatten)]
    pub geometry: GeometryArgs,
    /// JSON Lines: one object per action, then a summary.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    Bridge,
    Cut,
}

fn name_parent(root: &Path) -> (String, PathBuf) {
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".into());
    let parent = root
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    (name, parent)
}

pub fn run(a: &RepairArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let stop = interrupt::stop_flag(
        "stopping the repair: what it wrote so far is removed (again to quit at once)",
    )?;
    let root = std::fs::canonicalize(&a.store).unwrap_or_else(|_| a.store.clone());
    let (name, parent) = name_parent(&root);
    let stage_prefix = format!(".{name}.repair-");
    let before_prefix = format!("{name}.before-repair-");
    // The lock is held from here to the end of the run.
    let mut lock = if a.in_place {
        let lock = StoreLock::acquire(&root)?;
        finish_interrupted(&root, &stage_prefix, &before_prefix)?;
        Some(lock)
    } else if a.dry_run {
        None
    } else {
        StoreLock::acquire_existing(&root)?
    };
    let store = Store::open(&root, &a.geometry.inputs()?)?;
    let mode = match a.mode {
        ModeArg::Bridge => Mode::Bridge,
        ModeArg::Cut => Mode::Cut,
    };
    let p = plan_mode(&store, Some(stop.clone()), mode)?;
    if a.dry_run {
        print(a, out, &p, None, None)?;
        return Ok(ExitStatus::Success);
    }
    let t = stamp();
    let repair_name = format!("repair-{t}");
    let (stage, dest) = if a.in_place {
        (parent.join(format!("{stage_prefix}{t}")), root.clone())
    } else {
        let d = a
            .out
            .clone()
            .unwrap_or_else(|| parent.join(format!("{name}.repaired")));
        ensure_outside_stores(&d, "--out", false)?;
        (d.clone(), d)
    };
    let manifest = match apply(&store, &p, &stage, &repair_name) {
        Ok(m) => m,
        Err(e) => {
            // Only a folder this run made, still marked as a stage, is removed.
            remove_stage(&stage);
            return Err(e.into());
        }
    };
    failpoint("repair-staged");
    let staged = match Store::open_staged(&stage, &fixed_geometry(&store)) {
        Ok(s) => s,
        Err(e) => {
            remove_stage(&stage);
            return Err(e.into());
        }
    };
    let check = VerifyOptions {
        interrupt: Some(stop.clone()),
        ..VerifyOptions::default()
    };
    let check = match verify(&staged, &check, None) {
        Ok(c) if !stop.load(Ordering::SeqCst) => c,
        Err(e) if !stop.load(Ordering::SeqCst) => {
            drop(staged);
            remove_stage(&stage);
            return Err(e.into());
        }
        // stopped before the switch: the stage (still marked as one) is this run's own
        _ => {
            drop(staged);
            remove_stage(&stage);
            return Err(Error::interrupted(&root, "repair").into());
        }
    };
    if !check.summary.healthy {
        let first: Vec<String> = check
            .findings
            .iter()
            .filter(|f| f.severity == crate::format::finding::Severity::Error)
            .take(5)
            .map(|f| {
                format!(
                    "{} {} @ {}: {}",
                    f.code,
                    f.file.display(),
                    f.offset,
                    f.message
                )
            })
            .collect();
        writeln!(
            out,
            "the repaired store at {} still has {} error(s); it was not switched in:\n  {}",
            stage.display(),
            check.summary.errors,
            first.join("\n  ")
        )?;
        return Ok(ExitStatus::Findings);
    }
    drop(staged);
    failpoint("repair-checked");
    if stop.load(Ordering::SeqCst) {
        remove_stage(&stage);
        return Err(Error::interrupted(&root, "repair").into());
    }
    if a.in_place {
        // The staged `lock` is a link to the store's, already held; were it a copy, it is
        // locked too, so a broker starting right after the exchange is refused.
        if let Some(l) = lock.as_mut() {
            l.add(&stage)?;
        }
        let before = parent.join(format!("{before_prefix}{t}"));
        switch_root(&root, &stage, &before)?;
        print(a, out, &p, Some(&manifest), Some((&dest, &repair_name)))?;
        writeln!(
            out,
            "the old store is at {}, as it was (its full commitlog files are hard links shared with the repaired store: remove it when it is no longer needed)",
            before.display()
        )
        .ok();
    } else {
        crate::engine::store::safedir::unmark_stage(&stage)?;
        print(a, out, &p, Some(&manifest), Some((&dest, &repair_name)))?;
    }
    drop(lock);
    Ok(ExitStatus::Success)
}

fn print(
    a: &RepairArgs,
    out: &mut dyn Write,
    p: &Plan,
    m: Option<&Manifest>,
    dest: Option<(&Path, &str)>,
) -> anyhow::Result<()> {
    let removed = m.map(|m| m.removed_bytes(&p.report)).unwrap_or_default();
    let (salvaged_records, salvaged_bytes) = m.map_or((p.salvage_records, p.salvage_bytes), |m| {
        (m.salvaged_records, m.salvaged_bytes)
    });
    let kept = m.map_or(p.messages_kept, |m| m.messages_kept);
    let lost: Vec<_> = p
        .bridges
        .iter()
        .flat_map(|b| &b.lost)
        .chain(&p.cut_lost)
        .collect();
    let tombstones: u64 = p.bridges.iter().map(|b| b.tombstones).sum();
    let fillers: u64 = p.bridges.iter().map(|b| b.fillers).sum();
    if a.json {
        for act in &p.actions {
            output::typed_line(out, "action", act)?;
        }
        output::summary_line(
            out,
            "repair",
            &serde_json::json!({
                "dry_run": a.dry_run,
                "actions": p.actions.len(),
                "cut": p.cut.as_ref().map(|c| serde_json::json!({
                    "file": c.file,
                    "file_offset": c.position,
                    "commitlog_offset": c.offset,
                    "reason": c.reason,
                })),
                "headers_mended": p.headers.len(),
                "tombstones": tombstones,
                "fillers": fillers,
                "lost": lost,
                "messages_kept": kept,
                "salvaged_records": salvaged_records,
                "salvaged_bytes": salvaged_bytes,
                "removed_bytes": removed.data + removed.files,
                "removed_data_bytes": removed.data,
                "removed_file_bytes": removed.files,
                "dledger": p.dledger,
                "store": dest.map(|(d, _)| d.display().to_string()),
                "repair_folder": dest.map(|(d, r)| d.join(r).display().to_string()),
            }),
        )?;
        return Ok(());
    }
    if p.is_empty() {
        writeln!(out, "nothing to repair: the store is consistent")?;
    }
    for (i, act) in p.actions.iter().enumerate() {
        writeln!(out, "{}. {}", i + 1, act.problem)?;
        // the counts only where the step moves something
        let counts = if act.messages == 0 && act.bytes == 0 {
            String::new()
        } else {
            format!(" ({} messages, {} bytes)", act.messages, act.bytes)
        };
        writeln!(out, "   -> {}{counts}", act.action)?;
    }
    if !lost.is_empty() {
        writeln!(
            out,
            "left service ({} tombstone(s) in place of destroyed messages, {} filler(s), {} \
             past the cut):",
            tombstones,
            fillers,
            p.cut_lost.len()
        )?;
        for l in &lost {
            let how = if l.replaced_by == CUT {
                "gone with the cut"
            } else {
                "tombstoned"
            };
            match (&l.topic, l.queue_id, l.queue_offset) {
                (Some(t), Some(q), Some(qo)) => writeln!(
                    out,
                    "   commitlog offset {} ({} bytes): {t}/{q} queue offset {qo}{}{}{}; {how} ({})",
                    l.commitlog_offset,
                    l.size,
                    l.msg_id.as_deref().map(|i| format!(", id {i}")).unwrap_or_default(),
                    l.uniq_key.as_deref().map(|u| format!(", UNIQ_KEY {u}")).unwrap_or_default(),
                    if l.keys.is_empty() { String::new() } else { format!(", keys {}", l.keys.join(" ")) },
                    l.proof
                )?,
                _ => writeln!(
                    out,
                    "   commitlog offsets {}..{} ({} bytes): {}; under filler records",
                    l.commitlog_offset,
                    l.commitlog_offset + l.size,
                    l.size,
                    l.proof
                )?,
            }
        }
    }
    if let Some(d) = p.dledger.as_ref() {
        if let Some((a, b)) = d.uncommitted_kept {
            writeln!(
                out,
                "DLedger entries {a}..={b} of {} are past the checkpoint's committedIndex {} \
                 (the rule for a group with peers): kept as they are, as \
                 DLedgerMmapFileStore.recover keeps them; the group's leader decides whether \
                 they stay; the broker's dispatch indexes them once they are committed",
                d.self_id,
                d.checkpoint.committed_index.unwrap_or(-1)
            )?;
        }
    }
    if let Some(d) = p.dledger.as_ref().filter(|d| d.caught_up_from_leader) {
        writeln!(
            out,
            "DLedger replica {}: keeps its entries up to index {} (term {}) as they were (none \
             renumbered or rewritten); from index {} on, the replica will be caught up from the \
             group's leader",
            d.self_id,
            d.last_index.map_or("(none)".into(), |i| i.to_string()),
            d.last_term.map_or("(none)".into(), |t| t.to_string()),
            d.first_cut_index.unwrap_or(0)
        )?;
    }
    match dest {
        None => writeln!(
            out,
            "dry run: nothing was changed ({kept} messages would stay in the commitlog, {salvaged_records} would be salvaged)"
        )?,
        Some((d, r)) => {
            writeln!(
                out,
                "repaired store: {} ({kept} records in its commitlog{}); it verifies clean",
                d.display(),
                if tombstones + fillers > 0 {
                    format!(", {tombstones} of them tombstones and {fillers} fillers")
                } else {
                    String::new()
                }
            )?;
            writeln!(
                out,
                "repair folder: {} (manifest.json lists every range moved there: {} bytes of \
                 commitlog data, {} bytes of whole files with their preallocated space)",
                d.join(r).display(),
                removed.data,
                removed.files
            )?;
            if salvaged_records > 0 {
                let salvaged = d.join(r).join("salvaged");
                writeln!(
                    out,
                    "{salvaged_records} records after the cut are salvaged to {} (listed in \
                     salvaged.jsonl); to hand a group what it has not consumed: rmqstore export {} \
                     --group <GROUP>",
                    salvaged.display(),
                    salvaged.display()
                )?;
                writeln!(
                    out,
                    "next: send them back to a cluster, with their ids, keys and properties \
                     (--dry-run first to see the plan): rmqstore send {} --namesrv <HOST:9876>",
                    salvaged.display()
                )?;
            }
        }
    }
    Ok(())
}
