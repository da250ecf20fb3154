//! `rmqstore tui`: browse a store in the terminal (read-only).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{ExitStatus, GeometryArgs};
use crate::engine::Store;

#[derive(Debug, Args)]
pub struct TuiArgs {
    /// The store root.
    pub store: PathBuf,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

pub fn run(a: &TuiArgs, _out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "tui: standard {} is not a terminal (run it in a terminal; for scripts use dump, query or info)",
            if std::io::stdout().is_terminal() { "input" } else { "output" }
        );
    }
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    crate::tui::run(crate::tui::App::new(store))?;
    Ok(ExitStatus::Success)
}
