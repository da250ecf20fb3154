//! Golden values from FORMAT.md (hashes, slots, header and entry bytes, time diffs, file
//! names), the indexer's rules, and key hashes as the broker builds them.

use chrono::{FixedOffset, Utc};

use super::*;

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

/// The header of the first basic-4.9 oracle file, and its bytes spelled out from the layout in 7.1.
fn golden_header() -> (IndexHeader, [u8; 40]) {
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
    (h, want)
}

#[test]
fn golden_header_bytes() {
    let (h, want) = golden_header();
    assert_eq!(h.to_bytes(), want);
    assert_eq!(IndexHeader::from_bytes(&want).unwrap(), h);
    assert_eq!(h.effective_index_count(), 4000);
    assert_eq!(IndexHeader::default().effective_index_count(), 1);
    let e = IndexHeader::from_bytes(&want[..39]).unwrap_err();
    assert_eq!(e.offset, 0);
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn golden_header_is_the_oracle_files() {
    let dir = oracle_dir("basic-4.9").expect("basic-4.9");
    let files = oracle_index_files(&dir);
    assert_eq!(
        files[0].1[..40],
        golden_header().1,
        "oracle header differs from the hand-made one"
    );
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
