//! Helpers shared by the integration tests: oracle locations, JSON lines, hashing.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The oracle stores written by Apache RocketMQ's own Java store.
pub const ORACLES: [&str; 3] = ["basic-4.9", "basic-5.x", "crashed-4.9"];

/// `../shared/oracle/<name>`, or `None` (with a message) when it is absent.
pub fn oracle(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/oracle")
        .join(name);
    if p.join("store").is_dir() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: oracle store {} is absent (expected at {})",
            name,
            p.display()
        );
        None
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

pub fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
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

/// Copy a directory tree (to damage or write into a copy of an oracle store).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
            let mut perm = std::fs::metadata(&dst).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&dst, perm).unwrap();
        }
    }
}

/// Every file below `dir` (none when it does not exist): relative path and bytes, sorted.
pub fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}
