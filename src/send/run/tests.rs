use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::*;
use crate::engine::consume::export::ExportSource;
use crate::engine::store::message_json::{write_json_line, BodyMode, RecordFile};
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::{encode_properties, Host, Message, MessageVersion};
use crate::send::journal::Access;
use crate::send::outgoing::SendStatus;
use crate::send::route::PublishQueue;
use crate::send::source::SourceSpec;
use crate::send::translate::Delay;

/// An export file of `per_queue` messages on each of `queues` queues of each topic, in
/// round-robin order as a store interleaves them; the body names the message.
fn export_file(dir: &Path, topics: &[&str], queues: i32, per_queue: usize) -> PathBuf {
    let path = dir.join("x.jsonl");
    let mut out = Vec::new();
    let mut n = 0u64;
    for i in 0..per_queue {
        for t in topics {
            for q in 0..queues {
                let m = Message {
                    topic: t.to_string(),
                    queue_id: q,
                    flag: 0,
                    queue_offset: i as i64,
                    physical_offset: (n * 1000) as i64,
                    sys_flag: 0,
                    born_timestamp: 1_700_000_000_000,
                    born_host: Host::v4([10, 0, 0, 1], 5000),
                    store_timestamp: 1_700_000_000_001,
                    store_host: Host::v4([10, 0, 0, 2], 10911),
                    reconsume_times: 0,
                    prepared_transaction_offset: 0,
                    body: format!("{t}/{q}/{i}").into_bytes(),
                    properties: encode_properties(
                        &[("UNIQ_KEY", format!("U{n}")), ("KEYS", format!("k{n}"))],
                        true,
                    ),
                    version: MessageVersion::V1,
                };
                let raw = m.encode().unwrap();
                let Ok(Record::Message(r)) = parse_record(&raw, 0, n * 1000, false) else {
                    panic!()
                };
                write_json_line(
                    &mut out,
                    &r,
                    &RecordFile::new(Path::new("f")),
                    BodyMode::Auto,
                )
                .unwrap();
                n += 1;
            }
        }
    }
    std::fs::write(&path, out).unwrap();
    path
}

type Script = Box<dyn Fn(usize, &[Outgoing]) -> Result<Vec<SendStatus>, SendError>>;

/// A cluster in memory: routes, and sends answered by a script, each after a short wait
/// that differs between calls (so that batches finish out of order).
struct Fake {
    queues: i32,
    order: bool,
    missing: RefCell<Vec<String>>,
    created: RefCell<Vec<(String, i32, i32, bool)>>,
    calls: RefCell<Vec<Vec<Outgoing>>>,
    active: RefCell<HashMap<Lane, usize>>,
    max_lane: Cell<usize>,
    total: Cell<usize>,
    max_total: Cell<usize>,
    /// The version every broker answers with (5.5.0's by default).
    version: i32,
    script: Script,
}

fn ok_all() -> Script {
    Box::new(|_, m| Ok(vec![SendStatus::SendOk; m.len()]))
}

impl Fake {
    fn new(queues: i32, script: Script) -> Fake {
        Fake {
            queues,
            order: false,
            missing: RefCell::new(Vec::new()),
            created: RefCell::new(Vec::new()),
            calls: RefCell::new(Vec::new()),
            active: RefCell::new(HashMap::new()),
            max_lane: Cell::new(0),
            total: Cell::new(0),
            max_total: Cell::new(0),
            version: 513,
            script,
        }
    }

    /// Keys the fake stored (answered SEND_OK), in the order sent per lane.
    fn sent_keys(&self) -> Vec<u64> {
        self.calls
            .borrow()
            .iter()
            .flatten()
            .map(|o| o.key)
            .collect()
    }
}

impl Sender for Fake {
    async fn route(&self, topic: &str) -> Result<TopicRoute, SendError> {
        if self.missing.borrow().iter().any(|t| t == topic) {
            return Err(SendError::TopicNotExist(topic.into()));
        }
        Ok(TopicRoute {
            topic: topic.into(),
            queues: (0..self.queues)
                .map(|q| PublishQueue {
                    broker_name: "broker-a".into(),
                    broker_addr: "127.0.0.1:10911".into(),
                    queue_id: q,
                })
                .collect(),
            write_queue_nums: self.queues,
            order: self.order,
        })
    }

    async fn broker_version(&self, _addr: &str) -> Result<i32, SendError> {
        Ok(self.version)
    }

    async fn create_topic(&self, t: &str, q: i32, p: i32, o: bool) -> Result<(), SendError> {
        self.created.borrow_mut().push((t.into(), q, p, o));
        self.missing.borrow_mut().retain(|m| m != t);
        Ok(())
    }

    async fn send(&self, messages: &[Outgoing]) -> Result<Vec<Acked>, SendError> {
        let call = {
            let mut calls = self.calls.borrow_mut();
            calls.push(messages.to_vec());
            calls.len() - 1
        };
        let lane = (messages[0].topic.clone(), messages[0].queue_id);
        assert!(messages
            .iter()
            .all(|m| (m.topic.clone(), m.queue_id) == lane));
        {
            let mut a = self.active.borrow_mut();
            let n = a.entry(lane.clone()).or_default();
            *n += 1;
            self.max_lane.set(self.max_lane.get().max(*n));
        }
        self.total.set(self.total.get() + 1);
        self.max_total
            .set(self.max_total.get().max(self.total.get()));
        tokio::time::sleep(Duration::from_millis((call * 7 % 5) as u64)).await;
        self.total.set(self.total.get() - 1);
        *self.active.borrow_mut().get_mut(&lane).unwrap() -= 1;
        let statuses = (self.script)(call, messages);
        if statuses.is_err() {
            self.calls.borrow_mut()[call].clear();
        }
        Ok(statuses?
            .into_iter()
            .zip(messages)
            .map(|(status, o)| Acked {
                key: o.key,
                broker: "broker-a".into(),
                queue_id: o.queue_id.unwrap_or(0),
                queue_offset: 0,
                offset_msg_id: format!("ID{}", o.key),
                status,
            })
            .collect())
    }
}

struct Setup {
    _t: tempfile::TempDir,
    source: Source,
    journal: PathBuf,
}

fn setup(topics: &[&str], queues: i32, per_queue: usize) -> Setup {
    let t = tempfile::tempdir().unwrap();
    let file = export_file(t.path(), topics, queues, per_queue);
    let source = Source::open(&SourceSpec {
        path: file,
        ..Default::default()
    })
    .unwrap();
    let journal = t.path().join("x.jsonl.send-journal");
    Setup {
        _t: t,
        source,
        journal,
    }
}

struct Ran {
    summary: SendSummary,
    outcomes: Vec<MessageOutcome>,
}

/// Plan, route and send `s`'s source to `fake`.
async fn run(
    s: &Setup,
    fake: &Fake,
    opts: &RunOptions,
    stop: &AtomicBool,
) -> Result<Ran, RunError> {
    let header = journal_header(&s.source, &Some(Target::default()));
    let mut journal = Journal::open(&s.journal, &header, Access::Write, Duration::ZERO)?;
    let plan = plan(&s.source, &opts.translate, Some(&journal))?;
    let routes = resolve_routes(fake, &plan, opts).await?;
    check_timer_wheels(fake, &plan, &routes).await?;
    let choices = choose_queues(&plan, &routes, opts);
    let mut outcomes = Vec::new();
    let summary = send_all(
        &s.source,
        fake,
        &mut journal,
        &plan,
        &choices,
        opts,
        stop,
        &mut |e| {
            if let Event::Message(o) = e {
                outcomes.push(o.clone());
            }
        },
    )
    .await;
    Ok(Ran { summary, outcomes })
}

fn reopen(s: &Setup) -> Journal {
    let header = journal_header(&s.source, &Some(Target::default()));
    Journal::open(&s.journal, &header, Access::Read, Duration::ZERO).unwrap()
}

fn opts(in_flight: usize, batch: usize) -> RunOptions {
    RunOptions {
        in_flight,
        batch_messages: batch,
        ..Default::default()
    }
}

/// Line number of the `i`th message of queue `q` of topic `t` in [`export_file`]'s order.
fn body_key(o: &Outgoing) -> (String, i32, usize) {
    let b = String::from_utf8(o.body.clone()).unwrap();
    let mut p = b.split('/');
    let t = p.next().unwrap().to_string();
    let q = p.next().unwrap().parse().unwrap();
    let i = p.next().unwrap().parse().unwrap();
    (t, q, i)
}

#[tokio::test]
async fn every_message_once_in_queue_order_one_batch_per_queue() {
    let s = setup(&["T0", "T1"], 4, 100);
    let fake = Fake::new(4, ok_all());
    let stop = AtomicBool::new(false);
    let r = run(&s, &fake, &opts(3, 16), &stop).await.unwrap();
    assert_eq!(r.summary.sent, 800);
    assert_eq!(r.summary.messages, 800);
    assert_eq!(
        (r.summary.refused, r.summary.in_doubt, r.summary.not_sent),
        (0, 0, 0)
    );
    let mut keys = fake.sent_keys();
    keys.sort();
    assert_eq!(keys, (1..=800).collect::<Vec<u64>>());
    // each queue in its order, each message to its own queue
    let mut next: HashMap<(String, i32), usize> = HashMap::new();
    for o in fake.calls.borrow().iter().flatten() {
        let (t, q, i) = body_key(o);
        assert_eq!((o.topic.as_str(), o.queue_id), (t.as_str(), Some(q)));
        let n = next.entry((t, q)).or_default();
        assert_eq!(*n, i);
        *n += 1;
    }
    assert_eq!(fake.max_lane.get(), 1, "two batches of one queue in flight");
    assert!(
        fake.max_total.get() <= 3 && fake.max_total.get() >= 2,
        "{}",
        fake.max_total.get()
    );
    assert!(fake.calls.borrow().iter().all(|c| c.len() <= 16));
    // 6 full batches and the last 4 per queue
    assert_eq!(fake.calls.borrow().len(), 8 * 7);
    let j = reopen(&s);
    assert_eq!((j.acked(), j.ranges(), j.in_doubt_before()), (800, 1, 0));
    assert!(r.outcomes.iter().all(|o| matches!(o.status, Status::Sent)));
    // again: everything is skipped, nothing sent
    let fake2 = Fake::new(4, ok_all());
    let r = run(&s, &fake2, &opts(3, 16), &stop).await.unwrap();
    assert_eq!((r.summary.sent, r.summary.skipped), (0, 800));
    assert!(fake2.calls.borrow().is_empty());
}

#[tokio::test]
async fn journal_right_after_a_failure_and_resume_sends_exactly_the_rest() {
    let s = setup(&["T0"], 4, 50);
    // the 6th batch fails as a lost connection does
    let fake = Fake::new(
        4,
        Box::new(|call, m| {
            if call == 5 {
                Err(SendError::Transport {
                    addr: "127.0.0.1:10911".into(),
                    what: "connection reset".into(),
                })
            } else {
                Ok(vec![SendStatus::SendOk; m.len()])
            }
        }),
    );
    let stop = AtomicBool::new(false);
    let r = run(&s, &fake, &opts(4, 10), &stop).await.unwrap();
    assert!(r
        .summary
        .failure
        .as_deref()
        .unwrap()
        .contains("connection reset"));
    let failed = fake.calls.borrow()[5].len();
    assert_eq!(failed, 0, "the fake clears a failed call");
    let stored: BTreeSet<u64> = fake.sent_keys().into_iter().collect();
    assert_eq!(r.summary.sent as usize, stored.len());
    assert_eq!(r.summary.in_doubt, 10);
    assert!(
        stored.len() >= 5 * 10 && stored.len() < 200,
        "{}",
        stored.len()
    );
    assert_eq!(
        r.summary.sent + r.summary.in_doubt + r.summary.not_sent,
        200
    );
    // the journal holds exactly what was stored
    let j = reopen(&s);
    for seq in 0..200u64 {
        assert_eq!(j.is_acked(seq), stored.contains(&(seq + 1)), "place {seq}");
    }
    let in_doubt: Vec<u64> = r
        .outcomes
        .iter()
        .filter(|o| matches!(o.status, Status::InDoubt))
        .map(|o| o.seq)
        .collect();
    assert_eq!(in_doubt.len(), 10);
    assert!(in_doubt.iter().all(|&q| j.in_doubt(q)));
    assert_eq!(j.in_doubt_before(), 10);
    // resumed: exactly the rest, the in-doubt ones said to be possible duplicates
    let fake2 = Fake::new(4, ok_all());
    let r2 = run(&s, &fake2, &opts(4, 10), &stop).await.unwrap();
    let again: BTreeSet<u64> = fake2.sent_keys().into_iter().collect();
    assert!(again.is_disjoint(&stored));
    assert_eq!(again.len() + stored.len(), 200);
    assert_eq!(r2.summary.skipped as usize, stored.len());
    assert_eq!(r2.summary.possible_duplicates, 10);
    assert!(r2.summary.failure.is_none());
    let j = reopen(&s);
    assert_eq!((j.acked(), j.in_doubt_before()), (200, 0));
}

#[tokio::test]
async fn an_illegal_message_is_refused_alone() {
    let s = setup(&["T0"], 2, 20);
    let bad = 17u64;
    let fake = Fake::new(
        2,
        Box::new(move |_, m| {
            if m.iter().any(|o| o.key == bad) {
                Err(SendError::Refused {
                    addr: "b".into(),
                    code: MESSAGE_ILLEGAL,
                    name: "MESSAGE_ILLEGAL".into(),
                    remark: "too big".into(),
                })
            } else {
                Ok(vec![SendStatus::SendOk; m.len()])
            }
        }),
    );
    let stop = AtomicBool::new(false);
    let r = run(&s, &fake, &opts(2, 8), &stop).await.unwrap();
    assert_eq!((r.summary.sent, r.summary.refused), (39, 1));
    assert!(r.summary.failure.is_none());
    let refused: Vec<_> = r
        .outcomes
        .iter()
        .filter(|o| matches!(o.status, Status::Refused))
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].key, bad);
    assert!(refused[0].why.as_deref().unwrap().contains("too big"));
    // the queue's order held around the split batch
    let mut next: HashMap<(String, i32), usize> = HashMap::new();
    for o in fake.calls.borrow().iter().flatten() {
        let (t, q, i) = body_key(o);
        let n = next.entry((t, q)).or_default();
        assert!(*n <= i);
        *n = i + 1;
    }
    let j = reopen(&s);
    assert!(!j.is_acked(bad - 1) && !j.in_doubt(bad - 1));
    assert_eq!(j.acked(), 39);
}

#[tokio::test]
async fn stored_without_send_ok_is_recorded_only_when_accepted() {
    let s = setup(&["T0"], 1, 10);
    let script = || -> Script {
        Box::new(|_, m| {
            Ok(m.iter()
                .map(|o| {
                    if o.key == 3 {
                        SendStatus::FlushDiskTimeout
                    } else {
                        SendStatus::SendOk
                    }
                })
                .collect())
        })
    };
    let stop = AtomicBool::new(false);
    let r = run(&s, &Fake::new(1, script()), &opts(1, 4), &stop)
        .await
        .unwrap();
    assert_eq!((r.summary.sent, r.summary.unconfirmed), (9, 1));
    assert!(!reopen(&s).is_acked(2));
    let accept = RunOptions {
        accept_flush_timeout: true,
        ..opts(1, 4)
    };
    let fake = Fake::new(1, script());
    let r = run(&s, &fake, &accept, &stop).await.unwrap();
    assert_eq!((r.summary.sent, r.summary.skipped), (1, 9));
    assert_eq!(fake.sent_keys(), vec![3]);
    assert!(reopen(&s).is_acked(2));
}

#[tokio::test]
async fn a_missing_topic_is_named_or_created() {
    let s = setup(&["T0", "T1"], 3, 2);
    let fake = Fake::new(3, ok_all());
    fake.missing.borrow_mut().push("T1".into());
    let stop = AtomicBool::new(false);
    let e = run(&s, &fake, &opts(2, 8), &stop).await.err().unwrap();
    assert!(
        matches!(&e, RunError::MissingTopics(t) if t == &["T1".to_string()]),
        "{e}"
    );
    assert!(e.to_string().contains("no topic T1"));
    assert!(fake.calls.borrow().is_empty());
    let create = RunOptions {
        create_topics: true,
        ..opts(2, 8)
    };
    let r = run(&s, &fake, &create, &stop).await.unwrap();
    assert_eq!(r.summary.sent, 12);
    assert_eq!(
        fake.created.borrow().as_slice(),
        &[("T1".to_string(), 3, 6, false)]
    );
}

#[tokio::test]
async fn queue_counts_that_differ() {
    let s = setup(&["T0"], 4, 5);
    let stop = AtomicBool::new(false);
    // not orderly: folded onto the target's two queues, each source queue's order kept
    let fake = Fake::new(2, ok_all());
    let r = run(&s, &fake, &opts(4, 8), &stop).await.unwrap();
    assert_eq!(r.summary.sent, 20);
    assert!(fake
        .calls
        .borrow()
        .iter()
        .flatten()
        .all(|o| o.queue_id == Some(body_key(o).1 % 2)));
    // orderly: refused, unless --reorder
    let s = setup(&["T0"], 4, 5);
    let mut fake = Fake::new(2, ok_all());
    fake.order = true;
    let r = run(&s, &fake, &opts(4, 8), &stop).await.unwrap();
    assert_eq!((r.summary.sent, r.summary.refused), (0, 20));
    assert!(r.outcomes[0].why.as_deref().unwrap().contains("--reorder"));
    let reorder = RunOptions {
        reorder: true,
        ..opts(4, 8)
    };
    let r = run(&s, &fake, &reorder, &stop).await.unwrap();
    assert_eq!(r.summary.sent, 20);
    // --spread: the producer picks
    let s = setup(&["T0"], 4, 5);
    let fake = Fake::new(4, ok_all());
    let spread = RunOptions {
        spread: true,
        ..opts(4, 8)
    };
    run(&s, &fake, &spread, &stop).await.unwrap();
    assert!(fake
        .calls
        .borrow()
        .iter()
        .flatten()
        .all(|o| o.queue_id.is_none()));
}

#[tokio::test]
async fn a_stop_starts_no_new_batch_and_keeps_the_journal() {
    let s = setup(&["T0"], 2, 50);
    let stop = AtomicBool::new(false);
    let stop_ref = &stop;
    let script_stop = std::rc::Rc::new(Cell::new(false));
    let f2 = Fake::new(
        2,
        Box::new({
            let flag = script_stop.clone();
            move |call, m| {
                if call == 3 {
                    flag.set(true);
                }
                Ok(vec![SendStatus::SendOk; m.len()])
            }
        }),
    );
    // Ctrl-C comes while the 4th batch is answered: the loop sees it after that batch
    let header = journal_header(&s.source, &Some(Target::default()));
    let mut journal = Journal::open(&s.journal, &header, Access::Write, Duration::ZERO).unwrap();
    let o = opts(2, 5);
    let plan = plan(&s.source, &o.translate, Some(&journal)).unwrap();
    let routes = resolve_routes(&f2, &plan, &o).await.unwrap();
    let choices = choose_queues(&plan, &routes, &o);
    let summary = send_all(
        &s.source,
        &f2,
        &mut journal,
        &plan,
        &choices,
        &o,
        stop_ref,
        &mut |_| {
            if script_stop.get() {
                stop_ref.store(true, Ordering::SeqCst);
            }
        },
    )
    .await;
    drop(journal);
    assert!(summary.interrupted);
    let calls = f2.calls.borrow().len();
    assert!((4..=5).contains(&calls), "{calls}");
    assert_eq!(summary.sent as usize, f2.sent_keys().len());
    assert_eq!(summary.sent + summary.not_sent, 100);
    assert_eq!(reopen(&s).acked(), summary.sent);
}

fn out(topic: &str, key: u64) -> Outgoing {
    Outgoing {
        key,
        topic: topic.into(),
        queue_id: Some(0),
        flag: 0,
        sys_flag: 0,
        born_timestamp: 5,
        body: vec![0; 100],
        properties: String::new(),
        reconsume_times: 0,
        max_reconsume_times: None,
        delayed: false,
    }
}

fn meta(seq: u64) -> Meta {
    Meta {
        seq,
        key: seq,
        found: Found {
            source: ExportSource::Topic,
            topic: "T".into(),
            queue_id: 0,
            queue_offset: 0,
            commitlog_offset: 0,
        },
        uniq_key: None,
        delay: Delay::None,
        resent: false,
    }
}

/// Batches close at the count and size limits, and where a message cannot share one.
#[test]
fn batches_close_on_the_rules() {
    let o = RunOptions {
        batch_messages: 3,
        batch_bytes: 400,
        ..Default::default()
    };
    let mut q = LaneQueue::default();
    let mut seq = 0;
    let mut push = |q: &mut LaneQueue, m: Outgoing| {
        q.push(m, meta(seq), &o);
        seq += 1;
    };
    for _ in 0..4 {
        push(&mut q, out("T", 0));
    }
    // 3 (count), then one open
    assert_eq!(q.closed.len(), 1);
    let mut delayed = out("T", 0);
    delayed.delayed = true;
    push(&mut q, delayed);
    // the open one closed, the delayed one alone
    assert_eq!(
        q.closed
            .iter()
            .map(|b| b.messages.len())
            .collect::<Vec<_>>(),
        vec![3, 1, 1]
    );
    let mut born = out("T", 0);
    push(&mut q, out("T", 0));
    born.born_timestamp = 6;
    push(&mut q, born.clone());
    assert_eq!(q.closed.back().unwrap().messages.len(), 1);
    let mut zipped = out("T", 0);
    zipped.sys_flag = 0x301;
    push(&mut q, zipped);
    push(&mut q, out("%RETRY%g", 0));
    // size: 3 * 122 bytes fit 400, a 4th would not (count closes first here)
    let lens: Vec<usize> = q.closed.iter().map(|b| b.messages.len()).collect();
    assert_eq!(lens, vec![3, 1, 1, 1, 1, 1, 1]);
    let mut big = LaneQueue::default();
    let mut b = out("T", 0);
    b.body = vec![0; 300];
    big.push(b.clone(), meta(0), &o);
    big.push(b, meta(1), &o);
    assert_eq!((big.closed.len(), big.open.messages.len()), (1, 1));
    assert_eq!(big.next_batch(false), Some(0));
    assert_eq!(big.take().messages.len(), 1);
    assert_eq!(big.next_batch(false), None);
    assert_eq!(big.next_batch(true), Some(1));
    big.busy = true;
    assert_eq!(big.next_batch(true), None);
}

#[test]
fn rate_spaces_batches() {
    let mut r = Rate::new(Some(1000.0));
    assert!(r.take(100).is_none());
    let at = r.take(100).unwrap();
    let wait = at.saturating_duration_since(Instant::now());
    assert!(
        wait > Duration::from_millis(80) && wait <= Duration::from_millis(100),
        "{wait:?}"
    );
    assert!(Rate::new(None).take(1_000_000).is_none());
    assert!(Rate::new(Some(0.0)).take(1).is_none());
}
