//! The message line read back: one JSON line of the shape [`MessageJson`] writes (`dump --json`,
//! `query --json`, `export --out FILE.jsonl`, `compare --export`) turned into the owned
//! [`Message`] it was written from, so that `send` hands an export file back to a cluster.
//!
//! What comes back: every fixed field, the properties in file order (a name the record repeated
//! once, with its last value, as the line holds it), and the body as stored. A body the line
//! holds decompressed (`body_decompressed_from`) is compressed again with the algorithm of its
//! sysflag, as a client compresses (the bytes may differ from the stored ones; the body a consumer
//! decompresses does not). A line written with `--body none` has no body and is refused. The
//! fields beyond the message shape (an export's `export_source`, `resend_topic`, ...) are handed
//! back as they are, in [`ReadLine::extra`].

use std::net::SocketAddr;

use base64::Engine as _;
use serde_json::{Map, Value};

use super::MessageJson;
use crate::format::commitlog::{encode_properties, sysflag, Host, Message, MessageVersion};
use crate::format::compression::{compress, Compression};

/// One message line read back.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadLine {
    pub message: Message,
    /// Where the record was in its store (`commitlog_offset`).
    pub commitlog_offset: u64,
    /// The broker's offset message id the line names.
    pub msg_id: String,
    /// Every field that is not part of the message shape, as written.
    pub extra: Map<String, Value>,
}

/// Why a line is not a message line that can be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("not a JSON object: {0}")]
    NotJson(String),
    #[error("field {field:?} is missing or not {expected}")]
    Field {
        field: &'static str,
        expected: &'static str,
    },
    #[error(
        "the line has no body (written with --body none): export it again without --body none"
    )]
    NoBody,
    #[error("the body does not decode as {encoding}")]
    BodyEncoding { encoding: String },
    #[error("the body could not be compressed again ({kind:?}): {why}")]
    Recompress { kind: Compression, why: String },
}

/// The fields [`MessageJson`] writes (the rest of a line is [`ReadLine::extra`]).
const MESSAGE_FIELDS: [&str; 27] = [
    "type",
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
    "body_decompressed_from",
    "body_error",
];

/// The `type` of a line: `Some("message")` for a message line (other types, such as a
/// `summary`, are not messages); `None` when the line is not a JSON object with a `type`.
pub fn line_type(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        kind: String,
    }
    serde_json::from_slice::<Typed>(line).ok().map(|t| t.kind)
}

/// Read one message line back (see the module documentation).
pub fn read_line(line: &[u8]) -> Result<ReadLine, LineError> {
    let mut map: Map<String, Value> = match serde_json::from_slice(line) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Err(LineError::NotJson("not an object".into())),
        Err(e) => return Err(LineError::NotJson(e.to_string())),
    };
    let int = |map: &Map<String, Value>, field: &'static str| -> Result<i64, LineError> {
        map.get(field)
            .and_then(Value::as_i64)
            .ok_or(LineError::Field {
                field,
                expected: "an integer",
            })
    };
    let int32 = |map: &Map<String, Value>, field: &'static str| -> Result<i32, LineError> {
        i32::try_from(int(map, field)?).map_err(|_| LineError::Field {
            field,
            expected: "a 32-bit integer",
        })
    };
    let text = |map: &Map<String, Value>, field: &'static str| -> Result<String, LineError> {
        map.get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or(LineError::Field {
                field,
                expected: "a string",
            })
    };
    let host = |map: &Map<String, Value>, field: &'static str| -> Result<Host, LineError> {
        let s = text(map, field)?;
        let a: SocketAddr = s.parse().map_err(|_| LineError::Field {
            field,
            expected: "a host:port",
        })?;
        Ok(Host::new(a.ip(), i32::from(a.port())))
    };
    let sys_flag = int32(&map, "sys_flag")?;
    let commitlog_offset =
        map.get("commitlog_offset")
            .and_then(Value::as_u64)
            .ok_or(LineError::Field {
                field: "commitlog_offset",
                expected: "an unsigned integer",
            })?;
    let version = match int(&map, "version")? {
        1 => MessageVersion::V1,
        2 => MessageVersion::V2,
        _ => {
            return Err(LineError::Field {
                field: "version",
                expected: "1 or 2",
            })
        }
    };
    let properties = match map.get("properties") {
        Some(Value::Object(p)) => {
            let mut pairs = Vec::with_capacity(p.len());
            for (k, v) in p {
                let v = v.as_str().ok_or(LineError::Field {
                    field: "properties",
                    expected: "an object of strings",
                })?;
                pairs.push((k.as_str(), v));
            }
            encode_properties(&pairs, true)
        }
        _ => {
            return Err(LineError::Field {
                field: "properties",
                expected: "an object",
            })
        }
    };
    let body = body_as_stored(&map, sys_flag)?;
    let message = Message {
        topic: text(&map, "topic")?,
        queue_id: int32(&map, "queue_id")?,
        flag: int32(&map, "flag")?,
        queue_offset: int(&map, "queue_offset")?,
        physical_offset: i64::try_from(commitlog_offset).unwrap_or(i64::MAX),
        sys_flag,
        born_timestamp: int(&map, "born_timestamp")?,
        born_host: host(&map, "born_host")?,
        store_timestamp: int(&map, "store_timestamp")?,
        store_host: host(&map, "store_host")?,
        reconsume_times: int32(&map, "reconsume_times")?,
        prepared_transaction_offset: int(&map, "prepared_transaction_offset")?,
        body,
        properties,
        version,
    };
    let msg_id = text(&map, "msg_id")?;
    for f in MESSAGE_FIELDS {
        map.remove(f);
    }
    Ok(ReadLine {
        message,
        commitlog_offset,
        msg_id,
        extra: map,
    })
}

/// The body of a line as the record stored it.
fn body_as_stored(map: &Map<String, Value>, sys_flag: i32) -> Result<Vec<u8>, LineError> {
    let encoding = map
        .get("body_encoding")
        .and_then(Value::as_str)
        .ok_or(LineError::Field {
            field: "body_encoding",
            expected: "a string",
        })?;
    let body = match map.get("body") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Null) | None if encoding == "none" => return Err(LineError::NoBody),
        _ => {
            return Err(LineError::Field {
                field: "body",
                expected: "a string",
            })
        }
    };
    let bad = || LineError::BodyEncoding {
        encoding: encoding.to_string(),
    };
    let bytes = match encoding {
        "utf8" => body.as_bytes().to_vec(),
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|_| bad())?,
        "hex" => crate::format::msgid::from_hex(body).ok_or_else(bad)?,
        "none" => return Err(LineError::NoBody),
        _ => return Err(bad()),
    };
    let decompressed = !matches!(map.get("body_decompressed_from"), None | Some(Value::Null));
    if !decompressed || sys_flag & sysflag::COMPRESSED == 0 {
        return Ok(bytes);
    }
    let Some(kind) = Compression::of(sys_flag) else {
        return Err(LineError::Field {
            field: "sys_flag",
            expected: "a known compression type",
        });
    };
    compress(kind, &bytes).map_err(|e| LineError::Recompress {
        kind,
        why: e.to_string(),
    })
}

/// A compile-time reminder: every field [`MessageJson`] has is read back or listed above.
#[allow(dead_code)]
fn fields_are_known(j: MessageJson) {
    let MessageJson {
        kind: _,
        file: _,
        commitlog_offset: _,
        size: _,
        version: _,
        body_crc: _,
        queue_id: _,
        flag: _,
        queue_offset: _,
        sys_flag: _,
        born_timestamp: _,
        born_host: _,
        store_timestamp: _,
        store_host: _,
        reconsume_times: _,
        prepared_transaction_offset: _,
        topic: _,
        properties: _,
        tags: _,
        keys: _,
        uniq_key: _,
        msg_id: _,
        body_len: _,
        body: _,
        body_encoding: _,
        body_decompressed_from: _,
        body_error: _,
    } = j;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::store::message_json::{write_json_line, BodyMode, RecordFile};
    use crate::format::commitlog::read::{parse_record, Record};
    use crate::format::commitlog::{MessageRef, Properties};

    fn record(m: &Message) -> Vec<u8> {
        m.encode().unwrap()
    }

    fn parsed(raw: &[u8]) -> MessageRef<'_> {
        match parse_record(raw, 0, 0, true).unwrap() {
            Record::Message(m) => m,
            _ => panic!("not a message"),
        }
    }

    /// A message with its sysflag as stored (the host bits set).
    fn message(body: Vec<u8>, sys_flag: i32, props: &[(&str, &str)]) -> Message {
        let mut m = Message {
            topic: "TopicA".into(),
            queue_id: 3,
            flag: 7,
            queue_offset: 12,
            physical_offset: 0,
            sys_flag,
            born_timestamp: 1_700_000_000_123,
            born_host: Host::v4([10, 1, 0, 21], 50_001),
            store_timestamp: 1_700_000_000_456,
            store_host: Host::from_v6_bytes(
                [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x21],
                10911,
            ),
            reconsume_times: 2,
            prepared_transaction_offset: 0,
            body,
            properties: encode_properties(props, true),
            version: MessageVersion::V1,
        };
        m.sys_flag = m.stored_sys_flag();
        m
    }

    /// Written as `export` writes it (both writers), read back: the same message.
    fn round_trip(m: &Message, mode: BodyMode) -> ReadLine {
        let raw = record(m);
        let r = parsed(&raw);
        let path = std::path::Path::new("commitlog/00000000000000000000");
        let mut direct = Vec::new();
        write_json_line(&mut direct, &r, &RecordFile::new(path), mode).unwrap();
        let mut plain = serde_json::to_vec(&MessageJson::new(&r, path, mode)).unwrap();
        plain.push(b'\n');
        let a = read_line(&direct).unwrap();
        let b = read_line(&plain).unwrap();
        assert_eq!(a, b);
        assert_eq!(line_type(&direct).as_deref(), Some("message"));
        a
    }

    fn same_message(a: &Message, b: &Message) {
        let strip = |m: &Message| Message {
            body: Vec::new(),
            properties: Vec::new(),
            ..m.clone()
        };
        assert_eq!(strip(a), strip(b));
        let pairs = |p: &[u8]| Properties(p).to_map();
        assert_eq!(pairs(&a.properties), pairs(&b.properties));
        let body = |m: &Message| crate::format::compression::decompress(m.sys_flag, &m.body);
        if a.sys_flag & sysflag::COMPRESSED != 0 {
            assert_eq!(body(a).unwrap(), body(b).unwrap());
        } else {
            assert_eq!(a.body, b.body);
        }
    }

    #[test]
    fn every_body_mode_reads_back() {
        let props = [
            ("UNIQ_KEY", "AB01"),
            ("KEYS", "k1 k2"),
            ("TAGS", "TagA"),
            ("region", "cn-上海\"\n"),
        ];
        for body in [b"plain text".to_vec(), vec![0xff, 0x00, 0x80, 0x7f]] {
            for mode in [BodyMode::Auto, BodyMode::Hex, BodyMode::Base64] {
                let m = message(body.clone(), 0, &props);
                let back = round_trip(&m, mode);
                same_message(&m, &back.message);
                assert_eq!(back.commitlog_offset, 0);
                assert!(back.extra.is_empty(), "{:?}", back.extra);
            }
        }
    }

    #[test]
    fn compressed_bodies_are_compressed_again_by_their_sysflag() {
        let text = "compressible text ".repeat(400).into_bytes();
        for flag in [0x1, 0x301, 0x101, 0x201] {
            let kind = Compression::of(flag).unwrap();
            let m = message(compress(kind, &text).unwrap(), flag, &[("UNIQ_KEY", "X")]);
            let back = round_trip(&m, BodyMode::Auto);
            assert_eq!(back.message.sys_flag, flag | sysflag::STOREHOST_V6);
            same_message(&m, &back.message);
        }
    }

    #[test]
    fn a_body_left_out_is_refused_and_extras_come_back() {
        let m = message(b"x".to_vec(), 0, &[]);
        let raw = record(&m);
        let r = parsed(&raw);
        let mut line = Vec::new();
        write_json_line(
            &mut line,
            &r,
            &RecordFile::new(std::path::Path::new("f")),
            BodyMode::None,
        )
        .unwrap();
        assert_eq!(read_line(&line), Err(LineError::NoBody));
        let mut v: Value = serde_json::from_slice(&line).unwrap();
        v["body"] = Value::String("eA==".into());
        v["body_encoding"] = Value::String("base64".into());
        v["export_source"] = Value::String("delayed".into());
        v["due_timestamp"] = Value::from(123);
        let back = read_line(&serde_json::to_vec(&v).unwrap()).unwrap();
        assert_eq!(back.message.body, b"x");
        assert_eq!(
            back.extra.get("export_source"),
            Some(&Value::String("delayed".into()))
        );
        assert_eq!(back.extra.get("due_timestamp"), Some(&Value::from(123)));
        assert_eq!(back.extra.len(), 2);
        assert!(matches!(read_line(b"[1]"), Err(LineError::NotJson(_))));
        assert!(matches!(
            read_line(br#"{"type":"message"}"#),
            Err(LineError::Field { .. })
        ));
        assert_eq!(
            line_type(br#"{"type":"summary","command":"export"}"#).as_deref(),
            Some("summary")
        );
    }
}
