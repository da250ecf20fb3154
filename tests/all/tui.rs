//! The terminal browser: views rendered with ratatui's TestBackend for a fixture store at 80x24
//! and 200x50, keys driven through the app state, and the real binary in tmux.

use crate::common;
use crate::common::fixture;

use std::path::{Path, PathBuf};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::style::Modifier;
use ratatui::Terminal;
use rmqstore::engine::filter::TagFilter;
use rmqstore::engine::Store;
use rmqstore::format::commitlog::prop;
use rmqstore::format::finding::Location;
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::tui::app::{count_of, BodyView, DetailSource, HealthState, Screen, TerminalRequest};
use rmqstore::tui::time::format_utc;
use rmqstore::tui::{ui, App};

fn app(root: &Path) -> App {
    App::new(Store::open(root, &GeometryInputs::default()).unwrap())
}

/// An oracle store; missing, the test is skipped with a message, or fails under CI.
fn oracle(name: &str) -> Option<PathBuf> {
    let found = common::oracle(name);
    if found.is_none() && std::env::var_os("CI").is_some() {
        panic!("oracle store {name} is missing under CI");
    }
    found
}

fn key(app: &mut App, c: KeyCode) {
    app.on_key(KeyEvent::new(c, KeyModifiers::NONE));
    app.finish_scan();
}

fn typed(app: &mut App, s: &str) {
    for ch in s.chars() {
        key(app, KeyCode::Char(ch));
    }
}

fn command(app: &mut App, k: char, text: &str) {
    key(app, KeyCode::Char(k));
    typed(app, text);
    key(app, KeyCode::Enter);
}

/// Render at `w`x`h` and return the screen as text lines.
fn screen(app: &mut App, w: u16, h: u16) -> Vec<String> {
    render(app, w, h).0
}

fn render(app: &mut App, w: u16, h: u16) -> (Vec<String>, ratatui::buffer::Buffer) {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    let lines = (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect();
    (lines, buf)
}

fn has(lines: &[String], s: &str) -> bool {
    lines.iter().any(|l| l.contains(s))
}

fn select_topic(a: &mut App, name: &str) {
    let i = a
        .topic_order()
        .iter()
        .position(|&i| a.topics[i].name == name);
    a.topic_sel = i.unwrap();
}

/// The queue offsets of the messages of a queue that `query --tag` finds.
fn tag_matches(a: &App, topic: &str, queue: i32, expr: &str) -> Vec<u64> {
    let f = TagFilter::parse(expr).unwrap();
    let (hits, _) = a
        .reader
        .by_queue_offset(topic, queue, 0, usize::MAX, &f)
        .unwrap();
    hits.iter().map(|h| h.queue_offset.unwrap()).collect()
}

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 50)];

#[test]
fn topics_view_lists_topics_with_counts_and_marks_every_system_topic() {
    let mut a = app(&fixture("store-4.9"));
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        assert!(has(&s, "OrderTopic"), "{s:#?}");
        assert!(has(&s, "[system] %DLQ%OrderGroup"), "{s:#?}");
        assert!(has(&s, "[system] %RETRY%OrderGroup"), "{s:#?}");
        assert!(has(&s, "[system] SCHEDULE_TOPIC_XXXX"), "{s:#?}");
        let pos = |n: &str| s.iter().position(|l| l.contains(n)).unwrap();
        assert!(pos("PaymentTopic") < pos("SCHEDULE_TOPIC_XXXX"));
        let order = a.topics.iter().find(|t| t.name == "OrderTopic").unwrap();
        assert_eq!(order.queues.len(), 4);
        assert!(has(&s, &order.messages().to_string()));
        // the key bar names this screen's keys
        assert!(s[h as usize - 1].contains("Enter queues"), "{s:#?}");
        assert!(has(&s, "topics"), "{s:#?}");
    }
}

#[test]
fn navigate_to_a_message_and_back() {
    let mut a = app(&fixture("store-4.9"));
    select_topic(&mut a, "OrderTopic");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Queues);
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        assert!(has(&s, "LAG BY GROUP") && has(&s, "OrderGroup:"), "{s:#?}");
    }
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
fn messages_at_80_columns_show_the_whole_time_and_msg_id() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("OrderTopic", 0, 0);
    for (w, h) in SIZES {
        a.page = h as usize;
        a.load_rows();
        let (s, buf) = render(&mut a, w, h);
        let row = a.rows[0].clone();
        let stamp = format_utc(row.store_timestamp);
        let line = s
            .iter()
            .find(|l| l.contains(&row.msg_id))
            .unwrap_or_else(|| panic!("msg id {} cut at {w}: {s:#?}", row.msg_id));
        assert!(line.contains(&stamp), "time {stamp} cut at {w}: {line}");
        assert!(has(&s, "STORED (UTC)"));
        // the selected row is marked without colours: "> " and reversed video
        let y = s.iter().position(|l| l.contains(&row.msg_id)).unwrap();
        assert!(
            s[y].chars().skip(1).collect::<String>().starts_with("> "),
            "{}",
            s[y]
        );
        assert!(buf[(3, y as u16)].modifier.contains(Modifier::REVERSED));
        // the line under the list spells the selected row out
        let or_dash = |s: &str| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.to_string()
            }
        };
        let spelled = format!(
            "qoffset {}  tags {}  keys {}",
            row.queue_offset,
            or_dash(&row.tags),
            or_dash(&row.keys)
        );
        assert!(has(&s, &spelled), "{s:#?}");
        if w == 80 {
            // what does not fit ends in an ellipsis, nothing runs into the next column
            assert!(s.iter().all(|l| l.chars().count() == 80));
        }
    }
}

#[test]
fn tag_filter_pages_through_the_whole_queue() {
    let mut a = app(&fixture("store-4.9"));
    let want = tag_matches(&a, "AuditTopic", 1, "TagB");
    assert!(want.len() > 30, "{want:?}");
    a.page = 10;
    a.open_queue("AuditTopic", 1, 0);
    command(&mut a, 'f', "TagB");
    assert_eq!(a.rows.len(), 10);
    assert!(a.rows.iter().all(|r| r.tags == "TagB"));
    assert_eq!(a.msg_sel, want[0]);
    // PgDn walks the matches page by page to the last one
    let mut seen: Vec<u64> = a.rows.iter().map(|r| r.queue_offset).collect();
    for _ in 0..20 {
        key(&mut a, KeyCode::PageDown);
        for r in &a.rows {
            if !seen.contains(&r.queue_offset) {
                seen.push(r.queue_offset);
            }
        }
    }
    assert_eq!(seen, want);
    assert!(a.status.contains("no more matching"), "{}", a.status);
    // End shows the last page of matches, Home the first
    key(&mut a, KeyCode::Home);
    key(&mut a, KeyCode::End);
    assert_eq!(a.msg_sel, *want.last().unwrap());
    let last: Vec<u64> = a.rows.iter().map(|r| r.queue_offset).collect();
    assert_eq!(last, want[want.len() - 10..]);
    key(&mut a, KeyCode::Home);
    assert_eq!(a.msg_sel, want[0]);
    // PgDn then PgUp comes back to the first page
    key(&mut a, KeyCode::PageDown);
    assert_eq!(a.rows[0].queue_offset, want[10]);
    key(&mut a, KeyCode::PageUp);
    let page: Vec<u64> = a.rows.iter().map(|r| r.queue_offset).collect();
    assert_eq!(page, want[..10]);
    key(&mut a, KeyCode::Home);
    // Down past the page scrolls to the next match, Up back
    for _ in 0..10 {
        key(&mut a, KeyCode::Down);
    }
    assert_eq!(a.msg_sel, want[10]);
    assert_eq!(a.rows.first().unwrap().queue_offset, want[1]);
    key(&mut a, KeyCode::Up);
    assert_eq!(a.msg_sel, want[9]);
    // the whole queue's count, as `query --tag` finds
    assert_eq!(a.finish_filter_count(), Some(want.len() as u64));
    let s = screen(&mut a, 200, 20);
    assert!(
        has(&s, &format!("tag TagB: {} matches", want.len())),
        "{s:#?}"
    );
    // `f` then an empty line turns it off
    command(&mut a, 'f', "");
    assert!(a.msg_filter.is_none());
    assert_eq!(a.rows.len(), a.page);
    assert!(a.rows.iter().any(|r| r.tags != "TagB"));
}

#[test]
fn a_page_scan_runs_in_bounded_steps_and_counts_what_it_read() {
    use rmqstore::tui::filter::MessageFilter;
    use rmqstore::tui::paging::{Direction, PageScan, Placement};
    let a = app(&fixture("store-4.9"));
    let cq = a.store().queue("AuditTopic", 1).unwrap();
    let want = tag_matches(&a, "AuditTopic", 1, "TagB");
    let filter = MessageFilter::parse("TagB").unwrap().unwrap();
    let bounds = (
        0,
        a.store()
            .queue("AuditTopic", 1)
            .unwrap()
            .max_offset()
            .unwrap(),
    );
    let place = Placement::PageFromFirst { keep: None };
    // forward: ten units a step until a page of five matches is found
    let mut scan = PageScan::new(Direction::Forward, 0, bounds, 5, place);
    let mut steps = 0;
    while !scan.step(&a.reader, cq, Some(&filter), 10) {
        steps += 1;
        assert_eq!(
            scan.scanned,
            10 * steps,
            "each step reads at most its budget"
        );
    }
    let got: Vec<u64> = scan.found.iter().map(|r| r.queue_offset).collect();
    assert_eq!(got, want[..5]);
    assert!(scan.scanned <= want[4] + 1);
    // backward from the end: the last five, in order
    let mut scan = PageScan::new(
        Direction::Backward,
        bounds.1,
        bounds,
        5,
        Placement::PageToLast,
    );
    while !scan.step(&a.reader, cq, Some(&filter), 7) {}
    let got: Vec<u64> = scan.found.iter().map(|r| r.queue_offset).collect();
    assert_eq!(got, want[want.len() - 5..]);
}

#[test]
fn filter_by_key_property_and_body() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("%DLQ%OrderGroup", 0, 0);
    command(&mut a, 'f', "key:key-25");
    assert!(!a.rows.is_empty(), "{}", a.status);
    assert!(a
        .rows
        .iter()
        .all(|r| r.keys.split(' ').any(|k| k == "key-25")));
    command(&mut a, 'f', "prop:RETRY_TOPIC=OrderTopic");
    let n = a.finish_filter_count().unwrap();
    assert_eq!(
        n,
        a.list_queue().unwrap().messages(),
        "every DLQ copy came from OrderTopic"
    );
    command(&mut a, 'f', "prop:RETRY_TOPIC=PaymentTopic");
    assert!(a.rows.is_empty());
    assert!(a.status.contains("no matching message"), "{}", a.status);
    command(&mut a, 'f', "body:\"invoice\"");
    for r in &a.rows {
        let m = a.reader.message_at(r.offset).unwrap().unwrap();
        let body = m.message.decompressed_body().unwrap();
        assert!(String::from_utf8_lossy(&body).contains("\"invoice\""));
    }
    assert!(!a.rows.is_empty());
    command(&mut a, 'f', "prop:=x");
    assert!(a.status.starts_with("bad filter"), "{}", a.status);
}

#[test]
fn n_and_shift_n_move_through_messages_also_in_the_detail_view() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("OrderTopic", 2, 5);
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(a.msg_sel, 6);
    assert_eq!(a.screen, Screen::Messages);
    key(&mut a, KeyCode::Char('N'));
    key(&mut a, KeyCode::Char('N'));
    assert_eq!(a.msg_sel, 4);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.detail_source, DetailSource::Queue);
    let first = a.detail_offset;
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(a.screen, Screen::Detail);
    assert_ne!(a.detail_offset, first);
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "OrderTopic / 2  queue offset 5"), "{s:#?}");
    // an old search does not take over n in a queue
    a.results = vec![0];
    key(&mut a, KeyCode::Char('n'));
    assert!(has(&screen(&mut a, 80, 24), "queue offset 6"));
    // with a filter, n steps through the matches
    key(&mut a, KeyCode::Esc);
    command(&mut a, 'f', "TagB");
    let want = tag_matches(&a, "OrderTopic", 2, "TagB");
    key(&mut a, KeyCode::Home);
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Char('n'));
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(a.msg_sel, want[2]);
    let m = a
        .reader
        .message_at(a.detail_offset.unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(m.message.queue_offset, want[2] as i64);
}

#[test]
fn detail_scroll_stops_at_the_last_line_and_survives_view_changes() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("OrderTopic", 0, 0);
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Char('t'));
    key(&mut a, KeyCode::Char('t'));
    assert_eq!(a.body_view, BodyView::Hex);
    screen(&mut a, 80, 24);
    key(&mut a, KeyCode::End);
    let s = screen(&mut a, 80, 24);
    assert!(a.detail_scroll > 0);
    // the last line of the view sits at the bottom of the pane: no blank page
    assert!(
        s[20].trim_matches(|c| c == '│' || c == ' ').len() > 4,
        "{s:#?}"
    );
    let at_end = a.detail_scroll;
    key(&mut a, KeyCode::Down);
    screen(&mut a, 80, 24);
    assert_eq!(a.detail_scroll, at_end);
    key(&mut a, KeyCode::Home);
    key(&mut a, KeyCode::Down);
    key(&mut a, KeyCode::Down);
    key(&mut a, KeyCode::Char('t'));
    screen(&mut a, 80, 24);
    assert_eq!(a.detail_scroll, 2, "t keeps the place");
    // a status message goes away with the view it was about
    a.status = "something about the message".into();
    key(&mut a, KeyCode::Esc);
    assert!(a.status.is_empty());
}

#[test]
fn detail_words_flags_and_transactions() {
    let mut a = app(&fixture("store-4.9"));
    let mut compressed = None;
    let mut commit = None;
    let r = a.reader.scan(usize::MAX, |m| {
        m.is_compressed()
            || m.transaction_type() != rmqstore::format::commitlog::TransactionType::Not
    });
    for &o in &r.offsets {
        let m = a.reader.message_at(o).unwrap().unwrap().message;
        if m.is_compressed() && compressed.is_none() {
            compressed = Some(o);
        }
        if m.transaction_type() == rmqstore::format::commitlog::TransactionType::Commit {
            commit = commit.or(Some(o));
        }
    }
    a.open_detail(compressed.unwrap());
    let s = screen(&mut a, 200, 50);
    assert!(has(&s, "compressed ("), "{s:#?}");
    assert!(has(&s, "transaction         not a transaction"), "{s:#?}");
    assert!(!has(&s, "Some("), "{s:#?}");
    assert!(!has(&s, "(Not)"), "{s:#?}");
    a.open_detail(commit.unwrap());
    let s = screen(&mut a, 200, 50);
    assert!(has(&s, "transaction         commit"), "{s:#?}");
}

#[test]
fn the_detail_view_has_a_trace_pane_when_the_message_was_traced() {
    let tmp = common::scratch();
    let dir = tmp.path().join("traced");
    common::gen_traced_store(&dir);
    let mut a = app(&dir);
    // a PaymentTopic message: sent by its producer, consumed by PaymentGroup
    let r = a
        .reader
        .scan(1, |m| m.topic == "PaymentTopic" && m.uniq_key().is_some());
    let o = r.offsets[0];
    a.open_detail(o);
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        assert!(has(&s, " trace (RMQ_SYS_TRACE_TOPIC) "), "{s:#?}");
        assert!(has(&s, "sent      2026-"), "{s:#?}");
        // where it is stored is the view above, not repeated
        assert!(!has(&s, "stored    PaymentTopic"), "{s:#?}");
        // the message itself keeps the top of the screen
        assert!(has(&s, "topic / queue"), "{s:#?}");
        if w == 200 {
            assert!(
                has(&s, "by PaymentProducerGroup from 10.1.0.21:50990"),
                "{s:#?}"
            );
            assert!(
                has(&s, "by PaymentGroup on 10.1.0.32:51001: success in"),
                "{s:#?}"
            );
            assert!(has(&s, " UTC"), "{s:#?}");
        }
    }
    // looked up once, then cached: redrawing and coming back cost no new lookup
    assert_eq!(a.trace_cache.len(), 1);
    let cached = a.trace_cache.get(&o).cloned().flatten().unwrap();
    key(&mut a, KeyCode::Esc);
    a.open_detail(o);
    screen(&mut a, 80, 24);
    assert!(std::sync::Arc::ptr_eq(
        &cached,
        &a.trace_cache.get(&o).cloned().flatten().unwrap()
    ));
    // the trace messages themselves, and a store without a trace topic: no pane
    let t = a.reader.scan(1, |m| m.topic == "RMQ_SYS_TRACE_TOPIC");
    a.open_detail(t.offsets[0]);
    let s = screen(&mut a, 200, 50);
    assert!(!has(&s, " trace ("), "{s:#?}");
    let mut plain = app(&fixture("store-4.9"));
    let r = plain.reader.scan(1, |m| m.topic == "PaymentTopic");
    plain.open_detail(r.offsets[0]);
    let s = screen(&mut plain, 200, 50);
    assert!(!has(&s, " trace ("), "{s:#?}");
    assert_eq!(plain.trace_cache.len(), 1);
}

#[test]
fn search_by_key_uniq_key_and_msg_id() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("PaymentTopic", 2, 3);
    let row = a.rows.iter().find(|r| r.queue_offset == 3).unwrap().clone();
    let loc = a.reader.message_at(row.offset).unwrap().unwrap();
    let uniq = loc.message.uniq_key().unwrap().into_owned();
    command(&mut a, 'F', &row.msg_id);
    assert_eq!(a.results, vec![row.offset]);
    assert_eq!(a.screen, Screen::Results);
    command(&mut a, 'F', &uniq);
    assert_eq!(a.results, vec![row.offset], "{}", a.status);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Detail);
    assert_eq!(a.detail_offset, Some(row.offset));
    command(&mut a, 'F', "hot-key-3");
    assert!(a.results.len() > 5, "{}", a.status);
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        assert!(has(&s, "'hot-key-3'"), "{s:#?}");
        assert!(has(&s, "STORED (UTC)"), "{s:#?}");
    }
    for &o in &a.results {
        let m = a.reader.message_at(o).unwrap().unwrap();
        assert!(m.message.keys().iter().any(|k| k == "hot-key-3"));
    }
    // n/N move through the results, in the list and in the detail view
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(a.result_sel, 1);
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(a.detail_offset, Some(a.results[2]));
}

#[test]
fn goto_reads_times_in_utc_and_honours_offsets() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("AuditTopic", 1, 0);
    command(&mut a, 'g', "40");
    assert_eq!(a.msg_sel, 40);
    let ts = a
        .rows
        .iter()
        .find(|r| r.queue_offset == 40)
        .unwrap()
        .store_timestamp;
    command(&mut a, 'g', &ts.to_string());
    assert_eq!(a.msg_sel, 40, "{}", a.status);
    // the time as the list shows it (UTC, no zone) lands on the same message
    command(&mut a, 'g', "0");
    command(&mut a, 'g', &format_utc(ts));
    assert_eq!(a.msg_sel, 40, "{}", a.status);
    // the same instant written in +08:00
    let shanghai = chrono::DateTime::from_timestamp_millis(ts + 8 * 3_600_000)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%S%.3f+08:00")
        .to_string();
    command(&mut a, 'g', "0");
    command(&mut a, 'g', &shanghai);
    assert_eq!(a.msg_sel, 40, "{}", a.status);
    command(&mut a, 'g', "not a time");
    assert!(a.status.contains("not a queue offset or a time"));
}

#[test]
fn groups_lag_matches_info_and_drills_down_to_queues() {
    let mut a = app(&fixture("store-4.9"));
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("rmqstore"))
        .args(["info", "--json"])
        .arg(fixture("store-4.9"))
        .output()
        .unwrap();
    // the first line is the `info` object, a summary follows
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap()
        .to_string();
    let info: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(info["type"], "info");
    let info_lags: Vec<(String, i64)> = info["group_lag"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["group"].as_str().unwrap().to_string(),
                g["lag"].as_i64().unwrap(),
            )
        })
        .collect();
    let ours: Vec<(String, i64)> = a
        .group_summaries
        .iter()
        .map(|g| (g.group.clone(), g.lag))
        .collect();
    assert_eq!(ours, info_lags);
    let total: i64 = info_lags.iter().map(|(_, l)| l).sum();
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.screen, Screen::Groups);
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        assert!(has(&s, &format!("total lag {total} ")), "{s:#?}");
        assert!(has(&s, "OrderGroup") && has(&s, "IN RETRY/DLQ"), "{s:#?}");
    }
    let og = a
        .summary_order()
        .iter()
        .position(|&i| a.group_summaries[i].group == "OrderGroup")
        .expect("OrderGroup listed");
    a.summary_sel = og;
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::GroupQueues);
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        assert!(
            has(&s, "OrderTopic") && has(&s, "%DLQ%OrderGroup"),
            "{s:#?}"
        );
    }
    // the dead-letter queue is listed with its size, without an offset, not as lag
    let dlq = a
        .groups
        .iter()
        .find(|g| g.topic == "%DLQ%OrderGroup")
        .unwrap();
    assert_eq!(dlq.offset, -1);
    assert!(dlq.lag > 0);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Messages);
}

#[test]
fn a_retry_or_dlq_copy_opens_its_origin() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("%DLQ%OrderGroup", 0, 0);
    key(&mut a, KeyCode::Enter);
    let copy = a
        .reader
        .message_at(a.detail_offset.unwrap())
        .unwrap()
        .unwrap();
    let origin_id = copy
        .message
        .property(prop::ORIGIN_MESSAGE_ID)
        .unwrap()
        .into_owned();
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "o opens the message"), "{s:#?}");
    key(&mut a, KeyCode::Char('o'));
    let m = a
        .reader
        .message_at(a.detail_offset.unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(m.message.offset_msg_id(), origin_id);
    assert_eq!(m.message.topic, "OrderTopic");
    assert!(a.status.contains("origin of the copy"), "{}", a.status);
    // on an original, o says why not
    key(&mut a, KeyCode::Char('o'));
    assert!(a.status.contains("original"), "{}", a.status);
    // back returns to the copy
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.screen, Screen::Detail);
}

fn wait_for_health(a: &mut App) {
    for _ in 0..1200 {
        a.poll_jobs();
        if a.health_state == HealthState::Done && a.recovery.is_some() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("verify did not finish: {:?}", a.health_state);
}

#[test]
fn health_shows_a_finding_in_full_and_the_recovery_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    common::copy_tree(&fixture("store-4.9"), &root);
    std::fs::write(root.join("config/delayOffset.json"), "{ not json").unwrap();
    let mut a = app(&root);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.screen, Screen::Health);
    wait_for_health(&mut a);
    assert!(!a.health.is_empty());
    let i = a
        .health
        .iter()
        .position(|f| f.file.ends_with("delayOffset.json"))
        .expect("a finding about delayOffset.json");
    a.health_sel = a.health_order().iter().position(|&j| j == i).unwrap();
    let f = a.health[i].clone();
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        let text: String = s.iter().map(|l| l.trim_matches(['│', ' '])).collect();
        let want: String = f.message.split_whitespace().collect();
        let got: String = text.split_whitespace().collect();
        assert!(
            got.contains(&want),
            "finding text not in full at {w}: {s:#?}"
        );
        assert!(has(&s, "delayOffset.json at byte"), "{s:#?}");
        assert!(has(&s, &format!("health: {}", a.health.len())), "{s:#?}");
    }
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Health);
    assert!(a.status.contains("delayOffset.json"), "{}", a.status);
    key(&mut a, KeyCode::Char('r'));
    let s = screen(&mut a, 200, 50);
    assert!(has(&s, "recovery plan"), "{s:#?}");
    assert!(has(&s, "1. no abort file"), "{s:#?}");
}

#[test]
fn a_healthy_store_says_so_with_the_right_plural() {
    let mut a = app(&fixture("store-4.9"));
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    wait_for_health(&mut a);
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "health: 0 findings"), "{s:#?}");
    // no findings: the pane shows the recovery plan, and the arrows scroll it
    assert!(has(&s, "normal"), "{s:#?}");
    let s = screen(&mut a, 80, 14);
    assert!(has(&s, "1. no abort file") && !has(&s, "dropped"), "{s:#?}");
    key(&mut a, KeyCode::End);
    let s = screen(&mut a, 80, 14);
    assert!(has(&s, "dropped") && !has(&s, "1. no abort file"), "{s:#?}");
    assert_eq!(rmqstore::tui::app::count_of(1, "finding"), "1 finding");
    assert_eq!(rmqstore::tui::app::count_of(2, "finding"), "2 findings");
    assert_eq!(rmqstore::tui::app::plural(1, "match", "matches"), "1 match");
}

#[test]
fn slash_filters_lists_as_you_type_and_s_sorts() {
    let mut a = app(&fixture("store-4.9"));
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "pay");
    // applied while typing
    let names: Vec<&str> = a
        .topic_order()
        .iter()
        .map(|&i| a.topics[i].name.as_str())
        .collect();
    assert_eq!(names, ["PaymentTopic"]);
    key(&mut a, KeyCode::Enter);
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "PaymentTopic") && !has(&s, "OrderTopic"), "{s:#?}");
    assert_eq!(a.topic().unwrap().name, "PaymentTopic");
    key(&mut a, KeyCode::Esc);
    assert!(a.list_filter.is_empty());
    assert_eq!(
        a.topic().unwrap().name,
        "PaymentTopic",
        "the selection stays"
    );
    // a selection made in a filtered list opens that item
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "dlq");
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Queues);
    assert_eq!(a.topic().unwrap().name, "%DLQ%OrderGroup");
    let s = screen(&mut a, 80, 24);
    assert!(has(&s, "%DLQ%OrderGroup"), "{s:#?}");
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.topic().unwrap().name, "%DLQ%OrderGroup");
    // sort topics by messages, largest first
    key(&mut a, KeyCode::Char('s'));
    let counts: Vec<u64> = a
        .topic_order()
        .iter()
        .map(|&i| a.topics[i].messages())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    assert!(a.status.contains("sorted by messages"));
    // groups by lag
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Char('s'));
    let lags: Vec<i64> = a
        .summary_order()
        .iter()
        .map(|&i| a.group_summaries[i].lag)
        .collect();
    assert!(lags.windows(2).all(|w| w[0] >= w[1]), "{lags:?}");
    // the loaded messages of a page
    a.open_queue("OrderTopic", 0, 0);
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "tagc");
    key(&mut a, KeyCode::Enter);
    let shown = a.visible_rows();
    assert!(!shown.is_empty() && shown.iter().all(|r| r.tags == "TagC"));
}

#[test]
fn copy_and_pager_hand_the_message_to_the_terminal() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("OrderTopic", 0, 0);
    let row = a.rows[0].clone();
    key(&mut a, KeyCode::Char('c'));
    assert_eq!(
        a.take_terminal_request(),
        Some(TerminalRequest::Copy(row.msg_id.clone()))
    );
    assert_eq!(a.take_terminal_request(), None);
    key(&mut a, KeyCode::Enter);
    let m = a.reader.message_at(row.offset).unwrap().unwrap();
    let body = m.message.decompressed_body().unwrap().into_owned();
    key(&mut a, KeyCode::Char('C'));
    assert_eq!(
        a.take_terminal_request(),
        Some(TerminalRequest::Copy(
            String::from_utf8(body.clone()).unwrap()
        ))
    );
    key(&mut a, KeyCode::Char('p'));
    assert_eq!(a.take_terminal_request(), Some(TerminalRequest::Page(body)));
    assert_eq!(rmqstore::tui::clipboard::osc52("id"), "\x1b]52;c;aWQ=\x07");
}

#[test]
fn every_view_renders_readably_at_both_sizes() {
    let mut a = app(&fixture("store-4.9"));
    key(&mut a, KeyCode::Char('?'));
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        assert!(has(&s, "find a message: key, UNIQ_KEY"), "{s:#?}");
        // descriptions wrap under themselves, clear of the key column
        assert!(s.iter().all(|l| !l.starts_with("│prop:")), "{s:#?}");
    }
    screen(&mut a, 80, 24);
    key(&mut a, KeyCode::End);
    assert!(has(&screen(&mut a, 80, 24), "copy the message id"));
    assert!(has(
        &screen(&mut a, 200, 50),
        "Times are shown and read in UTC"
    ));
    key(&mut a, KeyCode::Esc);
    for (w, h) in [(80, 24), (20, 5), (200, 60), (1, 1)] {
        screen(&mut a, w, h);
    }
    a.open_queue("OrderTopic", 0, 0);
    a.open_detail(0);
    for (w, h) in [(80, 24), (200, 50), (10, 4)] {
        let s = screen(&mut a, w, h);
        if w >= 80 {
            assert!(has(&s, "commitlog offset"), "{s:#?}");
            assert!(s[h as usize - 1].contains("n/N next/prev"), "{s:#?}");
        }
    }
}

#[test]
fn esc_stops_a_running_verify() {
    let mut a = app(&fixture("store-4.9"));
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.screen, Screen::Health);
    if matches!(a.health_state, HealthState::Running { .. }) {
        key(&mut a, KeyCode::Esc);
        assert_eq!(a.health_state, HealthState::NotStarted);
        assert_eq!(a.screen, Screen::Health);
        std::thread::sleep(std::time::Duration::from_millis(300));
        a.poll_jobs();
        assert!(a.health.is_empty());
    }
}

#[test]
fn detail_shows_a_text_body_and_a_decompressed_one() {
    let mut a = app(&fixture("store-4.9"));
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
        let start: String = body.chars().take_while(|c| c.is_ascii()).take(30).collect();
        assert!(start.len() >= 10, "{body:?}");
        assert!(has(&s, &start), "body start {start:?} not shown:\n{s:#?}");
    }
    let s = screen(&mut a, 200, 80);
    assert!(has(&s, "shown decompressed"), "{s:#?}");
}

/// The records of an oracle store's Java answers (`messages.jsonl.gz`).
fn java_records(dir: &Path) -> Vec<serde_json::Value> {
    common::json_lines(&dir.join("messages.jsonl.gz"))
}

/// The DLedger oracle stores (plain, and converted: `commitlog/` below the divide) browse like
/// any other: their topics listed, a queue's records with the ids, keys and bodies the Java
/// store answered, a DLedger record's entry (index, term, pos) in its detail, and a record below
/// the divide read from `commitlog/`.
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn dledger_stores_show_their_records_as_java_reads_them() {
    for name in ["dledger-4.9", "dledger-converted-4.9"] {
        let Some(dir) = oracle(name) else { continue };
        let mut a = app(&dir.join("store"));
        let s = screen(&mut a, 200, 50);
        assert!(
            has(&s, "TopicA") && has(&s, "[system] %DLQ%GroupA"),
            "{name}: {s:#?}"
        );
        let java = java_records(&dir);
        let divide = a.store().dledger.as_ref().map_or(0, |l| l.divide());
        // The first record of TopicA/0, and its last (a DLedger record in both stores).
        let in_queue: Vec<_> = java
            .iter()
            .filter(|r| r["topic"] == "TopicA" && r["queueId"] == 0)
            .collect();
        for r in [in_queue[0], in_queue[in_queue.len() - 1]] {
            let qo = r["queueOffset"].as_u64().unwrap();
            let offset = r["physicalOffset"].as_u64().unwrap();
            a.open_queue("TopicA", 0, qo);
            a.page = 20;
            a.load_rows();
            let row = a
                .rows
                .iter()
                .find(|row| row.queue_offset == qo)
                .unwrap_or_else(|| panic!("{name}: TopicA/0 offset {qo} not listed"))
                .clone();
            assert_eq!(row.offset, offset, "{name}");
            assert_eq!(row.msg_id, r["offsetMsgId"].as_str().unwrap(), "{name}");
            assert_eq!(row.keys, r["keys"].as_str().unwrap(), "{name}");
            assert!(!row.uncommitted, "{name}");
            let s = screen(&mut a, 200, 50);
            assert!(
                has(&s, &row.msg_id) && !has(&s, "uncommitted"),
                "{name}: {s:#?}"
            );
            // the detail: the body the Java store read (its sha256), its key, its entry
            let body = a
                .reader
                .message_at(offset)
                .unwrap()
                .unwrap()
                .message
                .body
                .to_vec();
            assert_eq!(
                common::sha256_hex(&body),
                r["bodySha256"].as_str().unwrap(),
                "{name}"
            );
            a.open_detail(offset);
            let s = screen(&mut a, 200, 80);
            // the body's longest word (bodies are text: JSON with a padding word, or a phrase)
            let text = String::from_utf8(body).unwrap();
            let word = text
                .split(|c: char| !c.is_ascii_alphanumeric())
                .max_by_key(|w| w.len())
                .unwrap();
            let word = &word[..word.len().min(40)];
            assert!(word.len() >= 4, "{name}: {text:?}");
            assert!(has(&s, word), "{name}: body {word:?} not shown: {s:#?}");
            assert!(has(&s, r["keys"].as_str().unwrap()), "{name}: {s:#?}");
            let entry = s.iter().find(|l| l.contains("dledger entry"));
            if offset < divide {
                assert!(entry.is_none(), "{name}: {s:#?}");
            } else {
                let index = r["dledgerIndex"].as_i64().unwrap();
                let entry = entry.unwrap_or_else(|| panic!("{name}: {s:#?}"));
                assert!(
                    entry.contains(&format!("index {index}  term 0  pos {}", offset - 48))
                        && entry.contains("committed"),
                    "{name}: {entry}"
                );
            }
            key(&mut a, KeyCode::Esc);
        }
        if name == "dledger-converted-4.9" {
            assert!(
                in_queue[0]["physicalOffset"].as_u64().unwrap() < divide,
                "the first record is below the divide"
            );
        }
    }
}

/// With `dLegerPeers` naming other members, the crashed store's entries past the checkpoint's
/// committedIndex (2598 on) are uncommitted: the browser lists their records marked, says so
/// under the list and in the detail, and marks none of them without the peers (a single replica
/// commits its whole log).
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn uncommitted_dledger_entries_are_marked_in_the_browser() {
    let Some(dir) = oracle("dledger-crashed-4.9") else {
        return;
    };
    let java = java_records(&dir);
    let first = java.iter().find(|r| r["committedAtLoad"] == false).unwrap();
    assert_eq!(first["dledgerIndex"], 2598);
    let (topic, queue, qo) = (
        first["topic"].as_str().unwrap(),
        first["queueId"].as_i64().unwrap() as i32,
        first["queueOffset"].as_u64().unwrap(),
    );
    let peers = GeometryInputs {
        broker_conf: rmqstore::format::geometry::GeometryOverrides {
            dledger_peers: Some("n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    for with_peers in [true, false] {
        let inputs = if with_peers {
            peers.clone()
        } else {
            GeometryInputs::default()
        };
        let mut a = App::new(Store::open(&dir.join("store"), &inputs).unwrap());
        a.open_queue(topic, queue, qo - 1);
        a.page = 10;
        a.load_rows();
        let row = |a: &App, o: u64| a.rows.iter().find(|r| r.queue_offset == o).cloned();
        let before = row(&a, qo - 1).expect("the committed record before it");
        let after = row(&a, qo).expect("the uncommitted record is listed");
        assert!(!before.uncommitted);
        assert_eq!(after.uncommitted, with_peers);
        assert_eq!(after.msg_id, first["offsetMsgId"].as_str().unwrap());
        a.msg_sel = qo;
        let s = screen(&mut a, 200, 50);
        let marked = format!("{qo}*");
        assert_eq!(has(&s, &marked), with_peers, "{s:#?}");
        assert!(!has(&s, &format!("{}*", qo - 1)), "{s:#?}");
        assert_eq!(
            has(&s, "* uncommitted DLedger entry (not served)"),
            with_peers,
            "{s:#?}"
        );
        assert_eq!(
            has(&s, "UNCOMMITTED DLedger entry, not served"),
            with_peers,
            "{s:#?}"
        );
        a.open_detail(after.offset);
        let s = screen(&mut a, 200, 80);
        assert_eq!(
            has(&s, "UNCOMMITTED: this DLedger entry"),
            with_peers,
            "{s:#?}"
        );
        let entry = s.iter().find(|l| l.contains("dledger entry")).unwrap();
        assert!(entry.contains("index 2598"), "{entry}");
        assert_eq!(entry.contains("uncommitted"), with_peers, "{entry}");
    }
}

// ------------------------------------------------------------------------------------------
// The real binary in tmux

/// A tmux server of its own running one command; killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// `None` (with a message) when tmux is not installed.
    fn start(name: &str, width: u16, height: u16, command: &str) -> Option<Tmux> {
        if std::process::Command::new("tmux")
            .arg("-V")
            .output()
            .is_err()
        {
            eprintln!("SKIPPED: tmux not installed");
            return None;
        }
        let t = Tmux {
            socket: format!("rmqstore-test-{name}-{}", std::process::id()),
        };
        let (w, h) = (width.to_string(), height.to_string());
        let o = t.run(&[
            "new-session",
            "-d",
            "-s",
            "e2e",
            "-x",
            &w,
            "-y",
            &h,
            command,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Some(t)
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.run(&["send-keys", "-t", "e2e", k]);
        }
    }

    fn text(&self, text: &str) {
        self.run(&["send-keys", "-t", "e2e", "-l", text]);
    }

    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "e2e"]).stdout).into_owned()
    }

    /// The screen with its attributes as escape sequences.
    fn capture_styled(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-e", "-t", "e2e"]).stdout)
            .into_owned()
    }

    fn wait_for(&self, s: &str) -> String {
        for _ in 0..200 {
            let c = self.capture();
            if c.contains(s) {
                return c;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("screen never showed {s:?}:\n{}", self.capture());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

fn tui_command(env: &str, store: &Path) -> String {
    format!(
        "{env} {} tui {}; echo EXITED-$?; sleep 30",
        assert_cmd::cargo::cargo_bin("rmqstore").display(),
        store.display()
    )
}

/// Open a topic's queue from the topic list by typing its name into the `/` filter.
fn open_queue_by_keys(t: &Tmux, topic: &str, queue: usize) {
    t.wait_for("Enter queues");
    t.keys(&["/"]);
    t.text(topic);
    t.keys(&["Enter", "Enter"]);
    t.wait_for("LAG BY GROUP");
    for _ in 0..queue {
        t.keys(&["Down"]);
    }
    t.keys(&["Enter"]);
    t.wait_for("QOFFSET");
}

/// The real binary on an oracle store: type keys, read the screen, quit, and the terminal
/// comes back (no alternate screen left, the shell prompt is usable).
#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn end_to_end_in_tmux() {
    let Some(dir) = oracle("basic-4.9") else {
        return;
    };
    let Some(t) = Tmux::start("basic", 100, 30, &tui_command("", &dir.join("store"))) else {
        return;
    };
    t.wait_for("TopicA");
    t.keys(&["Enter"]);
    t.wait_for("LAG BY GROUP");
    t.keys(&["Enter"]);
    t.wait_for("QOFFSET");
    t.keys(&["Enter"]);
    let c = t.wait_for("topic / queue");
    assert!(c.contains("TopicA / 0  queue offset 0"), "{c}");
    t.keys(&["F"]);
    t.text("key-0");
    t.keys(&["Enter"]);
    t.wait_for("'key-0'");
    t.keys(&["q"]);
    let c = t.wait_for("EXITED-0");
    assert!(
        !c.contains("QOFFSET"),
        "the browser screen was left behind:\n{c}"
    );
}

#[test]
fn tmux_tag_filter_counts_what_query_finds() {
    let Some(t) = Tmux::start("filter", 200, 40, &tui_command("", &fixture("store-4.9"))) else {
        return;
    };
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("rmqstore"))
        .args([
            "query",
            "--topic",
            "AuditTopic",
            "--queue",
            "3",
            "--offset",
            "0",
        ])
        .args(["--count", "1000000", "--tag", "TagB", "--json"])
        .arg(fixture("store-4.9"))
        .output()
        .unwrap();
    // a message stream: the summary is the last JSON line on stderr
    let last = String::from_utf8_lossy(&out.stderr)
        .lines()
        .rfind(|l| l.starts_with('{'))
        .unwrap()
        .to_string();
    let summary: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(summary["type"], "summary");
    let want = summary["messages"].as_u64().unwrap();
    assert!(want > 40, "{summary}");
    open_queue_by_keys(&t, "AuditTopic", 3);
    t.keys(&["f"]);
    t.text("TagB");
    t.keys(&["Enter"]);
    let c = t.wait_for("matches in");
    assert!(c.contains(&format!("tag TagB: {want} matches")), "{c}");
    // the last page holds the last match, and only TagB rows are listed
    t.keys(&["End"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let c = t.capture();
    let rows: Vec<&str> = c.lines().filter(|l| l.contains("C0A8000A")).collect();
    assert!(!rows.is_empty(), "{c}");
    assert!(rows.iter().all(|l| l.contains("TagB")), "{c}");
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
}

#[test]
fn tmux_selection_is_visible_without_colours() {
    let Some(t) = Tmux::start(
        "nocolor",
        80,
        24,
        &tui_command("NO_COLOR=1", &fixture("store-4.9")),
    ) else {
        return;
    };
    let c = t.wait_for("Enter queues");
    let first = c.lines().find(|l| l.contains("AuditTopic")).unwrap();
    assert!(first.contains("> AuditTopic"), "{c}");
    t.keys(&["Down"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let styled = t.capture_styled();
    let line = styled
        .lines()
        .find(|l| l.contains("> "))
        .unwrap_or_else(|| panic!("no marked row:\n{styled}"));
    assert!(line.contains("\x1b[7m") || line.contains(";7m"), "{line:?}");
    // NO_COLOR is honoured: no colour codes
    assert!(
        !styled.contains("\x1b[36m") && !styled.contains("\x1b[44m"),
        "{styled:?}"
    );
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
}

#[test]
fn tmux_goto_time_under_another_time_zone() {
    let a = app(&fixture("store-4.9"));
    let cq = a.store().queue("PaymentTopic", 1).unwrap();
    let unit = cq.unit_at(40).unwrap().unwrap();
    let m = a.reader.message_at(unit.offset as u64).unwrap().unwrap();
    let shown = format_utc(m.message.store_timestamp);
    let Some(t) = Tmux::start(
        "tz",
        120,
        30,
        &tui_command("TZ=Asia/Shanghai", &fixture("store-4.9")),
    ) else {
        return;
    };
    open_queue_by_keys(&t, "PaymentTopic", 1);
    t.keys(&["g"]);
    t.text(&shown);
    t.keys(&["Enter"]);
    let c = t.wait_for("UTC: queue offset");
    assert!(c.contains(&format!("{shown} UTC: queue offset 40")), "{c}");
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
}

#[test]
fn tmux_search_and_jump_to_the_origin_of_a_dlq_copy() {
    let a = app(&fixture("store-4.9"));
    let cq = a.store().queue("%DLQ%OrderGroup", 0).unwrap();
    let unit = cq.unit_at(0).unwrap().unwrap();
    let copy = a.reader.message_at(unit.offset as u64).unwrap().unwrap();
    let copy_id = copy.message.offset_msg_id();
    let origin = copy
        .message
        .property(prop::ORIGIN_MESSAGE_ID)
        .unwrap()
        .into_owned();
    let Some(t) = Tmux::start("origin", 120, 40, &tui_command("", &fixture("store-4.9"))) else {
        return;
    };
    t.wait_for("Enter queues");
    t.keys(&["F"]);
    t.text(&copy_id);
    t.keys(&["Enter"]);
    t.wait_for("found (offset message id)");
    t.keys(&["Enter"]);
    t.wait_for("%DLQ%OrderGroup / 0");
    t.keys(&["o"]);
    let c = t.wait_for("origin of the copy");
    assert!(c.contains(&format!("msg id {origin}")), "{c}");
    assert!(c.contains("topic / queue       OrderTopic /"), "{c}");
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
}

#[test]
fn tmux_pager_and_clipboard_leave_and_restore_the_screen() {
    let a = app(&fixture("store-4.9"));
    let cq = a.store().queue("OrderTopic", 0).unwrap();
    let unit = cq.unit_at(0).unwrap().unwrap();
    let m = a.reader.message_at(unit.offset as u64).unwrap().unwrap();
    let body = m.message.decompressed_body().unwrap().into_owned();
    let id = m.message.offset_msg_id();
    let tmp = tempfile::tempdir().unwrap();
    let paged = tmp.path().join("paged.txt");
    let env = format!("PAGER='cat > {}'", paged.display());
    let Some(t) = Tmux::start("pager", 100, 30, &tui_command(&env, &fixture("store-4.9"))) else {
        return;
    };
    t.run(&["set-option", "-g", "set-clipboard", "on"]);
    open_queue_by_keys(&t, "OrderTopic", 0);
    t.keys(&["c"]);
    t.wait_for(&format!("copied {id}"));
    let buffer = t.run(&["show-buffer"]);
    assert_eq!(String::from_utf8_lossy(&buffer.stdout), id);
    t.keys(&["Enter"]);
    t.wait_for("topic / queue");
    t.keys(&["p"]);
    // the pager ran on the whole body and the browser drew itself again
    for _ in 0..100 {
        if std::fs::read(&paged).is_ok_and(|b| b == body) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(std::fs::read(&paged).unwrap(), body);
    t.wait_for("topic / queue       OrderTopic / 0");
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn a_5x_timer_message_says_where_it_is_bound_and_when_it_is_released() {
    let Some(dir) = oracle("timer-5.x") else {
        return;
    };
    let mut a = app(&dir.join("store"));
    let s = screen(&mut a, 120, 40);
    assert!(has(&s, "[system] rmq_sys_wheel_timer"), "{s:#?}");
    select_topic(&mut a, "rmq_sys_wheel_timer");
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Messages);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Detail);
    let s = screen(&mut a, 160, 50);
    // queue offset 0 of the timer topic: TIMER_DELAY_SEC 3 for TopicA queue 1, TIMER_OUT_MS
    // 1796074385000 (2026-11-30 21:33:05 UTC), released a second later
    assert!(
        has(
            &s,
            "Timer message (5.x) parked for TopicA queue 1; released at 2026-11-30 21:33:06"
        ),
        "{s:#?}"
    );
}

#[test]
fn enter_on_a_finding_goes_to_its_record_or_queue_unit() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    common::copy_tree(&fixture("store-4.9"), &root);
    // the body of OrderTopic/0's unit 3 changed (its CRC no longer matches), and unit 5's size
    let (rec, unit_file) = {
        let store = Store::open(&root, &GeometryInputs::default()).unwrap();
        let cq = store.queue("OrderTopic", 0).unwrap();
        let mut units = Vec::new();
        cq.for_each_unit(|_, u| {
            units.push(u);
            true
        })
        .unwrap();
        (units[3].offset as u64, cq.files[0].path.clone())
    };
    let seg = root.join("commitlog/00000000000000000000");
    let mut cl = std::fs::read(&seg).unwrap();
    let size = i32::from_be_bytes(cl[rec as usize..rec as usize + 4].try_into().unwrap());
    let body = {
        let store = Store::open(&root, &GeometryInputs::default()).unwrap();
        let r = rmqstore::engine::store::reader::Reader::new(&store);
        r.message_at(rec).unwrap().unwrap().message.body.to_vec()
    };
    let end = rec as usize + size as usize;
    let at = rec as usize
        + cl[rec as usize..end]
            .windows(body.len())
            .position(|w| w == body)
            .unwrap();
    cl[at] ^= 0x20;
    std::fs::write(&seg, &cl).unwrap();
    let mut cq = std::fs::read(&unit_file).unwrap();
    cq[5 * 20 + 8..5 * 20 + 12].copy_from_slice(&7i32.to_be_bytes());
    std::fs::write(&unit_file, &cq).unwrap();

    let mut a = app(&root);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    wait_for_health(&mut a);
    let pick = |a: &mut App, code: &str| {
        let i = a
            .health
            .iter()
            .position(|f| f.code.as_str() == code)
            .unwrap_or_else(|| panic!("no {code} in {:#?}", a.health));
        a.health_sel = a.health_order().iter().position(|&j| j == i).unwrap();
        a.health[i].clone()
    };
    let f = pick(&mut a, "commitlog.crc_mismatch");
    assert!(
        matches!(f.location, Location::Commitlog { offset } if offset >= rec && offset < end as u64),
        "{f:#?}"
    );
    let s = screen(&mut a, 200, 50);
    assert!(has(&s, "where   commitlog offset"), "{s:#?}");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Detail);
    assert_eq!(a.detail_offset, Some(rec));

    key(&mut a, KeyCode::Esc);
    assert_eq!(a.screen, Screen::Health);
    let f = pick(&mut a, "consumequeue.unit_mismatch");
    assert_eq!(
        f.location,
        Location::QueueUnit {
            topic: "OrderTopic".into(),
            queue_id: 0,
            unit: 5
        }
    );
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen, Screen::Messages);
    assert_eq!(a.msg_sel, 5);
    assert_eq!(a.queue().map(|q| q.id), Some(0));
}

/// A copy of the fixture at `<tmp>/store` with one body bit of OrderTopic/0's unit 3 flipped
/// (`commitlog.crc_mismatch`); its root and the record's commitlog offset.
fn damaged_copy(tmp: &Path) -> (PathBuf, u64) {
    let root = tmp.join("store");
    common::copy_tree(&fixture("store-4.9"), &root);
    let store = Store::open(&root, &GeometryInputs::default()).unwrap();
    let cq = store.queue("OrderTopic", 0).unwrap();
    let rec = cq.unit_at(3).unwrap().unwrap().offset as u64;
    let r = rmqstore::engine::store::reader::Reader::new(&store);
    let m = r.message_at(rec).unwrap().unwrap();
    let body_at = rec as usize + m.message.body_len_pos + 4;
    let seg = root.join("commitlog/00000000000000000000");
    let mut cl = std::fs::read(&seg).unwrap();
    cl[body_at] ^= 0x20;
    std::fs::write(&seg, &cl).unwrap();
    (root, rec)
}

/// The rows of the screen between the list and the key bar: the selected row's line and the
/// status line.
fn status_rows(s: &[String]) -> String {
    s[s.len() - 3..s.len() - 1].join("\n")
}

#[test]
fn a_long_status_takes_two_lines_and_what_is_cut_ends_in_an_ellipsis() {
    let mut a = app(&fixture("store-4.9"));
    let words: Vec<String> = (0..12).map(|i| format!("word{i:02}")).collect();
    // fits two lines at 80: shown whole, broken between words
    a.status = words.join(" ");
    a.status.push_str(&" more words".repeat(4));
    let s = screen(&mut a, 80, 24);
    let rows = status_rows(&s);
    for w in &words {
        assert!(rows.contains(w.as_str()), "{w} cut: {rows}");
    }
    assert!(!rows.contains('…'), "{rows}");
    // longer than two lines: the second ends in an ellipsis
    a.status = format!(
        "{}/commitlog/00000000000000000000 byte 250003217: no readable record starts there {}",
        "/data/rocketmq/store".repeat(4),
        words.join(" ")
    );
    let s = screen(&mut a, 80, 24);
    let rows: Vec<&str> = s[21..23].iter().map(|l| l.trim_end()).collect();
    assert!(rows[1].ends_with('…'), "{rows:#?}");
    assert!(rows.iter().all(|r| r.chars().count() <= 80));
    // a short status leaves the selected row's line alone
    a.status = "short".into();
    let s = screen(&mut a, 80, 24);
    assert!(s[21].contains("topic AuditTopic"), "{s:#?}");
    assert!(s[22].starts_with("short"), "{s:#?}");
    // the input line keeps the end of what is typed in view
    key(&mut a, KeyCode::Char('F'));
    typed(&mut a, &"k".repeat(100));
    typed(&mut a, "END");
    let s = screen(&mut a, 80, 24);
    let line = s[22].trim_end();
    assert!(line.ends_with("END_"), "{line}");
    assert!(line.contains('…'), "{line}");
}

#[test]
fn the_health_list_uses_a_wide_screen_for_the_file_and_wraps_the_finding_at_words() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, rec) = damaged_copy(tmp.path());
    let mut a = app(&root);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    wait_for_health(&mut a);
    let i = a
        .health
        .iter()
        .position(|f| f.code.as_str() == "commitlog.crc_mismatch")
        .unwrap_or_else(|| panic!("{:#?}", a.health));
    a.health_sel = a.health_order().iter().position(|&j| j == i).unwrap();
    let f = a.health[i].clone();
    let s = screen(&mut a, 200, 50);
    let row = s.iter().find(|l| l.contains("> ")).unwrap();
    assert!(
        row.contains(&format!("commitlog/00000000000000000000@{}", f.offset))
            && row.contains("commitlog.crc_mismatch"),
        "{row}"
    );
    assert!(f.offset >= rec);
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        // every word of the finding whole on some line (none broken across two)
        for word in f.message.split(' ') {
            assert!(has(&s, word), "{word:?} broken at {w}: {s:#?}");
        }
        // the text goes on under the value, clear of the label column
        let what = s.iter().position(|l| l.contains("│what    ")).unwrap();
        if w == 80 {
            assert!(s[what + 1].starts_with("│        "), "{s:#?}");
        }
    }
}

#[test]
fn the_message_list_key_bar_and_range_title_read_plainly() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("OrderTopic", 0, 0);
    let max = a.list_queue().unwrap().max;
    for (w, h) in SIZES {
        let s = screen(&mut a, w, h);
        let bar = s[h as usize - 1].trim_end();
        assert!(bar.ends_with("? help") || bar.ends_with("q quit"), "{bar}");
        assert!(bar.contains("? help"), "{bar}");
        assert!(!bar.contains('…'), "{bar}");
        assert!(has(&s, &format!(" of 0-{} ", max - 1)), "{s:#?}");
        assert!(!has(&s, ".."), "{s:#?}");
    }
    a.page = 17;
    a.load_rows();
    let s = screen(&mut a, 80, 24);
    assert!(
        has(&s, &format!("offsets 0-16 of 0-{} ", max - 1)),
        "{s:#?}"
    );
    // the queue list spells the selected queue's offsets the same way
    let mut a = app(&fixture("store-4.9"));
    select_topic(&mut a, "OrderTopic");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.queue().unwrap().max, max);
    let s = screen(&mut a, 80, 24);
    assert!(
        has(
            &s,
            &format!("queue 0: offsets 0-{} ({max} messages)", max - 1)
        ),
        "{s:#?}"
    );
}

#[test]
fn going_beyond_the_queue_or_to_a_time_between_messages_says_what_happened() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("AuditTopic", 1, 0);
    let max = a.list_queue().unwrap().max;
    command(&mut a, 'g', "99999999");
    assert_eq!(a.msg_sel, max - 1);
    assert_eq!(
        a.status,
        format!(
            "queue offset 99999999 is beyond the queue's end: went to the last message, offset {}",
            max - 1
        )
    );
    // a time just after a message, nearer it than the next: 4.9 lands on it, stored before
    command(&mut a, 'g', "0");
    a.page = 200;
    a.load_rows();
    let pair = a
        .rows
        .windows(2)
        .find(|p| p[1].store_timestamp - p[0].store_timestamp >= 10)
        .map(|p| p[0].clone())
        .expect("two messages stored 10 ms apart");
    command(&mut a, 'g', &format_utc(pair.store_timestamp + 2));
    assert_eq!(a.msg_sel, pair.queue_offset, "{}", a.status);
    assert!(
        a.status.contains(&format!(
            "queue offset {}, stored 2 ms before it: 4.9's getOffsetInQueueByTime takes the nearest message",
            pair.queue_offset
        )),
        "{}",
        a.status
    );
    // the whole explanation fits the two status lines at 80 columns
    let s = screen(&mut a, 80, 24);
    let rows = status_rows(&s);
    assert!(
        rows.trim_end().ends_with("after)") && !rows.contains('…'),
        "{rows}"
    );
}

#[test]
fn an_uncleanly_stopped_damaged_store_warns_on_its_first_screen() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, _) = damaged_copy(tmp.path());
    std::fs::write(root.join("abort"), "").unwrap();
    let mut a = app(&root);
    assert_eq!(a.screen, Screen::Topics);
    let s = screen(&mut a, 80, 24);
    assert!(s[0].contains("! unclean shutdown (abort file)"), "{s:#?}");
    assert!(has(&s, "abort file present"), "{s:#?}");
    // verify was started in the background; its errors reach the title
    wait_for_health(&mut a);
    assert_eq!(a.screen, Screen::Topics);
    let errors = a.error_count();
    assert!(errors >= 1, "{:#?}", a.health);
    let s = screen(&mut a, 80, 24);
    let said = format!("verify: {} (H)", count_of(errors, "error"));
    assert!(s[0].contains(&said), "{s:#?}");
    assert!(has(&s, "verify found 1 error") || errors > 1, "{s:#?}");
    key(&mut a, KeyCode::Char('H'));
    assert_eq!(a.screen, Screen::Health);
    assert!(has(&screen(&mut a, 80, 24), "commitlog.crc_mismatch"));
    // a clean store's title has no warning
    let mut clean = app(&fixture("store-4.9"));
    assert!(clean.store_alert().is_none());
    assert!(!screen(&mut clean, 80, 24)[0].contains('!'));
}

#[test]
fn a_capped_key_lookup_says_so_and_names_the_cap() {
    // 8,000 operations: each hot key has more than 64 messages in a topic
    let tmp = common::scratch();
    let dir = tmp.path().join("hot");
    common::bin()
        .arg("gen")
        .arg(&dir)
        .args(["--messages", "8000"])
        .args(common::SMALL_GEOMETRY)
        .assert()
        .success();
    let mut a = app(&dir);
    let all = a
        .reader
        .scan(usize::MAX, |m| m.keys().iter().any(|k| k == "hot-key-1"));
    let mut topics: Vec<String> = all
        .offsets
        .iter()
        .map(|&o| {
            a.reader
                .message_at(o)
                .unwrap()
                .unwrap()
                .message
                .topic
                .to_string()
        })
        .collect();
    topics.sort();
    let most = topics
        .chunk_by(|x, y| x == y)
        .map(|c| c.len())
        .max()
        .unwrap();
    assert!(most > 64, "{most}");
    command(&mut a, 'F', "hot-key-1");
    let shown = a.results.len();
    assert!(
        shown < all.offsets.len(),
        "{shown} of {}",
        all.offsets.len()
    );
    assert!(
        a.status.starts_with(&format!(
            "'hot-key-1': {shown} shown, lookup capped at 64 per topic (maxMsgsNumBatch) in "
        )),
        "{}",
        a.status
    );
    assert!(
        a.status
            .ends_with("more may exist (query --key hot-key-1 --scan)"),
        "{}",
        a.status
    );
    // said whole in the two status lines at 80 columns
    let s = screen(&mut a, 80, 24);
    let rows = status_rows(&s);
    assert!(rows.trim_end().ends_with("--scan)"), "{rows}");
    // under the cap in every topic: all are found
    let mut small = app(&fixture("store-4.9"));
    command(&mut small, 'F', "hot-key-3");
    let n = small.results.len();
    assert_eq!(
        small.status,
        format!("'hot-key-3': {n} found (key through the index)")
    );
}

#[test]
fn a_message_below_the_fold_says_more_and_help_names_the_tmux_clipboard_setting() {
    let mut a = app(&fixture("store-4.9"));
    a.open_queue("OrderTopic", 0, 0);
    key(&mut a, KeyCode::Enter);
    let s = screen(&mut a, 80, 24);
    let bottom = &s[20];
    assert!(
        bottom.contains("↓ body and") && bottom.contains("PgDn"),
        "{s:#?}"
    );
    key(&mut a, KeyCode::End);
    let s = screen(&mut a, 80, 24);
    assert!(!s[20].contains('↓'), "{s:#?}");
    // a tall screen shows it all: no marker
    key(&mut a, KeyCode::Home);
    let s = screen(&mut a, 200, 80);
    assert!(!has(&s, "↓"), "{s:#?}");
    key(&mut a, KeyCode::Char('?'));
    let s = screen(&mut a, 200, 50);
    assert!(has(&s, "in tmux, set -g set-clipboard on"), "{s:#?}");
}

#[test]
fn the_recovery_plan_shows_times_in_utc() {
    let mut a = app(&fixture("store-4.9"));
    key(&mut a, KeyCode::Char('H'));
    assert_eq!(a.screen, Screen::Health);
    wait_for_health(&mut a);
    let s = screen(&mut a, 200, 50);
    let line = s
        .iter()
        .find(|l| l.contains("physicMsgTimestamp"))
        .unwrap_or_else(|| panic!("{s:#?}"));
    assert!(line.contains("physicMsgTimestamp 2026-"), "{line}");
    assert!(line.contains(" UTC ["), "{line}");
}
