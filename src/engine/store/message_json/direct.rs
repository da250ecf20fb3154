//! The JSON line of a message written straight from the record in place: no owned field, no map,
//! no second parse. It writes byte for byte what serializing [`MessageJson`] writes; that is the
//! plain version, and the tests below compare the two on generated records. A record whose
//! properties are not UTF-8 goes through [`MessageJson`] (their lossy names could collide).

use std::borrow::Cow;
use std::net::IpAddr;
use std::path::Path;

use base64::Engine as _;

use super::escape::string;
use super::{BodyMode, MessageJson};
use crate::format::commitlog::{prop, MessageRef};
use crate::format::compression::Compression;

/// A commitlog file's path and its JSON string, made once for all the records of the file.
pub struct RecordFile<'p> {
    path: &'p Path,
    json: Vec<u8>,
}

impl<'p> RecordFile<'p> {
    pub fn new(path: &'p Path) -> Self {
        let mut json = Vec::new();
        string(&mut json, &path.to_string_lossy());
        RecordFile { path, json }
    }

    pub fn path(&self) -> &'p Path {
        self.path
    }
}

/// Append the JSON line of `m`, found in `file`, and its newline to `out`.
pub fn write_json_line(
    out: &mut Vec<u8>,
    m: &MessageRef<'_>,
    file: &RecordFile<'_>,
    mode: BodyMode,
) -> serde_json::Result<()> {
    let Ok(properties) = simdutf8::basic::from_utf8(m.properties.0) else {
        serde_json::to_writer(&mut *out, &MessageJson::new(m, file.path, mode))?;
        out.push(b'\n');
        return Ok(());
    };
    let pairs = last_values(properties);
    let value_of = |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(b"{\"type\":\"message\",\"file\":");
    out.extend_from_slice(&file.json);
    field(out, "commitlog_offset");
    out.extend_from_slice(n.format(m.position).as_bytes());
    for (key, value) in [
        ("size", m.total_size.into()),
        ("version", m.version.number().into()),
        ("body_crc", m.body_crc.into()),
        ("queue_id", m.queue_id.into()),
        ("flag", m.flag.into()),
        ("queue_offset", m.queue_offset),
        ("sys_flag", m.sys_flag.into()),
        ("born_timestamp", m.born_timestamp),
    ] {
        field(out, key);
        out.extend_from_slice(n.format(value).as_bytes());
    }
    field(out, "born_host");
    host(out, &m.born_host);
    field(out, "store_timestamp");
    out.extend_from_slice(n.format(m.store_timestamp).as_bytes());
    field(out, "store_host");
    host(out, &m.store_host);
    field(out, "reconsume_times");
    out.extend_from_slice(n.format(m.reconsume_times).as_bytes());
    field(out, "prepared_transaction_offset");
    out.extend_from_slice(n.format(m.prepared_transaction_offset).as_bytes());
    field(out, "topic");
    string(out, &m.topic);
    out.extend_from_slice(b",\"properties\":{");
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, k);
        out.push(b':');
        string(out, v);
    }
    out.push(b'}');
    field(out, "tags");
    string_or_null(out, value_of(prop::TAGS));
    out.extend_from_slice(b",\"keys\":[");
    let keys = value_of(prop::KEYS).unwrap_or("");
    for (i, k) in keys.split(' ').filter(|k| !k.is_empty()).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, k);
    }
    out.push(b']');
    field(out, "uniq_key");
    string_or_null(out, value_of(prop::UNIQ_KEY));
    field(out, "msg_id");
    msg_id(out, m);
    field(out, "body_len");
    out.extend_from_slice(n.format(m.body.len()).as_bytes());
    field(out, "body");
    let (stored, decompressed, error) = match (m.is_compressed(), mode) {
        (_, BodyMode::None) | (false, _) => (Cow::Borrowed(m.body), None, None),
        (true, _) => match m.decompressed_body() {
            Ok(b) => (b, Compression::of(m.sys_flag), None),
            Err(e) => (Cow::Borrowed(m.body), None, Some(e.to_string())),
        },
    };
    let encoding = body(out, &stored, mode);
    out.extend_from_slice(b",\"body_encoding\":\"");
    out.extend_from_slice(encoding.as_bytes());
    out.extend_from_slice(b"\",\"body_decompressed_from\":");
    out.extend_from_slice(match decompressed {
        None => b"null",
        Some(Compression::Zlib) => b"\"zlib\"",
        Some(Compression::Lz4) => b"\"lz4\"",
        Some(Compression::Zstd) => b"\"zstd\"",
    });
    if let Some(e) = error {
        field(out, "body_error");
        string(out, &e);
    }
    out.extend_from_slice(b"}\n");
    Ok(())
}

/// The property pairs in file order, a repeated name once, at its first place, with its last
/// value: what inserting them into `MessageJson`'s ordered map leaves.
fn last_values(properties: &str) -> Vec<(&str, &str)> {
    let mut pairs: Vec<(&str, &str)> = Vec::with_capacity(8);
    let mut index: Option<std::collections::HashMap<&str, usize>> = None;
    // as `Properties::iter_raw` splits (the block is UTF-8, so each part is too)
    let parts = properties.split('\u{2}').filter_map(|part| {
        let (k, v) = part.split_once('\u{1}')?;
        (!k.is_empty() && !v.is_empty()).then_some((k, v))
    });
    for (k, v) in parts {
        // a linear search while there are few pairs, a map beyond (no quadratic worst case)
        let found = match &mut index {
            Some(map) => map.get(k).copied(),
            None => pairs.iter().position(|(name, _)| *name == k),
        };
        match found {
            Some(i) => pairs[i].1 = v,
            None => {
                if let Some(map) = &mut index {
                    map.insert(k, pairs.len());
                }
                pairs.push((k, v));
                if index.is_none() && pairs.len() > 16 {
                    index = Some(
                        pairs
                            .iter()
                            .enumerate()
                            .map(|(i, (k, _))| (*k, i))
                            .collect(),
                    );
                }
            }
        }
    }
    pairs
}

/// `,"key":`
fn field(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

fn string_or_null(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

const LOWER_HEX: &[u8; 16] = b"0123456789abcdef";
const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";

/// A host as `Host`'s `Display` writes it, quoted: `a.b.c.d:port` by hand, IPv6 through
/// `Display`.
fn host(out: &mut Vec<u8>, h: &crate::format::commitlog::Host) {
    out.push(b'"');
    match h.ip {
        IpAddr::V4(a) => {
            let mut n = itoa::Buffer::new();
            for (i, octet) in a.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(n.format(octet).as_bytes());
            }
            out.push(b':');
            out.extend_from_slice(n.format(h.port).as_bytes());
        }
        IpAddr::V6(_) => {
            use std::io::Write as _;
            let _ = write!(out, "{h}");
        }
    }
    out.push(b'"');
}

/// The offset message id, quoted: store host address, port and PHYSICALOFFSET in uppercase hex.
fn msg_id(out: &mut Vec<u8>, m: &MessageRef<'_>) {
    out.push(b'"');
    let mut hex = |bytes: &[u8]| {
        for b in bytes {
            out.extend_from_slice(&[UPPER_HEX[(b >> 4) as usize], UPPER_HEX[(b & 15) as usize]]);
        }
    };
    match m.store_host.ip {
        IpAddr::V4(a) => hex(&a.octets()),
        IpAddr::V6(a) => hex(&a.octets()),
    }
    hex(&m.store_host.port.to_be_bytes());
    hex(&m.physical_offset.to_be_bytes());
    out.push(b'"');
}

/// The body in `mode` (as [`super::encode_body`] encodes it); returns the encoding's name.
fn body(out: &mut Vec<u8>, body: &[u8], mode: BodyMode) -> &'static str {
    match mode {
        BodyMode::None => {
            out.extend_from_slice(b"null");
            "none"
        }
        BodyMode::Hex => {
            out.push(b'"');
            out.reserve(body.len() * 2 + 1);
            for b in body {
                out.extend_from_slice(&[
                    LOWER_HEX[(b >> 4) as usize],
                    LOWER_HEX[(b & 15) as usize],
                ]);
            }
            out.push(b'"');
            "hex"
        }
        BodyMode::Base64 => base64(out, body),
        BodyMode::Utf8 => {
            string(out, &String::from_utf8_lossy(body));
            "utf8"
        }
        BodyMode::Auto => match simdutf8::basic::from_utf8(body) {
            Ok(text) => {
                string(out, text);
                "utf8"
            }
            Err(_) => base64(out, body),
        },
    }
}

fn base64(out: &mut Vec<u8>, body: &[u8]) -> &'static str {
    out.push(b'"');
    let start = out.len();
    let len = base64::encoded_len(body.len(), true).unwrap_or(0);
    out.resize(start + len, 0);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(body, &mut out[start..])
        .unwrap_or(0);
    out.truncate(start + written);
    out.push(b'"');
    "base64"
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::format::commitlog::read::{parse_record, Record};
    use crate::format::commitlog::{sysflag, Host, Message, MessageVersion};

    fn reference(m: &MessageRef<'_>, file: &std::path::Path, mode: BodyMode) -> Vec<u8> {
        let mut out = serde_json::to_vec(&MessageJson::new(m, file, mode)).unwrap();
        out.push(b'\n');
        out
    }

    fn host() -> impl Strategy<Value = Host> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<i32>()).prop_map(|(a, p)| Host::v4(a, p)),
            (any::<[u8; 16]>(), any::<i32>()).prop_map(|(a, p)| Host::from_v6_bytes(a, p)),
        ]
    }

    /// Property blocks mixing the usual names, repeats, empty parts, bytes to escape and bytes
    /// that are not UTF-8.
    fn properties() -> impl Strategy<Value = Vec<u8>> {
        let part = prop_oneof![
            8 => Just(b"TAGS".to_vec()),
            8 => Just(b"KEYS".to_vec()),
            8 => Just(b"UNIQ_KEY".to_vec()),
            8 => Just(b"k1 k2  k3".to_vec()),
            8 => Just("cn-上海\"\\\n\t\u{7f}\u{1}".as_bytes().to_vec()),
            1 => Just(vec![0xff, 0xfe]),
            8 => Just(vec![]),
            8 => "[a-z]{0,6}".prop_map(String::into_bytes),
        ];
        proptest::collection::vec((part.clone(), part, any::<bool>()), 0..24).prop_map(|pairs| {
            let mut out = Vec::new();
            for (k, v, pair) in pairs {
                out.extend_from_slice(&k);
                if pair {
                    out.push(1);
                }
                out.extend_from_slice(&v);
                out.push(2);
            }
            out
        })
    }

    fn body() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            any::<Vec<u8>>(),
            "\\PC{0,40}".prop_map(String::into_bytes),
            Just(b"{\"json\": \"\\u0001\x01\x1f\"}".to_vec()),
        ]
    }

    fn mode() -> impl Strategy<Value = BodyMode> {
        proptest::sample::select(BodyMode::ALL.iter().map(|(m, _, _)| *m).collect::<Vec<_>>())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        #[test]
        fn the_direct_line_is_the_serialized_message_json(
            topic in "[A-Za-z%_-]{1,12}|\\PC{1,8}",
            hosts in (host(), host()),
            numbers in any::<(i32, i32, i64, i64, i64, i32, i64, i64)>(),
            compressed in 0..10u8,
            properties in properties(),
            body in body(),
            mode in mode(),
            file in "[a-z/]{1,10}|\\PC{1,6}",
        ) {
            let (queue_id, flag, queue_offset, born, stored, reconsume, prepared, phy) = numbers;
            // one in ten bodies zlib-compressed, one in ten flagged compressed but not
            let sys_flag = if compressed < 2 { sysflag::COMPRESSED } else { 0 };
            let body = if compressed == 0 {
                use std::io::Write as _;
                let mut z = flate2::write::ZlibEncoder::new(Vec::new(), Default::default());
                z.write_all(&body).unwrap();
                z.finish().unwrap()
            } else {
                body
            };
            let m = Message {
                topic,
                queue_id,
                flag,
                queue_offset,
                physical_offset: phy,
                sys_flag,
                born_timestamp: born,
                born_host: hosts.0,
                store_timestamp: stored,
                store_host: hosts.1,
                reconsume_times: reconsume,
                prepared_transaction_offset: prepared,
                body,
                properties,
                version: MessageVersion::V2,
            };
            let Ok(raw) = m.encode() else { return Ok(()) };
            let Ok(Record::Message(r)) = parse_record(&raw, 0, phy.unsigned_abs() >> 1, false)
            else {
                panic!("a record just encoded does not parse");
            };
            let file = std::path::Path::new(&file);
            let mut direct = Vec::new();
            write_json_line(&mut direct, &r, &RecordFile::new(file), mode).unwrap();
            let plain = reference(&r, file, mode);
            prop_assert_eq!(String::from_utf8_lossy(&direct), String::from_utf8_lossy(&plain));
        }
    }
}
