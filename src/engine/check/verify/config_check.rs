//! The config files: each loaded as the broker loads it (falling back to its `.bak`, checked by
//! [`check`] beside the format), then the consumer offsets, delay offsets and topics checked
//! against the consume queues.

use std::path::Path;

use super::{Sink, VerifyOptions};
use crate::engine::store::dispatch::SCHEDULE_TOPIC;
use crate::engine::store::Store;
use crate::format::config::{
    check, ConfigFile, ConsumerOffsets, DelayOffsets, SubscriptionGroups, TopicConfigs,
};
use crate::format::finding::{Code, Finding};

/// [`check::load_checked`] with its findings in `sink`.
fn load_checked<T: ConfigFile>(store: &Store, sink: &mut Sink) -> Option<T> {
    let mut found = Vec::new();
    let value = check::load_checked::<T>(&store.config_dir(), &mut found);
    for f in found {
        sink.push(f);
    }
    value
}

/// Byte offset of the first occurrence of `needle` in a file, 0 when absent.
fn text_offset(path: &Path, needle: &str) -> u64 {
    crate::format::config::read_config_bytes(path)
        .ok()
        .flatten()
        .and_then(|b| {
            b.windows(needle.len().max(1))
                .position(|w| w == needle.as_bytes())
        })
        .map_or(0, |p| p as u64)
}

/// Keys of consumerOffset.json written twice: a `topic@group` in `offsetTable`, or a queue id in
/// one entry. fastjson puts the entries into a map in file order, so the last one wins and the
/// others are never read. Read from the file's JSON (the typed table keeps only the last).
fn offset_key_findings(path: &Path, opts: &VerifyOptions, sink: &mut Sink) {
    use crate::format::config::JsonValue;
    let Some(bytes) = crate::format::config::read_config_bytes(path)
        .ok()
        .flatten()
    else {
        return;
    };
    let Ok(v) = crate::format::config::parse(&bytes) else {
        return;
    };
    let Some(JsonValue::Object(table)) = v.get("offsetTable") else {
        return;
    };
    let mut seen = std::collections::HashSet::new();
    for (k, queues) in table {
        let key = k.name();
        let (topic, group) = key.split_once('@').unwrap_or((&key, ""));
        if !opts.in_topic(topic) {
            continue;
        }
        let at = text_offset(path, &format!("\"{key}\""));
        if !seen.insert(key.clone()) {
            sink.push(
                Finding::new(
                    Code::ConfigDuplicateKey,
                    path,
                    at,
                    format!("offsetTable has the key {key:?} more than once"),
                )
                .with_action("fastjson keeps the last entry; the earlier ones are never read"),
            );
        }
        let JsonValue::Object(queues) = queues else {
            continue;
        };
        let mut ids = std::collections::HashSet::new();
        for (q, _) in queues {
            let q = q.name();
            if !ids.insert(q.clone()) {
                sink.push(
                    Finding::new(
                        Code::ConfigDuplicateKey,
                        path,
                        at,
                        format!("group {group} on {topic} has queue {q} more than once"),
                    )
                    .with_action(
                        "fastjson keeps the last offset of the queue; the earlier ones are never read",
                    ),
                );
            }
        }
    }
}

pub(super) fn config_findings(store: &Store, opts: &VerifyOptions, sink: &mut Sink) {
    use crate::format::config::{CONSUMER_OFFSET_FILE, DELAY_OFFSET_FILE, TOPICS_FILE};
    let cl_min = store.commitlog.min_offset();
    let bounds = |topic: &str, q: i32| -> (u64, u64) {
        match store.queue(topic, q) {
            Some(cq) => (
                cq.min_offset(cl_min).unwrap_or(0),
                cq.max_offset().unwrap_or(0),
            ),
            None => (0, 0),
        }
    };
    let co_path = store.config_dir().join(CONSUMER_OFFSET_FILE);
    if let Some(co) = load_checked::<ConsumerOffsets>(store, sink) {
        offset_key_findings(&co_path, opts, sink);
        for (topic, group, queues) in co.iter() {
            if !opts.in_topic(topic) {
                continue;
            }
            if topic.is_empty() || group.is_empty() || group.contains('@') {
                // Java's split("@") does not give two parts: no consumer ever reads this entry.
                sink.push(
                    Finding::new(
                        Code::ConfigBadOffsetKey,
                        &co_path,
                        text_offset(&co_path, topic),
                        format!("offsetTable key {topic:?}@{group:?} is not topic@group"),
                    )
                    .with_action("ignored: no consumer group and topic name it"),
                );
                continue;
            }
            let at = text_offset(&co_path, &format!("\"{topic}@{group}\""));
            for &(qid, off) in queues {
                let (min, max) = bounds(topic, qid);
                if off < 0 {
                    sink.push(
                        Finding::new(
                            Code::ConfigNegativeOffset,
                            &co_path,
                            at,
                            format!("group {group} on {topic}/{qid} is at offset {off}"),
                        )
                        .with_action(
                            "the broker answers it as committed; a client takes a negative offset \
                             for none and starts where its ConsumeFromWhere says (or at 0)",
                        ),
                    );
                } else if off > max as i64 {
                    sink.push(
                        Finding::new(
                            Code::ConfigOffsetAboveMax,
                            &co_path,
                            at,
                            format!(
                                "group {group} on {topic}/{qid} is at offset {off}, above the queue's max offset {max}"
                            ),
                        )
                        .with_action(format!(
                            "pulls from it answer OFFSET_OVERFLOW_BADLY; the consumer is moved back to {max}"
                        )),
                    );
                } else if off >= 0 && (off as u64) < min {
                    sink.push(
                        Finding::new(
                            Code::ConfigOffsetBelowMin,
                            &co_path,
                            at,
                            format!(
                                "group {group} on {topic}/{qid} is at offset {off}, below the queue's min offset {min}"
                            ),
                        )
                        .with_action(format!("messages {off}..{min} expired; pulls are moved to {min}")),
                    );
                }
            }
        }
    }
    let d_path = store.config_dir().join(DELAY_OFFSET_FILE);
    if opts.in_topic(SCHEDULE_TOPIC) {
        if let Some(d) = load_checked::<DelayOffsets>(store, sink) {
            let max_level = store.geometry.max_delay_level();
            for (level, off) in d.iter() {
                let at = text_offset(&d_path, &format!("{level}:"));
                if level < 1 || level > max_level {
                    sink.push(Finding::new(
                        Code::ConfigDelayOffset,
                        &d_path,
                        at,
                        format!("delay level {level} is outside 1..={max_level}"),
                    ));
                    continue;
                }
                let (min, max) = bounds(SCHEDULE_TOPIC, level - 1);
                if off < min as i64 || off > max as i64 {
                    sink.push(
                        Finding::new(
                            Code::ConfigDelayOffset,
                            &d_path,
                            at,
                            format!(
                                "delay level {level} is at offset {off}, outside {SCHEDULE_TOPIC} queue {}'s {min}..={max}",
                                level - 1
                            ),
                        )
                        .with_action("the broker clamps it on load (correctDelayOffset)"),
                    );
                }
            }
        }
    }
    let t_path = store.config_dir().join(TOPICS_FILE);
    let topics_present =
        t_path.exists() || crate::format::config::with_suffix(&t_path, ".bak").exists();
    if let Some(t) = load_checked::<TopicConfigs>(store, sink) {
        if topics_present {
            // looked up by name once per queue: a scan of the table each time is quadratic
            let by_name: std::collections::HashMap<&str, &crate::format::config::TopicConfig> =
                t.table.iter().map(|(k, c)| (k.as_str(), c)).collect();
            for ((topic, qid), cq) in &store.queues {
                // System topics (retry, DLQ, transactions, schedule) are created on the fly and
                // not always persisted.
                if !opts.in_topic(topic) || crate::engine::store::dispatch::is_system_topic(topic) {
                    continue;
                }
                match by_name.get(topic.as_str()) {
                    None => sink.push(Finding::new(
                        Code::ConfigUnknownTopic,
                        &cq.dir,
                        0,
                        format!("topic {topic} has a consume queue but is not in topics.json"),
                    )),
                    Some(c) if *qid >= c.read_queue_nums.max(c.write_queue_nums) => {
                        sink.push(Finding::new(
                            Code::ConfigUnknownTopic,
                            &cq.dir,
                            0,
                            format!(
                                "queue {qid} of {topic} is beyond its {} read / {} write queues in topics.json",
                                c.read_queue_nums, c.write_queue_nums
                            ),
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
    }
    let _ = load_checked::<SubscriptionGroups>(store, sink);
}
