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

/// How a body is printed (`--body`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BodyMode {
    /// UTF-8 text when the body is valid UTF-8, base64 otherwise.
    #[default]
    Auto,
    /// UTF-8 text (invalid bytes become U+FFFD).
    Utf8,
    Hex,
    Base64,
    /// No body (`body` is null, `body_encoding` "none").
    None,
}

/// The one JSON shape of a message, shared by `dump`, `query`, `pull` and `export`:
/// one flat object per message, keys as listed here (pinned by tests).
#[derive(Debug, Clone, Serialize)]
pub struct MessageJson {
    pub file: String,
    pub commitlog_offset: u64,
    pub size: i32,
    pub version: u8,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: String,
    pub store_timestamp: i64,
    pub store_host: String,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub topic: String,
    /// Properties in file order (a repeated name keeps its last value, as the broker reads it).
    pub properties: serde_json::Map<String, serde_json::Value>,
    pub tags: Option<String>,
    pub keys: Vec<String>,
    pub uniq_key: Option<String>,
    /// The broker's offset message id.
    pub msg_id: String,
    /// Length of the body as stored (compressed length for a compressed body).
    pub body_len: usize,
    pub body: Option<String>,
    /// `utf8`, `hex`, `base64` or `none`.
    pub body_encoding: &'static str,
    /// For a compressed body: the algorithm it was decompressed with (`body` is decompressed);
    /// `null` for a plain body.
    pub body_decompressed_from: Option<crate::format::compression::Compression>,
    /// Set when a compressed body could not be decompressed (then `body` is the stored bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_error: Option<String>,
}

/// Encode a body for printing.
pub fn encode_body(body: &[u8], mode: BodyMode) -> (Option<String>, &'static str) {
    use base64::Engine;
    let b64 = || base64::engine::general_purpose::STANDARD.encode(body);
    match mode {
        BodyMode::None => (None, "none"),
        BodyMode::Hex => (
            Some(crate::format::msgid::to_hex(body).to_lowercase()),
            "hex",
        ),
        BodyMode::Base64 => (Some(b64()), "base64"),
        BodyMode::Utf8 => (Some(String::from_utf8_lossy(body).into_owned()), "utf8"),
        BodyMode::Auto => match std::str::from_utf8(body) {
            Ok(s) => (Some(s.to_string()), "utf8"),
            Err(_) => (Some(b64()), "base64"),
        },
    }
}

impl MessageJson {
    /// Build the JSON view of a record found in `file`.
    pub fn new(
        m: &crate::format::commitlog::MessageRef<'_>,
        file: &std::path::Path,
        mode: BodyMode,
    ) -> Self {
        let mut properties = serde_json::Map::new();
        for (k, v) in m.properties.iter() {
            properties.insert(k.into_owned(), serde_json::Value::String(v.into_owned()));
        }
        let (body_bytes, decompressed, body_error) = match (m.is_compressed(), mode) {
            (_, BodyMode::None) | (false, _) => (std::borrow::Cow::Borrowed(m.body), None, None),
            (true, _) => match m.decompressed_body() {
                Ok(b) => (
                    b,
                    crate::format::compression::Compression::of(m.sys_flag),
                    None,
                ),
                Err(e) => (std::borrow::Cow::Borrowed(m.body), None, Some(e)),
            },
        };
        let (body, body_encoding) = encode_body(&body_bytes, mode);
        MessageJson {
            file: file.display().to_string(),
            commitlog_offset: m.position,
            size: m.total_size,
            version: m.version.number(),
            body_crc: m.body_crc,
            queue_id: m.queue_id,
            flag: m.flag,
            queue_offset: m.queue_offset,
            sys_flag: m.sys_flag,
            born_timestamp: m.born_timestamp,
            born_host: m.born_host.to_string(),
            store_timestamp: m.store_timestamp,
            store_host: m.store_host.to_string(),
            reconsume_times: m.reconsume_times,
            prepared_transaction_offset: m.prepared_transaction_offset,
            topic: m.topic.to_string(),
            properties,
            tags: m.tags().map(|t| t.into_owned()),
            keys: m.keys(),
            uniq_key: m.uniq_key().map(|u| u.into_owned()),
            msg_id: m.offset_msg_id(),
            body_len: m.body.len(),
            body,
            body_encoding,
            body_decompressed_from: decompressed,
            body_error,
        }
    }
}

/// Say on stderr that a limit cut a result short.
pub fn note_truncated(what: &str) {
    eprintln!("rmqstore: note: {what}");
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
        assert_eq!(
            encode_body(&[0xff], BodyMode::Utf8),
            (Some("\u{fffd}".into()), "utf8")
        );
    }

    #[test]
    fn message_json_keys() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/store-4.9/commitlog");
        let f = root.join("00000000000000000000");
        let map = crate::format::mapped::Mapped::open(&f).unwrap();
        let m = crate::format::commitlog::RecordIter::new(&map, &f, 0, true)
            .next()
            .unwrap()
            .unwrap();
        let v = serde_json::to_value(MessageJson::new(&m, &f, BodyMode::Auto)).unwrap();
        for k in [
            "file",
            "commitlog_offset",
            "size",
            "version",
            "body_crc",
            "queue_id",
            "flag",
            "queue_offset",
            "sys_flag",
            "born_timestamp",
            "born_host",
            "store_timestamp",
            "store_host",
            "reconsume_times",
            "prepared_transaction_offset",
            "topic",
            "properties",
            "tags",
            "keys",
            "uniq_key",
            "msg_id",
            "body_len",
            "body",
            "body_encoding",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["commitlog_offset"], 0);
        assert_eq!(v["msg_id"].as_str().unwrap().len(), 32);
    }
}

/// Parse a TIME argument: epoch milliseconds (`1796073054160`), or an ISO 8601 date
/// (`2026-11-30`, midnight) or date-time (`2026-11-30T10:15:00`, seconds and `.SSS` optional, a
/// space accepted for `T`), with a zone (`Z`, `+08:00`) or else in the local time zone.
pub fn parse_time(s: &str) -> anyhow::Result<i64> {
    use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, TimeZone};
    let s = s.trim();
    let digits = s.strip_prefix('-').unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<i64>()
            .map_err(|e| anyhow::anyhow!("time {s:?}: {e}"));
    }
    let with_t = s.replacen(' ', "T", 1);
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M%:z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
    ] {
        if let Ok(t) = DateTime::parse_from_str(&with_t, fmt) {
            return Ok(t.timestamp_millis());
        }
    }
    let (naive_text, utc) = match with_t.strip_suffix(['Z', 'z']) {
        Some(rest) => (rest.to_string(), true),
        None => (with_t.clone(), false),
    };
    let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(&naive_text, f).ok())
        .or_else(|| {
            NaiveDate::parse_from_str(&naive_text, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "time {s:?}: expected epoch milliseconds or an ISO 8601 date or date-time \
                 (2026-11-30, 2026-11-30T10:15:00, 2026-11-30T10:15:00.250+08:00)"
            )
        })?;
    if utc {
        return Ok(naive.and_utc().timestamp_millis());
    }
    match chrono::Local.from_local_datetime(&naive) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Ok(t.timestamp_millis()),
        LocalResult::None => anyhow::bail!("time {s:?} does not exist in the local time zone"),
    }
}

/// [`parse_time`] for clap's `value_parser`.
pub fn parse_time_arg(s: &str) -> Result<i64, String> {
    parse_time(s).map_err(|e| e.to_string())
}

/// Epoch milliseconds as a local date-time with milliseconds (`2026-11-30 10:15:00.250`); the
/// number itself when it is out of range.
pub fn format_time(ms: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_millis_opt(ms) {
        chrono::LocalResult::Single(t) => t.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
        _ => ms.to_string(),
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
