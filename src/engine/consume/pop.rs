//! 5.x POP consumers, which rmqstore does not read yet: which groups consume by POP and whether
//! the revive topic holds records, so that the commands that count a group's messages say what
//! they leave out.
//!
//! A group a 5.x broker serves by POP (`config/messageRequestMode.json` names it with mode
//! `POP`, per topic) has its committed offset moved forward when messages are popped: a
//! non-orderly pop writes a checkpoint for them to the revive topic
//! (`rmq_sys_REVIVE_LOG_<cluster>`, tag `ck`) and commits the offset past them; acks are
//! written there too (`ack`, `bAck`). Popped messages that were never acknowledged come back
//! from the revive topic after their invisible time, also after a restart. Counting from the
//! committed offset misses them.

use std::collections::BTreeSet;
use std::path::Path;

use crate::engine::Store;

/// The revive topics' prefix (`PopAckConstants.REVIVE_TOPIC`); the cluster name follows.
pub const REVIVE_TOPIC_PREFIX: &str = "rmq_sys_REVIVE_LOG_";

/// The file `MessageRequestModeManager` persists (under the store's `config/`).
pub const REQUEST_MODE_FILE: &str = "messageRequestMode.json";

/// What the store says about POP consumption.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PopUse {
    /// Groups `messageRequestMode.json` names with mode `POP` (on any topic).
    pub pop_groups: BTreeSet<String>,
    /// Records in the revive topics' consume queues (checkpoints and acks).
    pub revive_records: u64,
    /// Why the request mode file or a revive queue could not be read, if one could not.
    pub problems: Vec<String>,
}

impl PopUse {
    /// Read `config/messageRequestMode.json` (absent: no POP group) and the revive topics'
    /// queue bounds. Nothing here fails: what cannot be read is named in `problems`.
    pub fn read(store: &Store) -> PopUse {
        let mut pop = PopUse::default();
        pop.read_modes(&store.config_dir().join(REQUEST_MODE_FILE));
        let commitlog_min = store.commitlog.min_offset();
        for topic in store.topics() {
            if !topic.starts_with(REVIVE_TOPIC_PREFIX) {
                continue;
            }
            for q in store.topic_queues(topic) {
                match (q.min_offset(commitlog_min), q.max_offset()) {
                    (Ok(min), Ok(max)) => pop.revive_records += max.saturating_sub(min),
                    (Err(e), _) | (_, Err(e)) => pop.problems.push(e.to_string()),
                }
            }
        }
        pop
    }

    /// `{"messageRequestModeMap":{"<topic>":{"<group>":{"mode":"POP",...}}}}`.
    fn read_modes(&mut self, path: &Path) {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => return self.problems.push(format!("{}: {e}", path.display())),
        };
        let v: serde_json::Value = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                return self.problems.push(format!(
                    "{}: does not parse ({e}); POP groups are not known",
                    path.display()
                ))
            }
        };
        let topics = v.get("messageRequestModeMap").and_then(|m| m.as_object());
        for groups in topics.into_iter().flat_map(|t| t.values()) {
            for (group, body) in groups.as_object().into_iter().flatten() {
                if body.get("mode").and_then(|m| m.as_str()) == Some("POP") {
                    self.pop_groups.insert(group.clone());
                }
            }
        }
    }

    /// Whether the answer for `group` may leave out popped, unacknowledged messages: the group
    /// is named as a POP group, or the store holds revive records (whose groups are not read).
    pub fn may_miss(&self, group: &str) -> bool {
        self.pop_groups.contains(group) || self.revive_records > 0
    }

    /// The warning for `group`, when [`PopUse::may_miss`].
    pub fn warning(&self, group: &str) -> Option<String> {
        if self.pop_groups.contains(group) {
            Some(format!(
                "group {group} consumes by POP ({REQUEST_MODE_FILE}): messages it popped and \
                 has not acknowledged are not included (they are in the revive topic, {} \
                 record(s), and come back to it after their invisible time)",
                self.revive_records
            ))
        } else if self.revive_records > 0 {
            Some(format!(
                "the store holds {} POP revive record(s) ({REVIVE_TOPIC_PREFIX}<cluster>): if \
                 group {group} consumes by POP, messages it popped and has not acknowledged are \
                 not included",
                self.revive_records
            ))
        } else {
            None
        }
    }

    /// One warning about the store as a whole (for `info`), when it uses POP at all.
    pub fn store_warning(&self) -> Option<String> {
        if self.pop_groups.is_empty() && self.revive_records == 0 {
            return None;
        }
        let groups: Vec<&str> = self.pop_groups.iter().map(String::as_str).collect();
        Some(format!(
            "POP consumption: {} group(s) consume by POP{}, {} revive record(s); messages \
             popped and not acknowledged are not counted in lags and pending messages",
            groups.len(),
            if groups.is_empty() {
                String::new()
            } else {
                format!(" ({})", groups.join(", "))
            },
            self.revive_records
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::geometry::GeometryInputs;

    fn store_copy() -> (tempfile::TempDir, std::path::PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("store");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/store-5x");
        copy(&src, &root);
        (t, root)
    }

    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let p = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &p);
            } else {
                std::fs::copy(e.path(), p).unwrap();
            }
        }
    }

    #[test]
    fn a_store_without_pop_says_nothing() {
        let (_t, root) = store_copy();
        let s = Store::open(&root, &GeometryInputs::default()).unwrap();
        let p = PopUse::read(&s);
        assert_eq!(p, PopUse::default());
        assert_eq!(p.warning("OrderGroup"), None);
        assert_eq!(p.store_warning(), None);
    }

    #[test]
    fn pop_groups_and_revive_records_are_found() {
        let (_t, root) = store_copy();
        std::fs::write(
            root.join("config").join(REQUEST_MODE_FILE),
            r#"{"messageRequestModeMap":{"OrderTopic":{"OrderGroup":{"consumerGroup":"OrderGroup","mode":"POP","popShareQueueNum":0,"topic":"OrderTopic"},"PullGroup":{"consumerGroup":"PullGroup","mode":"PULL","popShareQueueNum":0,"topic":"OrderTopic"}}}}"#,
        )
        .unwrap();
        let s = Store::open(&root, &GeometryInputs::default()).unwrap();
        let p = PopUse::read(&s);
        assert_eq!(p.pop_groups, BTreeSet::from(["OrderGroup".to_string()]));
        assert_eq!(p.revive_records, 0);
        assert!(p.warning("OrderGroup").unwrap().contains("consumes by POP"));
        assert_eq!(p.warning("PullGroup"), None);
        // a revive queue with records: every group may miss some
        let cq = root.join("consumequeue");
        let first = std::fs::read_dir(cq.join("OrderTopic/0"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let revive = cq.join(format!("{REVIVE_TOPIC_PREFIX}DefaultCluster/0"));
        std::fs::create_dir_all(&revive).unwrap();
        std::fs::copy(first.path(), revive.join(first.file_name())).unwrap();
        let s = Store::open(&root, &GeometryInputs::default()).unwrap();
        let p = PopUse::read(&s);
        assert!(p.revive_records > 0);
        assert!(p.warning("PullGroup").unwrap().contains("revive record"));
        assert!(p.store_warning().unwrap().contains("OrderGroup"));
    }

    #[test]
    fn a_broken_request_mode_file_is_a_problem_not_an_error() {
        let (_t, root) = store_copy();
        std::fs::write(root.join("config").join(REQUEST_MODE_FILE), b"{garbage").unwrap();
        let s = Store::open(&root, &GeometryInputs::default()).unwrap();
        let p = PopUse::read(&s);
        assert!(p.pop_groups.is_empty());
        assert_eq!(p.problems.len(), 1, "{:?}", p.problems);
    }
}
