//! The input line: what each kind of input does (a search, a jump to an offset or a time, a
//! message filter, a list filter, a path to save a message to).

use super::app::{App, InputKind, Screen};
use super::time::{format_utc, parse_utc};

impl App {
    pub(super) fn submit(&mut self, kind: InputKind, text: &str) {
        match kind {
            InputKind::Search => self.search(text),
            InputKind::Goto => self.goto(text),
            InputKind::SavePath => self.save_message(text),
            InputKind::Filter => self.set_filter(text),
            InputKind::ListFilter => {
                let needle = text.to_lowercase();
                self.keeping_selection(|app| app.list_filter = needle);
                if !self.list_filter.is_empty() {
                    self.status = format!("showing rows containing {text:?} (Esc clears)");
                }
            }
        }
    }

    /// `F`: an offset message id, a UNIQ_KEY (index, every topic), or a key (index, every topic).
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
        self.results = hits;
        self.result_sel = 0;
        if !self.results.is_empty() {
            self.go(Screen::Results);
        }
        self.status = self.results_title.clone();
    }

    /// `g`: a queue offset, or a time (epoch ms, or a date-time in UTC unless it names its
    /// offset), in the queue of the message list.
    pub fn goto(&mut self, text: &str) {
        let queue = match self.screen {
            Screen::Queues => self.topic().zip(self.queue()),
            Screen::Messages | Screen::Detail => self.list_topic().zip(self.list_queue()),
            _ => None,
        };
        let Some((topic, q)) = queue.map(|(t, q)| (t.name.clone(), q.id)) else {
            self.status = "open a queue first".into();
            return;
        };
        // small numbers are queue offsets; epoch-ms sized ones and dates are times
        let target = text.parse::<u64>().ok().filter(|&n| n < 100_000_000_000);
        let (target, what) = match target {
            Some(n) => (n, format!("queue offset {n}")),
            None => match parse_utc(text) {
                Ok(ts) => {
                    let v = crate::engine::store::version::detect_broker_version(self.store()).0;
                    match self.reader.offset_in_queue_by_time(&topic, q, ts, v) {
                        // the broker's answer is never negative
                        Ok(o) => (
                            u64::try_from(o).unwrap_or(0),
                            format!("{} UTC", format_utc(ts)),
                        ),
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
        if self.screen == Screen::Detail {
            self.go_back();
        }
        self.open_queue(&topic, q, target);
        self.finish_scan();
        self.status = format!("{what}: queue offset {}", self.msg_sel);
    }
}
