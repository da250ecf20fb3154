//! `send`: messages recovered from a store handed back to a live cluster over the remoting
//! protocol, as a 4.9 producer sends them, resumable through a journal.
//!
//! - [`outgoing`]: one message to send, as the producer puts it on the wire, and what the
//!   broker answered for it.
//! - [`client`], [`route`], [`producer`]: the wire side. A connection per broker with several
//!   requests in flight, topic routes from the name server, `SEND_MESSAGE_V2` and
//!   `SEND_BATCH_MESSAGE` with the 4.9 producer's retry rules and plain-ACL signatures.
//! - [`source`], [`translate`], [`journal`], [`run`]: the store side. What is sent (a store's
//!   selection, an export file, a salvage store), how each record becomes a message a producer
//!   would have sent, which messages the broker acknowledged, and the loop that ties them.

pub mod client;
pub mod journal;
pub mod outgoing;
pub mod producer;
pub mod route;
pub mod run;
pub mod source;
pub mod translate;

#[cfg(test)]
mod tests;

pub use outgoing::{Acked, Outgoing, SendStatus, SourceKey};
