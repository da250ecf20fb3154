//! What `send` hands back, in source order, each message with its [`SourceKey`].
//!
//! Sources ([`SourceKind`]):
//! - a **store**, with the selection of `export` (`group`: what the group has not consumed, and
//!   its `include`s, through export's [`plan_export`]; `client_dir` makes the group a
//!   broadcasting consumer's) or of `dump`/`query` (every record of the commitlog, walked with the
//!   one walker, narrowed by `topic`, `queue`, `begin`/`end`, `key`, `msg_id`). Keys are commitlog
//!   offsets. A walk classifies each record as export does ([`item_of_record`]) and asks the engine
//!   which parked records are still waiting: delayed messages not yet delivered, the live copy of
//!   each undecided transaction, 5.x timer messages not yet released. The others, and the broker's
//!   bookkeeping (transaction op records, POP revive records), are passed over: what they stood
//!   for is in the store already as a record of its own.
//! - a **salvage store** (`repair-<time>/salvaged/`, or the repair folder itself): a store, all
//!   of it.
//! - an **export file** (JSON Lines of `export`, `compare --export`, `dump --json`): each message
//!   line read back by [`read_line`], found and targeted as the export said. Keys are line
//!   numbers (from 1).
//!
//! Messages come in ascending key order (an export plan is sorted by commitlog offset, which is
//! each queue's own order), each with `seq`, its place among the selected messages: the journal
//! keeps ranges of them. Bodies are read as messages are handed out, never all held; a plan pass
//! can leave them out. A body that fails its CRC is never handed out: a walk stops there (as the
//! broker's recovery does), a group's plan passes it over. The source is only read.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::outgoing::SourceKey;
use crate::engine::broker::clock::{Clock, FakeClock, SystemClock};
use crate::engine::broker::transaction::HalfState;
use crate::engine::broker::{Engine, EngineError, EngineOptions};
use crate::engine::consume::export::{
    item_of_record, plan_export, ExportError, ExportItem, ExportOptions, ExportSource, Include,
};
use crate::engine::store::message_json::{read_line, LineError};
use crate::engine::Store;
use crate::format::commitlog::walk::{LogCursor, LogEnd};
use crate::format::commitlog::{message_in, prop, Message, MessageRef};
use crate::format::config::TopicConfig;
use crate::format::error::Error;
use crate::format::geometry::GeometryInputs;

/// Longest line read from an export file (a 4 MiB body in base64, with room to spare).
const MAX_LINE: usize = 64 << 20;

/// What kind of source a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Store,
    /// A repair folder's `salvaged/` store.
    SalvageStore,
    /// JSON Lines of message lines.
    ExportFile,
}

/// Which messages of a source are sent (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub group: Option<String>,
    pub include: Include,
    pub topic: Option<String>,
    pub queue: Option<i32>,
    /// First key (commitlog offset of a store, line number of a file) sent.
    pub begin: Option<u64>,
    /// Keys from here on are not sent.
    pub end: Option<u64>,
    /// A KEYS element or UNIQ_KEY.
    pub key: Option<String>,
    /// A UNIQ_KEY or an offset message id.
    pub msg_id: Option<String>,
    /// A broadcasting consumer's folder (`<clientId>/<group>`): the group's offsets.
    pub client_dir: Option<PathBuf>,
    /// The store's brokerName in the client's offsets.
    pub broker_name: Option<String>,
}

impl Selection {
    /// The selection in one line, the same for the same selection (the journal's header).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let mut put = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                parts.push(format!("{name}={v}"));
            }
        };
        put("group", self.group.clone());
        let inc = self.include;
        let included: Vec<&str> = [
            (inc.retry, "retry"),
            (inc.delayed, "delayed"),
            (inc.dlq, "dlq"),
            (inc.transactions, "transactions"),
            (inc.timers, "timers"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
        put(
            "include",
            (!included.is_empty()).then(|| included.join(",")),
        );
        put("topic", self.topic.clone());
        put("queue", self.queue.map(|q| q.to_string()));
        put("begin", self.begin.map(|b| b.to_string()));
        put("end", self.end.map(|e| e.to_string()));
        put("key", self.key.clone());
        put("msg-id", self.msg_id.clone());
        put(
            "client-dir",
            self.client_dir.as_ref().map(|d| d.display().to_string()),
        );
        put("broker-name", self.broker_name.clone());
        if parts.is_empty() {
            "all".into()
        } else {
            parts.join(" ")
        }
    }
}

/// Where to read from.
#[derive(Debug, Clone, Default)]
pub struct SourceSpec {
    pub path: PathBuf,
    pub geometry: GeometryInputs,
    pub selection: Selection,
    /// The time due times are measured from (default: the real clock).
    pub now: Option<i64>,
}

/// Why a source cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Store(#[from] Error),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error("{}: line {line}: {error}", path.display())]
    Line {
        path: PathBuf,
        line: u64,
        error: LineError,
    },
    #[error("{}: line {line} is longer than {MAX_LINE} bytes", path.display())]
    LineTooLong { path: PathBuf, line: u64 },
    #[error("{}: not a store, a repair folder or an export file", .0.display())]
    NotASource(PathBuf),
    #[error(
        "{}: a repair's listing of what it salvaged (it holds no bodies): send the salvage store \
         beside it (the salvaged/ folder)",
        .0.display()
    )]
    SalvageListing(PathBuf),
    #[error("{what} selects from a store: {} is an export file", path.display())]
    NotForAFile { what: &'static str, path: PathBuf },
    #[error("--include needs --group (or --client-dir): it adds what a group has waiting")]
    IncludeWithoutGroup,
    #[error("--queue needs --topic")]
    QueueWithoutTopic,
}

/// Why a record of the source is not a message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PassedOver {
    /// The broker's own bookkeeping (transaction op records, POP revive records, ...).
    Bookkeeping,
    /// A parked copy already delivered (delayed, 5.x timer): its delivered copy is a record of
    /// its own.
    Delivered,
    /// A half message whose transaction was decided, or an older copy of an undecided one.
    Decided,
    /// A record the plan names that can no longer be read.
    Unreadable,
    /// A record whose body fails its CRC: damaged, never sent (`repair` first).
    Damaged,
}

/// One message of the source.
#[derive(Debug, Clone)]
pub struct SourceMessage {
    /// Its place among the selected messages (0, 1, ...).
    pub seq: u64,
    pub key: SourceKey,
    /// Where it was found and where it goes, as export says.
    pub item: ExportItem,
    /// The record (its body left empty in a plan pass).
    pub message: Message,
}

/// What a source hands out.
#[derive(Debug, Clone)]
pub enum SourceEntry {
    Message(Box<SourceMessage>),
    PassedOver {
        key: SourceKey,
        why: PassedOver,
    },
    /// The source could not be read past `key`: damage the walk stopped at.
    Stopped {
        key: SourceKey,
        why: String,
    },
}

/// An open source.
pub struct Source {
    pub kind: SourceKind,
    /// The store root or file read.
    pub path: PathBuf,
    selection: Selection,
    fingerprint: String,
    body: Body,
    now: i64,
    notes: Vec<String>,
}

enum Body {
    Store { engine: Box<Engine>, mode: Mode },
    File,
}

enum Mode {
    /// Every record, narrowed by the selection; the parked records still waiting.
    Walk(Parked),
    /// A group's plan, sorted by commitlog offset.
    Items(Vec<ExportItem>),
}

/// Parked records still waiting, by commitlog offset.
#[derive(Default)]
struct Parked {
    /// Delayed: when due.
    delayed: HashMap<i64, i64>,
    /// Live copies of undecided transactions: their state.
    halves: HashMap<i64, HalfState>,
    /// 5.x timer messages: when released.
    timers: HashMap<i64, i64>,
}

/// Topics the broker writes for itself and no producer sends to.
fn is_bookkeeping(topic: &str) -> bool {
    topic == crate::engine::store::dispatch::TRANS_OP_HALF_TOPIC
        || topic == "TRANS_CHECK_MAX_TIME_TOPIC"
        || topic == "OFFSET_MOVED_EVENT"
        || topic == "SELF_TEST_TOPIC"
        || topic.starts_with("rmq_sys_REVIVE_LOG")
        || topic.starts_with("rmq_sys_SYNC_BROKER_MEMBER")
}

/// The store a path names: a store root, or a repair folder's `salvaged/` store.
fn store_root(path: &Path) -> Option<(PathBuf, SourceKind)> {
    let salvaged = path.join("salvaged");
    if path.join("manifest.json").is_file() && crate::format::layout::is_store_root(&salvaged) {
        return Some((salvaged, SourceKind::SalvageStore));
    }
    if !crate::format::layout::is_store_root(path) {
        return None;
    }
    let in_repair_folder = path.file_name().is_some_and(|n| n == "salvaged")
        && path
            .parent()
            .is_some_and(|p| p.join("manifest.json").is_file());
    Some((
        path.to_path_buf(),
        if in_repair_folder {
            SourceKind::SalvageStore
        } else {
            SourceKind::Store
        },
    ))
}

/// `(name, length, modification time in ns)` of a file, for the fingerprint.
fn stamp(path: &Path) -> Option<(String, u64, i128)> {
    let md = std::fs::metadata(path).ok()?;
    let mtime = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128);
    Some((path.display().to_string(), md.len(), mtime))
}

fn fingerprint_of(stamps: impl IntoIterator<Item = (String, u64, i128)>) -> String {
    use sha1::{Digest, Sha1};
    let mut h = Sha1::new();
    let mut files = 0u64;
    let mut bytes = 0u64;
    for (name, len, mtime) in stamps {
        h.update(name.as_bytes());
        h.update(len.to_be_bytes());
        h.update(mtime.to_be_bytes());
        files += 1;
        bytes += len;
    }
    let digest = h.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{files} files, {bytes} bytes, {hex}")
}

impl Source {
    /// Open `spec.path` (see the module documentation).
    pub fn open(spec: &SourceSpec) -> Result<Source, SourceError> {
        let sel = &spec.selection;
        if sel.include != Include::default() && sel.group.is_none() && sel.client_dir.is_none() {
            return Err(SourceError::IncludeWithoutGroup);
        }
        if sel.queue.is_some() && sel.topic.is_none() {
            return Err(SourceError::QueueWithoutTopic);
        }
        let now = spec.now.unwrap_or_else(|| SystemClock.now_ms());
        if spec.path.is_file() {
            for (given, what) in [
                (sel.group.is_some(), "--group"),
                (sel.client_dir.is_some(), "--client-dir"),
            ] {
                if given {
                    return Err(SourceError::NotForAFile {
                        what,
                        path: spec.path.clone(),
                    });
                }
            }
            let fingerprint = fingerprint_of(stamp(&spec.path));
            return Ok(Source {
                kind: SourceKind::ExportFile,
                path: spec.path.clone(),
                selection: sel.clone(),
                fingerprint,
                body: Body::File,
                now,
                notes: Vec::new(),
            });
        }
        let Some((root, kind)) = store_root(&spec.path) else {
            return Err(SourceError::NotASource(spec.path.clone()));
        };
        let store = Store::open(&root, &spec.geometry)?;
        let mut stamps: Vec<_> = store
            .commitlog
            .segments
            .iter()
            .filter_map(|s| stamp(&s.path))
            .collect();
        if let Ok(dir) = std::fs::read_dir(store.config_dir()) {
            let mut files: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
            files.sort();
            stamps.extend(
                files
                    .iter()
                    .filter(|p| p.is_file())
                    .filter_map(|p| stamp(p)),
            );
        }
        let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(now));
        let mut opts = EngineOptions::for_store(&store);
        if let Some(b) = &sel.broker_name {
            opts.broker_name = b.clone();
        }
        let mut engine = Engine::open_read_only(store, None, clock, opts)?;
        let mut notes = engine.notes.clone();
        let mut group = sel.group.clone();
        if let Some(dir) = &sel.client_dir {
            let dir = crate::engine::broker::client_offsets::ClientDir::open(dir)?;
            stamps.extend(stamp(&dir.file()));
            group.get_or_insert_with(|| dir.group.clone());
            let broker = engine.options().broker_name.clone();
            let c = crate::engine::broker::client_offsets::ClientOffsets::load(dir, &broker)?;
            notes.extend(c.notes().iter().map(|n| n.to_string()));
            engine.use_client_offsets(c);
        }
        let mode = match group {
            Some(group) => {
                let plan = plan_export(
                    &engine,
                    &ExportOptions {
                        group,
                        topic: sel.topic.clone(),
                        include: sel.include,
                        dedupe: false,
                    },
                )?;
                let mut items = plan.items;
                items.sort_by_key(|i| i.commitlog_offset);
                items.dedup_by_key(|i| i.commitlog_offset);
                if plan.unreadable > 0 {
                    notes.push(format!(
                        "{} unit(s) of the group's queues point to records that cannot be read",
                        plan.unreadable
                    ));
                }
                Mode::Items(items)
            }
            None => Mode::Walk(Parked::of(&engine)),
        };
        Ok(Source {
            kind,
            path: root,
            selection: sel.clone(),
            fingerprint: fingerprint_of(stamps),
            body: Body::Store {
                engine: Box::new(engine),
                mode,
            },
            now,
            notes,
        })
    }

    /// What identifies the source's content: files, their sizes and modification times.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The time due times are measured from.
    pub fn now(&self) -> i64 {
        self.now
    }

    /// What opening the source found worth saying.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The store's engine (`None` for a file).
    pub fn engine(&self) -> Option<&Engine> {
        match &self.body {
            Body::Store { engine, .. } => Some(engine),
            Body::File => None,
        }
    }

    /// The store's config of `topic`.
    pub fn topic_config(&self, topic: &str) -> Option<&TopicConfig> {
        self.engine()?.topic_configs().get(topic)
    }

    /// `messageDelayLevel` in ms (the store's geometry; the broker's default for a file).
    pub fn delay_levels(&self) -> Vec<i64> {
        match self.engine() {
            Some(e) => e.source().geometry.delay_levels.value.clone(),
            None => {
                crate::format::geometry::Geometry::default()
                    .delay_levels
                    .value
            }
        }
    }

    /// `retryMaxTimes` of the store's consumer groups.
    pub fn retry_max_times(&self) -> BTreeMap<String, i32> {
        self.engine()
            .map(|e| {
                e.subscription_groups()
                    .iter()
                    .map(|g| (g.group_name.clone(), g.retry_max_times))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The source's entries in key order, bodies read when `bodies`.
    pub fn entries(
        &self,
        bodies: bool,
    ) -> Box<dyn Iterator<Item = Result<SourceEntry, SourceError>> + '_> {
        match &self.body {
            Body::Store { engine, mode } => match mode {
                Mode::Walk(parked) => Box::new(Walk {
                    // a body that fails its CRC stops the walk, as it stops the broker's
                    // recovery: a damaged body is never sent
                    cursor: LogCursor::new(&engine.source().commitlog.segments, true),
                    state: WalkState {
                        parked,
                        sel: &self.selection,
                        bodies,
                        seq: 0,
                    },
                    done: false,
                }),
                Mode::Items(items) => {
                    let mut seq = 0u64;
                    Box::new(items.iter().filter_map(move |item| {
                        let key = item.commitlog_offset as u64;
                        let Some(raw) = engine.record_at(item.commitlog_offset) else {
                            return Some(Ok(SourceEntry::PassedOver {
                                key,
                                why: PassedOver::Unreadable,
                            }));
                        };
                        let Some(m) = message_in(&raw, item.commitlog_offset) else {
                            return Some(Ok(SourceEntry::PassedOver {
                                key,
                                why: PassedOver::Unreadable,
                            }));
                        };
                        if !selected(&self.selection, false, key, item, &m) {
                            return None;
                        }
                        if !m.body.is_empty() && !m.body_crc_ok() {
                            return Some(Ok(SourceEntry::PassedOver {
                                key,
                                why: PassedOver::Damaged,
                            }));
                        }
                        let message = owned(&m, bodies);
                        seq += 1;
                        Some(Ok(SourceEntry::Message(Box::new(SourceMessage {
                            seq: seq - 1,
                            key,
                            item: item.clone(),
                            message,
                        }))))
                    }))
                }
            },
            Body::File => Box::new(FileLines::open(&self.path, &self.selection)),
        }
    }
}

impl Parked {
    fn of(engine: &Engine) -> Parked {
        let mut p = Parked::default();
        for d in engine.pending_delayed() {
            p.delayed.insert(d.commitlog_offset, d.due);
        }
        for t in engine.pending_transactions() {
            p.halves.insert(t.live.commitlog_offset, t.live.state);
        }
        for m in engine.timer_report(false).pending() {
            p.timers.insert(m.commitlog_offset, m.release_timestamp);
        }
        p
    }
}

/// An owned copy of a record, its body left out unless `bodies`.
fn owned(m: &MessageRef<'_>, bodies: bool) -> Message {
    Message {
        topic: m.topic.to_string(),
        queue_id: m.queue_id,
        flag: m.flag,
        queue_offset: m.queue_offset,
        physical_offset: m.physical_offset,
        sys_flag: m.sys_flag,
        born_timestamp: m.born_timestamp,
        born_host: m.born_host,
        store_timestamp: m.store_timestamp,
        store_host: m.store_host,
        reconsume_times: m.reconsume_times,
        prepared_transaction_offset: m.prepared_transaction_offset,
        body: if bodies { m.body.to_vec() } else { Vec::new() },
        properties: m.properties.0.to_vec(),
        version: m.version,
    }
}

/// Whether the selection takes a message (`by_topic`: `--topic` narrows here; a group's plan
/// was narrowed by export already).
fn selected(
    sel: &Selection,
    by_topic: bool,
    key: SourceKey,
    item: &ExportItem,
    m: &MessageRef<'_>,
) -> bool {
    if sel.begin.is_some_and(|b| key < b) || sel.end.is_some_and(|e| key >= e) {
        return false;
    }
    let parked = matches!(
        item.source,
        ExportSource::Delayed | ExportSource::Transaction | ExportSource::Timer
    );
    if let Some(t) = &sel.topic {
        let stored_here = m.topic == t.as_str();
        if by_topic
            && !stored_here
            && !(parked && m.property(prop::REAL_TOPIC).as_deref() == Some(t.as_str()))
        {
            return false;
        }
        if let Some(q) = sel.queue {
            let queue = if stored_here {
                Some(m.queue_id)
            } else {
                m.property(prop::REAL_QID)
                    .and_then(|s| crate::format::java::parse_int(&s))
            };
            if queue != Some(q) {
                return false;
            }
        }
    }
    if let Some(k) = &sel.key {
        if m.uniq_key().as_deref() != Some(k.as_str()) && !m.keys().iter().any(|x| x == k) {
            return false;
        }
    }
    if let Some(id) = &sel.msg_id {
        if m.uniq_key().as_deref() != Some(id.as_str())
            && !m.offset_msg_id().eq_ignore_ascii_case(id)
        {
            return false;
        }
    }
    true
}

/// A walk of every record of a store.
struct Walk<'a> {
    cursor: LogCursor<'a>,
    state: WalkState<'a>,
    done: bool,
}

/// What a walk knows besides its cursor.
struct WalkState<'a> {
    parked: &'a Parked,
    sel: &'a Selection,
    bodies: bool,
    seq: u64,
}

impl WalkState<'_> {
    /// The entry of a record, `None` when the selection leaves it out.
    fn entry(&mut self, m: &MessageRef<'_>) -> Option<SourceEntry> {
        let key = m.position;
        if self.sel.end.is_some_and(|e| key >= e) || self.sel.begin.is_some_and(|b| key < b) {
            return None;
        }
        let passed = |why| Some(SourceEntry::PassedOver { key, why });
        let Some(mut item) = item_of_record(m) else {
            return passed(PassedOver::Bookkeeping);
        };
        if is_bookkeeping(&m.topic) {
            return passed(PassedOver::Bookkeeping);
        }
        let at = m.position as i64;
        match item.source {
            ExportSource::Delayed => match self.parked.delayed.get(&at) {
                Some(&due) => item.due = Some(due),
                None => return passed(PassedOver::Delivered),
            },
            ExportSource::Timer => match self.parked.timers.get(&at) {
                Some(&release) => item.due = Some(release),
                None => return passed(PassedOver::Delivered),
            },
            ExportSource::Transaction => match self.parked.halves.get(&at) {
                Some(&state) => item.transaction_state = Some(state),
                None => return passed(PassedOver::Decided),
            },
            _ => {
                // a prepared or rolled back record outside the half topic is no message
                if !m.transaction_type().is_queued() {
                    return passed(PassedOver::Decided);
                }
            }
        }
        if !selected(self.sel, true, key, &item, m) {
            return None;
        }
        self.seq += 1;
        Some(SourceEntry::Message(Box::new(SourceMessage {
            seq: self.seq - 1,
            key,
            item,
            message: owned(m, self.bodies),
        })))
    }
}

impl Iterator for Walk<'_> {
    type Item = Result<SourceEntry, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.cursor.step() {
                Err(e) => {
                    self.done = true;
                    return Some(Err(e.into()));
                }
                Ok(false) => {
                    self.done = true;
                    if let LogEnd::Corrupt { offset, error } = self.cursor.end() {
                        return Some(Ok(SourceEntry::Stopped {
                            key: *offset,
                            why: error.to_string(),
                        }));
                    }
                }
                Ok(true) => {
                    if let Some(e) = self.cursor.message().and_then(|m| self.state.entry(&m)) {
                        return Some(Ok(e));
                    }
                }
            }
        }
        None
    }
}

/// The message lines of an export file.
struct FileLines<'a> {
    path: &'a Path,
    sel: &'a Selection,
    reader: Option<BufReader<std::fs::File>>,
    line: u64,
    seq: u64,
    buf: Vec<u8>,
    failed: bool,
}

impl<'a> FileLines<'a> {
    fn open(path: &'a Path, sel: &'a Selection) -> Self {
        FileLines {
            path,
            sel,
            reader: None,
            line: 0,
            seq: 0,
            buf: Vec::new(),
            failed: false,
        }
    }

    fn err(&mut self, error: LineError) -> Option<Result<SourceEntry, SourceError>> {
        self.failed = true;
        Some(Err(SourceError::Line {
            path: self.path.to_path_buf(),
            line: self.line,
            error,
        }))
    }
}

/// The item of a line: from the export's fields, else found by its topic as a walk finds it.
fn item_of_line(
    line: &crate::engine::store::message_json::ReadLine,
) -> Result<Option<ExportItem>, LineError> {
    let m = &line.message;
    let Some(source) = line.extra.get("export_source").and_then(Value::as_str) else {
        let raw = m.encode().map_err(|e| LineError::NotJson(e.to_string()))?;
        let Some(r) = message_in(&raw, line.commitlog_offset as i64) else {
            return Err(LineError::NotJson("the message does not encode".into()));
        };
        return Ok(item_of_record(&r));
    };
    let field = |field: &'static str, expected: &'static str| LineError::Field { field, expected };
    let source =
        ExportSource::from_name(source).ok_or(field("export_source", "an export source"))?;
    let resend_topic = line
        .extra
        .get("resend_topic")
        .and_then(Value::as_str)
        .ok_or(field("resend_topic", "a string"))?
        .to_string();
    let resend_queue_id = line
        .extra
        .get("resend_queue_id")
        .and_then(Value::as_i64)
        .and_then(|q| i32::try_from(q).ok())
        .ok_or(field("resend_queue_id", "a queue id"))?;
    let due = match line.extra.get("due_timestamp") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_i64().ok_or(field("due_timestamp", "an integer"))?),
    };
    let transaction_state = match line.extra.get("transaction_state") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            serde_json::from_value::<HalfState>(v.clone())
                .map_err(|_| field("transaction_state", "a transaction state"))?,
        ),
    };
    Ok(Some(ExportItem {
        source,
        queue_topic: m.topic.clone(),
        queue_id: m.queue_id,
        queue_offset: m.queue_offset,
        commitlog_offset: line.commitlog_offset as i64,
        size: m.encoded_len() as i32,
        resend_topic,
        resend_queue_id,
        origin_message_id: line
            .extra
            .get("origin_message_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        uniq_key: m.property(prop::UNIQ_KEY).map(|s| s.into_owned()),
        due,
        transaction_state,
    }))
}

impl Iterator for FileLines<'_> {
    type Item = Result<SourceEntry, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.reader.is_none() {
            match std::fs::File::open(self.path) {
                Ok(f) => self.reader = Some(BufReader::with_capacity(1 << 16, f)),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(Error::io(self.path, e).into()));
                }
            }
        }
        loop {
            let reader = self.reader.as_mut()?;
            self.buf.clear();
            let read =
                std::io::Read::take(reader, MAX_LINE as u64 + 1).read_until(b'\n', &mut self.buf);
            match read {
                Err(e) => {
                    self.failed = true;
                    return Some(Err(Error::io(self.path, e).into()));
                }
                Ok(0) => return None,
                Ok(_) => {}
            }
            self.line += 1;
            if self.buf.len() > MAX_LINE {
                self.failed = true;
                return Some(Err(SourceError::LineTooLong {
                    path: self.path.to_path_buf(),
                    line: self.line,
                }));
            }
            let text = self.buf.trim_ascii();
            if text.is_empty() {
                continue;
            }
            match crate::engine::store::message_json::read::line_type(text).as_deref() {
                Some("message") => {}
                Some(_) => continue,
                None if self.line == 1
                    && memchr::memmem::find(text, b"\"salvaged_offset\"").is_some() =>
                {
                    self.failed = true;
                    return Some(Err(SourceError::SalvageListing(self.path.to_path_buf())));
                }
                None => return self.err(LineError::NotJson("no \"type\" field".into())),
            }
            let line = match read_line(text) {
                Ok(l) => l,
                Err(e) => return self.err(e),
            };
            let item = match item_of_line(&line) {
                Ok(Some(i)) => i,
                Ok(None) => {
                    return Some(Ok(SourceEntry::PassedOver {
                        key: self.line,
                        why: PassedOver::Bookkeeping,
                    }))
                }
                Err(e) => return self.err(e),
            };
            let raw = match line.message.encode() {
                Ok(r) => r,
                Err(e) => return self.err(LineError::NotJson(e.to_string())),
            };
            let Some(r) = message_in(&raw, line.commitlog_offset as i64) else {
                return self.err(LineError::NotJson("the message does not encode".into()));
            };
            if !selected(self.sel, true, self.line, &item, &r) {
                continue;
            }
            self.seq += 1;
            return Some(Ok(SourceEntry::Message(Box::new(SourceMessage {
                seq: self.seq - 1,
                key: self.line,
                item,
                message: line.message,
            }))));
        }
    }
}
