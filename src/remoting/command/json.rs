//! The JSON header form (serialize type 0), as fastjson writes and reads `RemotingCommand`.
//!
//! Java writes the bean's properties in alphabetical order and leaves out nulls:
//! `{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,
//! "remark":"…","serializeTypeCurrentRPC":"JSON","version":409}`. [`encode`] writes exactly that
//! (extFields in the map's order, omitted when empty, as Java omits a null map).
//!
//! [`decode`] reads what real clients send. ali-ons writes `code, language, opaque, flag,
//! version, remark, extFields` in that order, no `serializeTypeCurrentRPC`, and puts custom
//! header values into `extFields` as JSON numbers and booleans (`"queueId":0`, `"unitMode":false`);
//! fastjson turns such scalars into their text, and so does this reader, keeping a number's
//! text exactly as written. Keys may come in any order, unknown keys are ignored, a repeated key
//! takes its last value, and a missing field takes Java's default. Like fastjson, integer
//! fields also accept a decimal string and `language` also accepts its ordinal number. A language
//! name outside the enum (Java would read `null`) is read as `OTHER`. Nested objects or arrays
//! inside `extFields` are refused (fastjson would store their JSON text; no client sends them).

use super::{ExtFields, Language, RemotingCommand, MAX_EXT_FIELDS};
use crate::format::config::fastjson::{parse_node, write_string, Node, NodeKind};
use crate::format::java::parse_int;
use crate::remoting::frame::SerializeType;
use crate::remoting::HeaderError;

/// The header text of `cmd` in fastjson's form.
pub fn encode(cmd: &RemotingCommand) -> String {
    let mut out = String::with_capacity(128);
    out.push_str("{\"code\":");
    out.push_str(&cmd.code.to_string());
    if !cmd.ext_fields.is_empty() {
        out.push_str(",\"extFields\":{");
        for (n, (k, v)) in cmd.ext_fields.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            write_string(&mut out, k);
            out.push(':');
            write_string(&mut out, v);
        }
        out.push('}');
    }
    out.push_str(",\"flag\":");
    out.push_str(&cmd.flag.to_string());
    out.push_str(",\"language\":");
    match cmd.language.name() {
        Some(name) => write_string(&mut out, name),
        None => out.push_str(&cmd.language.code().to_string()),
    }
    out.push_str(",\"opaque\":");
    out.push_str(&cmd.opaque.to_string());
    if let Some(remark) = &cmd.remark {
        out.push_str(",\"remark\":");
        write_string(&mut out, remark);
    }
    out.push_str(",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    out.push_str(&cmd.version.to_string());
    out.push('}');
    out
}

fn wrong(field: &str, node: &Node, expected: &'static str) -> HeaderError {
    HeaderError::JsonType {
        field: field.to_string(),
        offset: node.offset as usize,
        expected,
        found: node.type_name(),
    }
}

/// An `int` bean property: a JSON integer in i32 range, or a decimal string; null is absent.
fn int_field(field: &str, node: Option<&Node>, default: i32) -> Result<i32, HeaderError> {
    let Some(node) = node else {
        return Ok(default);
    };
    let text = match &node.kind {
        NodeKind::Null => return Ok(default),
        NodeKind::Number(raw) | NodeKind::String(raw) => raw,
        _ => return Err(wrong(field, node, "an integer")),
    };
    parse_int(text).ok_or_else(|| HeaderError::JsonNumber {
        field: field.to_string(),
        offset: node.offset as usize,
        text: text.clone(),
    })
}

/// A scalar as fastjson stores it into a `String`: strings as is, numbers and booleans as their
/// text; `None` for null.
fn scalar_text(field: &str, node: &Node) -> Result<Option<String>, HeaderError> {
    match &node.kind {
        NodeKind::Null => Ok(None),
        NodeKind::String(s) | NodeKind::Number(s) => Ok(Some(s.clone())),
        NodeKind::Bool(b) => Ok(Some(b.to_string())),
        _ => Err(wrong(field, node, "a string, number or boolean")),
    }
}

/// Reads a JSON-form header.
pub fn decode(header: &[u8]) -> Result<RemotingCommand, HeaderError> {
    let root = parse_node(header).map_err(HeaderError::Json)?;
    let NodeKind::Object(entries) = &root.kind else {
        return Err(wrong("header", &root, "an object"));
    };
    let get = |name: &str| {
        entries
            .iter()
            .rev()
            .find(|e| e.key.name() == name)
            .map(|e| &e.value)
    };
    let language = match get("language") {
        None => Language::Java,
        Some(node) => match &node.kind {
            NodeKind::Null => Language::Java,
            NodeKind::String(name) => Language::from_name(name).unwrap_or(Language::Other),
            NodeKind::Number(raw) => match parse_int(raw).and_then(|n| u8::try_from(n).ok()) {
                Some(code) => Language::from_code(code),
                None => {
                    return Err(HeaderError::JsonNumber {
                        field: "language".to_string(),
                        offset: node.offset as usize,
                        text: raw.clone(),
                    })
                }
            },
            _ => return Err(wrong("language", node, "a language name")),
        },
    };
    let remark = match get("remark") {
        None => None,
        Some(node) => scalar_text("remark", node)?,
    };
    let mut entries = Vec::new();
    if let Some(node) = get("extFields") {
        match &node.kind {
            NodeKind::Null => {}
            NodeKind::Object(ext) => {
                if let Some(e) = ext.get(MAX_EXT_FIELDS) {
                    return Err(HeaderError::TooManyFields {
                        offset: e.key_offset as usize,
                        max: MAX_EXT_FIELDS,
                    });
                }
                for e in ext {
                    let key = e.key.name();
                    let field = format!("extFields.{key}");
                    if let Some(value) = scalar_text(&field, &e.value)? {
                        entries.push((key.into_owned(), value));
                    }
                }
            }
            _ => return Err(wrong("extFields", node, "an object")),
        }
    }
    let ext_fields = ExtFields::from_entries(entries);
    Ok(RemotingCommand {
        code: int_field("code", get("code"), 0)?,
        language,
        version: int_field("version", get("version"), 0)?,
        opaque: int_field("opaque", get("opaque"), 0)?,
        flag: int_field("flag", get("flag"), 0)?,
        remark,
        ext_fields,
        serialize_type: SerializeType::Json,
    })
}
