//! The lists as shown: each screen's items filtered by the `/` text and ordered by the `s`
//! sort column, and the items selected in them. Selections are positions in these orders.

use super::app::{App, MsgRow, Screen};
use super::filter::text_matches;
use super::model::{GroupSummary, QueueRow, TopicRow};
use crate::format::finding::Finding;

impl App {
    /// The sort column of a list.
    pub fn sort_of(&self, screen: Screen) -> usize {
        self.sort.get(&screen).copied().unwrap_or(0)
    }

    pub(super) fn filtered<T>(
        &self,
        screen: Screen,
        items: &[T],
        cells: impl Fn(&T) -> Vec<String>,
    ) -> Vec<usize> {
        let needle = if self.screen == screen {
            self.list_filter.as_str()
        } else {
            ""
        };
        (0..items.len())
            .filter(|&i| text_matches(&cells(&items[i]), needle))
            .collect()
    }

    /// Indexes into `topics`, as listed.
    pub fn topic_order(&self) -> Vec<usize> {
        let mut v = self.filtered(Screen::Topics, &self.topics, |t| vec![t.name.clone()]);
        let t = &self.topics;
        match self.sort_of(Screen::Topics) {
            1 => v.sort_by_key(|&i| std::cmp::Reverse(t[i].messages())),
            2 => v.sort_by_key(|&i| std::cmp::Reverse(t[i].queues.len())),
            _ => {}
        }
        v
    }

    /// Indexes into the selected topic's queues, as listed.
    pub fn queue_order(&self) -> Vec<usize> {
        let Some(t) = self.topic() else {
            return Vec::new();
        };
        let mut v = self.filtered(Screen::Queues, &t.queues, |q| {
            let mut c = vec![q.id.to_string()];
            c.extend(q.lags.iter().map(|(g, _)| g.clone()));
            c
        });
        match self.sort_of(Screen::Queues) {
            1 => v.sort_by_key(|&i| std::cmp::Reverse(t.queues[i].messages())),
            2 => v.sort_by_key(|&i| std::cmp::Reverse(t.queues[i].total_lag())),
            _ => {}
        }
        v
    }

    /// Indexes into `group_summaries`, as listed.
    pub fn summary_order(&self) -> Vec<usize> {
        let s = &self.group_summaries;
        let mut v = self.filtered(Screen::Groups, s, |g| vec![g.group.clone()]);
        match self.sort_of(Screen::Groups) {
            1 => v.sort_by_key(|&i| std::cmp::Reverse(s[i].lag)),
            2 => v.sort_by_key(|&i| std::cmp::Reverse(s[i].topics)),
            _ => {}
        }
        v
    }

    /// The selected consumer group.
    pub fn group(&self) -> Option<&GroupSummary> {
        self.group_summaries
            .get(*self.summary_order().get(self.summary_sel)?)
    }

    /// Indexes into `groups` of the selected group's queues, as listed.
    pub fn group_row_order(&self) -> Vec<usize> {
        let Some(g) = self.group().map(|g| g.group.clone()) else {
            return Vec::new();
        };
        let rows = &self.groups;
        let mut v: Vec<usize> = self
            .filtered(Screen::GroupQueues, rows, |r| {
                vec![r.topic.clone(), r.queue.to_string()]
            })
            .into_iter()
            .filter(|&i| rows[i].group == g)
            .collect();
        match self.sort_of(Screen::GroupQueues) {
            1 => v.sort_by_key(|&i| std::cmp::Reverse(rows[i].lag)),
            2 => v.sort_by_key(|&i| std::cmp::Reverse(rows[i].offset)),
            _ => {}
        }
        v
    }

    /// Indexes into `health`, as listed.
    pub fn health_order(&self) -> Vec<usize> {
        let h = &self.health;
        let mut v = self.filtered(Screen::Health, h, |f| {
            vec![
                f.code.to_string(),
                f.file.display().to_string(),
                f.message.clone(),
            ]
        });
        match self.sort_of(Screen::Health) {
            1 => v.sort_by_key(|&i| std::cmp::Reverse(h[i].severity)),
            2 => v.sort_by_key(|&i| h[i].code.as_str()),
            3 => v.sort_by(|&a, &b| (&h[a].file, h[a].offset).cmp(&(&h[b].file, h[b].offset))),
            _ => {}
        }
        v
    }

    /// The selected health finding.
    pub fn finding(&self) -> Option<&Finding> {
        self.health.get(*self.health_order().get(self.health_sel)?)
    }

    /// Indexes into `results`, as listed.
    pub fn result_order(&self) -> Vec<usize> {
        let reader = &self.reader;
        let describe = |&o: &u64| match reader.message_at(o) {
            Ok(Some(l)) => vec![
                l.message.topic.to_string(),
                l.message.keys().join(" "),
                l.message.offset_msg_id(),
            ],
            _ => Vec::new(),
        };
        let mut v = self.filtered(Screen::Results, &self.results, describe);
        if self.sort_of(Screen::Results) == 1 {
            v.sort_by_key(|&i| {
                reader
                    .message_at(self.results[i])
                    .ok()
                    .flatten()
                    .map_or(i64::MIN, |l| l.message.store_timestamp)
            });
        }
        v
    }

    /// The messages of the page as listed (the `/` text filter applied).
    pub fn visible_rows(&self) -> Vec<&MsgRow> {
        let needle = if self.screen == Screen::Messages {
            self.list_filter.as_str()
        } else {
            ""
        };
        self.rows
            .iter()
            .filter(|r| text_matches(&r.cells(), needle))
            .collect()
    }

    /// The topic selected in the topic list (also the one the queue list shows).
    pub fn topic(&self) -> Option<&TopicRow> {
        self.topics.get(*self.topic_order().get(self.topic_sel)?)
    }

    /// The queue selected in the queue list.
    pub fn queue(&self) -> Option<&QueueRow> {
        let t = self.topic()?;
        t.queues.get(*self.queue_order().get(self.queue_sel)?)
    }

    /// The topic of the message list.
    pub fn list_topic(&self) -> Option<&TopicRow> {
        self.topics.get(self.list_topic)
    }

    /// The queue of the message list.
    pub fn list_queue(&self) -> Option<&QueueRow> {
        self.list_topic()?.queues.get(self.list_queue)
    }
}
