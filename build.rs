//! Records the commit the binary is built from, for `rmqstore --version`, and what the tests'
//! data and peers are: `rmqstore_oracle` when `../shared/oracle` holds the seven Java-written
//! stores, `rmqstore_ali_ons` when the Node.js client is installed and node runs,
//! `rmqstore_java_4_9` and `rmqstore_java_5` when the Java peer kit of that release is in
//! `$RMQSTORE_PEERS/java` (default `~/.cache/rmqstore-peers`, where `tests/peers/java/install`
//! puts it; the tests read the directory from `RMQSTORE_PEERS_JAVA`) and java runs,
//! `rmqstore_rocketmq_rust` when rocketmq-rust's name server and broker are installed in
//! `$RMQSTORE_PEERS/bin` (`scripts/test-rocketmq-rust.sh`; the tests read `RMQSTORE_PEERS_BIN`).
//! Tests that need any of them carry `#[cfg_attr(not(...), ignore = "...")]`, so the runner
//! counts them as ignored rather than passed.

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

/// rocketmq-rust's programs, as `cargo install rocketmq-namesrv rocketmq-broker` names them
/// (tests/all/common/rocketmq_rust.rs starts the same two).
const PEERS: [&str; 2] = ["rocketmq-namesrv-rust", "rocketmq-broker-rust"];

/// The Java peer kits each release needs (tests/all/common/java.rs reads the same): the
/// install writes `<kit>/ok` last.
const JAVA_KITS: [(&str, [&str; 2]); 2] = [
    ("rmqstore_java_4_9", ["broker-4.9", "client-4.9"]),
    ("rmqstore_java_5", ["5.x", "5.x"]),
];

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
    println!("cargo::rustc-check-cfg=cfg(rmqstore_rocketmq_rust)");
    println!("cargo::rustc-check-cfg=cfg(rmqstore_java_4_9)");
    println!("cargo::rustc-check-cfg=cfg(rmqstore_java_5)");
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
        println!("cargo::rustc-cfg=rmqstore_rocketmq_rust");
    }
    let java_root = peers.join("java");
    println!(
        "cargo::rustc-env=RMQSTORE_PEERS_JAVA={}",
        java_root.display()
    );
    let java = Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    for (cfg, kits) in JAVA_KITS {
        if java && kits.iter().all(|k| java_root.join(k).join("ok").is_file()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
    // a path that does not exist would rerun this script on every build: watch the nearest
    // one that does (what is installed appears inside it; `.ci/run` installs the peers before
    // the first build, and when no peer directory exists yet, nothing is watched)
    let shared = Path::new("../shared");
    let stamps: Vec<PathBuf> = JAVA_KITS
        .iter()
        .flat_map(|(_, kits)| kits.iter().map(|k| java_root.join(k).join("ok")))
        .collect();
    let mut watched = vec![
        (oracle.to_path_buf(), shared.to_path_buf()),
        (client.join("node_modules"), client.to_path_buf()),
        (peers_bin.clone(), peers.clone()),
    ];
    watched.extend(stamps.into_iter().map(|s| (s, java_root.clone())));
    for (want, near) in &watched {
        if want.exists() {
            println!("cargo::rerun-if-changed={}", want.display());
        } else if near.exists() {
            println!("cargo::rerun-if-changed={}", near.display());
        }
    }
}
