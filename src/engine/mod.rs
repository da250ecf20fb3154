//! The store as a whole: opening it, the broker's dispatch rules, the one writer, the generator.

pub mod dispatch;
pub mod generate;
pub mod index;
pub mod rebuild;
pub mod repair;
pub mod safedir;
pub mod scan;
pub mod store;
pub mod writer;

pub use store::Store;
