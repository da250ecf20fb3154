//! `rmqstore tui`: browse a store in the terminal (read-only).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{ExitStatus, GeometryArgs};
use crate::engine::Store;

#[derive(Debug, Args)]
#[command(after_help = super::help::TUI)]
pub struct TuiArgs {
    /// The store root.
    pub store: PathBuf,
    /// The topic the clients wrote their message traces to (the detail view's trace pane).
    #[arg(long, value_name = "NAME", default_value = crate::format::trace::DEFAULT_TRACE_TOPIC)]
    pub trace_topic: String,
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
    let mut app = crate::tui::App::new(store);
    app.trace_topic = a.trace_topic.clone();
    crate::tui::run(app)?;
    Ok(ExitStatus::Success)
}
