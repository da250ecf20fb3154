//! Subcommands: each turns its arguments into a plan, calls the library and prints the result.
//! Presentation only; exit statuses come from [`exit::ExitStatus`].

pub mod client_dir;
pub mod compare;
pub mod completions;
pub mod config;
pub mod dump;
pub mod dump_timer;
pub mod engine_args;
pub mod exit;
pub mod export;
pub mod gen;
pub mod help;
pub mod info;
pub mod info_dledger;
pub mod interrupt;
pub mod line_format;
pub mod man;
pub mod message_printer;
pub mod names;
pub mod offsets;
pub mod output;
pub mod pending;
pub mod pull;
pub mod query;
pub mod rebuild;
pub mod repair;
pub mod replay;
pub mod send;
pub mod serve;
pub mod trace;
pub mod tui;
pub mod verify;

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use exit::ExitStatus;

use crate::format::error::DledgerError;
use crate::format::geometry::{GeometryInputs, GeometryOverrides};

/// `rmqstore --version`: the crate version and the commit it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("RMQSTORE_COMMIT"),
    ")"
);

/// Read, check, repair and serve Apache RocketMQ broker store directories offline.
#[derive(Debug, Parser)]
#[command(name = "rmqstore", version = VERSION, about, long_about = None, after_help = help::ROOT)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// When to colour ERROR and WARNING: auto (on a terminal, unless NO_COLOR is set),
    /// always, never.
    #[arg(long, global = true, value_enum, default_value_t, value_name = "WHEN")]
    pub color: output::ColorChoice,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a deterministic synthetic store (fixtures, benchmarks).
    #[command(after_help = help::GEN)]
    Gen(gen::GenArgs),
    /// Print commitlog messages, consume queue units, index entries, the checkpoint or config files.
    #[command(after_help = help::DUMP)]
    Dump(dump::DumpArgs),
    /// Find messages by key, message id, queue offset or store time, as the broker does.
    #[command(after_help = help::QUERY)]
    Query(query::QueryArgs),
    /// A first overview of a store: files, topics and queues, consumer groups, checkpoint.
    #[command(after_help = help::INFO)]
    Info(info::InfoArgs),
    /// Pull messages as a consumer group would, with the broker's answer (status, offsets).
    #[command(after_help = help::PULL)]
    Pull(pull::PullArgs),
    /// What message traces say: who sent a message, where it was stored, who consumed it.
    #[command(after_help = help::TRACE)]
    Trace(trace::TraceArgs),
    /// What is waiting: unconsumed messages, retries, delayed messages, DLQs, transactions.
    #[command(after_help = help::PENDING)]
    Pending(pending::PendingArgs),
    /// Regenerate consume queues and index files from the commitlog.
    #[command(after_help = help::REBUILD)]
    Rebuild(rebuild::RebuildArgs),
    /// Mend a damaged store without losing a byte (plan, salvage, switch in).
    #[command(after_help = help::REPAIR)]
    Repair(repair::RepairArgs),
    /// Everything a group has not consumed yet (optionally retries, delayed, DLQ,
    /// transactions), as JSON Lines or a new store, ready to be sent again.
    #[command(after_help = help::EXPORT)]
    Export(export::ExportArgs),
    /// Hand recovered messages back to a live cluster, as their producer sent them (resumable).
    #[command(after_help = help::SEND)]
    Send(send::SendArgs),
    /// Consume a group's messages with a command, with retries, DLQ and committed offsets.
    #[command(after_help = help::REPLAY)]
    Replay(replay::ReplayArgs),
    /// Browse a store in the terminal: topics, queues, messages, groups, health (read-only).
    Tui(tui::TuiArgs),
    /// Show, set, clone or delete consumer groups' committed offsets (plan first, --apply writes).
    #[command(after_help = help::OFFSETS)]
    Offsets(offsets::OffsetsArgs),
    /// Show or edit the topic and subscription-group config (plan first, --apply writes).
    #[command(after_help = help::CONFIG)]
    Config(config::ConfigArgs),
    /// What a failover lost: a master against its slaves, or the replicas of a DLedger group.
    #[command(after_help = help::COMPARE)]
    Compare(compare::CompareArgs),
    /// Check every invariant of a store; --explain-recovery says what the broker's next start does.
    #[command(after_help = help::VERIFY)]
    Verify(verify::VerifyArgs),
    /// Answer RocketMQ consumers and admin tools for a store over the wire (NameServer + Broker).
    #[command(after_help = help::SERVE)]
    Serve(serve::ServeArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = help::COMPLETIONS)]
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff): `rmqstore man | man -l -`.
    #[command(after_help = help::MAN)]
    Man(man::ManArgs),
}

/// Sizes the store was written with. The files do not record all of them: flags win, then the
/// broker config file, then what the files show, then the broker's defaults. The flags are
/// global, so a command with actions (`offsets`, `config`) takes them after its action too.
#[derive(Debug, Clone, Default, Args)]
pub struct GeometryArgs {
    /// The broker's config file (mappedFileSizeCommitLog, maxHashSlotNum, maxIndexNum, ...).
    #[arg(long, global = true, value_name = "FILE")]
    pub broker_conf: Option<PathBuf>,
    /// Commitlog file size in bytes (mappedFileSizeCommitLog).
    #[arg(long, global = true, value_name = "BYTES")]
    pub commitlog_file_size: Option<u64>,
    /// Consume queue file size in 20-byte units (mappedFileSizeConsumeQueue / 20).
    #[arg(long, global = true, value_name = "N")]
    pub cq_file_units: Option<u64>,
    /// Index hash slots per file (maxHashSlotNum).
    #[arg(long, global = true, value_name = "N")]
    pub index_slots: Option<u32>,
    /// Index entries per file (maxIndexNum).
    #[arg(long, global = true, value_name = "N")]
    pub index_entries: Option<u32>,
    /// DLedger index file size in bytes (DLedger's mappedFileSizeForEntryIndex, 160 MiB unless
    /// the index files show another).
    #[arg(long, global = true, value_name = "BYTES")]
    pub dledger_index_file_size: Option<u64>,
}

impl GeometryArgs {
    pub fn inputs(&self) -> anyhow::Result<GeometryInputs> {
        let broker_conf = match &self.broker_conf {
            Some(p) => GeometryOverrides::from_broker_conf(p)?,
            None => GeometryOverrides::default(),
        };
        Ok(GeometryInputs {
            flags: GeometryOverrides {
                commitlog_file_size: self.commitlog_file_size,
                cq_file_units: self.cq_file_units,
                index_slots: self.index_slots,
                index_entries: self.index_entries,
                delay_levels: None,
                dledger_peers: None,
                dledger_index_file_size: self.dledger_index_file_size,
            },
            broker_conf,
            inferred: GeometryOverrides::default(),
        })
    }
}

/// Whether the command that runs was given `--json` (or `-J`): the innermost subcommand's
/// `json` flag.
pub fn json_requested(m: &clap::ArgMatches) -> bool {
    let mut m = m;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    matches!(m.try_get_one::<bool>("json"), Ok(Some(true)))
}

/// Run a parsed command line, printing errors to stderr.
/// The subcommand as typed (`verify`, `dump commitlog`), for errors that name it.
fn command_name(c: &Command) -> String {
    let dump = |w: &dump::DumpWhat| -> &'static str {
        use dump::DumpWhat as W;
        match w {
            W::Commitlog(_) => "commitlog",
            W::Consumequeue(_) => "consumequeue",
            W::Index(_) => "index",
            W::Checkpoint(_) => "checkpoint",
            W::Config(_) => "config",
            W::Timerlog(_) => "timerlog",
            W::Timerwheel(_) => "timerwheel",
            W::Timercheck(_) => "timercheck",
            W::Dledger(_) => "dledger",
        }
    };
    let name = match c {
        Command::Dump(a) => return format!("dump {}", dump(&a.what)),
        Command::Gen(_) => "gen",
        Command::Query(_) => "query",
        Command::Info(_) => "info",
        Command::Pull(_) => "pull",
        Command::Trace(_) => "trace",
        Command::Pending(_) => "pending",
        Command::Rebuild(_) => "rebuild",
        Command::Repair(_) => "repair",
        Command::Export(_) => "export",
        Command::Send(_) => "send",
        Command::Replay(_) => "replay",
        Command::Tui(_) => "tui",
        Command::Offsets(_) => "offsets",
        Command::Config(_) => "config",
        Command::Compare(_) => "compare",
        Command::Verify(_) => "verify",
        Command::Serve(_) => "serve",
        Command::Completions(_) => "completions",
        Command::Man(_) => "man",
    };
    name.to_string()
}

pub fn run(cli: Cli) -> ExitStatus {
    output::set_color(cli.color);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let name = command_name(&cli.command);
    let result = match cli.command {
        Command::Gen(a) => gen::run(&a, &mut out),
        Command::Dump(a) => dump::run(&a, &mut out),
        Command::Query(a) => query::run(&a, &mut out),
        Command::Info(a) => info::run(&a, &mut out),
        Command::Pull(a) => pull::run(&a, &mut out),
        Command::Trace(a) => trace::run(&a, &mut out),
        Command::Pending(a) => pending::run(&a, &mut out),
        Command::Rebuild(a) => rebuild::run(&a, &mut out),
        Command::Repair(a) => repair::run(&a, &mut out),
        Command::Export(a) => export::run(&a, &mut out),
        Command::Send(a) => send::run(&a, &mut out),
        Command::Replay(a) => replay::run(&a, &mut out),
        Command::Tui(a) => tui::run(&a, &mut out),
        Command::Offsets(a) => offsets::run(&a, &mut out),
        Command::Config(a) => config::run(&a, &mut out),
        Command::Compare(a) => compare::run(&a, &mut out),
        Command::Verify(a) => verify::run(&a, &mut out),
        Command::Serve(a) => serve::run(&a, &mut out),
        Command::Completions(a) => completions::run(&a, &mut out),
        Command::Man(a) => man::run(&a, &mut out),
    };
    let _ = out.flush();
    match result {
        Ok(s) => s,
        Err(e) if output::is_broken_pipe(&e) => ExitStatus::Success,
        Err(mut e) => {
            if let Some(crate::format::Error::Dledger(DledgerError::NotRead { command, .. })) =
                e.downcast_mut()
            {
                *command = name;
            }
            let mut msg = e.to_string();
            for cause in e.chain().skip(1) {
                // an error that already prints its source (`path: reason`) is not repeated
                let cause = cause.to_string();
                if !msg.contains(&cause) {
                    msg.push_str(&format!("\n  caused by: {cause}"));
                }
            }
            if output::json_stderr() {
                let mut err = std::io::stderr().lock();
                let line = serde_json::json!({ "message": msg });
                let _ = output::typed_line(&mut err, "error", &line);
            } else {
                let error = output::painted("error:", output::Paint::Red, true);
                eprintln!("rmqstore: {error} {msg}");
            }
            ExitStatus::Failure
        }
    }
}
