//! Arbitrary bytes as a broker config JSON file: the fastjson-tolerant parser, the writers, and
//! the four typed views.
#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use rmqstore::format::config::{
    parse, to_fastjson_compact, to_fastjson_pretty, ConfigFile, ConsumerOffsets, DelayOffsets,
    SubscriptionGroups, TopicConfigs,
};

/// A typed view that reads must write text that reads again; after one round trip the view and
/// its text are a fixed point.
fn typed<T: ConfigFile + PartialEq + Debug>(data: &[u8]) {
    match T::from_bytes(data) {
        Ok(t) => {
            let text = t.to_pretty();
            let t1 = T::from_bytes(text.as_bytes()).unwrap_or_else(|e| {
                panic!("{}: own output does not read: {e}\n{text}", T::FILE_NAME)
            });
            let text1 = t1.to_pretty();
            let t2 = T::from_bytes(text1.as_bytes()).unwrap();
            assert_eq!(t1, t2, "{}", T::FILE_NAME);
            assert_eq!(text1, t2.to_pretty(), "{}", T::FILE_NAME);
        }
        Err(e) => {
            assert!(e.offset <= data.len() as u64, "{e}");
            let _ = e.to_string();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Ok(v) => {
            let pretty = to_fastjson_pretty(&v);
            assert_eq!(parse(pretty.as_bytes()).as_ref(), Ok(&v), "{pretty}");
            let compact = to_fastjson_compact(&v);
            assert_eq!(parse(compact.as_bytes()).as_ref(), Ok(&v), "{compact}");
        }
        Err(e) => {
            assert!(e.offset <= data.len() as u64, "{e}");
            let _ = e.to_string();
        }
    }
    typed::<ConsumerOffsets>(data);
    typed::<DelayOffsets>(data);
    typed::<TopicConfigs>(data);
    typed::<SubscriptionGroups>(data);
});
