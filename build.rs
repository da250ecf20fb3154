//! Records the commit the binary is built from, for `rmqstore --version`, and what the tests'
//! data and peers are: `rmqstore_oracle` when `../shared/oracle` holds the seven Java-written
//! stores, `rmqstore_ali_ons` when the Node.js client is installed and node runs,
//! `rmqstore_cluster` when rocketmq-rust's name server and broker are installed in
//! `$RMQSTORE_PEERS/bin` (default `~/.cache/rmqstore-peers`, where `.ci/run` puts them; the
//! tests read the directory from `RMQSTORE_PEERS_BIN`). Tests that need any of them carry
//! `#[cfg_attr(not(...), ignore = "...")]`, so the runner counts them as ignored rather than
//! passed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The oracle stores the tests read (tests/all/common/oracle.rs names the same seven: `ORACLES`
/// and `DLEDGER_ORACLES`).
const ORACLES: [&str; 7] = [
    "basic-4.9",
    "basic-5.x",
    "crashed-4.9",
    "timer-5.x",
    "dledger-4.9",
    "dledger-crashed-4.9",
    "dledger-converted-4.9",
];

/// The live cluster's programs, as `cargo install rocketmq-namesrv rocketmq-broker` names them
/// (tests/all/common/cluster.rs starts the same two).
const PEERS: [&str; 2] = ["rocketmq-namesrv-rust", "rocketmq-broker-rust"];

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RMQSTORE_COMMIT={commit}");
    // rebuilt when HEAD moves: the HEAD file, and the branch file it names
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{r}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");

    println!("cargo::rustc-check-cfg=cfg(rmqstore_oracle)");
    println!("cargo::rustc-check-cfg=cfg(rmqstore_ali_ons)");
    println!("cargo::rustc-check-cfg=cfg(rmqstore_cluster)");
    let oracle = Path::new("../shared/oracle");
    if ORACLES
        .iter()
        .all(|n| oracle.join(n).join("store").is_dir())
    {
        println!("cargo::rustc-cfg=rmqstore_oracle");
    }
    let client = Path::new("tests/clients/ali-ons");
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if node && client.join("node_modules/ali-ons/package.json").is_file() {
        println!("cargo::rustc-cfg=rmqstore_ali_ons");
    }
    println!("cargo::rerun-if-env-changed=RMQSTORE_PEERS");
    println!("cargo::rerun-if-env-changed=HOME");
    let peers = std::env::var_os("RMQSTORE_PEERS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/rmqstore-peers")))
        .unwrap_or_else(|| PathBuf::from(".cache/rmqstore-peers"));
    let peers_bin = peers.join("bin");
    println!(
        "cargo::rustc-env=RMQSTORE_PEERS_BIN={}",
        peers_bin.display()
    );
    if PEERS.iter().all(|b| peers_bin.join(b).is_file()) {
        println!("cargo::rustc-cfg=rmqstore_cluster");
    }
    // a path that does not exist would rerun this script on every build: watch the nearest
    // one that does (what is installed appears inside it; `.ci/run` installs the peers before
    // the first build, and when neither peer directory exists yet, nothing is watched)
    let shared = Path::new("../shared");
    for (want, near) in [
        (oracle, shared),
        (&client.join("node_modules"), client),
        (&peers_bin, &peers),
    ] {
        if want.exists() {
            println!("cargo::rerun-if-changed={}", want.display());
        } else if near.exists() {
            println!("cargo::rerun-if-changed={}", near.display());
        }
    }
}
