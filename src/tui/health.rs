//! The health screen: verify's findings in a list, and under it the selected finding in full
//! (severity, code, file and byte offset, what it says, what the broker does about it) or, with
//! `r`, the recovery plan: what the broker would do on its next start (the arrows scroll it
//! while it is shown).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use super::app::{count_of, App, HealthState};
use super::columns::{cut, Column};
use super::time::format_utc;
use super::ui::{list, wrap};
use crate::format::finding::{Finding, Location, Severity};

pub fn draw(f: &mut Frame<'_>, app: &mut App, area: Rect) {
    // the plan gets most of the screen when asked for (or when there is no finding)
    let pane_height = if app.show_recovery {
        area.height.saturating_sub(5).max(3)
    } else {
        (area.height / 2).clamp(3, 12)
    };
    let [top, bottom] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(pane_height)]).areas(area);
    findings(f, app, top);
    let inner = bottom.width.saturating_sub(2);
    let (title, lines, scroll) = if app.show_recovery {
        // the plan scrolls with the arrows and pages while it is shown
        let lines = wrap(plan_lines(app), inner);
        let height = bottom.height.saturating_sub(2) as usize;
        app.plan_max_scroll = lines.len().saturating_sub(height).min(u16::MAX as usize) as u16;
        app.plan_scroll = app.plan_scroll.min(app.plan_max_scroll);
        let title = " recovery plan: what the broker does on its next start (r: finding) ";
        (title, lines, app.plan_scroll)
    } else {
        (
            " finding (r: recovery plan) ",
            wrap(finding_lines(app), inner),
            0,
        )
    };
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(cut(title, inner));
    let height = bottom.height.saturating_sub(2) as usize;
    if lines.len() > scroll as usize + height {
        let more = if app.show_recovery {
            " ↓ more: arrows, PgDn "
        } else {
            " ↓ more "
        };
        block = block.title_bottom(Line::from(more).right_aligned());
    }
    f.render_widget(
        Paragraph::new(lines).scroll((scroll, 0)).block(block),
        bottom,
    );
}

fn findings(f: &mut Frame<'_>, app: &App, area: Rect) {
    let order = app.health_order();
    let title = match &app.health_state {
        HealthState::NotStarted => " health: H to run verify ".to_string(),
        HealthState::Running { done, total } => format!(
            " health: verify running {}% (Esc stops) ",
            if *total > 0 { done * 100 / total } else { 0 }
        ),
        HealthState::Done => format!(" health: {} ", count_of(order.len(), "finding")),
        HealthState::Failed(e) => format!(" health: verify failed: {e} "),
    };
    let findings: Vec<&Finding> = order.iter().map(|&i| &app.health[i]).collect();
    let rows = findings
        .iter()
        .map(|x| {
            vec![
                x.severity.to_string(),
                x.code.to_string(),
                format!("{}@{}", relative(app, x), x.offset),
                x.message.clone(),
            ]
        })
        .collect();
    let columns = [
        Column::new("SEVERITY", 8, 1),
        Column::new("CODE", 10, 2),
        Column::new("WHERE", 12, 1),
        Column::text("WHAT", 30),
    ];
    let style = |r: usize, c: usize| {
        if c != 0 {
            return Style::new();
        }
        match findings.get(r).map(|x| x.severity) {
            Some(Severity::Error) => Style::new().fg(Color::Red),
            Some(Severity::Warning) => Style::new().fg(Color::Yellow),
            _ => Style::new(),
        }
    };
    list(f, area, &columns, rows, style, Some(app.health_sel), title);
}

fn relative(app: &App, x: &Finding) -> String {
    x.file
        .strip_prefix(&app.store().root)
        .unwrap_or(&x.file)
        .display()
        .to_string()
}

fn field(name: &str, value: String) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{name:<8}"), Style::new().fg(Color::Yellow)),
        Span::raw(value),
    ])
}

fn finding_lines(app: &App) -> Vec<Line<'static>> {
    let Some(x) = app.finding() else {
        return vec![Line::from(match app.health_state {
            HealthState::Done => "no findings: r shows the recovery plan",
            _ => "no finding selected",
        })];
    };
    let mut out = vec![
        Line::from(Span::styled(
            format!("{} {}", x.severity, x.code),
            Style::new().add_modifier(Modifier::BOLD),
        )),
        field("file", format!("{} at byte {}", relative(app, x), x.offset)),
        field("what", x.message.clone()),
    ];
    if x.location != Location::File {
        out.insert(2, field("where", x.location.to_string()));
    }
    if let Some(a) = &x.broker_action {
        out.push(field("broker", a.clone()));
    }
    if let Some(r) = x.record {
        out.push(field(
            "record",
            format!("at commitlog offset {r} (Enter opens it)"),
        ));
    }
    out
}

fn plan_lines(app: &App) -> Vec<Line<'static>> {
    match &app.recovery {
        None => vec![Line::from(match app.health_state {
            HealthState::Running { .. } => "planning after verify…",
            _ => "H runs verify and plans the recovery",
        })],
        Some(Err(e)) => vec![Line::from(format!("the recovery plan failed: {e}"))],
        Some(Ok(steps)) => steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                // the number is a label: the step wraps under its text
                Line::from(vec![
                    Span::raw(format!("{}. ", i + 1)),
                    Span::raw(utc_times(s)),
                ])
            })
            .collect(),
    }
}

/// A plan step as the browser words it: each `...Timestamp N` (epoch ms) in UTC with the ms in
/// brackets (`physicMsgTimestamp 2026-11-30 00:53:21.485 UTC [1796073201485]`), and offset
/// ranges with both ends (`5..=9`, `5..10`) as `5-9`.
pub fn utc_times(step: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut after_name = false;
    for word in step.split(' ') {
        let digits = word.trim_end_matches([')', ',', ';', ':']);
        let ms = digits.parse::<i64>().ok().filter(|&ms| ms > 0);
        let rest = &word[digits.len()..];
        if let Some(range) = both_ends(digits) {
            out.push(format!("{range}{rest}"));
            after_name = false;
            continue;
        }
        match ms {
            Some(ms) if after_name => out.push(format!(
                "{} UTC [{ms}]{}",
                format_utc(ms),
                &word[digits.len()..]
            )),
            _ => out.push(word.to_string()),
        }
        after_name = word.ends_with("Timestamp");
    }
    out.join(" ")
}

/// `a..=b` and `a..b` (b > a) as `a-b` with `b` included; `None` for anything else.
fn both_ends(word: &str) -> Option<String> {
    let (a, b) = word.split_once("..")?;
    let a: u64 = a.parse().ok()?;
    let last = match b.strip_prefix('=') {
        Some(b) => b.parse::<u64>().ok()?,
        None => b.parse::<u64>().ok()?.checked_sub(1)?,
    };
    Some(format!("{a}-{last}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_timestamps_are_shown_in_utc_with_the_ms() {
        assert_eq!(
            utc_times("checkpoint: physicMsgTimestamp 1250, indexMsgTimestamp 0 (getMinTimestamp 1000)"),
            "checkpoint: physicMsgTimestamp 1970-01-01 00:00:01.250 UTC [1250], indexMsgTimestamp 0 \
             (getMinTimestamp 1970-01-01 00:00:01.000 UTC [1000])"
        );
        assert_eq!(utc_times("cut at offset 1250"), "cut at offset 1250");
        assert_eq!(
            utc_times("(3 entries, offsets 0..=16, x) at offsets 5..10 again"),
            "(3 entries, offsets 0-16, x) at offsets 5-9 again"
        );
    }
}
