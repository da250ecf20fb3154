//! `rmqstore info` on a DLedger-mode store: the member, its term and vote, the ledger's bounds,
//! what is committed and served, the divide of a converted store and the log's geometry.
//! Topics, queues and groups are not summarized for such a store yet (said in a note).

use std::io::Write;

use serde::Serialize;

use super::{output, ExitStatus};
use crate::engine::store::dledger::DledgerInfo;
use crate::engine::Store;
use crate::format::commitlog::SegmentKind;

/// The `dledger_info` line: `info --json` on a DLedger-mode store.
#[derive(Debug, Serialize)]
struct DledgerStoreInfo<'a> {
    store: String,
    mode: &'static str,
    clean_shutdown: bool,
    dledger: &'a DledgerInfo,
    /// Old commitlog of a converted store: its offsets below the divide.
    commitlog_files: usize,
    commitlog_min_offset: u64,
    commitlog_max_offset: u64,
    notes: Vec<String>,
}

const NOT_YET: &str = "topics, queues and consumer groups of a DLedger-mode store are not \
                       summarized yet";

pub fn run(
    store: &Store,
    d: &DledgerInfo,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitStatus> {
    // the old commitlog of a converted store: the files that are not DLedger data
    let cl = &crate::format::commitlog::Commitlog {
        segments: store
            .commitlog
            .segments
            .iter()
            .filter(|s| s.kind == SegmentKind::Commitlog)
            .cloned()
            .collect(),
        ..store.commitlog.clone()
    };
    let mut notes = d.notes.clone();
    notes.push(NOT_YET.into());
    let i = DledgerStoreInfo {
        store: store.root.display().to_string(),
        mode: if d.converted {
            "dledger_converted"
        } else {
            "dledger"
        },
        clean_shutdown: !store.abort.present,
        dledger: d,
        commitlog_files: cl.segments.len(),
        commitlog_min_offset: cl.min_offset(),
        commitlog_max_offset: cl.max_offset()?,
        notes,
    };
    if json {
        output::typed_line(out, "dledger_info", &i)?;
        let s = super::info::InfoSummary {
            topics: store.topics().len(),
            consumer_groups: 0,
            index_files: store.index_files.len(),
            notes: i.notes.len(),
            // the log is not checked here yet: an unclean shutdown is the one sign info sees
            needs_verify: store.abort.present,
        };
        output::summary_line(out, "info", &s)?;
    } else {
        print_human(&i, out)?;
    }
    Ok(ExitStatus::Success)
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("none".into(), T::to_string)
}

fn print_human(i: &DledgerStoreInfo<'_>, out: &mut dyn Write) -> std::io::Result<()> {
    let d = i.dledger;
    writeln!(out, "store      {}", i.store)?;
    writeln!(
        out,
        "mode       DLedger, member {}{}",
        d.self_id,
        if d.converted {
            ", converted from normal mode (commitlog/ below the divide)"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "shutdown   {}",
        super::info::shutdown_word(i.clean_shutdown)
    )?;
    writeln!(
        out,
        "term       {} (currterm), voted for {}",
        opt(&d.current_term),
        opt(&d.vote_leader)
    )?;
    writeln!(
        out,
        "ledger     entries {}..={} (last term {}), data ends at position {}",
        opt(&d.ledger_begin_index),
        opt(&d.ledger_end_index),
        opt(&d.ledger_end_term),
        d.data_end_pos
    )?;
    writeln!(
        out,
        "committed  index {}, position {} (checkpoint: committedIndex {}, endIndex {}); the broker serves records below that position",
        opt(&d.committed_index),
        opt(&d.committed_pos),
        opt(&d.checkpoint_committed_index),
        opt(&d.checkpoint_end_index)
    )?;
    writeln!(
        out,
        "serves     records below commitlog offset {} after the next start: {}",
        d.served_end,
        d.commit_rule.describe()
    )?;
    writeln!(
        out,
        "divide     {} (dividedCommitlogOffset)",
        d.divided_commitlog_offset
    )?;
    if d.converted {
        writeln!(
            out,
            "commitlog  {} files below the divide, offsets {}..{}",
            i.commitlog_files, i.commitlog_min_offset, i.commitlog_max_offset
        )?;
    }
    writeln!(
        out,
        "geometry   DLedger data file size {} ({}), index file size {} ({})",
        d.geometry.data_file_size.value,
        d.geometry.data_file_size.source,
        d.geometry.index_file_size.value,
        d.geometry.index_file_size.source
    )?;
    for (what, files) in [("data", &d.data_files), ("index", &d.index_files)] {
        writeln!(
            out,
            "{what:<10} {} files{}",
            files.len(),
            match (files.first(), files.last()) {
                (Some(a), Some(b)) => format!(", {}..{}", a.name, b.name),
                _ => String::new(),
            }
        )?;
    }
    writeln!(out, "index end  position {}", d.index_end_pos)?;
    for n in &i.notes {
        writeln!(out, "note       {n}")?;
    }
    Ok(())
}
