//! `rmqstore repair`: plan, then stage a repaired store and switch it in (or write it elsewhere).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::{output, ExitStatus, GeometryArgs};
use crate::engine::repair::{stage, Manifest, STAGE_MARKER};
use crate::engine::safedir::{ensure_not_live, failpoint, stamp, sync_dir};
use crate::engine::Store;

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The store root.
    pub store: PathBuf,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Write the repaired store to DIR (default: <STORE>/../<name>.repaired).
    #[arg(long, value_name = "DIR", conflicts_with = "in_place")]
    pub out: Option<PathBuf>,
    /// Replace the store: the repaired copy is staged beside it and switched in atomically; the
    /// old one stays as <name>.before-repair-<time> (its files are hard links, it costs no space).
    #[arg(long)]
    pub in_place: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
    /// JSON Lines: one object per action, then a summary.
    #[arg(long)]
    pub json: bool,
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
    let root = std::fs::canonicalize(&a.store).unwrap_or_else(|_| a.store.clone());
    let (name, parent) = name_parent(&root);
    if a.in_place {
        ensure_not_live(&root)?;
        finish_interrupted(&root, &parent, &name)?;
    }
    let store = Store::open(&root, &a.geometry.inputs()?)?;
    let t = stamp();
    let repair_name = format!("repair-{t}");
    let (staged_at, dest) = if a.dry_run {
        let s = parent.join(format!(".{name}.repair-dry-{t}"));
        (s, None)
    } else if a.in_place {
        (
            parent.join(format!(".{name}.repair-{t}")),
            Some(root.clone()),
        )
    } else {
        let d = a
            .out
            .clone()
            .unwrap_or_else(|| parent.join(format!("{name}.repaired")));
        (d.clone(), Some(d))
    };
    let manifest = match stage(&store, &staged_at, &repair_name) {
        Ok(m) => m,
        Err(e) => {
            if a.dry_run || a.in_place {
                let _ = std::fs::remove_dir_all(&staged_at);
            }
            return Err(e.into());
        }
    };
    failpoint("repair-staged");
    if a.dry_run {
        std::fs::remove_dir_all(&staged_at)?;
    } else if a.in_place {
        nix::fcntl::renameat2(
            nix::fcntl::AT_FDCWD,
            &staged_at,
            nix::fcntl::AT_FDCWD,
            &root,
            nix::fcntl::RenameFlags::RENAME_EXCHANGE,
        )
        .map_err(std::io::Error::from)?;
        failpoint("repair-exchanged");
        let before = parent.join(format!("{name}.before-repair-{t}"));
        std::fs::rename(&staged_at, &before)?;
        let _ = std::fs::remove_file(root.join(STAGE_MARKER));
        sync_dir(&parent)?;
    } else {
        let _ = std::fs::remove_file(staged_at.join(STAGE_MARKER));
    }
    print(a, out, &manifest, dest.as_deref(), &repair_name)?;
    Ok(ExitStatus::Success)
}

/// Finish what an interrupted `--in-place` run left: a stage folder that was switched in (the
/// store then holds the marker) or not (the stage still holds it).
fn finish_interrupted(root: &Path, parent: &Path, name: &str) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(root.join(STAGE_MARKER));
    let prefix = format!(".{name}.repair-");
    for e in std::fs::read_dir(parent)?.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = n.strip_prefix(&prefix) else {
            continue;
        };
        if e.path().join(STAGE_MARKER).exists() {
            // never switched in: only derived data and links to the store's own files
            std::fs::remove_dir_all(e.path())?;
        } else {
            // the old store, switched out before the run was interrupted
            std::fs::rename(
                e.path(),
                parent.join(format!("{name}.before-repair-{rest}")),
            )?;
        }
    }
    Ok(())
}

fn print(
    a: &RepairArgs,
    out: &mut dyn Write,
    m: &Manifest,
    dest: Option<&Path>,
    repair_name: &str,
) -> anyhow::Result<()> {
    if a.json {
        for act in &m.actions {
            output::json_line(out, act)?;
        }
        output::json_line(
            out,
            &serde_json::json!({"summary": {
                "dry_run": a.dry_run,
                "actions": m.actions.len(),
                "cut": m.cut,
                "messages_kept": m.messages_kept,
                "salvaged_records": m.salvaged_records,
                "salvaged_bytes": m.salvaged_bytes,
                "removed_bytes": m.removed.iter().map(|r| r.length).sum::<u64>(),
                "store": dest.map(|d| d.display().to_string()),
                "repair_folder": dest.map(|d| d.join(repair_name).display().to_string()),
            }}),
        )?;
        return Ok(());
    }
    if m.actions.is_empty() {
        writeln!(out, "nothing to repair: the store is consistent")?;
    }
    for (i, act) in m.actions.iter().enumerate() {
        writeln!(out, "{}. {}", i + 1, act.problem)?;
        writeln!(
            out,
            "   -> {} ({} messages, {} bytes)",
            act.action, act.messages, act.bytes
        )?;
    }
    match dest {
        None => writeln!(out, "dry run: nothing was changed")?,
        Some(d) => {
            writeln!(
                out,
                "repaired store: {} ({} messages)",
                d.display(),
                m.messages_kept
            )?;
            writeln!(
                out,
                "removed bytes, salvaged records ({}) and the manifest: {}",
                m.salvaged_records,
                d.join(repair_name).display()
            )?;
        }
    }
    Ok(())
}
