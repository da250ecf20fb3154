//! The message detail screen: every header field, properties, the body as text, pretty JSON or
//! hex (decompressed when compressed), what delay/retry/transaction properties mean, and the raw
//! record in hex with each header field marked and the bytes a health finding names highlighted;
//! below it, when the clients traced the message, the trace pane (`traces`).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use super::app::{App, BodyView};
use super::columns::cut;
use super::time::format_utc as time;
use super::traces::pane_lines;
use super::ui::wrap;
use crate::engine::store::dispatch::{
    DLQ_PREFIX, RETRY_PREFIX, SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC,
};
use crate::format::commitlog::{prop, sysflag, MessageRef, TransactionType};
use crate::format::compression::Compression;
use crate::format::finding::Location;

/// Bytes of a body the view shows at most; `p` pages the whole body.
pub const BODY_SHOWN: usize = 256 * 1024;

/// The sysflag bits in words: `compressed (lz4), multi-tags, IPv6 born host`.
pub fn sys_flag_words(flag: i32) -> String {
    let mut w = Vec::new();
    if flag & sysflag::COMPRESSED != 0 {
        w.push(format!("compressed ({})", compression_name(flag)));
    }
    if flag & sysflag::MULTI_TAGS != 0 {
        w.push("multi-tags".to_string());
    }
    if flag & sysflag::BORNHOST_V6 != 0 {
        w.push("IPv6 born host".into());
    }
    if flag & sysflag::STOREHOST_V6 != 0 {
        w.push("IPv6 store host".into());
    }
    if flag & sysflag::NEED_UNWRAP != 0 {
        w.push("needs unwrap".into());
    }
    if flag & sysflag::INNER_BATCH != 0 {
        w.push("inner batch".into());
    }
    if w.is_empty() {
        "no flags".into()
    } else {
        w.join(", ")
    }
}

/// The compression a sysflag names, in lower case.
pub fn compression_name(flag: i32) -> &'static str {
    match Compression::of(flag) {
        Some(Compression::Zlib) => "zlib",
        Some(Compression::Lz4) => "lz4",
        Some(Compression::Zstd) => "zstd",
        None => "unknown type",
    }
}

/// The transaction type in words.
pub fn transaction_words(t: TransactionType) -> &'static str {
    match t {
        TransactionType::Not => "not a transaction",
        TransactionType::Prepared => "prepared",
        TransactionType::Commit => "commit",
        TransactionType::Rollback => "rollback",
    }
}

/// The header fields of a record: (name, start, length) inside the record.
pub fn field_spans(m: &MessageRef<'_>) -> Vec<(&'static str, usize, usize)> {
    let bl = m.born_host.encoded_len();
    let sl = m.store_host.encoded_len();
    let mut v = vec![
        ("TOTALSIZE", 0, 4),
        ("MAGICCODE", 4, 4),
        ("BODYCRC", 8, 4),
        ("QUEUEID", 12, 4),
        ("FLAG", 16, 4),
        ("QUEUEOFFSET", 20, 8),
        ("PHYSICALOFFSET", 28, 8),
        ("SYSFLAG", 36, 4),
        ("BORNTIMESTAMP", 40, 8),
        ("BORNHOST", 48, bl),
        ("STORETIMESTAMP", 48 + bl, 8),
        ("STOREHOST", 56 + bl, sl),
        ("RECONSUMETIMES", 56 + bl + sl, 4),
        ("PREPARED TX OFFSET", 60 + bl + sl, 8),
    ];
    let p = m.body_len_pos;
    v.push(("BODY length", p, 4));
    v.push(("BODY", p + 4, m.body.len()));
    let t = p + 4 + m.body.len();
    let tl = m.version.topic_len_size();
    v.push(("TOPIC length", t, tl));
    v.push(("TOPIC", t + tl, m.topic.len()));
    let pp = t + tl + m.topic.len();
    v.push(("PROPERTIES length", pp, 2));
    v.push(("PROPERTIES", pp + 2, m.properties.0.len()));
    v
}

/// Text with control characters replaced, so a body cannot move the terminal's cursor.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

/// What the system properties of a message mean, in words.
pub fn explain(m: &MessageRef<'_>, g: &crate::format::geometry::Geometry) -> Vec<String> {
    let mut out = Vec::new();
    let p = |k| m.property(k).map(|v| v.into_owned());
    if m.topic == SCHEDULE_TOPIC {
        let level = p(prop::DELAY)
            .and_then(|d| d.parse::<i32>().ok())
            .unwrap_or(0);
        let due = crate::engine::store::dispatch::deliver_timestamp(g, level, m.store_timestamp);
        out.push(format!(
            "Delayed message (level {level}) parked for {} queue {}; due {} UTC.",
            p(prop::REAL_TOPIC).unwrap_or_default(),
            p(prop::REAL_QID).unwrap_or_default(),
            time(due)
        ));
    }
    let timer_out = p(prop::TIMER_OUT_MS).and_then(|v| v.parse::<i64>().ok());
    if m.topic == crate::format::timer::TIMER_TOPIC {
        let out_ms = timer_out.unwrap_or(0);
        out.push(format!(
            "Timer message (5.x) parked for {} queue {}; released at {} UTC (TIMER_OUT_MS + 1 s){}.",
            p(prop::REAL_TOPIC).unwrap_or_default(),
            p(prop::REAL_QID).unwrap_or_default(),
            time(crate::format::timer::release_time(
                out_ms,
                crate::format::timer::DEFAULT_PRECISION_MS
            )),
            p(prop::TIMER_ROLL_TIMES)
                .map(|n| format!(", rolled {n} time(s)"))
                .unwrap_or_default()
        ));
    } else if let (Some(out_ms), Some(deq)) = (
        timer_out,
        p(prop::TIMER_DEQUEUE_MS).and_then(|v| v.parse::<i64>().ok()),
    ) {
        out.push(format!(
            "Released by the 5.x timer at {} UTC (due {} UTC); the parked copy is on {}.",
            time(deq),
            time(out_ms),
            crate::format::timer::TIMER_TOPIC
        ));
    }
    if let Some(t) = p(prop::RETRY_TOPIC) {
        out.push(format!(
            "A consumer sent it back (reconsume {}): originally on {t}, first copy {}.",
            m.reconsume_times,
            p(prop::ORIGIN_MESSAGE_ID).unwrap_or_default()
        ));
    }
    if m.topic.starts_with(RETRY_PREFIX) {
        out.push("On a retry topic: the group consumes it again after its delay.".into());
    }
    if m.topic.starts_with(DLQ_PREFIX) {
        out.push("Dead letter: the group gave up after its max reconsume times.".into());
    }
    if m.topic.starts_with(RETRY_PREFIX) || m.topic.starts_with(DLQ_PREFIX) {
        out.push("o opens the message this copy was made from.".into());
    }
    if m.topic == TRANS_HALF_TOPIC {
        out.push(format!(
            "Transaction half message for {} queue {}: invisible until committed.",
            p(prop::REAL_TOPIC).unwrap_or_default(),
            p(prop::REAL_QID).unwrap_or_default()
        ));
    }
    if m.topic == TRANS_OP_HALF_TOPIC {
        out.push(format!(
            "Transaction op record: resolves half message queue offset(s) {}.",
            String::from_utf8_lossy(m.body)
        ));
    }
    match m.transaction_type() {
        TransactionType::Commit => out.push(format!(
            "Committed transaction; its half message is at commitlog offset {}.",
            m.prepared_transaction_offset
        )),
        TransactionType::Prepared => out.push("PREPARED transaction record: not queued.".into()),
        TransactionType::Rollback => {
            out.push("ROLLBACK transaction record: not queued nor indexed.".into())
        }
        TransactionType::Not => {}
    }
    if m.is_compressed() {
        out.push(format!(
            "Body compressed ({}), shown decompressed.",
            compression_name(m.sys_flag)
        ));
    }
    out
}

fn kv(k: &str, v: String) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{k:<20}"), Style::new().fg(Color::Yellow)),
        Span::raw(v),
    ])
}

/// The lines of the detail screen for the record at commitlog offset `offset`.
pub fn lines(app: &App, offset: u64) -> Vec<Line<'static>> {
    let (loc, uncommitted) = match app.reader.message_shown_at(offset) {
        Ok(Some(l)) => l,
        Ok(None) => {
            return vec![Line::from(format!(
                "no message at commitlog offset {offset}"
            ))]
        }
        Err(e) => return vec![Line::from(e.to_string())],
    };
    let m = &loc.message;
    let mut out = Vec::new();
    if uncommitted {
        out.push(Line::from(Span::styled(
            "UNCOMMITTED: this DLedger entry is past the committed position; the broker does not \
             serve it until the group commits it (the leader decides whether it stays)",
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        )));
    }
    if let Some(h) = app.reader.dledger_entry(offset) {
        out.push(kv(
            "dledger entry",
            format!(
                "index {}  term {}  pos {}  size {}  {}",
                h.index,
                h.term,
                h.pos,
                h.size,
                if uncommitted {
                    "uncommitted"
                } else {
                    "committed"
                }
            ),
        ));
    }
    out.extend([
        kv(
            "file",
            format!(
                "{} @ {}",
                loc.file.display(),
                offset - segment_start(app, offset)
            ),
        ),
        kv(
            "commitlog offset",
            format!("{offset}  msg id {}", m.offset_msg_id()),
        ),
        kv(
            "topic / queue",
            format!(
                "{} / {}  queue offset {}",
                m.topic, m.queue_id, m.queue_offset
            ),
        ),
        kv(
            "size / version",
            format!("{} bytes, v{}", m.total_size, m.version.number()),
        ),
        kv(
            "body crc",
            format!(
                "{} ({})",
                m.body_crc,
                if m.body_crc_ok() { "ok" } else { "MISMATCH" }
            ),
        ),
        kv(
            "sysflag",
            format!("{:#x}: {}", m.sys_flag, sys_flag_words(m.sys_flag)),
        ),
        kv(
            "transaction",
            transaction_words(m.transaction_type()).to_string(),
        ),
        kv("flag", m.flag.to_string()),
        kv(
            "born",
            format!("{} UTC from {}", time(m.born_timestamp), m.born_host),
        ),
        kv(
            "stored",
            format!("{} UTC on {}", time(m.store_timestamp), m.store_host),
        ),
        kv("reconsume times", m.reconsume_times.to_string()),
        kv(
            "prepared tx offset",
            m.prepared_transaction_offset.to_string(),
        ),
    ]);
    for e in explain(m, &app.store().geometry) {
        out.push(Line::from(Span::styled(e, Style::new().fg(Color::Green))));
    }
    out.push(Line::from(Span::styled(
        "properties",
        Style::new().add_modifier(Modifier::BOLD),
    )));
    for (k, v) in m.properties.iter() {
        out.push(kv(&format!("  {k}"), printable(&v)));
    }
    let view = match app.body_view {
        BodyView::Text => "text",
        BodyView::Json => "pretty JSON",
        BodyView::Hex => "hex",
        BodyView::Record => "raw record",
    };
    out.push(Line::from(Span::styled(
        format!(
            "body ({} bytes stored, view: {view}, t cycles)",
            m.body.len()
        ),
        Style::new().add_modifier(Modifier::BOLD),
    )));
    let mut body = m
        .decompressed_body()
        .map(|b| b.into_owned())
        .unwrap_or_else(|e| {
            out.push(Line::from(e.to_string()));
            m.body.to_vec()
        });
    if body.len() > BODY_SHOWN && app.body_view != BodyView::Record {
        out.push(Line::from(format!(
            "(the first {BODY_SHOWN} of {} bytes; p shows the whole body in the pager)",
            body.len()
        )));
        body.truncate(BODY_SHOWN);
    }
    match app.body_view {
        BodyView::Text => match std::str::from_utf8(&body) {
            Ok(text) => out.extend(text.lines().map(|l| Line::from(printable(l)))),
            Err(_) => {
                out.push(Line::from("(binary body: shown as hex)"));
                out.extend(hex_lines(&body, 0, &[], &[]));
            }
        },
        BodyView::Json => match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(v) => {
                for l in serde_json::to_string_pretty(&v).unwrap_or_default().lines() {
                    out.push(Line::from(l.to_string()));
                }
            }
            Err(e) => out.push(Line::from(format!("not JSON: {e}"))),
        },
        BodyView::Hex => out.extend(hex_lines(&body, 0, &[], &[])),
        BodyView::Record => {
            let spans = field_spans(m);
            let hot = finding_bytes(app, offset, m.raw.len());
            out.push(Line::from(
                "field legend: ".to_string()
                    + &spans
                        .iter()
                        .map(|(n, s, l)| format!("{n} {s}+{l}"))
                        .collect::<Vec<_>>()
                        .join(", "),
            ));
            out.extend(hex_lines(m.raw, offset, &spans, &hot));
        }
    }
    out
}

fn segment_start(app: &App, offset: u64) -> u64 {
    app.store()
        .commitlog
        .segment_for(offset)
        .map_or(0, |s| s.start)
}

/// Positions inside the record (at `offset`, `len` bytes) that a health finding names.
fn finding_bytes(app: &App, offset: u64, len: usize) -> Vec<usize> {
    app.health
        .iter()
        .filter_map(|f| match f.location {
            Location::Commitlog { offset: at } if at >= offset && at < offset + len as u64 => {
                Some((at - offset) as usize)
            }
            _ => None,
        })
        .collect()
}

const FIELD_COLORS: [Color; 4] = [Color::Cyan, Color::Magenta, Color::Green, Color::Yellow];

/// 16 bytes per line; bytes coloured by field, highlighted where a finding points.
pub fn hex_lines(
    b: &[u8],
    base: u64,
    spans: &[(&'static str, usize, usize)],
    hot: &[usize],
) -> Vec<Line<'static>> {
    b.chunks(16)
        .enumerate()
        .map(|(i, chunk)| {
            let mut v = vec![Span::raw(format!("{:>10x}  ", base + (i * 16) as u64))];
            for (j, byte) in chunk.iter().enumerate() {
                let pos = i * 16 + j;
                let field = spans.iter().position(|(_, s, l)| pos >= *s && pos < s + l);
                let mut st = match field {
                    Some(k) => Style::new().fg(FIELD_COLORS[k % FIELD_COLORS.len()]),
                    None => Style::new(),
                };
                if hot.contains(&pos) {
                    st = st.bg(Color::Red).fg(Color::White);
                }
                v.push(Span::styled(format!("{byte:02x} "), st));
            }
            let text: String = chunk
                .iter()
                .map(|&c| if c.is_ascii_graphic() { c as char } else { '.' })
                .collect();
            v.push(Span::raw(format!(" {text}")));
            Line::from(v)
        })
        .collect()
}

/// Draw the detail view. The scroll stops with the last line at the bottom (also after `t`
/// changes the view's length).
pub fn draw(f: &mut Frame<'_>, app: &mut App, area: Rect) {
    let Some(o) = app.detail_offset else { return };
    let area = match app.message_trace(o) {
        Some(r) => {
            let lines = wrap(pane_lines(&r, o), area.width.saturating_sub(2));
            // the message keeps at least two thirds of the screen
            let want = lines.len() as u16 + 2;
            let h = want.min(area.height / 3).max(3.min(area.height));
            let [main, pane] =
                Layout::vertical([Constraint::Min(0), Constraint::Length(h)]).areas(area);
            let room = h.saturating_sub(2) as usize;
            let mut shown = lines;
            if shown.len() > room && room > 0 {
                let more = shown.len() - (room - 1);
                shown.truncate(room - 1);
                let id = r.traces.first().map_or("", |t| t.msg_id.as_str());
                shown.push(Line::from(format!(
                    "(+{more} lines: rmqstore trace -i {id} prints them all)"
                )));
            }
            f.render_widget(
                Paragraph::new(shown).block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(format!(" trace ({}) ", r.trace_topic)),
                ),
                pane,
            );
            main
        }
        None => area,
    };
    let inner_width = area.width.saturating_sub(2);
    let inner_height = area.height.saturating_sub(2) as usize;
    let lines = wrap(lines(app, o), inner_width);
    let max = lines
        .len()
        .saturating_sub(inner_height)
        .min(u16::MAX as usize) as u16;
    app.detail_max_scroll = max;
    app.detail_scroll = app.detail_scroll.min(max);
    let title = match app.detail_source {
        super::app::DetailSource::Queue => " message (n/N: next/previous in the queue) ",
        super::app::DetailSource::Results => " message (n/N: next/previous result) ",
        super::app::DetailSource::Elsewhere => " message ",
    };
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(cut(title, inner_width));
    if let Some(more) = more_marker(&lines, app.detail_scroll as usize, inner_height) {
        block = block.title_bottom(Line::from(cut(&more, inner_width)).right_aligned());
    }
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((app.detail_scroll, 0)),
        area,
    );
}

/// The marker on the bottom border when lines are below the fold: ` ↓ more: PgDn `, naming the
/// body when it has not come into view yet.
pub fn more_marker(lines: &[Line<'_>], scroll: usize, height: usize) -> Option<String> {
    let below = lines.len().saturating_sub(scroll + height);
    if below == 0 {
        return None;
    }
    let body = lines.iter().position(|l| {
        l.spans
            .first()
            .is_some_and(|s| s.content.starts_with("body ("))
    });
    Some(match body {
        Some(b) if b >= scroll + height => format!(" ↓ body and {below} more lines below: PgDn "),
        _ => format!(" ↓ {below} more lines: PgDn "),
    })
}
