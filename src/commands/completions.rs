//! `rmqstore completions <SHELL>`: a completion script for bash, zsh, fish, elvish or
//! PowerShell, from the same definitions the parser uses (clap_complete).
//!
//! Install, for example: `rmqstore completions bash > /etc/bash_completion.d/rmqstore`.

use std::io::Write;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{Cli, ExitStatus};

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(a: &CompletionsArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    // clap_complete panics when its writer fails, so the script is built in memory and a closed
    // pipe or a full disk comes back as an error here.
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "rmqstore", &mut script);
    out.write_all(&script)?;
    out.flush()?;
    Ok(ExitStatus::Success)
}
