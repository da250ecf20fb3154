//! What the browser hands to the terminal: text for the clipboard as an OSC 52 escape
//! sequence (terminals and tmux with `set-clipboard` put it on the system clipboard, also over
//! ssh), and a body piped to the user's pager.

use std::io::Write;
use std::process::{Command, Stdio};

use base64::Engine;

/// The OSC 52 sequence that sets the clipboard to `text`.
pub fn osc52(text: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    format!("\x1b]52;c;{encoded}\x07")
}

/// The pager command: `$PAGER`, else `less`.
pub fn pager_command() -> String {
    std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "less".into())
}

/// Pipe `body` to the pager and wait for it to end (the terminal must be in its normal
/// mode). Nothing is written to disk.
pub fn show_in_pager(body: &[u8]) -> Result<(), String> {
    let command = pager_command();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&command)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("pager {command:?}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // the pager may quit before reading everything: a broken pipe is not an error
        let _ = stdin.write_all(body);
    }
    child
        .wait()
        .map_err(|e| format!("pager {command:?}: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc52_wraps_base64_text() {
        assert_eq!(osc52("hi"), "\x1b]52;c;aGk=\x07");
    }
}
