//! `rmqstore tui`: browse a store in the terminal (read-only).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{ExitStatus, GeometryArgs};
use crate::engine::Store;

/// What the browser's help says beyond its arguments.
const TUI_HELP: &str =
    "Nothing is written into the store. Times are shown and read in UTC; a time \
typed with an offset (2026-11-30T18:15:00+08:00) or as epoch milliseconds is read as such.

Keys (? in the browser lists them all): f filters a queue's messages (TagA || TagB, key:K, \
prop:NAME=VALUE, body:TEXT), / filters any list as you type, s sorts, F finds a message by key \
or id, g goes to a queue offset or a time, n/N step through messages, o opens the origin of a \
%RETRY% or %DLQ% copy, c/C copy the id/body (OSC 52), p shows the body in $PAGER.";

#[derive(Debug, Args)]
#[command(after_help = TUI_HELP)]
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
