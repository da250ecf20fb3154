//! Handing a store's messages on: export to a new store or a live cluster, replay with a push
//! consumer's semantics, and message traces.

pub mod export;
pub mod pop;
pub mod replay;
pub mod trace;
