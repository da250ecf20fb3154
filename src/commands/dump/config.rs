//! `dump config`: the config files as the broker loads them.

use std::io::Write;

use serde_json::{json, Value};

use crate::commands::output::{self, json_line};
use crate::commands::ExitStatus;
use crate::format::config::{
    load, ConfigFile, ConfigSource, ConsumerOffsets, DelayOffsets, JsonValue, Loaded,
    SubscriptionGroups, TopicConfigs,
};

use super::ConfigArgs;

/// A fastjson value as plain JSON (bare integer keys become strings).
fn to_json_value(v: &JsonValue) -> Value {
    match v {
        JsonValue::Null => Value::Null,
        JsonValue::Bool(b) => Value::Bool(*b),
        JsonValue::Number(raw) => {
            if let Ok(n) = raw.parse::<i64>() {
                Value::from(n)
            } else if let Some(n) = raw
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Value::Number(n)
            } else {
                Value::String(raw.clone())
            }
        }
        JsonValue::String(s) => Value::String(s.clone()),
        JsonValue::Array(a) => Value::Array(a.iter().map(to_json_value).collect()),
        JsonValue::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.name().into_owned(), to_json_value(v)))
                .collect(),
        ),
    }
}

fn source_text(s: &ConfigSource) -> (&'static str, Option<String>) {
    match s {
        ConfigSource::Main => ("main", None),
        ConfigSource::Backup { reason } => ("backup", Some(reason.clone())),
        ConfigSource::Missing => ("missing", None),
        ConfigSource::Empty { reason } => ("empty", Some(reason.clone())),
    }
}

fn config_json<T: ConfigFile>(l: &Loaded<T>) -> Value {
    let (source, reason) = source_text(&l.source);
    json!({
        "type": "config",
        "name": T::FILE_NAME,
        "file": l.path.display().to_string(),
        "source": source,
        "reason": reason,
        "content": to_json_value(&l.value.to_json()),
    })
}

fn config_heading<T: ConfigFile>(out: &mut dyn Write, l: &Loaded<T>) -> std::io::Result<()> {
    let (source, reason) = source_text(&l.source);
    let how = match (source, reason) {
        ("main", _) => String::new(),
        ("missing", _) => " (missing)".to_string(),
        (s, Some(r)) => format!(" ({s}: {r})"),
        (s, None) => format!(" ({s})"),
    };
    writeln!(out, "\n{}{how}", l.path.display())
}

pub(super) fn config(a: &ConfigArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let dir = if a.store.join("config").is_dir() {
        a.store.join("config")
    } else {
        a.store.clone()
    };
    if !dir.is_dir() {
        anyhow::bail!("{}: no config/ folder", a.store.display());
    }
    let offsets = load::<ConsumerOffsets>(&dir)?;
    let delay = load::<DelayOffsets>(&dir)?;
    let topics = load::<TopicConfigs>(&dir)?;
    let groups = load::<SubscriptionGroups>(&dir)?;
    let mut status = ExitStatus::Success;
    for s in [
        &offsets.source,
        &delay.source,
        &topics.source,
        &groups.source,
    ] {
        if matches!(s, ConfigSource::Backup { .. } | ConfigSource::Empty { .. }) {
            status = ExitStatus::Findings;
        }
    }
    if a.json {
        json_line(out, &config_json(&offsets))?;
        json_line(out, &config_json(&delay))?;
        json_line(out, &config_json(&topics))?;
        json_line(out, &config_json(&groups))?;
        let sources = [
            &offsets.source,
            &delay.source,
            &topics.source,
            &groups.source,
        ];
        let count = |f: fn(&ConfigSource) -> bool| sources.iter().filter(|s| f(s)).count();
        output::summary_line(
            out,
            "dump config",
            &json!({
                "files": sources.len(),
                "missing": count(|s| matches!(s, ConfigSource::Missing)),
                "from_backup": count(|s| matches!(s, ConfigSource::Backup { .. })),
                "empty": count(|s| matches!(s, ConfigSource::Empty { .. })),
            }),
        )?;
        return Ok(status);
    }
    config_heading(out, &offsets)?;
    writeln!(
        out,
        "{:<40} {:<28} {:>5} {:>12}",
        "TOPIC", "GROUP", "QUEUE", "OFFSET"
    )?;
    for (topic, group, queues) in offsets.value.iter() {
        for (q, o) in queues {
            writeln!(out, "{topic:<40} {group:<28} {q:>5} {o:>12}")?;
        }
    }
    config_heading(out, &delay)?;
    writeln!(out, "{:>5} {:>12}", "LEVEL", "OFFSET")?;
    for (level, o) in delay.value.iter() {
        writeln!(out, "{level:>5} {o:>12}")?;
    }
    config_heading(out, &topics)?;
    writeln!(
        out,
        "{:<40} {:>5} {:>5} {:>4} {:>5} {:<10} {:>7}",
        "TOPIC", "READ", "WRITE", "PERM", "ORDER", "FILTER", "SYSFLAG"
    )?;
    for t in topics.value.iter() {
        writeln!(
            out,
            "{:<40} {:>5} {:>5} {:>4} {:>5} {:<10} {:>7}",
            t.topic_name,
            t.read_queue_nums,
            t.write_queue_nums,
            t.perm,
            t.order,
            t.topic_filter_type.as_str(),
            t.topic_sys_flag
        )?;
    }
    config_heading(out, &groups)?;
    writeln!(
        out,
        "{:<32} {:>7} {:>9} {:>12} {:>9} {:>9}",
        "GROUP", "CONSUME", "BROADCAST", "RETRY_QUEUES", "RETRY_MAX", "BROKER_ID"
    )?;
    for g in groups.value.iter() {
        writeln!(
            out,
            "{:<32} {:>7} {:>9} {:>12} {:>9} {:>9}",
            g.group_name,
            g.consume_enable,
            g.consume_broadcast_enable,
            g.retry_queue_nums,
            g.retry_max_times,
            g.broker_id
        )?;
    }
    let known = [
        ConsumerOffsets::FILE_NAME,
        DelayOffsets::FILE_NAME,
        TopicConfigs::FILE_NAME,
        SubscriptionGroups::FILE_NAME,
    ];
    let mut others: Vec<String> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !known.iter().any(|k| {
                n == k
                    || n.strip_prefix(k)
                        .is_some_and(|s| s == ".bak" || s == ".tmp")
            })
        })
        .collect();
    others.sort();
    if !others.is_empty() {
        writeln!(
            out,
            "\nother files in {}: {}",
            dir.display(),
            others.join(", ")
        )?;
    }
    Ok(status)
}
