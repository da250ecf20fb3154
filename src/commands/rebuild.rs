//! `rmqstore rebuild`: regenerate consume queues and index files from the commitlog.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::{output, ExitStatus, GeometryArgs};
use crate::engine::index::IndexNaming;
use crate::engine::rebuild::{rebuild, RebuildOptions, RebuildSummary};
use crate::engine::safedir::{ensure_not_live, failpoint, stamp, swap_in, sync_tree};
use crate::engine::store::paths;
use crate::engine::Store;

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
    /// Write the rebuilt folders to DIR (default: <STORE>/../<name>.rebuilt).
    #[arg(long, value_name = "DIR", conflicts_with = "in_place")]
    pub out: Option<PathBuf>,
    /// Replace the store's folders: build beside them, fsync, switch atomically, keep the old
    /// ones in <STORE>/rmqstore-backup-<time>/. Refuses while a broker runs on the store.
    #[arg(long)]
    pub in_place: bool,
    /// Only these topics (repeatable).
    #[arg(long = "topic", value_name = "T")]
    pub topics: Vec<String>,
    #[command(flatten)]
    pub geometry: GeometryArgs,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Work folders of in-place rebuilds. One left by an interrupted run may hold the store's old
/// folder (when it was interrupted right after the switch), so a rerun keeps it in the backup.
const WORK_PREFIX: &str = ".rmqstore-rebuild-";

pub fn run(a: &RebuildArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let both = !a.consumequeue && !a.index;
    let opts = RebuildOptions {
        geometry: store.geometry.clone(),
        consumequeue: a.consumequeue || both,
        index: a.index || both,
        topics: (!a.topics.is_empty()).then(|| a.topics.iter().cloned().collect::<BTreeSet<_>>()),
        index_naming: IndexNaming::Local,
    };
    let total: u64 = store.commitlog.segments.iter().map(|s| s.len).sum();
    let pb = output::progress(total, "rebuilding");
    let progress = |b: u64| pb.set_position(b);
    let started = std::time::Instant::now();
    let (summary, dest) = if a.in_place {
        ensure_not_live(&store.root)?;
        let s = rebuild_in_place(&store, &opts, &progress)?;
        (s, store.root.clone())
    } else {
        let dest = match &a.out {
            Some(d) => d.clone(),
            None => default_out(&store.root),
        };
        (rebuild(&store, &dest, &opts, &progress)?, dest)
    };
    pb.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    if a.json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            summary: &'a RebuildSummary,
            out: String,
            seconds: f64,
            geometry: &'a crate::format::geometry::Geometry,
        }
        output::json_line(
            out,
            &Out {
                summary: &summary,
                out: dest.display().to_string(),
                seconds: secs,
                geometry: &store.geometry,
            },
        )?;
    } else {
        for line in store.geometry.describe() {
            writeln!(out, "geometry {line}")?;
        }
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
        if let Some(s) = &summary.stopped_early {
            writeln!(out, "note: the commitlog walk stopped early: {s}")?;
        }
    }
    Ok(ExitStatus::Success)
}

fn default_out(root: &Path) -> PathBuf {
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".into());
    root.parent()
        .unwrap_or(Path::new("."))
        .join(format!("{name}.rebuilt"))
}

/// Build into a work folder inside the store, fsync it, then switch each folder in atomically;
/// the old folders go to `rmqstore-backup-<time>/`. A crash at any point leaves every folder
/// complete in its old or new form; a rerun removes the work folders of interrupted runs.
fn rebuild_in_place(
    store: &Store,
    opts: &RebuildOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<RebuildSummary> {
    let root = &store.root;
    let t = stamp();
    let backup = root.join(format!("rmqstore-backup-{t}"));
    for e in std::fs::read_dir(root)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix(WORK_PREFIX) {
            std::fs::create_dir_all(&backup)?;
            std::fs::rename(e.path(), backup.join(format!("interrupted-{rest}")))?;
        }
    }
    let work = root.join(format!("{WORK_PREFIX}{t}"));
    let summary = rebuild(store, &work, opts, progress)?;
    failpoint("rebuild-built");
    sync_tree(&work)?;
    failpoint("rebuild-synced");
    for (flag, name) in [
        (opts.consumequeue, paths::CONSUMEQUEUE),
        (opts.index, paths::INDEX),
    ] {
        if flag {
            swap_in(root, name, &work.join(name), &backup)?;
            failpoint(&format!("rebuild-swapped-{name}"));
        }
    }
    std::fs::remove_dir_all(&work)?;
    Ok(summary)
}
