//! Checking and mending a store: `verify`'s judgement, what the broker's recovery would do on its
//! next start, rebuilding consume queues and index files, and `repair`.

pub mod compare;
pub mod headers;
pub mod pieces;
pub mod rebuild;
pub mod recovery;
pub mod repair;
pub mod verify;
