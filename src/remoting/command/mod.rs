//! `RemotingCommand`: the header every frame carries, in its two serialized forms.
//!
//! The fields are those of Java's `RemotingCommand` (code, language, version, opaque, flag,
//! remark, extFields); the serialize type is the frame's, kept so that a response goes out in
//! the form its request came in ([`RemotingCommand::response_to`]). [`json`] is the fastjson
//! form, [`binary`] the `RocketMQSerializable` form.
//!
//! `ext_fields` keeps entries in the order they were read or inserted; a repeated key replaces
//! the value in place (last one wins, as in Java's `HashMap`). A decoded header holds at most
//! [`MAX_EXT_FIELDS`] entries and is built in time linear in its size
//! ([`ExtFields::from_entries`]), so a hostile header costs no more than its bytes.

pub mod binary;
pub mod json;

use std::collections::HashMap;

use super::frame::{FrameCodec, OutFrame, SerializeType};
use super::Error;

/// Flag bit 0 (`RemotingCommand.RPC_TYPE`): this command is a response.
pub const FLAG_RESPONSE: i32 = 1;
/// Flag bit 1 (`RemotingCommand.RPC_ONEWAY`): a request that expects no response.
pub const FLAG_ONEWAY: i32 = 2;

/// Most `extFields` entries a received header may carry. Java clients send at most about twenty
/// (a custom header's fields plus a few extras); a header with more is refused.
pub const MAX_EXT_FIELDS: usize = 1024;

/// `MQVersion.Version.V4_9_8.ordinal()`: what a 4.9.8 broker and name server put in `version`.
pub const VERSION_V4_9_8: i32 = 409;
/// `MQVersion.Version.V4_9_4.ordinal()`: from this client version on the name server answers
/// routes in standard JSON.
pub const VERSION_V4_9_4: i32 = 401;
/// `MQVersion.Version.V3_4_9.ordinal()`: what ali-ons sends.
pub const VERSION_V3_4_9: i32 = 121;

/// The sender's `LanguageCode`. Codes equal the Java enum's ordinals, so fastjson's numeric form
/// and the binary byte agree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Language {
    #[default]
    Java,
    Cpp,
    DotNet,
    Python,
    Delphi,
    Erlang,
    Ruby,
    Other,
    Http,
    Go,
    Php,
    Oms,
    Rust,
    /// A code outside the 4.9 enum (Java decodes it as `null`); kept to answer in kind.
    Unknown(u8),
}

const LANGUAGES: [(Language, &str); 13] = [
    (Language::Java, "JAVA"),
    (Language::Cpp, "CPP"),
    (Language::DotNet, "DOTNET"),
    (Language::Python, "PYTHON"),
    (Language::Delphi, "DELPHI"),
    (Language::Erlang, "ERLANG"),
    (Language::Ruby, "RUBY"),
    (Language::Other, "OTHER"),
    (Language::Http, "HTTP"),
    (Language::Go, "GO"),
    (Language::Php, "PHP"),
    (Language::Oms, "OMS"),
    (Language::Rust, "RUST"),
];

impl Language {
    /// The wire byte (`LanguageCode.getCode()`).
    pub fn code(self) -> u8 {
        match self {
            Language::Unknown(c) => c,
            known => LANGUAGES
                .iter()
                .position(|(l, _)| *l == known)
                .map_or(7, |p| p as u8),
        }
    }

    /// The language for a wire byte; codes past the enum become [`Language::Unknown`].
    pub fn from_code(code: u8) -> Self {
        LANGUAGES
            .get(usize::from(code))
            .map_or(Language::Unknown(code), |(l, _)| *l)
    }

    /// The Java enum name, if the language is one of the enum's.
    pub fn name(self) -> Option<&'static str> {
        LANGUAGES.iter().find(|(l, _)| *l == self).map(|(_, n)| *n)
    }

    /// The language for a Java enum name (exact, upper case as Java writes it).
    pub fn from_name(name: &str) -> Option<Self> {
        LANGUAGES.iter().find(|(_, n)| *n == name).map(|(l, _)| *l)
    }
}

/// The `extFields` map: string keys and values in insertion order, one entry per key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtFields(Vec<(String, String)>);

impl ExtFields {
    pub fn new() -> Self {
        ExtFields(Vec::new())
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key`; an existing entry keeps its place and takes the new value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// The map of decoded entries, in linear time: a repeated key keeps its first place and
    /// takes its last value, as [`ExtFields::insert`] one by one would.
    pub fn from_entries(entries: Vec<(String, String)>) -> Self {
        let mut place: HashMap<String, usize> = HashMap::with_capacity(entries.len());
        let mut out: Vec<(String, String)> = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            match place.get(&k) {
                Some(&i) => out[i].1 = v,
                None => {
                    place.insert(k.clone(), out.len());
                    out.push((k, v));
                }
            }
        }
        ExtFields(out)
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let pos = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(pos).1)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        ExtFields::from_entries(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

/// One command header (Java `RemotingCommand` without its body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    /// Request code ([`super::codes`]) in a request, response code in a response.
    pub code: i32,
    pub language: Language,
    /// The sender's `MQVersion` ordinal.
    pub version: i32,
    /// Request id, echoed by the response.
    pub opaque: i32,
    /// [`FLAG_RESPONSE`], [`FLAG_ONEWAY`].
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
    /// The form the header travels in.
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A request as a 4.9.8 Java peer writes it: language JAVA, version 409, JSON.
    pub fn request(code: i32, opaque: i32) -> Self {
        RemotingCommand {
            code,
            language: Language::Java,
            version: VERSION_V4_9_8,
            opaque,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// The response to `request`: same opaque and serialize type, response flag set, language
    /// JAVA and version 409 (Java clients read a heartbeat response's version as the broker's).
    pub fn response_to(request: &RemotingCommand, code: i32, remark: Option<String>) -> Self {
        RemotingCommand {
            code,
            language: Language::Java,
            version: VERSION_V4_9_8,
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            remark,
            ext_fields: ExtFields::new(),
            serialize_type: request.serialize_type,
        }
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn mark_response(&mut self) {
        self.flag |= FLAG_RESPONSE;
    }

    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// The header bytes in this command's serialize type.
    pub fn encode_header(&self) -> Result<Vec<u8>, super::HeaderError> {
        match self.serialize_type {
            SerializeType::Json => Ok(json::encode(self).into_bytes()),
            SerializeType::RocketMq => binary::encode(self),
        }
    }

    /// Reads a header in the given form.
    pub fn decode_header(
        serialize_type: SerializeType,
        header: &[u8],
    ) -> Result<Self, super::HeaderError> {
        match serialize_type {
            SerializeType::Json => json::decode(header),
            SerializeType::RocketMq => binary::decode(header),
        }
    }

    /// Appends the whole frame (header and `body`) to `out`, with the default size limit.
    pub fn encode(&self, body: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        let header = self.encode_header()?;
        FrameCodec::default().encode_into(out, self.serialize_type, &header, body)?;
        Ok(())
    }

    /// The frame with its body left in place, for vectored writes from a map.
    pub fn encode_split<'b>(&self, body: &'b [u8]) -> Result<OutFrame<'b>, Error> {
        let header = self.encode_header()?;
        Ok(FrameCodec::default().encode_split(self.serialize_type, &header, body)?)
    }
}
