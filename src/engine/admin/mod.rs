//! Offline administration: committed consumer offsets and topic and subscription-group config,
//! changed under the store's lock with the old file kept.

pub mod config;
pub mod offsets;
