//! Arbitrary bytes as a DLedger data file: every slot parses or is refused with an offset inside
//! the buffer, entries stay inside it, the walk ends, and each entry's index unit round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmqstore::format::dledger::entry::{parse_slot, Continuity, Slot};
use rmqstore::format::dledger::IndexUnit;

fuzz_target!(|data: &[u8]| {
    let mut at = 0usize;
    let mut chain = Continuity::default();
    loop {
        match parse_slot(data, at, 4096) {
            Ok(Slot::Entry(h)) => {
                assert!(h.size as usize >= 48 && at + h.size as usize <= data.len());
                let _ = chain.next(&h, at == 0);
                let u = IndexUnit::of(&h);
                assert_eq!(IndexUnit::from_bytes(&u.to_bytes()), Some(u));
                assert_eq!(u.disagreement(&h), None);
                at += h.size as usize;
            }
            Ok(Slot::FileEnd { .. }) | Ok(Slot::EndOfData) => break,
            Err(e) => {
                assert!(e.offset <= data.len() as u64 + 48);
                break;
            }
        }
    }
});
