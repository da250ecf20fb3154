//! The body of `SEND_BATCH_MESSAGE` (320): the batch's messages one after another, each as
//! `MessageDecoder.encodeMessage` writes it (`MessageBatch.encode` → `encodeMessages`):
//!
//! ```text
//! i32 TOTALSIZE (this message, these 4 bytes included)
//! i32 MAGICCODE = 0
//! i32 BODYCRC   = 0      (the broker computes it)
//! i32 FLAG               (the message's own flag; the broker stores this one, not header `h`)
//! i32 BODYLEN, BODY
//! i16 PROPLEN, PROPERTIES (messageProperties2String: `k\x01v\x02...`, no trailing `\x02` in 4.9)
//! ```
//!
//! Topic, queue, sysflag, born timestamp and reconsume times come from the request header and
//! are the same for every message. The 4.9.8 broker (`CommitLog.MessageExtBatchEncoder`) stores
//! each message's properties followed by `\x02` (unless they already end with it) and the
//! header's properties (`i`, plus `CLUSTER`).

/// Bytes of one message besides its body and properties.
pub const FIXED_LEN: usize = 4 + 4 + 4 + 4 + 4 + 2;

/// Longest properties string of one message (`Short.MAX_VALUE`).
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;

/// One message of a batch, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchItem<'a> {
    pub flag: i32,
    pub body: &'a [u8],
    /// The properties string's bytes.
    pub properties: &'a [u8],
}

/// Why messages cannot be encoded as a batch, or a batch body cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Java throws "Properties size of message exceeded".
    #[error("message {index} of the batch: properties of {len} bytes exceed {MAX_PROPERTIES_LEN}")]
    PropertiesTooLong { index: usize, len: usize },
    /// The message does not fit the i32 TOTALSIZE.
    #[error("message {index} of the batch: {len} bytes do not fit an i32 size")]
    TooLarge { index: usize, len: usize },
    /// The body ends inside a message.
    #[error("batch body truncated in {field} at byte {offset}: needs {need} bytes, {have} left")]
    Truncated {
        field: &'static str,
        offset: usize,
        need: usize,
        have: usize,
    },
    /// A length field is negative.
    #[error("batch body: {field} at byte {offset} is negative ({value})")]
    Negative {
        field: &'static str,
        offset: usize,
        value: i32,
    },
    /// TOTALSIZE disagrees with the lengths inside the message.
    #[error("batch body: TOTALSIZE {total} at byte {offset}, but the message's fields take {actual} bytes")]
    SizeMismatch {
        offset: usize,
        total: i32,
        actual: usize,
    },
}

/// TOTALSIZE of one message.
pub fn item_len(body_len: usize, properties_len: usize) -> usize {
    FIXED_LEN + body_len + properties_len
}

/// Appends one message to a batch body.
pub fn encode_item_into(
    out: &mut Vec<u8>,
    index: usize,
    item: &BatchItem<'_>,
) -> Result<(), BatchError> {
    let props = item.properties.len();
    if props > MAX_PROPERTIES_LEN {
        return Err(BatchError::PropertiesTooLong { index, len: props });
    }
    let len = item_len(item.body.len(), props);
    let total = i32::try_from(len).map_err(|_| BatchError::TooLarge { index, len })?;
    out.reserve(len);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&item.flag.to_be_bytes());
    out.extend_from_slice(&(item.body.len() as i32).to_be_bytes());
    out.extend_from_slice(item.body);
    out.extend_from_slice(&(props as i16).to_be_bytes());
    out.extend_from_slice(item.properties);
    Ok(())
}

/// The whole body of a batch, allocated once at its final size.
pub fn encode<'a>(items: &[BatchItem<'a>]) -> Result<Vec<u8>, BatchError> {
    let size = items
        .iter()
        .map(|i| item_len(i.body.len(), i.properties.len()))
        .fold(0usize, usize::saturating_add);
    let mut out = Vec::with_capacity(size);
    for (index, item) in items.iter().enumerate() {
        encode_item_into(&mut out, index, item)?;
    }
    Ok(out)
}

fn take<'a>(
    buf: &'a [u8],
    at: usize,
    need: usize,
    field: &'static str,
) -> Result<&'a [u8], BatchError> {
    buf.get(at..at.saturating_add(need))
        .filter(|s| s.len() == need)
        .ok_or(BatchError::Truncated {
            field,
            offset: at,
            need,
            have: buf.len().saturating_sub(at),
        })
}

fn int_at(buf: &[u8], at: usize, field: &'static str) -> Result<i32, BatchError> {
    let b = take(buf, at, 4, field)?;
    Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn len_at(buf: &[u8], at: usize, field: &'static str) -> Result<usize, BatchError> {
    let value = int_at(buf, at, field)?;
    usize::try_from(value).map_err(|_| BatchError::Negative {
        field,
        offset: at,
        value,
    })
}

/// Reads a batch body back into its messages (what a broker does with it), checking every
/// length against the bytes there.
pub fn decode(body: &[u8]) -> Result<Vec<BatchItem<'_>>, BatchError> {
    let mut items = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let start = at;
        let total = int_at(body, at, "TOTALSIZE")?;
        let flag = int_at(body, at + 12, "FLAG")?;
        let body_len = len_at(body, at + 16, "BODYLEN")?;
        let msg_body = take(body, at + 20, body_len, "BODY")?;
        at += 20 + body_len;
        let b = take(body, at, 2, "PROPLEN")?;
        let props_len = i16::from_be_bytes([b[0], b[1]]);
        let props_len = usize::try_from(props_len).map_err(|_| BatchError::Negative {
            field: "PROPLEN",
            offset: at,
            value: i32::from(props_len),
        })?;
        let properties = take(body, at + 2, props_len, "PROPERTIES")?;
        at += 2 + props_len;
        if usize::try_from(total).ok() != Some(at - start) {
            return Err(BatchError::SizeMismatch {
                offset: start,
                total,
                actual: at - start,
            });
        }
        items.push(BatchItem {
            flag,
            body: msg_body,
            properties,
        });
    }
    Ok(items)
}
