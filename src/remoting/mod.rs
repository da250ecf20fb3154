//! The RocketMQ 4.9 remoting protocol as bytes: frames, command headers, request and response
//! codes, typed custom headers, JSON bodies and plain-ACL signatures. No sockets here; a server
//! or client drives these codecs over its own connections.
//!
//! Layers, each usable alone:
//! - [`frame`]: the length-prefixed frame, decoded incrementally with a size limit, encoded into
//!   a buffer or as header bytes plus a borrowed body for vectored writes.
//! - [`command`]: `RemotingCommand` (code, language, version, opaque, flag, remark, extFields) in
//!   the JSON form and the binary `RocketMQSerializable` form.
//! - [`codes`]: request and response codes with their Java names.
//! - [`header`]: typed custom headers read from and written to `extFields`.
//! - [`batch`]: the body of `SEND_BATCH_MESSAGE`, the batch's messages one after another.
//! - [`body`]: the JSON bodies the consumer, admin and name-server requests carry, in fastjson's
//!   dialect (bare integer keys, objects as map keys).
//! - [`acl`]: HmacSHA1 request signatures of the plain ACL.
//!
//! [`decode`] runs the first two layers at once over a receive buffer.
//!
//! # Where real peers differ from the written protocol notes
//! - ali-ons reads the header length at byte 4 of a frame without masking the serialize type, so
//!   it can only read JSON headers; answering every request in its own form (which
//!   [`RemotingCommand::response_to`] does) keeps it working.
//! - ali-ons puts numbers and booleans into `extFields` and sends no `serializeTypeCurrentRPC`;
//!   the JSON reader takes both (see [`command::json`]).
//! - The binary form of the 4.x `RocketMQSerializable` (`ByteBuffer` based) reads an empty
//!   extFields value back as `""`; the protocol notes say it is lost, which is what the later
//!   Netty-buffer codec does. This reader keeps `""`; see [`command::binary`].
//! - `QueueData`'s flag is `topicSynFlag` in the 4.x classes (`common.protocol.route`), not
//!   `topicSysFlag` (the 5.x name the protocol notes use); routes are written with the 4.x name
//!   and read with either ([`body::route`]).
//! - `FLOW_CONTROL` (215) is not in the 4.x `ResponseCode` source that was checked (it has
//!   `FLUSH_DISK_FAILED` = 29 instead); it is kept because the protocol notes say 4.9.8 clients
//!   test for it, and no other code uses that number.

pub mod acl;
pub mod batch;
pub mod body;
pub mod codes;
pub mod command;
pub mod frame;
pub mod header;

#[cfg(test)]
mod tests;

pub use command::{ExtFields, Language, RemotingCommand, FLAG_ONEWAY, FLAG_RESPONSE};
pub use frame::{Frame, FrameCodec, FrameError, OutFrame, SerializeType, DEFAULT_MAX_FRAME};

use crate::format::error::ParseError;

/// Why a command header cannot be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The binary header ends inside `field`.
    #[error("header truncated in {field} at byte {offset}: needs {need} bytes, {have} left")]
    Truncated {
        field: String,
        offset: usize,
        need: usize,
        have: usize,
    },
    /// A binary length word is negative.
    #[error("{field} at byte {offset} is negative ({len})")]
    NegativeLength {
        field: String,
        offset: usize,
        len: i32,
    },
    /// A binary string is not UTF-8.
    #[error("{field}: invalid UTF-8 at byte {offset}")]
    InvalidUtf8 { field: String, offset: usize },
    /// More than `max` extFields entries (the one at `offset` is the first too many).
    #[error("more than {max} extFields entries (byte {offset})")]
    TooManyFields { offset: usize, max: usize },
    /// Bytes follow the binary extFields map.
    #[error("{count} bytes after the end of the header at byte {offset}")]
    TrailingBytes { offset: usize, count: usize },
    /// The JSON header is not JSON.
    #[error("JSON header: {0}")]
    Json(ParseError),
    /// A JSON header field has the wrong type.
    #[error("JSON header field {field} at byte {offset}: expected {expected}, found {found}")]
    JsonType {
        field: String,
        offset: usize,
        expected: &'static str,
        found: &'static str,
    },
    /// A JSON header number does not fit a Java `int`.
    #[error("JSON header field {field} at byte {offset}: {text:?} is not a Java int")]
    JsonNumber {
        field: String,
        offset: usize,
        text: String,
    },
    /// A value to write does not fit its binary field.
    #[error("{field} = {value} does not fit the {bits}-bit field of the binary header")]
    DoesNotFit { field: String, value: i64, bits: u8 },
}

/// Why bytes are not a command, or a command cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error(transparent)]
    Header(#[from] HeaderError),
}

/// A received command with its body, borrowed from the receive buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    pub command: RemotingCommand,
    pub body: &'a [u8],
}

/// Decodes the command at the start of `buf`: `Ok(None)` until the frame is complete, else the
/// command, its body and the bytes used. A frame error means the stream is lost (Java closes
/// the connection); a header error concerns this frame only, and its length is known.
pub fn decode<'a>(codec: &FrameCodec, buf: &'a [u8]) -> Result<Option<(Packet<'a>, usize)>, Error> {
    let Some((frame, used)) = codec.decode(buf)? else {
        return Ok(None);
    };
    let command = RemotingCommand::decode_header(frame.serialize_type, frame.header)?;
    Ok(Some((
        Packet {
            command,
            body: frame.body,
        },
        used,
    )))
}
