//! Names that become paths: the broker's topic rule, queue ids, and where a path lies relative to
//! a store.
//!
//! A record's topic and queue id become `consumequeue/<topic>/<queueId>/`. They are read from
//! disk, so they are checked here before any path is made of them: a topic is one path component
//! of the broker's own characters (`TopicValidator`: `^[%|a-zA-Z0-9_-]+$`, so never `.`, `..` or
//! a `/`), a queue id a non-negative int. Nothing else in rmqstore joins a name read from disk
//! onto a path, except directory entry names themselves (one component by construction).

use std::path::{Component, Path, PathBuf};

use super::error::{Error, Result, WritePathError};

/// `TopicValidator.TOPIC_MAX_LENGTH`: what a client may create.
pub const TOPIC_MAX_LEN: usize = 127;
/// Retry and dead letter topics are `%RETRY%`/`%DLQ%` plus a group name of up to 255 characters
/// (`Validators.CHARACTER_MAX_LENGTH`); 5.x stores the long ones in version 2 records. A file
/// name holds at most 255 bytes, so that is the limit here.
pub const SYSTEM_TOPIC_MAX_LEN: usize = 255;

/// Why a name read from disk cannot be a path component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("the topic is empty")]
    EmptyTopic,
    #[error("the topic has {found:?} at byte {at}, outside the broker's topic characters ^[%|a-zA-Z0-9_-]+$")]
    TopicChar { at: usize, found: char },
    #[error("the topic is {len} bytes, longer than the {max} the broker allows")]
    TopicTooLong { len: usize, max: usize },
    #[error("queue id {0} is negative")]
    NegativeQueueId(i32),
}

fn topic_byte_ok(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-')
}

/// Check a topic name against the broker's rule (`TopicValidator.validateTopic`), allowing the
/// longer `%RETRY%` and `%DLQ%` topics of long group names.
pub fn check_topic(topic: &str) -> std::result::Result<(), NameError> {
    let b = topic.as_bytes();
    if b.is_empty() {
        return Err(NameError::EmptyTopic);
    }
    if let Some(at) = b.iter().position(|&c| !topic_byte_ok(c)) {
        let found = topic
            .get(at..)
            .and_then(|s| s.chars().next())
            .unwrap_or(char::REPLACEMENT_CHARACTER);
        return Err(NameError::TopicChar { at, found });
    }
    let max = if topic.starts_with("%RETRY%") || topic.starts_with("%DLQ%") {
        SYSTEM_TOPIC_MAX_LEN
    } else {
        TOPIC_MAX_LEN
    };
    if b.len() > max {
        return Err(NameError::TopicTooLong { len: b.len(), max });
    }
    Ok(())
}

/// Check a queue id: a non-negative int.
pub fn check_queue_id(queue_id: i32) -> std::result::Result<(), NameError> {
    if queue_id < 0 {
        Err(NameError::NegativeQueueId(queue_id))
    } else {
        Ok(())
    }
}

/// `<root>/consumequeue/<topic>/<queueId>`, once both names are checked.
pub fn queue_dir(root: &Path, topic: &str, queue_id: i32) -> Result<PathBuf> {
    let bad = |source: NameError| WritePathError::BadQueueName {
        root: root.to_path_buf(),
        topic: topic.to_string(),
        queue_id,
        source,
    };
    check_topic(topic).map_err(bad)?;
    check_queue_id(queue_id).map_err(bad)?;
    Ok(root
        .join("consumequeue")
        .join(topic)
        .join(queue_id.to_string()))
}

/// `path` made absolute with symlinks resolved as far as it exists: the longest existing
/// ancestor is canonicalized and the rest appended (a `..` in the rest climbs lexically).
pub fn resolve(path: &Path) -> Result<PathBuf> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::io(path, e))?
            .join(path)
    };
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(c) => {
                let mut out = c;
                for part in rest.iter().rev() {
                    match part {
                        Component::ParentDir => {
                            out.pop();
                        }
                        Component::Normal(n) => out.push(n),
                        _ => {}
                    }
                }
                return Ok(out);
            }
            Err(_) => {
                let Some(parent) = existing.parent() else {
                    return Err(WritePathError::NothingExists {
                        path: path.to_path_buf(),
                    }
                    .into());
                };
                if let Some(last) = existing.components().next_back() {
                    rest.push(last);
                }
                existing = parent;
            }
        }
    }
}

/// True when `dir` looks like a broker store root: it has a `commitlog/` or `consumequeue/`
/// folder or a DLedger member folder (what [`crate::engine::Store::open`] accepts).
pub fn is_store_root(dir: &Path) -> bool {
    dir.join("commitlog").is_dir()
        || dir.join("consumequeue").is_dir()
        || super::dledger::layout::is_dledger_root(dir)
}

/// The store root `path` lies in: `path` itself or its nearest ancestor that is a store root.
pub fn enclosing_store(path: &Path) -> Result<Option<PathBuf>> {
    let r = resolve(path)?;
    Ok(r.ancestors()
        .find(|a| is_store_root(a))
        .map(Path::to_path_buf))
}

/// Refuse an output path that lies inside a store: `option` names where the path came from in
/// the message. With `may_be_store`, `path` itself may be a store root (an overlay that is
/// continued), but none of its ancestors may be.
pub fn ensure_outside_stores(path: &Path, option: &'static str, may_be_store: bool) -> Result<()> {
    let r = resolve(path)?;
    let mut ancestors = r.ancestors();
    if may_be_store {
        ancestors.next();
    }
    if let Some(store) = ancestors.find(|a| is_store_root(a)) {
        return Err(WritePathError::InsideStore {
            path: path.to_path_buf(),
            option,
            store: store.to_path_buf(),
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_rule_is_the_brokers() {
        for ok in [
            "TopicA",
            "%RETRY%OrderGroup",
            "%DLQ%g",
            "a|b",
            "rmq_sys_wheel_timer",
            "T-1_x",
        ] {
            assert_eq!(check_topic(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_topic(""), Err(NameError::EmptyTopic));
        for (bad, at) in [
            ("..", 0),
            (".", 0),
            ("../../x", 0),
            ("/abs/path", 0),
            ("a/b", 1),
            ("Topic B", 5),
            ("T\0", 1),
            ("Töpic", 1),
        ] {
            assert!(
                matches!(check_topic(bad), Err(NameError::TopicChar { at: a, .. }) if a == at),
                "{bad:?}: {:?}",
                check_topic(bad)
            );
        }
        let long = "x".repeat(128);
        assert_eq!(
            check_topic(&long),
            Err(NameError::TopicTooLong { len: 128, max: 127 })
        );
        let retry = format!("%RETRY%{}", "g".repeat(200));
        assert_eq!(check_topic(&retry), Ok(()));
        assert!(check_topic(&format!("%RETRY%{}", "g".repeat(249))).is_err());
        assert_eq!(check_queue_id(0), Ok(()));
        assert!(check_queue_id(-1).is_err());
        let root = Path::new("/s");
        assert_eq!(
            queue_dir(root, "T", 3).unwrap(),
            Path::new("/s/consumequeue/T/3")
        );
        let e = queue_dir(root, "../../x", 3).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::WritePath(WritePathError::BadQueueName {
                    topic,
                    queue_id: 3,
                    source: NameError::TopicChar { at: 0, found: '.' },
                    ..
                }) if topic == "../../x"
            ),
            "{e}"
        );
        assert_eq!(e.path(), root);
        assert!(matches!(
            queue_dir(root, "T", -3),
            Err(Error::WritePath(WritePathError::BadQueueName {
                source: NameError::NegativeQueueId(-3),
                ..
            }))
        ));
    }

    #[test]
    fn paths_inside_a_store_are_found_through_symlinks_and_dotdot() {
        let t = tempfile::tempdir().unwrap();
        let store = t.path().join("store");
        std::fs::create_dir_all(store.join("commitlog")).unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&store, &link).unwrap();
        let outside = t.path().join("out");
        assert!(ensure_outside_stores(&outside, "--out", false).is_ok());
        for inside in [
            store.join("sub"),
            store.join("commitlog"),
            store.clone(),
            link.join("x/y"),
            outside.join("../store/z"),
        ] {
            let e = ensure_outside_stores(&inside, "--out", false).unwrap_err();
            assert!(
                matches!(
                    &e,
                    Error::WritePath(WritePathError::InsideStore { option: "--out", store: s, .. })
                        if *s == store.canonicalize().unwrap()
                ),
                "{e}"
            );
            assert!(e.to_string().contains("inside the store"), "{e}");
        }
        // An existing overlay is itself a store; its parent must not be one.
        assert!(ensure_outside_stores(&store, "--overlay", true).is_ok());
        assert!(ensure_outside_stores(&store.join("ov"), "--overlay", true).is_err());
        assert_eq!(
            enclosing_store(&link.join("a")).unwrap(),
            Some(store.canonicalize().unwrap())
        );
    }
}
