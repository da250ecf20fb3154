//! Tests: golden bytes from FORMAT.md, the Java store's own index files and query answers
//! (`../shared/oracle`), geometry inference, checks, and corrupt input.

use std::io::Read;
use std::path::{Path, PathBuf};

use chrono::{FixedOffset, Utc};
use proptest::prelude::*;

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
fn java_query_message(files: &[IndexFile<Vec<u8>>], q: &Query) -> (Vec<i64>, i64, i64) {
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

// ---------------------------------------------------------------- golden values

#[test]
fn golden_hash_and_slot() {
    // FORMAT.md 3.3: "TopicTest#OrderID188" -> -1231271670; abs -> 1231271670.
    assert_eq!(key_hash("TopicTest", "OrderID188"), 1231271670);
    assert_eq!(index_key_hash("TopicTest#OrderID188"), 1231271670);
    // 1231271670 = 246 * 5000000 + 1271670
    assert_eq!(slot_of(1231271670, 5_000_000), 1271670);
    assert_eq!(IndexGeometry::DEFAULT.slot_pos(1271670), 40 + 1271670 * 4);
    assert_eq!(IndexGeometry::DEFAULT.slot_pos(1271670), 5_086_720);
    assert_eq!(IndexGeometry::DEFAULT.entry_pos(1), 20_000_060);
    assert_eq!(IndexGeometry::DEFAULT.file_size(), 420_000_040);
    // Math.abs(Integer.MIN_VALUE) stays negative in Java; the index maps it to 0.
    assert_eq!(index_key_hash("polygenelubricants"), 0);
    assert_eq!(index_key_hash(""), 0);
    assert_eq!(build_key("T", "k"), "T#k");
}

#[test]
fn golden_header_bytes() {
    // Values of the first basic-4.9 oracle file; bytes spelled out from the layout in 7.1.
    let h = IndexHeader {
        begin_timestamp: 1796073053181, // 0x000001A22E4BDBFD
        end_timestamp: 1796073054362,   // 0x000001A22E4BE09A
        begin_phy_offset: 0,
        end_phy_offset: 1907166, // 0x1D19DE
        hash_slot_count: 958,    // 0x3BE
        index_count: 4000,       // 0xFA0
    };
    let want: [u8; 40] = [
        0x00, 0x00, 0x01, 0xA2, 0x2E, 0x4B, 0xDB, 0xFD, // beginTimestamp
        0x00, 0x00, 0x01, 0xA2, 0x2E, 0x4B, 0xE0, 0x9A, // endTimestamp
        0, 0, 0, 0, 0, 0, 0, 0, // beginPhyOffset
        0x00, 0x00, 0x00, 0x00, 0x00, 0x1D, 0x19, 0xDE, // endPhyOffset
        0x00, 0x00, 0x03, 0xBE, // hashSlotCount
        0x00, 0x00, 0x0F, 0xA0, // indexCount
    ];
    assert_eq!(h.to_bytes(), want);
    assert_eq!(IndexHeader::from_bytes(&want).unwrap(), h);
    assert_eq!(h.effective_index_count(), 4000);
    assert_eq!(IndexHeader::default().effective_index_count(), 1);
    let e = IndexHeader::from_bytes(&want[..39]).unwrap_err();
    assert_eq!(e.offset, 0);
    if let Some(dir) = oracle_dir("basic-4.9") {
        let files = oracle_index_files(&dir);
        assert_eq!(
            files[0].1[..40],
            want,
            "oracle header differs from the hand-made one"
        );
    }
}

#[test]
fn golden_entry_bytes_and_put_key() {
    // The default geometry: slot 1271670 for TopicTest#OrderID188, entry 1 at byte 20,000,060.
    let g = IndexGeometry::DEFAULT;
    let prev_end_ts = 1_700_000_000_000;
    let mut b = IndexFileBuilder::new(g, 1000, prev_end_ts).unwrap();
    // A new file starts from the previous file's end values.
    assert_eq!(b.header().begin_phy_offset, 1000);
    assert_eq!(b.header().end_timestamp, prev_end_ts);
    assert_eq!(
        b.header().index_count,
        0,
        "on disk, indexCount is 0 before any entry"
    );
    // First entry's diff is measured from the previous file's end: 5.999 s -> 5.
    assert!(b.put_key("TopicTest#OrderID188", 123456789, prev_end_ts + 5999));
    let want_entry: [u8; 20] = [
        0x49, 0x63, 0xB6, 0xF6, // hash 1231271670
        0, 0, 0, 0, 0x07, 0x5B, 0xCD, 0x15, // offset 123456789
        0, 0, 0, 5, // time diff 5 s
        0, 0, 0, 0, // prev: none
    ];
    assert_eq!(b.entries()[0].to_bytes(), want_entry);
    assert_eq!(IndexEntry::read_at(&want_entry, 0).unwrap(), b.entries()[0]);
    assert_eq!(b.slots()[1271670], 1);
    let h = b.header();
    assert_eq!(
        h.begin_phy_offset, 123456789,
        "entry 1 overwrites begin values"
    );
    assert_eq!(h.begin_timestamp, prev_end_ts + 5999);
    assert_eq!((h.hash_slot_count, h.index_count), (1, 2));
    // A second key in the same bucket chains to entry 1 and takes no new slot.
    assert!(b.put_key("TopicTest#OrderID188", 123456999, prev_end_ts + 9000));
    assert_eq!(b.entries()[1].prev, 1);
    assert_eq!(b.entries()[1].time_diff, 3, "(9000 - 5999) / 1000");
    assert_eq!(b.slots()[1271670], 2);
    assert_eq!((b.header().hash_slot_count, b.header().index_count), (1, 3));

    let mut used = Vec::new();
    b.write_used(&mut used).unwrap();
    assert_eq!(used.len() as u64, b.used_len());
    assert_eq!(used.len(), 20_000_060 + 2 * 20);
    assert_eq!(used[5_086_720..5_086_724], [0, 0, 0, 2]);
    assert_eq!(used[20_000_060..20_000_080], want_entry);
    assert_eq!(used[20_000_040..20_000_060], [0u8; 20], "entry 0 is unused");
}

#[test]
fn time_diff_is_clamped_and_zero_without_begin() {
    let g = IndexGeometry::new(3, 10);
    let mut b = IndexFileBuilder::new(g, 0, 0).unwrap();
    assert!(b.put_key("a#1", 0, 5_000));
    assert_eq!(
        b.entries()[0].time_diff,
        0,
        "beginTimestamp was 0 when computed"
    );
    assert!(b.put_key("a#2", 1, 1_000), "earlier store time");
    assert_eq!(b.entries()[1].time_diff, 0, "negative diffs clamp to 0");
    assert!(b.put_key("a#3", 2, 5_000 + (i32::MAX as i64 + 10) * 1000));
    assert_eq!(b.entries()[2].time_diff, i32::MAX);
    let mut f = IndexFileBuilder::new(g, 0, 0).unwrap();
    for i in 0..9 {
        assert!(f.put_key(&format!("k#{i}"), i, 1000 + i));
    }
    assert!(f.is_full(), "indexCount 10 >= indexNum 10");
    assert!(!f.put_key("k#x", 99, 2000));
    assert_eq!(f.header().index_count, 10);
    assert!(IndexFileBuilder::new(IndexGeometry::new(3, 1), 0, 0).is_err());
    assert!(IndexFileBuilder::new(IndexGeometry::new(0, 5), 0, 0).is_err());
}

#[test]
fn file_names() {
    assert_eq!(
        format_file_name_in(1796073053203, &Utc).as_deref(),
        Some("20261130211053203")
    );
    assert_eq!(
        parse_file_name_in("20261130211053203", &Utc),
        Some(1796073053203)
    );
    let cst = FixedOffset::east_opt(8 * 3600).unwrap();
    assert_eq!(
        format_file_name_in(1796073053203, &cst).as_deref(),
        Some("20261201051053203")
    );
    assert_eq!(
        parse_file_name_in("20261201051053203", &cst),
        Some(1796073053203)
    );
    assert_eq!(
        format_file_name_in(0, &Utc).as_deref(),
        Some("19700101000000000")
    );
    for bad in [
        "2026113021105320",
        "2026113021105320x",
        "20261330211053203",
        "20260230000000000",
    ] {
        assert_eq!(parse_file_name_naive(bad), None, "{bad}");
    }
    let local = format_file_name(1796073053203).unwrap();
    assert_eq!(parse_file_name(&local), Some(1796073053203));
    // Names made from store time stay unique and sorted.
    let ctx = NewFileContext {
        sequence: 1,
        trigger_phy_offset: 0,
        trigger_store_timestamp: 1796073053000,
        prev_name: Some(local.as_str()),
        prev_end_phy_offset: 0,
        prev_end_timestamp: 0,
    };
    assert_eq!(
        parse_file_name(&name_by_store_time(&ctx)),
        Some(1796073053204)
    );
    // A store time no name holds (a damaged header) goes on from the previous name: it does not
    // take the last name, which every later file would then get too.
    let far = NewFileContext {
        trigger_store_timestamp: i64::MAX / 2,
        ..ctx
    };
    assert_eq!(
        parse_file_name(&name_by_store_time(&far)),
        Some(1796073053204)
    );
}

// ---------------------------------------------------------------- oracle: lookups

fn check_queries(name: &str, queries_file: &str) {
    let Some(dir) = oracle_dir(name) else { return };
    let g = oracle_geometry(&dir);
    let files = oracle_index_files(&dir);
    let opened = open_all(&files, g);
    let queries = load_queries(&dir.join(queries_file));
    assert_eq!(queries.len(), 30);
    for q in &queries {
        let got = java_query_message(&opened, q);
        assert_eq!(
            got,
            (q.offsets.clone(), q.last_ts, q.last_phy),
            "{name}: queryMessage({}, {})",
            q.topic,
            q.key
        );
    }
    // Through the mapped files too.
    let mapped: Vec<_> = list_index_dir(&dir.join("store/index"))
        .unwrap()
        .iter()
        .map(|p| IndexFile::open(p, g).unwrap())
        .collect();
    let q = &queries[0];
    let r = query_offsets(
        mapped.iter().rev(),
        &q.topic,
        &q.key,
        q.max_num,
        q.begin,
        q.end,
    );
    let mut offs = r.phy_offsets.clone();
    offs.sort_unstable();
    assert_eq!(offs, q.offsets);
    eprintln!(
        "{name}: {} queryMessage answers reproduced from {} index files",
        queries.len(),
        files.len()
    );
}

#[test]
fn oracle_basic_49_queries() {
    check_queries("basic-4.9", "queries.json");
}

#[test]
fn oracle_basic_5x_queries() {
    check_queries("basic-5.x", "queries.json");
}

#[test]
fn oracle_query_order_and_limits() {
    let Some(dir) = oracle_dir("basic-4.9") else {
        return;
    };
    let g = oracle_geometry(&dir);
    let files = open_all(&oracle_index_files(&dir), g);
    // queryOffset returns newest first (files newest first, chains newest first); Java's
    // queryMessage sorts them, the oracle's lists are ascending.
    let r = query_offsets(files.iter().rev(), "TopicA", "hot-key-0", 32, 0, i64::MAX);
    assert_eq!(r.phy_offsets.len(), 32);
    assert!(
        r.phy_offsets.windows(2).all(|w| w[0] > w[1]),
        "newest first"
    );
    // maxNum is capped at maxMsgsNumBatch = 64: TopicA#hot-key-0 has 43 entries, TopicB has
    // more.
    let r = query_offsets(files.iter().rev(), "TopicA", "hot-key-0", 1000, 0, i64::MAX);
    assert_eq!(r.phy_offsets.len(), 43);
    let msgs = load_messages(&dir.join("messages.jsonl.gz"));
    let hits = |topic: &str, key: &str| {
        msgs.iter()
            .filter(|m| {
                m.topic == topic
                    && m.keys
                        .as_deref()
                        .is_some_and(|k| k.split(' ').any(|x| x == key))
            })
            .count()
    };
    assert_eq!(hits("TopicA", "hot-key-0"), 43);
    // No oracle key has more than 64 hits; a built file has.
    let hot: Vec<Msg> = (0..200)
        .map(|i| Msg {
            topic: "T".into(),
            uniq: None,
            keys: Some("hot".into()),
            offset: i * 100,
            store_ts: 1_700_000_000_000 + i,
            sys_flag: 0,
        })
        .collect();
    let built: Vec<_> = build_files(IndexGeometry::new(13, 150), &hot)
        .iter()
        .map(|f| IndexFile::new(f.file.to_bytes(), IndexGeometry::new(13, 150)).unwrap())
        .collect();
    let r = query_offsets(built.iter().rev(), "T", "hot", 1000, 0, i64::MAX);
    assert_eq!(
        r.phy_offsets,
        (136..200).rev().map(|i| i * 100).collect::<Vec<_>>()
    );

    let r = query_offsets(files.iter().rev(), "TopicA", "hot-key-0", 0, 0, i64::MAX);
    assert!(r.phy_offsets.is_empty());
    assert_eq!(
        r.index_last_update_phy_offset,
        files[2].header().end_phy_offset
    );
    // A time range ending before every file finds nothing.
    let r = query_offsets(files.iter().rev(), "TopicA", "hot-key-0", 32, 0, 1000);
    assert!(r.phy_offsets.is_empty());
    // A range inside the last file stops the walk there.
    let b = files[2].header().begin_timestamp;
    let r = query_offsets(files.iter().rev(), "TopicA", "hot-key-0", 64, b, i64::MAX);
    assert!(r
        .phy_offsets
        .iter()
        .all(|&o| o >= files[2].header().begin_phy_offset));
    // No files: nothing, zeros.
    let none: Vec<IndexFile<Vec<u8>>> = Vec::new();
    assert_eq!(
        query_offsets(none.iter(), "TopicA", "x", 32, 0, i64::MAX),
        QueryOffsetResult::default()
    );
    // The per-file lookup and the entries agree: every entry is found by its own chain.
    let f = &files[0];
    let mut n = 0;
    for item in f.entries() {
        let (_, e) = item.unwrap();
        let chain_hashes = f.select_phy_offsets_hash_for_test(e.key_hash);
        assert!(chain_hashes.contains(&e.phy_offset));
        n += 1;
    }
    assert_eq!(n, f.header().index_count - 1);
}

impl<B: AsRef<[u8]>> IndexFile<B> {
    /// Offsets of every entry in the chain of `hash` with that hash (test helper walking the same
    /// data as `select_phy_offsets` without needing the key string).
    fn select_phy_offsets_hash_for_test(&self, hash: i32) -> Vec<i64> {
        let mut out = Vec::new();
        let mut next = self.slot(slot_of(hash, self.geometry().slots)).unwrap();
        while next > 0 {
            let e = self.entry(next as u32).unwrap();
            if e.key_hash == hash {
                out.push(e.phy_offset);
            }
            next = e.prev;
        }
        out
    }
}

/// FORMAT.md 12 checks 24 and 25 on real data: each entry's offset is a record one of whose
/// keys hashes to the entry hash; from entry 2 on, `begin + diff*1000` is within 1000 ms below the
/// record's store time; the header's end values are the last entry's record.
#[test]
fn oracle_entries_match_records() {
    for name in ["basic-4.9", "basic-5.x"] {
        let Some(dir) = oracle_dir(name) else {
            continue;
        };
        let g = oracle_geometry(&dir);
        let msgs = load_messages(&dir.join("messages.jsonl.gz"));
        let by_offset: std::collections::HashMap<i64, &Msg> =
            msgs.iter().map(|m| (m.offset, m)).collect();
        let mut checked = 0;
        for (fname, bytes) in oracle_index_files(&dir) {
            let f = IndexFile::new(bytes.as_slice(), g).unwrap();
            let h = *f.header();
            for item in f.entries() {
                let (n, e) = item.unwrap();
                let m = by_offset[&e.phy_offset];
                let hashes: Vec<i32> = m
                    .uniq
                    .iter()
                    .map(String::as_str)
                    .chain(m.keys.iter().flat_map(|k| k.split(' ')))
                    .map(|k| key_hash(&m.topic, k))
                    .collect();
                assert!(hashes.contains(&e.key_hash), "{name}/{fname} entry {n}");
                if n >= 2 {
                    let t = h.begin_timestamp + e.time_diff as i64 * 1000;
                    assert!(
                        t <= m.store_ts && m.store_ts - t < 1000,
                        "{name}/{fname} entry {n}"
                    );
                }
                checked += 1;
            }
            let last = by_offset[&h.end_phy_offset];
            assert_eq!(last.store_ts, h.end_timestamp);
            assert_eq!(by_offset[&h.begin_phy_offset].store_ts, h.begin_timestamp);
        }
        eprintln!("{name}: {checked} entries match their records");
    }
}

// ---------------------------------------------------------------- oracle: building

fn check_build(name: &str) {
    let Some(dir) = oracle_dir(name) else { return };
    let g = oracle_geometry(&dir);
    let oracle = oracle_index_files(&dir);
    let msgs = load_messages(&dir.join("messages.jsonl.gz"));
    let mut ix = Indexer::new(g, utc_names).unwrap();
    let mut entries = 0;
    for m in &msgs {
        if let AddOutcome::Indexed(n) = ix.add(&m.record()) {
            entries += n;
        }
    }
    let built = ix.finish();
    assert_eq!(built.len(), oracle.len(), "{name}: number of index files");
    for (b, (oname, obytes)) in built.iter().zip(&oracle) {
        let bytes = b.file.to_bytes();
        assert_eq!(bytes.len(), obytes.len());
        if let Some(p) = bytes.iter().zip(obytes).position(|(a, b)| a != b) {
            panic!("{name}: built file differs from oracle {oname} at byte {p}");
        }
        // Names: ours are the store time of the record that caused the file, the broker's the
        // wall clock when it created it (the dispatch runs a little after the store).
        let ours = parse_file_name_in(&b.name, &Utc).unwrap();
        let java = parse_file_name_in(oname, &Utc).unwrap();
        eprintln!(
            "{name}: {oname} == built bytes; name from store time {} is {} ms before the broker's",
            b.name,
            java - ours
        );
        assert!((0..5_000).contains(&(java - ours)));
    }
    eprintln!(
        "{name}: {} records -> {entries} entries in {} files, byte-identical",
        msgs.len(),
        built.len()
    );
}

#[test]
fn oracle_basic_49_build_byte_identical() {
    check_build("basic-4.9");
}

#[test]
fn oracle_basic_5x_build_byte_identical() {
    check_build("basic-5.x");
}

#[test]
fn oracle_write_to_and_from_file_round_trip() {
    let Some(dir) = oracle_dir("basic-5.x") else {
        return;
    };
    let g = oracle_geometry(&dir);
    let tmp = tempfile::tempdir().unwrap();
    for (name, bytes) in oracle_index_files(&dir) {
        let f = IndexFile::new(bytes.as_slice(), g).unwrap();
        let b = IndexFileBuilder::from_file(&f).unwrap();
        assert_eq!(b.to_bytes(), bytes, "{name}: parse then write");
        let p = tmp.path().join(&name);
        b.write_to(&p).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), bytes, "{name}: write_to");
    }
}

/// crashed-4.9: the answers were computed after Java's abnormal recovery, which deletes every
/// index file whose endTimestamp is above the checkpoint's indexMsgTimestamp and re-indexes the
/// commitlog into a new file. We reproduce that recovery and then every answer exactly; the files
/// as killed give the same answers too (they had indexed every record before the kill).
#[test]
fn oracle_crashed_49_recovery() {
    let Some(dir) = oracle_dir("crashed-4.9") else {
        return;
    };
    let g = oracle_geometry(&dir);
    let killed = oracle_index_files(&dir);
    let queries = load_queries(&dir.join("queries-after-java-recovery.json"));
    let msgs = load_messages(&dir.join("messages-after-java-recovery.jsonl.gz"));
    let cp = std::fs::read(dir.join("store/checkpoint")).unwrap();
    let index_msg_ts = i64::from_be_bytes(cp[16..24].try_into().unwrap());

    // 1. IndexService.load(lastExitOK = false).
    let kept: Vec<_> = killed
        .iter()
        .filter(|(_, b)| IndexHeader::from_bytes(b).unwrap().end_timestamp <= index_msg_ts)
        .cloned()
        .collect();
    assert_eq!(
        (killed.len(), kept.len()),
        (2, 1),
        "the second file is deleted"
    );
    // 2. Recovery dispatch re-indexes every record (those below the kept file's end are skipped).
    let last = kept.last().unwrap();
    let f = IndexFile::new(last.1.as_slice(), g).unwrap();
    let named = NamedIndexFile {
        name: last.0.clone(),
        file: IndexFileBuilder::from_file(&f).unwrap(),
    };
    let mut ix = Indexer::resume(utc_names, named);
    for m in &msgs {
        ix.add(&m.record());
    }
    let recovered = ix.finish();
    assert_eq!(recovered.len(), 2);
    let rec_files: Vec<IndexFile<Vec<u8>>> = recovered
        .iter()
        .map(|n| IndexFile::new(n.file.to_bytes(), g).unwrap())
        .collect();
    for q in &queries {
        assert_eq!(
            java_query_message(&rec_files, q),
            (q.offsets.clone(), q.last_ts, q.last_phy),
            "after simulated recovery: queryMessage({}, {})",
            q.topic,
            q.key
        );
    }
    // 3. The rebuilt second file against the one the kill left: the record at the old file's
    // endPhyOffset is indexed again in full (equal offsets are not skipped), so the rebuilt file
    // starts with the keys of that record that the first file already holds.
    let old2 = IndexFile::new(killed[1].1.as_slice(), g).unwrap();
    let new2 = &rec_files[1];
    let extra = new2.header().index_count - old2.header().index_count;
    eprintln!(
        "crashed-4.9: killed file 2 has indexCount {}, rebuilt {} ({extra} duplicated entries of \
         the record at {}); all {} answers reproduced after simulated recovery",
        old2.header().index_count,
        new2.header().index_count,
        old2.header().begin_phy_offset,
        queries.len()
    );
    assert_eq!(new2.header().end_phy_offset, old2.header().end_phy_offset);
    assert_eq!(new2.header().end_timestamp, old2.header().end_timestamp);

    // 4. The files as killed answer every query the same way.
    let killed_files = open_all(&killed, g);
    for q in &queries {
        assert_eq!(
            java_query_message(&killed_files, q),
            (q.offsets.clone(), q.last_ts, q.last_phy),
            "as killed: queryMessage({}, {})",
            q.topic,
            q.key
        );
    }
    // 5. Building from scratch reproduces the killed files byte for byte.
    let mut ix = Indexer::new(g, utc_names).unwrap();
    for m in &msgs {
        ix.add(&m.record());
    }
    let fresh = ix.finish();
    assert_eq!(fresh.len(), killed.len());
    for (b, (oname, obytes)) in fresh.iter().zip(&killed) {
        assert!(b.file.to_bytes() == *obytes, "crashed-4.9: {oname} differs");
    }
}

// ---------------------------------------------------------------- inference

#[test]
fn infer_oracle_files() {
    for name in ["basic-4.9", "basic-5.x", "crashed-4.9"] {
        let Some(dir) = oracle_dir(name) else {
            continue;
        };
        for (fname, bytes) in oracle_index_files(&dir) {
            let inf = infer_geometry(&bytes);
            assert_eq!(
                inf.result,
                InferResult::Unique(IndexGeometry::new(1000, 4000)),
                "{name}/{fname}: {}",
                inf.reason
            );
            eprintln!("{name}/{fname}: {}", inf.reason);
        }
    }
}

#[test]
fn infer_built_geometries() {
    let recs = synthetic(3000);
    for (s, e) in [
        (7, 50),
        (5000, 20000),
        (300, 300),
        (1, 200),
        (3, 2000),
        (997, 13),
        (64, 4096),
        (4096, 64),
    ] {
        let g = IndexGeometry::new(s, e);
        let files = build_files(g, &recs);
        let mut unique = 0;
        for (i, f) in files.iter().enumerate() {
            let bytes = f.file.to_bytes();
            let inf = infer_geometry(&bytes);
            assert_eq!(check_geometry(&bytes, g), Ok(()), "{g} file {i}");
            assert!(
                check_file(&bytes, g).is_empty(),
                "{g} file {i}: {:?}",
                check_file(&bytes, g)
            );
            match &inf.result {
                InferResult::Unique(found) => {
                    assert_eq!(*found, g, "{g} file {i}: {}", inf.reason);
                    unique += 1;
                }
                InferResult::Ambiguous { candidates, total } => {
                    // Only tiny files with one or two entries can be ambiguous.
                    assert!(f.file.entries().len() <= 2, "{g} file {i}: {}", inf.reason);
                    assert!(*total as usize >= candidates.len());
                }
                InferResult::None => panic!("{g} file {i}: {}", inf.reason),
            }
        }
        assert!(unique >= 1, "{g}");
    }
}

#[test]
fn infer_default_geometry_file() {
    // A 420 MB file of the broker's default geometry with a few thousand entries, written sparse
    // and read through a map: inferred uniquely, quickly.
    let g = IndexGeometry::DEFAULT;
    let files = build_files(g, &synthetic(4000));
    assert_eq!(files.len(), 1);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("20260101000000000");
    files[0].file.write_to(&p).unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 420_000_040);
    let map = crate::format::Mapped::open(&p).unwrap();
    let t = std::time::Instant::now();
    let inf = infer_geometry(&map);
    let took = t.elapsed();
    assert_eq!(inf.result, InferResult::Unique(g), "{}", inf.reason);
    let t = std::time::Instant::now();
    assert_eq!(check_file(&map, g), vec![]);
    eprintln!(
        "default geometry: inferred in {took:?}, checked in {:?}: {}",
        t.elapsed(),
        inf.reason
    );
    let f = IndexFile::open(&p, g).unwrap();
    let r = query_offsets([&f], "TopicA", "UNIQ00000000", 32, 0, i64::MAX);
    assert_eq!(r.phy_offsets, vec![0]);
}

#[test]
fn infer_empty_file_is_ambiguous() {
    let g = IndexGeometry::new(1000, 4000);
    let empty = IndexFileBuilder::new(g, 500, 1_700_000_000_000)
        .unwrap()
        .to_bytes();
    let inf = infer_geometry(&empty);
    match &inf.result {
        InferResult::Ambiguous { candidates, total } => {
            // 84000 = 4s + 20e: s = 5, 10, ..., 20995 -> 4199 pairs.
            assert_eq!(*total, 4199, "{}", inf.reason);
            assert_eq!(candidates.len(), super::infer::MAX_LISTED);
            assert_eq!(candidates[0], IndexGeometry::new(5, 4199));
        }
        other => panic!("{other:?}"),
    }
    assert!(check_geometry(&empty, g).is_ok());
    assert!(check_geometry(&empty, IndexGeometry::new(5, 4199)).is_ok());
    let other = IndexGeometry::new(6, 4199);
    assert_eq!(
        check_geometry(&empty, other),
        Err(GeometryMismatch::Size {
            len: empty.len() as u64,
            geometry: other,
            expected: other.file_size(),
        })
    );
    let mut used = empty.clone();
    let e0 = g.entry_pos(0) as usize;
    used[e0 + 3] = 1;
    let e = check_geometry(&used, g).unwrap_err();
    assert_eq!(e, GeometryMismatch::EntryZeroUsed { at: e0 + 3 });
    assert_eq!(
        e.to_string(),
        format!("entry 0 (never used) has a non-zero byte {}", e0 + 3)
    );
    // The default size: its empty file cannot tell (5000000, 20000000) from millions of others.
    let default_empty_len = IndexGeometry::DEFAULT.file_size() as usize;
    let mut v = vec![0u8; default_empty_len];
    v[..40].copy_from_slice(&IndexHeader::default().to_bytes());
    let inf = infer_geometry(&v);
    assert!(matches!(inf.result, InferResult::Ambiguous { total, .. } if total > 1_000_000));
    assert!(inf.reason.contains("default"), "{}", inf.reason);
    // A size no geometry makes, and non-zero bytes in a file without entries.
    assert_eq!(
        infer_geometry(&empty[..empty.len() - 2]).result,
        InferResult::None
    );
    let mut dirty = empty.clone();
    dirty[100] = 1;
    assert_eq!(infer_geometry(&dirty).result, InferResult::None);
    assert_eq!(infer_geometry(&[0u8; 10]).result, InferResult::None);
}

// ---------------------------------------------------------------- checks

#[test]
fn check_oracle_files_clean() {
    for name in ["basic-4.9", "basic-5.x", "crashed-4.9"] {
        let Some(dir) = oracle_dir(name) else {
            continue;
        };
        let g = oracle_geometry(&dir);
        let files = oracle_index_files(&dir);
        for (fname, bytes) in &files {
            assert_eq!(check_file(bytes, g), vec![], "{name}/{fname}");
        }
        let seq: Vec<(&str, IndexHeader)> = files
            .iter()
            .map(|(n, b)| (n.as_str(), IndexHeader::from_bytes(b).unwrap()))
            .collect();
        assert_eq!(check_sequence(&seq), vec![], "{name}");
    }
}

#[test]
fn check_finds_corruption() {
    let g = IndexGeometry::new(7, 500);
    let files = build_files(g, &synthetic(100));
    assert_eq!(files.len(), 1);
    let good = files[0].file.to_bytes();
    assert!(check_file(&good, g).is_empty());
    let f = IndexFile::new(good.as_slice(), g).unwrap();
    let c = f.header().index_count as u32;

    // A slot pointing past indexCount.
    let mut b = good.clone();
    let p = g.slot_pos(3) as usize;
    b[p..p + 4].copy_from_slice(&(c as i32 + 5).to_be_bytes());
    assert!(check_file(&b, g)
        .iter()
        .any(|x| x.offset == p as u64 && x.what.contains("slot 3")));
    // A prev pointing forward.
    let mut b = good.clone();
    let p = g.entry_pos(2) as usize + 16;
    b[p..p + 4].copy_from_slice(&7i32.to_be_bytes());
    assert!(check_file(&b, g).iter().any(|x| x.offset == p as u64));
    // A hash moved to another bucket.
    let mut b = good.clone();
    let p = g.entry_pos(5) as usize;
    let h = i32::from_be_bytes(b[p..p + 4].try_into().unwrap());
    b[p..p + 4].copy_from_slice(&(h ^ 1).to_be_bytes());
    assert!(!check_file(&b, g).is_empty());
    // Garbage after the last entry.
    let mut b = good.clone();
    let p = g.entry_pos(c) as usize + 3;
    b[p] = 9;
    assert!(check_file(&b, g).iter().any(|x| x.offset == p as u64));
    // Header disagreeing with its entries.
    let mut b = good.clone();
    b[24..32].copy_from_slice(&1i64.to_be_bytes());
    assert!(check_file(&b, g).iter().any(|x| x.offset == 24));
    b[32..36].copy_from_slice(&99i32.to_be_bytes());
    assert!(check_file(&b, g).iter().any(|x| x.offset == 32));
    // indexCount beyond the file, and a truncated file.
    let mut b = good.clone();
    b[36..40].copy_from_slice(&1000i32.to_be_bytes());
    assert!(!check_file(&b, g).is_empty());
    assert!(IndexFile::new(b.as_slice(), g).is_ok());
    assert!(!check_file(&good[..good.len() - 1], g).is_empty());
    assert!(!check_file(&good[..30], g).is_empty());
    // Sequence: bad name, overlapping offsets.
    let files = build_files(IndexGeometry::new(7, 50), &synthetic(100));
    let h1 = IndexHeader::from_bytes(&files[0].file.to_bytes()).unwrap();
    let h2 = IndexHeader::from_bytes(&files[1].file.to_bytes()).unwrap();
    assert!(check_sequence(&[("20260101000000000", h1), ("20260101000000001", h2)]).is_empty());
    assert_eq!(
        check_sequence(&[("20260101000000001", h2), ("20260101000000002", h1)]).len(),
        2
    );
    assert_eq!(check_sequence(&[("index.bak", h1)]).len(), 1);
}

#[test]
fn fast_chain_check_agrees_with_the_entry_by_entry_one() {
    let g = IndexGeometry::new(7, 500);
    let good = build_files(g, &synthetic(300))[0].file.to_bytes();
    let count = IndexHeader::from_bytes(&good).unwrap().index_count.max(1);
    let used = count as u32;
    let slow = |b: &[u8]| {
        let mut sink = check::Sink::new();
        let n = check::check_chains(b, g, used, count, &mut sink);
        (n, sink.finish())
    };
    let (slots, problems) = slow(&good);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(slots > 0);
    assert_eq!(check::chains_as_written(&good, g, used), Some(slots));
    // Flip bits in the slot table and the entries: the one-pass check accepts exactly the files
    // the entry-by-entry check finds nothing wrong with, and counts the same slots.
    let (from, to) = (g.slot_pos(0) as usize, g.entry_pos(used) as usize);
    let mut x: u64 = 0x9E37_79B9;
    let mut rejected = 0;
    for _ in 0..3000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let at = from + (x >> 33) as usize % (to - from);
        let mut b = good.clone();
        b[at] ^= 1 << ((x >> 20) % 8);
        let (n, problems) = slow(&b);
        match check::chains_as_written(&b, g, used) {
            Some(fast) => {
                assert!(problems.is_empty(), "byte {at}: {problems:?}");
                assert_eq!(fast, n, "byte {at}");
            }
            None => {
                assert!(
                    !problems.is_empty(),
                    "byte {at}: rejected by the one-pass check only"
                );
                rejected += 1;
            }
        }
    }
    assert!(rejected > 100, "{rejected}");
}

#[test]
fn open_errors_name_offsets() {
    let g = IndexGeometry::new(7, 50);
    let good = build_files(g, &synthetic(20))[0].file.to_bytes();
    let e = IndexFile::new(&good[..100], g).unwrap_err();
    assert_eq!(e.offset, 100);
    assert!(e.to_string().contains("1068 bytes"), "{e}");
    let e = IndexFile::new(good.as_slice(), IndexGeometry::new(0, 270)).unwrap_err();
    assert!(matches!(e.kind, crate::format::ErrorKind::Invalid { .. }));
    let f = IndexFile::new(good.as_slice(), g).unwrap();
    assert!(f.slot(7).is_err());
    assert_eq!(f.entry(50).unwrap_err().offset, g.entry_pos(50));
    // A count beyond the capacity: iteration ends with an error, lookups stop quietly.
    let mut b = good.clone();
    b[36..40].copy_from_slice(&1000i32.to_be_bytes());
    let f = IndexFile::new(b.as_slice(), g).unwrap();
    let items: Vec<_> = f.entries().collect();
    assert_eq!(items.len(), 50);
    assert!(items.last().unwrap().is_err());
    let _ = f.select_phy_offsets("TopicA#hot-key-1", 64, 0, i64::MAX);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("20260101000000000");
    std::fs::write(&p, &good[..500]).unwrap();
    let err = IndexFile::open(&p, g).unwrap_err();
    assert!(err.to_string().contains("20260101000000000"), "{err}");
}

#[test]
fn cyclic_chain_terminates() {
    // Two entries pointing at each other: Java would spin forever when neither matches.
    let g = IndexGeometry::new(1, 10);
    let mut b = IndexFileBuilder::new(g, 0, 0).unwrap();
    b.put_key("x#1", 10, 1000);
    b.put_key("x#2", 20, 1000);
    let mut bytes = b.to_bytes();
    let p = g.entry_pos(1) as usize + 16;
    bytes[p..p + 4].copy_from_slice(&2i32.to_be_bytes());
    let f = IndexFile::new(bytes, g).unwrap();
    assert!(f
        .select_phy_offsets("x#nothing", 64, 0, i64::MAX)
        .is_empty());
    // When an entry of the cycle matches, Java collects it again until maxNum.
    let got = f.select_phy_offsets("x#1", 5, 0, i64::MAX);
    assert_eq!(got, vec![10; 5]);
}

#[test]
fn indexer_rules() {
    let g = IndexGeometry::new(5, 4); // 3 entries per file
    let mut ix = Indexer::new(g, |c: &NewFileContext<'_>| format!("f{}", c.sequence)).unwrap();
    let rec =
        |off: i64, uniq: Option<&'static str>, keys: Option<&'static str>, rb: bool| IndexRecord {
            topic: "T",
            uniq_key: uniq,
            keys,
            phy_offset: off,
            store_timestamp: 1000 + off,
            is_rollback: rb,
        };
    assert_eq!(
        ix.add(&rec(0, Some("U0"), Some("a  b "), false)),
        AddOutcome::Indexed(3)
    );
    // The file is full; the next record creates a file even though it is skipped.
    assert_eq!(
        ix.add(&rec(10, None, None, false)),
        AddOutcome::SkippedNoKeys
    );
    assert_eq!(ix.current().unwrap().name, "f1");
    assert_eq!(
        ix.add(&rec(20, Some("U2"), None, true)),
        AddOutcome::SkippedRollback
    );
    assert_eq!(
        ix.add(&rec(30, Some("U3"), Some("c d e"), false)),
        AddOutcome::Indexed(4)
    );
    // Below the current file's end: already indexed. Equal offsets are indexed again.
    assert_eq!(
        ix.add(&rec(29, Some("U"), None, false)),
        AddOutcome::SkippedAlreadyIndexed
    );
    assert_eq!(
        ix.add(&rec(30, None, Some("z"), false)),
        AddOutcome::Indexed(1)
    );
    assert!(IndexRecord::is_rollback_sys_flag(0xC));
    assert!(!IndexRecord::is_rollback_sys_flag(0x8));
    let files = ix.finish();
    let names: Vec<_> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["f0", "f1", "f2"]);
    // File 1 began from file 0's end values, then its first entry overwrote the begin values;
    // the record at 30 spans files 1 and 2.
    let h1 = files[1].file.header();
    assert_eq!(
        (h1.begin_phy_offset, h1.end_phy_offset, h1.index_count),
        (30, 30, 4)
    );
    let h2 = files[2].file.header();
    assert_eq!((h2.begin_phy_offset, h2.index_count), (30, 3));
    let keys: Vec<i32> = files[0].file.entries().iter().map(|e| e.key_hash).collect();
    assert_eq!(
        keys,
        [key_hash("T", "U0"), key_hash("T", "a"), key_hash("T", "b")]
    );
    // Lookups across the three files find the key in the middle one.
    let opened: Vec<_> = files
        .iter()
        .map(|f| IndexFile::new(f.file.to_bytes(), g).unwrap())
        .collect();
    let r = query_offsets(opened.iter().rev(), "T", "d", 32, 0, i64::MAX);
    assert_eq!(r.phy_offsets, vec![30]);
    assert_eq!(r.index_last_update_phy_offset, 30);
}

// ---------------------------------------------------------------- corrupt input, never a panic

fn exercise(bytes: &[u8], g: IndexGeometry) {
    let _ = IndexHeader::from_bytes(bytes);
    let _ = infer_geometry(bytes);
    let _ = check_file(bytes, g);
    let _ = check_geometry(bytes, g);
    if let Ok(f) = IndexFile::new(bytes, g) {
        for item in f.entries().take(10_000) {
            let _ = item;
        }
        for i in 0..g.slots.min(50) {
            let _ = f.slot(i);
        }
        for key in ["TopicA#hot-key-0", "TopicB#key-1", "x#y", ""] {
            let _ = f.select_phy_offsets(key, 64, 0, i64::MAX);
            let _ = f.select_phy_offsets(key, 3, 1_796_073_060_000, 1_796_073_070_000);
        }
        let files = [f];
        let _ = query_offsets(files.iter(), "TopicA", "hot-key-1", 32, 0, i64::MAX);
        if let Ok(b) = IndexFileBuilder::from_file(&files[0]) {
            let mut b = b;
            let _ = b.put_key("TopicA#k", 1, 2);
        }
    }
}

fn oracle_sample() -> Option<(Vec<u8>, IndexGeometry)> {
    let dir = oracle_dir("basic-4.9")?;
    let g = oracle_geometry(&dir);
    Some((oracle_index_files(&dir).swap_remove(2).1, g))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(s in 1u32..20, e in 1u32..40, seed in any::<u64>(), dense in any::<bool>()) {
        let g = IndexGeometry::new(s, e);
        let n = g.file_size() as usize;
        // A small PRNG so that shrinking stays cheap; `dense` makes small ints (plausible slots).
        let mut x = seed | 1;
        let bytes: Vec<u8> = (0..n).map(|_| {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            if dense { if x % 4 == 0 { (x >> 8) as u8 % 8 } else { 0 } } else { (x >> 8) as u8 }
        }).collect();
        exercise(&bytes, g);
        exercise(&bytes[..n / 2], g);
    }

    #[test]
    fn mutated_oracle_never_panics(flips in proptest::collection::vec((0usize..84040, any::<u8>()), 1..20), cut in 0usize..84100) {
        let Some((mut bytes, g)) = oracle_sample() else { return Ok(()) };
        for (p, v) in flips {
            if let Some(b) = bytes.get_mut(p) { *b ^= v | 1; }
        }
        exercise(&bytes, g);
        let cut = cut.min(bytes.len());
        exercise(&bytes[..cut], g);
    }

    #[test]
    fn mutated_header_never_panics(vals in proptest::collection::vec(any::<i32>(), 10)) {
        let Some((mut bytes, g)) = oracle_sample() else { return Ok(()) };
        for (i, v) in vals.iter().enumerate() {
            bytes[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
        }
        exercise(&bytes, g);
    }

    #[test]
    fn build_then_read_agrees(n in 1usize..300, s in 1u32..40, e in 2u32..60) {
        let g = IndexGeometry::new(s, e);
        let recs = synthetic(n);
        let files = build_files(g, &recs);
        let opened: Vec<_> = files.iter().map(|f| IndexFile::new(f.file.to_bytes(), g).unwrap()).collect();
        for f in &opened {
            prop_assert!(check_file(f.bytes(), g).is_empty());
        }
        // Every indexed key of the newest 3 records is found (within the 64 cap).
        for m in recs.iter().rev().take(3).filter(|m| !IndexRecord::is_rollback_sys_flag(m.sys_flag)) {
            if let Some(u) = &m.uniq {
                let r = query_offsets(opened.iter().rev(), &m.topic, u, 64, 0, i64::MAX);
                prop_assert!(r.phy_offsets.contains(&m.offset));
            }
        }
    }
}

#[test]
fn key_hashes_continue_the_topic_hash_as_hashing_the_built_key_does() {
    use super::write::IndexRecord;
    for (topic, uniq, keys) in [
        (
            "TopicA",
            Some("0A01001532055FFD2B27958940020000"),
            Some("k1 k2"),
        ),
        ("订单", Some("上海"), Some("  a  😀 b ")),
        ("%RETRY%G", None, Some("")),
        ("T", Some(""), None),
        ("😀", Some("x"), Some("Zürich")),
    ] {
        let rec = IndexRecord {
            topic,
            uniq_key: uniq,
            keys,
            phy_offset: 0,
            store_timestamp: 0,
            is_rollback: false,
        };
        let mut got = Vec::new();
        rec.key_hashes(&mut got);
        let want: Vec<i32> = uniq
            .into_iter()
            .chain(keys.unwrap_or("").split(' ').filter(|k| !k.is_empty()))
            .map(|k| super::key_hash(topic, k))
            .collect();
        assert_eq!(got, want, "{topic} {uniq:?} {keys:?}");
    }
}
