//! The browser's state, what each key does, the screens. No drawing and no
//! terminal here: tests drive `App` with key events and read its state, `ui` draws it. More of
//! `App` lives beside it: `lists` (each list filtered and sorted), `queue_list` (a queue's
//! messages, paged with `paging` through `filter`), `actions` (what can be done with a
//! message), `health_job` (verify in the background, going to a finding), `input` (the input
//! line); `model` loads what is listed. What a key asks of the terminal (clipboard, pager)
//! is left in [`App::take_terminal_request`] for the event loop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

use super::filter::MessageFilter;
use super::model::{load_view, GroupRow, GroupSummary, TopicRow};
use super::paging::{MatchCount, PageScan};
use super::time::format_utc;
use crate::engine::store::reader::Reader;
use crate::engine::Store;
use crate::format::commitlog::MessageRef;
use crate::format::finding::Finding;

/// Which screen is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Screen {
    Topics,
    Queues,
    Messages,
    Detail,
    /// One line per consumer group: topics and total lag.
    Groups,
    /// The queues of the selected group.
    GroupQueues,
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

/// Where the message in the detail view was opened from: what `n`/`N` step through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetailSource {
    Queue,
    Results,
    Elsewhere,
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
    /// The record of an uncommitted DLedger entry: shown, marked, never served by the broker
    /// until the group commits it.
    pub uncommitted: bool,
}

/// What marks an uncommitted DLedger entry's row in the message list (after its queue offset).
pub const UNCOMMITTED_MARK: &str = "*";

impl MsgRow {
    pub fn of(queue_offset: u64, m: &MessageRef<'_>) -> Self {
        MsgRow {
            queue_offset,
            offset: m.position,
            store_timestamp: m.store_timestamp,
            tags: m.tags().map(|t| t.into_owned()).unwrap_or_default(),
            keys: m.keys().join(" "),
            size: m.total_size,
            msg_id: m.offset_msg_id(),
            uncommitted: false,
        }
    }

    /// The cells of the row as the list shows them.
    pub fn cells(&self) -> Vec<String> {
        vec![
            if self.uncommitted {
                format!("{}{UNCOMMITTED_MARK}", self.queue_offset)
            } else {
                self.queue_offset.to_string()
            },
            format_utc(self.store_timestamp),
            self.tags.clone(),
            self.keys.clone(),
            self.size.to_string(),
            self.msg_id.clone(),
        ]
    }
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
    /// `F`: find a message by key, UNIQ_KEY or offset message id.
    Search,
    Goto,
    /// `f`: the message filter of the queue.
    Filter,
    /// `/`: the text filter of the current list, applied as it is typed.
    ListFilter,
    /// The file to save the shown message to (`y`), prefilled; never inside the store.
    SavePath,
}

/// Something only the terminal can do, asked by a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalRequest {
    /// Put the text on the clipboard (OSC 52).
    Copy(String),
    /// Show the bytes in the user's pager.
    Page(Vec<u8>),
}

/// What the verify worker sends back.
pub(super) enum Job {
    Health(Result<Vec<Finding>, String>),
    Recovery(Result<Vec<String>, String>),
}

/// The match count of the queue's message filter, running on a worker thread.
pub struct FilterCount {
    pub progress: Arc<MatchCount>,
    /// Units of the queue (`max - min`).
    pub total: u64,
    /// The screen has shown the final count.
    pub(super) reported: bool,
}

/// The whole browser state.
pub struct App {
    pub reader: Arc<Reader<'static>>,
    pub screen: Screen,
    pub(super) back: Vec<Screen>,
    pub topics: Vec<TopicRow>,
    /// Selections are positions in the list as shown (filtered and sorted).
    pub topic_sel: usize,
    pub queue_sel: usize,
    /// The topic and queue of the message list (indexes into `topics`).
    pub(super) list_topic: usize,
    pub(super) list_queue: usize,
    /// Selected queue offset in the message list, and the first one shown.
    pub msg_sel: u64,
    pub msg_top: u64,
    pub rows: Vec<MsgRow>,
    /// The message filter of `f`: its text and what it means.
    pub msg_filter: Option<(String, MessageFilter)>,
    pub page_scan: Option<PageScan>,
    pub filter_count: Option<FilterCount>,
    pub detail_offset: Option<u64>,
    pub detail_source: DetailSource,
    /// Messages left for another in the detail view (`o`), for Esc to return to.
    pub(super) detail_history: Vec<(u64, DetailSource)>,
    pub detail_scroll: u16,
    pub help_scroll: u16,
    pub help_max_scroll: u16,
    /// Lines the detail view can scroll (set by the UI each frame).
    pub detail_max_scroll: u16,
    pub body_view: BodyView,
    /// The topic the clients' traces are in (`--trace-topic`).
    pub trace_topic: String,
    /// Traces per message (commitlog offset), looked up when its detail is first drawn.
    pub trace_cache: HashMap<u64, Option<Arc<crate::engine::consume::trace::TraceReport>>>,
    pub groups: Vec<GroupRow>,
    pub group_summaries: Vec<GroupSummary>,
    pub summary_sel: usize,
    pub group_sel: usize,
    pub health: Vec<Finding>,
    pub health_state: HealthState,
    pub health_sel: usize,
    /// What the broker would do on its next start, in sentences.
    pub recovery: Option<Result<Vec<String>, String>>,
    /// The health screen's lower pane shows the recovery plan instead of the finding.
    pub show_recovery: bool,
    pub plan_scroll: u16,
    /// Lines the recovery plan can scroll (set by the UI each frame).
    pub plan_max_scroll: u16,
    pub results: Vec<u64>,
    pub result_sel: usize,
    pub results_title: String,
    pub input: Option<(InputKind, String)>,
    /// The `/` text filter of the current list (lower case), cleared when the view changes.
    pub list_filter: String,
    /// The sort column of each list (0 is the natural order).
    pub(super) sort: HashMap<Screen, usize>,
    pub status: String,
    /// Rows the list area can show (set by the UI each frame).
    pub page: usize,
    pub quit: bool,
    pub(super) terminal_request: Option<TerminalRequest>,
    pub(super) jobs_tx: Sender<Job>,
    pub(super) jobs_rx: Receiver<Job>,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) progress: Arc<AtomicU64>,
    pub(super) progress_total: Arc<AtomicU64>,
}

/// Sort columns of each list, the first being the natural order.
pub fn sort_names(screen: Screen) -> &'static [&'static str] {
    match screen {
        Screen::Topics => &["name", "messages", "queues"],
        Screen::Queues => &["queue", "messages", "lag"],
        Screen::Groups => &["group", "lag", "topics"],
        Screen::GroupQueues => &["topic", "lag", "offset"],
        Screen::Health => &["as found", "severity", "code", "file"],
        Screen::Results => &["offset", "time"],
        _ => &[],
    }
}

/// `n` and the noun in the right number (`1 match`, `2 matches`).
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `n` findings / messages etc., with the noun in the right number.
pub fn count_of(n: usize, noun: &str) -> String {
    plural(n, noun, &format!("{noun}s"))
}

impl App {
    /// Open the browser on a store. Reads only consume queue ends and config: no scan.
    pub fn new(store: Store) -> Self {
        let store: &'static Store = Box::leak(Box::new(store));
        let reader = Arc::new(Reader::new(store));
        let (jobs_tx, jobs_rx) = channel();
        let view = load_view(store);
        let mut app = App {
            reader,
            screen: Screen::Topics,
            back: Vec::new(),
            topics: view.topics,
            topic_sel: 0,
            queue_sel: 0,
            list_topic: 0,
            list_queue: 0,
            msg_sel: 0,
            msg_top: 0,
            rows: Vec::new(),
            msg_filter: None,
            page_scan: None,
            filter_count: None,
            detail_offset: None,
            detail_source: DetailSource::Elsewhere,
            detail_history: Vec::new(),
            detail_scroll: 0,
            help_scroll: 0,
            help_max_scroll: u16::MAX,
            detail_max_scroll: u16::MAX,
            body_view: BodyView::Text,
            trace_topic: crate::format::trace::DEFAULT_TRACE_TOPIC.to_string(),
            trace_cache: HashMap::new(),
            groups: view.groups,
            group_summaries: view.summaries,
            summary_sel: 0,
            group_sel: 0,
            health: Vec::new(),
            health_state: HealthState::NotStarted,
            health_sel: 0,
            recovery: None,
            show_recovery: false,
            plan_scroll: 0,
            plan_max_scroll: u16::MAX,
            results: Vec::new(),
            result_sel: 0,
            results_title: String::new(),
            input: None,
            list_filter: String::new(),
            sort: HashMap::new(),
            status: String::new(),
            page: 20,
            quit: false,
            terminal_request: None,
            jobs_tx,
            jobs_rx,
            cancel: Arc::new(AtomicBool::new(false)),
            progress: Arc::new(AtomicU64::new(0)),
            progress_total: Arc::new(AtomicU64::new(0)),
        };
        if store.abort.present {
            // an unclean stop is when damage is likely: check the store from the start
            app.start_health();
            app.status = "the broker did not shut down cleanly (abort file present): verify runs \
                in the background; H shows its findings"
                .into();
        }
        app
    }

    pub fn store(&self) -> &'static Store {
        self.reader.store()
    }

    // ----------------------------------------------------------------------------------------
    // Screens

    /// Make a change to what the lists show (screen, `/` filter, sort) keeping every
    /// selection on the same item.
    pub(super) fn keeping_selection(&mut self, change: impl FnOnce(&mut Self)) {
        let topic = self.topic_order().get(self.topic_sel).copied();
        let queue = self.queue_order().get(self.queue_sel).copied();
        let group = self.summary_order().get(self.summary_sel).copied();
        let row = self.group_row_order().get(self.group_sel).copied();
        let finding = self.health_order().get(self.health_sel).copied();
        let result = self.result_order().get(self.result_sel).copied();
        change(self);
        let at = |order: Vec<usize>, item: Option<usize>, old: usize| {
            item.and_then(|i| order.iter().position(|&j| j == i))
                .unwrap_or(old)
        };
        self.topic_sel = at(self.topic_order(), topic, self.topic_sel);
        self.queue_sel = at(self.queue_order(), queue, self.queue_sel);
        self.summary_sel = at(self.summary_order(), group, self.summary_sel);
        self.group_sel = at(self.group_row_order(), row, self.group_sel);
        self.health_sel = at(self.health_order(), finding, self.health_sel);
        self.result_sel = at(self.result_order(), result, self.result_sel);
        self.clamp_selection();
    }

    /// Switch to `to`: the status and the `/` filter belong to the screen left.
    pub(super) fn switch_to(&mut self, to: Screen) {
        if to == self.screen {
            return;
        }
        self.keeping_selection(|app| {
            app.screen = to;
            app.status.clear();
            app.list_filter.clear();
        });
    }

    pub(super) fn go(&mut self, s: Screen) {
        if self.screen != s {
            self.back.push(self.screen);
            self.switch_to(s);
        }
    }

    pub fn go_back(&mut self) {
        if self.screen == Screen::Detail {
            if let Some((o, source)) = self.detail_history.pop() {
                self.detail_offset = Some(o);
                self.detail_source = source;
                self.detail_scroll = 0;
                self.status.clear();
                return;
            }
        }
        let to = match self.back.pop() {
            Some(s) => s,
            None => Screen::Topics,
        };
        self.switch_to(to);
    }

    /// Handle one key.
    pub fn on_key(&mut self, k: KeyEvent) {
        if self.input.is_some() {
            self.on_input_key(k);
            self.step_scan();
            return;
        }
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        let d = self.page.max(1) as i64;
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.go(Screen::Help),
            KeyCode::Esc if self.page_scan.is_some() => {
                self.page_scan = None;
                self.status = "scan stopped".into();
            }
            KeyCode::Esc if !self.list_filter.is_empty() => {
                self.keeping_selection(|app| app.list_filter.clear());
                self.status = "list filter off".into();
            }
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
            KeyCode::PageUp => self.move_by(-d),
            KeyCode::PageDown => self.move_by(d),
            KeyCode::Home => self.move_by(i64::MIN / 2),
            KeyCode::End => self.move_by(i64::MAX / 2),
            KeyCode::Enter | KeyCode::Right | KeyCode::Char('l') => self.enter(),
            KeyCode::Tab => self.next_top_screen(),
            KeyCode::Char('t') if self.screen == Screen::Detail => {
                // the scroll position is kept; drawing clamps it to the new view's length
                self.body_view = match self.body_view {
                    BodyView::Text => BodyView::Json,
                    BodyView::Json => BodyView::Hex,
                    BodyView::Hex => BodyView::Record,
                    BodyView::Record => BodyView::Text,
                };
            }
            KeyCode::Char('/') if self.screen != Screen::Detail && self.screen != Screen::Help => {
                self.input = Some((InputKind::ListFilter, self.list_filter.clone()))
            }
            KeyCode::Char('F') => self.input = Some((InputKind::Search, String::new())),
            KeyCode::Char('g') => self.input = Some((InputKind::Goto, String::new())),
            KeyCode::Char('f') => self.input = Some((InputKind::Filter, String::new())),
            KeyCode::Char('s') => self.cycle_sort(),
            KeyCode::Char('n') => self.next_item(1),
            KeyCode::Char('N') => self.next_item(-1),
            KeyCode::Char('o') => self.open_origin(),
            KeyCode::Char('c') => self.copy_id(),
            KeyCode::Char('C') => self.copy_body(),
            KeyCode::Char('p') => self.page_body(),
            KeyCode::Char('y') => self.save_prompt(),
            KeyCode::Char('H') => self.health_key(),
            KeyCode::Char('r') if self.screen == Screen::Health => {
                self.show_recovery = !self.show_recovery
            }
            _ => {}
        }
        self.step_scan();
    }

    pub(super) fn on_input_key(&mut self, k: KeyEvent) {
        let Some((kind, mut text)) = self.input.take() else {
            return;
        };
        let live = kind == InputKind::ListFilter;
        match k.code {
            KeyCode::Enter => {
                self.submit(kind, text.trim());
                return;
            }
            KeyCode::Esc => {
                if live {
                    self.keeping_selection(|app| app.list_filter.clear());
                }
                self.status = "cancelled".into();
                return;
            }
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) => text.push(c),
            _ => {}
        }
        if live {
            let needle = text.to_lowercase();
            self.keeping_selection(|app| app.list_filter = needle);
        }
        self.input = Some((kind, text));
    }

    pub fn on_mouse(&mut self, m: MouseEvent) {
        match m.kind {
            MouseEventKind::ScrollUp => self.move_by(-3),
            MouseEventKind::ScrollDown => self.move_by(3),
            _ => {}
        }
        self.step_scan();
    }

    pub(super) fn next_top_screen(&mut self) {
        let next = match self.screen {
            Screen::Topics | Screen::Queues | Screen::Messages | Screen::Detail => Screen::Groups,
            Screen::Groups | Screen::GroupQueues => Screen::Health,
            _ => Screen::Topics,
        };
        self.back.clear();
        self.switch_to(next);
        if next == Screen::Health && self.health_state == HealthState::NotStarted {
            self.start_health();
        }
    }

    pub(super) fn cycle_sort(&mut self) {
        let names = sort_names(self.screen);
        if names.is_empty() {
            self.status = match self.screen {
                Screen::Messages => "messages are listed in queue order".into(),
                _ => "nothing to sort here".into(),
            };
            return;
        }
        let next = (self.sort_of(self.screen) + 1) % names.len();
        self.keeping_selection(|app| {
            app.sort.insert(app.screen, next);
        });
        self.status = format!("sorted by {}", names[next]);
    }

    pub(super) fn clamp(v: i64, len: usize) -> usize {
        v.clamp(0, len.saturating_sub(1) as i64) as usize
    }

    /// Keep every selection inside its list after the list changed.
    pub(super) fn clamp_selection(&mut self) {
        self.topic_sel = Self::clamp(self.topic_sel as i64, self.topic_order().len());
        self.queue_sel = Self::clamp(self.queue_sel as i64, self.queue_order().len());
        self.summary_sel = Self::clamp(self.summary_sel as i64, self.summary_order().len());
        self.group_sel = Self::clamp(self.group_sel as i64, self.group_row_order().len());
        self.health_sel = Self::clamp(self.health_sel as i64, self.health_order().len());
        self.result_sel = Self::clamp(self.result_sel as i64, self.result_order().len());
    }

    pub(super) fn move_by(&mut self, d: i64) {
        match self.screen {
            Screen::Topics => {
                self.topic_sel = Self::clamp(self.topic_sel as i64 + d, self.topic_order().len())
            }
            Screen::Queues => {
                self.queue_sel = Self::clamp(self.queue_sel as i64 + d, self.queue_order().len())
            }
            Screen::Messages => self.list_move(d),
            Screen::Detail => {
                let max = self.detail_max_scroll as i64;
                self.detail_scroll = (self.detail_scroll as i64 + d).clamp(0, max) as u16;
            }
            Screen::Help => {
                let max = self.help_max_scroll as i64;
                self.help_scroll = (self.help_scroll as i64 + d).clamp(0, max) as u16;
            }
            Screen::Groups => {
                self.summary_sel =
                    Self::clamp(self.summary_sel as i64 + d, self.summary_order().len())
            }
            Screen::GroupQueues => {
                self.group_sel =
                    Self::clamp(self.group_sel as i64 + d, self.group_row_order().len())
            }
            Screen::Health if self.show_recovery => {
                let max = self.plan_max_scroll as i64;
                self.plan_scroll = (self.plan_scroll as i64 + d).clamp(0, max) as u16;
            }
            Screen::Health => {
                self.health_sel = Self::clamp(self.health_sel as i64 + d, self.health_order().len())
            }
            Screen::Results => {
                self.result_sel = Self::clamp(self.result_sel as i64 + d, self.result_order().len())
            }
        }
    }

    pub(super) fn enter(&mut self) {
        match self.screen {
            Screen::Topics if self.topic().is_some() => {
                self.queue_sel = 0;
                self.go(Screen::Queues);
            }
            Screen::Queues => {
                if let (Some(t), Some(q)) = (self.topic(), self.queue()) {
                    let (t, q, min) = (t.name.clone(), q.id, q.min);
                    self.open_queue(&t, q, min);
                }
            }
            Screen::Messages => {
                let sel = self.msg_sel;
                if let Some(o) = self.visible_rows().iter().find(|r| r.queue_offset == sel) {
                    let o = o.offset;
                    self.open_detail(o);
                    self.detail_source = DetailSource::Queue;
                }
            }
            Screen::Results => {
                if let Some(&i) = self.result_order().get(self.result_sel) {
                    self.open_detail(self.results[i]);
                    self.detail_source = DetailSource::Results;
                }
            }
            Screen::Groups if self.group().is_some() => {
                self.group_sel = 0;
                self.go(Screen::GroupQueues);
            }
            Screen::GroupQueues => {
                if let Some(&i) = self.group_row_order().get(self.group_sel) {
                    let g = self.groups[i].clone();
                    // a group with no committed offset (-1) starts at the queue's first unit
                    self.open_queue(&g.topic, g.queue, u64::try_from(g.offset).unwrap_or(0));
                }
            }
            Screen::Health => {
                if let Some(f) = self.finding().cloned() {
                    self.jump_to_finding(&f);
                }
            }
            _ => {}
        }
    }
}
