//! One remoting frame on the socket: `[i32 length][i32 header meta][header][body]`, big-endian.
//!
//! `length` counts everything after itself. The meta word carries the serialize type in its high
//! byte (`RemotingCommand.markProtocolType`) and the header length in its low 24 bits
//! (`RemotingCommand.getHeaderLength`); the body is whatever follows the header.
//!
//! Decoding is incremental and bounded: [`FrameCodec::decode`] looks at a byte buffer, answers
//! `Ok(None)` while the frame is incomplete, and hands out a [`Frame`] that borrows the header and
//! body from the buffer, so it never allocates. A length above the configured maximum, a negative
//! or too short length, an unknown serialize type and a header longer than its frame are rejected
//! as soon as the first 4 (or 8) bytes are there, before any of the claimed bytes arrive. A reader
//! that grows its buffer by [`FrameCodec::frame_len`] therefore never reserves more than the
//! maximum. The Java broker (Netty's `LengthFieldBasedFrameDecoder` in `NettyDecoder`) closes the
//! connection on the same errors, without a reply.
//!
//! Encoding writes into a `Vec<u8>`, or produces an [`OutFrame`]: the length, meta and header in
//! one small buffer plus the body as a separate borrowed slice, so a server can send a body
//! straight from a memory map with vectored writes.

use std::io::IoSlice;

/// `NettySystemConfig.frameMaxLength` (`com.rocketmq.remoting.frameMaxLength`): 16 MiB, counted
/// as the 4-byte length prefix plus the bytes it announces.
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

/// Largest header a received frame may carry (256 KiB): a Java client's header is a few hundred
/// bytes, a send's (with its properties, under 32 KiB as the store keeps them) at most tens of
/// KiB. A frame announcing more is refused from its first 8 bytes, before the header arrives, so
/// no header parse ever sees more than this.
pub const DEFAULT_MAX_HEADER: usize = 256 * 1024;

/// Bytes of the length prefix.
pub const LENGTH_PREFIX: usize = 4;

/// Bytes of the header meta word (serialize type + header length).
pub const HEADER_META: usize = 4;

/// Largest header length the 24-bit field can carry (`0x00FFFFFF`).
pub const MAX_HEADER_LEN: usize = 0x00FF_FFFF;

/// How the header is serialized: the high byte of the meta word (`SerializeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SerializeType {
    /// `SerializeType.JSON` (code 0): a fastjson object, what every client sends by default.
    Json,
    /// `SerializeType.ROCKETMQ` (code 1): the binary form of `RocketMQSerializable`.
    RocketMq,
}

impl SerializeType {
    /// The byte on the wire.
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// The type for a wire byte, if it is one of the two Java knows.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    /// The Java enum name (`JSON`, `ROCKETMQ`), as the JSON header's `serializeTypeCurrentRPC`.
    pub fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }
}

/// Why bytes are not a frame, or a frame cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length prefix is negative (Netty: `CorruptedFrameException`).
    #[error("frame length {len} is negative")]
    NegativeLength { len: i32 },
    /// The length prefix leaves no room for the header meta word.
    #[error("frame length {len} is shorter than the {HEADER_META}-byte header meta word")]
    TooShort { len: i32 },
    /// Prefix plus announced bytes exceed the maximum (Netty: `TooLongFrameException`).
    #[error("frame of {len} bytes (length prefix included) exceeds the maximum of {max}")]
    TooLarge { len: u64, max: usize },
    /// The meta word's high byte is neither JSON (0) nor ROCKETMQ (1).
    #[error("unknown serialize type {code} in the header meta word")]
    UnknownSerializeType { code: u8 },
    /// The header length is over the codec's header limit.
    #[error("header of {header_len} bytes exceeds the maximum of {max}")]
    HeaderOverLimit { header_len: usize, max: usize },
    /// The header length is larger than what the frame holds after the meta word.
    #[error("header length {header_len} exceeds the {available} bytes the frame has after the meta word")]
    HeaderTooLong { header_len: usize, available: usize },
    /// A header to be written does not fit the 24-bit length field.
    #[error(
        "header of {header_len} bytes does not fit the 24-bit length field (max {MAX_HEADER_LEN})"
    )]
    HeaderTooLarge { header_len: usize },
}

/// One decoded frame, borrowing header and body from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub serialize_type: SerializeType,
    pub header: &'a [u8],
    pub body: &'a [u8],
}

/// An encoded frame whose body stays where it is: `head` holds length, meta and header; `body`
/// is borrowed. Send `head` then `body` (see [`OutFrame::io_slices`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutFrame<'a> {
    pub head: Vec<u8>,
    pub body: &'a [u8],
}

impl OutFrame<'_> {
    /// Total bytes on the wire.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// Never true: a frame has at least its prefix and meta word.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The two parts for `write_vectored`.
    pub fn io_slices(&self) -> [IoSlice<'_>; 2] {
        [IoSlice::new(&self.head), IoSlice::new(self.body)]
    }

    /// The whole frame in one buffer (copies the body; for tests and small frames).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        out.extend_from_slice(&self.head);
        out.extend_from_slice(self.body);
        out
    }
}

/// Frame decoder and encoder with size limits: the whole frame, and (when decoding) its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameCodec {
    max_frame: usize,
    max_header: usize,
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new(DEFAULT_MAX_FRAME)
    }
}

fn be_i32(buf: &[u8], at: usize) -> Option<i32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

impl FrameCodec {
    /// A codec accepting frames of at most `max_frame` bytes, length prefix included, with
    /// headers of at most [`DEFAULT_MAX_HEADER`] bytes.
    pub const fn new(max_frame: usize) -> Self {
        FrameCodec {
            max_frame,
            max_header: DEFAULT_MAX_HEADER,
        }
    }

    /// The same codec with another limit on received headers.
    pub const fn with_max_header(self, max_header: usize) -> Self {
        FrameCodec { max_header, ..self }
    }

    /// The limit on received headers.
    pub fn max_header(&self) -> usize {
        self.max_header
    }

    /// The limit, length prefix included.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// The whole frame's size (prefix included) once the prefix is in `buf`; `Ok(None)` before.
    /// The answer is checked against the maximum, so it is safe to reserve.
    pub fn frame_len(&self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(len) = be_i32(buf, 0) else {
            return Ok(None);
        };
        if len < 0 {
            return Err(FrameError::NegativeLength { len });
        }
        let total = LENGTH_PREFIX as u64 + len as u64;
        if total > self.max_frame as u64 {
            return Err(FrameError::TooLarge {
                len: total,
                max: self.max_frame,
            });
        }
        if (len as usize) < HEADER_META {
            return Err(FrameError::TooShort { len });
        }
        Ok(Some(total as usize))
    }

    /// Decodes the frame at the start of `buf`: `Ok(None)` if more bytes are needed, else the
    /// frame and how many bytes of `buf` it used. Errors come as early as the bytes allow.
    pub fn decode<'a>(&self, buf: &'a [u8]) -> Result<Option<(Frame<'a>, usize)>, FrameError> {
        let Some(total) = self.frame_len(buf)? else {
            return Ok(None);
        };
        let Some(meta) = be_i32(buf, LENGTH_PREFIX) else {
            return Ok(None);
        };
        let meta = meta as u32;
        let code = (meta >> 24) as u8;
        let serialize_type =
            SerializeType::from_code(code).ok_or(FrameError::UnknownSerializeType { code })?;
        let header_len = (meta & MAX_HEADER_LEN as u32) as usize;
        let available = total - LENGTH_PREFIX - HEADER_META;
        if header_len > available {
            return Err(FrameError::HeaderTooLong {
                header_len,
                available,
            });
        }
        if header_len > self.max_header {
            return Err(FrameError::HeaderOverLimit {
                header_len,
                max: self.max_header,
            });
        }
        let Some(frame) = buf.get(..total) else {
            return Ok(None);
        };
        let start = LENGTH_PREFIX + HEADER_META;
        let (header, body) = frame.get(start..).unwrap_or_default().split_at(header_len);
        Ok(Some((
            Frame {
                serialize_type,
                header,
                body,
            },
            total,
        )))
    }

    /// The 8 bytes before the header: length prefix and meta word, after checking the limits.
    pub fn prefix(
        &self,
        serialize_type: SerializeType,
        header_len: usize,
        body_len: usize,
    ) -> Result<[u8; 8], FrameError> {
        if header_len > MAX_HEADER_LEN {
            return Err(FrameError::HeaderTooLarge { header_len });
        }
        let total = (LENGTH_PREFIX + HEADER_META + header_len) as u64 + body_len as u64;
        if total > self.max_frame as u64 || total - LENGTH_PREFIX as u64 > i32::MAX as u64 {
            return Err(FrameError::TooLarge {
                len: total,
                max: self.max_frame,
            });
        }
        let len = (total - LENGTH_PREFIX as u64) as u32;
        let meta = (u32::from(serialize_type.code()) << 24) | header_len as u32;
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&len.to_be_bytes());
        out[4..].copy_from_slice(&meta.to_be_bytes());
        Ok(out)
    }

    /// Appends one whole frame to `out`.
    pub fn encode_into(
        &self,
        out: &mut Vec<u8>,
        serialize_type: SerializeType,
        header: &[u8],
        body: &[u8],
    ) -> Result<(), FrameError> {
        let prefix = self.prefix(serialize_type, header.len(), body.len())?;
        out.reserve(prefix.len() + header.len() + body.len());
        out.extend_from_slice(&prefix);
        out.extend_from_slice(header);
        out.extend_from_slice(body);
        Ok(())
    }

    /// A frame whose body is left in place (see [`OutFrame`]).
    pub fn encode_split<'b>(
        &self,
        serialize_type: SerializeType,
        header: &[u8],
        body: &'b [u8],
    ) -> Result<OutFrame<'b>, FrameError> {
        let prefix = self.prefix(serialize_type, header.len(), body.len())?;
        let mut head = Vec::with_capacity(prefix.len() + header.len());
        head.extend_from_slice(&prefix);
        head.extend_from_slice(header);
        Ok(OutFrame { head, body })
    }
}

/// [`FrameCodec::decode`] with the broker's default limit.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    FrameCodec::default().decode(buf)
}

/// [`FrameCodec::encode_into`] with the broker's default limit.
pub fn encode_into(
    out: &mut Vec<u8>,
    serialize_type: SerializeType,
    header: &[u8],
    body: &[u8],
) -> Result<(), FrameError> {
    FrameCodec::default().encode_into(out, serialize_type, header, body)
}
