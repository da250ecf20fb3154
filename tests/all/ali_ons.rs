//! A real third-party client against `rmqstore serve`: ali-ons, the Node.js RocketMQ 4.x
//! client from the npm registry (`tests/clients/ali-ons`, installed by `.ci/run`). It drains a
//! topic of a generated store through its push consumer, fails some messages on purpose, and
//! sees them again after the retry delay and finally in `%DLQ%`; a second run after a restart
//! of `serve` gets nothing, because the offsets it committed were persisted in the overlay.
//!
//! ali-ons decodes only IPv4 hosts and zlib bodies (and drops the rest of a pull at the first
//! record it cannot read), so the store is generated with `gen --plain`.

use crate::common;

use crate::common::{ali_ons, Server};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use rmqstore::engine::broker::clock::SystemClock;
use rmqstore::engine::broker::{Engine, EngineOptions};
use rmqstore::engine::Store;
use rmqstore::format::geometry::GeometryInputs;
use serde_json::Value;

const TOPIC: &str = "PaymentTopic";
const GROUP: &str = "NodeGroup";

/// `serve` with an overlay and a fast clock: retry levels (10 s, 30 s, ...) and the store's
/// pending delays pass in milliseconds.
fn start(store: &Path, overlay: &Path) -> Server {
    let overlay = overlay.to_str().unwrap();
    Server::start(store, &["--overlay", overlay, "--time-scale", "10000"])
}

/// Run `consume.js` against `addr`; its deliveries.
fn consume(addr: &str, fail_mod: u32, start_ms: u64) -> Vec<Value> {
    ali_ons::consume(&ali_ons::Consume {
        fail_mod,
        max_reconsume: 2,
        start_ms,
        ..ali_ons::Consume::all(addr, GROUP, TOPIC)
    })
}

/// The body as a client hands it over: inflated when COMPRESSED.
fn plain_body(sys_flag: i32, body: &[u8]) -> Vec<u8> {
    if sys_flag & rmqstore::format::commitlog::sysflag::COMPRESSED != 0 {
        rmqstore::format::compression::decompress(sys_flag, body).unwrap()
    } else {
        body.to_vec()
    }
}

/// A message as the test compares it: UNIQ_KEY, tags, keys, body digest, user properties.
fn shape(
    uniq: &str,
    tags: Option<&str>,
    keys: Option<&str>,
    sha: &str,
    trace: Option<&str>,
) -> String {
    format!("{uniq}|{tags:?}|{keys:?}|{sha}|{trace:?}")
}

#[test]
#[cfg_attr(
    not(rmqstore_ali_ons),
    ignore = "needs node and tests/clients/ali-ons/node_modules"
)]
fn ali_ons_drains_a_topic_with_retries_dlq_and_offsets_kept_across_a_restart() {
    if !ali_ons::ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    let overlay = t.path().join("overlay");
    let gen = Command::new(env!("CARGO_BIN_EXE_rmqstore"))
        .arg("gen")
        .arg(&store)
        .args(["--plain", "--messages", "400"])
        .args(common::SMALL_GEOMETRY)
        .output()
        .unwrap();
    assert!(gen.status.success());

    let s = start(&store, &overlay);
    let got = consume(&s.addr, 10, 30_000);
    assert!(s.stop().success());

    // what the topic holds now (the store's pending delays were delivered into it)
    let src = Store::open(&store, &GeometryInputs::default()).unwrap();
    let opts = EngineOptions::for_store(&src);
    let e = Engine::open_read_only(src, Some(&overlay), Arc::new(SystemClock), opts).unwrap();
    let mut want = BTreeMap::new();
    for q in e.queue_ids(TOPIC) {
        let (min, max) = e.queue_bounds(TOPIC, q);
        for o in min..max {
            let m = e
                .message_at(e.unit_at(TOPIC, q, o).unwrap().offset)
                .unwrap();
            let body = plain_body(m.sys_flag, &m.body);
            let sha = common::sha256_hex(&body);
            let s = shape(
                &m.property("UNIQ_KEY").unwrap(),
                m.property("TAGS").as_deref(),
                m.property("KEYS").as_deref(),
                &sha,
                m.property("traceId").as_deref(),
            );
            want.insert((q, o), s);
        }
        // every queue was consumed to its end and the offset committed
        assert_eq!(e.committed_offset(GROUP, TOPIC, q), max, "queue {q}");
    }
    assert!(want.len() > 100, "{}", want.len());

    let delivered = |d: &Value| {
        let p = &d["properties"];
        shape(
            p["UNIQ_KEY"].as_str().unwrap(),
            d["tags"].as_str(),
            d["keys"].as_str(),
            d["bodySha256"].as_str().unwrap(),
            p["traceId"].as_str(),
        )
    };
    // every message once at reconsume 0, as stored
    let first: BTreeMap<(i32, i64), String> = got
        .iter()
        .filter(|d| d["reconsumeTimes"] == 0)
        .map(|d| {
            (
                (
                    d["queueId"].as_i64().unwrap() as i32,
                    d["queueOffset"].as_i64().unwrap(),
                ),
                delivered(d),
            )
        })
        .collect();
    assert_eq!(
        got.iter().filter(|d| d["reconsumeTimes"] == 0).count(),
        first.len(),
        "a message arrived twice at reconsume 0"
    );
    assert_eq!(first, want);
    assert!(got.iter().all(|d| d["topic"] == TOPIC));

    // the failed ones came back twice (reconsume 1 and 2, from %RETRY%), then went to the DLQ
    let failed: BTreeSet<String> = want
        .iter()
        .filter(|((_, o), _)| o % 10 == 3)
        .map(|(_, s)| s.clone())
        .collect();
    assert!(!failed.is_empty());
    for rc in [1, 2] {
        let again: BTreeSet<String> = got
            .iter()
            .filter(|d| d["reconsumeTimes"] == rc)
            .map(delivered)
            .collect();
        assert_eq!(again, failed, "redeliveries at reconsume {rc}");
    }
    assert!(got
        .iter()
        .all(|d| d["reconsumeTimes"].as_i64().unwrap() <= 2));
    let dlq = format!("%DLQ%{GROUP}");
    let (_, dlq_max) = e.queue_bounds(&dlq, 0);
    let mut dead = BTreeSet::new();
    for o in 0..dlq_max {
        let m = e.message_at(e.unit_at(&dlq, 0, o).unwrap().offset).unwrap();
        assert_eq!(m.reconsume_times, 3);
        assert_eq!(m.property("RETRY_TOPIC").as_deref(), Some(TOPIC));
        let body = plain_body(m.sys_flag, &m.body);
        dead.insert(shape(
            &m.property("UNIQ_KEY").unwrap(),
            m.property("TAGS").as_deref(),
            m.property("KEYS").as_deref(),
            &common::sha256_hex(&body),
            m.property("traceId").as_deref(),
        ));
    }
    assert_eq!(dead, failed);
    drop(e);

    // a restart continues from the overlay: nothing is delivered again
    let s = start(&store, &overlay);
    let again = consume(&s.addr, 0, 6_000);
    assert!(s.stop().success());
    assert!(
        again.is_empty(),
        "{} delivered again after a restart",
        again.len()
    );
}
