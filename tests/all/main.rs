//! The integration tests, in one binary (one link, one run): each module drives the real
//! binary or the library on real files; `common` holds what they share (the oracle stores, the
//! binary, damage helpers, the `serve` process).

mod common;

mod admin;
mod ali_ons;
mod broker_loads;
mod cli;
mod cluster;
mod compare;
mod corrupt;
mod damage;
mod dledger;
mod dledger_repair;
mod dledger_verify;
mod engine;
mod inspect;
mod java_peers;
mod json;
mod limits;
mod oracle;
mod pop;
mod rebuild;
mod recovery_layouts;
mod repair;
mod repair_service;
mod repair_timer;
mod replay;
mod send;
mod send_live;
mod serve;
mod serve_java;
mod trace;
mod trust;
mod tui;
mod verify;
