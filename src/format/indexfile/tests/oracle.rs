//! The Java store's own index files (`../shared/oracle`): every query answered as the broker's
//! `queryMessage` answers it, entries matching their records, files built byte for byte from the
//! records, and the crashed store's recovery reproduced.

use chrono::Utc;

use super::*;

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
    let (offs, ..) = java_query_message(&mapped, q);
    assert_eq!(offs, q.offsets);
    eprintln!(
        "{name}: {} queryMessage answers reproduced from {} index files",
        queries.len(),
        files.len()
    );
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_basic_49_queries() {
    check_queries("basic-4.9", "queries.json");
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_basic_5x_queries() {
    check_queries("basic-5.x", "queries.json");
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
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
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
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
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_basic_49_build_byte_identical() {
    check_build("basic-4.9");
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_basic_5x_build_byte_identical() {
    check_build("basic-5.x");
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
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
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
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
