//! Tests of `verify`: pieces against whole files, the fast property scan, index keys and tags
//! codes against the reference, interrupts, the healthy fixtures and the table of codes.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use super::props::{expected_index_keys, fast_tags_code, has_space, topic_prefix_hash, Props};
use super::seg_state::prop_crc_problem;
use super::*;
use crate::engine::store::dispatch::{index_keys, record_tags_code};
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::RecordIter;
use crate::format::finding::Severity;
use crate::format::indexfile::key_hash;
use crate::format::java::{bytes_hash_extend, masked_crc32};
use crate::format::mapped::Mapped;

fn fixture(name: &str) -> Store {
    crate::engine::store::test_fixture(name)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
}

/// The report of a store with its commitlog walked whole and in small pieces.
fn reports_by_piece_size(root: &Path) -> Vec<serde_json::Value> {
    let store = Store::open(root, &crate::format::geometry::GeometryInputs::default()).unwrap();
    [u64::MAX, 4096, 20_000, 300_000]
        .iter()
        .map(|&piece_size| {
            let opts = VerifyOptions {
                piece_size,
                ..VerifyOptions::default()
            };
            serde_json::to_value(verify(&store, &opts, None).unwrap()).unwrap()
        })
        .collect()
}

/// Walking the commitlog files in pieces changes nothing: healthy stores, a crashed one and
/// damaged copies (a changed body byte, a zeroed page, a broken size field, in the middle
/// of a file) get the report they get with whole files.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn pieces_give_the_report_of_whole_files() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut roots: Vec<PathBuf> = ["store-4.9", "store-5x"]
        .iter()
        .map(|n| base.join("fixtures").join(n))
        .collect();
    roots.extend(
        ["basic-4.9", "basic-5.x", "crashed-4.9"]
            .iter()
            .map(|n| base.join("../shared/oracle").join(n).join("store"))
            .filter(|p| p.is_dir()),
    );
    for root in &roots {
        let reports = reports_by_piece_size(root);
        for r in &reports[1..] {
            assert_eq!(r, &reports[0], "{}", root.display());
        }
        // The first record at or after a fraction of the file: (position, body position,
        // body length).
        fn record_after(b: &[u8], num: usize, den: usize) -> (usize, usize, usize) {
            let mut pos = 0;
            while let Ok(Record::Message(m)) = parse_record(b, pos, 0, false) {
                if pos >= b.len() * num / den && !m.body.is_empty() {
                    return (pos, pos + m.body_len_pos + 4, m.body.len());
                }
                pos += m.raw.len();
            }
            (pos, pos, 0)
        }
        type Damage = (&'static str, fn(&mut [u8]));
        let damages: [Damage; 3] = [
            ("a changed body byte", |b| {
                let (_, body, len) = record_after(b, 1, 3);
                b[body + len / 2] ^= 0x40;
            }),
            ("a zeroed page", |b| {
                let at = b.len() / 2 / 4096 * 4096;
                b[at..at + 4096].fill(0);
            }),
            ("a broken size field", |b| {
                let (pos, _, _) = record_after(b, 2, 3);
                b[pos..pos + 4].copy_from_slice(&7i32.to_be_bytes());
            }),
        ];
        for (what, damage) in damages {
            let tmp = tempfile::tempdir().unwrap();
            let copy = tmp.path().join("store");
            copy_tree(root, &copy);
            let first = std::fs::read_dir(copy.join("commitlog"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .min()
                .unwrap();
            let mut bytes = std::fs::read(&first).unwrap();
            damage(&mut bytes);
            std::fs::write(&first, &bytes).unwrap();
            let reports = reports_by_piece_size(&copy);
            assert!(
                reports[0]["summary"]["healthy"] == false || reports[0]["summary"]["warnings"] != 0,
                "{what} in {} went unnoticed",
                root.display()
            );
            for r in &reports[1..] {
                assert_eq!(r, &reports[0], "{what} in {}", root.display());
            }
        }
    }
}

#[test]
fn has_space_sees_a_space_anywhere() {
    for len in 0..40usize {
        let clean = vec![b'k'; len];
        assert!(!has_space(&clean), "len {len}");
        for at in 0..len {
            let mut b = clean.clone();
            b[at] = b' ';
            assert!(has_space(&b), "len {len} at {at}");
            // Bytes next to a space in value are not spaces.
            b[at] = b' ' - 1;
            assert!(!has_space(&b), "len {len} at {at}");
            b[at] = b' ' + 1;
            assert!(!has_space(&b), "len {len} at {at}");
            b[at] = b' ' | 0x80;
            assert!(!has_space(&b), "len {len} at {at}");
        }
    }
}

#[test]
fn fast_index_keys_agree_with_dispatch() {
    for name in ["store-4.9", "store-5x"] {
        let store = fixture(name);
        for seg in &store.commitlog.segments {
            let map = Mapped::open(&seg.path).unwrap();
            for m in RecordIter::new(&map, seg, true) {
                let m = m.unwrap();
                let d = index_keys(&m);
                let p = Props::of(&m);
                let mut keys = Vec::new();
                expected_index_keys(&m, &p, topic_prefix_hash(&m.topic), &mut keys);
                let want: Vec<i32> = d
                    .iter()
                    .map(|k| {
                        let (t, key) = k.split_once('#').unwrap();
                        key_hash(t, key)
                    })
                    .collect();
                let got: Vec<i32> = keys.clone();
                assert_eq!(got, want, "{name} @{}", m.position);
                assert_eq!(
                    fast_tags_code(&m, &p, &store.geometry),
                    record_tags_code(&m, &store.geometry).ok(),
                    "{name} @{}",
                    m.position
                );
            }
        }
    }
}

#[test]
fn fast_property_scan_and_hash_agree_with_the_reference() {
    let mut x: u64 = 0x1234_5678;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as u32
    };
    for _ in 0..5000 {
        // names (ours, near misses, others), separators and short runs of bytes close to
        // the separators in value (0, 3, 0x81, 0x82), over several 64-byte blocks
        let pieces: [&[u8]; 22] = [
            b"TAGS",
            b"KEYS",
            b"UNIQ_KEY",
            b"DELAY",
            b"REAL_TOPIC",
            b"RETRY_TOPIC",
            b"TRANSACTION_CHECK_TIMES",
            b"INNER_NUM",
            b"__CRC32#",
            b"TAGSX",
            b"TAG",
            b"traceId",
            b"\x01",
            b"\x02",
            b"\x01",
            b"\x02",
            b"a K=",
            b"\xC3\xA9",
            b"\x00\x03",
            b"\x81\x82\xFF",
            b" ",
            b"7",
        ];
        let mut b = Vec::new();
        let target = (next() % 300) as usize;
        while b.len() < target {
            b.extend_from_slice(pieces[(next() % pieces.len() as u32) as usize]);
        }
        // Props::of against the same fields picked from the reference property parser
        let props = crate::format::commitlog::Properties(&b);
        let mut want = Props::default();
        for (k, v) in props.iter_raw() {
            match k {
                b"TAGS" => want.tags = Some(v),
                b"DELAY" => want.delay = Some(v),
                b"KEYS" => want.keys = Some(v),
                b"UNIQ_KEY" => {
                    want.uniq = Some(v);
                    want.uniq_count += 1;
                }
                b"REAL_TOPIC" => want.real_topic = true,
                b"RETRY_TOPIC" => want.retry_topic = true,
                b"TRANSACTION_CHECK_TIMES" => want.tx_check = true,
                b"INNER_NUM" => want.inner_num = Some(v),
                b"__CRC32#" => want.crc32 = true,
                _ => {}
            }
        }
        let got = Props::of_block(&b);
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "{b:?}");
        let s = String::from_utf8_lossy(&b);
        assert_eq!(
            bytes_hash_extend(7, &b),
            crate::format::java::utf16_hash_extend(7, &s),
            "{b:?}"
        );
    }
}

#[test]
fn an_interrupt_stops_the_run_between_pieces() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let store = fixture("store-4.9");
    let flag = Arc::new(AtomicBool::new(true));
    let opts = VerifyOptions {
        interrupt: Some(flag.clone()),
        ..Default::default()
    };
    let e = verify(&store, &opts, None).unwrap_err();
    assert!(
        matches!(e, crate::format::Error::Interrupted { what: "verify", .. }),
        "{e}"
    );
    assert!(e.to_string().ends_with("verify interrupted"), "{e}");
    // set during the walk: the workers stop before the last piece
    flag.store(false, Ordering::Relaxed);
    let opts = VerifyOptions {
        piece_size: 16 << 10,
        ..opts
    };
    let seen = AtomicU64::new(0);
    let stop = |_p: Phase, done: u64, _t: u64| {
        seen.store(done, Ordering::Relaxed);
        flag.store(true, Ordering::Relaxed);
    };
    assert!(verify(&store, &opts, Some(&stop)).is_err());
    let total: u64 = store.commitlog.segments.iter().map(|s| s.len).sum();
    assert!(seen.load(Ordering::Relaxed) < total);
    flag.store(false, Ordering::Relaxed);
    assert!(verify(&store, &opts, None).unwrap().summary.healthy);
}

#[test]
fn healthy_fixtures_have_no_errors() {
    for name in ["store-4.9", "store-5x"] {
        let store = fixture(name);
        let r = verify(&store, &VerifyOptions::default(), None).unwrap();
        let bad: Vec<_> = r
            .findings
            .iter()
            .filter(|f| f.severity >= Severity::Warning)
            .collect();
        assert!(bad.is_empty(), "{name}: {bad:#?}");
        assert!(r.summary.healthy);
        assert!(r.summary.messages > 0);
    }
}

#[test]
fn crc32_property() {
    // A record image: anything, then the 20 reserved bytes with the CRC of what precedes.
    let mut raw = b"some record bytes before the property....".to_vec();
    let crc = masked_crc32(&raw);
    let digits: String = format!("{crc:010}").chars().rev().collect();
    raw.extend_from_slice(b"__CRC32#\x01");
    raw.extend_from_slice(digits.as_bytes());
    raw.push(2);
    assert_eq!(prop_crc_problem(&raw), None);
    // FORMAT.md 2.5: CRC 123 is stored as 3210000000
    assert_eq!(
        format!("{:010}", 123).chars().rev().collect::<String>(),
        "3210000000"
    );
    let mut bad = raw.clone();
    bad[3] ^= 1;
    assert!(prop_crc_problem(&bad).unwrap().contains("says"));
    let mut moved = raw.clone();
    moved.push(b'x');
    assert!(prop_crc_problem(&moved).unwrap().contains("last 20 bytes"));
}
