//! The `rmqstore` binary: parse arguments, run the command, map the outcome to an exit status.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = rmqstore::commands::Cli::parse();
    let status = rmqstore::commands::run(cli);
    ExitCode::from(status.code())
}
