//! The config files: each loaded as the broker loads it (falling back to its `.bak`), then the
//! consumer offsets, delay offsets and topics checked against the consume queues.

use std::path::Path;

use super::{Sink, VerifyOptions};
use crate::engine::store::dispatch::SCHEDULE_TOPIC;
use crate::engine::store::Store;
use crate::format::config::{
    load_file, ConfigFile, ConfigSource, ConsumerOffsets, DelayOffsets, SubscriptionGroups,
    TopicConfigs,
};
use crate::format::entry::Kind;
use crate::format::finding::{Code, Finding, Severity};

/// Byte offset of a parse error in a config file, 0 when it parses or cannot be read.
fn parse_error_offset<T: ConfigFile>(path: &Path) -> u64 {
    match crate::format::config::read_config_bytes(path) {
        Ok(Some(b)) => T::from_bytes(&b).err().map_or(0, |e| e.offset),
        _ => 0,
    }
}

/// A config file (or its `.bak`) that is not a regular file, or too large to read.
fn config_kind_findings(path: &Path, backup: bool, sink: &mut Sink) {
    let e = crate::format::entry::probe(path);
    match e.kind {
        Kind::File { len } if len > crate::format::config::MAX_CONFIG_BYTES => {
            let f = Finding::new(
                Code::ConfigTooLarge,
                path,
                0,
                format!(
                    "{len} bytes: larger than any config file the broker writes (not read; the \
                     limit is {} bytes)",
                    crate::format::config::MAX_CONFIG_BYTES
                ),
            );
            sink.push(if backup {
                f.with_severity(Severity::Warning).with_action(
                    "read only when the main file fails; the broker overwrites it on its next persist",
                )
            } else {
                f.with_action("the broker cannot read it whole: loading fails and it uses the .bak")
            })
        }
        Kind::File { .. } | Kind::Missing => {}
        k => sink.push(
            Finding::new(
                Code::ConfigNotAFile,
                path,
                0,
                format!(
                    "{}{}, not a regular file (not read)",
                    if e.symlink { "a symlink to " } else { "" },
                    k.describe()
                ),
            )
            .with_action(if k == Kind::Fifo {
                "the broker blocks reading it at start (no writer): it hangs"
            } else {
                "the broker cannot read it: loading fails"
            }),
        ),
    }
}

fn load_checked<T: ConfigFile>(store: &Store, name: &str, sink: &mut Sink) -> Option<T> {
    let main = store.config_dir().join(name);
    let bak = crate::format::config::with_suffix(&main, ".bak");
    config_kind_findings(&main, false, sink);
    config_kind_findings(&bak, true, sink);
    match load_file::<T>(&main) {
        Ok(l) => {
            match &l.source {
                ConfigSource::Main => {
                    if let Ok(Some(b)) = crate::format::config::read_config_bytes(&bak) {
                        if !b.iter().all(|c| c.is_ascii_whitespace()) {
                            if let Err(e) = T::from_bytes(&b) {
                                sink.push(
                                    Finding::new(
                                        Code::ConfigBadBackup,
                                        &bak,
                                        e.offset,
                                        format!("{name}.bak does not parse: {}", e.kind),
                                    )
                                    .with_action(format!(
                                        "harmless while {name} parses; the broker writes a new .bak on its next persist"
                                    )),
                                );
                            }
                        }
                    }
                }
                ConfigSource::Backup { reason } => sink.push(
                    Finding::new(
                        Code::ConfigFromBackup,
                        &main,
                        parse_error_offset::<T>(&main),
                        format!("{name} is {reason}; its .bak parses"),
                    )
                    .with_action(format!(
                        "the broker silently loads {name}.bak (the previous generation) and \
                         overwrites {name} on its next persist"
                    )),
                ),
                ConfigSource::Missing => {}
                ConfigSource::Empty { reason } => sink.push(
                    Finding::new(
                        Code::ConfigUnparsable,
                        &main,
                        parse_error_offset::<T>(&main),
                        format!("no usable content: {reason}"),
                    )
                    .with_action("the broker starts with an empty table (its contents are lost)"),
                ),
            }
            Some(l.value)
        }
        Err(e) => {
            sink.push(
                Finding::new(
                    Code::ConfigUnparsable,
                    &main,
                    parse_error_offset::<T>(&main),
                    e.to_string(),
                )
                .with_action("ConfigManager.load fails: the broker does not start"),
            );
            None
        }
    }
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

pub(super) fn config_findings(store: &Store, opts: &VerifyOptions, sink: &mut Sink) {
    use crate::format::config::{
        CONSUMER_OFFSET_FILE, DELAY_OFFSET_FILE, SUBSCRIPTION_GROUP_FILE, TOPICS_FILE,
    };
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
    if let Some(co) = load_checked::<ConsumerOffsets>(store, CONSUMER_OFFSET_FILE, sink) {
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
                if off > max as i64 {
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
        if let Some(d) = load_checked::<DelayOffsets>(store, DELAY_OFFSET_FILE, sink) {
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
    if let Some(t) = load_checked::<TopicConfigs>(store, TOPICS_FILE, sink) {
        if topics_present {
            for ((topic, qid), cq) in &store.queues {
                // System topics (retry, DLQ, transactions, schedule) are created on the fly and
                // not always persisted.
                if !opts.in_topic(topic) || crate::engine::store::dispatch::is_system_topic(topic) {
                    continue;
                }
                match t.get(topic) {
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
    let _ = load_checked::<SubscriptionGroups>(store, SUBSCRIPTION_GROUP_FILE, sink);
}
