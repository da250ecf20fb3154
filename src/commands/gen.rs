//! `rmqstore gen`: write a deterministic synthetic store.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{output, ExitStatus};
use crate::engine::store::generate::{generate, GenOptions};
use crate::engine::store::safedir::{failpoint, mark_stage, remove_stage, unmark_stage};
use crate::engine::store::writer::DledgerOutput;
use crate::format::geometry::{resolve, GeometryInputs, GeometryOverrides};

#[derive(Debug, Args)]
pub struct GenArgs {
    /// Directory to create the store in (must not hold a commitlog yet).
    pub dir: PathBuf,
    /// Number of producer operations (messages, batches, send-backs, transaction steps).
    #[arg(long, default_value_t = 10_000)]
    pub messages: u64,
    /// Seed of the generator: the same seed and arguments give byte-identical files.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Commitlog file size in bytes.
    #[arg(long, default_value_t = 1 << 30)]
    pub commitlog_file_size: u64,
    /// Consume queue file size in 20-byte units.
    #[arg(long, default_value_t = 300_000)]
    pub cq_file_units: u64,
    /// Index hash slots per file.
    #[arg(long, default_value_t = 5_000_000)]
    pub index_slots: u32,
    /// Index entries per file.
    #[arg(long, default_value_t = 20_000_000)]
    pub index_entries: u32,
    /// 1: a 4.9 broker's store; 2: a 5.x broker's (trailing property separator, WAIT kept,
    /// version 2 records for retry topics over 127 bytes).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub message_version: u8,
    /// Trace as clients with tracing enabled do: Pub, SubBefore/SubAfter and EndTransaction
    /// records, batched into trace messages on RMQ_SYS_TRACE_TOPIC (see `rmqstore trace`).
    #[arg(long)]
    pub traces: bool,
    /// Only what every client decodes: IPv4 born hosts, bodies plain or zlib (no LZ4 or zstd),
    /// for clients such as ali-ons.
    #[arg(long)]
    pub plain: bool,
    /// Write a DLedger-mode store (`enableDLegerCommitLog`): the commitlog as the entries of a
    /// single-member group in `dledger-<self id>/` (data files of --commitlog-file-size bytes,
    /// the DLedger index, checkpoint and currterm), consume queues and index files pointing at
    /// the wrapped records.
    #[arg(long)]
    pub dledger: bool,
    /// With --dledger: a converted store, normal mode for the first half of the operations
    /// (`commitlog/`), DLedger mode after (from `dividedCommitlogOffset`, the end of the last
    /// commitlog file).
    #[arg(long, requires = "dledger")]
    pub converted: bool,
    /// With --dledger: the member's self id (`dLegerSelfId`).
    #[arg(long, default_value = "n0", requires = "dledger")]
    pub dledger_self_id: String,
    /// With --dledger: the term of every entry (`currterm`).
    #[arg(long, default_value_t = 0, requires = "dledger")]
    pub dledger_term: i64,
    /// With --dledger: DLedger index file size in bytes (a multiple of 32; DLedger's default
    /// 160 MiB).
    #[arg(long, default_value_t = crate::format::dledger::DEFAULT_INDEX_FILE_SIZE, requires = "dledger")]
    pub dledger_index_file_size: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &GenArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    if a.cq_file_units == 0 || a.index_slots == 0 || a.index_entries < 2 {
        anyhow::bail!("--cq-file-units and --index-slots must be > 0, --index-entries > 1");
    }
    if a.dledger_term < 0
        || a.dledger_index_file_size < 32
        || !a.dledger_index_file_size.is_multiple_of(32)
        || a.dledger_self_id.is_empty()
        || a.dledger_self_id.contains(['/', '\\'])
    {
        anyhow::bail!(
            "--dledger-term must be >= 0, --dledger-index-file-size a multiple of 32, --dledger-self-id a name"
        );
    }
    crate::format::layout::ensure_outside_stores(&a.dir, "the store to generate", false)?;
    let geometry = resolve(&GeometryInputs {
        flags: GeometryOverrides {
            commitlog_file_size: Some(a.commitlog_file_size),
            cq_file_units: Some(a.cq_file_units),
            index_slots: Some(a.index_slots),
            index_entries: Some(a.index_entries),
            delay_levels: None,
            dledger_peers: None,
            dledger_index_file_size: None,
        },
        ..Default::default()
    });
    let opts = GenOptions {
        messages: a.messages,
        seed: a.seed,
        geometry,
        message_version: a.message_version,
        traces: a.traces,
        plain: a.plain,
        dledger: a.dledger.then(|| DledgerOutput {
            self_id: a.dledger_self_id.clone(),
            term: a.dledger_term,
            index_file_size: a.dledger_index_file_size,
        }),
        converted: a.converted,
    };
    // Rough size for the progress bar: about 1 KiB per operation.
    let pb = output::progress(a.messages.saturating_mul(1100), "generating");
    let started = std::time::Instant::now();
    // Written as a stage: a folder made here is removed when the run fails, and one a killed run
    // leaves keeps the marker, which every read command refuses.
    let made = crate::format::entry::probe(&a.dir).kind == crate::format::entry::Kind::Missing;
    mark_stage(&a.dir)?;
    let summary = match generate(&a.dir, &opts, &|bytes| pb.set_position(bytes)) {
        Ok(s) => s,
        Err(e) => {
            if made {
                remove_stage(&a.dir);
            }
            return Err(e.into());
        }
    };
    failpoint("gen-written");
    unmark_stage(&a.dir)?;
    pb.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    if a.json {
        output::summary_line(out, "gen", &summary)?;
    } else {
        writeln!(
            out,
            "wrote {} records, {} bytes of commitlog to {} in {:.1}s ({:.0} MB/s); {} delayed delivered, {} pending",
            summary.records,
            summary.bytes,
            a.dir.display(),
            secs,
            summary.bytes as f64 / 1e6 / secs.max(1e-9),
            summary.delayed_delivered,
            summary.delayed_pending
        )?;
        if a.dledger {
            writeln!(
                out,
                "DLedger mode: {} entries in {}{}{}",
                summary.dledger_entries,
                crate::format::dledger::DIR_PREFIX,
                a.dledger_self_id,
                match summary.divided_commitlog_offset {
                    Some(d) => format!(", converted: commitlog/ below offset {d}"),
                    None => String::new(),
                }
            )?;
        }
        if a.traces {
            writeln!(
                out,
                "traces: {} trace messages holding {} records on {}",
                summary.trace_messages,
                summary.trace_records,
                crate::format::trace::DEFAULT_TRACE_TOPIC
            )?;
        }
    }
    Ok(ExitStatus::Success)
}
