//! Exact bytes of each record type as the 4.9 client's encoder builds them, the older and newer
//! field counts, round trips, and arbitrary bytes.

use proptest::prelude::*;

use super::*;

const UNIQ: &str = "0A01001532055FFD2B27000000000001";
const OFFSET_ID: &str = "C0A8000A00002A9F00000000000090FC";

fn pub_record() -> PubRecord {
    PubRecord {
        timestamp: 1_796_000_000_123,
        region_id: DEFAULT_REGION_ID.into(),
        group: "OrderProducerGroup".into(),
        topic: "OrderTopic".into(),
        msg_id: UNIQ.into(),
        tags: "TagA".into(),
        keys: "order-1 user-7".into(),
        store_host: "192.168.0.10:10911".into(),
        body_length: 512,
        cost_time: 3,
        msg_type: MessageType::Normal,
        offset_msg_id: Some(OFFSET_ID.into()),
        success: true,
        client_host: None,
    }
}

fn sub_before() -> SubBeforeRecord {
    SubBeforeRecord {
        timestamp: 1_796_000_000_200,
        region_id: DEFAULT_REGION_ID.into(),
        group: "OrderGroup".into(),
        request_id: "0A0100153205000000000000000000AA".into(),
        msg_id: UNIQ.into(),
        retry_times: 0,
        keys: "order-1 user-7".into(),
    }
}

fn sub_after() -> SubAfterRecord {
    SubAfterRecord {
        request_id: "0A0100153205000000000000000000AA".into(),
        msg_id: UNIQ.into(),
        cost_time: 12,
        success: false,
        keys: "order-1 user-7".into(),
        context_code: Some(4),
        timestamp: Some(1_796_000_000_200),
        group: Some("OrderGroup".into()),
    }
}

fn end_tx() -> EndTransactionRecord {
    EndTransactionRecord {
        timestamp: 1_796_000_000_300,
        region_id: DEFAULT_REGION_ID.into(),
        group: "TxProducerGroup".into(),
        topic: "PaymentTopic".into(),
        msg_id: UNIQ.into(),
        tags: "null".into(),
        keys: "tx-17".into(),
        store_host: "192.168.0.10:10911".into(),
        msg_type: MessageType::TransCommit,
        transaction_id: UNIQ.into(),
        transaction_state: TransactionState::Commit,
        from_transaction_check: false,
    }
}

fn enc(r: &TraceRecord) -> Vec<u8> {
    let mut v = Vec::new();
    encode_record(r, &mut v);
    v
}

fn one(body: &[u8]) -> TraceRecord {
    let v: Vec<_> = records(body).collect();
    assert_eq!(v.len(), 1, "{v:?}");
    v.into_iter().next().unwrap().unwrap()
}

// The expected bytes follow `encoderFromContextBean` field by field: `\u{1}` is
// CONTENT_SPLITOR, `\u{2}` FIELD_SPLITOR.

#[test]
fn pub_record_bytes_are_the_java_encoders() {
    let r = TraceRecord::Pub(pub_record());
    let want = "Pub\u{1}1796000000123\u{1}DefaultRegion\u{1}OrderProducerGroup\u{1}OrderTopic\u{1}\
        0A01001532055FFD2B27000000000001\u{1}TagA\u{1}order-1 user-7\u{1}192.168.0.10:10911\u{1}\
        512\u{1}3\u{1}0\u{1}C0A8000A00002A9F00000000000090FC\u{1}true\u{2}";
    assert_eq!(String::from_utf8(enc(&r)).unwrap(), want);
    assert_eq!(one(want.as_bytes()), r);
}

#[test]
fn sub_before_record_bytes_are_the_java_encoders() {
    let r = TraceRecord::SubBefore(sub_before());
    let want = "SubBefore\u{1}1796000000200\u{1}DefaultRegion\u{1}OrderGroup\u{1}\
        0A0100153205000000000000000000AA\u{1}0A01001532055FFD2B27000000000001\u{1}0\u{1}\
        order-1 user-7\u{2}";
    assert_eq!(String::from_utf8(enc(&r)).unwrap(), want);
    assert_eq!(one(want.as_bytes()), r);
}

#[test]
fn sub_after_record_bytes_are_the_java_encoders() {
    let r = TraceRecord::SubAfter(sub_after());
    let want =
        "SubAfter\u{1}0A0100153205000000000000000000AA\u{1}0A01001532055FFD2B27000000000001\u{1}\
        12\u{1}false\u{1}order-1 user-7\u{1}4\u{1}1796000000200\u{1}OrderGroup\u{2}";
    assert_eq!(String::from_utf8(enc(&r)).unwrap(), want);
    assert_eq!(one(want.as_bytes()), r);
    assert_eq!(consume_return_type(4), Some("FAILED"));
}

#[test]
fn end_transaction_record_bytes_are_the_java_encoders() {
    let r = TraceRecord::EndTransaction(end_tx());
    let want = "EndTransaction\u{1}1796000000300\u{1}DefaultRegion\u{1}TxProducerGroup\u{1}PaymentTopic\u{1}\
        0A01001532055FFD2B27000000000001\u{1}null\u{1}tx-17\u{1}192.168.0.10:10911\u{1}2\u{1}\
        0A01001532055FFD2B27000000000001\u{1}COMMIT_MESSAGE\u{1}false\u{2}";
    assert_eq!(String::from_utf8(enc(&r)).unwrap(), want);
    assert_eq!(one(want.as_bytes()), r);
}

#[test]
fn a_body_holds_records_back_to_back_and_the_keys_are_ids_then_keys() {
    let rs = vec![
        TraceRecord::Pub(pub_record()),
        TraceRecord::SubBefore(sub_before()),
        TraceRecord::SubAfter(sub_after()),
        TraceRecord::EndTransaction(end_tx()),
    ];
    let body = encode_body(&rs);
    assert_eq!(body.iter().filter(|&&b| b == FIELD_SPLITOR).count(), 4);
    let back: Vec<TraceRecord> = records(&body).map(Result::unwrap).collect();
    assert_eq!(back, rs);
    assert_eq!(trace_keys(&rs), vec![UNIQ, "order-1", "user-7", "tx-17"]);
}

#[test]
fn older_and_newer_pub_forms() {
    let base = "Pub\u{1}1\u{1}r\u{1}g\u{1}T\u{1}ID\u{1}tags\u{1}null\u{1}h:1\u{1}10\u{1}2\u{1}3";
    // 12 fields: success stays true, as the client's decoder leaves it
    let TraceRecord::Pub(p) = one(format!("{base}\u{2}").as_bytes()) else {
        panic!()
    };
    assert!(p.success && p.offset_msg_id.is_none() && p.msg_type == MessageType::Delay);
    // 13: success, no offset msg id
    let TraceRecord::Pub(p) = one(format!("{base}\u{1}false\u{2}").as_bytes()) else {
        panic!()
    };
    assert!(!p.success && p.offset_msg_id.is_none());
    // 15: offset msg id, success, client host
    let TraceRecord::Pub(p) = one(format!("{base}\u{1}OID\u{1}TRUE\u{1}10.1.0.21\u{2}").as_bytes())
    else {
        panic!()
    };
    assert!(p.success);
    assert_eq!(p.offset_msg_id.as_deref(), Some("OID"));
    assert_eq!(p.client_host.as_deref(), Some("10.1.0.21"));
    assert_eq!(p.keys, "null");
    assert_eq!(TraceRecord::Pub(p).key_list().count(), 0);
}

#[test]
fn older_and_newer_sub_after_forms() {
    let six = "SubAfter\u{1}R\u{1}ID\u{1}5\u{1}true\u{1}k";
    let TraceRecord::SubAfter(s) = one(format!("{six}\u{2}").as_bytes()) else {
        panic!()
    };
    assert_eq!((s.context_code, s.timestamp, s.group), (None, None, None));
    let TraceRecord::SubAfter(s) = one(format!("{six}\u{1}0\u{2}").as_bytes()) else {
        panic!()
    };
    assert_eq!((s.context_code, s.timestamp), (Some(0), None));
    let TraceRecord::SubAfter(s) = one(format!("{six}\u{1}0\u{1}77\u{2}").as_bytes()) else {
        panic!()
    };
    assert_eq!((s.timestamp, s.group.as_deref()), (Some(77), None));
    // the encoder writes the same forms back
    assert_eq!(
        enc(&TraceRecord::SubAfter(s)),
        format!("{six}\u{1}0\u{1}77\u{2}").into_bytes()
    );
}

#[test]
fn a_cloud_sub_after_glued_to_the_next_record_is_split() {
    // 4.9.5+ on the CLOUD channel: `...contextCode CONTENT_SPLITOR` and no FIELD_SPLITOR
    let body = "SubAfter\u{1}R1\u{1}ID1\u{1}5\u{1}true\u{1}k\u{1}0\u{1}\
        SubAfter\u{1}R2\u{1}ID2\u{1}6\u{1}false\u{1}k\u{1}0\u{1}\
        SubBefore\u{1}9\u{1}r\u{1}G\u{1}R3\u{1}ID3\u{1}1\u{1}k\u{2}";
    let v: Vec<TraceRecord> = records(body.as_bytes()).map(Result::unwrap).collect();
    let ids: Vec<&str> = v.iter().map(TraceRecord::msg_id).collect();
    assert_eq!(ids, ["ID1", "ID2", "ID3"]);
    assert_eq!(v[1].trace_type(), TraceType::SubAfter);
    assert_eq!(v[2].trace_type(), TraceType::SubBefore);
}

#[test]
fn empty_records_are_skipped_and_an_empty_last_key_is_empty() {
    let body = "\u{2}\u{2}SubBefore\u{1}9\u{1}r\u{1}G\u{1}R\u{1}ID\u{1}1\u{1}\u{2}\u{2}";
    let TraceRecord::SubBefore(s) = one(body.as_bytes()) else {
        panic!()
    };
    assert_eq!(s.keys, "");
    assert_eq!(records(b"").count(), 0);
}

#[test]
fn bad_records_say_what_was_expected_and_the_others_still_decode() {
    let body = "Recall\u{1}x\u{2}\
        Pub\u{1}notatime\u{1}r\u{2}\
        Pub\u{1}1\u{1}r\u{1}g\u{1}T\u{1}ID\u{1}t\u{1}k\u{1}h\u{1}10\u{1}2\u{1}9\u{1}O\u{1}true\u{2}\
        EndTransaction\u{1}1\u{1}r\u{1}g\u{1}T\u{1}ID\u{1}t\u{1}k\u{1}h\u{1}2\u{1}X\u{1}COMMIT\u{1}true\u{2}\
        SubBefore\u{1}1\u{1}r\u{1}g\u{2}\
        SubAfter\u{1}R\u{1}ID\u{1}5\u{1}true\u{1}k\u{2}";
    let v: Vec<_> = records(body.as_bytes()).collect();
    assert_eq!(v.len(), 6);
    let msg = |i: usize| v[i].as_ref().unwrap_err().to_string();
    assert!(
        msg(0).contains("unknown trace type \"Recall\""),
        "{}",
        msg(0)
    );
    assert!(
        msg(1).contains("timestamp): expected a long") && msg(1).contains("\"notatime\""),
        "{}",
        msg(1)
    );
    assert!(msg(2).contains("MessageType ordinal"), "{}", msg(2));
    assert!(
        msg(3).contains("COMMIT_MESSAGE, ROLLBACK_MESSAGE"),
        "{}",
        msg(3)
    );
    assert!(
        msg(4).contains("has 4 fields; field 6 (retry times) is missing"),
        "{}",
        msg(4)
    );
    assert!(v[5].is_ok());
    let e = v[2].as_ref().unwrap_err();
    assert_eq!(e.record, 2);
    assert!(body.as_bytes()[e.byte..].starts_with(b"Pub\x011\x01"));
}

#[test]
fn the_batcher_cuts_bodies_by_count_size_and_age() {
    let mut b = BodyBatcher::new();
    let r = TraceRecord::SubBefore(sub_before());
    for i in 0..BATCH_SIZE - 1 {
        assert!(b.push(r.clone(), i as i64).is_none());
    }
    assert_eq!(b.push(r.clone(), 0).map(|v| v.len()), Some(BATCH_SIZE));
    assert!(b.is_empty());
    assert!(b.push(r.clone(), 1000).is_none());
    assert!(b.due(1000 + WAIT_TIME_THRESHOLD_MS - 1).is_none());
    assert_eq!(
        b.due(1000 + WAIT_TIME_THRESHOLD_MS).map(|v| v.len()),
        Some(1)
    );
    let mut big = sub_before();
    big.keys = "k".repeat(BODY_FLUSH_AT);
    assert_eq!(
        b.push(TraceRecord::SubBefore(big), 0).map(|v| v.len()),
        Some(1)
    );
}

// ---------------------------------------------------------------------------------------------
// Properties

/// Text without the separators (Java's `null` included).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_string()),
        "[A-Za-z0-9 _%:.\\-上海]{0,24}".prop_map(|s| s),
    ]
}

fn non_empty() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.:]{1,24}"
}

fn msg_type() -> impl Strategy<Value = MessageType> {
    proptest::sample::select(MessageType::ALL.to_vec())
}

fn record() -> impl Strategy<Value = TraceRecord> {
    let publ = (
        (any::<i64>(), text(), text(), text(), text(), text(), text()),
        (
            text(),
            any::<i32>(),
            any::<i32>(),
            msg_type(),
            any::<bool>(),
        ),
        prop_oneof![
            Just((None, None)),
            text().prop_map(|o| (Some(o), None)),
            (text(), non_empty()).prop_map(|(o, h)| (Some(o), Some(h))),
        ],
    )
        .prop_map(
            |((ts, region, group, topic, id, tags, keys), (host, len, cost, mt, ok), (o, c))| {
                TraceRecord::Pub(PubRecord {
                    timestamp: ts,
                    region_id: region,
                    group,
                    topic,
                    msg_id: id,
                    tags,
                    keys,
                    store_host: host,
                    body_length: len,
                    cost_time: cost,
                    msg_type: mt,
                    offset_msg_id: o,
                    success: ok,
                    client_host: c,
                })
            },
        );
    let before = (
        any::<i64>(),
        text(),
        text(),
        text(),
        text(),
        any::<i32>(),
        text(),
    )
        .prop_map(|(ts, region, group, req, id, retry, keys)| {
            TraceRecord::SubBefore(SubBeforeRecord {
                timestamp: ts,
                region_id: region,
                group,
                request_id: req,
                msg_id: id,
                retry_times: retry,
                keys,
            })
        });
    let after = (
        (text(), text(), any::<i32>(), any::<bool>(), text()),
        prop_oneof![
            Just((None, None, None)),
            any::<i32>().prop_map(|c| (Some(c), None, None)),
            (any::<i32>(), any::<i64>()).prop_map(|(c, t)| (Some(c), Some(t), None)),
            (any::<i32>(), any::<i64>(), non_empty()).prop_map(|(c, t, g)| (
                Some(c),
                Some(t),
                Some(g)
            )),
        ],
    )
        .prop_map(|((req, id, cost, ok, keys), (code, ts, group))| {
            TraceRecord::SubAfter(SubAfterRecord {
                request_id: req,
                msg_id: id,
                cost_time: cost,
                success: ok,
                keys,
                context_code: code,
                timestamp: ts,
                group,
            })
        });
    let end = (
        (any::<i64>(), text(), text(), text(), text(), text(), text()),
        (
            text(),
            msg_type(),
            text(),
            proptest::sample::select(TransactionState::ALL.to_vec()),
            any::<bool>(),
        ),
    )
        .prop_map(
            |((ts, region, group, topic, id, tags, keys), (host, mt, tx, state, check))| {
                TraceRecord::EndTransaction(EndTransactionRecord {
                    timestamp: ts,
                    region_id: region,
                    group,
                    topic,
                    msg_id: id,
                    tags,
                    keys,
                    store_host: host,
                    msg_type: mt,
                    transaction_id: tx,
                    transaction_state: state,
                    from_transaction_check: check,
                })
            },
        );
    prop_oneof![publ, before, after, end]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn bodies_round_trip(rs in proptest::collection::vec(record(), 0..12)) {
        let body = encode_body(&rs);
        let back: Vec<TraceRecord> = records(&body).map(|r| r.unwrap()).collect();
        prop_assert_eq!(back, rs);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        for r in records(&bytes) {
            match r {
                Ok(r) => {
                    let _ = trace_keys([&r]);
                }
                Err(e) => {
                    prop_assert!(e.byte <= bytes.len());
                    let _ = e.to_string();
                }
            }
        }
    }

    #[test]
    fn separators_and_type_names_in_any_order_never_panic(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("\u{1}".to_string()),
                Just("\u{2}".to_string()),
                Just("Pub".to_string()),
                Just("SubAfter".to_string()),
                Just("SubBefore".to_string()),
                Just("EndTransaction".to_string()),
                Just("1".to_string()),
                Just("true".to_string()),
                Just("COMMIT_MESSAGE".to_string()),
            ],
            0..64,
        )
    ) {
        let body = parts.concat();
        let n = records(body.as_bytes()).count();
        prop_assert!(n <= body.len() + 1);
    }
}
