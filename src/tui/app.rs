//! The browser's state and what each key does. No drawing and no terminal here: tests drive
//! `App` with key events and read its state, `ui` draws it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

use crate::engine::dispatch::{is_system_topic, DLQ_PREFIX, RETRY_PREFIX};
use crate::engine::filter::TagFilter;
use crate::engine::query::Reader;
use crate::engine::verify::{verify, VerifyOptions};
use crate::engine::Store;
use crate::format::commitlog::MessageRef;
use crate::format::config::{load, ConsumerOffsets};
use crate::format::finding::Finding;

/// Which screen is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    Topics,
    Queues,
    Messages,
    Detail,
    Groups,
    Health,
    Results,
    Help,
}

/// How a message body is shown (`t` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyView {
    Text,
    Json,
    Hex,
    /// The whole raw record in hex, each header field marked.
    Record,
}

#[derive(Debug, Clone)]
pub struct QueueRow {
    pub id: i32,
    pub min: u64,
    pub max: u64,
    /// Lag per group that has an offset on this queue.
    pub lags: Vec<(String, i64)>,
}

#[derive(Debug, Clone)]
pub struct TopicRow {
    pub name: String,
    pub system: bool,
    pub queues: Vec<QueueRow>,
}

impl TopicRow {
    pub fn messages(&self) -> u64 {
        self.queues
            .iter()
            .map(|q| q.max.saturating_sub(q.min))
            .sum()
    }
}

#[derive(Debug, Clone)]
pub struct GroupRow {
    pub group: String,
    pub topic: String,
    pub queue: i32,
    pub offset: i64,
    pub max: u64,
    pub lag: i64,
}

/// One line of the message list.
#[derive(Debug, Clone)]
pub struct MsgRow {
    pub queue_offset: u64,
    pub offset: u64,
    pub store_timestamp: i64,
    pub tags: String,
    pub keys: String,
    pub size: i32,
    pub msg_id: String,
}

/// State of the background verify run (health screen).
#[derive(Debug, Clone, PartialEq)]
pub enum HealthState {
    NotStarted,
    Running { done: u64, total: u64 },
    Done,
    Failed(String),
}

/// What the input line is being used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Search,
    Goto,
    Filter,
    /// The file to save the shown message to (`y`), prefilled; never inside the store.
    SavePath,
}

enum Job {
    Health(Result<Vec<Finding>, String>),
}

/// The whole browser state.
pub struct App {
    pub reader: Arc<Reader<'static>>,
    pub screen: Screen,
    back: Vec<Screen>,
    pub topics: Vec<TopicRow>,
    pub topic_sel: usize,
    pub queue_sel: usize,
    /// Selected queue offset in the message list, and the first one shown.
    pub msg_sel: u64,
    pub msg_top: u64,
    pub rows: Vec<MsgRow>,
    pub detail_offset: Option<u64>,
    pub detail_scroll: u16,
    pub body_view: BodyView,
    pub groups: Vec<GroupRow>,
    pub group_sel: usize,
    pub health: Vec<Finding>,
    pub health_state: HealthState,
    pub health_sel: usize,
    pub results: Vec<u64>,
    pub result_sel: usize,
    pub results_title: String,
    pub input: Option<(InputKind, String)>,
    pub tag_filter: Option<(String, TagFilter)>,
    pub status: String,
    /// Rows the list area can show (set by the UI each frame).
    pub page: usize,
    pub quit: bool,
    jobs_tx: Sender<Job>,
    jobs_rx: Receiver<Job>,
    cancel: Arc<AtomicBool>,
    progress: Arc<AtomicU64>,
    progress_total: Arc<AtomicU64>,
}

impl App {
    /// Open the browser on a store. Reads only consume queue ends and config: no scan.
    pub fn new(store: Store) -> Self {
        let store: &'static Store = Box::leak(Box::new(store));
        let reader = Arc::new(Reader::new(store));
        let (jobs_tx, jobs_rx) = channel();
        let mut app = App {
            reader,
            screen: Screen::Topics,
            back: Vec::new(),
            topics: Vec::new(),
            topic_sel: 0,
            queue_sel: 0,
            msg_sel: 0,
            msg_top: 0,
            rows: Vec::new(),
            detail_offset: None,
            detail_scroll: 0,
            body_view: BodyView::Text,
            groups: Vec::new(),
            group_sel: 0,
            health: Vec::new(),
            health_state: HealthState::NotStarted,
            health_sel: 0,
            results: Vec::new(),
            result_sel: 0,
            results_title: String::new(),
            input: None,
            tag_filter: None,
            status: "? for help, q to quit".into(),
            page: 20,
            quit: false,
            jobs_tx,
            jobs_rx,
            cancel: Arc::new(AtomicBool::new(false)),
            progress: Arc::new(AtomicU64::new(0)),
            progress_total: Arc::new(AtomicU64::new(0)),
        };
        app.load_topics();
        app
    }

    pub fn store(&self) -> &'static Store {
        self.reader.store()
    }

    fn load_topics(&mut self) {
        let store = self.store();
        let cl_min = store.commitlog.min_offset();
        let offsets = load::<ConsumerOffsets>(&store.config_dir())
            .map(|l| l.value)
            .unwrap_or_default();
        let mut topics: Vec<TopicRow> = Vec::new();
        let mut groups = Vec::new();
        // Queue bounds read a page or two of each queue's files: on a cold cache that is disk
        // latency, so the queues are read on several threads at once.
        let queues: Vec<_> = store.queues.iter().collect();
        let bounds: Vec<(u64, u64)> = std::thread::scope(|s| {
            let chunk = queues.len().div_ceil(8).max(1);
            let handles: Vec<_> = queues
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || {
                        part.iter()
                            .map(|(_, cq)| {
                                let max = cq.max_offset_fast().unwrap_or(0);
                                (cq.min_offset(cl_min).unwrap_or(0).min(max), max)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .zip(queues.chunks(chunk))
                .flat_map(|(h, part)| h.join().unwrap_or_else(|_| vec![(0, 0); part.len()]))
                .collect()
        });
        for (((topic, qid), _), (min, max)) in queues.into_iter().zip(bounds) {
            let mut lags = Vec::new();
            for (t, g, queues) in offsets.iter() {
                if t != topic {
                    continue;
                }
                if let Some((_, off)) = queues.iter().find(|(q, _)| q == qid) {
                    let lag = (max as i64).saturating_sub(*off).max(0);
                    lags.push((g.to_string(), lag));
                    groups.push(GroupRow {
                        group: g.to_string(),
                        topic: topic.clone(),
                        queue: *qid,
                        offset: *off,
                        max,
                        lag,
                    });
                }
            }
            let row = QueueRow {
                id: *qid,
                min,
                max,
                lags,
            };
            match topics.last_mut() {
                Some(t) if &t.name == topic => t.queues.push(row),
                _ => topics.push(TopicRow {
                    name: topic.clone(),
                    system: is_system_topic(topic),
                    queues: vec![row],
                }),
            }
        }
        // ordinary topics first, system topics grouped after them
        topics.sort_by_key(|t| (t.system, t.name.clone()));
        // Each group's retry and dead-letter queues, also when it has no offset on them: the
        // retries still waiting and the DLQ size (offset shown as "-").
        let mut names: Vec<String> = groups.iter().map(|g| g.group.clone()).collect();
        names.sort();
        names.dedup();
        for g in names {
            for prefix in [RETRY_PREFIX, DLQ_PREFIX] {
                let topic = format!("{prefix}{g}");
                let Some(t) = topics.iter().find(|t| t.name == topic) else {
                    continue;
                };
                for q in &t.queues {
                    let known = groups
                        .iter()
                        .any(|r| r.group == g && r.topic == topic && r.queue == q.id);
                    if !known {
                        groups.push(GroupRow {
                            group: g.clone(),
                            topic: topic.clone(),
                            queue: q.id,
                            offset: -1,
                            max: q.max,
                            lag: q.max.saturating_sub(q.min) as i64,
                        });
                    }
                }
            }
        }
        groups.sort_by(|a, b| (&a.group, &a.topic, a.queue).cmp(&(&b.group, &b.topic, b.queue)));
        self.topics = topics;
        self.groups = groups;
    }

    pub fn topic(&self) -> Option<&TopicRow> {
        self.topics.get(self.topic_sel)
    }

    pub fn queue(&self) -> Option<&QueueRow> {
        self.topic()?.queues.get(self.queue_sel)
    }

    fn go(&mut self, s: Screen) {
        if self.screen != s {
            self.back.push(self.screen);
            self.screen = s;
        }
    }

    pub fn go_back(&mut self) {
        match self.back.pop() {
            Some(s) => self.screen = s,
            None if self.screen != Screen::Topics => self.screen = Screen::Topics,
            None => {}
        }
    }

    /// Handle one key. Returns true when the screen should be redrawn.
    pub fn on_key(&mut self, k: KeyEvent) {
        if let Some((kind, mut text)) = self.input.take() {
            match k.code {
                KeyCode::Enter => self.submit(kind, text.trim()),
                KeyCode::Esc => self.status = "cancelled".into(),
                KeyCode::Backspace => {
                    text.pop();
                    self.input = Some((kind, text));
                }
                KeyCode::Char(c) => {
                    text.push(c);
                    self.input = Some((kind, text));
                }
                _ => self.input = Some((kind, text)),
            }
            return;
        }
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.go(Screen::Help),
            KeyCode::Esc
                if self.screen == Screen::Health
                    && matches!(self.health_state, HealthState::Running { .. }) =>
            {
                self.cancel_jobs();
                self.status = "verify stopped".into();
            }
            KeyCode::Esc | KeyCode::Backspace | KeyCode::Left | KeyCode::Char('h') => {
                self.go_back()
            }
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::PageUp => self.move_by(-(self.page.max(1) as i64)),
            KeyCode::PageDown => self.move_by(self.page.max(1) as i64),
            KeyCode::Home => self.move_by(i64::MIN / 2),
            KeyCode::End => self.move_by(i64::MAX / 2),
            KeyCode::Enter | KeyCode::Right | KeyCode::Char('l') => self.enter(),
            KeyCode::Tab => self.next_top_screen(),
            KeyCode::Char('t') => {
                self.body_view = match self.body_view {
                    BodyView::Text => BodyView::Json,
                    BodyView::Json => BodyView::Hex,
                    BodyView::Hex => BodyView::Record,
                    BodyView::Record => BodyView::Text,
                };
                self.detail_scroll = 0;
            }
            KeyCode::Char('/') => self.input = Some((InputKind::Search, String::new())),
            KeyCode::Char('g') => self.input = Some((InputKind::Goto, String::new())),
            KeyCode::Char('f') => self.input = Some((InputKind::Filter, String::new())),
            KeyCode::Char('n') => self.next_result(1),
            KeyCode::Char('N') => self.next_result(-1),
            KeyCode::Char('y') => self.copy_message(),
            KeyCode::Char('H') => self.start_health(),
            _ => {}
        }
    }

    pub fn on_mouse(&mut self, m: MouseEvent) {
        match m.kind {
            MouseEventKind::ScrollUp => self.move_by(-3),
            MouseEventKind::ScrollDown => self.move_by(3),
            _ => {}
        }
    }

    fn next_top_screen(&mut self) {
        let next = match self.screen {
            Screen::Topics | Screen::Queues | Screen::Messages | Screen::Detail => Screen::Groups,
            Screen::Groups => Screen::Health,
            _ => Screen::Topics,
        };
        self.back.clear();
        self.screen = next;
        if next == Screen::Health && self.health_state == HealthState::NotStarted {
            self.start_health();
        }
    }

    fn clamp(v: i64, len: usize) -> usize {
        v.clamp(0, len.saturating_sub(1) as i64) as usize
    }

    fn move_by(&mut self, d: i64) {
        match self.screen {
            Screen::Topics => {
                self.topic_sel = Self::clamp(self.topic_sel as i64 + d, self.topics.len())
            }
            Screen::Queues => {
                let n = self.topic().map_or(0, |t| t.queues.len());
                self.queue_sel = Self::clamp(self.queue_sel as i64 + d, n);
            }
            Screen::Messages => {
                let Some(q) = self.queue().cloned() else {
                    return;
                };
                let last = q.max.saturating_sub(1).max(q.min) as i64;
                let sel = (self.msg_sel as i64)
                    .saturating_add(d)
                    .clamp(q.min as i64, last);
                self.msg_sel = sel as u64;
                self.load_rows();
            }
            Screen::Detail | Screen::Help => {
                self.detail_scroll =
                    (self.detail_scroll as i64 + d).clamp(0, u16::MAX as i64) as u16;
            }
            Screen::Groups => {
                self.group_sel = Self::clamp(self.group_sel as i64 + d, self.groups.len())
            }
            Screen::Health => {
                self.health_sel = Self::clamp(self.health_sel as i64 + d, self.health.len())
            }
            Screen::Results => {
                self.result_sel = Self::clamp(self.result_sel as i64 + d, self.results.len())
            }
        }
    }

    fn enter(&mut self) {
        match self.screen {
            Screen::Topics if self.topic().is_some() => {
                self.queue_sel = 0;
                self.go(Screen::Queues);
            }
            Screen::Queues => {
                if let Some(q) = self.queue().cloned() {
                    self.msg_sel = q.min;
                    self.msg_top = q.min;
                    self.go(Screen::Messages);
                    self.load_rows();
                }
            }
            Screen::Messages => {
                if let Some(r) = self.rows.iter().find(|r| r.queue_offset == self.msg_sel) {
                    self.open_detail(r.offset);
                }
            }
            Screen::Results => {
                if let Some(&o) = self.results.get(self.result_sel) {
                    self.open_detail(o);
                }
            }
            Screen::Groups => {
                if let Some(g) = self.groups.get(self.group_sel).cloned() {
                    self.open_queue(&g.topic, g.queue, g.offset.max(0) as u64);
                }
            }
            Screen::Health => {
                if let Some(f) = self.health.get(self.health_sel).cloned() {
                    self.jump_to_finding(&f);
                }
            }
            _ => {}
        }
    }

    /// Show the messages of a queue starting at `at`.
    pub fn open_queue(&mut self, topic: &str, queue: i32, at: u64) {
        let Some(ti) = self.topics.iter().position(|t| t.name == topic) else {
            self.status = format!("no consume queue for {topic}");
            return;
        };
        self.topic_sel = ti;
        let Some(qi) = self.topics[ti].queues.iter().position(|q| q.id == queue) else {
            self.status = format!("no queue {queue} in {topic}");
            return;
        };
        self.queue_sel = qi;
        let q = &self.topics[ti].queues[qi];
        self.msg_sel = at.clamp(q.min, q.max.saturating_sub(1).max(q.min));
        self.msg_top = self.msg_sel;
        self.go(Screen::Messages);
        self.load_rows();
    }

    pub fn open_detail(&mut self, offset: u64) {
        self.detail_offset = Some(offset);
        self.detail_scroll = 0;
        self.go(Screen::Detail);
    }

    fn jump_to_finding(&mut self, f: &Finding) {
        let store = self.store();
        let path = if f.file.is_absolute() {
            f.file.clone()
        } else {
            store.root.join(&f.file)
        };
        if let Some(seg) = store
            .commitlog
            .segments
            .iter()
            .find(|s| s.path == path || s.path.ends_with(&f.file))
        {
            let abs = seg.start + f.offset;
            // the record at or before the offset the finding names
            match self.reader.message_at(abs) {
                Ok(Some(_)) => self.open_detail(abs),
                _ => {
                    self.status = format!(
                        "{}: byte {} is not the start of a readable record",
                        f.file.display(),
                        f.offset
                    );
                }
            }
            return;
        }
        for ((topic, qid), cq) in &store.queues {
            if cq
                .files
                .iter()
                .any(|qf| qf.path == path || qf.path.ends_with(&f.file))
            {
                let start = cq
                    .files
                    .iter()
                    .find(|qf| qf.path == path || qf.path.ends_with(&f.file))
                    .map_or(0, |qf| qf.start);
                let (t, q) = (topic.clone(), *qid);
                self.open_queue(&t, q, (start + f.offset) / 20);
                return;
            }
        }
        self.status = format!("{} at byte {}", f.file.display(), f.offset);
    }

    /// Load the rows of the visible window of the message list (lazily: one page).
    pub fn load_rows(&mut self) {
        let Some(topic) = self.topic().map(|t| t.name.clone()) else {
            return;
        };
        let Some(q) = self.queue().cloned() else {
            return;
        };
        let page = self.page.max(1) as u64;
        if self.msg_sel < self.msg_top {
            self.msg_top = self.msg_sel;
        } else if self.msg_sel >= self.msg_top + page {
            self.msg_top = self.msg_sel + 1 - page;
        }
        let store = self.store();
        let Some(cq) = store.queue(&topic, q.id) else {
            return;
        };
        let mut rows = Vec::new();
        for qo in self.msg_top..(self.msg_top + page).min(q.max) {
            let Ok(Some(u)) = cq.unit_at(qo) else {
                continue;
            };
            if u.is_pre_blank() || !u.is_valid() {
                continue;
            }
            if let Ok(Some(loc)) = self.reader.message_at(u.offset as u64) {
                let m = &loc.message;
                if let Some((_, f)) = &self.tag_filter {
                    if !f.matches(Some(u.tags_code), m.tags().as_deref()) {
                        continue;
                    }
                }
                rows.push(row_of(qo, m));
            }
        }
        self.rows = rows;
    }

    fn submit(&mut self, kind: InputKind, text: &str) {
        match kind {
            InputKind::Search => self.search(text),
            InputKind::Goto => self.goto(text),
            InputKind::SavePath => self.save_message(text),
            InputKind::Filter => {
                if text.is_empty() || text == "*" {
                    self.tag_filter = None;
                    self.status = "tag filter off".into();
                } else {
                    match TagFilter::parse(text) {
                        Ok(f) => {
                            self.tag_filter = Some((text.to_string(), f));
                            self.status = format!("tag filter: {text}");
                        }
                        Err(e) => self.status = format!("bad tag expression: {e}"),
                    }
                }
                if self.screen == Screen::Messages {
                    self.load_rows();
                }
            }
        }
    }

    /// `/`: an offset message id, a UNIQ_KEY (index, every topic), or a key (index, every topic).
    pub fn search(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut hits: Vec<u64> = Vec::new();
        let mut how = String::new();
        if let Some(l) = self.reader.by_offset_msg_id(text) {
            if let Some(r) = l.record {
                hits.push(r.message.position);
                how = "offset message id".into();
            }
        }
        if hits.is_empty() {
            let r = self.reader.by_uniq_key(text, None, 64);
            if !r.offsets.is_empty() {
                hits = r.offsets.clone();
                how = "UNIQ_KEY through the index".into();
            }
        }
        if hits.is_empty() {
            let topics: Vec<String> = self.reader.topics().to_vec();
            for t in topics {
                let r = self.reader.query_message(&t, text, 64, 0, i64::MAX);
                hits.extend(r.matching());
            }
            hits.sort_unstable();
            hits.dedup();
            how = "key through the index".into();
        }
        if hits.is_empty() && self.reader.index_file_count() == 0 {
            let r = self.reader.scan(64, |m| {
                m.uniq_key().as_deref() == Some(text) || m.keys().iter().any(|k| k == text)
            });
            hits = r.offsets.clone();
            how = "commitlog scan (no index files)".into();
        }
        self.results_title = format!("'{text}': {} found ({how})", hits.len());
        self.status = self.results_title.clone();
        self.results = hits;
        self.result_sel = 0;
        if !self.results.is_empty() {
            self.go(Screen::Results);
        }
    }

    /// `g`: a queue offset (in the message list) or a time (epoch ms or ISO date).
    pub fn goto(&mut self, text: &str) {
        let Some(topic) = self.topic().map(|t| t.name.clone()) else {
            return;
        };
        let Some(q) = self.queue().cloned() else {
            self.status = "open a queue first".into();
            return;
        };
        // small numbers are queue offsets; epoch-ms sized ones and dates are times
        let target = text.parse::<u64>().ok().filter(|&n| n < 100_000_000_000);
        let target = match target {
            Some(n) => n,
            None => match crate::commands::output::parse_time(text) {
                Ok(ts) => {
                    let v = crate::engine::query::detect_broker_version(self.store()).0;
                    match self.reader.offset_in_queue_by_time(&topic, q.id, ts, v) {
                        Ok(o) => o.max(0) as u64,
                        Err(e) => {
                            self.status = e.to_string();
                            return;
                        }
                    }
                }
                Err(e) => {
                    self.status = format!("not a queue offset or a time: {e}");
                    return;
                }
            },
        };
        self.open_queue(&topic, q.id, target);
        self.status = format!("queue offset {}", self.msg_sel);
    }

    fn next_result(&mut self, d: i64) {
        if self.results.is_empty() {
            self.status = "no search results".into();
            return;
        }
        self.result_sel =
            (self.result_sel as i64 + d).rem_euclid(self.results.len() as i64) as usize;
        let o = self.results[self.result_sel];
        self.detail_offset = Some(o);
        self.detail_scroll = 0;
        if self.screen != Screen::Detail {
            self.go(Screen::Detail);
        }
        self.status = format!("result {}/{}", self.result_sel + 1, self.results.len());
    }

    /// `y`: ask where to save the shown message as JSON, offering a file in the working folder
    /// (or the home folder when the working folder lies in the store).
    fn copy_message(&mut self) {
        let Some(o) = self.detail_offset.filter(|_| self.screen == Screen::Detail) else {
            self.status = "open a message first".into();
            return;
        };
        let name = format!("rmqstore-message-{o}.json");
        let here = std::env::current_dir().unwrap_or_default();
        let dir = match crate::format::layout::ensure_outside_stores(&here.join(&name), "", false) {
            Ok(()) => here,
            Err(_) => std::env::var_os("HOME")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(std::env::temp_dir),
        };
        self.input = Some((InputKind::SavePath, dir.join(name).display().to_string()));
        self.status = "Enter saves the message to this file, Esc cancels".into();
    }

    /// Save the shown message as JSON to `path`, which must lie outside every store and must
    /// not exist yet.
    fn save_message(&mut self, path: &str) {
        let Some(o) = self.detail_offset else {
            return;
        };
        let path = std::path::Path::new(path);
        if path.as_os_str().is_empty() {
            self.status = "cancelled".into();
            return;
        }
        if let Err(e) = crate::format::layout::ensure_outside_stores(path, "the file", false) {
            self.status = format!("not saved: {e}");
            return;
        }
        match self.reader.message_at(o) {
            Ok(Some(loc)) => {
                let j = crate::commands::output::MessageJson::new(
                    &loc.message,
                    loc.file,
                    crate::commands::output::BodyMode::Auto,
                );
                let text = serde_json::to_string_pretty(&j).unwrap_or_default();
                let written = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
                self.status = match written {
                    Ok(()) => format!("message written to {}", path.display()),
                    Err(e) => format!("not saved: {}: {e}", path.display()),
                };
            }
            _ => self.status = "message not readable".into(),
        }
    }

    /// Run `verify` on a worker thread; the health screen fills in when it is done.
    pub fn start_health(&mut self) {
        if matches!(self.health_state, HealthState::Running { .. }) {
            return;
        }
        self.cancel.store(false, Ordering::Relaxed);
        self.health_state = HealthState::Running { done: 0, total: 0 };
        let store = self.store();
        let tx = self.jobs_tx.clone();
        let (done, total) = (self.progress.clone(), self.progress_total.clone());
        let cancel = self.cancel.clone();
        std::thread::spawn(move || {
            let progress = move |_p, d: u64, t: u64| {
                done.store(d, Ordering::Relaxed);
                total.store(t, Ordering::Relaxed);
            };
            let r = verify(store, &VerifyOptions::default(), Some(&progress));
            if !cancel.load(Ordering::Relaxed) {
                let _ = tx.send(Job::Health(
                    r.map(|r| r.findings).map_err(|e| e.to_string()),
                ));
            }
        });
    }

    /// Collect what background work finished; true when something changed.
    pub fn poll_jobs(&mut self) -> bool {
        let mut changed = false;
        if let HealthState::Running { .. } = self.health_state {
            self.health_state = HealthState::Running {
                done: self.progress.load(Ordering::Relaxed),
                total: self.progress_total.load(Ordering::Relaxed),
            };
            changed = true;
        }
        while let Ok(job) = self.jobs_rx.try_recv() {
            match job {
                Job::Health(Ok(f)) => {
                    self.status = format!("health: {} findings", f.len());
                    self.health = f;
                    self.health_state = HealthState::Done;
                }
                Job::Health(Err(e)) => self.health_state = HealthState::Failed(e),
            }
            changed = true;
        }
        changed
    }

    /// Stop background work (its result is dropped).
    pub fn cancel_jobs(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        if matches!(self.health_state, HealthState::Running { .. }) {
            self.health_state = HealthState::NotStarted;
        }
    }
}

fn row_of(queue_offset: u64, m: &MessageRef<'_>) -> MsgRow {
    MsgRow {
        queue_offset,
        offset: m.position,
        store_timestamp: m.store_timestamp,
        tags: m.tags().map(|t| t.into_owned()).unwrap_or_default(),
        keys: m.keys().join(" "),
        size: m.total_size,
        msg_id: m.offset_msg_id(),
    }
}
