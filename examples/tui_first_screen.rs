//! Time to the browser's first screen on a store: open, load topics and queues, draw once.
//! `cargo run --release --example tui_first_screen -- <STORE>`

use std::time::Instant;

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use rmqstore::engine::Store;
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::tui::{ui, App};

fn main() -> anyhow::Result<()> {
    let root = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: tui_first_screen <STORE>"))?;
    let t = Instant::now();
    let store = Store::open(root.as_ref(), &GeometryInputs::default())?;
    let mut app = App::new(store);
    let mut term = Terminal::new(TestBackend::new(120, 40))?;
    term.draw(|f| ui::draw(f, &mut app))?;
    let first = t.elapsed();
    app.open_queue(&app.topics[0].name.clone(), app.topics[0].queues[0].id, 0);
    term.draw(|f| ui::draw(f, &mut app))?;
    println!(
        "{} topics; first screen {:.1} ms; first message page {:.1} ms",
        app.topics.len(),
        first.as_secs_f64() * 1e3,
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
