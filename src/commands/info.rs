//! `rmqstore info`: a first overview of a store, from its file listing and small files only
//! (queue bounds come from consume queue files; the commitlog is read only at its last file).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::{output, ExitStatus, GeometryArgs};
use crate::engine::dispatch::is_system_topic;
use crate::engine::Store;
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::config::{load, ConfigSource, ConsumerOffsets};
use crate::format::geometry::Geometry;
use crate::format::indexfile::IndexHeader;
use crate::format::mapped::Mapped;

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The store root (the broker's storePathRootDir).
    pub store: PathBuf,
    #[command(flatten)]
    pub geometry: GeometryArgs,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
pub struct Info {
    pub store: String,
    pub geometry: Geometry,
    pub commitlog: CommitlogInfo,
    pub topics: Vec<TopicInfo>,
    pub consumer_groups: Vec<GroupInfo>,
    pub index_files: Vec<IndexFileInfo>,
    pub checkpoint: Option<Checkpoint>,
    pub clean_shutdown: bool,
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct CommitlogInfo {
    pub files: Vec<FileInfo>,
    pub min_offset: u64,
    pub max_offset: u64,
    /// Record versions seen at the start of each file (1 or 2).
    pub message_versions: Vec<u8>,
}

#[derive(Debug, Serialize)]
pub struct FileInfo {
    pub name: String,
    pub start: u64,
    pub size: u64,
}

#[derive(Debug, Serialize)]
pub struct TopicInfo {
    pub topic: String,
    pub system: bool,
    pub queues: Vec<QueueInfo>,
}

#[derive(Debug, Serialize)]
pub struct QueueInfo {
    pub queue_id: i32,
    pub min_offset: u64,
    pub max_offset: u64,
}

#[derive(Debug, Serialize)]
pub struct GroupInfo {
    pub group: String,
    pub topic: String,
    pub queues: Vec<GroupQueueInfo>,
}

#[derive(Debug, Serialize)]
pub struct GroupQueueInfo {
    pub queue_id: i32,
    pub offset: i64,
    pub max_offset: u64,
    pub lag: i64,
}

#[derive(Debug, Serialize)]
pub struct IndexFileInfo {
    pub name: String,
    pub size: u64,
    pub entries: i64,
    pub begin_timestamp: i64,
    pub end_timestamp: i64,
    pub begin_phy_offset: i64,
    pub end_phy_offset: i64,
}

/// Gather the overview.
pub fn gather(store: &Store) -> anyhow::Result<Info> {
    let mut notes = Vec::new();
    let cl = &store.commitlog;
    let mut versions = Vec::new();
    for s in &cl.segments {
        let m = Mapped::open(&s.path)?;
        if let Ok(Record::Message(r)) = parse_record(&m, 0, s.start, false) {
            let v = r.version.number();
            if !versions.contains(&v) {
                versions.push(v);
            }
        }
    }
    for issue in cl.layout_issues(store.geometry.commitlog_file_size.value) {
        notes.push(format!("commitlog layout: {issue:?}"));
    }
    let commitlog = CommitlogInfo {
        files: cl
            .segments
            .iter()
            .map(|s| FileInfo {
                name: s
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                start: s.start,
                size: s.len,
            })
            .collect(),
        min_offset: cl.min_offset(),
        max_offset: cl.max_offset()?,
        message_versions: versions,
    };

    let mut topics: Vec<TopicInfo> = Vec::new();
    for ((topic, qid), cq) in &store.queues {
        let q = QueueInfo {
            queue_id: *qid,
            min_offset: cq.min_offset(commitlog.min_offset)?,
            max_offset: cq.max_offset()?,
        };
        match topics.last_mut() {
            Some(t) if &t.topic == topic => t.queues.push(q),
            _ => topics.push(TopicInfo {
                topic: topic.clone(),
                system: is_system_topic(topic),
                queues: vec![q],
            }),
        }
    }

    let mut consumer_groups = Vec::new();
    match load::<ConsumerOffsets>(&store.config_dir()) {
        Ok(loaded) => {
            match &loaded.source {
                ConfigSource::Main | ConfigSource::Missing => {}
                ConfigSource::Backup { reason } => notes.push(format!(
                    "consumerOffset.json {reason}: read consumerOffset.json.bak instead, as the broker would"
                )),
                ConfigSource::Empty { reason } => notes.push(format!("consumerOffset.json: {reason}")),
            }
            for (topic, group, queues) in loaded.value.iter() {
                let mut qs = Vec::new();
                for &(qid, offset) in queues {
                    let max = match store.queue(topic, qid) {
                        Some(cq) => cq.max_offset()?,
                        None => 0,
                    };
                    qs.push(GroupQueueInfo {
                        queue_id: qid,
                        offset,
                        max_offset: max,
                        lag: (max as i64 - offset).max(0),
                    });
                }
                qs.sort_by_key(|q| q.queue_id);
                consumer_groups.push(GroupInfo {
                    group: group.to_string(),
                    topic: topic.to_string(),
                    queues: qs,
                });
            }
            consumer_groups.sort_by(|a, b| (&a.group, &a.topic).cmp(&(&b.group, &b.topic)));
        }
        Err(e) => notes.push(format!("consumer offsets unreadable: {e}")),
    }

    let mut index_files = Vec::new();
    for p in &store.index_files {
        let m = Mapped::open(p)?;
        match IndexHeader::from_bytes(&m) {
            Ok(h) => index_files.push(IndexFileInfo {
                name: p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                size: m.len() as u64,
                entries: (h.index_count as i64 - 1).max(0),
                begin_timestamp: h.begin_timestamp,
                end_timestamp: h.end_timestamp,
                begin_phy_offset: h.begin_phy_offset,
                end_phy_offset: h.end_phy_offset,
            }),
            Err(e) => notes.push(e.in_file(p, 0).to_string()),
        }
    }
    let checkpoint = match store.checkpoint() {
        Ok(c) => c,
        Err(e) => {
            notes.push(e.to_string());
            None
        }
    };
    if store.abort.present {
        notes.push(
            "abort file present: the last shutdown was unclean; the broker will run abnormal recovery"
                .into(),
        );
    }
    Ok(Info {
        store: store.root.display().to_string(),
        geometry: store.geometry.clone(),
        commitlog,
        topics,
        consumer_groups,
        index_files,
        checkpoint,
        clean_shutdown: !store.abort.present,
        notes,
    })
}

pub fn run(a: &InfoArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let info = gather(&store)?;
    if a.json {
        output::json_line(out, &info)?;
    } else {
        print_human(&info, out)?;
    }
    Ok(ExitStatus::Success)
}

fn print_human(i: &Info, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "store      {}", i.store)?;
    writeln!(
        out,
        "shutdown   {}",
        if i.clean_shutdown {
            "clean"
        } else {
            "UNCLEAN (abort file present)"
        }
    )?;
    for line in i.geometry.describe() {
        writeln!(out, "geometry   {line}")?;
    }
    let c = &i.commitlog;
    writeln!(
        out,
        "commitlog  {} files, offsets {}..{} ({} bytes of data), record version(s) {:?}",
        c.files.len(),
        c.min_offset,
        c.max_offset,
        c.max_offset.saturating_sub(c.min_offset),
        c.message_versions
    )?;
    if let Some(cp) = &i.checkpoint {
        writeln!(
            out,
            "checkpoint physic {} logics {} index {}",
            cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp
        )?;
    }
    writeln!(
        out,
        "\n{:<40} {:>5} {:>12} {:>12}",
        "TOPIC", "QUEUE", "MIN", "MAX"
    )?;
    for system in [false, true] {
        for t in i.topics.iter().filter(|t| t.system == system) {
            for q in &t.queues {
                writeln!(
                    out,
                    "{:<40} {:>5} {:>12} {:>12}",
                    t.topic, q.queue_id, q.min_offset, q.max_offset
                )?;
            }
        }
    }
    if !i.consumer_groups.is_empty() {
        writeln!(
            out,
            "\n{:<24} {:<32} {:>5} {:>12} {:>12} {:>10}",
            "GROUP", "TOPIC", "QUEUE", "OFFSET", "MAX", "LAG"
        )?;
        for g in &i.consumer_groups {
            for q in &g.queues {
                writeln!(
                    out,
                    "{:<24} {:<32} {:>5} {:>12} {:>12} {:>10}",
                    g.group, g.topic, q.queue_id, q.offset, q.max_offset, q.lag
                )?;
            }
        }
    }
    writeln!(
        out,
        "\n{:<20} {:>10} {:>15} {:>15}",
        "INDEX FILE", "ENTRIES", "BEGIN", "END"
    )?;
    for f in &i.index_files {
        writeln!(
            out,
            "{:<20} {:>10} {:>15} {:>15}",
            f.name, f.entries, f.begin_timestamp, f.end_timestamp
        )?;
    }
    for n in &i.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}
