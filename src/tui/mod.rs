//! `rmqstore tui`: a read-only terminal browser for support engineers. `app` holds the state and
//! what keys do, `ui` and `detail` draw it; this module owns the terminal and the event loop, and
//! always restores the terminal (also on panic).

pub mod app;
pub mod detail;
pub mod ui;

use std::io::stdout;
use std::time::Duration;

use crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

pub use app::App;

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(stdout(), LeaveAlternateScreen, DisableMouseCapture);
}

/// Run the browser until the user quits.
pub fn run(mut app: App) -> anyhow::Result<()> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        hook(info);
    }));
    enable_raw_mode()?;
    execute!(stdout(), EnterAlternateScreen, EnableMouseCapture)?;
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
            term.draw(|f| ui::draw(f, app))?;
            dirty = false;
        }
        if event::poll(Duration::from_millis(200))? {
            match event::read()? {
                Event::Key(k) if k.kind != KeyEventKind::Release => {
                    let was_messages = app.screen == app::Screen::Messages;
                    app.on_key(k);
                    if was_messages || app.screen == app::Screen::Messages {
                        app.load_rows();
                    }
                }
                Event::Mouse(m) => app.on_mouse(m),
                Event::Resize(_, _) => {
                    term.autoresize()?;
                }
                _ => {}
            }
            dirty = true;
        }
        dirty |= app.poll_jobs();
    }
    Ok(())
}
