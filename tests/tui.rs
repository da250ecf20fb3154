//! The terminal browser: views rendered with ratatui's TestBackend for a fixture store, keys
//! driven through the app state, and the real binary in tmux on an oracle store.

mod common;

use std::path::Path;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use rmqstore::engine::Store;
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::tui::app::{BodyView, Screen};
use rmqstore::tui::{ui, App};

fn app(root: &Path) -> App {
    App::new(Store::open(root, &GeometryInputs::default()).unwrap())
}

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/store-4.9")
}

fn key(app: &mut App, c: KeyCode) {
    app.on_key(KeyEvent::new(c, KeyModifiers::NONE));
}

fn typed(app: &mut App, s: &str) {
    for ch in s.chars() {
        key(app, KeyCode::Char(ch));
    }
}

/// Render at `w`x`h` and return the screen as text lines.
fn screen(app: &mut App, w: u16, h: u16) -> Vec<String> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect()
}

fn has(lines: &[String], s: &str) -> bool {
    lines.iter().any(|l| l.contains(s))
}

#[test]
fn topics_view_lists_topics_with_counts_and_system_topics_apart() {
    let mut a = app(&fixture());
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "OrderTopic"), "{s:#?}");
    assert!(has(&s, "[system] %DLQ%OrderGroup"));
    // ordinary topics come before system topics
    let pos = |n: &str| s.iter().position(|l| l.contains(n)).unwrap();
    assert!(pos("PaymentTopic") < pos("SCHEDULE_TOPIC_XXXX"));
    // counts come from the consume queues
    let order = a.topics.iter().find(|t| t.name == "OrderTopic").unwrap();
    assert_eq!(order.queues.len(), 4);
    assert!(has(&s, &order.messages().to_string()));
}

#[test]
fn navigate_to_a_message_and_back() {
    let mut a = app(&fixture());
    let ti = a
        .topics
        .iter()
        .position(|t| t.name == "OrderTopic")
        .unwrap();
    for _ in 0..ti {
        key(&mut a, KeyCode::Down);
    }
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Queues);
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "LAG BY GROUP") && has(&s, "OrderGroup:"), "{s:#?}");
    key(&mut a, KeyCode::Char('j'));
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Messages);
    let s = screen(&mut a, 100, 30);
    assert!(has(&s, "QOFFSET") && has(&s, "C0A8000A00002A9F"), "{s:#?}");
    key(&mut a, KeyCode::PageDown);
    assert!(a.msg_sel > 0);
    key(&mut a, KeyCode::Home);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Detail);
    let s = screen(&mut a, 100, 40);
    assert!(
        has(&s, "topic / queue") && has(&s, "OrderTopic / 1  queue offset 0"),
        "{s:#?}"
    );
    assert!(has(&s, "UNIQ_KEY") && has(&s, "CLUSTER"));
    // body views cycle; the raw record view marks the header fields
    key(&mut a, KeyCode::Char('t'));
    assert_eq!(a.body_view, BodyView::Json);
    key(&mut a, KeyCode::Char('t'));
    key(&mut a, KeyCode::Char('t'));
    assert_eq!(a.body_view, BodyView::Record);
    let s = screen(&mut a, 100, 60);
    assert!(
        has(&s, "field legend: TOTALSIZE 0+4, MAGICCODE 4+4"),
        "{s:#?}"
    );
    assert!(has(&s, "da a3 20 a7"));
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.screen, Screen::Messages);
    key(&mut a, KeyCode::Backspace);
    key(&mut a, KeyCode::Char('h'));
    assert_eq!(a.screen, Screen::Topics);
    key(&mut a, KeyCode::Char('q'));
    assert!(a.quit);
}

#[test]
fn search_by_key_uniq_key_and_msg_id() {
    let mut a = app(&fixture());
    // pick a real message to look for
    a.open_queue("PaymentTopic", 2, 3);
    let row = a.rows.iter().find(|r| r.queue_offset == 3).unwrap().clone();
    let loc = a.reader.message_at(row.offset).unwrap().unwrap();
    let uniq = loc.message.uniq_key().unwrap().into_owned();
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, &row.msg_id);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.results, vec![row.offset]);
    assert_eq!(a.screen, Screen::Results);
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, &uniq);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.results, vec![row.offset], "{}", a.status);
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(a.screen, Screen::Detail);
    assert_eq!(a.detail_offset, Some(row.offset));
    // a key with many hits
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "hot-key-3");
    key(&mut a, KeyCode::Enter);
    assert!(a.results.len() > 5, "{}", a.status);
    let s = screen(&mut a, 100, 30);
    assert!(has(&s, "'hot-key-3'"), "{s:#?}");
    for &o in &a.results {
        let m = a.reader.message_at(o).unwrap().unwrap();
        assert!(m.message.keys().iter().any(|k| k == "hot-key-3"));
    }
}

#[test]
fn goto_offset_and_time_and_filter_by_tag() {
    let mut a = app(&fixture());
    a.open_queue("AuditTopic", 1, 0);
    key(&mut a, KeyCode::Char('g'));
    typed(&mut a, "40");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.msg_sel, 40);
    assert!(a.rows.iter().any(|r| r.queue_offset == 40));
    let ts = a
        .rows
        .iter()
        .find(|r| r.queue_offset == 40)
        .unwrap()
        .store_timestamp;
    key(&mut a, KeyCode::Char('g'));
    typed(&mut a, &ts.to_string());
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.msg_sel, 40, "{}", a.status);
    key(&mut a, KeyCode::Char('f'));
    typed(&mut a, "TagA || TagB");
    key(&mut a, KeyCode::Enter);
    a.load_rows();
    assert!(!a.rows.is_empty());
    assert!(a.rows.iter().all(|r| r.tags == "TagA" || r.tags == "TagB"));
    // a bad expression is reported in the status line, not a crash
    key(&mut a, KeyCode::Char('g'));
    typed(&mut a, "not a time");
    key(&mut a, KeyCode::Enter);
    assert!(a.status.contains("not a queue offset or a time"));
}

#[test]
fn groups_and_health_views() {
    let mut a = app(&fixture());
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.screen, Screen::Groups);
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "OrderGroup") && has(&s, "total lag"), "{s:#?}");
    // the group's dead-letter queue is listed with its size even without an offset on it
    let dlq = a
        .groups
        .iter()
        .find(|g| g.topic == "%DLQ%OrderGroup")
        .unwrap();
    assert_eq!(dlq.offset, -1);
    assert!(dlq.lag > 0);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Messages);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.screen, Screen::Health);
    for _ in 0..600 {
        a.poll_jobs();
        if a.health_state == rmqstore::tui::app::HealthState::Done {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(a.health_state, rmqstore::tui::app::HealthState::Done);
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "findings"), "{s:#?}");
    key(&mut a, KeyCode::Char('?'));
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "search: key, UNIQ_KEY"));
}

#[test]
fn renders_at_80x24_and_tiny_sizes_without_panicking() {
    let mut a = app(&fixture());
    for (w, h) in [(80, 24), (20, 5), (200, 60), (1, 1)] {
        screen(&mut a, w, h);
    }
    a.open_queue("OrderTopic", 0, 0);
    a.open_detail(0);
    for (w, h) in [(80, 24), (10, 4)] {
        screen(&mut a, w, h);
    }
}

/// The real binary in tmux on an oracle store: type keys, read the screen, quit, and the
/// terminal comes back (no alternate screen left, the shell prompt is usable).
#[test]
fn end_to_end_in_tmux() {
    let Some(dir) = common::oracle("basic-4.9") else {
        return;
    };
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: tmux not installed");
        return;
    }
    let exe = assert_cmd::cargo::cargo_bin("rmqstore");
    let sock = format!("rmqstore-test-{}", std::process::id());
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .arg("-L")
            .arg(&sock)
            .args(args)
            .output()
            .unwrap()
    };
    let cmd = format!(
        "{} tui {}; echo EXITED-$?; sleep 30",
        exe.display(),
        dir.join("store").display()
    );
    let o = tmux(&[
        "new-session",
        "-d",
        "-s",
        "e2e",
        "-x",
        "100",
        "-y",
        "30",
        &cmd,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let capture =
        || String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "e2e"]).stdout).into_owned();
    let wait_for = |s: &str| {
        for _ in 0..100 {
            let c = capture();
            if c.contains(s) {
                return c;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("screen never showed {s:?}:\n{}", capture());
    };
    wait_for("TopicA");
    tmux(&["send-keys", "-t", "e2e", "Enter"]);
    wait_for("LAG BY GROUP");
    tmux(&["send-keys", "-t", "e2e", "Enter"]);
    wait_for("QOFFSET");
    tmux(&["send-keys", "-t", "e2e", "Enter"]);
    let c = wait_for("topic / queue");
    assert!(c.contains("TopicA / 0  queue offset 0"), "{c}");
    tmux(&["send-keys", "-t", "e2e", "/"]);
    tmux(&["send-keys", "-t", "e2e", "-l", "key-0"]);
    tmux(&["send-keys", "-t", "e2e", "Enter"]);
    wait_for("'key-0'");
    tmux(&["send-keys", "-t", "e2e", "q"]);
    let c = wait_for("EXITED-0");
    assert!(
        !c.contains("QOFFSET"),
        "the browser screen was left behind:\n{c}"
    );
    tmux(&["kill-server"]);
}

#[test]
fn esc_stops_a_running_verify() {
    let mut a = app(&fixture());
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.screen, Screen::Health);
    if matches!(
        a.health_state,
        rmqstore::tui::app::HealthState::Running { .. }
    ) {
        key(&mut a, KeyCode::Esc);
        assert_eq!(a.health_state, rmqstore::tui::app::HealthState::NotStarted);
        assert_eq!(a.screen, Screen::Health);
        // its late result is dropped
        std::thread::sleep(std::time::Duration::from_millis(300));
        a.poll_jobs();
        assert!(a.health.is_empty());
    }
}

#[test]
fn detail_shows_a_text_body_and_a_decompressed_one() {
    let mut a = app(&fixture());
    // find a plain UTF-8 body and a compressed body in OrderTopic queue 0
    let store = a.store();
    let cq = store.queue("OrderTopic", 0).unwrap();
    let (mut text, mut compressed) = (None, None);
    cq.for_each_unit(|_, u| {
        if let Ok(Some(l)) = a.reader.message_at(u.offset as u64) {
            let m = &l.message;
            if m.is_compressed() && compressed.is_none() {
                let body = m.decompressed_body().unwrap().into_owned();
                compressed = Some((u.offset as u64, String::from_utf8(body).unwrap()));
            } else if !m.is_compressed() && text.is_none() {
                if let Ok(s) = std::str::from_utf8(m.body) {
                    if s.len() > 30 {
                        text = Some((u.offset as u64, s.to_string()));
                    }
                }
            }
        }
        text.is_none() || compressed.is_none()
    })
    .unwrap();
    for (offset, body) in [text.unwrap(), compressed.unwrap()] {
        a.open_detail(offset);
        let s = screen(&mut a, 200, 80);
        // wide characters take two cells in the buffer: compare the ASCII head
        let start: String = body.chars().take_while(|c| c.is_ascii()).take(30).collect();
        assert!(start.len() >= 10, "{body:?}");
        assert!(has(&s, &start), "body start {start:?} not shown:\n{s:#?}");
    }
    // the compressed one says how it was shown
    let s = screen(&mut a, 200, 80);
    assert!(has(&s, "shown decompressed"), "{s:#?}");
}
