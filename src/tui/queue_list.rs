//! The message list of one queue: the page shown, moves over it, and with a message filter,
//! pages of matches found by stepped scans (`paging`) and the queue's match count.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::app::{App, DetailSource, FilterCount, Screen};
use super::filter::MessageFilter;
use super::paging::{count_matches, Direction, MatchCount, PageScan, Placement, CHUNK_UNITS};

impl App {
    /// Show the messages of a queue starting at `at`.
    pub fn open_queue(&mut self, topic: &str, queue: i32, at: u64) {
        let Some(ti) = self.topics.iter().position(|t| t.name == topic) else {
            self.status = format!("no consume queue for {topic}");
            return;
        };
        let Some(qi) = self.topics[ti].queues.iter().position(|q| q.id == queue) else {
            self.status = format!("no queue {queue} in {topic}");
            return;
        };
        if (ti, qi) != (self.list_topic, self.list_queue) || self.rows.is_empty() {
            self.stop_filter_count();
        }
        self.list_topic = ti;
        self.list_queue = qi;
        let q = &self.topics[ti].queues[qi];
        self.msg_sel = at.clamp(q.min, q.max.saturating_sub(1).max(q.min));
        self.msg_top = self.msg_sel;
        self.go(Screen::Messages);
        if self.msg_filter.is_some() {
            self.start_filter_count();
        }
        self.refill();
    }

    pub(super) fn queue_bounds(&self) -> Option<(u64, u64)> {
        self.list_queue().map(|q| (q.min, q.max))
    }

    /// Load the page again at the current position (after a filter or page size change), and
    /// finish any scan it needs.
    pub fn load_rows(&mut self) {
        self.refill();
        self.finish_scan();
    }

    /// Fill the page from `msg_top`: directly without a filter, by a scan with one (run by
    /// [`App::step_scan`]).
    pub fn refill(&mut self) {
        let Some((min, max)) = self.queue_bounds() else {
            return;
        };
        let page = self.page.max(1);
        if self.msg_filter.is_some() {
            let keep = Some(self.msg_sel);
            self.start_scan(
                Direction::Forward,
                self.msg_top,
                page,
                Placement::PageFromFirst { keep },
            );
            return;
        }
        let page = page as u64;
        if self.msg_sel < self.msg_top {
            self.msg_top = self.msg_sel;
        } else if self.msg_sel >= self.msg_top + page {
            self.msg_top = self.msg_sel + 1 - page;
        }
        let mut scan = PageScan::new(
            Direction::Forward,
            self.msg_top,
            (min, max.min(self.msg_top + page)),
            page as usize,
            Placement::PageFromFirst { keep: None },
        );
        if let Some(cq) = self.list_cq() {
            scan.step(&self.reader, cq, None, page);
        }
        self.rows = scan.found;
    }

    pub(super) fn list_cq(&self) -> Option<&'static crate::format::consumequeue::ConsumeQueue> {
        let t = self.list_topic()?;
        let q = self.list_queue()?;
        self.store().queue(&t.name, q.id)
    }

    pub(super) fn start_scan(
        &mut self,
        dir: Direction,
        from: u64,
        want: usize,
        placement: Placement,
    ) {
        let Some(bounds) = self.queue_bounds() else {
            return;
        };
        self.page_scan = Some(PageScan::new(dir, from, bounds, want, placement));
    }

    /// True while a page of matches is being looked for.
    pub fn is_scanning(&self) -> bool {
        self.page_scan.is_some()
    }

    /// Run one chunk of the pending page scan; true when something changed.
    pub fn step_scan(&mut self) -> bool {
        let Some(mut scan) = self.page_scan.take() else {
            return false;
        };
        let Some(cq) = self.list_cq() else {
            return true;
        };
        let filter = self.msg_filter.as_ref().map(|(_, f)| f);
        if !scan.step(&self.reader, cq, filter, CHUNK_UNITS) {
            self.page_scan = Some(scan);
            return true;
        }
        self.place(scan);
        true
    }

    /// Run the pending page scan to its end.
    pub fn finish_scan(&mut self) {
        while self.page_scan.is_some() {
            self.step_scan();
        }
    }

    /// Put the matches a finished scan found on the page.
    pub(super) fn place(&mut self, scan: PageScan) {
        let page = self.page.max(1);
        let found = scan.found;
        if found.is_empty() {
            // Paging on past the last (or first) match keeps the page; a jump or a new filter
            // with nothing from there shows an empty list.
            let paging_on = match scan.direction {
                Direction::Forward => self
                    .rows
                    .last()
                    .is_some_and(|r| r.queue_offset < scan.start),
                Direction::Backward => self
                    .rows
                    .first()
                    .is_some_and(|r| r.queue_offset >= scan.start),
            };
            if paging_on {
                self.status = match scan.direction {
                    Direction::Forward => "no more matching messages after these",
                    Direction::Backward => "no more matching messages before these",
                }
                .into();
                if !self.rows.iter().any(|r| r.queue_offset == self.msg_sel) {
                    let r = match scan.direction {
                        Direction::Forward => self.rows.last(),
                        Direction::Backward => self.rows.first(),
                    };
                    self.msg_sel = r.map_or(self.msg_sel, |r| r.queue_offset);
                }
            } else {
                self.rows.clear();
                self.status = format!(
                    "no matching message from queue offset {} {}",
                    scan.start,
                    match scan.direction {
                        Direction::Forward => "to the end",
                        Direction::Backward => "back to the start",
                    }
                );
            }
            self.sync_detail();
            return;
        }
        match scan.placement {
            Placement::PageFromFirst { keep } => {
                self.msg_sel = keep
                    .filter(|k| found.iter().any(|r| r.queue_offset == *k))
                    .unwrap_or(found[0].queue_offset);
                self.rows = found;
            }
            Placement::PageToLast => {
                self.msg_sel = found[found.len() - 1].queue_offset;
                self.rows = found;
            }
            Placement::ScrollDown => {
                self.msg_sel = found[found.len() - 1].queue_offset;
                self.rows.extend(found);
                let extra = self.rows.len().saturating_sub(page);
                self.rows.drain(..extra);
            }
            Placement::ScrollUp => {
                self.msg_sel = found[0].queue_offset;
                let mut rows = found;
                rows.append(&mut self.rows);
                rows.truncate(page);
                self.rows = rows;
            }
        }
        self.msg_top = self.rows.first().map_or(self.msg_top, |r| r.queue_offset);
        if self.status.starts_with("scanning") {
            self.status.clear();
        }
        self.sync_detail();
    }

    /// Move the selection of the message list by `d` messages (a page, the ends).
    pub(super) fn list_move(&mut self, d: i64) {
        let Some((min, max)) = self.queue_bounds() else {
            return;
        };
        if self.msg_filter.is_none() {
            let last = max.saturating_sub(1).max(min) as i64;
            self.msg_sel = (self.msg_sel as i64)
                .saturating_add(d)
                .clamp(min as i64, last) as u64;
            self.refill();
            self.sync_detail();
            return;
        }
        // Filtered: the page holds matches only; past its ends a scan finds more.
        let page = self.page.max(1);
        let pos = self
            .rows
            .iter()
            .position(|r| r.queue_offset == self.msg_sel);
        let (first, last) = match (self.rows.first(), self.rows.last()) {
            (Some(f), Some(l)) => (f.queue_offset, l.queue_offset),
            _ => (min, min),
        };
        if d <= i64::MIN / 4 {
            self.start_scan(
                Direction::Forward,
                min,
                page,
                Placement::PageFromFirst { keep: None },
            );
            return;
        }
        if d >= i64::MAX / 4 {
            self.start_scan(Direction::Backward, max, page, Placement::PageToLast);
            return;
        }
        let Some(pos) = pos else {
            self.refill();
            return;
        };
        let target = pos as i64 + d;
        if (0..self.rows.len() as i64).contains(&target) {
            self.msg_sel = self.rows[target as usize].queue_offset;
            self.sync_detail();
        } else if target >= self.rows.len() as i64 {
            if d == 1 {
                self.start_scan(Direction::Forward, last + 1, 1, Placement::ScrollDown);
            } else {
                let p = Placement::PageFromFirst { keep: None };
                self.start_scan(Direction::Forward, last + 1, page, p);
            }
        } else if d == -1 {
            self.start_scan(Direction::Backward, first, 1, Placement::ScrollUp);
        } else {
            self.start_scan(Direction::Backward, first, page, Placement::PageToLast);
        }
        if let Some(s) = &self.page_scan {
            self.status = format!("scanning… {} offsets scanned", s.scanned);
        }
    }

    /// In the detail view of a message opened from the list, follow the list's selection.
    pub(super) fn sync_detail(&mut self) {
        if self.screen != Screen::Detail || self.detail_source != DetailSource::Queue {
            return;
        }
        if let Some(r) = self.rows.iter().find(|r| r.queue_offset == self.msg_sel) {
            if self.detail_offset != Some(r.offset) {
                self.detail_offset = Some(r.offset);
                self.detail_scroll = 0;
            }
        }
    }

    /// `n`/`N`: the next or previous message of the list the current one came from.
    pub(super) fn next_item(&mut self, d: i64) {
        match (self.screen, self.detail_source) {
            (Screen::Messages, _) | (Screen::Detail, DetailSource::Queue) => {
                let before = self.detail_offset;
                self.list_move(d);
                if self.page_scan.is_none()
                    && self.screen == Screen::Detail
                    && before == self.detail_offset
                {
                    self.status = if d > 0 {
                        "this is the last message".into()
                    } else {
                        "this is the first message".into()
                    };
                }
            }
            (Screen::Results, _) | (Screen::Detail, DetailSource::Results) => self.next_result(d),
            (Screen::Detail, _) => {
                self.status = "n/N step through a message list or search results".into()
            }
            _ => {}
        }
    }

    pub(super) fn next_result(&mut self, d: i64) {
        let order = self.result_order();
        if order.is_empty() {
            self.status = "no search results".into();
            return;
        }
        let n = order.len() as i64;
        self.result_sel = (self.result_sel as i64 + d).clamp(0, n - 1) as usize;
        if self.screen == Screen::Detail {
            self.detail_offset = Some(self.results[order[self.result_sel]]);
            self.detail_scroll = 0;
        }
        self.status = format!("result {}/{}", self.result_sel + 1, n);
    }

    pub(super) fn set_filter(&mut self, text: &str) {
        match MessageFilter::parse(text) {
            Ok(None) => {
                self.msg_filter = None;
                self.status = "filter off".into();
            }
            Ok(Some(f)) => {
                self.status = format!("filter: {}", f.describe());
                self.msg_filter = Some((text.to_string(), f));
            }
            Err(e) => {
                self.status = format!("bad filter: {e}");
                return;
            }
        }
        self.stop_filter_count();
        // from the list or a message opened from it: the list follows the new filter
        let in_list = self.screen == Screen::Messages
            || (self.screen == Screen::Detail && self.detail_source == DetailSource::Queue);
        if in_list {
            self.page_scan = None;
            self.rows.clear();
            if self.msg_filter.is_some() {
                self.start_filter_count();
            }
            self.refill();
        }
    }

    pub(super) fn start_filter_count(&mut self) {
        self.stop_filter_count();
        let (Some((_, filter)), Some(cq), Some((min, max))) =
            (self.msg_filter.clone(), self.list_cq(), self.queue_bounds())
        else {
            return;
        };
        let progress = Arc::new(MatchCount::default());
        let shared = progress.clone();
        let reader = self.reader.clone();
        std::thread::spawn(move || count_matches(&reader, cq, (min, max), &filter, &shared));
        self.filter_count = Some(FilterCount {
            progress,
            total: max.saturating_sub(min),
            reported: false,
        });
    }

    pub(super) fn stop_filter_count(&mut self) {
        if let Some(c) = self.filter_count.take() {
            c.progress.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Wait for the match count of the queue's filter (tests).
    pub fn finish_filter_count(&self) -> Option<u64> {
        let c = self.filter_count.as_ref()?;
        while !c.progress.done.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Some(c.progress.matched.load(Ordering::Relaxed))
    }
}
