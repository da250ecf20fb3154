//! The store as a whole, in folders by concern; nothing here imports upward (into `commands` or
//! `tui`), and the folders depend on each other one way: `filter` on `format` only, `store` on
//! `format` and `filter`, `check` and `admin` on `store`, `broker` on `store` and `filter`,
//! `consume` on `broker` and `store`.
//!
//! - [`store`]: opening a store, its version, the random-access reader, the dispatch rules, the one
//!   writer, the index builder, safe writes, the generator.
//! - [`check`]: `verify`, what recovery would do, `rebuild` and `repair`.
//! - [`filter`]: tag and SQL92 filters.
//! - [`broker`]: the engine, a small broker over a store: pulls, offsets, rebalance, orderly
//!   locks, retries, delayed and timer delivery, transactions, the clock.
//! - [`admin`]: offline changes to consumer offsets and to topic and group config.
//! - [`consume`]: handing messages on: export, replay, traces.

pub mod admin;
pub mod broker;
pub mod check;
pub mod consume;
pub mod filter;
pub mod store;

pub use store::Store;
