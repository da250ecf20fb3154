//! Helpers shared by the integration tests: [`oracle`] (the Java-written stores and answers),
//! [`bin`] (the binary, fixtures, generated stores, `serve`), [`damage`] (copies to damage and
//! the accounting of what was kept), [`ali_ons`] (the Node.js client's consumer and producer),
//! [`cluster`] (a live name server and broker of any flavour: [`java`], the real Apache RocketMQ
//! and its Java clients and store; [`rocketmq_rust`]).
#![allow(dead_code)]

pub mod ali_ons;
pub mod bin;
pub mod cluster;
pub mod damage;
pub mod java;
pub mod oracle;
pub mod rocketmq_rust;

pub use bin::*;
pub use damage::*;
pub use oracle::*;
