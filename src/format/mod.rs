//! Bytes on disk <-> typed views, one module per file kind. Nothing here prints or panics on data.
//!
//! Every module reads, writes and checks one kind of file of a RocketMQ broker store (4.9.x and
//! 5.x). Parsers take byte slices (`from_bytes`-style entry points) so that tests and fuzzers can
//! drive them; paths only wrap them. Errors name the file, the byte offset and what was expected.

pub mod bytes;
pub mod checkpoint;
pub mod commitlog;
pub mod compression;
pub mod config;
pub mod consumequeue;
pub mod dledger;
pub mod entry;
pub mod error;
pub mod failpoint;
pub mod filename;
pub mod finding;
pub mod geometry;
pub mod indexfile;
pub mod java;
pub mod layout;
pub mod mapped;
pub mod msgid;
pub mod timer;
pub mod trace;

pub use error::{Error, ErrorKind, ParseError, Result};
pub use mapped::Mapped;
