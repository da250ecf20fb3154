//! Which broker release wrote a store. The files do not record it; [`guess_version`] reads the
//! hints they carry and says what it assumed. The release matters to recovery (the clean-start
//! scan origin, dispatch during recovery) and to the pull rules.

use serde::Serialize;

use crate::engine::store::Store;
use crate::format::checkpoint::Checkpoint;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::mapped::Mapped;

/// The broker release family whose recovery rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BrokerVersion {
    /// RocketMQ 4.9.x.
    #[serde(rename = "4.9")]
    V4_9,
    /// RocketMQ 5.x (5.3.2 or later assumed for the clean-start scan origin).
    #[serde(rename = "5.x")]
    V5,
}

impl std::fmt::Display for BrokerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BrokerVersion::V4_9 => "4.9",
            BrokerVersion::V5 => "5.x",
        })
    }
}

/// Which release wrote the store, as far as the files tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionGuess {
    pub version: BrokerVersion,
    /// False when no file said either way and `version` is an assumption.
    pub from_evidence: bool,
    /// The hints found, one sentence each.
    pub evidence: Vec<String>,
    /// What the plan assumes because of it.
    pub assumption: String,
}

/// Read the release hints a store carries: the 5.x `abort` pid and `abort.bak`, the 5.x
/// checkpoint fields, 5.x-only folders, version 2 records, `stateVersion` in topics.json, and the
/// trailing 0x02 of the properties of each file's first record.
pub fn guess_version(store: &Store, checkpoint: Option<&Checkpoint>) -> VersionGuess {
    let mut v5 = Vec::new();
    let mut v4 = Vec::new();
    let mut weak = Vec::new();
    if store.abort.pid.is_some() {
        v5.push("the abort file holds a pid (5.x writes one, 4.9 leaves it empty)".to_string());
    }
    if store.root.join("abort.bak").exists() {
        v5.push("abort.bak exists (5.x's string2File leaves one)".to_string());
    }
    if let Some(c) = checkpoint {
        if c.master_flushed_offset != 0 || c.confirm_phy_offset != 0 {
            v5.push(
                "the checkpoint has masterFlushedOffset/confirmPhyOffset (5.x fields)".to_string(),
            );
        }
    }
    for d in [
        "compaction",
        "timerwheel",
        "timerlog",
        "batchconsumequeue",
        "epochFileCheckpoint",
    ] {
        if store.root.join(d).exists() {
            v5.push(format!("{d} exists (5.x only)"));
        }
    }
    let topics = store.config_dir().join(crate::format::config::TOPICS_FILE);
    if let Ok(t) = crate::format::config::load_file::<crate::format::config::TopicConfigs>(&topics)
    {
        match t.value.data_version.as_ref().map(|d| d.state_version) {
            Some(Some(_)) => v5.push("topics.json has dataVersion.stateVersion (5.x)".into()),
            Some(None) => v4.push("topics.json has no dataVersion.stateVersion (4.9)".into()),
            None => {}
        }
    }
    let mut trailing = (0u32, 0u32);
    for seg in &store.commitlog.segments {
        let Ok(map) = Mapped::open(&seg.path) else {
            continue;
        };
        if let Ok(Record::Message(m)) = parse_record(&map, 0, seg.start, false) {
            if m.version == crate::format::commitlog::MessageVersion::V2 {
                v5.push(format!(
                    "{} starts with a version 2 record (5.1+)",
                    seg.path.display()
                ));
            }
            if !m.properties.is_empty() {
                if m.properties.has_trailing_separator() {
                    trailing.0 += 1;
                } else {
                    trailing.1 += 1;
                }
            }
        }
    }
    if trailing.0 > 0 {
        weak.push(format!(
            "{} file(s) start with a record whose properties end in 0x02 (4.9.0 or 5.2+)",
            trailing.0
        ));
    }
    if trailing.1 > 0 {
        weak.push(format!(
            "{} file(s) start with a record whose properties do not end in 0x02 (4.9.1-4.9.8 or 5.0-5.1)",
            trailing.1
        ));
    }
    let (version, from_evidence) = if !v5.is_empty() {
        (BrokerVersion::V5, true)
    } else if !v4.is_empty() {
        (BrokerVersion::V4_9, true)
    } else {
        (BrokerVersion::V4_9, false)
    };
    let assumption = match (version, from_evidence) {
        (BrokerVersion::V5, _) => {
            "5.x rules, release 5.3.2 or later: a clean start scans from the \
            last commitlog file at or below the consume queues' max offset and dispatches what \
            the queues lack (5.0-5.3.1 scan from the third-to-last file)"
                .to_string()
        }
        (BrokerVersion::V4_9, true) => "4.9 rules: a clean start scans the last three commitlog \
            files and dispatches nothing during recovery"
            .to_string(),
        (BrokerVersion::V4_9, false) => "no file says which release wrote the store: 4.9 rules \
            assumed (a clean start scans the last three commitlog files)"
            .to_string(),
    };
    let mut evidence = v5;
    evidence.extend(v4);
    evidence.extend(weak);
    VersionGuess {
        version,
        from_evidence,
        evidence,
        assumption,
    }
}

/// Which broker's rules apply, from the release hints the store carries
/// ([`guess_version`]), with the reason in words.
pub fn detect_broker_version(store: &Store) -> (BrokerVersion, String) {
    let checkpoint = store.checkpoint().ok().flatten();
    let g = guess_version(store, checkpoint.as_ref());
    let why = if g.evidence.is_empty() {
        g.assumption
    } else {
        g.evidence.join("; ")
    };
    (g.version, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Store {
        crate::engine::store::test_fixture(name)
    }

    #[test]
    fn broker_version_guess() {
        assert_eq!(
            detect_broker_version(&fixture("store-4.9")).0,
            BrokerVersion::V4_9
        );
        assert_eq!(
            detect_broker_version(&fixture("store-5x")).0,
            BrokerVersion::V5
        );
    }
}
