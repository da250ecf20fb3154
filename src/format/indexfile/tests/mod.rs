//! Tests of index files: golden values and the writer's rules on hand-made input ([`golden`]),
//! the Java store's own files and query answers from `../shared/oracle` ([`oracle`]), and
//! geometry inference, the structural checks and corrupt input ([`checks`]). The helpers here
//! read the oracle stores and build files from records.

mod checks;
mod golden;
mod oracle;

use std::io::Read;
use std::path::{Path, PathBuf};

use chrono::Utc;

use super::*;

const ORACLE: &str = "../shared/oracle";

// ---------------------------------------------------------------- helpers

fn oracle_dir(name: &str) -> Option<PathBuf> {
    let p = Path::new(ORACLE).join(name);
    if p.join("store/index").is_dir() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: oracle store {} not found (tests read ../shared/oracle from the crate root)",
            p.display()
        );
        None
    }
}

fn oracle_geometry(dir: &Path) -> IndexGeometry {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("geometry.json")).unwrap()).unwrap();
    IndexGeometry::new(
        v["index_slots"].as_u64().unwrap() as u32,
        v["index_entries"].as_u64().unwrap() as u32,
    )
}

/// (name, bytes) of every file in `<dir>/store/index`, in load order.
fn oracle_index_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    list_index_dir(&dir.join("store/index"))
        .unwrap()
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

struct Msg {
    topic: String,
    uniq: Option<String>,
    keys: Option<String>,
    offset: i64,
    store_ts: i64,
    sys_flag: i32,
}

impl Msg {
    fn record(&self) -> IndexRecord<'_> {
        IndexRecord {
            topic: &self.topic,
            uniq_key: self.uniq.as_deref(),
            keys: self.keys.as_deref(),
            phy_offset: self.offset,
            store_timestamp: self.store_ts,
            is_rollback: IndexRecord::is_rollback_sys_flag(self.sys_flag),
        }
    }
}

fn load_messages(path: &Path) -> Vec<Msg> {
    let mut s = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    s.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Msg {
                topic: v["topic"].as_str().unwrap().to_string(),
                uniq: v
                    .get("uniqKey")
                    .and_then(|x| x.as_str())
                    .map(str::to_string),
                keys: v.get("keys").and_then(|x| x.as_str()).map(str::to_string),
                offset: v["physicalOffset"].as_i64().unwrap(),
                store_ts: v["storeTimestamp"].as_i64().unwrap(),
                sys_flag: v["sysFlag"].as_i64().unwrap() as i32,
            }
        })
        .collect()
}

struct Query {
    topic: String,
    key: String,
    max_num: i32,
    begin: i64,
    end: i64,
    offsets: Vec<i64>,
    last_ts: i64,
    last_phy: i64,
}

fn load_queries(path: &Path) -> Vec<Query> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["queryMessage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| Query {
            topic: q["topic"].as_str().unwrap().to_string(),
            key: q["key"].as_str().unwrap().to_string(),
            max_num: q["maxNum"].as_i64().unwrap() as i32,
            begin: q["begin"].as_i64().unwrap(),
            end: q["end"].as_i64().unwrap(),
            offsets: q["physicalOffsets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect(),
            last_ts: q["indexLastUpdateTimestamp"].as_i64().unwrap(),
            last_phy: q["indexLastUpdatePhyoffset"].as_i64().unwrap(),
        })
        .collect()
}

/// Answer a query the way `DefaultMessageStore.queryMessage` reports it: `queryOffset`'s offsets
/// sorted ascending, and the "index last update" values only when something was found.
fn java_query_message<B: AsRef<[u8]>>(files: &[IndexFile<B>], q: &Query) -> (Vec<i64>, i64, i64) {
    let r = query_offsets(
        files.iter().rev(),
        &q.topic,
        &q.key,
        q.max_num,
        q.begin,
        q.end,
    );
    let mut offs = r.phy_offsets.clone();
    offs.sort_unstable();
    if offs.is_empty() {
        (offs, 0, 0)
    } else {
        (
            offs,
            r.index_last_update_timestamp,
            r.index_last_update_phy_offset,
        )
    }
}

fn open_all(files: &[(String, Vec<u8>)], g: IndexGeometry) -> Vec<IndexFile<Vec<u8>>> {
    files
        .iter()
        .map(|(_, b)| IndexFile::new(b.clone(), g).unwrap())
        .collect()
}

fn utc_names(ctx: &NewFileContext<'_>) -> String {
    format_file_name_in(ctx.trigger_store_timestamp, &Utc).unwrap()
}

/// Build index files from records with a given geometry (names from store time, UTC).
fn build_files(g: IndexGeometry, recs: &[Msg]) -> Vec<NamedIndexFile> {
    let mut ix = Indexer::new(g, |c: &NewFileContext<'_>| {
        format!("{:017}", 20_000_000_000_000_000u64 + c.sequence as u64)
    })
    .unwrap();
    for m in recs {
        ix.add(&m.record());
    }
    ix.finish()
}

/// Synthetic records: a mix of single keys, two keys, repeated hot keys, no keys.
fn synthetic(n: usize) -> Vec<Msg> {
    (0..n)
        .map(|i| Msg {
            topic: ["TopicA", "TopicB", "TopicC"][i % 3].to_string(),
            uniq: (i % 7 != 3).then(|| format!("UNIQ{i:08X}")),
            keys: match i % 5 {
                0 => Some(format!("key-{i}")),
                1 => Some(format!("order-{i} user-{}", i % 13)),
                2 => Some(format!("hot-key-{}", i % 4)),
                3 => None,
                _ => Some(format!(" spaced  key-{i} ")),
            },
            offset: i as i64 * 500,
            store_ts: 1_700_000_000_000 + i as i64 * 137,
            sys_flag: if i % 11 == 10 { 0xC } else { 0 },
        })
        .collect()
}
