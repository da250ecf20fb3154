//! `rmqstore dump`: the records of one kind of store file, as a readable table or JSON Lines.
//!
//! - `dump commitlog <STORE|FILE>`: messages in commitlog order, in the one message shape
//!   ([`output::MessageJson`]); compressed bodies are shown decompressed (`body_decompressed_from`
//!   names the algorithm).
//! - `dump consumequeue <STORE> --topic T [--queue Q]`: consume queue units.
//! - `dump index <STORE|FILE>`: index file headers and entries.
//! - `dump checkpoint <STORE>`, `dump config <STORE>`.
//! - `dump dledger <STORE> [--index]`: a DLedger-mode store's entries or index units.
//!
//! JSON Lines (docs/json.md): one object per record, each with its `type`, then a `summary` line
//! (on stderr for `dump commitlog`, whose stdout holds the messages only). Notes (a limit that cut
//! the output short, a file that does not parse) go to stderr. A closed pipe ends quietly.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::line_format::LineArgs;
use super::output::BodyMode;
use super::{ExitStatus, GeometryArgs};

mod checkpoint;
mod commitlog;
mod config;
mod consumequeue;
mod dledger;
mod index;

use checkpoint::checkpoint;
use commitlog::commitlog;
use config::config;
use consumequeue::consumequeue;
use dledger::dledger;
use index::index;

#[derive(Debug, Args)]
pub struct DumpArgs {
    #[command(subcommand)]
    pub what: DumpWhat,
}

#[derive(Debug, Subcommand)]
pub enum DumpWhat {
    /// Messages of the commitlog (a store, or one commitlog file), in offset order.
    #[command(after_help = super::help::DUMP_COMMITLOG)]
    Commitlog(CommitlogArgs),
    /// Units of a topic's consume queues.
    #[command(after_help = super::help::DUMP_CONSUMEQUEUE)]
    Consumequeue(ConsumeQueueArgs),
    /// Index file headers and entries (a store, or one index file).
    #[command(after_help = super::help::DUMP_INDEX)]
    Index(IndexArgs),
    /// The checkpoint file.
    #[command(after_help = super::help::DUMP_CHECKPOINT)]
    Checkpoint(CheckpointArgs),
    /// The config JSON files (consumer offsets, delay offsets, topics, subscription groups).
    #[command(after_help = super::help::DUMP_CONFIG)]
    Config(ConfigArgs),
    /// The 5.x timer log: one line per unit (enqueued timer message or delete marker).
    #[command(after_help = super::help::DUMP_TIMERLOG)]
    Timerlog(super::dump_timer::TimerFileArgs),
    /// The 5.x timer wheel: its non-empty slots.
    #[command(after_help = super::help::DUMP_TIMERWHEEL)]
    Timerwheel(super::dump_timer::TimerFileArgs),
    /// The 5.x timer checkpoint (config/timercheck) and timer metrics.
    #[command(after_help = super::help::DUMP_TIMERCHECK)]
    Timercheck(super::dump_timer::TimerFileArgs),
    /// A DLedger-mode store's log: its entries, or with --index its index units.
    #[command(after_help = super::help::DUMP_DLEDGER)]
    Dledger(DledgerArgs),
}

#[derive(Debug, Args)]
pub struct CommitlogArgs {
    /// A store root, or one commitlog file.
    pub path: PathBuf,
    /// Start at this commitlog offset (the first record at or after it).
    #[arg(long, short = 'o', value_name = "OFFSET", allow_negative_numbers = true,
          value_parser = super::output::parse_offset_arg::<u64>)]
    pub from: Option<u64>,
    /// Print at most N messages.
    #[arg(long, short = 'c', value_name = "N")]
    pub count: Option<u64>,
    /// Only messages of this topic.
    #[arg(long, short = 't', value_name = "T")]
    pub topic: Option<String>,
    /// How to print bodies (compressed bodies are shown decompressed).
    #[arg(long, value_parser = super::output::body_mode_parser(), default_value = "auto")]
    pub body: BodyMode,
    /// JSON Lines: one object per message, then a `summary` on stderr.
    #[arg(long, short = 'J')]
    pub json: bool,
    #[command(flatten)]
    pub lines: LineArgs,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

#[derive(Debug, Args)]
pub struct ConsumeQueueArgs {
    /// The store root.
    pub store: PathBuf,
    /// The topic whose queues to print.
    #[arg(long, short = 't', value_name = "T")]
    pub topic: String,
    /// One queue id (default: every queue of the topic).
    #[arg(long, value_name = "Q")]
    pub queue: Option<i32>,
    /// First queue offset to print (default: the first unit of the queue's first file).
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = super::output::parse_offset_arg::<u64>)]
    pub from: Option<u64>,
    /// Print at most N units per queue.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// JSON Lines: one object per record, then a `summary`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// A store root, or one index file.
    pub path: PathBuf,
    /// Only the 40-byte headers.
    #[arg(long)]
    pub header_only: bool,
    /// JSON Lines: one object per record, then a `summary`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

#[derive(Debug, Args)]
pub struct DledgerArgs {
    /// The store root (with dledger-<selfId>/).
    pub store: PathBuf,
    /// The index units instead of the entries, each checked against its entry.
    #[arg(long)]
    pub index: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
    /// JSON Lines: one `dledger_entry` (or `dledger_index`) per line, then a `summary`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// The store root (or the checkpoint file).
    pub store: PathBuf,
    /// JSON Lines: the `checkpoint` object, then a `summary`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// The store root.
    pub store: PathBuf,
    /// JSON Lines: one `config` object per config file (`name`, `file`, `source`, `content`),
    /// then a `summary`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &DumpArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let status = match &a.what {
        DumpWhat::Commitlog(c) => commitlog(c, &mut out)?,
        DumpWhat::Consumequeue(c) => consumequeue(c, &mut out)?,
        DumpWhat::Index(c) => index(c, &mut out)?,
        DumpWhat::Checkpoint(c) => checkpoint(c, &mut out)?,
        DumpWhat::Config(c) => config(c, &mut out)?,
        DumpWhat::Timerlog(c) => super::dump_timer::timerlog(c, &mut out)?,
        DumpWhat::Timerwheel(c) => super::dump_timer::timerwheel(c, &mut out)?,
        DumpWhat::Timercheck(c) => super::dump_timer::timercheck(c, &mut out)?,
        DumpWhat::Dledger(c) => dledger(c, &mut out)?,
    };
    out.flush()?;
    Ok(status)
}
