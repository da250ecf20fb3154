//! A JSON model, a lenient reader and a byte-exact writer for the JSON dialect fastjson 1.x writes.
//!
//! fastjson writes map entries with integer keys bare (`{0:12,1:34}`), indents with TABs and puts
//! no newline between integer-keyed entries (FORMAT.md 9.2). [`parse`] accepts strict JSON plus
//! that form; [`to_fastjson_pretty`] and [`to_fastjson_compact`] reproduce fastjson's output.
//!
//! The reader keeps numbers as their raw text and object entries in file order, so parsing a file
//! fastjson wrote and writing it back gives the same bytes. It is built with nom; every error names
//! the byte offset (in the buffer given, BOM included) and what was expected there. Nesting deeper
//! than [`MAX_DEPTH`] is an error, not a stack overflow.

use nom::bytes::complete::{tag, take_while, take_while_m_n};
use nom::character::complete::{char as nom_char, digit1, multispace0, one_of};
use nom::combinator::{opt, recognize};
use nom::sequence::{pair, tuple};
use nom::{Err as NomErr, IResult};

use crate::format::error::{ErrorKind, ParseError};

/// Deepest nesting of objects and arrays [`parse`] accepts.
pub const MAX_DEPTH: usize = 256;

/// A JSON value as fastjson writes it. Objects keep their entries in file order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JsonValue {
    Null,
    Bool(bool),
    /// The number's text exactly as written (`-12`, `1.5E3`).
    Number(String),
    String(String),
    Array(Vec<JsonValue>),
    Object(Vec<(JsonKey, JsonValue)>),
}

/// An object key: quoted keys are `Str`, bare integer keys (fastjson's `Map<Integer, _>`) are
/// `Int`, objects (a `Map` keyed by a bean, as the client's `offsets.json` by `MessageQueue`) are
/// `Bean`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JsonKey {
    Int(i64),
    Str(String),
    Bean(Vec<(JsonKey, JsonValue)>),
}

impl JsonKey {
    /// The key as Java would name it: the string itself, or the integer in decimal.
    pub fn name(&self) -> std::borrow::Cow<'_, str> {
        match self {
            JsonKey::Int(n) => std::borrow::Cow::Owned(n.to_string()),
            JsonKey::Str(s) => std::borrow::Cow::Borrowed(s),
            JsonKey::Bean(fields) => {
                std::borrow::Cow::Owned(to_fastjson_compact(&JsonValue::Object(fields.clone())))
            }
        }
    }
}

impl From<&str> for JsonKey {
    fn from(s: &str) -> Self {
        JsonKey::Str(s.to_string())
    }
}

impl From<String> for JsonKey {
    fn from(s: String) -> Self {
        JsonKey::Str(s)
    }
}

impl From<i64> for JsonKey {
    fn from(n: i64) -> Self {
        JsonKey::Int(n)
    }
}

impl JsonValue {
    /// A number value from an integer.
    pub fn int(n: impl Into<i64>) -> Self {
        JsonValue::Number(n.into().to_string())
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Self {
        JsonValue::String(s.into())
    }

    /// The value of the last entry named `key` (fastjson lets a repeated key win), if an object.
    pub fn get(&self, key: &str) -> Option<&JsonValue> {
        match self {
            JsonValue::Object(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| matches!(k, JsonKey::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The number as an i64 if it is an integer in Java `long` range.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            JsonValue::Number(raw) => crate::format::java::parse_long(raw),
            _ => None,
        }
    }

    /// The string content, if a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsonValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// A short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            JsonValue::Null => "null",
            JsonValue::Bool(_) => "a boolean",
            JsonValue::Number(_) => "a number",
            JsonValue::String(_) => "a string",
            JsonValue::Array(_) => "an array",
            JsonValue::Object(_) => "an object",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reader: a tree with byte offsets (used by the typed views), converted to `JsonValue` for `parse`.

/// A parsed value with the byte offset of its first character.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub offset: u64,
    pub kind: NodeKind,
}

#[derive(Debug, Clone)]
pub(crate) enum NodeKind {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Node>),
    Object(Vec<NodeEntry>),
}

/// One object entry with the offset of its key.
#[derive(Debug, Clone)]
pub(crate) struct NodeEntry {
    pub key_offset: u64,
    pub key: JsonKey,
    pub value: Node,
}

impl Node {
    pub fn into_value(self) -> JsonValue {
        match self.kind {
            NodeKind::Null => JsonValue::Null,
            NodeKind::Bool(b) => JsonValue::Bool(b),
            NodeKind::Number(n) => JsonValue::Number(n),
            NodeKind::String(s) => JsonValue::String(s),
            NodeKind::Array(items) => {
                JsonValue::Array(items.into_iter().map(Node::into_value).collect())
            }
            NodeKind::Object(entries) => JsonValue::Object(
                entries
                    .into_iter()
                    .map(|e| (e.key, e.value.into_value()))
                    .collect(),
            ),
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self.kind {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "a boolean",
            NodeKind::Number(_) => "a number",
            NodeKind::String(_) => "a string",
            NodeKind::Array(_) => "an array",
            NodeKind::Object(_) => "an object",
        }
    }
}

/// What went wrong at `rest` (the unparsed input at the failure point).
#[derive(Debug)]
struct JErr<'a> {
    rest: &'a [u8],
    problem: Problem,
}

#[derive(Debug)]
enum Problem {
    /// The named thing was expected at this point.
    Expected(&'static str),
    /// The text here is well-formed but not acceptable.
    Invalid(&'static str, String),
}

impl<'a> nom::error::ParseError<&'a [u8]> for JErr<'a> {
    fn from_error_kind(input: &'a [u8], _kind: nom::error::ErrorKind) -> Self {
        JErr {
            rest: input,
            problem: Problem::Expected("valid JSON"),
        }
    }

    fn append(_input: &'a [u8], _kind: nom::error::ErrorKind, other: Self) -> Self {
        other
    }
}

type PResult<'a, T> = IResult<&'a [u8], T, JErr<'a>>;

fn fail<'a, T>(rest: &'a [u8], what: &'static str) -> PResult<'a, T> {
    Err(NomErr::Failure(JErr {
        rest,
        problem: Problem::Expected(what),
    }))
}

fn invalid<'a, T>(rest: &'a [u8], what: &'static str, detail: String) -> PResult<'a, T> {
    Err(NomErr::Failure(JErr {
        rest,
        problem: Problem::Invalid(what, detail),
    }))
}

/// Run a nom token parser; any error becomes "expected `what`" at the starting point.
fn token<'a, O>(
    i: &'a [u8],
    what: &'static str,
    mut p: impl FnMut(&'a [u8]) -> IResult<&'a [u8], O, JErr<'a>>,
) -> PResult<'a, O> {
    match p(i) {
        Ok(ok) => Ok(ok),
        Err(_) => fail(i, what),
    }
}

/// JSON whitespace: space, TAB, CR, LF.
fn ws(i: &[u8]) -> &[u8] {
    match multispace0::<&[u8], JErr<'_>>(i) {
        Ok((rest, _)) => rest,
        Err(_) => i,
    }
}

/// Parses the whole buffer: optional UTF-8 BOM, one value, optional whitespace, end of input.
pub(crate) fn parse_node(text: &[u8]) -> Result<Node, ParseError> {
    let total = text.len();
    let body = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    let at = |rest: &[u8]| total.saturating_sub(rest.len()) as u64;
    let result = value(ws(body), total, 0).and_then(|(rest, node)| {
        let rest = ws(rest);
        if rest.is_empty() {
            Ok((rest, node))
        } else {
            fail(rest, "end of input after the JSON value")
        }
    });
    match result {
        Ok((_, node)) => Ok(node),
        Err(NomErr::Error(e)) | Err(NomErr::Failure(e)) => {
            let offset = at(e.rest);
            let kind = match e.problem {
                Problem::Expected(what) => match e.rest.first() {
                    None => ErrorKind::Truncated {
                        what,
                        needed: 1,
                        left: 0,
                    },
                    Some(_) => ErrorKind::Unexpected {
                        what: "JSON syntax",
                        expected: what.to_string(),
                        found: describe(e.rest),
                    },
                },
                Problem::Invalid(what, detail) => ErrorKind::Invalid { what, detail },
            };
            Err(ParseError::new(offset, kind))
        }
        Err(NomErr::Incomplete(_)) => Err(ParseError::new(
            total as u64,
            ErrorKind::Truncated {
                what: "JSON value",
                needed: 1,
                left: 0,
            },
        )),
    }
}

/// Parses a fastjson or strict JSON document (see the module docs).
pub fn parse(text: &[u8]) -> Result<JsonValue, ParseError> {
    parse_node(text).map(Node::into_value)
}

/// How the bytes at an error look, for the message.
fn describe(rest: &[u8]) -> String {
    let Some(&b) = rest.first() else {
        return "end of input".to_string();
    };
    if b == b' ' || b.is_ascii_graphic() {
        return format!("'{}'", b as char);
    }
    if b >= 0x80 {
        for n in 2..=4 {
            let decoded = rest
                .get(..n)
                .and_then(|head| std::str::from_utf8(head).ok())
                .and_then(|s| s.chars().next());
            if let Some(c) = decoded {
                return format!("'{c}' (byte 0x{b:02x})");
            }
        }
    }
    format!("byte 0x{b:02x}")
}

fn value(i: &[u8], total: usize, depth: usize) -> PResult<'_, Node> {
    let offset = total.saturating_sub(i.len()) as u64;
    let node = |kind| Node { offset, kind };
    match i.first() {
        None => fail(i, "a JSON value"),
        Some(b'{') => {
            let (rest, entries) = object(i, total, depth)?;
            Ok((rest, node(NodeKind::Object(entries))))
        }
        Some(b'[') => {
            let (rest, items) = array(i, total, depth)?;
            Ok((rest, node(NodeKind::Array(items))))
        }
        Some(&q @ (b'"' | b'\'')) => {
            let (rest, s) = quoted(i, q)?;
            Ok((rest, node(NodeKind::String(s))))
        }
        Some(b't') => {
            let (rest, _) = token(i, "true", tag("true"))?;
            Ok((rest, node(NodeKind::Bool(true))))
        }
        Some(b'f') => {
            let (rest, _) = token(i, "false", tag("false"))?;
            Ok((rest, node(NodeKind::Bool(false))))
        }
        Some(b'n') => {
            let (rest, _) = token(i, "null", tag("null"))?;
            Ok((rest, node(NodeKind::Null)))
        }
        Some(b'-' | b'0'..=b'9') => {
            let (rest, raw) = number(i)?;
            Ok((rest, node(NodeKind::Number(raw))))
        }
        Some(_) => fail(i, "a JSON value"),
    }
}

/// `-?digits(.digits)?([eE][+-]?digits)?`, kept as text. Leading zeros are tolerated.
fn number(i: &[u8]) -> PResult<'_, String> {
    let (after_sign, _) = opt(nom_char('-'))(i)?;
    token(after_sign, "digits of a number", digit1)?;
    let (rest, raw) = recognize(tuple((
        opt(nom_char('-')),
        digit1,
        opt(pair(nom_char('.'), digit1)),
        opt(tuple((one_of("eE"), opt(one_of("+-")), digit1))),
    )))(i)?;
    // A fraction or exponent that was started but not completed is an error where digits belong.
    let has_exp = raw.iter().any(|&b| b == b'e' || b == b'E');
    let has_dot = raw.contains(&b'.');
    match rest.first() {
        Some(b'.') if !has_dot && !has_exp => {
            return fail(
                rest.get(1..).unwrap_or_default(),
                "digits after '.' in a number",
            );
        }
        Some(b'e' | b'E') if !has_exp => {
            let after = rest.get(1..).unwrap_or_default();
            let after = after
                .strip_prefix(b"+")
                .or_else(|| after.strip_prefix(b"-"))
                .unwrap_or(after);
            return fail(after, "digits of an exponent");
        }
        _ => {}
    }
    Ok((rest, raw.iter().map(|&b| b as char).collect()))
}

/// The first byte of a key fastjson reads without quotes (its default `AllowUnQuotedFieldNames`):
/// a letter, `_`, `$`, or a byte of a non-ASCII character.
fn identifier_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$' || b >= 0x80
}

/// A key without quotes (`{brokerName:"a"}`): up to the first byte that is not a letter, digit,
/// `_`, `$` or part of a non-ASCII character, as fastjson's `scanSymbolUnQuoted` reads it.
fn unquoted_key(i: &[u8]) -> PResult<'_, String> {
    let (rest, raw) =
        take_while::<_, &[u8], JErr<'_>>(|b| identifier_start(b) || b.is_ascii_digit())(i)?;
    match std::str::from_utf8(raw) {
        Ok(s) => Ok((rest, s.to_string())),
        Err(e) => invalid(
            raw.get(e.valid_up_to()..).unwrap_or_default(),
            "object key",
            "invalid UTF-8 in a key without quotes".to_string(),
        ),
    }
}

/// A bare integer key (`-?digits`) as an i64.
fn int_key(i: &[u8]) -> PResult<'_, i64> {
    let (rest, raw) = token(
        i,
        "an integer key",
        recognize(pair(opt(nom_char('-')), digit1)),
    )?;
    let text: String = raw.iter().map(|&b| b as char).collect();
    match crate::format::java::parse_long(&text) {
        Some(n) => Ok((rest, n)),
        None => invalid(
            i,
            "object key",
            format!("bare integer key {text} does not fit a Java long"),
        ),
    }
}

/// A string in `q` quotes (`"` or, as fastjson's default `AllowSingleQuotes` takes, `'`)
/// starting at `i`.
fn quoted(i: &[u8], q: u8) -> PResult<'_, String> {
    let (mut i, _) = if q == b'"' {
        token(i, "'\"'", nom_char('"'))?
    } else {
        token(i, "'\\''", nom_char('\''))?
    };
    let mut out = String::new();
    loop {
        let (rest, chunk) = take_while::<_, &[u8], JErr<'_>>(|b| b != q && b != b'\\')(i)?;
        match std::str::from_utf8(chunk) {
            Ok(s) => out.push_str(s),
            Err(e) => {
                // `i` starts where `chunk` does; keep the rest of the input for the offset.
                let bad = i.get(e.valid_up_to()..).unwrap_or_default();
                return invalid(
                    bad,
                    "string",
                    format!(
                        "invalid UTF-8 byte 0x{:02x}",
                        bad.first().copied().unwrap_or(0)
                    ),
                );
            }
        }
        match rest.first() {
            None if q == b'"' => return fail(rest, "closing '\"' of a string"),
            None => return fail(rest, "closing '\\'' of a string"),
            Some(&b) if b == q => return Ok((rest.get(1..).unwrap_or_default(), out)),
            Some(_) => {
                let (rest, c) = escape(rest)?;
                out.push(c);
                i = rest;
            }
        }
    }
}

/// One escape sequence starting at the backslash.
fn escape(i: &[u8]) -> PResult<'_, char> {
    let after = i.get(1..).unwrap_or_default();
    let simple = |c: char| Ok((after.get(1..).unwrap_or_default(), c));
    match after.first() {
        None => fail(after, "an escape character after '\\'"),
        Some(b'"') => simple('"'),
        Some(b'\'') => simple('\''),
        Some(b'\\') => simple('\\'),
        Some(b'/') => simple('/'),
        Some(b'b') => simple('\u{8}'),
        Some(b'f') => simple('\u{c}'),
        Some(b'n') => simple('\n'),
        Some(b'r') => simple('\r'),
        Some(b't') => simple('\t'),
        Some(b'u') => {
            let (rest, hi) = hex4(after.get(1..).unwrap_or_default())?;
            if (0xDC00..0xE000).contains(&hi) {
                return invalid(
                    i,
                    "string escape",
                    format!("lone low surrogate \\u{hi:04X}"),
                );
            }
            if !(0xD800..0xDC00).contains(&hi) {
                return match char::from_u32(hi) {
                    Some(c) => Ok((rest, c)),
                    None => invalid(
                        i,
                        "string escape",
                        format!("\\u{hi:04X} is not a character"),
                    ),
                };
            }
            // A high surrogate must be followed by an escaped low surrogate.
            const LOW: &str = "a low surrogate escape \\uDC00-\\uDFFF after a high surrogate";
            let (rest, _) = token(rest, LOW, tag("\\u"))?;
            let low_start = rest;
            let (rest, lo) = hex4(rest)?;
            if !(0xDC00..0xE000).contains(&lo) {
                return fail(low_start, LOW);
            }
            let code = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
            match char::from_u32(code) {
                Some(c) => Ok((rest, c)),
                None => invalid(i, "string escape", format!("bad surrogate pair U+{code:X}")),
            }
        }
        Some(_) => fail(after, "one of \" ' \\ / b f n r t u after '\\'"),
    }
}

/// Four hex digits (after `\u`); returns the UTF-16 code unit.
fn hex4(i: &[u8]) -> PResult<'_, u32> {
    let (rest, hex) = token(
        i,
        "four hex digits after \\u",
        take_while_m_n(4, 4, |b: u8| b.is_ascii_hexdigit()),
    )?;
    let v = hex.iter().fold(0u32, |acc, &b| {
        let d = char::from(b).to_digit(16).unwrap_or(0);
        acc * 16 + d
    });
    Ok((rest, v))
}

fn check_depth<'a>(i: &'a [u8], depth: usize) -> PResult<'a, ()> {
    if depth >= MAX_DEPTH {
        return invalid(
            i,
            "JSON nesting",
            format!("objects and arrays nested deeper than {MAX_DEPTH} levels"),
        );
    }
    Ok((i, ()))
}

fn object(i: &[u8], total: usize, depth: usize) -> PResult<'_, Vec<NodeEntry>> {
    check_depth(i, depth)?;
    let (i, _) = token(i, "'{'", nom_char('{'))?;
    let mut entries = Vec::new();
    let mut i = ws(i);
    if let Some(rest) = i.strip_prefix(b"}") {
        return Ok((rest, entries));
    }
    loop {
        let key_offset = total.saturating_sub(i.len()) as u64;
        let (rest, key) = match i.first() {
            Some(&q @ (b'"' | b'\'')) => {
                let (rest, s) = quoted(i, q)?;
                (rest, JsonKey::Str(s))
            }
            Some(&b) if identifier_start(b) => {
                let (rest, s) = unquoted_key(i)?;
                (rest, JsonKey::Str(s))
            }
            Some(b'-' | b'0'..=b'9') => {
                let (rest, n) = int_key(i)?;
                (rest, JsonKey::Int(n))
            }
            Some(b'{') => {
                let (rest, fields) = object(i, total, depth + 1)?;
                let fields = fields
                    .into_iter()
                    .map(|e| (e.key, e.value.into_value()))
                    .collect();
                (rest, JsonKey::Bean(fields))
            }
            _ if entries.is_empty() => return fail(i, "a key ('\"', a name or an integer) or '}'"),
            _ => return fail(i, "a key ('\"', a name or an integer)"),
        };
        let rest = ws(rest);
        let (rest, _) = token(rest, "':' after an object key", nom_char(':'))?;
        let (rest, value) = value(ws(rest), total, depth + 1)?;
        entries.push(NodeEntry {
            key_offset,
            key,
            value,
        });
        let rest = ws(rest);
        match rest.first() {
            Some(b',') => i = ws(rest.get(1..).unwrap_or_default()),
            Some(b'}') => return Ok((rest.get(1..).unwrap_or_default(), entries)),
            _ => return fail(rest, "',' or '}' after an object entry"),
        }
    }
}

fn array(i: &[u8], total: usize, depth: usize) -> PResult<'_, Vec<Node>> {
    check_depth(i, depth)?;
    let (i, _) = token(i, "'['", nom_char('['))?;
    let mut items = Vec::new();
    let mut i = ws(i);
    if let Some(rest) = i.strip_prefix(b"]") {
        return Ok((rest, items));
    }
    loop {
        let (rest, item) = value(i, total, depth + 1)?;
        items.push(item);
        let rest = ws(rest);
        match rest.first() {
            Some(b',') => i = ws(rest.get(1..).unwrap_or_default()),
            Some(b']') => return Ok((rest.get(1..).unwrap_or_default(), items)),
            _ => return fail(rest, "',' or ']' after an array item"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Writer.

/// fastjson `JSON.toJSONString(obj, true)`: TAB indentation, rules of FORMAT.md 9.2. No newline at
/// the end. Arrays are written on one line, as fastjson writes a `Set`.
pub fn to_fastjson_pretty(v: &JsonValue) -> String {
    let mut out = String::new();
    write_value(&mut out, v, 0, true);
    out
}

/// fastjson `JSON.toJSONString(obj)`: no whitespace at all.
pub fn to_fastjson_compact(v: &JsonValue) -> String {
    let mut out = String::new();
    write_value(&mut out, v, 0, false);
    out
}

fn newline(out: &mut String, level: usize) {
    out.push('\n');
    for _ in 0..level {
        out.push('\t');
    }
}

fn write_value(out: &mut String, v: &JsonValue, level: usize, pretty: bool) {
    match v {
        JsonValue::Null => out.push_str("null"),
        JsonValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        JsonValue::Number(raw) => out.push_str(raw),
        JsonValue::String(s) => write_string(out, s),
        JsonValue::Array(items) => {
            // fastjson's CollectionCodec: one line, items at the current indent level.
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_value(out, item, level, pretty);
            }
            out.push(']');
        }
        JsonValue::Object(entries) => {
            // fastjson's MapSerializer / JavaBeanSerializer: a newline before each string key,
            // none before an integer key; a newline before '}' when not empty.
            out.push('{');
            for (n, (key, value)) in entries.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                match key {
                    JsonKey::Str(s) => {
                        if pretty {
                            newline(out, level + 1);
                        }
                        write_string(out, s);
                    }
                    JsonKey::Int(k) => out.push_str(&k.to_string()),
                    JsonKey::Bean(fields) => {
                        write_value(out, &JsonValue::Object(fields.clone()), level + 1, pretty)
                    }
                }
                out.push(':');
                write_value(out, value, level + 1, pretty);
            }
            if pretty && !entries.is_empty() {
                newline(out, level);
            }
            out.push('}');
        }
    }
}

/// A string in double quotes, escaped as fastjson 1.2.x `SerializeWriter` does by default:
/// `\" \\ \b \t \n \f \r` by name; U+0000-0007, U+000B, U+000E-001F, U+007F-00A0, U+2028 and
/// U+2029 as `\uXXXX` (upper-case hex); everything else (also `/` and non-ASCII) as is.
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{a0}' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            _ => out.push(c),
        }
    }
    out.push('"');
}
