//! Drawing: pure functions of `&App` onto a ratatui frame. Works at 80x24 and follows resizes.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

use super::app::{App, BodyView, HealthState, InputKind, Screen};
use super::detail;

/// Draw the whole screen. Also tells the app how many list rows fit (`page`).
pub fn draw(f: &mut Frame<'_>, app: &mut App) {
    let [title, main, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    app.page = main.height.saturating_sub(3).max(1) as usize;
    f.render_widget(Paragraph::new(title_line(app)), title);
    match app.screen {
        Screen::Topics => topics(f, app, main),
        Screen::Queues => queues(f, app, main),
        Screen::Messages => messages(f, app, main),
        Screen::Detail => detail::draw(f, app, main),
        Screen::Groups => groups(f, app, main),
        Screen::Health => health(f, app, main),
        Screen::Results => results(f, app, main),
        Screen::Help => help(f, app, main),
    }
    let line = match &app.input {
        Some((kind, text)) => {
            let what = match kind {
                InputKind::Search => "search (key, UNIQ_KEY or msg id)",
                InputKind::Goto => "go to (queue offset or time)",
                InputKind::Filter => "tag filter (TagA || TagB, * for none)",
                InputKind::SavePath => "save the message as JSON to",
            };
            Line::from(vec![
                Span::styled(format!("{what}: "), Style::new().fg(Color::Yellow)),
                Span::raw(text.clone()),
                Span::styled("_", Style::new().add_modifier(Modifier::SLOW_BLINK)),
            ])
        }
        None => Line::from(Span::styled(
            app.status.clone(),
            Style::new().fg(Color::Cyan),
        )),
    };
    f.render_widget(Paragraph::new(line), status);
}

fn title_line(app: &App) -> Line<'static> {
    let where_ = match app.screen {
        Screen::Topics => "topics".to_string(),
        Screen::Queues => format!("topics > {}", app.topic().map_or("", |t| t.name.as_str())),
        Screen::Messages => format!(
            "topics > {} > queue {}",
            app.topic().map_or("", |t| t.name.as_str()),
            app.queue().map_or(0, |q| q.id)
        ),
        Screen::Detail => format!("message @{}", app.detail_offset.unwrap_or(0)),
        Screen::Groups => "consumer groups".into(),
        Screen::Health => "health".into(),
        Screen::Results => "search results".into(),
        Screen::Help => "help".into(),
    };
    Line::from(vec![
        Span::styled(" rmqstore ", Style::new().fg(Color::Black).bg(Color::Cyan)),
        Span::raw(format!(" {} ", app.store().root.display())),
        Span::styled(where_, Style::new().add_modifier(Modifier::BOLD)),
        Span::raw("   Tab: topics/groups/health  ?: help"),
    ])
}

fn block(title: String) -> Block<'static> {
    Block::default().borders(Borders::ALL).title(title)
}

fn selected() -> Style {
    Style::new()
        .bg(Color::Blue)
        .fg(Color::White)
        .add_modifier(Modifier::BOLD)
}

fn table<'a>(
    header: Vec<&'a str>,
    rows: Vec<Row<'a>>,
    widths: Vec<Constraint>,
    title: String,
) -> Table<'a> {
    Table::new(rows, widths)
        .header(
            Row::new(header)
                .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)),
        )
        .block(block(title))
        .row_highlight_style(selected())
}

fn topics(f: &mut Frame<'_>, app: &App, area: Rect) {
    let mut rows = Vec::new();
    let mut last_system = false;
    for t in &app.topics {
        let (min, max) = t
            .queues
            .iter()
            .fold((u64::MAX, 0), |(a, b), q| (a.min(q.min), b.max(q.max)));
        let name = if t.system && !last_system {
            format!("[system] {}", t.name)
        } else {
            t.name.clone()
        };
        last_system = t.system;
        rows.push(Row::new(vec![
            Cell::from(name),
            Cell::from(t.queues.len().to_string()),
            Cell::from(t.messages().to_string()),
            Cell::from(if min == u64::MAX {
                "-".into()
            } else {
                min.to_string()
            }),
            Cell::from(max.to_string()),
        ]));
    }
    let mut st = TableState::default().with_selected(Some(app.topic_sel));
    let tb = table(
        vec!["TOPIC", "QUEUES", "MESSAGES", "MIN", "MAX"],
        rows,
        vec![
            Constraint::Min(24),
            Constraint::Length(7),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
        ],
        format!(" {} topics (Enter: queues) ", app.topics.len()),
    );
    f.render_stateful_widget(tb, area, &mut st);
}

fn queues(f: &mut Frame<'_>, app: &App, area: Rect) {
    let Some(t) = app.topic() else { return };
    let rows = t
        .queues
        .iter()
        .map(|q| {
            let lags = q
                .lags
                .iter()
                .map(|(g, l)| format!("{g}:{l}"))
                .collect::<Vec<_>>()
                .join(" ");
            Row::new(vec![
                q.id.to_string(),
                q.min.to_string(),
                q.max.to_string(),
                q.max.saturating_sub(q.min).to_string(),
                lags,
            ])
        })
        .collect();
    let mut st = TableState::default().with_selected(Some(app.queue_sel));
    let tb = table(
        vec!["QUEUE", "MIN", "MAX", "MESSAGES", "LAG BY GROUP"],
        rows,
        vec![
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(9),
            Constraint::Min(20),
        ],
        format!(" {} (Enter: messages) ", t.name),
    );
    f.render_stateful_widget(tb, area, &mut st);
}

/// Epoch ms as `YYYY-mm-dd HH:MM:SS.mmm` UTC.
pub fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
        .unwrap_or_else(|| ms.to_string())
}

fn messages(f: &mut Frame<'_>, app: &App, area: Rect) {
    let sel = app.rows.iter().position(|r| r.queue_offset == app.msg_sel);
    let rows = app
        .rows
        .iter()
        .map(|r| {
            Row::new(vec![
                r.queue_offset.to_string(),
                time(r.store_timestamp),
                r.tags.clone(),
                r.keys.clone(),
                r.size.to_string(),
                r.msg_id.clone(),
            ])
        })
        .collect();
    let q = app.queue();
    let filter = app
        .tag_filter
        .as_ref()
        .map(|(t, _)| format!(" tags {t}"))
        .unwrap_or_default();
    let mut st = TableState::default().with_selected(sel);
    let tb = table(
        vec!["QOFFSET", "STORED (UTC)", "TAGS", "KEYS", "SIZE", "MSG ID"],
        rows,
        vec![
            Constraint::Length(8),
            Constraint::Length(23),
            Constraint::Length(9),
            Constraint::Min(10),
            Constraint::Length(6),
            Constraint::Length(32),
        ],
        format!(
            " queue offsets {}..{} of {}..{}{filter} (Enter: detail, g: go to, f: filter) ",
            app.msg_top,
            app.msg_top + app.rows.len() as u64,
            q.map_or(0, |q| q.min),
            q.map_or(0, |q| q.max)
        ),
    );
    f.render_stateful_widget(tb, area, &mut st);
}

fn groups(f: &mut Frame<'_>, app: &App, area: Rect) {
    let rows = app
        .groups
        .iter()
        .map(|g| {
            Row::new(vec![
                g.group.clone(),
                g.topic.clone(),
                g.queue.to_string(),
                if g.offset < 0 {
                    "-".to_string()
                } else {
                    g.offset.to_string()
                },
                g.max.to_string(),
                g.lag.to_string(),
            ])
        })
        .collect();
    let total: i64 = app.groups.iter().map(|g| g.lag).sum();
    let mut st = TableState::default().with_selected(Some(app.group_sel));
    let tb = table(
        vec!["GROUP", "TOPIC", "QUEUE", "OFFSET", "MAX", "LAG"],
        rows,
        vec![
            Constraint::Min(14),
            Constraint::Min(18),
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
        ],
        format!(" consumer groups, total lag {total} (Enter: open at the group's offset) "),
    );
    f.render_stateful_widget(tb, area, &mut st);
}

fn health(f: &mut Frame<'_>, app: &App, area: Rect) {
    let title = match &app.health_state {
        HealthState::NotStarted => " health: H to run verify ".to_string(),
        HealthState::Running { done, total } => format!(
            " health: verify running {}% (Esc stops) ",
            if *total > 0 { done * 100 / total } else { 0 }
        ),
        HealthState::Done => format!(" health: {} findings (Enter: jump) ", app.health.len()),
        HealthState::Failed(e) => format!(" health: verify failed: {e} "),
    };
    let rows = app
        .health
        .iter()
        .map(|x| {
            let color = match x.severity {
                crate::format::finding::Severity::Error => Color::Red,
                crate::format::finding::Severity::Warning => Color::Yellow,
                crate::format::finding::Severity::Info => Color::Gray,
            };
            Row::new(vec![
                Cell::from(x.severity.to_string()).style(Style::new().fg(color)),
                Cell::from(x.code),
                Cell::from(format!(
                    "{}@{}",
                    x.file
                        .strip_prefix(&app.store().root)
                        .unwrap_or(&x.file)
                        .display(),
                    x.offset
                )),
                Cell::from(x.message.clone()),
            ])
        })
        .collect();
    let mut st = TableState::default().with_selected(Some(app.health_sel));
    let tb = table(
        vec!["SEVERITY", "CODE", "WHERE", "WHAT"],
        rows,
        vec![
            Constraint::Length(8),
            Constraint::Length(26),
            Constraint::Length(30),
            Constraint::Min(20),
        ],
        title,
    );
    f.render_stateful_widget(tb, area, &mut st);
}

fn results(f: &mut Frame<'_>, app: &App, area: Rect) {
    let rows = app
        .results
        .iter()
        .map(|&o| match app.reader.message_at(o) {
            Ok(Some(l)) => Row::new(vec![
                o.to_string(),
                l.message.topic.to_string(),
                l.message.queue_id.to_string(),
                l.message.queue_offset.to_string(),
                time(l.message.store_timestamp),
                l.message.keys().join(" "),
            ]),
            _ => Row::new(vec![o.to_string(), "(unreadable)".into()]),
        })
        .collect();
    let mut st = TableState::default().with_selected(Some(app.result_sel));
    let tb = table(
        vec![
            "OFFSET",
            "TOPIC",
            "QUEUE",
            "QOFFSET",
            "STORED (UTC)",
            "KEYS",
        ],
        rows,
        vec![
            Constraint::Length(10),
            Constraint::Min(14),
            Constraint::Length(5),
            Constraint::Length(8),
            Constraint::Length(23),
            Constraint::Min(10),
        ],
        format!(" {} (n/N: next/previous) ", app.results_title),
    );
    f.render_stateful_widget(tb, area, &mut st);
}

pub const HELP: &[(&str, &str)] = &[
    (
        "arrows, hjkl",
        "move; Enter/l opens, Esc/Backspace/h goes back",
    ),
    ("Tab", "topics -> consumer groups -> health"),
    ("PgUp PgDn Home End", "page through lists"),
    (
        "/",
        "search: key, UNIQ_KEY or offset message id (index, scan if none)",
    ),
    ("g", "go to a queue offset or a time (epoch ms or ISO date)"),
    (
        "f",
        "filter the message list by tag expression (TagA || TagB)",
    ),
    ("n N", "next / previous search result"),
    (
        "t",
        "body view: text, pretty JSON, hex, raw record with fields marked",
    ),
    (
        "y",
        "save the message as JSON to a file you confirm (never inside the store)",
    ),
    ("H", "run verify in the background (health)"),
    ("q, Ctrl-C", "quit (the store is never written)"),
];

fn help(f: &mut Frame<'_>, app: &App, area: Rect) {
    let lines: Vec<Line<'_>> = HELP
        .iter()
        .map(|(k, v)| {
            Line::from(vec![
                Span::styled(format!("{k:<20}"), Style::new().fg(Color::Yellow)),
                Span::raw(*v),
            ])
        })
        .collect();
    let _ = BodyView::Text;
    f.render_widget(
        Paragraph::new(lines)
            .block(block(" keys ".into()))
            .wrap(Wrap { trim: false })
            .scroll((app.detail_scroll, 0)),
        area,
    );
}
