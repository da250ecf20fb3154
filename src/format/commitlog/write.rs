//! Encoding records byte-exactly as the broker's `MessageExtEncoder` does.

use super::{
    sysflag, Host, Message, MessageVersion, BLANK_MAGIC, MAX_PROPERTIES_LEN, NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
};
use crate::format::java::masked_crc32;

/// TOTALSIZE for the given parts (`calMsgLength`, FORMAT.md 2.2).
pub fn record_len(
    version: MessageVersion,
    born_host_len: usize,
    store_host_len: usize,
    body_len: usize,
    topic_len: usize,
    props_len: usize,
) -> usize {
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + born_host_len
        + 8
        + store_host_len
        + 4
        + 8
        + 4
        + body_len
        + version.topic_len_size()
        + topic_len
        + 2
        + props_len
}

/// Why a message cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("topic of {0} bytes does not fit a version 1 record (at most 127)")]
    TopicTooLong(usize),
    #[error("properties of {0} bytes exceed 32767")]
    PropertiesTooLong(usize),
    #[error("record of {0} bytes does not fit an i32 size")]
    TooLarge(usize),
}

fn put_host(out: &mut Vec<u8>, h: &Host) {
    out.extend_from_slice(&h.addr_bytes());
    out.extend_from_slice(&h.port.to_be_bytes());
}

impl Message {
    /// TOTALSIZE of this message once encoded.
    pub fn encoded_len(&self) -> usize {
        record_len(
            self.version,
            self.born_host.encoded_len(),
            self.store_host.encoded_len(),
            self.body.len(),
            self.topic.len(),
            self.properties.len(),
        )
    }

    /// The SYSFLAG as stored: the v6 host bits follow the host address kinds.
    pub fn stored_sys_flag(&self) -> i32 {
        let mut f = self.sys_flag & !(sysflag::BORNHOST_V6 | sysflag::STOREHOST_V6);
        if self.born_host.is_v6() {
            f |= sysflag::BORNHOST_V6;
        }
        if self.store_host.is_v6() {
            f |= sysflag::STOREHOST_V6;
        }
        f
    }

    /// Append the record to `out`: TOTALSIZE and BODYCRC computed, every other field as set
    /// (the writer fills PHYSICALOFFSET and QUEUEOFFSET before calling this).
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let topic = self.topic.as_bytes();
        if self.version == MessageVersion::V1 && topic.len() > i8::MAX as usize {
            return Err(EncodeError::TopicTooLong(topic.len()));
        }
        if topic.len() > i16::MAX as usize {
            return Err(EncodeError::TopicTooLong(topic.len()));
        }
        if self.properties.len() > MAX_PROPERTIES_LEN {
            return Err(EncodeError::PropertiesTooLong(self.properties.len()));
        }
        let len = self.encoded_len();
        let size = i32::try_from(len).map_err(|_| EncodeError::TooLarge(len))?;
        out.reserve(len);
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&self.version.magic().to_be_bytes());
        out.extend_from_slice(&(masked_crc32(&self.body) as i32).to_be_bytes());
        out.extend_from_slice(&self.queue_id.to_be_bytes());
        out.extend_from_slice(&self.flag.to_be_bytes());
        out.extend_from_slice(&self.queue_offset.to_be_bytes());
        out.extend_from_slice(&self.physical_offset.to_be_bytes());
        out.extend_from_slice(&self.stored_sys_flag().to_be_bytes());
        out.extend_from_slice(&self.born_timestamp.to_be_bytes());
        put_host(out, &self.born_host);
        out.extend_from_slice(&self.store_timestamp.to_be_bytes());
        put_host(out, &self.store_host);
        out.extend_from_slice(&self.reconsume_times.to_be_bytes());
        out.extend_from_slice(&self.prepared_transaction_offset.to_be_bytes());
        out.extend_from_slice(&(self.body.len() as i32).to_be_bytes());
        out.extend_from_slice(&self.body);
        match self.version {
            MessageVersion::V1 => out.push(topic.len() as u8),
            MessageVersion::V2 => out.extend_from_slice(&(topic.len() as i16).to_be_bytes()),
        }
        out.extend_from_slice(topic);
        out.extend_from_slice(&(self.properties.len() as i16).to_be_bytes());
        out.extend_from_slice(&self.properties);
        Ok(())
    }

    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut v)?;
        Ok(v)
    }
}

/// The 8-byte blank record that ends a commitlog file: TOTALSIZE = bytes left, BLANK magic.
pub fn blank_record(bytes_left: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&bytes_left.to_be_bytes());
    b[4..].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
    b
}

/// `messageProperties2String`: `name 0x01 value 0x02` per pair, in the given order. With
/// `trailing_separator` false the last 0x02 is dropped (brokers 4.9.1 to 5.1.x).
pub fn encode_properties<K: AsRef<str>, V: AsRef<str>>(
    pairs: &[(K, V)],
    trailing_separator: bool,
) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        out.extend_from_slice(k.as_ref().as_bytes());
        out.push(NAME_VALUE_SEPARATOR);
        out.extend_from_slice(v.as_ref().as_bytes());
        out.push(PROPERTY_SEPARATOR);
    }
    if !trailing_separator && out.last() == Some(&PROPERTY_SEPARATOR) {
        out.pop();
    }
    out
}
