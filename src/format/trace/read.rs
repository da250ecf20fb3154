//! Decoding trace bodies (`TraceDataEncoder.decoderFromTraceDataString`), record by record.

use std::borrow::Cow;

use super::{
    EndTransactionRecord, MessageType, PubRecord, SubAfterRecord, SubBeforeRecord, TraceRecord,
    TraceType, TransactionState, CONTENT_SPLITOR, FIELD_SPLITOR,
};
use crate::format::java::{parse_int, parse_long};

/// Why one record of a body did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace record {record} (byte {byte} of the body): {kind}")]
pub struct DecodeError {
    /// The record's position in the body, from 0 (empty records counted).
    pub record: usize,
    /// Where the record starts in the body.
    pub byte: usize,
    pub kind: DecodeErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    #[error("unknown trace type {found:?} (expected Pub, SubBefore, SubAfter or EndTransaction)")]
    UnknownType { found: String },
    #[error("{trace_type:?} record has {fields} fields; field {index} ({field}) is missing")]
    MissingField {
        trace_type: TraceType,
        field: &'static str,
        index: usize,
        fields: usize,
    },
    #[error("{trace_type:?} field {index} ({field}): expected {expected}, found {found:?}")]
    BadField {
        trace_type: TraceType,
        field: &'static str,
        index: usize,
        expected: &'static str,
        found: String,
    },
}

/// The records of a body, in order. Empty records (`\u{2}\u{2}`, or nothing after the last
/// separator) are skipped; every other record yields a record or the reason it does not decode.
pub fn records(body: &[u8]) -> Records<'_> {
    Records {
        body,
        pos: 0,
        index: 0,
        glued: None,
    }
}

/// Iterator of [`records`].
pub struct Records<'a> {
    body: &'a [u8],
    pos: usize,
    index: usize,
    /// The rest of a record that followed a glued `CLOUD` SubAfter: (fields, byte of the start).
    glued: Option<(Vec<&'a [u8]>, usize)>,
}

impl Iterator for Records<'_> {
    type Item = Result<TraceRecord, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (fields, byte) = match self.glued.take() {
                Some(g) => g,
                None => {
                    if self.pos >= self.body.len() {
                        return None;
                    }
                    let rest = self.body.get(self.pos..).unwrap_or_default();
                    let len = memchr::memchr(FIELD_SPLITOR, rest).unwrap_or(rest.len());
                    let start = self.pos;
                    let rec = rest.get(..len).unwrap_or_default();
                    self.pos = start + len + 1;
                    (split_fields(rec), start)
                }
            };
            let index = self.index;
            self.index += 1;
            if fields.is_empty() {
                // Java: an empty context splits into [""], whose type matches nothing
                continue;
            }
            let fields = match glued_sub_after(&fields) {
                Some(at) => {
                    let (head, tail) = fields.split_at(at);
                    let skip: usize = head.iter().map(|f| f.len() + 1).sum();
                    self.glued = Some((tail.to_vec(), byte + skip));
                    head.to_vec()
                }
                None => fields,
            };
            let r = decode_fields(&fields).map_err(|kind| DecodeError {
                record: index,
                byte,
                kind,
            });
            return Some(r);
        }
    }
}

/// A record's fields as Java's `split` gives them: trailing empty fields dropped (so an empty
/// record has none).
fn split_fields(rec: &[u8]) -> Vec<&[u8]> {
    let mut f: Vec<&[u8]> = rec.split(|&b| b == CONTENT_SPLITOR).collect();
    while f.last().is_some_and(|l| l.is_empty()) {
        f.pop();
    }
    f
}

/// Where the record glued after a `CLOUD` SubAfter starts (a type name after the context
/// code), if this is one.
fn glued_sub_after(fields: &[&[u8]]) -> Option<usize> {
    const AT: usize = 7;
    let first = fields.first()?;
    if *first != TraceType::SubAfter.name().as_bytes() {
        return None;
    }
    let next = std::str::from_utf8(fields.get(AT)?).ok()?;
    TraceType::from_name(next).map(|_| AT)
}

/// Field access for one record, with the errors that name the field.
struct Fields<'f, 'a> {
    t: TraceType,
    f: &'f [&'a [u8]],
}

impl<'a> Fields<'_, 'a> {
    fn raw(&self, index: usize, field: &'static str) -> Result<Cow<'a, str>, DecodeErrorKind> {
        self.f
            .get(index)
            .map(|b| String::from_utf8_lossy(b))
            .ok_or(DecodeErrorKind::MissingField {
                trace_type: self.t,
                field,
                index,
                fields: self.f.len(),
            })
    }

    /// A text field; missing at the end of the record it is empty (Java's split dropped it).
    fn text(&self, index: usize) -> String {
        self.f
            .get(index)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    fn bad(&self, index: usize, field: &'static str, expected: &'static str) -> DecodeErrorKind {
        DecodeErrorKind::BadField {
            trace_type: self.t,
            field,
            index,
            expected,
            found: self.text(index),
        }
    }

    fn int(&self, index: usize, field: &'static str) -> Result<i32, DecodeErrorKind> {
        let s = self.raw(index, field)?;
        parse_int(&s).ok_or_else(|| self.bad(index, field, "an int (Integer.parseInt)"))
    }

    fn long(&self, index: usize, field: &'static str) -> Result<i64, DecodeErrorKind> {
        let s = self.raw(index, field)?;
        parse_long(&s).ok_or_else(|| self.bad(index, field, "a long (Long.parseLong)"))
    }

    /// `Boolean.parseBoolean`: never fails once the field is there.
    fn boolean(&self, index: usize, field: &'static str) -> Result<bool, DecodeErrorKind> {
        Ok(self.raw(index, field)?.eq_ignore_ascii_case("true"))
    }

    fn msg_type(&self, index: usize) -> Result<MessageType, DecodeErrorKind> {
        let n = self.int(index, "msg type")?;
        MessageType::from_ordinal(n)
            .ok_or_else(|| self.bad(index, "msg type", "a MessageType ordinal 0 to 4"))
    }

    fn len(&self) -> usize {
        self.f.len()
    }
}

fn decode_fields(fields: &[&[u8]]) -> Result<TraceRecord, DecodeErrorKind> {
    let name = fields
        .first()
        .map(|b| String::from_utf8_lossy(b))
        .unwrap_or_default();
    let Some(t) = TraceType::from_name(&name) else {
        return Err(DecodeErrorKind::UnknownType {
            found: name.into_owned(),
        });
    };
    let f = Fields { t, f: fields };
    Ok(match t {
        TraceType::Pub => {
            let n = f.len();
            // 13: success at 12; 14: offset msg id, success; 15+: then the client host
            let (offset_msg_id, success, client_host) = match n {
                0..=12 => (None, true, None),
                13 => (None, f.boolean(12, "success")?, None),
                14 => (Some(f.text(12)), f.boolean(13, "success")?, None),
                _ => (
                    Some(f.text(12)),
                    f.boolean(13, "success")?,
                    Some(f.text(14)),
                ),
            };
            TraceRecord::Pub(PubRecord {
                timestamp: f.long(1, "timestamp")?,
                region_id: f.text(2),
                group: f.text(3),
                topic: f.text(4),
                msg_id: f.text(5),
                tags: f.text(6),
                keys: f.text(7),
                store_host: f.text(8),
                body_length: f.int(9, "body length")?,
                cost_time: f.int(10, "cost time")?,
                msg_type: f.msg_type(11)?,
                offset_msg_id,
                success,
                client_host,
            })
        }
        TraceType::SubBefore => TraceRecord::SubBefore(SubBeforeRecord {
            timestamp: f.long(1, "timestamp")?,
            region_id: f.text(2),
            group: f.text(3),
            request_id: f.text(4),
            msg_id: f.text(5),
            retry_times: f.int(6, "retry times")?,
            keys: f.text(7),
        }),
        TraceType::SubAfter => {
            let n = f.len();
            TraceRecord::SubAfter(SubAfterRecord {
                request_id: f.text(1),
                msg_id: f.text(2),
                cost_time: f.int(3, "cost time")?,
                success: f.boolean(4, "success")?,
                keys: f.text(5),
                context_code: if n >= 7 {
                    Some(f.int(6, "context code")?)
                } else {
                    None
                },
                timestamp: if n >= 8 {
                    Some(f.long(7, "timestamp")?)
                } else {
                    None
                },
                group: (n >= 9).then(|| f.text(8)),
            })
        }
        TraceType::EndTransaction => {
            let state = f.raw(11, "transaction state")?;
            let transaction_state = TransactionState::from_name(&state).ok_or_else(|| {
                f.bad(
                    11,
                    "transaction state",
                    "COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW",
                )
            })?;
            TraceRecord::EndTransaction(EndTransactionRecord {
                timestamp: f.long(1, "timestamp")?,
                region_id: f.text(2),
                group: f.text(3),
                topic: f.text(4),
                msg_id: f.text(5),
                tags: f.text(6),
                keys: f.text(7),
                store_host: f.text(8),
                msg_type: f.msg_type(9)?,
                transaction_id: f.text(10),
                transaction_state,
                from_transaction_check: f.boolean(12, "from transaction check")?,
            })
        }
    })
}
