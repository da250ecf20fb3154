//! Consumer offsets (ENGINE.md 4): the broker's clustering table (one offset per queue per group,
//! kept in `consumerOffset.json`), where a newly assigned queue starts, and the broadcasting
//! client's own file `<dir>/<clientId>/<group>/offsets.json` (`LocalFileOffsetStore`) with its
//! `.bak` fallback and merge-on-persist.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::engine::broker::rebalance::MessageQueue;
use crate::format::config::fastjson::{parse_node, write_string, JsonKey, JsonValue, NodeKind};
use crate::format::config::{persist, with_suffix, ConsumerOffsets};
use crate::format::error::{ConfigLoadError, Error, ErrorKind, ParseError, Result, Unusable};

/// `ConsumerOffsetManager.queryOffset`: the committed next offset, or -1 when the group, topic
/// or queue is unknown.
pub fn query_offset(table: &ConsumerOffsets, group: &str, topic: &str, queue_id: i32) -> i64 {
    table.get(topic, group, queue_id).unwrap_or(-1)
}

/// `ConsumeFromWhere`: where a push consumer starts on a queue its group has no offset for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConsumeFrom {
    /// `CONSUME_FROM_LAST_OFFSET` (the default).
    #[default]
    LastOffset,
    /// `CONSUME_FROM_FIRST_OFFSET`.
    FirstOffset,
    /// `CONSUME_FROM_TIMESTAMP` with the consumer's `consumeTimestamp` in epoch ms.
    Timestamp(i64),
}

/// What `RebalancePushImpl.computePullFromWhere` needs to know about one queue.
#[derive(Debug, Clone, Copy)]
pub struct QueueStart {
    /// The offset store's answer (`readOffset(READ_FROM_STORE)`): >= 0, -1 (none) or another
    /// negative value (an error).
    pub last_offset: i64,
    /// The queue belongs to a `%RETRY%` topic.
    pub retry_topic: bool,
    /// The broker's max offset of the queue (`GET_MAX_OFFSET`).
    pub max_offset: i64,
}

/// `computePullFromWhereWithException` (ENGINE.md 4.4): the offset to pull from, or `None` when
/// the queue is skipped this round (4.9 answers -1, 5.x throws). `search` is the broker's
/// `searchOffset(timestamp)`.
pub fn compute_pull_from_where(
    from: ConsumeFrom,
    q: QueueStart,
    search: impl FnOnce(i64) -> i64,
) -> Option<i64> {
    if q.last_offset >= 0 {
        return Some(q.last_offset);
    }
    if q.last_offset != -1 {
        return None;
    }
    Some(match from {
        ConsumeFrom::LastOffset if q.retry_topic => 0,
        ConsumeFrom::LastOffset => q.max_offset,
        ConsumeFrom::FirstOffset => 0,
        ConsumeFrom::Timestamp(_) if q.retry_topic => q.max_offset,
        ConsumeFrom::Timestamp(t) => search(t),
    })
}

/// The broker's answer to a client's offset query for a group without a committed offset
/// (`ConsumerManageProcessor.queryConsumerOffset`, ENGINE.md 4.1): 0 when the queue's min offset
/// is 0 (or below) and its head is in memory (4.9; an empty queue qualifies) or resident in the
/// page cache (5.x; the head must exist); otherwise -1 (`QUERY_NOT_FOUND`).
pub fn offset_for_unknown_group(
    min_offset: i64,
    head_exists: bool,
    head_in_memory: bool,
    five_x: bool,
) -> i64 {
    let zero = if five_x {
        min_offset <= 0 && head_exists && head_in_memory
    } else {
        min_offset <= 0 && (!head_exists || head_in_memory)
    };
    if zero {
        0
    } else {
        -1
    }
}

/// `ReadOffsetType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOffsetType {
    ReadFromMemory,
    ReadFromStore,
    MemoryFirstThenStore,
}

/// `OffsetSerializeWrapper`: the content of a broadcasting client's `offsets.json`, entries in
/// file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetFile {
    pub table: Vec<(MessageQueue, i64)>,
}

impl OffsetFile {
    pub fn get(&self, mq: &MessageQueue) -> Option<i64> {
        self.table.iter().find(|(q, _)| q == mq).map(|(_, v)| *v)
    }

    pub fn set(&mut self, mq: &MessageQueue, offset: i64) {
        match self.table.iter_mut().find(|(q, _)| q == mq) {
            Some(e) => e.1 = offset,
            None => self.table.push((mq.clone(), offset)),
        }
    }

    /// Parse the fastjson text, whose map keys are `MessageQueue` beans. Errors give the byte
    /// offset of what is wrong and what was expected there.
    pub fn from_bytes(text: &[u8]) -> std::result::Result<Self, ParseError> {
        let expected = |offset: u64, what: &'static str, expected: &str, found: &str| {
            ParseError::new(
                offset,
                ErrorKind::Unexpected {
                    what,
                    expected: expected.to_string(),
                    found: found.to_string(),
                },
            )
        };
        let root = parse_node(text)?;
        let mut out = OffsetFile::default();
        let NodeKind::Object(root_entries) = root.kind else {
            return Err(expected(
                root.offset,
                "offsets.json",
                "an object",
                root.type_name(),
            ));
        };
        let Some(table) = root_entries
            .into_iter()
            .find(|e| matches!(&e.key, JsonKey::Str(s) if s == "offsetTable"))
        else {
            return Ok(out);
        };
        let entries = match table.value.kind {
            NodeKind::Object(e) => e,
            NodeKind::Null => return Ok(out),
            _ => {
                return Err(expected(
                    table.value.offset,
                    "offsetTable",
                    "an object",
                    table.value.type_name(),
                ))
            }
        };
        // where each queue is in `out.table` (a later duplicate key replaces the value, as a map)
        let mut at: HashMap<MessageQueue, usize> = HashMap::new();
        for e in entries {
            let JsonKey::Bean(fields) = &e.key else {
                return Err(expected(
                    e.key_offset,
                    "offsetTable key",
                    "a MessageQueue object",
                    &e.key.name(),
                ));
            };
            let field = |name: &str| {
                fields.iter().find_map(|(k, v)| match k {
                    JsonKey::Str(s) if s == name => Some(v),
                    _ => None,
                })
            };
            let text_field = |name: &'static str| match field(name) {
                Some(JsonValue::String(s)) => Ok(s.clone()),
                other => Err(expected(
                    e.key_offset,
                    name,
                    "a string in the MessageQueue key",
                    other.map_or("nothing", JsonValue::type_name),
                )),
            };
            let topic = text_field("topic")?;
            let broker_name = text_field("brokerName")?;
            let queue_id = match field("queueId") {
                Some(JsonValue::Number(n)) => n
                    .parse::<i32>()
                    .map_err(|_| expected(e.key_offset, "queueId", "a Java int", n))?,
                other => {
                    return Err(expected(
                        e.key_offset,
                        "queueId",
                        "a number in the MessageQueue key",
                        other.map_or("nothing", JsonValue::type_name),
                    ))
                }
            };
            let offset = match &e.value.kind {
                NodeKind::Number(n) => n
                    .parse::<i64>()
                    .map_err(|_| expected(e.value.offset, "offset", "a Java long", n))?,
                _ => {
                    return Err(expected(
                        e.value.offset,
                        "offset",
                        "a number",
                        e.value.type_name(),
                    ))
                }
            };
            let mq = MessageQueue::new(topic, broker_name, queue_id);
            match at.get(&mq) {
                Some(&i) => out.table[i].1 = offset,
                None => {
                    at.insert(mq.clone(), out.table.len());
                    out.table.push((mq, offset));
                }
            }
        }
        Ok(out)
    }

    /// The pretty form `toJson(true)` writes (ENGINE.md 4.3): TAB indentation, each key bean
    /// opened right after the previous value, no newline between entries.
    pub fn to_pretty(&self) -> String {
        let mut s = String::from("{\n\t\"offsetTable\":{");
        if self.table.is_empty() {
            s.push('}');
        } else {
            for (i, (mq, v)) in self.table.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str("{\n\t\t\t\"brokerName\":");
                write_string(&mut s, &mq.broker_name);
                s.push_str(&format!(
                    ",\n\t\t\t\"queueId\":{},\n\t\t\t\"topic\":",
                    mq.queue_id
                ));
                write_string(&mut s, &mq.topic);
                s.push_str(&format!("\n\t\t}}:{v}"));
            }
            s.push_str("\n\t}");
        }
        s.push_str("\n}");
        s
    }

    /// The compact form `toJson(false)` writes.
    pub fn to_compact(&self) -> String {
        let mut s = String::from("{\"offsetTable\":{");
        for (i, (mq, v)) in self.table.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"brokerName\":");
            write_string(&mut s, &mq.broker_name);
            s.push_str(&format!(",\"queueId\":{},\"topic\":", mq.queue_id));
            write_string(&mut s, &mq.topic);
            s.push_str(&format!("}}:{v}"));
        }
        s.push_str("}}");
        s
    }
}

/// Which file a broadcasting client's offsets were read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetFileSource {
    /// `offsets.json`.
    Main,
    /// `offsets.json.bak`, because `offsets.json` was `reason` (missing, empty, unreadable,
    /// unparsable).
    Backup { reason: String },
    /// Neither file holds anything: the empty state (`reason` says why, both files).
    Empty { reason: String },
}

/// What [`read_local_offset`] found.
#[derive(Debug, Clone)]
pub struct LocalOffsetRead {
    /// `None`: the empty state.
    pub file: Option<OffsetFile>,
    pub source: OffsetFileSource,
}

/// `readLocalOffset` on `path` (`.../offsets.json`), saying which file was used: the main file;
/// if it is missing, empty, unreadable or does not parse, the `.bak`; a missing or empty `.bak`
/// is the empty state; an unreadable or unparsable `.bak` an error naming it (the client's
/// `readOffset` then answers -1 and `persistAll` writes nothing).
pub fn read_local_offset(path: &Path) -> Result<LocalOffsetRead> {
    let read = crate::format::config::read_config_bytes;
    let main_state = match read(path) {
        Ok(Some(b)) if b.is_empty() => Unusable::Empty,
        Ok(Some(b)) => match OffsetFile::from_bytes(&b) {
            Ok(f) => {
                return Ok(LocalOffsetRead {
                    file: Some(f),
                    source: OffsetFileSource::Main,
                })
            }
            Err(e) => Unusable::Unparsable(e),
        },
        Ok(None) => Unusable::Missing,
        Err(e) => Unusable::Unreadable(Box::new(e)),
    };
    let bak = with_suffix(path, ".bak");
    let bak_state = match read(&bak) {
        Ok(Some(b)) if !b.is_empty() => {
            return match OffsetFile::from_bytes(&b) {
                Ok(f) => Ok(LocalOffsetRead {
                    file: Some(f),
                    source: OffsetFileSource::Backup {
                        reason: main_state.as_client_reads().to_string(),
                    },
                }),
                Err(source) => Err(ConfigLoadError::ClientBackupUnparsable {
                    path: bak,
                    main: path.to_path_buf(),
                    main_state,
                    source,
                }
                .into()),
            }
        }
        Ok(Some(_)) => "empty",
        Ok(None) => "missing",
        Err(e) => {
            return Err(ConfigLoadError::ClientBackupUnreadable {
                path: bak,
                main: path.to_path_buf(),
                main_state,
                source: Box::new(e),
            }
            .into())
        }
    };
    Ok(LocalOffsetRead {
        file: None,
        source: OffsetFileSource::Empty {
            reason: format!(
                "{}: {}; {}: {bak_state}",
                path.display(),
                main_state.as_client_reads(),
                bak.display()
            ),
        },
    })
}

/// `LocalFileOffsetStore`: a broadcasting consumer's offsets, kept in memory and persisted to
/// `<dir>/<clientId>/<group>/offsets.json` by merging into what the file holds.
#[derive(Debug, Clone)]
pub struct LocalOffsetStore {
    path: PathBuf,
    memory: HashMap<MessageQueue, i64>,
}

impl LocalOffsetStore {
    /// The store of `client_id` (`<ip>@<instanceName>`) for `group` under `dir`
    /// (`rocketmq.client.localOffsetStoreDir`, by default `~/.rocketmq_offsets`).
    pub fn new(dir: &Path, client_id: &str, group: &str) -> Self {
        LocalOffsetStore {
            path: dir.join(client_id).join(group).join("offsets.json"),
            memory: HashMap::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `readLocalOffset`: the file; if it is missing, empty or does not parse, the `.bak`; a
    /// missing or empty `.bak` is the empty state (`Ok(None)`), an unparsable one an error.
    pub fn read_file(&self) -> Result<Option<OffsetFile>> {
        Ok(read_local_offset(&self.path)?.file)
    }

    /// `readOffset`: memory, the file (caching what it finds), or -1.
    pub fn read_offset(&mut self, mq: &MessageQueue, how: ReadOffsetType) -> i64 {
        let mem = self.memory.get(mq).copied();
        match (how, mem) {
            (ReadOffsetType::ReadFromMemory, m) => m.unwrap_or(-1),
            (ReadOffsetType::MemoryFirstThenStore, Some(m)) => m,
            _ => match self.read_file() {
                Ok(Some(f)) => match f.get(mq) {
                    Some(v) => {
                        self.memory.insert(mq.clone(), v);
                        v
                    }
                    None => -1,
                },
                _ => -1,
            },
        }
    }

    /// `updateOffset`: memory only; with `increase_only` a smaller value is ignored.
    pub fn update_offset(&mut self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        let e = self.memory.entry(mq.clone()).or_insert(offset);
        if !increase_only || offset > *e {
            *e = offset;
        }
    }

    /// `removeOffset`: memory only.
    pub fn remove_offset(&mut self, mq: &MessageQueue) {
        self.memory.remove(mq);
    }

    /// `persistAll(mqs)`: read the file, overwrite the entries of `mqs` held in memory, write the
    /// whole map back (`MixAll.string2File`: `.tmp`, `.bak`, rename). Entries of other queues
    /// survive. Nothing is written when the file cannot be read or `mqs` is empty.
    pub fn persist_all(&self, mqs: &[MessageQueue]) -> Result<bool> {
        if mqs.is_empty() {
            return Ok(false);
        }
        let mut file = match self.read_file() {
            Ok(f) => f.unwrap_or_default(),
            Err(_) => return Ok(false),
        };
        for mq in mqs {
            if let Some(v) = self.memory.get(mq) {
                file.set(mq, *v);
            }
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        persist(&self.path, &file.to_pretty())?;
        Ok(true)
    }

    /// `persist(mq)`: [`LocalOffsetStore::persist_all`] for one queue.
    pub fn persist(&self, mq: &MessageQueue) -> Result<bool> {
        self.persist_all(std::slice::from_ref(mq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRETTY: &str = "{\n\t\"offsetTable\":{{\n\t\t\t\"brokerName\":\"broker-a\",\n\t\t\t\"queueId\":0,\n\t\t\t\"topic\":\"TopicTest\"\n\t\t}:100,{\n\t\t\t\"brokerName\":\"broker-a\",\n\t\t\t\"queueId\":1,\n\t\t\t\"topic\":\"TopicTest\"\n\t\t}:101\n\t}\n}";

    #[test]
    fn offsets_json_forms_round_trip() {
        let f = OffsetFile::from_bytes(PRETTY.as_bytes()).unwrap();
        let q0 = MessageQueue::new("TopicTest", "broker-a", 0);
        let q1 = MessageQueue::new("TopicTest", "broker-a", 1);
        assert_eq!(f.get(&q0), Some(100));
        assert_eq!(f.get(&q1), Some(101));
        assert_eq!(f.to_pretty(), PRETTY);
        let compact = f.to_compact();
        assert_eq!(
            compact,
            "{\"offsetTable\":{{\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\":\"TopicTest\"}:100,{\"brokerName\":\"broker-a\",\"queueId\":1,\"topic\":\"TopicTest\"}:101}}"
        );
        assert_eq!(OffsetFile::from_bytes(compact.as_bytes()).unwrap(), f);
        assert_eq!(
            OffsetFile::default().to_pretty(),
            "{\n\t\"offsetTable\":{}\n}"
        );
        let e = OffsetFile::from_bytes(b"{\"offsetTable\":{{\"topic\":1}:2}}").unwrap_err();
        assert_eq!(e.offset, 16, "{e}");
        assert!(e.to_string().contains("expected a string"), "{e}");
        let e = OffsetFile::from_bytes(
            b"{\"offsetTable\":{{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"t\"}:\"x\"}}",
        )
        .unwrap_err();
        assert_eq!(e.offset, 59, "{e}");
        assert_eq!(OffsetFile::from_bytes(b"{").unwrap_err().offset, 1);
        assert!(OffsetFile::from_bytes(b"{\"offsetTable\":{\"k\":1}}").is_err());
    }

    #[test]
    fn local_store_bak_fallback_and_merge() {
        let dir = std::env::temp_dir().join(format!("rmqstore-offsets-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let q0 = MessageQueue::new("T", "broker-a", 0);
        let q1 = MessageQueue::new("T", "broker-a", 1);
        let mut a = LocalOffsetStore::new(&dir, "10.0.0.1@DEFAULT", "g");
        assert!(a.path().ends_with("10.0.0.1@DEFAULT/g/offsets.json"));
        assert_eq!(a.read_offset(&q0, ReadOffsetType::ReadFromStore), -1);
        a.update_offset(&q0, 5, false);
        a.update_offset(&q0, 3, true);
        assert_eq!(a.read_offset(&q0, ReadOffsetType::ReadFromMemory), 5);
        assert!(a.persist(&q0).unwrap());
        // another instance of the same client holds q1 only: persisting merges, q0 survives
        let mut b = LocalOffsetStore::new(&dir, "10.0.0.1@DEFAULT", "g");
        b.update_offset(&q1, 7, false);
        b.persist_all(std::slice::from_ref(&q1)).unwrap();
        let mut c = LocalOffsetStore::new(&dir, "10.0.0.1@DEFAULT", "g");
        assert_eq!(c.read_offset(&q0, ReadOffsetType::ReadFromStore), 5);
        assert_eq!(c.read_offset(&q1, ReadOffsetType::MemoryFirstThenStore), 7);
        // a damaged main file falls back to .bak (the previous generation: q0 only)
        std::fs::write(c.path(), b"{garbage").unwrap();
        let mut d = LocalOffsetStore::new(&dir, "10.0.0.1@DEFAULT", "g");
        assert_eq!(d.read_offset(&q0, ReadOffsetType::ReadFromStore), 5);
        assert_eq!(d.read_offset(&q1, ReadOffsetType::ReadFromStore), -1);
        // an unparsable .bak makes the read fail: -1, and persist writes nothing
        std::fs::write(with_suffix(c.path(), ".bak"), b"{bad").unwrap();
        match read_local_offset(c.path()).unwrap_err() {
            crate::format::Error::ConfigLoad(e) => match *e {
                ConfigLoadError::ClientBackupUnparsable {
                    ref path,
                    ref main,
                    main_state: Unusable::Unparsable(_),
                    ..
                } => {
                    assert_eq!(*path, with_suffix(c.path(), ".bak"));
                    assert_eq!(main, c.path());
                }
                other => panic!("{other}"),
            },
            other => panic!("{other}"),
        }
        let mut e = LocalOffsetStore::new(&dir, "10.0.0.1@DEFAULT", "g");
        assert_eq!(e.read_offset(&q0, ReadOffsetType::ReadFromStore), -1);
        e.update_offset(&q0, 9, false);
        assert!(!e.persist(&q0).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn where_new_queues_start() {
        let q = |last, retry| QueueStart {
            last_offset: last,
            retry_topic: retry,
            max_offset: 50,
        };
        let no = |_| panic!("no search expected");
        assert_eq!(
            compute_pull_from_where(ConsumeFrom::LastOffset, q(7, false), no),
            Some(7)
        );
        assert_eq!(
            compute_pull_from_where(ConsumeFrom::LastOffset, q(-1, false), no),
            Some(50)
        );
        assert_eq!(
            compute_pull_from_where(ConsumeFrom::LastOffset, q(-1, true), no),
            Some(0)
        );
        assert_eq!(
            compute_pull_from_where(ConsumeFrom::FirstOffset, q(-1, false), no),
            Some(0)
        );
        assert_eq!(
            compute_pull_from_where(ConsumeFrom::Timestamp(9), q(-1, false), |t| t * 2),
            Some(18)
        );
        assert_eq!(
            compute_pull_from_where(ConsumeFrom::Timestamp(9), q(-1, true), no),
            Some(50)
        );
        assert_eq!(
            compute_pull_from_where(ConsumeFrom::LastOffset, q(-2, false), no),
            None
        );
        // the broker's rule for unknown groups
        assert_eq!(offset_for_unknown_group(0, true, true, false), 0);
        assert_eq!(offset_for_unknown_group(0, false, false, false), 0);
        assert_eq!(offset_for_unknown_group(0, false, false, true), -1);
        assert_eq!(offset_for_unknown_group(0, true, false, false), -1);
        assert_eq!(offset_for_unknown_group(3, true, true, true), -1);
    }
}
