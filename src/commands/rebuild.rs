//! `rmqstore rebuild`: regenerate consume queues and index files from the commitlog.
//!
//! `--out DIR` writes them to a folder outside every store. `--in-place` holds the broker's lock
//! for the whole run, stages a copy of the store beside it (every other file hard-linked) with
//! the new folders, and switches it in by one atomic exchange, so the consume queues and the
//! index change together or not at all. It refuses a store whose commitlog walk stops before
//! records that exist (a rebuild would take them out of the broker's reach: run `repair`), or
//! that holds records whose header names no queue folder, unless `--force`.
//!
//! Ctrl-C (or SIGTERM) stops the run at the next piece of the commitlog, or before the switch,
//! and removes what it wrote: the stage, or the folders `--out` made. A second one quits at once;
//! the next `--in-place` run clears or finishes what such a run left.
//!
//! Exit status: 0 rebuilt, 1 refused (damage: see `repair`), 2 could not run or interrupted.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::{interrupt, output, ExitStatus, GeometryArgs};
use crate::engine::check::rebuild::{dledger_index_dir, rebuild, RebuildOptions, RebuildSummary};
use crate::engine::store::index_builder::IndexNaming;
use crate::engine::store::paths;
use crate::engine::store::safedir::{
    failpoint, finish_interrupted, stamp, switch_root, sync_tree, StoreLock, STAGE_MARKER,
};
use crate::engine::Store;
use crate::format::error::Error;
use crate::format::layout::ensure_outside_stores;

#[derive(Debug, Args)]
pub struct RebuildArgs {
    /// The store root.
    pub store: PathBuf,
    /// Rebuild the consume queues (both when neither --consumequeue nor --index is given).
    #[arg(long)]
    pub consumequeue: bool,
    /// Rebuild the index files.
    #[arg(long)]
    pub index: bool,
    /// Rebuild a DLedger-mode store's DLedger index (`dledger-<selfId>/index/`) from its data
    /// files; alone, only it.
    #[arg(long)]
    pub dledger_index: bool,
    /// Write the rebuilt folders to DIR, outside any store (default: <STORE>/../<name>.rebuilt).
    #[arg(long, value_name = "DIR", conflicts_with = "in_place")]
    pub out: Option<PathBuf>,
    /// Replace the store's folders: build a copy beside the store, fsync, switch it in by one
    /// atomic exchange while the broker's lock is held; the old folders are kept in
    /// <STORE>/rmqstore-backup-<time>/. Refuses while a broker runs on the store.
    #[arg(long)]
    pub in_place: bool,
    /// Rebuild even when the commitlog is damaged before records that exist (they are left out
    /// of the rebuilt queues; `repair` keeps them). Without it both --in-place and --out refuse
    /// such a store and write nothing.
    #[arg(long)]
    pub force: bool,
    /// Only these topics (repeatable).
    #[arg(long = "topic", value_name = "T")]
    pub topics: Vec<String>,
    #[command(flatten)]
    pub geometry: GeometryArgs,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &RebuildArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let stop = interrupt::stop_flag(
        "stopping the rebuild: what it wrote so far is removed (again to quit at once)",
    )?;
    let root = if a.in_place {
        std::fs::canonicalize(&a.store).unwrap_or_else(|_| a.store.clone())
    } else {
        a.store.clone()
    };
    let (name, parent) = name_parent(&root);
    let stage_prefix = format!(".{name}.rebuild-");
    let before_prefix = format!("{name}.before-rebuild-");
    let lock = if a.in_place {
        let l = StoreLock::acquire(&root)?;
        finish_interrupted(&root, &stage_prefix, &before_prefix)?;
        // An old store switched out by a run that ended before keeping its folders.
        for e in std::fs::read_dir(&parent)? {
            let e = e?;
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(t) = n.strip_prefix(&before_prefix) {
                let all = RebuildOptions {
                    consumequeue: true,
                    index: true,
                    ..RebuildOptions::for_geometry(Default::default())
                };
                keep_old_folders(
                    &root,
                    &e.path(),
                    &all,
                    None,
                    &format!("rmqstore-backup-{t}"),
                )?;
            }
        }
        Some(l)
    } else {
        None
    };
    let store = Store::open(&root, &a.geometry.inputs()?)?;
    let both = !a.consumequeue && !a.index && !a.dledger_index;
    let opts = RebuildOptions {
        geometry: store.geometry.clone(),
        consumequeue: a.consumequeue || both,
        index: a.index || both,
        topics: (!a.topics.is_empty()).then(|| a.topics.iter().cloned().collect::<BTreeSet<_>>()),
        index_naming: IndexNaming::Local,
        dledger_index: a.dledger_index,
        interrupt: Some(stop),
    };
    if a.dledger_index && store.dledger.is_none() {
        return Err(crate::format::error::DledgerError::NotDledger { root: root.clone() }.into());
    }
    let dledger_dir = store
        .dledger
        .as_ref()
        .filter(|_| a.dledger_index)
        .map(dledger_index_dir);
    let total = output::commitlog_data_bytes(&store.commitlog.segments);
    let pb = output::progress(total, "rebuilding");
    let progress = |b: u64| pb.set_position(b);
    let started = std::time::Instant::now();
    let (summary, dest) = match lock {
        Some(mut lock) => {
            let stage = parent.join(format!("{stage_prefix}{}", stamp()));
            let summary = stage_rebuild(&store, &opts, dledger_dir.as_deref(), &stage, &progress)?;
            if refused(&summary, a.force) {
                std::fs::remove_dir_all(&stage)?;
                pb.finish_and_clear();
                return refuse(&summary, a.json, &store.geometry, out);
            }
            lock.add(&stage)?;
            failpoint("rebuild-staged");
            if opts.interrupted() {
                // stopped after the stage was made: nothing is switched in
                std::fs::remove_dir_all(&stage)?;
                pb.finish_and_clear();
                return Err(Error::interrupted(&root, "rebuild").into());
            }
            let t = stamp();
            let before = parent.join(format!("{before_prefix}{t}"));
            switch_root(&root, &stage, &before)?;
            failpoint("rebuild-switched");
            keep_old_folders(
                &root,
                &before,
                &opts,
                dledger_dir.as_deref(),
                &format!("rmqstore-backup-{t}"),
            )?;
            drop(lock);
            (summary, root.clone())
        }
        None => {
            let dest = match &a.out {
                Some(d) => d.clone(),
                None => parent.join(format!("{name}.rebuilt")),
            };
            ensure_outside_stores(&dest, "--out", false)?;
            let dest_existed = dest.exists();
            // a folder made here is marked until it is complete: a killed run leaves one that
            // every read command refuses
            if !dest_existed {
                crate::engine::store::safedir::mark_stage(&dest)?;
            }
            match rebuild(&store, &dest, &opts, &progress) {
                Ok(summary) if refused(&summary, a.force) => {
                    // refused as --in-place refuses: queues missing records are not left
                    // where they could be taken for a good rebuild
                    pb.finish_and_clear();
                    remove_rebuilt(&dest, dest_existed, &opts);
                    return refuse(&summary, a.json, &store.geometry, out);
                }
                Ok(summary) => {
                    if !dest_existed {
                        crate::engine::store::safedir::unmark_stage(&dest)?;
                    }
                    (summary, dest)
                }
                Err(e @ Error::Interrupted { .. }) => {
                    pb.finish_and_clear();
                    remove_rebuilt(&dest, dest_existed, &opts);
                    return Err(e.into());
                }
                Err(e) => {
                    if !dest_existed {
                        crate::engine::store::safedir::remove_stage(&dest);
                    }
                    return Err(e.into());
                }
            }
        }
    };
    pb.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    if a.json {
        json_summary(out, &summary, Some(&dest), secs, &store.geometry)?;
    } else {
        for line in store.geometry.describe() {
            writeln!(out, "geometry {line}")?;
        }
        if let Some(l) = store.dledger.as_ref().filter(|_| opts.dledger_index) {
            let size = &l.geometry.index_file_size;
            writeln!(
                out,
                "geometry DLedger index file size {} ({})",
                size.value, size.source
            )?;
        }
        if opts.consumequeue || opts.index {
            writeln!(
            out,
            "rebuilt {} units in {} queues and {} index files from {} records ({} bytes) in {:.2}s into {}",
            summary.units,
            summary.queues,
            summary.index_files,
            summary.records,
            summary.bytes,
            secs,
            dest.display()
        )?;
        }
        if let Some(n) = summary.dledger_index_units {
            writeln!(
                out,
                "rebuilt the DLedger index: {n} units, one per entry, into {}",
                dest.display()
            )?;
        }
        if let Some(s) = &summary.stopped_early {
            writeln!(
                out,
                "note: the commitlog walk stopped early: {s}; {} records after it are not in the \
                 rebuilt queues (`rmqstore repair` keeps them)",
                summary.records_after_stop
            )?;
        }
        if summary.refused > 0 {
            writeln!(
                out,
                "note: {} records name no queue folder (damaged headers, the first at commitlog \
                 offset {}): they got no unit (`rmqstore verify` names them)",
                summary.refused,
                summary.first_refused.unwrap_or(0)
            )?;
        }
    }
    Ok(ExitStatus::Success)
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

/// The `--json` summary line; `dest` is None when the rebuild was refused (nothing written).
fn json_summary(
    out: &mut dyn Write,
    summary: &RebuildSummary,
    dest: Option<&Path>,
    seconds: f64,
    geometry: &crate::format::geometry::Geometry,
) -> anyhow::Result<()> {
    #[derive(serde::Serialize)]
    struct Out<'a> {
        rebuilt: bool,
        #[serde(flatten)]
        summary: &'a RebuildSummary,
        out: Option<String>,
        seconds: f64,
        geometry: &'a crate::format::geometry::Geometry,
    }
    output::summary_line(
        out,
        "rebuild",
        &Out {
            rebuilt: dest.is_some(),
            summary,
            out: dest.map(|d| d.display().to_string()),
            seconds,
            geometry,
        },
    )
}

fn print_refusal(s: &RebuildSummary, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some(stop) = &s.stopped_early {
        writeln!(
            out,
            "refused: the commitlog walk stops early ({stop}) with {} records after it: a \
             rebuild in place would take them out of the consume queues for good",
            s.records_after_stop
        )?;
    }
    if s.refused > 0 {
        writeln!(
            out,
            "refused: {} records have a damaged header (the first at commitlog offset {})",
            s.refused,
            s.first_refused.unwrap_or(0)
        )?;
    }
    writeln!(
        out,
        "run `rmqstore repair` (it keeps every record), or rebuild anyway with --force"
    )
}

/// What an interrupted `rebuild --out` wrote: the folders it made (it refuses to start where they
/// exist), and `dest` itself when the run made it and nothing else is in it.
/// The walk stopped before records that exist, or records name no queue folder: the rebuilt
/// queues would miss them, so nothing is kept unless `--force`.
fn refused(summary: &RebuildSummary, force: bool) -> bool {
    !force && (summary.records_after_stop > 0 || summary.refused > 0)
}

/// Say why the rebuild was refused (exit 1).
fn refuse(
    summary: &RebuildSummary,
    json: bool,
    geometry: &crate::format::geometry::Geometry,
    out: &mut dyn Write,
) -> anyhow::Result<ExitStatus> {
    if json {
        print_refusal(summary, &mut std::io::stderr())?;
        json_summary(out, summary, None, 0.0, geometry)?;
    } else {
        print_refusal(summary, out)?;
    }
    Ok(ExitStatus::Findings)
}

fn remove_rebuilt(dest: &Path, dest_existed: bool, opts: &RebuildOptions) {
    for (flag, name) in [
        (opts.consumequeue, paths::CONSUMEQUEUE),
        (opts.index, paths::INDEX),
    ] {
        if flag {
            let _ = std::fs::remove_dir_all(dest.join(name));
        }
    }
    if !dest_existed {
        crate::engine::store::safedir::remove_stage(dest);
    }
}

/// A copy of `store` at `stage` with its consume queues and/or index rebuilt and every other
/// entry hard-linked; fsynced, marked as a stage.
fn stage_rebuild(
    store: &Store,
    opts: &RebuildOptions,
    dledger_dir: Option<&Path>,
    stage: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<RebuildSummary> {
    std::fs::create_dir_all(stage)?;
    crate::engine::store::safedir::write_new(&stage.join(STAGE_MARKER), b"")?;
    let rebuilt = |n: &str| {
        (opts.consumequeue && n == paths::CONSUMEQUEUE) || (opts.index && n == paths::INDEX)
    };
    for e in std::fs::read_dir(&store.root)? {
        let e = e?;
        let n = e.file_name();
        if n == STAGE_MARKER || n.to_str().is_some_and(rebuilt) {
            continue;
        }
        crate::engine::store::safedir::link_all(&e.path(), &stage.join(&n))?;
    }
    // the DLedger index to rebuild: its links go, the rebuild writes it anew
    if let Some(d) = dledger_dir {
        let linked = stage.join(d);
        if linked.exists() {
            std::fs::remove_dir_all(&linked)?;
        }
    }
    let summary = match rebuild(store, stage, opts, progress) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_dir_all(stage);
            return Err(e.into());
        }
    };
    sync_tree(stage)?;
    Ok(summary)
}

/// After the switch: the old consume queue and index folders go to `root/<backup>/`; the rest
/// of the old store held only links to the files the new one has, and those links are dropped
/// (anything not such a link stays where it is, and is named).
fn keep_old_folders(
    root: &Path,
    before: &Path,
    opts: &RebuildOptions,
    dledger_dir: Option<&Path>,
    backup: &str,
) -> anyhow::Result<()> {
    let dir = root.join(backup);
    std::fs::create_dir_all(&dir)?;
    if let Some(d) = dledger_dir {
        let old = before.join(d);
        if old.exists() {
            let kept = dir.join(d);
            if let Some(p) = kept.parent() {
                std::fs::create_dir_all(p)?;
            }
            std::fs::rename(&old, &kept)?;
        }
    }
    for (flag, name) in [
        (opts.consumequeue, paths::CONSUMEQUEUE),
        (opts.index, paths::INDEX),
    ] {
        let old = before.join(name);
        let same = |a: &Path, b: &Path| {
            use std::os::unix::fs::MetadataExt;
            match (std::fs::symlink_metadata(a), std::fs::symlink_metadata(b)) {
                (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
                _ => false,
            }
        };
        // A folder that was not rebuilt is a link tree of the new store's: dropped below.
        if flag && old.exists() && !same(&old, &root.join(name)) {
            std::fs::rename(&old, dir.join(name))?;
        }
    }
    crate::engine::store::safedir::sync_dir(&dir)?;
    let left = crate::engine::store::safedir::drop_links(before, root)?;
    if !left.is_empty() {
        output::note(&format!(
            "{} entries of the old store are not links of the new one and stay in {}",
            left.len(),
            before.display()
        ));
    }
    crate::engine::store::safedir::sync_dir(root)?;
    Ok(())
}
