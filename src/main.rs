//! The `rmqstore` binary: parse arguments, run the command, map the outcome to an exit status.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use rmqstore::commands::{self, output, Cli};

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    output::set_json_stderr(commands::json_requested(&matches));
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let status = commands::run(cli);
    ExitCode::from(status.code())
}
