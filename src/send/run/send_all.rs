//! The sending loop: the source read again with bodies, batches per lane, at most one in
//! flight per lane, each acknowledgement journaled, and what each message became.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Instant;

use serde::Serialize;

use crate::send::journal::Journal;
use crate::send::outgoing::{Acked, SendStatus, SourceKey};
use crate::send::producer::{is_acl_refusal, SendError};
use crate::send::source::{PassedOver, Source, SourceEntry};
use crate::send::translate::{translate, Delay, Translation};

use super::*;

/// What happened to a message, for the printer.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Stored (`SEND_OK`, or an accepted flush timeout).
    Sent,
    /// Stored, but not as asked (a flush or slave timeout): not recorded, sent again next time.
    Unconfirmed,
    /// Refused (queue rules, or the broker): listed, not sent.
    Refused,
    /// An undecided half message: listed.
    Undecided,
    /// Its batch failed: it may or may not be stored.
    InDoubt,
}

/// One message's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct MessageOutcome {
    pub key: SourceKey,
    pub seq: u64,
    pub found: Found,
    pub uniq_key: Option<String>,
    pub topic: Option<String>,
    pub queue_id: Option<i32>,
    pub status: Status,
    /// The broker's answer (sent and unconfirmed).
    pub acked: Option<Acked>,
    pub delay: Option<Delay>,
    /// Why it was refused, or what failed.
    pub why: Option<String>,
    /// An earlier run was sending it when it stopped: if that send was stored too, the
    /// message is there twice (with the same UNIQ_KEY).
    pub possible_duplicate: bool,
}

/// What a send did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SendSummary {
    /// Messages selected.
    pub messages: u64,
    /// Acknowledged in this run.
    pub sent: u64,
    /// Acknowledged in an earlier run (in the journal).
    pub skipped: u64,
    pub refused: u64,
    pub undecided: u64,
    /// Stored without `SEND_OK`, not recorded.
    pub unconfirmed: u64,
    /// In a batch that failed: may be stored, not recorded (sent again next time).
    pub in_doubt: u64,
    /// Sent in this run after an earlier run left them in doubt: maybe there twice.
    pub possible_duplicates: u64,
    /// Sent with their delay kept.
    pub delayed: u64,
    /// Delayed, but due: sent at once.
    pub released: u64,
    /// Not sent because the run stopped first (Ctrl-C or a failure).
    pub not_sent: u64,
    pub batches: u64,
    pub passed_over: BTreeMap<PassedOver, u64>,
    pub stopped: Option<Stopped>,
    pub interrupted: bool,
    /// What stopped the run.
    pub failure: Option<String>,
    /// Sent per target topic.
    pub topics: BTreeMap<String, u64>,
    pub elapsed_ms: u64,
}

/// Events of a run, in order.
pub enum Event<'a> {
    /// A message's outcome.
    Message(&'a MessageOutcome),
    /// Messages dealt with so far (sent, skipped, listed), of `total`.
    Progress { done: u64, total: u64 },
}

/// Send every message of `source` not in `journal` (see the module documentation).
#[allow(clippy::too_many_arguments)]
pub async fn send_all<S: Sender>(
    source: &Source,
    sender: &S,
    journal: &mut Journal,
    plan: &Plan,
    choices: &BTreeMap<String, QueueChoice>,
    opts: &RunOptions,
    stop: &AtomicBool,
    events: &mut dyn FnMut(Event<'_>),
) -> SendSummary {
    let started = Instant::now();
    let mut s = SendSummary {
        passed_over: plan.passed_over.clone(),
        stopped: plan.stopped.clone(),
        ..Default::default()
    };
    let total = plan.messages;
    let mut done = 0u64;
    let mut lanes: HashMap<Lane, LaneQueue> = HashMap::new();
    let mut in_flight: Vec<InFlight<'_>> = Vec::new();
    let mut buffered = 0usize;
    let mut entries = source.entries(true);
    let mut source_done = false;
    let mut rate = Rate::new(opts.rate);
    let mut rate_wait: Option<Instant> = None;
    let fail = |s: &mut SendSummary, why: String| {
        s.failure.get_or_insert(why);
    };
    loop {
        let stopping = s.failure.is_some() || stop.load(Ordering::SeqCst);
        if stop.load(Ordering::SeqCst) {
            s.interrupted = true;
        }
        // read ahead
        while !source_done && !stopping && buffered < opts.buffer_bytes && s.failure.is_none() {
            let Some(entry) = entries.next() else {
                source_done = true;
                break;
            };
            let m = match entry {
                Err(e) => {
                    fail(&mut s, e.to_string());
                    source_done = true;
                    break;
                }
                Ok(SourceEntry::PassedOver { .. } | SourceEntry::Stopped { .. }) => continue,
                Ok(SourceEntry::Message(m)) => m,
            };
            s.messages += 1;
            if let Err(e) = journal.check_key(m.seq, m.key) {
                fail(&mut s, e.to_string());
                source_done = true;
                break;
            }
            if journal.is_acked(m.seq) {
                s.skipped += 1;
                done += 1;
                continue;
            }
            let meta = Meta {
                seq: m.seq,
                key: m.key,
                found: Found::of(&m),
                uniq_key: m.item.uniq_key.clone(),
                delay: Delay::None,
                resent: journal.in_doubt(m.seq),
            };
            let listed = |status, topic, queue_id, why: String, meta: &Meta| MessageOutcome {
                key: meta.key,
                seq: meta.seq,
                found: meta.found.clone(),
                uniq_key: meta.uniq_key.clone(),
                topic,
                queue_id,
                status,
                acked: None,
                delay: None,
                why: Some(why),
                possible_duplicate: false,
            };
            match translate(m.key, &m.item, m.message, &opts.translate) {
                Translation::Undecided => {
                    s.undecided += 1;
                    done += 1;
                    let why = "undecided transaction (--send-undecided sends it)".to_string();
                    events(Event::Message(&listed(
                        Status::Undecided,
                        None,
                        None,
                        why,
                        &meta,
                    )));
                }
                Translation::Send { mut message, delay } => {
                    let choice = choices
                        .get(&message.topic)
                        .cloned()
                        .unwrap_or(QueueChoice::Keep);
                    match choice.apply(message.queue_id) {
                        Err(why) => {
                            s.refused += 1;
                            done += 1;
                            let o = listed(
                                Status::Refused,
                                Some(message.topic.clone()),
                                message.queue_id,
                                why,
                                &meta,
                            );
                            events(Event::Message(&o));
                        }
                        Ok(queue) => {
                            message.queue_id = queue;
                            buffered += batch_len(&message);
                            let lane = (message.topic.clone(), queue);
                            let meta = Meta { delay, ..meta };
                            lanes.entry(lane).or_default().push(message, meta, opts);
                        }
                    }
                }
            }
        }
        // start batches: the lane whose next batch comes first in the source
        let flush = source_done || buffered >= opts.buffer_bytes || stopping;
        while in_flight.len() < opts.in_flight.max(1) && !stopping && rate_wait.is_none() {
            let Some(lane) = lanes
                .iter()
                .filter_map(|(l, q)| q.next_batch(flush).map(|seq| (seq, l)))
                .min_by_key(|(seq, _)| *seq)
                .map(|(_, l)| l.clone())
            else {
                break;
            };
            let Some(q) = lanes.get_mut(&lane) else { break };
            let n = q
                .closed
                .front()
                .map_or(q.open.messages.len(), |b| b.messages.len());
            if let Some(at) = rate.take(n) {
                rate_wait = Some(at);
                break;
            }
            let batch = q.take();
            q.busy = true;
            if let Err(e) = journal.sending(&batch.pairs()) {
                fail(&mut s, e.to_string());
                q.busy = false;
                q.closed.push_front(batch);
                break;
            }
            s.batches += 1;
            let lane_key = lane.clone();
            in_flight.push(Box::pin(async move {
                let r = sender.send(&batch.messages).await;
                (lane_key, batch, r)
            }));
        }
        if in_flight.is_empty() {
            let idle = lanes
                .values()
                .all(|q| q.open.messages.is_empty() && q.closed.is_empty());
            if stopping || (source_done && idle) {
                break;
            }
            if let Some(at) = rate_wait.take() {
                tokio::time::sleep_until(at.into()).await;
            }
            continue;
        }
        // wait for a batch (or the rate's next start)
        let mut sleep = rate_wait.map(|at| Box::pin(tokio::time::sleep_until(at.into())));
        let finished = std::future::poll_fn(|cx| {
            for i in 0..in_flight.len() {
                if let Poll::Ready(out) = in_flight[i].as_mut().poll(cx) {
                    drop(in_flight.swap_remove(i));
                    return Poll::Ready(Some(out));
                }
            }
            if let Some(s) = sleep.as_mut() {
                if s.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
            }
            Poll::Pending
        })
        .await;
        let Some((lane, batch, result)) = finished else {
            rate_wait = None;
            continue;
        };
        buffered = buffered.saturating_sub(batch.bytes);
        if let Some(q) = lanes.get_mut(&lane) {
            q.busy = false;
        }
        match result {
            Ok(acks) if acks.len() == batch.messages.len() => {
                let mut recorded = Vec::with_capacity(acks.len());
                let mut outcomes = Vec::with_capacity(acks.len());
                for ((o, meta), ack) in batch.messages.iter().zip(&batch.meta).zip(acks) {
                    let stored = ack.status == SendStatus::SendOk || opts.accept_flush_timeout;
                    if stored {
                        recorded.push((meta.seq, meta.key));
                        s.sent += 1;
                        *s.topics.entry(o.topic.clone()).or_default() += 1;
                        match meta.delay {
                            Delay::Level { .. } | Delay::Timer { .. } => s.delayed += 1,
                            Delay::Released => s.released += 1,
                            Delay::None => {}
                        }
                        if meta.resent {
                            s.possible_duplicates += 1;
                        }
                    } else {
                        s.unconfirmed += 1;
                    }
                    outcomes.push(MessageOutcome {
                        key: meta.key,
                        seq: meta.seq,
                        found: meta.found.clone(),
                        uniq_key: meta.uniq_key.clone(),
                        topic: Some(o.topic.clone()),
                        queue_id: Some(ack.queue_id),
                        status: if stored {
                            Status::Sent
                        } else {
                            Status::Unconfirmed
                        },
                        why: (!stored).then(|| {
                            format!(
                                "stored as {:?}, not SEND_OK (--accept-flush-timeout counts it \
                                 as sent)",
                                ack.status
                            )
                        }),
                        acked: Some(ack),
                        delay: Some(meta.delay),
                        possible_duplicate: meta.resent,
                    });
                }
                if let Err(e) = journal.record_acked(&recorded) {
                    fail(&mut s, e.to_string());
                }
                done += outcomes.len() as u64;
                for o in &outcomes {
                    events(Event::Message(o));
                }
            }
            Err(SendError::Refused { code, .. })
                if code == MESSAGE_ILLEGAL && batch.messages.len() > 1 =>
            {
                // sent again one by one, so that only the illegal one is refused
                let q = lanes.entry(lane).or_default();
                let Batch { messages, meta, .. } = batch;
                for (o, m) in messages.into_iter().zip(meta).rev() {
                    buffered += batch_len(&o);
                    q.closed.push_front(Batch {
                        bytes: batch_len(&o),
                        messages: vec![o],
                        meta: vec![m],
                    });
                }
            }
            Err(e @ SendError::Refused { code, .. }) if code == MESSAGE_ILLEGAL => {
                s.refused += 1;
                done += 1;
                if let Err(e) = journal.not_stored(&batch.pairs()) {
                    fail(&mut s, e.to_string());
                }
                for (o, meta) in batch.messages.iter().zip(&batch.meta) {
                    events(Event::Message(&MessageOutcome {
                        key: meta.key,
                        seq: meta.seq,
                        found: meta.found.clone(),
                        uniq_key: meta.uniq_key.clone(),
                        topic: Some(o.topic.clone()),
                        queue_id: o.queue_id,
                        status: Status::Refused,
                        acked: None,
                        delay: Some(meta.delay),
                        why: Some(e.to_string()),
                        possible_duplicate: false,
                    }));
                }
            }
            other => {
                // a refusal was not stored; anything else may have been
                let (why, maybe_stored) = match &other {
                    Ok(acks) => (
                        format!(
                            "the broker answered {} result(s) for a batch of {}",
                            acks.len(),
                            batch.messages.len()
                        ),
                        true,
                    ),
                    Err(e @ SendError::Refused { code, remark, .. })
                        if is_acl_refusal(*code, remark) =>
                    {
                        let topic = batch.messages.first().map_or("", |o| o.topic.as_str());
                        let why = format!(
                            "{e} (the cluster's ACL: check --access-key and --secret-key, and \
                             that the account may publish to {topic})"
                        );
                        (why, false)
                    }
                    Err(e @ (SendError::Refused { .. } | SendError::TopicNotExist(_))) => {
                        (e.to_string(), false)
                    }
                    Err(e) => (e.to_string(), true),
                };
                if maybe_stored {
                    for (o, meta) in batch.messages.iter().zip(&batch.meta) {
                        s.in_doubt += 1;
                        events(Event::Message(&MessageOutcome {
                            key: meta.key,
                            seq: meta.seq,
                            found: meta.found.clone(),
                            uniq_key: meta.uniq_key.clone(),
                            topic: Some(o.topic.clone()),
                            queue_id: o.queue_id,
                            status: Status::InDoubt,
                            acked: None,
                            delay: Some(meta.delay),
                            why: Some(why.clone()),
                            possible_duplicate: meta.resent,
                        }));
                    }
                } else if let Err(e) = journal.not_stored(&batch.pairs()) {
                    fail(&mut s, e.to_string());
                }
                fail(&mut s, why);
            }
        }
        events(Event::Progress { done, total });
    }
    drop(in_flight);
    if let Err(e) = journal.sync() {
        fail(&mut s, e.to_string());
    }
    // what was read but not sent, and what was not read
    s.not_sent = total
        .saturating_sub(s.sent + s.skipped + s.refused + s.undecided + s.unconfirmed + s.in_doubt);
    s.elapsed_ms = started.elapsed().as_millis() as u64;
    s
}
