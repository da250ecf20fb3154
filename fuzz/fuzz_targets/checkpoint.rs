//! Arbitrary bytes as the `checkpoint` file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmqstore::format::checkpoint::{Checkpoint, CHECKPOINT_FILE_SIZE, CHECKPOINT_V4_LEN};

fuzz_target!(|data: &[u8]| {
    match Checkpoint::from_bytes(data) {
        Ok(c) => {
            assert!(data.len() >= CHECKPOINT_V4_LEN);
            let b = c.to_bytes();
            assert_eq!(b.len(), CHECKPOINT_FILE_SIZE);
            assert_eq!(Checkpoint::from_bytes(&b), Ok(c));
            let n = data.len().min(40) / 8 * 8;
            assert_eq!(&b[..n], &data[..n]);
            // What the broker derives from it at startup.
            let m = c.min_timestamp();
            assert!(m >= 0);
            let _ = c.min_timestamp_index();
        }
        Err(e) => {
            assert!(data.len() < CHECKPOINT_V4_LEN);
            assert_eq!(e.offset, 0);
            let _ = e.to_string();
        }
    }
});
