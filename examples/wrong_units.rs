//! Write a store whose consume queues all point at wrong records, to measure what `verify` and
//! `repair --dry-run` need on a store with many topics and much damage:
//! `cargo run --release --example wrong_units -- <DIR> <TOPICS> <MESSAGES_PER_TOPIC>`.
//!
//! Each topic has one queue. The commitlog is written as a broker writes it (topics in turn);
//! then every unit of topic `i` is written to point at the record with the same queue offset of
//! topic `i + 1`: same size and tags code, another topic, so every unit is a mismatch (and a
//! claim that the record's topic changed), and every record lacks its unit.

use std::io::Write;
use std::path::PathBuf;

use rmqstore::engine::store::index_builder::IndexNaming;
use rmqstore::engine::store::writer::{StoreWriter, WriterOptions};
use rmqstore::format::commitlog::{Host, Message, MessageVersion};
use rmqstore::format::consumequeue::CqUnit;
use rmqstore::format::filename::offset_to_name;
use rmqstore::format::geometry::{resolve, GeometryInputs};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, topics, per_topic] = args.as_slice() else {
        anyhow::bail!("usage: wrong_units <DIR> <TOPICS> <MESSAGES_PER_TOPIC>");
    };
    let dir = PathBuf::from(dir);
    let topics: usize = topics.parse()?;
    let per_topic: usize = per_topic.parse()?;
    let geometry = resolve(&GeometryInputs::default());
    let cq_file = geometry.cq_file_size();
    let mut w = StoreWriter::create(
        &dir,
        WriterOptions {
            geometry,
            consumequeue: false,
            index: false,
            index_naming: IndexNaming::Utc,
            dledger: None,
        },
    )?;
    let name = |t: usize| format!("Topic{t:06}");
    // where[t][q]: the commitlog offset and size of queue offset q of topic t
    let mut at: Vec<Vec<(i64, i32)>> = vec![Vec::with_capacity(per_topic); topics];
    for q in 0..per_topic {
        for (t, units) in at.iter_mut().enumerate() {
            let topic = name(t);
            let a = w.append(Message {
                topic: topic.clone(),
                queue_id: 0,
                flag: 0,
                queue_offset: 0,
                physical_offset: 0,
                sys_flag: 0,
                born_timestamp: 1_700_000_000_000 + q as i64,
                born_host: Host::v4([10, 0, 0, 1], 50000),
                store_timestamp: 1_700_000_000_001 + q as i64,
                store_host: Host::v4([10, 0, 0, 2], 10911),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: format!("message {q} of {topic}").into_bytes(),
                properties: Vec::new(),
                version: MessageVersion::V1,
            })?;
            units.push((a.wrote_offset as i64, a.wrote_bytes as i32));
        }
    }
    w.finish()?;
    for t in 0..topics {
        let other = &at[(t + 1) % topics];
        let qdir = dir.join("consumequeue").join(name(t)).join("0");
        std::fs::create_dir_all(&qdir)?;
        let mut f = std::fs::File::create(qdir.join(offset_to_name(0)))?;
        let mut buf = Vec::with_capacity(other.len() * 20);
        for &(offset, size) in other {
            buf.extend_from_slice(
                &CqUnit {
                    offset,
                    size,
                    tags_code: 0,
                }
                .to_bytes(),
            );
        }
        f.write_all(&buf)?;
        f.set_len(cq_file)?;
    }
    println!(
        "{} records in {topics} topics, every unit pointing at another topic's record, in {}",
        topics * per_topic,
        dir.display()
    );
    Ok(())
}
