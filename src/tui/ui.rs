//! Drawing: functions of the app state onto a ratatui frame. Works at 80x24 and follows
//! resizes. Lists size their columns to their content (`columns`), mark the selected row with
//! `>` and reversed video (both survive NO_COLOR), and spell out the selected row in full on
//! the line under the list. The last line lists the keys of the screen.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

use super::app::{count_of, plural, sort_names, App, InputKind, Screen, UNCOMMITTED_MARK};
use super::columns::{cut, cut_front, fit, width_of, Column, SPACING};
use super::keys::{key_bar, HELP};
use super::time::{format_utc, ZONE};
use super::{detail, health};

/// The marker in front of the selected row.
pub const SELECTED_MARK: &str = "> ";

/// Draw the whole screen. Also tells the app how many list rows fit (`page`).
pub fn draw(f: &mut Frame<'_>, app: &mut App) {
    let [title, main, selection, status, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    app.page = main.height.saturating_sub(3).max(1) as usize;
    f.render_widget(Paragraph::new(title_line(app, title.width)), title);
    match app.screen {
        Screen::Topics => topics(f, app, main),
        Screen::Queues => queues(f, app, main),
        Screen::Messages => messages(f, app, main),
        Screen::Detail => detail::draw(f, app, main),
        Screen::Groups => groups(f, app, main),
        Screen::GroupQueues => group_queues(f, app, main),
        Screen::Health => health::draw(f, app, main),
        Screen::Results => results(f, app, main),
        Screen::Help => help(f, app, main),
    }
    let lines = status_lines(app, status.width);
    if lines.len() > 1 {
        // a long message takes the line of the selected row too
        f.render_widget(Paragraph::new(lines), selection.union(status));
    } else {
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(
                cut(&selected_text(app), selection.width),
                Style::new().add_modifier(Modifier::DIM),
            ))),
            selection,
        );
        f.render_widget(Paragraph::new(lines), status);
    }
    f.render_widget(
        Paragraph::new(Line::from(Span::styled(
            key_bar(app.screen, keys.width),
            Style::new().add_modifier(Modifier::REVERSED),
        ))),
        keys,
    );
}

/// The status in `width` cells: one line, or two (wrapped at words) for a message longer than
/// the line, the second ending in `…` when even two do not hold it. On the input line the
/// prompt gives way to what is typed, and a long text shows its end (where the cursor is)
/// after a `…`.
fn status_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    match &app.input {
        Some((kind, text)) => {
            let what = match kind {
                InputKind::Search => "find (key, UNIQ_KEY or msg id)",
                InputKind::Goto => "go to (queue offset, or time in UTC / with +08:00 / epoch ms)",
                InputKind::Filter => "filter (TagA || TagB, key:K, prop:N=V, body:T; empty: off)",
                InputKind::ListFilter => "show rows containing",
                InputKind::SavePath => "save the message as JSON to",
            };
            let prompt = format!("{what}: ");
            // the cursor takes a cell; the typed text keeps at least half the line
            let room = width.saturating_sub(1);
            let typed = width_of(text);
            let text_room = typed.min(room.saturating_sub(width_of(&prompt)).max(room / 2));
            let prompt = cut(&prompt, room - text_room);
            let text = cut_front(text, text_room);
            vec![Line::from(vec![
                Span::styled(prompt, Style::new().fg(Color::Yellow)),
                Span::raw(text),
                Span::styled("_", Style::new().add_modifier(Modifier::SLOW_BLINK)),
            ])]
        }
        None => {
            let mut text = app.status.clone();
            if let Some(s) = &app.page_scan {
                text = format!("scanning… {} offsets scanned (Esc stops)", s.scanned);
            }
            let style = Style::new().fg(Color::Cyan);
            let mut rows: Vec<String> = wrap(vec![Line::from(text.clone())], width)
                .iter()
                .map(|l| l.to_string())
                .collect();
            if rows.len() > 2 {
                let rest = text.get(rows[0].len()..).unwrap_or_default().trim_start();
                rows.truncate(1);
                rows.push(cut(rest, width));
            }
            rows.into_iter()
                .map(|r| Line::from(Span::styled(r, style)))
                .collect()
        }
    }
}

/// The selected row of the current list in full, so nothing cut in the list is lost.
fn selected_text(app: &App) -> String {
    match app.screen {
        Screen::Topics => app.topic().map_or(String::new(), |t| {
            format!(
                "{}{}: {} in {}",
                if t.system { "system topic " } else { "topic " },
                t.name,
                count_of(t.messages() as usize, "message"),
                count_of(t.queues.len(), "queue")
            )
        }),
        Screen::Queues => app.queue().map_or(String::new(), |q| {
            format!(
                "queue {}: {}; lag {}",
                q.id,
                queue_span(q.min, q.max),
                lag_text(&q.lags)
            )
        }),
        Screen::Messages => app
            .visible_rows()
            .into_iter()
            .find(|r| r.queue_offset == app.msg_sel)
            .map_or(String::new(), |r| {
                // what the list cuts first comes first
                format!(
                    "{}qoffset {}  tags {}  keys {}  {} bytes  stored {} {ZONE}  id {}",
                    if r.uncommitted {
                        "UNCOMMITTED DLedger entry, not served: "
                    } else {
                        ""
                    },
                    r.queue_offset,
                    if r.tags.is_empty() { "-" } else { &r.tags },
                    if r.keys.is_empty() { "-" } else { &r.keys },
                    r.size,
                    format_utc(r.store_timestamp),
                    r.msg_id
                )
            }),
        Screen::Groups => app.group().map_or(String::new(), |g| {
            format!(
                "group {}: {} with offsets, lag {}; {} in its retry/DLQ queues",
                g.group,
                count_of(g.topics, "topic"),
                g.lag,
                count_of(g.retry_dlq as usize, "message")
            )
        }),
        Screen::GroupQueues => app
            .group_row_order()
            .get(app.group_sel)
            .map(|&i| &app.groups[i])
            .map_or(String::new(), |g| {
                format!(
                    "{} {} queue {}: offset {}, max {}, {}",
                    g.group,
                    g.topic,
                    g.queue,
                    if g.offset < 0 {
                        "none".to_string()
                    } else {
                        g.offset.to_string()
                    },
                    g.max,
                    if g.counts_in_lag() {
                        format!("lag {}", g.lag)
                    } else {
                        format!("{} held (not counted as lag)", g.lag)
                    }
                )
            }),
        Screen::Results => app
            .result_order()
            .get(app.result_sel)
            .and_then(|&i| app.reader.message_at(app.results[i]).ok().flatten())
            .map_or(String::new(), |l| {
                let m = &l.message;
                format!(
                    "@{} {} queue {} qoffset {}  {} {ZONE}  keys {}  id {}",
                    m.position,
                    m.topic,
                    m.queue_id,
                    m.queue_offset,
                    format_utc(m.store_timestamp),
                    m.keys().join(" "),
                    m.offset_msg_id()
                )
            }),
        Screen::Detail | Screen::Health | Screen::Help => String::new(),
    }
}

/// A queue's offsets `[min, max)` in words, both ends included: `0-525`, or `none` when empty.
pub fn offset_range(min: u64, max: u64) -> String {
    if max > min {
        format!("{min}-{}", max - 1)
    } else {
        "none".into()
    }
}

/// `offsets 0-525 (526 messages)`, or `no messages (the next is offset 40)`.
pub fn queue_span(min: u64, max: u64) -> String {
    if max > min {
        format!(
            "offsets {} ({})",
            offset_range(min, max),
            count_of((max - min) as usize, "message")
        )
    } else {
        format!("no messages (the next is offset {max})")
    }
}

fn lag_text(lags: &[(String, i64)]) -> String {
    if lags.is_empty() {
        return "none (no group has an offset here)".into();
    }
    lags.iter()
        .map(|(g, l)| format!("{g}:{l}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn title_line(app: &App, width: u16) -> Line<'static> {
    let topic = |t: Option<&super::model::TopicRow>| t.map_or(String::new(), |t| t.name.clone());
    let where_ = match app.screen {
        Screen::Topics => "topics".to_string(),
        Screen::Queues => format!("topics > {}", topic(app.topic())),
        Screen::Messages => format!(
            "{} > queue {}",
            topic(app.list_topic()),
            app.list_queue().map_or(0, |q| q.id)
        ),
        Screen::Detail => format!("message @{}", app.detail_offset.unwrap_or(0)),
        Screen::Groups => "consumer groups".into(),
        Screen::GroupQueues => format!(
            "consumer groups > {}",
            app.group().map_or("", |g| g.group.as_str())
        ),
        Screen::Health => "health".into(),
        Screen::Results => "search results".into(),
        Screen::Help => "help".into(),
    };
    let head = " rmqstore ";
    let mut spans = vec![Span::styled(
        head,
        Style::new()
            .fg(Color::Black)
            .bg(Color::Cyan)
            .add_modifier(Modifier::BOLD),
    )];
    let mut rest = width.saturating_sub(width_of(head) + 1);
    if let Some(alert) = app.store_alert() {
        // what is wrong with the store comes before where the browser is
        let alert = cut(&format!(" ! {alert} "), rest);
        rest = rest.saturating_sub(width_of(&alert));
        spans.push(Span::styled(
            alert,
            Style::new()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD),
        ));
    }
    let text = format!(" {where_}   {}", app.store().root.display());
    spans.push(Span::styled(
        cut(&text, rest),
        Style::new().add_modifier(Modifier::BOLD),
    ));
    Line::from(spans)
}

fn block(title: String) -> Block<'static> {
    Block::default().borders(Borders::ALL).title(title)
}

/// The selected row: reversed video, so it shows also without colours.
pub fn selected() -> Style {
    Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
}

/// A list: columns fitted to the area, cells cut with `…`, the selected row marked.
pub fn list(
    f: &mut Frame<'_>,
    area: Rect,
    columns: &[Column],
    rows: Vec<Vec<String>>,
    cell_style: impl Fn(usize, usize) -> Style,
    selected_row: Option<usize>,
    title: String,
) {
    let inner = area.width.saturating_sub(2 + SELECTED_MARK.len() as u16);
    let widths = fit(columns, &rows, inner);
    let shown: Vec<usize> = (0..columns.len()).filter(|&i| widths[i] > 0).collect();
    let header = Row::new(
        shown
            .iter()
            .map(|&i| Cell::from(cut(columns[i].header, widths[i])))
            .collect::<Vec<_>>(),
    )
    .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    let body: Vec<Row<'_>> = rows
        .iter()
        .enumerate()
        .map(|(r, cells)| {
            Row::new(
                shown
                    .iter()
                    .map(|&i| {
                        let text = cells.get(i).map_or("", String::as_str);
                        Cell::from(cut(text, widths[i])).style(cell_style(r, i))
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let constraints: Vec<Constraint> = shown
        .iter()
        .map(|&i| Constraint::Length(widths[i]))
        .collect();
    let table = Table::new(body, constraints)
        .header(header)
        .column_spacing(SPACING)
        .block(block(cut(&title, area.width.saturating_sub(2))))
        .row_highlight_style(selected())
        .highlight_symbol(SELECTED_MARK)
        .highlight_spacing(ratatui::widgets::HighlightSpacing::Always);
    let mut st = TableState::default().with_selected(selected_row.filter(|_| !rows.is_empty()));
    f.render_stateful_widget(table, area, &mut st);
}

fn plain(_: usize, _: usize) -> Style {
    Style::new()
}

fn filter_note(app: &App) -> String {
    if app.list_filter.is_empty() {
        String::new()
    } else {
        format!(" containing {:?}", app.list_filter)
    }
}

fn sort_note(app: &App) -> String {
    match app.sort_of(app.screen) {
        0 => String::new(),
        i => format!(", by {}", sort_names(app.screen)[i]),
    }
}

fn topics(f: &mut Frame<'_>, app: &App, area: Rect) {
    let order = app.topic_order();
    let rows = order
        .iter()
        .map(|&i| {
            let t = &app.topics[i];
            let (min, max) = t
                .bounds()
                .map_or(("-".to_string(), "-".to_string()), |(a, b)| {
                    (a.to_string(), b.to_string())
                });
            vec![
                if t.system {
                    format!("[system] {}", t.name)
                } else {
                    t.name.clone()
                },
                t.queues.len().to_string(),
                t.messages().to_string(),
                min,
                max,
            ]
        })
        .collect();
    let columns = [
        Column::new("TOPIC", 16, 0),
        Column::new("QUEUES", 6, 1),
        Column::new("MESSAGES", 8, 1),
        Column::new("MIN", 6, 3),
        Column::new("MAX", 6, 2),
    ];
    let title = format!(
        " {}{}{} ",
        count_of(order.len(), "topic"),
        filter_note(app),
        sort_note(app)
    );
    list(f, area, &columns, rows, plain, Some(app.topic_sel), title);
}

fn queues(f: &mut Frame<'_>, app: &App, area: Rect) {
    let Some(t) = app.topic() else { return };
    let rows = app
        .queue_order()
        .iter()
        .map(|&i| {
            let q = &t.queues[i];
            vec![
                q.id.to_string(),
                q.min.to_string(),
                q.max.to_string(),
                q.messages().to_string(),
                lag_text(&q.lags),
            ]
        })
        .collect();
    let columns = [
        Column::new("QUEUE", 5, 0),
        Column::new("MIN", 6, 2),
        Column::new("MAX", 6, 1),
        Column::new("MESSAGES", 8, 1),
        Column::new("LAG BY GROUP", 12, 0),
    ];
    let title = format!(" {}{}{} ", t.name, filter_note(app), sort_note(app));
    list(f, area, &columns, rows, plain, Some(app.queue_sel), title);
}

fn messages(f: &mut Frame<'_>, app: &App, area: Rect) {
    let visible = app.visible_rows();
    let sel = visible.iter().position(|r| r.queue_offset == app.msg_sel);
    let (first, last) = (
        visible.first().map(|r| r.queue_offset),
        visible.last().map(|r| r.queue_offset),
    );
    let rows: Vec<Vec<String>> = visible.iter().map(|r| r.cells()).collect();
    let q = app.list_queue();
    let shown = match (first, last) {
        (Some(a), Some(b)) if a == b => format!("offset {a}"),
        (Some(a), Some(b)) => format!("offsets {a}-{b}"),
        _ => "no messages".into(),
    };
    let filter = match (&app.msg_filter, &app.filter_count) {
        (Some((_, mf)), Some(c)) => {
            let p = &c.progress;
            let matched = p.matched.load(std::sync::atomic::Ordering::Relaxed);
            let scanned = p.scanned.load(std::sync::atomic::Ordering::Relaxed);
            if p.done.load(std::sync::atomic::Ordering::Relaxed) {
                format!(
                    ", {}: {} in {} offsets",
                    mf.describe(),
                    plural(matched as usize, "match", "matches"),
                    scanned
                )
            } else {
                format!(
                    ", {}: counting… {matched} so far, {scanned}/{} offsets",
                    mf.describe(),
                    c.total
                )
            }
        }
        (Some((_, mf)), None) => format!(", {}", mf.describe()),
        _ => String::new(),
    };
    let uncommitted = if visible.iter().any(|r| r.uncommitted) {
        format!(", {UNCOMMITTED_MARK} uncommitted DLedger entry (not served)")
    } else {
        String::new()
    };
    let title = format!(
        " {shown} of {}{filter}{}{uncommitted} ",
        q.map_or("no queue".into(), |q| offset_range(q.min, q.max)),
        filter_note(app)
    );
    let columns = [
        Column::new("QOFFSET", 7, 0),
        Column::new("STORED (UTC)", 23, 0),
        Column::new("TAGS", 4, 2),
        Column::new("KEYS", 4, 3),
        Column::new("SIZE", 4, 4),
        Column::new("MSG ID", 32, 1),
    ];
    list(f, area, &columns, rows, plain, sel, title);
}

fn groups(f: &mut Frame<'_>, app: &App, area: Rect) {
    let order = app.summary_order();
    let rows = order
        .iter()
        .map(|&i| {
            let g = &app.group_summaries[i];
            vec![
                g.group.clone(),
                g.topics.to_string(),
                g.lag.to_string(),
                g.retry_dlq.to_string(),
            ]
        })
        .collect();
    let total = app
        .group_summaries
        .iter()
        .fold(0i64, |a, g| a.saturating_add(g.lag));
    let columns = [
        Column::new("GROUP", 12, 0),
        Column::new("TOPICS", 6, 1),
        Column::new("LAG", 5, 0),
        Column::new("IN RETRY/DLQ", 6, 2),
    ];
    let title = format!(
        " {}, total lag {total}{}{} ",
        count_of(order.len(), "consumer group"),
        filter_note(app),
        sort_note(app)
    );
    list(f, area, &columns, rows, plain, Some(app.summary_sel), title);
}

fn group_queues(f: &mut Frame<'_>, app: &App, area: Rect) {
    let Some(g) = app.group() else { return };
    let rows = app
        .group_row_order()
        .iter()
        .map(|&i| {
            let r = &app.groups[i];
            vec![
                r.topic.clone(),
                r.queue.to_string(),
                if r.offset < 0 {
                    "-".to_string()
                } else {
                    r.offset.to_string()
                },
                r.max.to_string(),
                if r.counts_in_lag() {
                    r.lag.to_string()
                } else {
                    format!("({})", r.lag)
                },
            ]
        })
        .collect();
    let columns = [
        Column::new("TOPIC", 16, 0),
        Column::new("QUEUE", 5, 0),
        Column::new("OFFSET", 6, 1),
        Column::new("MAX", 6, 2),
        Column::new("LAG", 5, 0),
    ];
    let title = format!(
        " {}: lag {}, (n) = held in retry/DLQ, not lag{}{} ",
        g.group,
        g.lag,
        filter_note(app),
        sort_note(app)
    );
    list(f, area, &columns, rows, plain, Some(app.group_sel), title);
}

fn results(f: &mut Frame<'_>, app: &App, area: Rect) {
    let order = app.result_order();
    let rows = order
        .iter()
        .map(|&i| {
            let o = app.results[i];
            match app.reader.message_at(o) {
                Ok(Some(l)) => vec![
                    o.to_string(),
                    l.message.topic.to_string(),
                    l.message.queue_id.to_string(),
                    l.message.queue_offset.to_string(),
                    format_utc(l.message.store_timestamp),
                    l.message.keys().join(" "),
                ],
                _ => vec![o.to_string(), "(unreadable)".into()],
            }
        })
        .collect();
    let columns = [
        Column::new("OFFSET", 6, 1),
        Column::new("TOPIC", 12, 0),
        Column::new("QUEUE", 5, 2),
        Column::new("QOFFSET", 7, 2),
        Column::new("STORED (UTC)", 23, 0),
        Column::new("KEYS", 4, 3),
    ];
    let title = format!(
        " {}{}{} ",
        app.results_title,
        filter_note(app),
        sort_note(app)
    );
    list(f, area, &columns, rows, plain, Some(app.result_sel), title);
}

fn help(f: &mut Frame<'_>, app: &mut App, area: Rect) {
    const KEY_WIDTH: usize = 20;
    let text_width = (area.width as usize).saturating_sub(2 + KEY_WIDTH).max(10);
    let mut lines: Vec<Line<'_>> = Vec::new();
    for (k, v) in HELP {
        // the description wraps under itself, the key column stays clear
        let mut rows: Vec<String> = vec![String::new()];
        for word in v.split(' ') {
            let last = rows.last_mut().expect("one row");
            if !last.is_empty() && last.len() + 1 + word.len() > text_width {
                rows.push(word.to_string());
            } else {
                if !last.is_empty() {
                    last.push(' ');
                }
                last.push_str(word);
            }
        }
        for (i, row) in rows.into_iter().enumerate() {
            let key = if i == 0 { *k } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!("{key:<KEY_WIDTH$}"), Style::new().fg(Color::Yellow)),
                Span::raw(row),
            ]));
        }
    }
    lines.push(Line::from(""));
    lines.push(Line::from(format!(
        "Times are shown and read in {ZONE}. The browser never writes into the store."
    )));
    let height = area.height.saturating_sub(2) as usize;
    app.help_max_scroll = lines.len().saturating_sub(height).min(u16::MAX as usize) as u16;
    app.help_scroll = app.help_scroll.min(app.help_max_scroll);
    f.render_widget(
        Paragraph::new(lines)
            .block(block(" keys ".into()))
            .wrap(Wrap { trim: false })
            .scroll((app.help_scroll, 0)),
        area,
    );
}

/// Lines split to fit `width` cells (styles kept), so a view knows its own height. Lines break
/// after a space where they have one and inside a word (a long path) only where they have none;
/// no character is lost but the space a line breaks at. A line led by a label span (ending in a
/// space, at most half the width) continues under its value.
pub fn wrap(lines: Vec<Line<'static>>, width: u16) -> Vec<Line<'static>> {
    let width = width.max(1) as usize;
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        if line.width() <= width {
            out.push(line);
            continue;
        }
        let indent = match line.spans.first() {
            Some(label)
                if line.spans.len() > 1
                    && label.content.ends_with(' ')
                    && label.width() * 2 <= width =>
            {
                label.width()
            }
            _ => 0,
        };
        let blank = || vec![(' ', Style::new(), 1usize); indent];
        let used = |row: &[(char, Style, usize)]| row.iter().map(|c| c.2).sum::<usize>();
        let mut rows: Vec<Vec<(char, Style, usize)>> = Vec::new();
        let mut row = Vec::new();
        for span in &line.spans {
            for c in span.content.chars() {
                let w = width_of(c.encode_utf8(&mut [0; 4])) as usize;
                if used(&row) + w > width {
                    if c == ' ' {
                        // the space is the break
                        rows.push(std::mem::replace(&mut row, blank()));
                        continue;
                    }
                    let carry = match row.iter().rposition(|x| x.0 == ' ') {
                        Some(i) if i >= indent.max(1) => row.split_off(i + 1),
                        _ => Vec::new(),
                    };
                    rows.push(std::mem::replace(&mut row, blank()));
                    row.extend(carry);
                    if used(&row) + w > width {
                        rows.push(std::mem::take(&mut row));
                    }
                }
                row.push((c, span.style, w));
            }
        }
        rows.push(row);
        for row in rows {
            let mut spans: Vec<Span<'static>> = Vec::new();
            for (c, style, _) in row {
                match spans.last_mut() {
                    Some(last) if last.style == style => last.content.to_mut().push(c),
                    _ => spans.push(Span::styled(c.to_string(), style)),
                }
            }
            out.push(Line::from(spans));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn wrap_breaks_between_words_and_splits_long_words() {
        let lines = wrap(vec![Line::from("one two three")], 8);
        assert_eq!(texts(&lines), ["one two ", "three"]);
        let lines = wrap(vec![Line::from("abcdefghij")], 4);
        assert_eq!(texts(&lines), ["abcd", "efgh", "ij"]);
        let lines = wrap(vec![Line::from("first copy C0A8000A00002A9F")], 16);
        assert_eq!(texts(&lines), ["first copy ", "C0A8000A00002A9F"]);
    }

    #[test]
    fn a_labelled_line_wraps_at_words_under_its_value() {
        let line = Line::from(vec![
            Span::styled("what    ", Style::new().fg(Color::Yellow)),
            Span::raw("record at commitlog offset 51725: BODYCRC is 1404705573"),
        ]);
        let lines = wrap(vec![line], 30);
        assert_eq!(
            texts(&lines),
            [
                "what    record at commitlog ",
                "        offset 51725: BODYCRC ",
                "        is 1404705573",
            ]
        );
        assert!(lines.iter().all(|l| l.width() <= 30));
        // a path longer than the line breaks inside, nothing lost
        let path = "consumequeue/OrderTopic/0/00000000000000000000";
        let line = Line::from(vec![
            Span::raw("file    "),
            Span::raw(format!("{path} at byte 40")),
        ]);
        let lines = wrap(vec![line], 30);
        let joined: String = texts(&lines).iter().map(|l| l.trim_start()).collect();
        assert_eq!(joined, format!("file    {path} at byte 40"));
    }
}
