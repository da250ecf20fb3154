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

/// Print one value as a JSON line. The line is built first and written with one call, so a
/// closed pipe surfaces as a plain `io::Error` (see [`is_broken_pipe`]).
pub fn json_line<T: Serialize>(out: &mut dyn Write, v: &T) -> anyhow::Result<()> {
    let mut line = serde_json::to_vec(v)?;
    line.push(b'\n');
    out.write_all(&line)?;
    Ok(())
}

/// Print one value as a JSON line whose first field is `"type": kind` (the rest are the fields of
/// `v`, which must serialize as an object). Every `--json` line is built this way or carries its
/// own `type` field (docs/json.md).
pub fn typed_line<T: Serialize + ?Sized>(
    out: &mut dyn Write,
    kind: &'static str,
    v: &T,
) -> anyhow::Result<()> {
    json_line(out, &Typed { kind, v })
}

/// The closing line of a command: `{"type":"summary","command":command, ...fields of v}`.
pub fn summary_line<T: Serialize + ?Sized>(
    out: &mut dyn Write,
    command: &'static str,
    v: &T,
) -> anyhow::Result<()> {
    #[derive(Serialize)]
    struct Summary<'a, T: ?Sized> {
        command: &'static str,
        #[serde(flatten)]
        v: &'a T,
    }
    typed_line(out, "summary", &Summary { command, v })
}

/// A value with a `type` field in front of its own fields.
#[derive(Serialize)]
pub struct Typed<'a, T: ?Sized> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(flatten)]
    pub v: &'a T,
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

/// The bytes of `segments` a walk will read, for a progress bar's length: every file but the
/// last whole, the last up to the end of its data (a broker pre-allocates the file it writes to,
/// so most of it can be a hole).
pub fn commitlog_data_bytes(segments: &[crate::format::commitlog::read::Segment]) -> u64 {
    let Some((last, full)) = segments.split_last() else {
        return 0;
    };
    let tail = crate::format::entry::open_regular(&last.path)
        .ok()
        .and_then(|f| {
            crate::engine::store::safedir::data_ranges(&f, last.len)
                .last()
                .map(|r| r.1)
        })
        .unwrap_or(last.len);
    full.iter().map(|s| s.len).sum::<u64>() + tail
}

/// `--color`: when ERROR and WARNING (and `rmqstore: error:`) are coloured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set (or TERM is `dumb`).
    #[default]
    Auto,
    Always,
    Never,
}

/// Whether stdout and stderr are coloured, decided once by [`set_color`].
static PAINT: std::sync::OnceLock<(bool, bool)> = std::sync::OnceLock::new();

/// Decide colouring for this run from `--color`, the terminals and the environment.
pub fn set_color(choice: ColorChoice) {
    let no_color = std::env::var("NO_COLOR").ok();
    let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
    let decide = |terminal: bool| should_paint(choice, terminal && !dumb, no_color.as_deref());
    let _ = PAINT.set((
        decide(std::io::stdout().is_terminal()),
        decide(std::io::stderr().is_terminal()),
    ));
}

/// `--color` against the stream being a terminal and NO_COLOR (set and not empty: no colour).
pub fn should_paint(choice: ColorChoice, terminal: bool, no_color: Option<&str>) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && no_color.is_none_or(str::is_empty),
    }
}

/// Which colour a word gets.
#[derive(Debug, Clone, Copy)]
pub enum Paint {
    Red,
    Yellow,
}

/// `text` in `paint` when that stream is coloured (stderr when `to_stderr`), else as it is.
pub fn painted(text: &str, paint: Paint, to_stderr: bool) -> String {
    let (out, err) = PAINT.get().copied().unwrap_or((false, false));
    if !(if to_stderr { err } else { out }) {
        return text.to_string();
    }
    let code = match paint {
        Paint::Red => "1;31",
        Paint::Yellow => "1;33",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

pub use crate::engine::store::message_json::{encode_body, BodyMode, MessageJson};

/// `--body`: the names of [`BodyMode::ALL`], each with its help line.
pub fn body_mode_parser() -> impl clap::builder::TypedValueParser<Value = BodyMode> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        BodyMode::ALL
            .iter()
            .map(|(_, name, help)| PossibleValue::new(*name).help(*help)),
    )
    .map(|name| BodyMode::from_name(&name).unwrap_or_default())
}

/// `--role`: the broker's role.
pub fn broker_role_parser(
) -> impl clap::builder::TypedValueParser<Value = crate::engine::broker::pull::BrokerRole> {
    use crate::engine::broker::pull::BrokerRole;
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(["master", "slave"]).map(|name| {
        if name == "slave" {
            BrokerRole::Slave
        } else {
            BrokerRole::Master
        }
    })
}

/// Whether the command runs with `--json` (set once, before it runs): then every line it
/// writes to stderr is a JSON line too, so that `2>&1 | jq` reads the whole output.
static JSON_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Set by the binary from the command line (`--json` or `-J` on the command that runs).
pub fn set_json_stderr(on: bool) {
    JSON_STDERR.store(on, std::sync::atomic::Ordering::Relaxed);
}

pub fn json_stderr() -> bool {
    JSON_STDERR.load(std::sync::atomic::Ordering::Relaxed)
}

/// A line for people on stderr: `rmqstore: <what>`, or with `--json` the line
/// `{"type":"note","message":<what>}` (docs/json.md).
pub fn say(what: &str) {
    if json_stderr() {
        let mut e = std::io::stderr().lock();
        let _ = typed_line(&mut e, "note", &serde_json::json!({ "message": what }));
    } else {
        eprintln!("rmqstore: {what}");
    }
}

/// A note on stderr: `rmqstore: note: <what>` (with `--json`, a `note` line, see [`say`]).
pub fn note(what: &str) {
    if json_stderr() {
        say(what);
    } else {
        say(&format!("note: {what}"));
    }
}

/// Say on stderr which config file was written and where the previous one is kept.
pub fn note_written(file: &std::path::Path, backup: Option<std::path::PathBuf>) {
    say(&format!(
        "wrote {}{}",
        file.display(),
        backup
            .map(|b| format!(" (the previous file is kept as {} and .bak)", b.display()))
            .unwrap_or_default()
    ));
}

/// Say on stderr what a group's (or, without one, the store's) answer leaves out of 5.x POP
/// consumption; true when something is left out for `group`.
pub fn note_pop(pop: &crate::engine::consume::pop::PopUse, group: Option<&str>) -> bool {
    for p in &pop.problems {
        note(p);
    }
    let w = match group {
        Some(g) => pop.warning(g),
        None => pop.store_warning(),
    };
    if let Some(w) = &w {
        note(w);
    }
    w.is_some()
}

/// Say on stderr that a limit cut a result short.
pub fn note_truncated(what: &str) {
    note(what);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_encodings() {
        assert_eq!(
            encode_body(b"hi", BodyMode::Auto),
            (Some("hi".into()), "utf8")
        );
        assert_eq!(
            encode_body(&[0xff, 0], BodyMode::Auto),
            (Some("/wA=".into()), "base64")
        );
        assert_eq!(
            encode_body(&[0xAB, 1], BodyMode::Hex),
            (Some("ab01".into()), "hex")
        );
        assert_eq!(encode_body(b"x", BodyMode::None), (None, "none"));
        assert!(should_paint(ColorChoice::Auto, true, None));
        assert!(should_paint(ColorChoice::Auto, true, Some("")));
        assert!(!should_paint(ColorChoice::Auto, true, Some("1")));
        assert!(!should_paint(ColorChoice::Auto, false, None));
        assert!(should_paint(ColorChoice::Always, false, Some("1")));
        assert!(!should_paint(ColorChoice::Never, true, None));
        assert_eq!(
            encode_body(&[0xff], BodyMode::Utf8),
            (Some("\u{fffd}".into()), "utf8")
        );
    }
}

/// Parse a TIME argument: epoch milliseconds (`1796073054160`), or an ISO 8601 date
/// (`2026-11-30`, midnight) or date-time (`2026-11-30T10:15:00`, seconds and `.SSS` optional, a
/// space accepted for `T`), with a zone (`Z`, `+08:00`) or else in the local time zone.
pub fn parse_time(s: &str) -> anyhow::Result<i64> {
    crate::engine::broker::clock::parse_time(s, crate::engine::broker::clock::Zoneless::Local)
        .map_err(|e| anyhow::anyhow!(e))
}

/// [`parse_time`] for clap's `value_parser`.
pub fn parse_time_arg(s: &str) -> Result<i64, String> {
    parse_time(s).map_err(|e| e.to_string())
}

/// An offset argument for clap's `value_parser` (with `allow_negative_numbers`, so `-o -5`
/// reaches it): a whole number, 0 or more; a negative one is refused by name rather than
/// clamped or read as a flag.
pub fn parse_offset_arg<T: TryFrom<i128>>(s: &str) -> Result<T, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if n < 0 => Err(format!("offset must be 0 or more (got {s})")),
        Ok(n) => T::try_from(n).map_err(|_| format!("offset {s} is too large")),
        Err(_) => Err(format!(
            "offset must be a whole number, 0 or more (got {s:?})"
        )),
    }
}

/// Epoch milliseconds as a local date-time with milliseconds and the zone's offset
/// (`2026-11-30 10:15:00.250+08:00`, which [`parse_time`] reads back); the number itself when
/// it is out of range.
pub fn format_time(ms: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_millis_opt(ms) {
        chrono::LocalResult::Single(t) => t.format("%Y-%m-%d %H:%M:%S%.3f%:z").to_string(),
        _ => ms.to_string(),
    }
}

#[cfg(test)]
mod progress_tests {
    use super::*;
    use crate::format::commitlog::read::Segment;

    #[test]
    fn a_progress_bar_counts_the_data_of_a_preallocated_last_file() {
        use std::io::{Seek, Write};
        let dir = tempfile::tempdir().unwrap();
        let seg = |name: &str, start: u64, len: u64, data: u64| {
            let path = dir.path().join(name);
            let mut f = std::fs::File::create(&path).unwrap();
            f.set_len(len).unwrap();
            f.rewind().unwrap();
            f.write_all(&vec![1u8; data as usize]).unwrap();
            Segment::commitlog(path, start, len)
        };
        let full = seg("00000000000000000000", 0, 1 << 20, 1 << 20);
        let last = seg("00000000000001048576", 1 << 20, 1 << 20, 8192);
        let n = commitlog_data_bytes(&[full, last.clone()]);
        // a file system without holes reports the whole file, never less than the data
        assert!(n == (1 << 20) + 8192 || n == 2 << 20, "{n}");
        assert!(commitlog_data_bytes(&[last]) >= 8192);
        assert_eq!(commitlog_data_bytes(&[]), 0);
    }
}

#[cfg(test)]
mod time_tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time("1796073054160").unwrap(), 1796073054160);
        assert_eq!(parse_time("0").unwrap(), 0);
        assert_eq!(parse_time("-5").unwrap(), -5);
        assert_eq!(parse_time("1970-01-01T00:00:01Z").unwrap(), 1000);
        assert_eq!(parse_time("1970-01-01T00:00:01.250Z").unwrap(), 1250);
        assert_eq!(parse_time("1970-01-01T08:00:00+08:00").unwrap(), 0);
        assert_eq!(parse_time("1970-01-01 08:00:00.5+08:00").unwrap(), 500);
        assert_eq!(parse_time("1970-01-01T00:01Z").unwrap(), 60_000);
        // no zone: local time
        let local = chrono::NaiveDate::from_ymd_opt(2026, 11, 30)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        use chrono::TimeZone;
        let want = chrono::Local
            .from_local_datetime(&local)
            .earliest()
            .unwrap()
            .timestamp_millis();
        assert_eq!(parse_time("2026-11-30").unwrap(), want);
        assert_eq!(parse_time("2026-11-30T00:00:00").unwrap(), want);
        assert_eq!(parse_time("2026-11-30 00:00").unwrap(), want);
        for bad in ["", "yesterday", "2026-13-01", "12:00", "2026-11-30T25:00"] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_time(&format_time(want)).unwrap(), want);
    }
}

/// The timer messages' counts as text (`info`, `pending`): one line, then the release window
/// and the pending count per real topic.
pub fn write_timer_counts(
    out: &mut dyn Write,
    t: &crate::engine::broker::timer::TimerCounts,
) -> std::io::Result<()> {
    writeln!(
        out,
        "\ntimer messages (rmq_sys_wheel_timer): {} pending ({} rolled, {} due now), {} \
         delivered; read cursor {}",
        t.pending,
        t.rolled,
        t.due_now,
        t.delivered,
        format_time(t.read_timestamp)
    )?;
    if let (Some(a), Some(b)) = (t.next_release_timestamp, t.last_release_timestamp) {
        writeln!(out, "  released {} .. {}", format_time(a), format_time(b))?;
    }
    for c in &t.topics {
        writeln!(out, "  {:<32} {:>8} pending", c.topic, c.pending)?;
    }
    Ok(())
}
