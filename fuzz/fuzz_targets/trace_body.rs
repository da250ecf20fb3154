//! Arbitrary bytes as a message trace body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmqstore::format::trace::{encode_body, records, trace_keys};

fuzz_target!(|data: &[u8]| {
    let mut decoded = Vec::new();
    for r in records(data) {
        match r {
            Ok(r) => decoded.push(r),
            Err(e) => {
                assert!(e.byte <= data.len());
                let _ = e.to_string();
            }
        }
    }
    // what decoded writes back and decodes to the same records
    let body = encode_body(&decoded);
    let again: Vec<_> = records(&body).collect();
    assert_eq!(again.len(), decoded.len());
    let _ = trace_keys(&decoded);
});
