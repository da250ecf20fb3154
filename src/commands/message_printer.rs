//! The printer of message streams, shared by `dump commitlog`, `query` and `pull`: one message
//! per line as a table row, JSON Lines or a `--format` template, and the closing summary on stderr.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::line_format::Style;
use super::output::{self, format_time, BodyMode, MessageJson};
use crate::engine::store::message_json::{write_json_line, RecordFile};
use crate::format::commitlog::MessageRef;

/// Prints messages as a table or JSON Lines, then a summary.
pub(crate) struct MessagePrinter<'w> {
    out: &'w mut dyn Write,
    style: Style,
    body: BodyMode,
    printed: u64,
    buf: Vec<u8>,
}

impl<'w> MessagePrinter<'w> {
    pub(crate) fn new(out: &'w mut dyn Write, style: Style, body: BodyMode) -> Self {
        MessagePrinter {
            out,
            style,
            body,
            printed: 0,
            buf: Vec::with_capacity(4096),
        }
    }

    /// Flush the messages written so far.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    pub(crate) fn printed(&self) -> u64 {
        self.printed
    }

    /// Print one message found in `file`.
    pub(crate) fn print(&mut self, m: &MessageRef<'_>, file: &Path) -> anyhow::Result<()> {
        self.buf.clear();
        render(
            &mut self.buf,
            m,
            &RecordFile::new(file),
            &self.style,
            self.body,
        )?;
        let line = std::mem::take(&mut self.buf);
        let r = self.write_rendered(&line, 1);
        self.buf = line;
        r
    }

    /// Write `n` lines rendered by [`render`] (the table header first, before the first row).
    pub(crate) fn write_rendered(&mut self, lines: &[u8], n: u64) -> anyhow::Result<()> {
        if n == 0 {
            return Ok(());
        }
        if matches!(self.style, Style::Table) && self.printed == 0 {
            writeln!(self.out, "{}", table_header())?;
        }
        self.out.write_all(lines)?;
        self.printed += n;
        Ok(())
    }

    /// The closing summary, on stderr so that stdout holds the messages only:
    /// `{"type":"summary","command":command,...}` in JSON, `-- key: value, ...` in text.
    pub(crate) fn summary(&mut self, command: &'static str, summary: Value) -> anyhow::Result<()> {
        self.side_line("summary", Some(command), summary)
    }

    /// A line about the messages rather than a message (a pull's answer, the summary): on
    /// stderr, as a JSON line of type `kind` (with `command` first for a summary) or as text.
    pub(crate) fn side_line(
        &mut self,
        kind: &'static str,
        command: Option<&'static str>,
        fields: Value,
    ) -> anyhow::Result<()> {
        self.out.flush()?;
        let mut err = std::io::stderr().lock();
        self.write_side(&mut err, kind, command, fields)
    }

    fn write_side(
        &self,
        out: &mut dyn Write,
        kind: &'static str,
        command: Option<&'static str>,
        summary: Value,
    ) -> anyhow::Result<()> {
        if matches!(self.style, Style::Json) {
            match command {
                Some(c) => output::summary_line(out, c, &summary)?,
                None => output::typed_line(out, kind, &summary)?,
            }
        } else {
            let parts: Vec<String> = match &summary {
                Value::Object(m) => m
                    .iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| match v {
                        Value::String(s) => format!("{k}: {s}"),
                        other => format!("{k}: {other}"),
                    })
                    .collect(),
                other => vec![other.to_string()],
            };
            writeln!(out, "-- {}", parts.join(", "))?;
        }
        Ok(())
    }
}

fn table_header() -> String {
    format!(
        "{:>12} {:>7} {:<24} {:>5} {:>8} {:<29} {:<10} {:<20} {:<32} BODY",
        "OFFSET", "SIZE", "TOPIC", "QUEUE", "QOFFSET", "STORED", "TAGS", "KEYS", "UNIQ_KEY"
    )
}

/// Append one message as a JSON line or a table row to `buf`.
pub(crate) fn render(
    buf: &mut Vec<u8>,
    m: &MessageRef<'_>,
    file: &RecordFile<'_>,
    style: &Style,
    body: BodyMode,
) -> anyhow::Result<()> {
    if let Style::Line(f) = style {
        f.render(buf, m);
        return Ok(());
    }
    if matches!(style, Style::Json) {
        write_json_line(buf, m, file, body)?;
    } else {
        let j = MessageJson::new(m, file.path(), body);
        writeln!(
            buf,
            "{:>12} {:>7} {:<24} {:>5} {:>8} {:<29} {:<10} {:<20} {:<32} {}",
            j.commitlog_offset,
            j.size,
            fit(&j.topic, 24),
            j.queue_id,
            j.queue_offset,
            format_time(j.store_timestamp),
            fit(j.tags.as_deref().unwrap_or("-"), 10),
            fit(
                &if j.keys.is_empty() {
                    "-".to_string()
                } else {
                    j.keys.join(" ")
                },
                20
            ),
            fit(j.uniq_key.as_deref().unwrap_or("-"), 32),
            body_preview(&j),
        )?;
    }
    Ok(())
}

/// `s` cut to `width` characters, the last one an ellipsis when something was cut, so that
/// the table's columns stay aligned (`--json` has every value whole).
pub(crate) fn fit(s: &str, width: usize) -> std::borrow::Cow<'_, str> {
    if s.chars().count() <= width {
        return s.into();
    }
    let mut cut: String = s.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut.into()
}

/// The start of a body for the table: printable text, or the encoding the body would need.
fn body_preview(j: &MessageJson) -> String {
    const MAX: usize = 60;
    let mut s = String::new();
    if let Some(c) = j.body_decompressed_from {
        s.push_str(&format!("[{c:?} decompressed] ").to_lowercase());
    }
    match &j.body {
        None => s.push_str(&format!("({} bytes)", j.body_len)),
        Some(b) => {
            let mut text: String = b
                .chars()
                .take(MAX)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            if b.chars().count() > MAX {
                text.push('…');
            }
            if j.body_encoding != "utf8" {
                s.push_str(&format!("{}:", j.body_encoding));
            }
            s.push_str(&text);
        }
    }
    s
}
