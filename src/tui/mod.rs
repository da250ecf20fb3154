//! `rmqstore tui`: a read-only terminal browser for support engineers. `app` holds the state and
//! what keys do (with `lists`, `queue_list`, `actions`, and `paging`, `filter` and `model`
//! behind them), `ui`, `detail` and `health` draw it (`traces` gives the detail its trace pane)
//! (`columns` sizes lists, `keys` names the keys); this module owns the terminal and the event
//! loop, does what only the terminal can (clipboard, pager), and always restores the terminal
//! (also on panic).

pub mod actions;
pub mod app;
pub mod clipboard;
pub mod columns;
pub mod detail;
pub mod filter;
pub mod health;
mod health_job;
mod input;
pub mod keys;
pub mod lists;
pub mod model;
pub mod paging;
pub mod queue_list;
pub mod time;
pub mod traces;
pub mod ui;

use std::io::{stdout, Write};
use std::time::Duration;

use crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

pub use app::App;
use app::TerminalRequest;

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(stdout(), LeaveAlternateScreen, DisableMouseCapture);
}

fn enter() -> std::io::Result<()> {
    enable_raw_mode()?;
    execute!(stdout(), EnterAlternateScreen, EnableMouseCapture)
}

/// Run the browser until the user quits.
pub fn run(mut app: App) -> anyhow::Result<()> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        hook(info);
    }));
    enter()?;
    let result = event_loop(&mut app);
    app.cancel_jobs();
    restore();
    result
}

fn event_loop(app: &mut App) -> anyhow::Result<()> {
    let mut term = Terminal::new(CrosstermBackend::new(stdout()))?;
    term.clear()?;
    let mut dirty = true;
    while !app.quit {
        if dirty {
            let page = app.page;
            term.draw(|f| ui::draw(f, app))?;
            if app.page != page && app.screen == app::Screen::Messages {
                // the page size changed (first frame, resize): fill the page again
                app.refill();
                app.step_scan();
                term.draw(|f| ui::draw(f, app))?;
            }
            dirty = false;
        }
        // a scan in progress runs a chunk per turn and only glances at the keyboard
        let wait = if app.is_scanning() { 0 } else { 200 };
        if event::poll(Duration::from_millis(wait))? {
            match event::read()? {
                Event::Key(k) if k.kind != KeyEventKind::Release => app.on_key(k),
                Event::Mouse(m) => app.on_mouse(m),
                Event::Resize(_, _) => term.autoresize()?,
                _ => {}
            }
            dirty = true;
        } else if app.is_scanning() {
            dirty |= app.step_scan();
        }
        if let Some(request) = app.take_terminal_request() {
            match request {
                TerminalRequest::Copy(text) => {
                    let mut out = stdout();
                    out.write_all(clipboard::osc52(&text).as_bytes())?;
                    out.flush()?;
                }
                TerminalRequest::Page(body) => {
                    restore();
                    let shown = clipboard::show_in_pager(&body);
                    enter()?;
                    term.clear()?;
                    if let Err(e) = shown {
                        app.status = e;
                    }
                }
            }
            dirty = true;
        }
        dirty |= app.poll_jobs();
    }
    Ok(())
}
