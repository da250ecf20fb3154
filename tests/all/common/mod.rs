//! Helpers shared by the integration tests: [`oracle`] (the Java-written stores and answers),
//! [`bin`] (the binary, fixtures, generated stores, `serve`), [`damage`] (copies to damage and
//! the accounting of what was kept).
#![allow(dead_code)]

pub mod bin;
pub mod damage;
pub mod oracle;

pub use bin::*;
pub use damage::*;
pub use oracle::*;
