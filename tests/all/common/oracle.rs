//! The oracle stores written by Apache RocketMQ's Java store (`../shared/oracle`) and the Java
//! answers beside them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// The oracle stores written by Apache RocketMQ's own Java store.
pub const ORACLES: [&str; 4] = ["basic-4.9", "basic-5.x", "crashed-4.9", "timer-5.x"];

/// The DLedger-mode oracle stores (tests/all/dledger.rs reads them; `build.rs` looks for them
/// too).
pub const DLEDGER_ORACLES: [&str; 3] = [
    "dledger-4.9",
    "dledger-crashed-4.9",
    "dledger-converted-4.9",
];
/// Where the oracle stores are: `../shared/oracle` beside the repository.
pub fn oracle_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/oracle")
}

/// `<root>/<name>` when it holds a store, else `None`. The build looks the same way
/// (`build.rs` sets `rmqstore_oracle` when all of [`ORACLES`] and [`DLEDGER_ORACLES`] are there).
pub fn oracle_in(root: &Path, name: &str) -> Option<PathBuf> {
    let p = root.join(name);
    p.join("store").is_dir().then_some(p)
}

/// `../shared/oracle/<name>`, or `None` (with a message) when it is absent. Tests that call it
/// carry `#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]`, so without
/// the stores they are counted as ignored; `None` is only met with `--include-ignored`.
pub fn oracle(name: &str) -> Option<PathBuf> {
    let found = oracle_in(&oracle_root(), name);
    if found.is_none() {
        eprintln!(
            "SKIPPED: oracle store {name} is absent (expected at {})",
            oracle_root().join(name).display()
        );
    }
    found
}

/// A floor for "enough was checked" counts, tuned to the basic stores: the timer store holds
/// about a quarter of their messages.
pub fn at_least(name: &str, basic: usize) -> usize {
    if name == "timer-5.x" {
        basic / 5
    } else {
        basic
    }
}

/// An oracle's manifest of puts (`manifest.jsonl`, or gzipped).
pub fn manifest(dir: &Path) -> PathBuf {
    let plain = dir.join("manifest.jsonl");
    if plain.exists() {
        plain
    } else {
        dir.join("manifest.jsonl.gz")
    }
}

/// Read a JSON lines file, gzipped when its name ends in `.gz`.
pub fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let r: Box<dyn std::io::Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::GzDecoder::new(f))
    } else {
        Box::new(f)
    };
    BufReader::new(r)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

/// The Java dump of every record (after Java's recovery for the crashed store).
pub fn java_messages(dir: &Path) -> Vec<serde_json::Value> {
    let a = dir.join("messages.jsonl.gz");
    if a.exists() {
        json_lines(&a)
    } else {
        json_lines(&dir.join("messages-after-java-recovery.jsonl.gz"))
    }
}

/// The Java store's answers (after Java's recovery for the crashed store).
pub fn java_queries(dir: &Path) -> serde_json::Value {
    let a = dir.join("queries.json");
    let p = if a.exists() {
        a
    } else {
        dir.join("queries-after-java-recovery.json")
    };
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// A host as Java prints it: `InetAddress.getHostAddress()` + ":" + port (IPv6 uncompressed).
pub fn java_host(h: &rmqstore::format::commitlog::Host) -> String {
    match h.ip {
        std::net::IpAddr::V4(a) => format!("{a}:{}", h.port),
        std::net::IpAddr::V6(a) => {
            let s: Vec<String> = a.segments().iter().map(|x| format!("{x:x}")).collect();
            format!("{}:{}", s.join(":"), h.port)
        }
    }
}

/// A copy of `basic-4.9` with the consume queue file times the Java answers depend on: 4.9
/// picks the file by modification time, and copying the oracle lost them. ENGINE.md 4.5 gives
/// file 0 of TopicA queue 0 as `…054918`; every answer holds with that time for the three
/// two-file queues.
pub fn basic49_with_file_times() -> Option<(tempfile::TempDir, PathBuf)> {
    let dir = oracle("basic-4.9")?;
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("store");
    super::damage::copy_tree(&dir.join("store"), &root);
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1796073054918);
    for topic in ["TopicA", "TopicB", "TopicC"] {
        let f = root
            .join("consumequeue")
            .join(topic)
            .join("0/00000000000000000000");
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    Some((t, root))
}
