//! Our reader, dispatch and writer against stores written by Apache RocketMQ's own Java store
//! (`../shared/oracle`): every record, every manifest line, every consume queue unit, the Java
//! store's answers, and byte-identical consume queues from our writer.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::common::java::assert_same_message;
use crate::common::*;
use rmqstore::engine::store::dispatch::{dispatch, record_tags_code};
use rmqstore::engine::store::index_builder::IndexNaming;
use rmqstore::engine::store::writer::{StoreWriter, WriterOptions};
use rmqstore::engine::Store;
use rmqstore::format::commitlog::RecordIter;
use rmqstore::format::commitlog::{Message, MessageRef};
use rmqstore::format::consumequeue::valid_units;
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::format::mapped::Mapped;

fn open(dir: &Path) -> Store {
    Store::open(&dir.join("store"), &GeometryInputs::default()).unwrap()
}

/// Every record of the store, owned, in commitlog order (CRC checked).
fn all_records(store: &Store) -> Vec<(u64, Message, Vec<u8>)> {
    let mut out = Vec::new();
    for seg in &store.commitlog.segments {
        let map = Mapped::open(&seg.path).unwrap();
        for r in RecordIter::new(&map, seg, true) {
            let m = r.unwrap();
            out.push((m.position, m.to_owned_message(), m.raw.to_vec()));
        }
    }
    out
}

fn with_ref<T>(raw: &[u8], pos: u64, f: impl FnOnce(&MessageRef<'_>) -> T) -> T {
    match rmqstore::format::commitlog::parse_record(raw, 0, pos, true).unwrap() {
        rmqstore::format::commitlog::Record::Message(m) => f(&m),
        other => panic!("not a message at {pos}: {other:?}"),
    }
}

/// Under CI nothing may be ignored for want of data: the build found the oracle stores, the
/// ali-ons client and the Java peer kits (and rocketmq-rust when asked for), so no test carrying
/// the `ignore` attribute was ignored, and they are there.
#[test]
fn ci_has_its_data() {
    if std::env::var_os("CI").is_none() {
        return;
    }
    if !cfg!(rmqstore_oracle) {
        panic!(
            "CI: the build did not find the oracle stores at {}",
            oracle_root().display()
        );
    }
    if !cfg!(rmqstore_ali_ons) {
        panic!("CI: the build did not find node and tests/clients/ali-ons/node_modules");
    }
    if !cfg!(rmqstore_java_4_9) || !cfg!(rmqstore_java_5) {
        panic!(
            "CI: the build did not find the Java peer kits of 4.9 and 5.x in {} \
             (tests/peers/java/install)",
            env!("RMQSTORE_PEERS_JAVA")
        );
    }
    // rocketmq-rust is opt-in (its build does not fit CI's time): required only when asked for
    if std::env::var_os("RMQSTORE_ROCKETMQ_RUST").is_some() && !cfg!(rmqstore_rocketmq_rust) {
        panic!(
            "CI: the build did not find rocketmq-rust's name server and broker in {}",
            env!("RMQSTORE_PEERS_BIN")
        );
    }
    for name in ORACLES.iter().chain(&DLEDGER_ORACLES) {
        assert!(
            oracle_in(&oracle_root(), name).is_some(),
            "CI: {name} is absent"
        );
    }
}

/// The look-up the build and the tests share says absent for a root without the stores, and
/// present once `<name>/store` is there.
#[test]
fn an_absent_oracle_is_found_absent() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("oracle");
    assert_eq!(oracle_in(&root, "basic-4.9"), None);
    std::fs::create_dir_all(root.join("basic-4.9")).unwrap();
    assert_eq!(oracle_in(&root, "basic-4.9"), None, "no store/ inside");
    std::fs::create_dir_all(root.join("basic-4.9/store")).unwrap();
    assert_eq!(oracle_in(&root, "basic-4.9"), Some(root.join("basic-4.9")));
    // and the build looked the same way at the real root
    let here = ORACLES
        .iter()
        .all(|n| oracle_in(&oracle_root(), n).is_some());
    assert_eq!(
        cfg!(rmqstore_oracle),
        here,
        "touch build.rs after adding or removing the stores"
    );
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn every_record_matches_the_java_dump() {
    for name in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        let store = open(&dir);
        let ours = all_records(&store);
        let java = java_messages(&dir);
        assert_eq!(ours.len(), java.len(), "{name}: record count");
        for ((pos, m, raw), j) in ours.iter().zip(&java) {
            let ctx = format!("{name} @{pos}");
            assert_eq!(m.physical_offset, *pos as i64, "{ctx}");
            with_ref(raw, *pos, |r| {
                assert_same_message(j, r, &ctx);
                assert!(r.body_crc_ok(), "{ctx}");
                let tc = record_tags_code(r, &store.geometry).unwrap();
                assert_eq!(tc, j["tagsCode"].as_i64().unwrap(), "{ctx}: tags code");
            });
        }
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn every_manifest_put_is_found() {
    for name in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        let store = open(&dir);
        let by_offset: HashMap<u64, (Message, Vec<u8>)> = all_records(&store)
            .into_iter()
            .map(|(p, m, r)| (p, (m, r)))
            .collect();
        let mut checked = 0;
        for line in json_lines(&manifest(&dir)) {
            if line["putStatus"].as_str() != Some("PUT_OK") {
                continue;
            }
            let ctx = format!("{name} seq {}", line["seq"]);
            if line["kind"] == "batch" {
                let offs = line["wroteOffsets"].as_array().unwrap();
                for (k, (off, inner)) in offs
                    .iter()
                    .zip(line["messages"].as_array().unwrap())
                    .enumerate()
                {
                    let (m, _) = &by_offset[&(off.as_u64().unwrap())];
                    assert_eq!(sha256_hex(&m.body), inner["bodySha256"].as_str().unwrap());
                    assert_eq!(m.topic, line["topic"].as_str().unwrap(), "{ctx}");
                    assert_eq!(
                        m.queue_offset,
                        line["queueOffset"].as_i64().unwrap() + k as i64,
                        "{ctx}"
                    );
                    checked += 1;
                }
                continue;
            }
            let off = line["wroteOffset"].as_u64().unwrap();
            let (m, raw) = by_offset
                .get(&off)
                .unwrap_or_else(|| panic!("{ctx}: no record"));
            assert_eq!(
                raw.len() as u64,
                line["wroteBytes"].as_u64().unwrap(),
                "{ctx}"
            );
            assert_eq!(m.topic, line["storedTopic"].as_str().unwrap(), "{ctx}");
            assert_eq!(m.queue_id as i64, line["storedQueueId"].as_i64().unwrap());
            assert_eq!(
                m.queue_offset,
                line["queueOffset"].as_i64().unwrap(),
                "{ctx}"
            );
            assert_eq!(m.sys_flag as i64, line["storedSysFlag"].as_i64().unwrap());
            assert_eq!(m.store_timestamp, line["storeTimestamp"].as_i64().unwrap());
            assert_eq!(
                sha256_hex(&m.body),
                line["bodySha256"].as_str().unwrap(),
                "{ctx}"
            );
            with_ref(raw, off, |r| {
                assert_eq!(r.offset_msg_id(), line["msgId"].as_str().unwrap(), "{ctx}");
                // what the broker stored (4.9.1+ brokers drop WAIT from the stored string)
                let mut ours = r.properties.to_map();
                ours.remove("WAIT");
                let mut theirs: BTreeMap<String, String> = line["storedProperties"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect();
                theirs.remove("WAIT");
                assert_eq!(ours, theirs, "{ctx}: stored properties");
                if line["kind"] == "normal" {
                    assert_eq!(
                        r.property("KEYS").as_deref(),
                        line["keys"].as_str(),
                        "{ctx}"
                    );
                    assert_eq!(r.tags().as_deref(), line["tags"].as_str(), "{ctx}");
                }
                if let Some(sha) = line["uncompressedBodySha256"].as_str() {
                    let body = r.decompressed_body().unwrap();
                    assert_eq!(sha256_hex(&body), sha, "{ctx}: decompressed body");
                }
            });
            checked += 1;
        }
        assert!(
            checked > at_least(name, 1000),
            "{name}: only {checked} puts checked"
        );
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn every_consume_queue_unit_points_at_its_record() {
    for name in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        let store = open(&dir);
        let recs: HashMap<u64, Vec<u8>> = all_records(&store)
            .into_iter()
            .map(|(p, _, r)| (p, r))
            .collect();
        let mut units = 0;
        for ((topic, qid), cq) in &store.queues {
            cq.for_each_unit(|q, u| {
                let raw = recs.get(&(u.offset as u64)).unwrap_or_else(|| {
                    panic!("{name} {topic}/{qid}@{q}: no record at {}", u.offset)
                });
                with_ref(raw, u.offset as u64, |r| {
                    assert_eq!(r.total_size, u.size);
                    assert_eq!(&*r.topic, topic.as_str());
                    assert_eq!(r.queue_id, *qid);
                    assert_eq!(r.queue_offset as u64, q, "{name} {topic}/{qid}");
                    let d = dispatch(r, &store.geometry).unwrap().cq.unwrap();
                    assert_eq!(d.unit, u, "{name} {topic}/{qid}@{q}");
                });
                units += 1;
                true
            })
            .unwrap();
        }
        assert!(units > at_least(name, 3500), "{name}: {units} units");
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn queue_and_commitlog_bounds_match_java() {
    for name in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        let store = open(&dir);
        let q = java_queries(&dir);
        let min = store.commitlog.min_offset();
        assert_eq!(min as i64, q["minPhyOffset"].as_i64().unwrap(), "{name}");
        assert_eq!(
            store.commitlog.max_offset().unwrap() as i64,
            q["maxPhyOffset"].as_i64().unwrap(),
            "{name}"
        );
        // After an unclean stop the Java answers are after its recovery re-dispatched the
        // records the consume queues lacked: compare with the queue ends dispatch gives.
        let mut dispatched: HashMap<(String, i32), i64> = HashMap::new();
        for (pos, _, raw) in all_records(&store) {
            with_ref(&raw, pos, |r| {
                if let Some(c) = dispatch(r, &store.geometry).unwrap().cq {
                    dispatched.insert((c.topic, c.queue_id), c.queue_offset + 1);
                }
            });
        }
        for jq in q["queues"].as_array().unwrap() {
            let topic = jq["topic"].as_str().unwrap();
            let qid = jq["queueId"].as_i64().unwrap() as i32;
            let cq = store.queue(topic, qid).unwrap();
            let jmax = jq["maxOffsetInQueue"].as_i64().unwrap();
            if store.abort.present {
                assert_eq!(
                    dispatched[&(topic.to_string(), qid)],
                    jmax,
                    "{name} {topic}/{qid}"
                );
                assert!(cq.max_offset().unwrap() as i64 <= jmax);
            } else {
                assert_eq!(
                    cq.max_offset().unwrap() as i64,
                    jmax,
                    "{name} {topic}/{qid}"
                );
            }
            assert_eq!(
                cq.min_offset(min).unwrap() as i64,
                jq["minOffsetInQueue"].as_i64().unwrap(),
                "{name} {topic}/{qid}"
            );
        }
    }
}

/// Feed the oracle's records, in order, to our writer with the same file sizes: the commitlog
/// and consume queue files come out byte-identical to the broker's.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn writer_reproduces_the_broker_files() {
    for name in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        let store = open(&dir);
        let out = tempfile::tempdir().unwrap();
        let mut w = StoreWriter::create(
            out.path(),
            WriterOptions {
                geometry: store.geometry.clone(),
                consumequeue: true,
                index: true,
                index_naming: IndexNaming::Local,
                dledger: None,
            },
        )
        .unwrap();
        for (pos, m, _) in all_records(&store) {
            let a = w.append(m.clone()).unwrap();
            assert_eq!(a.wrote_offset, pos, "{name}");
            assert_eq!(a.queue_offset, m.queue_offset, "{name} @{pos}");
        }
        w.finish().unwrap();
        let ours = Store::open(out.path(), &GeometryInputs::default()).unwrap();
        // commitlog: identical files (the crashed store's last file is pre-allocated and empty,
        // which our writer does not create).
        for seg in &ours.commitlog.segments {
            let theirs = std::fs::read(
                store
                    .root
                    .join("commitlog")
                    .join(seg.path.file_name().unwrap()),
            )
            .unwrap();
            assert!(
                std::fs::read(&seg.path).unwrap() == theirs,
                "{name}: {}",
                seg.path.display()
            );
        }
        assert_eq!(ours.queues.len(), store.queues.len(), "{name}");
        for (key, cq) in &store.queues {
            let mine = &ours.queues[key];
            assert_eq!(mine.files.len(), cq.files.len(), "{name} {key:?}");
            for (a, b) in mine.files.iter().zip(&cq.files) {
                let (x, y) = (
                    std::fs::read(&a.path).unwrap(),
                    std::fs::read(&b.path).unwrap(),
                );
                if store.abort.present {
                    // the killed broker's queues may lag: its units must be a prefix of ours
                    let n = valid_units(&y).count() * 20;
                    assert_eq!(x[..n], y[..n], "{name} {key:?}");
                } else {
                    assert!(x == y, "{name} {key:?} {}", b.path.display());
                }
            }
        }
        if !store.abort.present {
            // index files: the same contents (names are the broker's wall clock, ours the data's)
            assert_eq!(ours.index_files.len(), store.index_files.len(), "{name}");
            for (a, b) in ours.index_files.iter().zip(&store.index_files) {
                assert!(
                    std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
                    "{name} {}",
                    b.display()
                );
            }
            let cp = ours.checkpoint().unwrap().unwrap();
            let theirs = store.checkpoint().unwrap().unwrap();
            assert_eq!(
                cp.physic_msg_timestamp, theirs.physic_msg_timestamp,
                "{name}"
            );
            assert_eq!(cp.index_msg_timestamp, theirs.index_msg_timestamp, "{name}");
        }
    }
}
