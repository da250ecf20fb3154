//! rmqstore: read, check, repair and serve Apache RocketMQ broker store directories offline.
//!
//! Four layers, data flowing one way: [`format`] (bytes on disk <-> typed views, one module per
//! file kind), [`engine`] (the store as a whole: dispatch rules, the writer, and later the broker
//! half), [`commands`] (the CLI, presentation only) and `tui`.
//! [`remoting`] is the RocketMQ wire protocol as bytes (frames, headers, bodies; no sockets);
//! [`serve`] puts the engine behind it on a socket (NameServer and Broker in one process).

#![deny(unsafe_code)]

pub mod commands;
pub mod engine;
pub mod format;
pub mod remoting;
pub mod send;
pub mod serve;
pub mod tui;
