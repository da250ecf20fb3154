//! Tests: golden strings (FORMAT.md 9.3-9.5), byte-exact round trips of the oracle files written
//! by real brokers, typed values, `.bak` fallback, persistence, and a no-panic fuzz of the parser.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;
use crate::format::error::{ConfigLoadError, Error, ErrorKind, Unusable};

const ORACLE: &str = "../shared/oracle";
const ORACLE_SETS: [&str; 3] = ["basic-4.9", "basic-5.x", "crashed-4.9"];

/// `<oracle>/<set>/store/config`, or `None` (with a message) when the oracle is absent.
fn oracle_dir(set: &str) -> Option<PathBuf> {
    let dir = Path::new(ORACLE).join(set).join("store/config");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("SKIP: oracle folder {} not found", dir.display());
        None
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file in every oracle config folder.
fn oracle_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for set in ORACLE_SETS {
        let Some(dir) = oracle_dir(set) else { continue };
        let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("read oracle dir")
            .map(|e| e.expect("dir entry").path())
            .collect();
        names.sort();
        out.extend(names);
    }
    out
}

fn pretty(text: &str) -> String {
    to_fastjson_pretty(&parse(text.as_bytes()).expect("parse"))
}

// ---------------------------------------------------------------------------------------------
// Golden strings.

const GOLDEN_CONSUMER_OFFSET: &str = "{\n\t\"offsetTable\":{\n\t\t\"TopicTest@group_a\":{0:250,1:251,2:250,3:249\n\t\t},\n\t\t\"%RETRY%group_a@group_a\":{0:0\n\t\t}\n\t}\n}";
const GOLDEN_DELAY_OFFSET: &str = "{\n\t\"offsetTable\":{1:5,2:0,3:12\n\t}\n}";
const GOLDEN_TOPICS: &str = "{\n\t\"dataVersion\":{\n\t\t\"counter\":3,\n\t\t\"timestamp\":1700000000000\n\t},\n\t\"topicConfigTable\":{\n\t\t\"TopicTest\":{\n\t\t\t\"order\":false,\n\t\t\t\"perm\":6,\n\t\t\t\"readQueueNums\":4,\n\t\t\t\"topicFilterType\":\"SINGLE_TAG\",\n\t\t\t\"topicName\":\"TopicTest\",\n\t\t\t\"topicSysFlag\":0,\n\t\t\t\"writeQueueNums\":4\n\t\t}\n\t}\n}";

#[test]
fn golden_format_examples_round_trip() {
    for golden in [GOLDEN_CONSUMER_OFFSET, GOLDEN_DELAY_OFFSET, GOLDEN_TOPICS] {
        assert_eq!(pretty(golden), golden);
    }
}

#[test]
fn golden_consumer_offset_built_from_scratch() {
    let mut co = ConsumerOffsets::new();
    for (q, o) in [(0, 250), (1, 251), (2, 250), (3, 249)] {
        co.set("TopicTest", "group_a", q, o);
    }
    co.set("%RETRY%group_a", "group_a", 0, 0);
    assert_eq!(co.to_pretty(), GOLDEN_CONSUMER_OFFSET);
    assert_eq!(
        ConsumerOffsets::from_bytes(GOLDEN_CONSUMER_OFFSET.as_bytes()).expect("parse"),
        co
    );
}

#[test]
fn golden_delay_offset_built_from_scratch() {
    let mut d = DelayOffsets::new();
    d.set(1, 5);
    d.set(2, 0);
    d.set(3, 12);
    assert_eq!(d.to_pretty(), GOLDEN_DELAY_OFFSET);
    assert_eq!(
        DelayOffsets::new().to_pretty(),
        "{\n\t\"offsetTable\":{}\n}"
    );
}

#[test]
fn golden_topics_built_from_scratch() {
    let mut t = TopicConfigs::new(DataVersion::new(3, 1_700_000_000_000));
    let mut c = TopicConfig::new("TopicTest");
    c.read_queue_nums = 4;
    c.write_queue_nums = 4;
    t.insert(c);
    assert_eq!(t.to_pretty(), GOLDEN_TOPICS);
}

#[test]
fn golden_subscription_group_entry() {
    let mut s = SubscriptionGroups::new(DataVersion::new(1, 2));
    s.insert(SubscriptionGroupConfig::new("group_a"));
    let expected = "{\n\t\"dataVersion\":{\n\t\t\"counter\":1,\n\t\t\"timestamp\":2\n\t},\n\t\"subscriptionGroupTable\":{\n\t\t\"group_a\":{\n\t\t\t\"brokerId\":0,\n\t\t\t\"consumeBroadcastEnable\":true,\n\t\t\t\"consumeEnable\":true,\n\t\t\t\"consumeFromMinEnable\":true,\n\t\t\t\"groupName\":\"group_a\",\n\t\t\t\"notifyConsumerIdsChangedEnable\":true,\n\t\t\t\"retryMaxTimes\":16,\n\t\t\t\"retryQueueNums\":1,\n\t\t\t\"whichBrokerWhenConsumeSlowly\":1\n\t\t}\n\t}\n}";
    assert_eq!(s.to_pretty(), expected);
    assert_eq!(
        SubscriptionGroups::from_bytes(expected.as_bytes()).expect("parse"),
        s
    );
}

#[test]
fn writer_shapes() {
    let v = JsonValue::Object(vec![
        (
            JsonKey::from("a"),
            JsonValue::Array(vec![JsonValue::str("x"), JsonValue::str("y")]),
        ),
        (JsonKey::from("e"), JsonValue::Object(vec![])),
        (
            JsonKey::from("n"),
            JsonValue::Object(vec![(JsonKey::Int(-1), JsonValue::int(7))]),
        ),
        (JsonKey::from("z"), JsonValue::Array(vec![])),
    ]);
    assert_eq!(
        to_fastjson_pretty(&v),
        "{\n\t\"a\":[\"x\",\"y\"],\n\t\"e\":{},\n\t\"n\":{-1:7\n\t},\n\t\"z\":[]\n}"
    );
    assert_eq!(
        to_fastjson_compact(&v),
        "{\"a\":[\"x\",\"y\"],\"e\":{},\"n\":{-1:7},\"z\":[]}"
    );
    assert_eq!(to_fastjson_pretty(&JsonValue::Object(vec![])), "{}");
    assert_eq!(to_fastjson_pretty(&JsonValue::Null), "null");
}

#[test]
fn writer_escapes_like_fastjson() {
    let s = "q\"b\\s/t\tn\nr\rf\u{c}b\u{8}\u{0}\u{7}\u{b}\u{1f}\u{7f}\u{a0}\u{a1}é€\u{2028}😀";
    let out = to_fastjson_compact(&JsonValue::str(s));
    assert_eq!(
        out,
        "\"q\\\"b\\\\s/t\\tn\\nr\\rf\\fb\\b\\u0000\\u0007\\u000B\\u001F\\u007F\\u00A0\u{a1}é€\\u2028😀\""
    );
    // And it reads back to the same string.
    assert_eq!(parse(out.as_bytes()).expect("parse"), JsonValue::str(s));
}

// ---------------------------------------------------------------------------------------------
// Parser.

#[test]
fn parses_strict_json_and_fastjson_keys() {
    let v = parse(b"\xEF\xBB\xBF \t\r\n{\"a\" : [1, -2.5e+3, true, false, null, \"s\"], 0:1, -3:4, \"0\":5}\n")
        .expect("parse");
    assert_eq!(
        v,
        JsonValue::Object(vec![
            (
                JsonKey::from("a"),
                JsonValue::Array(vec![
                    JsonValue::Number("1".into()),
                    JsonValue::Number("-2.5e+3".into()),
                    JsonValue::Bool(true),
                    JsonValue::Bool(false),
                    JsonValue::Null,
                    JsonValue::str("s"),
                ])
            ),
            (JsonKey::Int(0), JsonValue::int(1)),
            (JsonKey::Int(-3), JsonValue::int(4)),
            (JsonKey::from("0"), JsonValue::int(5)),
        ])
    );
    assert_eq!(v.get("0"), Some(&JsonValue::int(5)));
    assert_eq!(parse(b"{}").expect("parse"), JsonValue::Object(vec![]));
    assert_eq!(parse(b" [ ] ").expect("parse"), JsonValue::Array(vec![]));
    assert_eq!(parse(b"-0").expect("parse"), JsonValue::Number("-0".into()));
}

/// fastjson's default features (`AllowUnQuotedFieldNames`, `AllowSingleQuotes`) let the broker
/// read keys without quotes and strings in single quotes: so does the reader.
#[test]
fn parses_unquoted_and_single_quoted_keys_and_strings() {
    let v =
        parse(b"{offsetTable:{'T@G':{0:5}}, $x_1 : 'it\\'s \"q\"', n\xc3\xa9:1}").expect("parse");
    assert_eq!(
        v,
        JsonValue::Object(vec![
            (
                JsonKey::from("offsetTable"),
                JsonValue::Object(vec![(
                    JsonKey::from("T@G"),
                    JsonValue::Object(vec![(JsonKey::Int(0), JsonValue::int(5))])
                )])
            ),
            (JsonKey::from("$x_1"), JsonValue::str("it's \"q\"")),
            (JsonKey::from("n\u{e9}"), JsonValue::int(1)),
        ])
    );
    // such a file is the main file, not a reason to fall back to the .bak
    let dir = setup(Some(b"{offsetTable:{1:40}}"), Some(OLDER.as_bytes()));
    let l = load::<DelayOffsets>(dir.path()).expect("load");
    assert_eq!(l.source, ConfigSource::Main);
    assert_eq!(l.value.get(1), Some(40));
}

#[test]
fn parses_escapes_and_surrogates() {
    let v = parse(br#""a\"\\\/\b\f\n\r\t\u0041\u00e9\u20AC\uD83D\uDE00""#).expect("parse");
    assert_eq!(v, JsonValue::str("a\"\\/\u{8}\u{c}\n\r\tAé€😀"));
    let raw = parse("\"héllo 😀\"".as_bytes()).expect("parse");
    assert_eq!(raw, JsonValue::str("héllo 😀"));
}

/// Parses `text`, expects an error, returns (offset, message).
fn err(text: &[u8]) -> (u64, String) {
    match parse(text) {
        Ok(v) => panic!("{:?} parsed as {v:?}", String::from_utf8_lossy(text)),
        Err(e) => (e.offset, e.to_string()),
    }
}

#[test]
fn errors_name_offset_and_expectation() {
    let cases: &[(&[u8], u64, &str)] = &[
        (b"", 0, "a JSON value"),
        (b"   ", 3, "a JSON value"),
        (b"{\"a\":1", 6, "',' or '}' after an object entry"),
        (b"{\"a\" 1}", 5, "':' after an object key"),
        (b"{\"a\":1,}", 7, "a key ('\"', a name or an integer)"),
        (b"{:1}", 1, "a key ('\"', a name or an integer) or '}'"),
        (b"{'a:1}", 6, "closing '\\'' of a string"),
        (b"[1,2", 4, "',' or ']' after an array item"),
        (b"[1 2]", 3, "',' or ']' after an array item"),
        (b"{\"a\":tru}", 5, "true"),
        (b"\"abc", 4, "closing '\"' of a string"),
        (b"\"a\\q\"", 3, "one of \" ' \\ / b f n r t u"),
        (b"\"\\u12G4\"", 3, "four hex digits"),
        (b"\"\\uD83D\"", 7, "low surrogate"),
        (b"\"\\uD83D\\u0041\"", 9, "low surrogate"),
        (b"\"\\uDE00\"", 1, "lone low surrogate"),
        (b"\"a\xff\"", 2, "invalid UTF-8"),
        (b"-", 1, "digits of a number"),
        (b"1.", 2, "digits after '.'"),
        (b"1e+", 3, "digits of an exponent"),
        (b"{} x", 3, "end of input"),
        (b"{99999999999999999999:1}", 1, "does not fit a Java long"),
        (b"@", 0, "a JSON value"),
    ];
    for (text, offset, needle) in cases {
        let (at, msg) = err(text);
        assert_eq!(at, *offset, "{:?}: {msg}", String::from_utf8_lossy(text));
        assert!(
            msg.contains(needle),
            "{:?}: {msg}",
            String::from_utf8_lossy(text)
        );
    }
    // End of input is reported as truncation.
    let e = parse(b"{\"a\":").expect_err("truncated");
    assert!(matches!(e.kind, ErrorKind::Truncated { .. }), "{e}");
    // Offsets count the BOM.
    assert_eq!(err(b"\xEF\xBB\xBF{,}").0, 4);
}

#[test]
fn nesting_depth_is_limited() {
    let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(parse(ok.as_bytes()).is_ok());
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    let (at, msg) = err(deep.as_bytes());
    assert_eq!(at, MAX_DEPTH as u64);
    assert!(msg.contains("nested deeper"), "{msg}");
    let huge = "{\"a\":".repeat(100_000);
    assert!(parse(huge.as_bytes()).is_err());
}

// ---------------------------------------------------------------------------------------------
// Oracle files written by real brokers.

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_files_round_trip_byte_identical() {
    let files = oracle_files();
    if files.is_empty() {
        return;
    }
    let mut checked = 0;
    for path in files {
        let bytes = read(&path);
        let v = parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // transactionMetrics (like timermetrics) is written compact; the rest pretty.
        let out = if bytes.contains(&b'\n') {
            to_fastjson_pretty(&v)
        } else {
            to_fastjson_compact(&v)
        };
        assert_eq!(
            out,
            String::from_utf8_lossy(&bytes),
            "{} does not round-trip",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 24, "only {checked} oracle files found");
}

/// Parses a file into `T` and writes it back: must be identical.
fn typed_round_trip<T: ConfigFile>(path: &Path) -> Option<T> {
    if !path.exists() {
        return None;
    }
    let bytes = read(path);
    let v = T::from_bytes(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        v.to_pretty(),
        String::from_utf8_lossy(&bytes),
        "{} typed round trip",
        path.display()
    );
    Some(v)
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_typed_round_trips_byte_identical() {
    let mut n = 0;
    for set in ORACLE_SETS {
        let Some(dir) = oracle_dir(set) else { continue };
        for suffix in ["", ".bak"] {
            let p = |name: &str| with_suffix(&dir.join(name), suffix);
            n += typed_round_trip::<ConsumerOffsets>(&p(CONSUMER_OFFSET_FILE)).is_some() as u32;
            n += typed_round_trip::<DelayOffsets>(&p(DELAY_OFFSET_FILE)).is_some() as u32;
            n += typed_round_trip::<TopicConfigs>(&p(TOPICS_FILE)).is_some() as u32;
            n += typed_round_trip::<SubscriptionGroups>(&p(SUBSCRIPTION_GROUP_FILE)).is_some()
                as u32;
        }
    }
    if n > 0 {
        assert_eq!(n, 23, "typed oracle files checked");
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn oracle_typed_values() {
    let Some(dir) = oracle_dir("basic-4.9") else {
        return;
    };
    let co = ConsumerOffsets::from_bytes(&read(&dir.join(CONSUMER_OFFSET_FILE))).expect("co");
    assert_eq!(
        co.queues("TopicA", "GroupA"),
        Some(&[(0, 263), (1, 157), (2, 156), (3, 157)][..])
    );
    assert_eq!(co.get("TopicC", "GroupC", 3), Some(30));
    assert_eq!(co.get("TopicC", "GroupC", 4), None);
    let entries = co.entries();
    assert_eq!(entries.len(), 5);
    assert_eq!(
        entries[2],
        ("%RETRY%GroupA".into(), "GroupA".into(), vec![(0, 3)])
    );
    assert!(co.data_version.is_none() && co.extra.is_empty());

    let d = DelayOffsets::from_bytes(&read(&dir.join(DELAY_OFFSET_FILE))).expect("delay");
    assert_eq!(d.table, vec![(1, 40), (2, 40), (3, 55)]);
    assert_eq!(d.get(3), Some(55));

    let t = TopicConfigs::from_bytes(&read(&dir.join(TOPICS_FILE))).expect("topics");
    assert_eq!(t.data_version, Some(DataVersion::new(7, 1_796_073_065_612)));
    let sched = t.get("SCHEDULE_TOPIC_XXXX").expect("schedule topic");
    assert_eq!(
        (sched.read_queue_nums, sched.write_queue_nums, sched.perm),
        (18, 18, 6)
    );
    assert_eq!(t.get("DefaultCluster").map(|c| c.perm), Some(7));
    assert!(t.get("%DLQ%GroupA").is_some());
    assert!(t
        .iter()
        .all(|c| c.attributes.is_none() && c.extra.is_empty()));

    let s = SubscriptionGroups::from_bytes(&read(&dir.join(SUBSCRIPTION_GROUP_FILE))).expect("sg");
    assert_eq!(s.retry_max_times("GroupA"), Some(16));
    assert_eq!(s.get("GroupB").map(|g| g.retry_queue_nums), Some(1));

    let Some(dir5) = oracle_dir("basic-5.x") else {
        return;
    };
    let co5 = ConsumerOffsets::from_bytes(&read(&dir5.join(CONSUMER_OFFSET_FILE))).expect("co5");
    assert_eq!(co5.entries(), co.entries());
    assert_eq!(
        co5.data_version.as_ref().and_then(|d| d.state_version),
        Some(0)
    );
    let d5 = DelayOffsets::from_bytes(&read(&dir5.join(DELAY_OFFSET_FILE))).expect("d5");
    assert_eq!(
        d5.table,
        vec![(1, 40), (2, 40), (3, 55), (4, 0), (5, 0), (10, 0), (18, 0)]
    );
    assert_eq!(d5.data_version.as_ref().map(|d| d.counter), Some(5));
    let t5 = TopicConfigs::from_bytes(&read(&dir5.join(TOPICS_FILE))).expect("t5");
    assert!(t5.iter().all(|c| c.attributes == Some(vec![])));
    let s5 =
        SubscriptionGroups::from_bytes(&read(&dir5.join(SUBSCRIPTION_GROUP_FILE))).expect("s5");
    let g = s5.get("GroupA").expect("GroupA");
    assert_eq!(g.retry_max_times, 16);
    assert_eq!(
        g.extra_field("consumeTimeoutMinute"),
        Some(&JsonValue::int(15))
    );
    assert!(s5.extra.iter().any(|(k, _)| k.name() == "forbiddenTable"));

    let Some(crashed) = oracle_dir("crashed-4.9") else {
        return;
    };
    let dc = DelayOffsets::from_bytes(&read(&crashed.join(DELAY_OFFSET_FILE))).expect("dc");
    assert!(dc.table.is_empty());
}

/// A 4.9 topics.json built from scratch (fresh `TopicConfig`s with the oracle's names and numbers)
/// is byte-identical to the broker's file.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn fresh_topics_json_matches_oracle_4_9() {
    for set in ["basic-4.9", "crashed-4.9"] {
        let Some(dir) = oracle_dir(set) else { return };
        let bytes = read(&dir.join(TOPICS_FILE));
        let parsed = TopicConfigs::from_bytes(&bytes).expect("topics");
        let dv = parsed.data_version.clone().expect("data version");
        let mut fresh = TopicConfigs::new(DataVersion::new(dv.counter, dv.timestamp));
        for c in parsed.iter() {
            let mut n = TopicConfig::new(c.topic_name.clone());
            n.read_queue_nums = c.read_queue_nums;
            n.write_queue_nums = c.write_queue_nums;
            n.perm = c.perm;
            n.topic_sys_flag = c.topic_sys_flag;
            n.order = c.order;
            n.topic_filter_type = c.topic_filter_type;
            fresh.insert(n);
        }
        assert_eq!(fresh.to_pretty(), String::from_utf8_lossy(&bytes), "{set}");
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn group_topic_map_kept_when_current_and_rebuilt_when_stale() {
    let Some(dir5) = oracle_dir("basic-5.x") else {
        return;
    };
    let bytes = read(&dir5.join(CONSUMER_OFFSET_FILE));
    let mut co = ConsumerOffsets::from_bytes(&bytes).expect("co5");
    // Changing an offset keeps the derived map as it was written.
    co.set("TopicA", "GroupA", 0, 300);
    let text = co.to_pretty();
    assert!(text.contains("\t\t\"GroupA\":[\"TopicC\",\"%RETRY%GroupA\",\"TopicA\"],\n"));
    // A new group makes it stale: it is rebuilt from the table.
    co.set("TopicD", "GroupD", 0, 1);
    let v = parse(co.to_pretty().as_bytes()).expect("parse");
    let gtm = v.get("groupTopicMap").expect("groupTopicMap");
    assert_eq!(
        gtm.get("GroupD"),
        Some(&JsonValue::Array(vec![JsonValue::str("TopicD")]))
    );
    assert_eq!(co.group_topic_map().len(), 4);
}

#[test]
fn typed_errors_name_offsets() {
    let e =
        ConsumerOffsets::from_bytes(b"{\"offsetTable\":{\"t@g\":{0:\"x\"}}}").expect_err("string");
    assert_eq!(e.offset, 25);
    assert!(e.to_string().contains("integer"), "{e}");
    let e = ConsumerOffsets::from_bytes(b"{\"offsetTable\":{\"t@g\":{4294967296:1}}}")
        .expect_err("range");
    assert_eq!(e.offset, 23);
    let e = TopicConfigs::from_bytes(b"{\"topicConfigTable\":{\"T\":{\"perm\":true}}}")
        .expect_err("perm");
    assert_eq!(e.offset, 33);
    assert!(e.to_string().contains("TopicConfig.perm"), "{e}");
    let e = DelayOffsets::from_bytes(b"[]").expect_err("not an object");
    assert_eq!(e.offset, 0);
    let e = TopicConfigs::from_bytes(b"{\"topicConfigTable\":{\"T\":{\"topicFilterType\":\"X\"}}}")
        .expect_err("filter type");
    assert!(e.to_string().contains("SINGLE_TAG"), "{e}");
}

#[test]
fn consumer_offsets_helpers() {
    let mut co = ConsumerOffsets::new();
    co.set("T", "G", 1, 10);
    co.set("T", "G", 0, 5);
    co.set("T", "G", 1, 11);
    assert_eq!(co.queues("T", "G"), Some(&[(1, 11), (0, 5)][..]));
    assert_eq!(co.iter().count(), 1);
    assert!(co.remove("T", "G"));
    assert!(!co.remove("T", "G"));
    let e = OffsetEntry {
        key: "a@b@c".into(),
        queues: vec![],
    };
    assert_eq!(e.split_key(), ("a", "b@c"));
    // Duplicate keys: the later one wins, as in a Java map.
    let co = ConsumerOffsets::from_bytes(b"{\"offsetTable\":{\"t@g\":{0:1,0:2},\"t@g\":{1:3}}}")
        .expect("dup");
    assert_eq!(co.entries(), vec![("t".into(), "g".into(), vec![(1, 3)])]);
}

// ---------------------------------------------------------------------------------------------
// Loading with the .bak fallback, and persisting.

const GOOD: &str = "{\n\t\"offsetTable\":{1:40\n\t}\n}";
const OLDER: &str = "{\n\t\"offsetTable\":{1:39\n\t}\n}";

fn setup(main: Option<&[u8]>, bak: Option<&[u8]>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    if let Some(m) = main {
        std::fs::write(dir.path().join(DELAY_OFFSET_FILE), m).expect("write main");
    }
    if let Some(b) = bak {
        std::fs::write(dir.path().join("delayOffset.json.bak"), b).expect("write bak");
    }
    dir
}

#[test]
fn load_main() {
    let dir = setup(Some(GOOD.as_bytes()), Some(b"garbage"));
    let l = load::<DelayOffsets>(dir.path()).expect("load");
    assert_eq!(l.source, ConfigSource::Main);
    assert_eq!(l.value.get(1), Some(40));
    assert_eq!(l.path, dir.path().join(DELAY_OFFSET_FILE));
}

#[test]
fn load_falls_back_to_bak() {
    let cases: [(Option<&[u8]>, &str); 4] = [
        (None, "missing"),
        (Some(b""), "empty"),
        (Some(b" \n\t"), "empty"),
        (Some(b"{\"offsetTable\":{1:4"), "unparsable: at byte 19"),
    ];
    for (main, reason) in cases {
        let dir = setup(main, Some(OLDER.as_bytes()));
        let l = load::<DelayOffsets>(dir.path()).expect("load");
        match &l.source {
            ConfigSource::Backup { reason: r } => assert!(r.starts_with(reason), "{r}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(l.value.get(1), Some(39));
        assert_eq!(l.path, dir.path().join("delayOffset.json.bak"));
    }
    // A typed error (valid JSON, wrong type) also sends the broker to the .bak.
    let dir = setup(Some(b"{\"offsetTable\":{1:\"x\"}}"), Some(OLDER.as_bytes()));
    let l = load::<DelayOffsets>(dir.path()).expect("load");
    assert!(
        matches!(l.source, ConfigSource::Backup { ref reason } if reason.contains("at byte 18"))
    );
}

#[test]
fn load_empty_states() {
    let dir = setup(None, None);
    let l = load::<ConsumerOffsets>(dir.path()).expect("load");
    assert_eq!(l.source, ConfigSource::Missing);
    assert_eq!(l.value, ConsumerOffsets::new());

    for (main, bak) in [
        (Some(&b"garbage"[..]), None),
        (Some(&b""[..]), Some(&b""[..])),
        (None, Some(&b""[..])),
    ] {
        let dir = setup(main, bak);
        let l = load::<DelayOffsets>(dir.path()).expect("load");
        assert!(
            matches!(l.source, ConfigSource::Empty { .. }),
            "{:?}",
            l.source
        );
        assert!(l.value.table.is_empty());
    }
}

#[test]
fn load_both_bad_names_both_files() {
    for bak in [&b"{oops"[..], &b"[1,2,3]"[..]] {
        let dir = setup(Some(b"also garbage"), Some(bak));
        let e = load::<DelayOffsets>(dir.path()).expect_err("both bad");
        assert_eq!(e.path(), dir.path().join(DELAY_OFFSET_FILE));
        match &e {
            Error::ConfigLoad(c) => match &**c {
                ConfigLoadError::BackupUnusable {
                    main: Unusable::Unparsable(_),
                    backup,
                    ..
                } => {
                    assert_eq!(backup.path(), dir.path().join("delayOffset.json.bak"));
                    assert!(backup.offset().is_some(), "{backup}");
                }
                other => panic!("{other}"),
            },
            other => panic!("{other}"),
        }
        let msg = e.to_string();
        assert!(msg.contains("delayOffset.json:"), "{msg}");
        assert!(msg.contains("delayOffset.json.bak"), "{msg}");
        assert!(msg.contains("at byte"), "{msg}");
    }
}

#[test]
fn persist_writes_tmp_bak_and_renames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let main = dir.path().join(TOPICS_FILE);
    persist(&main, "first").expect("persist 1");
    assert_eq!(std::fs::read_to_string(&main).expect("main"), "first");
    assert!(!with_suffix(&main, ".bak").exists());
    persist(&main, "second").expect("persist 2");
    assert_eq!(std::fs::read_to_string(&main).expect("main"), "second");
    assert_eq!(
        std::fs::read_to_string(with_suffix(&main, ".bak")).expect("bak"),
        "first"
    );
    assert!(!with_suffix(&main, ".tmp").exists());

    let mut d = DelayOffsets::new();
    d.set(2, 7);
    let p = save(dir.path(), &d).expect("save");
    assert_eq!(p, dir.path().join(DELAY_OFFSET_FILE));
    let l = load::<DelayOffsets>(dir.path()).expect("load");
    assert_eq!((l.source, l.value), (ConfigSource::Main, d));

    let e = persist(&dir.path().join("no/such/dir/x.json"), "x").expect_err("no dir");
    assert!(matches!(e, Error::Io { .. }));
}

/// What a write interrupted at each step of [`persist`] leaves (the steps a crash can fall
/// between: `.tmp` written, `.bak` written, renamed): the old or the new main file, and a `.tmp`
/// that no load reads and the next write replaces.
#[test]
fn an_interrupted_persist_leaves_the_old_or_the_new_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut old = DelayOffsets::new();
    old.set(1, 3);
    let mut new = old.clone();
    new.set(1, 4);
    let main = save(dir.path(), &old).expect("save old");
    let tmp = with_suffix(&main, ".tmp");
    let bak = with_suffix(&main, ".bak");
    let loaded = || load::<DelayOffsets>(dir.path()).expect("load");
    // stopped after the .tmp, torn: the old file is what is read
    let text = new.to_pretty();
    std::fs::write(&tmp, &text.as_bytes()[..text.len() / 2]).expect("torn tmp");
    assert_eq!(
        (loaded().source, loaded().value),
        (ConfigSource::Main, old.clone())
    );
    // stopped after the .bak: still the old file
    std::fs::write(&tmp, &text).expect("tmp");
    std::fs::copy(&main, &bak).expect("bak");
    assert_eq!(loaded().value, old);
    // renamed: the new file
    std::fs::rename(&tmp, &main).expect("rename");
    assert_eq!(loaded().value, new);
    // the next write over a stale .tmp replaces it whole
    std::fs::write(&tmp, "{\"offsetTable\":{1:").expect("stale tmp");
    save(dir.path(), &old).expect("save over a stale tmp");
    assert!(!tmp.exists());
    assert_eq!((loaded().source, loaded().value), (ConfigSource::Main, old));
    assert_eq!(
        std::fs::read_to_string(&bak).expect("bak"),
        new.to_pretty(),
        "the .bak is the previous generation"
    );
}

// ---------------------------------------------------------------------------------------------
// Garbage never panics.

/// The oracle files' bytes, read once for all proptest cases.
fn oracle_texts() -> &'static [Vec<u8>] {
    static TEXTS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    TEXTS.get_or_init(|| oracle_files().iter().map(|p| read(p)).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Err(e) = parse(&bytes) {
            prop_assert!(e.offset <= bytes.len() as u64);
        }
        let _ = ConsumerOffsets::from_bytes(&bytes);
        let _ = TopicConfigs::from_bytes(&bytes);
    }

    #[test]
    fn json_like_noise_never_panics(s in "[\\[\\]{}:,\"\\\\0-9a-z\\-.eE \\t\\n]{0,64}") {
        if let Err(e) = parse(s.as_bytes()) {
            prop_assert!(e.offset <= s.len() as u64);
        }
    }

    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn truncated_oracle_files_are_errors(pick in any::<prop::sample::Index>(), cut in any::<prop::sample::Index>()) {
        let texts = oracle_texts();
        if texts.is_empty() {
            return Ok(());
        }
        let text = pick.get(texts);
        let len = cut.index(text.len());
        let e = parse(&text[..len]).expect_err("a strict prefix of an object is not JSON");
        prop_assert!(e.offset <= len as u64);
        let _ = SubscriptionGroups::from_bytes(&text[..len]);
    }

    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn corrupted_oracle_files_never_panic(pick in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let texts = oracle_texts();
        if texts.is_empty() {
            return Ok(());
        }
        let mut text = pick.get(texts).clone();
        let i = at.index(text.len());
        text[i] = byte;
        if let Err(e) = parse(&text) {
            prop_assert!(e.offset <= text.len() as u64);
        }
        let _ = ConsumerOffsets::from_bytes(&text);
        let _ = DelayOffsets::from_bytes(&text);
        let _ = TopicConfigs::from_bytes(&text);
        let _ = SubscriptionGroups::from_bytes(&text);
    }
}

#[test]
fn bean_keys_parse_and_write_back() {
    let text = r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}"#;
    let v = parse(text.as_bytes()).expect("bean key");
    let Some(JsonValue::Object(table)) = v.get("offsetTable") else {
        panic!("no table: {v:?}");
    };
    let (JsonKey::Bean(fields), JsonValue::Number(n)) = &table[0] else {
        panic!("not a bean key: {table:?}");
    };
    assert_eq!(n, "5");
    assert_eq!(fields[2], (JsonKey::from("topic"), JsonValue::str("t")));
    assert_eq!(to_fastjson_compact(&v), text);
}
