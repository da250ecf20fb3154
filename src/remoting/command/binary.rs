//! The binary header form (`RocketMQSerializable`, serialize type 1).
//!
//! ```text
//! i16 code | u8 language | i16 version | i32 opaque | i32 flag
//! i32 remark length | remark UTF-8
//! i32 extFields length | { i16 key length, key UTF-8, i32 value length, value UTF-8 }*
//! ```
//!
//! Java writes an absent or empty remark as length 0 and reads length 0 back as `null`, so
//! `Some("")` comes back as `None`. It writes `code` and `version` as `short`, silently cutting
//! larger values; [`encode`] refuses them instead. Decoding checks every length against the
//! bytes left and names the field and its byte offset in the header; it rejects what Java only
//! tolerates by accident (negative lengths, which Java reads as "none" for the remark and the map
//! and as an exception inside the map, and bytes after the map, which Java ignores). A key may
//! repeat (Java writes a flattened custom header next to the same keys in the map); the last
//! value wins.
//!
//! Java 4.9 reads an empty extFields value as `""`; the later Netty-buffer codec (5.x) reads it
//! as absent. Both are accepted by this reader as `""`.

use super::{ExtFields, Language, RemotingCommand, MAX_EXT_FIELDS};
use crate::remoting::frame::SerializeType;
use crate::remoting::HeaderError;

/// Bytes before the remark: code, language, version, opaque, flag.
const FIXED: usize = 2 + 1 + 2 + 4 + 4;

fn fit_i16(field: &'static str, value: i32) -> Result<i16, HeaderError> {
    i16::try_from(value).map_err(|_| HeaderError::DoesNotFit {
        field: field.to_string(),
        value: i64::from(value),
        bits: 16,
    })
}

/// The header bytes of `cmd` in binary form.
pub fn encode(cmd: &RemotingCommand) -> Result<Vec<u8>, HeaderError> {
    let code = fit_i16("code", cmd.code)?;
    let version = fit_i16("version", cmd.version)?;
    let remark = cmd.remark.as_deref().unwrap_or_default().as_bytes();
    let mut ext = Vec::new();
    for (k, v) in cmd.ext_fields.iter() {
        let key_len = i16::try_from(k.len()).map_err(|_| HeaderError::DoesNotFit {
            field: format!("extFields key {k:?} length"),
            value: k.len() as i64,
            bits: 16,
        })?;
        let val_len = i32::try_from(v.len()).map_err(|_| HeaderError::DoesNotFit {
            field: format!("extFields.{k} length"),
            value: v.len() as i64,
            bits: 32,
        })?;
        ext.extend_from_slice(&key_len.to_be_bytes());
        ext.extend_from_slice(k.as_bytes());
        ext.extend_from_slice(&val_len.to_be_bytes());
        ext.extend_from_slice(v.as_bytes());
    }
    let len32 = |field: &'static str, n: usize| {
        i32::try_from(n).map_err(|_| HeaderError::DoesNotFit {
            field: field.to_string(),
            value: n as i64,
            bits: 32,
        })
    };
    let remark_len = len32("remark length", remark.len())?;
    let ext_len = len32("extFields length", ext.len())?;
    let mut out = Vec::with_capacity(FIXED + 8 + remark.len() + ext.len());
    out.extend_from_slice(&code.to_be_bytes());
    out.push(cmd.language.code());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&cmd.opaque.to_be_bytes());
    out.extend_from_slice(&cmd.flag.to_be_bytes());
    out.extend_from_slice(&remark_len.to_be_bytes());
    out.extend_from_slice(remark);
    out.extend_from_slice(&ext_len.to_be_bytes());
    out.extend_from_slice(&ext);
    Ok(out)
}

/// A bounded reader over the header bytes that names what it reads.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, field: &str, need: usize) -> Result<&'a [u8], HeaderError> {
        let have = self.buf.len() - self.pos;
        if need > have {
            return Err(HeaderError::Truncated {
                field: field.to_string(),
                offset: self.pos,
                need,
                have,
            });
        }
        let out = &self.buf[self.pos..self.pos + need];
        self.pos += need;
        Ok(out)
    }

    fn u8(&mut self, field: &str) -> Result<u8, HeaderError> {
        Ok(self.take(field, 1)?[0])
    }

    fn i16(&mut self, field: &str) -> Result<i16, HeaderError> {
        let b = self.take(field, 2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, field: &str) -> Result<i32, HeaderError> {
        let b = self.take(field, 4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A length word that must not be negative; returns it with its offset.
    fn len(&mut self, field: &str, short: bool) -> Result<(usize, usize), HeaderError> {
        let offset = self.pos;
        let len = if short {
            i32::from(self.i16(field)?)
        } else {
            self.i32(field)?
        };
        usize::try_from(len)
            .map(|n| (n, offset))
            .map_err(|_| HeaderError::NegativeLength {
                field: field.to_string(),
                offset,
                len,
            })
    }

    fn utf8(&mut self, field: &str, len: usize) -> Result<String, HeaderError> {
        let offset = self.pos;
        let bytes = self.take(field, len)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| HeaderError::InvalidUtf8 {
            field: field.to_string(),
            offset: offset + e.utf8_error().valid_up_to(),
        })
    }
}

/// Reads a binary-form header; the whole slice must be the header.
pub fn decode(header: &[u8]) -> Result<RemotingCommand, HeaderError> {
    let mut r = Reader {
        buf: header,
        pos: 0,
    };
    let code = i32::from(r.i16("code")?);
    let language = Language::from_code(r.u8("language")?);
    let version = i32::from(r.i16("version")?);
    let opaque = r.i32("opaque")?;
    let flag = r.i32("flag")?;
    let (remark_len, _) = r.len("remark length", false)?;
    let remark = match remark_len {
        0 => None,
        n => Some(r.utf8("remark", n)?),
    };
    let (ext_len, _) = r.len("extFields length", false)?;
    let ext_bytes = r.take("extFields", ext_len)?;
    let ext_start = r.pos - ext_len;
    if r.pos < header.len() {
        return Err(HeaderError::TrailingBytes {
            offset: r.pos,
            count: header.len() - r.pos,
        });
    }
    // Entries are read from the map's own slice so that no entry runs past the map's length;
    // offsets stay those of the whole header.
    let mut m = Reader {
        buf: &header[..ext_start + ext_bytes.len()],
        pos: ext_start,
    };
    let mut entries = Vec::new();
    while m.pos < m.buf.len() {
        if entries.len() == MAX_EXT_FIELDS {
            return Err(HeaderError::TooManyFields {
                offset: m.pos,
                max: MAX_EXT_FIELDS,
            });
        }
        let (key_len, _) = m.len("extFields key length", true)?;
        let key = m.utf8("extFields key", key_len)?;
        let value_field = format!("extFields.{key}");
        let (val_len, _) = m.len(&format!("{value_field} length"), false)?;
        let value = m.utf8(&value_field, val_len)?;
        entries.push((key, value));
    }
    let ext_fields = ExtFields::from_entries(entries);
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        serialize_type: SerializeType::RocketMq,
    })
}
