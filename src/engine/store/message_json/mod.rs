//! The one JSON shape of a message, shared by `dump`, `query`, `pull`, `export`, the repair
//! salvage file and the browser's "save as JSON": one flat object per message (pinned by tests),
//! and [`read`], the line read back into the message it was written from (`send` of an export file).

use serde::Serialize;

mod direct;
mod escape;
pub mod read;
pub use direct::{write_json_line, RecordFile};
pub use read::{read_line, LineError, ReadLine};

/// How a body is printed (`--body`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
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

impl BodyMode {
    /// Every mode with its name and what it prints.
    pub const ALL: [(BodyMode, &'static str, &'static str); 5] = [
        (
            BodyMode::Auto,
            "auto",
            "UTF-8 text when the body is valid UTF-8, base64 otherwise",
        ),
        (
            BodyMode::Utf8,
            "utf8",
            "UTF-8 text (invalid bytes become U+FFFD)",
        ),
        (BodyMode::Hex, "hex", "hexadecimal"),
        (BodyMode::Base64, "base64", "base64"),
        (
            BodyMode::None,
            "none",
            "no body (body is null, body_encoding \"none\")",
        ),
    ];

    /// The mode of a name in [`BodyMode::ALL`].
    pub fn from_name(name: &str) -> Option<BodyMode> {
        Self::ALL
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(m, _, _)| *m)
    }
}

/// The one JSON shape of a message, shared by `dump`, `query`, `pull` and `export`:
/// one flat object per message, keys as listed here (pinned by tests and docs/json.md).
#[derive(Debug, Clone, Serialize)]
pub struct MessageJson {
    /// Always `"message"`: the JSON Lines type (docs/json.md).
    #[serde(rename = "type")]
    pub kind: &'static str,
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
                Err(e) => (
                    std::borrow::Cow::Borrowed(m.body),
                    None,
                    Some(e.to_string()),
                ),
            },
        };
        let (body, body_encoding) = encode_body(&body_bytes, mode);
        MessageJson {
            kind: "message",
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
