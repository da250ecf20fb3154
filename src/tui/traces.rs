//! The detail view's trace pane: what the clients' message traces say about the message shown
//! (`engine::trace`). Looked up once per message when its detail is first drawn and cached, so
//! stepping through messages or redrawing costs nothing more; a lookup goes through the index
//! under the trace topic, or walks at most [`SCAN_AT_MOST`] trace messages when there is none.

use std::sync::Arc;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::app::App;
use super::time::format_utc;
use crate::engine::consume::trace::{trace_of_message, TraceReport};

/// Trace messages a lookup without index files reads at most.
pub const SCAN_AT_MOST: u64 = 2000;

impl App {
    /// The traces of the message at commitlog offset `offset`, looked up on first use.
    pub fn message_trace(&mut self, offset: u64) -> Option<Arc<TraceReport>> {
        if let Some(t) = self.trace_cache.get(&offset) {
            return t.clone();
        }
        let found = match self.reader.message_at(offset) {
            Ok(Some(l)) => {
                trace_of_message(&self.reader, &self.trace_topic, &l.message, SCAN_AT_MOST)
                    .map(Arc::new)
            }
            _ => None,
        };
        self.trace_cache.insert(offset, found.clone());
        found
    }
}

/// The pane's lines: each traced message's events, times in UTC; where it is stored is left
/// out when it is the message shown (at commitlog offset `shown`).
pub fn pane_lines(r: &TraceReport, shown: u64) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let utc = |ms: i64| format!("{} UTC", format_utc(ms));
    for t in &r.traces {
        let here = t
            .stored
            .as_ref()
            .is_some_and(|s| s.commitlog_offset == shown);
        if r.traces.len() > 1 {
            out.push(Line::from(Span::styled(
                format!("message {}", t.msg_id),
                Style::new().add_modifier(Modifier::BOLD),
            )));
        }
        for l in t.event_lines(&utc) {
            if here && l.starts_with("stored ") {
                continue;
            }
            let (head, rest) = l.split_at(l.find(' ').unwrap_or(l.len()));
            out.push(Line::from(vec![
                Span::styled(head.to_string(), Style::new().fg(Color::Yellow)),
                Span::raw(rest.to_string()),
            ]));
        }
    }
    if r.capped {
        out.push(Line::from(format!(
            "(looked at the first {SCAN_AT_MOST} trace messages only: rmqstore trace reads all)"
        )));
    }
    out
}
