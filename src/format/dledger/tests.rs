use proptest::prelude::*;

use super::entry::{encode_entry, encode_file_end, parse_slot, Continuity};
use super::*;
use crate::format::error::ErrorKind;

/// Two entries and a file-end marker in a 256-byte file starting at 1024.
fn small_file() -> Vec<u8> {
    let mut f = encode_entry(7, 2, 1024, b"first body");
    f.extend(encode_entry(8, 2, 1024 + f.len() as i64, b"second"));
    let left = 256 - f.len();
    f.extend(encode_file_end(left as i32));
    f.resize(256, 0);
    f
}

#[test]
fn entries_round_trip_and_the_file_end_marker_is_found() {
    let f = small_file();
    let Ok(Slot::Entry(a)) = parse_slot(&f, 0, 1024) else {
        panic!("{:?}", parse_slot(&f, 0, 1024))
    };
    assert_eq!(
        (a.index, a.term, a.pos, a.size, a.body_size),
        (7, 2, 1024, 58, 10)
    );
    assert_eq!(a.record_offset(), 1072);
    assert_eq!(&f[48..58], b"first body");
    let Ok(Slot::Entry(b)) = parse_slot(&f, 58, 1024) else {
        panic!()
    };
    assert_eq!((b.index, b.pos), (8, 1082));
    let mut c = Continuity::default();
    assert_eq!(c.next(&a, false), None);
    assert_eq!(c.next(&b, false), None);
    assert_eq!(
        parse_slot(&f, 112, 1024),
        Ok(Slot::FileEnd { left: 256 - 112 })
    );
    assert_eq!(parse_slot(&f, 200, 1024), Ok(Slot::EndOfData));
    assert_eq!(parse_slot(&f, 256, 1024), Ok(Slot::EndOfData));
    assert_eq!(
        IndexUnit::from_bytes(&IndexUnit::of(&a).to_bytes()),
        Some(IndexUnit::of(&a))
    );
    assert_eq!(IndexUnit::of(&a).disagreement(&a), None);
}

#[test]
fn damaged_entries_give_clear_errors() {
    let f = small_file();
    // a truncated header
    let e = parse_slot(&f[..30], 0, 1024).unwrap_err();
    assert_eq!(e.offset, 0);
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                needed: 48,
                left: 30,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("DLedger entry header"), "{e}");
    // a size that runs past the file
    let mut lying = f.clone();
    lying[4..8].copy_from_slice(&1000i32.to_be_bytes());
    let e = parse_slot(&lying, 0, 1024).unwrap_err();
    assert_eq!(e.offset, 4);
    assert!(
        matches!(
            e.kind,
            ErrorKind::BadSize {
                found: 1000,
                min: 48,
                max: 256
            }
        ),
        "{e}"
    );
    // a size below the header
    lying[4..8].copy_from_slice(&20i32.to_be_bytes());
    assert!(matches!(
        parse_slot(&lying, 0, 1024).unwrap_err().kind,
        ErrorKind::BadSize { .. }
    ));
    // a body size that disagrees with the size
    let mut body = f.clone();
    body[44..48].copy_from_slice(&11i32.to_be_bytes());
    let e = parse_slot(&body, 0, 1024).unwrap_err();
    assert_eq!(e.offset, 44);
    assert!(
        matches!(
            e.kind,
            ErrorKind::SizeMismatch {
                stored: 58,
                computed: 59
            }
        ),
        "{e}"
    );
    // a wrong magic
    let mut magic = f.clone();
    magic[0..4].copy_from_slice(&0xdaa320a7u32.to_be_bytes());
    let e = parse_slot(&magic, 0, 1024).unwrap_err();
    assert!(
        e.to_string()
            .contains("DLedger entry magic: expected 1 (entry) or -1"),
        "{e}"
    );
    // a pos that is not where the entry is
    let e = parse_slot(&f, 0, 0).unwrap_err();
    assert_eq!(e.offset, 24);
    assert!(e.to_string().contains("pos: expected 0, found 1024"), "{e}");
    // a short index unit
    let e = IndexUnit::parse(&[0u8; 40], 16).unwrap_err();
    assert!(
        e.to_string()
            .contains("expected 32 bytes for DLedger index unit, only 24 left"),
        "{e}"
    );
}

#[test]
fn broken_chains_name_what_broke() {
    let mk =
        |index, term, pos| EntryHeader::from_bytes(&encode_entry(index, term, pos, b"x")).unwrap();
    let mut c = Continuity::default();
    c.next(&mk(0, 3, 0), false);
    let b = c.next(&mk(2, 3, 49), false).unwrap();
    assert_eq!((b.what, b.expected, b.found), ("index", 1, 2));
    let b = c.next(&mk(3, 2, 98), false).unwrap();
    assert_eq!((b.expected, b.found), (3, 2));
    let b = c.next(&mk(4, 2, 99), false).unwrap();
    assert_eq!((b.what, b.expected, b.found), ("pos", 147, 99));
    // the first entry of the next file starts at the file's start, not after the last one
    assert_eq!(c.next(&mk(5, 2, 4096), true), None);
}

#[test]
fn checkpoint_and_currterm_files() {
    let cp =
        DledgerCheckpoint::from_bytes(b"#comment\ncommittedIndex=2597\nendIndex=2598\n").unwrap();
    assert_eq!((cp.committed_index, cp.end_index), (Some(2597), Some(2598)));
    assert_eq!(
        DledgerCheckpoint::from_bytes(cp.to_text().as_bytes()).unwrap(),
        cp
    );
    let t = TermFile::from_bytes(b"voteLeader=n0\ncurrTerm=4\n").unwrap();
    assert_eq!(
        (t.curr_term, t.vote_leader.as_deref()),
        (Some(4), Some("n0"))
    );
    assert_eq!(TermFile::from_bytes(t.to_text().as_bytes()).unwrap(), t);
    assert_eq!(
        TermFile::from_bytes(b"voteLeader=\ncurrTerm=1\n")
            .unwrap()
            .vote_leader,
        None
    );
    let e = DledgerCheckpoint::from_bytes(b"endIndex=12\ncommittedIndex=1x\n").unwrap_err();
    assert_eq!(e.offset, 27);
    assert!(
        e.to_string()
            .contains("committedIndex: \"1x\" is not a number"),
        "{e}"
    );
    assert!(TermFile::from_bytes(b"currTerm=\xff\n").is_err());
}

proptest! {
    #[test]
    fn no_bytes_make_the_parsers_panic(buf in proptest::collection::vec(any::<u8>(), 0..200), at in 0usize..220, start in any::<u64>()) {
        if let Ok(Slot::Entry(h)) = parse_slot(&buf, at, start) {
            prop_assert!(at + h.size as usize <= buf.len());
            prop_assert_eq!(h.body_size as usize + HEADER_SIZE, h.size as usize);
        }
        let _ = IndexUnit::parse(&buf, at);
        let _ = DledgerCheckpoint::from_bytes(&buf);
        let _ = TermFile::from_bytes(&buf);
    }
}

/// Random and mutated entry bytes through the slot parser and the chain: no panic, every entry
/// inside the buffer, the walk ends within the buffer's length.
#[test]
fn mutated_entries_never_panic_the_walk() {
    use super::entry::{encode_entry, parse_slot, Continuity, Slot};
    let mut clean = Vec::new();
    for i in 0..4i64 {
        let pos = clean.len() as i64;
        clean.extend(encode_entry(
            i,
            i / 2,
            pos,
            &vec![i as u8; 30 + i as usize * 7],
        ));
    }
    clean.resize(clean.len() + 64, 0);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..5000 {
        let mut b = clean.clone();
        for _ in 0..1 + round % 6 {
            let at = (next() % b.len() as u64) as usize;
            b[at] = next() as u8;
        }
        if round % 7 == 0 {
            b.truncate((next() % b.len() as u64) as usize);
        }
        let (mut at, mut steps, mut chain) = (0usize, 0, Continuity::default());
        loop {
            steps += 1;
            assert!(
                steps <= b.len() / 48 + 2,
                "round {round}: the walk does not end"
            );
            match parse_slot(&b, at, 0) {
                Ok(Slot::Entry(h)) => {
                    assert!(h.size >= 48 && at + h.size as usize <= b.len());
                    assert_eq!(h.pos as usize, at);
                    let _ = chain.next(&h, false);
                    at += h.size as usize;
                }
                Ok(_) => break,
                Err(e) => {
                    assert!(e.offset <= b.len() as u64 + 48, "round {round}: {e}");
                    break;
                }
            }
        }
    }
}
