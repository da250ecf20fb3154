//! `rmqstore man`: the manual page (roff), from the same definitions the parser uses
//! (clap_mangen): the command, its options and every subcommand.
//!
//! Read it with `rmqstore man | man -l -`, or install it as `man1/rmqstore.1`.

use std::io::Write;

use clap::{Args, CommandFactory};

use super::{Cli, ExitStatus};

#[derive(Debug, Args)]
pub struct ManArgs {}

pub fn run(_: &ManArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let cmd = Cli::command();
    clap_mangen::Man::new(cmd.clone()).render(out)?;
    // One section per subcommand, after the main page.
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("rmqstore-{}", sub.get_name());
        let page = clap_mangen::Man::new(sub.clone().name(name));
        page.render_name_section(out)?;
        page.render_synopsis_section(out)?;
        page.render_description_section(out)?;
        page.render_options_section(out)?;
    }
    Ok(ExitStatus::Success)
}
