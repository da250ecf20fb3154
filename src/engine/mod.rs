//! The store as a whole: opening it, the broker's dispatch rules, the one writer, the generator.

pub mod broker;
pub mod client_offsets;
pub mod clock;
pub mod config_admin;
pub mod dispatch;
pub mod export;
pub mod filter;
pub mod generate;
pub mod headers;
pub mod index;
pub mod message_json;
pub mod offset_admin;
pub mod offsets;
pub mod orderly;
pub mod pull;
pub mod query;
pub mod rebalance;
pub mod rebuild;
pub mod recovery;
pub mod repair;
pub mod replay;
pub mod retry;
pub mod safedir;
pub mod scan;
pub mod schedule;
pub mod sql;
pub mod store;
pub mod timer;
pub mod trace;
pub mod transaction;
pub mod verify;
pub mod writer;

pub use store::Store;
