//! The input line: what each kind of input does (a search, a jump to an offset or a time, a
//! message filter, a list filter, a path to save a message to).

use super::app::{count_of, App, InputKind, MsgRow, Screen};
use super::time::{format_utc, parse_utc};
use crate::engine::store::version::{detect_broker_version, BrokerVersion};

/// Messages one index lookup returns at most: the broker's `maxMsgsNumBatch` (64), which
/// `queryMessage` also caps its `maxNum` at.
pub const INDEX_LOOKUP_MAX: i32 = 64;

/// Matches the commitlog scan of a store without index files stops at.
pub const SCAN_MAX: usize = 64;

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
    /// Each index lookup returns at most [`INDEX_LOOKUP_MAX`] messages, as the broker's does: when
    /// one is full, the title says the list is capped and how to find them all.
    pub fn search(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut hits: Vec<u64> = Vec::new();
        let mut how = String::new();
        // topics whose lookup came back full
        let mut capped = 0usize;
        let mut scan_capped = false;
        if let Some(l) = self.reader.by_offset_msg_id(text) {
            if let Some(r) = l.record {
                hits.push(r.message.position);
                how = "offset message id".into();
            }
        }
        if hits.is_empty() {
            let r = self.reader.by_uniq_key(text, None, INDEX_LOOKUP_MAX);
            if !r.offsets.is_empty() {
                hits = r.offsets.clone();
                capped += usize::from(r.capped);
                how = "UNIQ_KEY through the index".into();
            }
        }
        if hits.is_empty() {
            let topics: Vec<String> = self.reader.topics().to_vec();
            for t in topics {
                let r = self
                    .reader
                    .query_message(&t, text, INDEX_LOOKUP_MAX, 0, i64::MAX);
                capped += usize::from(r.capped);
                hits.extend(r.matching());
            }
            hits.sort_unstable();
            hits.dedup();
            how = "key through the index".into();
        }
        if hits.is_empty() && self.reader.index_file_count() == 0 {
            let r = self.reader.scan(SCAN_MAX, |m| {
                m.uniq_key().as_deref() == Some(text) || m.keys().iter().any(|k| k == text)
            });
            hits = r.offsets.clone();
            scan_capped = r.capped;
            how = "commitlog scan (no index files)".into();
        }
        let n = hits.len();
        self.results_title = if capped > 0 {
            format!(
                "'{text}': {n} shown, lookup capped at {INDEX_LOOKUP_MAX} per topic (maxMsgsNumBatch) \
                 in {}: more may exist (query --key {text} --scan)",
                count_of(capped, "topic")
            )
        } else if scan_capped {
            format!("'{text}': {n} shown, the scan stops at {SCAN_MAX}: more may exist (query --key {text} --scan)")
        } else {
            format!("'{text}': {n} found ({how})")
        };
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
        let Some((topic, q)) = queue.map(|(t, q)| (t.name.clone(), q.clone())) else {
            self.status = "open a queue first".into();
            return;
        };
        let (min, max) = (q.min, q.max);
        let q = q.id;
        // small numbers are queue offsets; epoch-ms sized ones and dates are times
        let target = text.parse::<u64>().ok().filter(|&n| n < 100_000_000_000);
        let (target, asked) = match target {
            Some(n) => (n, Asked::Offset(n)),
            None => match parse_utc(text) {
                Ok(ts) => match self
                    .reader
                    .offset_in_queue_by_time(&topic, q, ts, self.version())
                {
                    // the broker's answer is never negative
                    Ok(o) => (u64::try_from(o).unwrap_or(0), Asked::Time(ts)),
                    Err(e) => {
                        self.status = e.to_string();
                        return;
                    }
                },
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
        let at = self.msg_sel;
        let landed = self.rows.iter().find(|r| r.queue_offset == at).cloned();
        let Some(landed) = landed else {
            if max <= min {
                self.status = format!("the queue holds no messages (the next is offset {max})");
            }
            // else the scan said why nothing is shown
            return;
        };
        self.status = match asked {
            Asked::Offset(n) if n >= max => format!(
                "queue offset {n} is beyond the queue's end: went to the last message, offset {at}"
            ),
            Asked::Offset(n) if n < min => format!(
                "queue offset {n} is before the queue's first, {min} (the older ones expired or \
                 were deleted): went to offset {at}"
            ),
            Asked::Offset(n) if n != at => {
                format!("queue offset {n} does not match the filter: went to the next match, offset {at}")
            }
            Asked::Offset(n) => format!("queue offset {n}"),
            Asked::Time(ts) => self.time_landing(ts, target, max, &landed),
        };
    }

    /// The broker version whose rules the store follows (go to time picks by them).
    fn version(&self) -> BrokerVersion {
        detect_broker_version(self.store()).0
    }

    /// What go to time says: where it landed and, when the message there was not stored at the
    /// time asked, the broker's rule that put it there.
    fn time_landing(&self, ts: i64, answer: u64, end: u64, landed: &MsgRow) -> String {
        let asked = format!("{} UTC", format_utc(ts));
        let at = landed.queue_offset;
        if answer >= end && self.msg_filter.is_none() {
            return format!(
                "{asked}: the broker answers queue offset {answer}, the queue's end (nothing \
                 stored after that time): went to the last message, offset {at}"
            );
        }
        if at != answer {
            return format!(
                "{asked}: the broker answers queue offset {answer}; the next match of the filter is {at}"
            );
        }
        let stored = landed.store_timestamp;
        let v = self.version();
        let rule = match v {
            BrokerVersion::V4_9 => {
                "4.9's getOffsetInQueueByTime takes the nearest message (5.x: the first at or after)"
            }
            BrokerVersion::V5 => {
                "5.x's getOffsetInQueueByTime takes the first message at or after it (4.9: the nearest)"
            }
        };
        match stored.cmp(&ts) {
            std::cmp::Ordering::Equal => format!("{asked}: queue offset {at}"),
            std::cmp::Ordering::Less => format!(
                "{asked}: queue offset {at}, stored {} before it: {rule}",
                duration(ts - stored)
            ),
            // the first stored after it, by either rule
            std::cmp::Ordering::Greater => format!(
                "{asked}: queue offset {at}, the first message stored after it ({} later)",
                duration(stored - ts)
            ),
        }
    }
}

/// What `g` was given.
enum Asked {
    Offset(u64),
    Time(i64),
}

/// A span of milliseconds in words: `215 ms`, `3.2 s`, `5 min 3 s`, `2 h 5 min`, `3 d 4 h`.
pub fn duration(ms: i64) -> String {
    let s = ms / 1000;
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{} min {} s", s / 60, s % 60)
    } else if ms < 86_400_000 {
        format!("{} h {} min", s / 3600, s % 3600 / 60)
    } else {
        format!("{} d {} h", s / 86_400, s % 86_400 / 3600)
    }
}

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_in_words() {
        assert_eq!(duration(215), "215 ms");
        assert_eq!(duration(3_240), "3.2 s");
        assert_eq!(duration(303_000), "5 min 3 s");
        assert_eq!(duration(7_500_000), "2 h 5 min");
        assert_eq!(duration(273_600_000), "3 d 4 h");
    }
}
