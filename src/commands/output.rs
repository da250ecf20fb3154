//! Shared output helpers: JSON lines, broken pipes, progress bars on a terminal only.

use std::io::{IsTerminal, Write};

use serde::Serialize;

/// True when an error chain ends in a closed pipe (`| head`): such output ends quietly.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Print one value as a JSON line.
pub fn json_line<T: Serialize>(out: &mut dyn Write, v: &T) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, v)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// A progress bar on stderr when it is a terminal, hidden otherwise.
pub fn progress(len: u64, what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}
