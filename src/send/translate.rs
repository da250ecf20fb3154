//! A stored record turned into the message a producer would have sent for it ([`Outgoing`]).
//!
//! The starting point is export's [`resend_record`]: the record for the topic and queue it should
//! be sent to again (a retry or DLQ copy to its original topic, a parked delayed, timer or half
//! message to its `REAL_TOPIC`/`REAL_QID`, a 5.x timer message with `TIMER_DELIVER_MS` = its release
//! time), transaction bits cleared, provenance properties added where the topic changed. Then:
//!
//! - **Body and sysflag.** The body goes as stored, and the sysflag keeps only its compression
//!   bits (`COMPRESSED` and the compression type). The broker stores the sysflag the producer sends
//!   and consumers decompress by it, so a compressed body with its bits reaches consumers exactly
//!   as the original did; compressing it again could only change its bytes. Transaction, host and
//!   batch bits are the broker's.
//! - **Properties.** Every property a producer sets stays, in stored order (a repeated name once,
//!   with its last value, as Java's map reads it): `UNIQ_KEY`, `KEYS`, `TAGS`, user and trace
//!   properties, `RETRY_TOPIC`/`ORIGIN_MESSAGE_ID` of consumer copies. Dropped: what the broker
//!   adds ([`BROKER_PROPERTIES`]: `CLUSTER`, `MIN_OFFSET`/`MAX_OFFSET`, `WAIT`, `REAL_TOPIC`/`REAL_QID`
//!   and `DELAY` of parked and delivered copies, the transaction check's and the timer's own
//!   properties, 5.x inner-batch and CRC properties, POP revive marks), `TRAN_MSG`/`PGROUP` (a
//!   committed transaction goes as a normal message: kept, they would make it a half message
//!   again), and the timer requests of a message already released (`TIMER_DELIVER_MS`,
//!   `TIMER_DELAY_SEC`, `TIMER_DELAY_MS`: kept, a 5.x broker would park it again).
//! - **Remaining delay.** A message parked in `SCHEDULE_TOPIC_XXXX` goes with `DELAY` = the
//!   smallest level whose delay covers what remained at `now` (levels from the store's
//!   `messageDelayLevel`, or the broker's default); one already due goes at once. A pending 5.x
//!   timer message keeps `TIMER_DELIVER_MS` (a 4.9 broker ignores it and delivers at once): its
//!   release time, or, when `now` is not the real time (`clock`), the real time plus what
//!   remained at `now` (a broker refuses a release time in the past). `deliver_now` sends every
//!   one of them at once.
//! - **Consumer copies.** `%RETRY%`/`%DLQ%` copies go to their original topic (their queue there
//!   is not recorded: the producer picks one), or with `keep_retry_topics` stay on their
//!   `%RETRY%`/`%DLQ%` topic and queue, with the record's reconsume times in header `j` (and for
//!   `%RETRY%`, `MAX_RECONSUME_TIMES` or the group's `retryMaxTimes` in header `l`, as the client
//!   sends them).
//! - **Undecided half messages** are listed, not sent, unless `send_undecided`; then they go to
//!   their `REAL_TOPIC`/`REAL_QID` as normal messages.
//! - **Renames and marks.** `topic_map` renames the target topic last; `marks` are set on every
//!   message.

use std::collections::BTreeMap;

use serde::Serialize;

use super::outgoing::{Outgoing, SourceKey};
use crate::engine::broker::{property_pairs, remove_property, set_property};
use crate::engine::consume::export::{resend_record, ExportItem, ExportSource};
use crate::engine::store::dispatch::{DLQ_PREFIX, RETRY_PREFIX};
use crate::format::commitlog::{encode_properties, prop, sysflag, Message};
use crate::format::java::parse_int;

/// Properties the broker adds to what it stores, never sent back.
pub const BROKER_PROPERTIES: &[&str] = &[
    prop::CLUSTER,
    "MIN_OFFSET",
    "MAX_OFFSET",
    prop::WAIT,
    prop::REAL_TOPIC,
    prop::REAL_QID,
    prop::DELAY,
    prop::TRAN_PREPARED_QUEUE_OFFSET,
    prop::TRANSACTION_CHECK_TIMES,
    prop::TIMER_OUT_MS,
    prop::TIMER_ENQUEUE_MS,
    prop::TIMER_DEQUEUE_MS,
    prop::TIMER_ROLL_TIMES,
    prop::INNER_NUM,
    prop::INNER_BASE,
    prop::CRC32,
    "MSG_REGION",
    "TRACE_ON",
    "POP_CK",
    "POP_CK_OFFSET",
    "1ST_POP_TIME",
];

/// Transaction properties a producer sets on a half message: a message sent as a normal one
/// carries neither.
const TRANSACTION_PROPERTIES: &[&str] = &[prop::TRAN_MSG, prop::PGROUP];

/// The 5.x timer requests a producer sets.
const TIMER_REQUESTS: &[&str] = &[
    prop::TIMER_DELIVER_MS,
    prop::TIMER_DELAY_SEC,
    prop::TIMER_DELAY_MS,
];

/// `maxReconsumeTimes` of a consumer that sets none (16).
pub const DEFAULT_MAX_RECONSUME_TIMES: i32 = 16;

/// How records become messages.
#[derive(Debug, Clone, Default)]
pub struct TranslateOptions {
    /// `%RETRY%`/`%DLQ%` copies stay on their topic.
    pub keep_retry_topics: bool,
    /// Delayed and timer messages go at once.
    pub deliver_now: bool,
    /// Undecided half messages are sent (as normal messages).
    pub send_undecided: bool,
    /// `OLD=NEW` renames of target topics.
    pub topic_map: BTreeMap<String, String>,
    /// `NAME=VALUE` properties set on every message.
    pub marks: Vec<(String, String)>,
    /// `messageDelayLevel`: the delay of level `i + 1` in ms at index `i`.
    pub delay_levels: Vec<i64>,
    /// The time remaining delays are measured from (ms).
    pub now: i64,
    /// The real time (ms), when `now` is another: a timer's release time is this plus what
    /// remained of its delay at `now`.
    pub clock: Option<i64>,
    /// `retryMaxTimes` of consumer groups (for `%RETRY%` copies kept on their topic whose record
    /// does not say).
    pub retry_max_times: BTreeMap<String, i32>,
}

/// What the delay of a sent message became.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Delay {
    /// Not a delayed message.
    None,
    /// Delayed by level `level`, the smallest covering the `remaining_ms` left.
    Level { level: i32, remaining_ms: i64 },
    /// A 5.x timer message, delivered at `deliver_timestamp` (ms).
    Timer { deliver_timestamp: i64 },
    /// Was delayed, goes at once: due already (or `deliver_now`).
    Released,
}

/// A record's fate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Translation {
    /// Send this (`queue_id` is the message's own queue, `None` when it is not known).
    Send { message: Outgoing, delay: Delay },
    /// An undecided half message: listed, not sent.
    Undecided,
}

/// Where a record goes: topic, its queue there when known, and whether it stays a consumer
/// copy (`%RETRY%`/`%DLQ%`).
fn target(item: &ExportItem, msg: &Message, keep: bool) -> (String, Option<i32>) {
    let is_copy = |t: &str| t.starts_with(RETRY_PREFIX) || t.starts_with(DLQ_PREFIX);
    match item.source {
        ExportSource::Retry | ExportSource::Dlq if keep => {
            (item.queue_topic.clone(), Some(item.queue_id))
        }
        ExportSource::Retry | ExportSource::Dlq => (item.resend_topic.clone(), None),
        ExportSource::Delayed | ExportSource::Transaction | ExportSource::Timer => {
            let real = msg.property(prop::REAL_TOPIC).map(|s| s.into_owned());
            match real {
                Some(rt) if is_copy(&rt) && keep => {
                    let q = msg.property(prop::REAL_QID).and_then(|s| parse_int(&s));
                    (rt, Some(q.unwrap_or(0)))
                }
                Some(rt) if is_copy(&rt) => (item.resend_topic.clone(), None),
                _ => (item.resend_topic.clone(), Some(item.resend_queue_id)),
            }
        }
        ExportSource::Topic => (item.resend_topic.clone(), Some(item.resend_queue_id)),
    }
}

/// The delay level for `remaining` ms: the smallest whose delay is at least that, else the
/// longest; `None` when there are no levels.
pub fn delay_level(levels: &[i64], remaining: i64) -> Option<i32> {
    let i = levels
        .iter()
        .position(|&d| d >= remaining)
        .or_else(|| levels.len().checked_sub(1))?;
    i32::try_from(i + 1).ok()
}

/// Pairs with each name once, at its first place, with its last value (as Java's map reads a
/// properties string).
fn last_values(pairs: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(pairs.len());
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (k, v) in pairs {
        match at.get(&k) {
            Some(&i) => out[i].1 = v,
            None => {
                at.insert(k.clone(), out.len());
                out.push((k, v));
            }
        }
    }
    out
}

/// Where a record goes and with what delay: a [`translate`] without the message, what a plan
/// needs (it costs no property rewriting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The target topic, renamed by `topic_map`.
    pub topic: String,
    /// Its queue there, `None` when it is not known (the producer picks).
    pub queue_id: Option<i32>,
    pub delay: Delay,
}

/// Where `msg`, found as `item`, goes (see the module documentation); `None` for an undecided
/// half message, which is listed, not sent.
pub fn destination(
    item: &ExportItem,
    msg: &Message,
    opts: &TranslateOptions,
) -> Option<Destination> {
    if item.source == ExportSource::Transaction && !opts.send_undecided {
        return None;
    }
    let (topic, queue_id) = target(item, msg, opts.keep_retry_topics);
    let delay = match item.source {
        ExportSource::Timer => match item.due {
            Some(due) if !opts.deliver_now && due > opts.now => Delay::Timer {
                deliver_timestamp: match opts.clock {
                    Some(clock) => clock.saturating_add(due - opts.now),
                    None => due,
                },
            },
            _ => Delay::Released,
        },
        ExportSource::Delayed => {
            let remaining = item.due.map_or(0, |d| d.saturating_sub(opts.now));
            match delay_level(&opts.delay_levels, remaining) {
                Some(level) if !opts.deliver_now && remaining > 0 => Delay::Level {
                    level,
                    remaining_ms: remaining,
                },
                _ => Delay::Released,
            }
        }
        _ => Delay::None,
    };
    Some(Destination {
        topic: opts.topic_map.get(&topic).cloned().unwrap_or(topic),
        queue_id,
        delay,
    })
}

/// The message a producer would have sent for `msg`, found as `item` (see the module
/// documentation).
pub fn translate(
    key: SourceKey,
    item: &ExportItem,
    msg: Message,
    opts: &TranslateOptions,
) -> Translation {
    let Some(dest) = destination(item, &msg, opts) else {
        return Translation::Undecided;
    };
    // the record moved to where it belongs (before any rename)
    let (topic, queue) = target(item, &msg, opts.keep_retry_topics);
    let reconsume_times = msg.reconsume_times;
    let msg = if topic == item.resend_topic && queue.unwrap_or(0) == item.resend_queue_id {
        resend_record(msg, item)
    } else {
        let moved = ExportItem {
            resend_topic: topic.clone(),
            resend_queue_id: queue.unwrap_or(0),
            ..item.clone()
        };
        resend_record(msg, &moved)
    };
    let mut pairs = last_values(property_pairs(&msg.properties));
    pairs.retain(|(k, _)| {
        !BROKER_PROPERTIES.contains(&k.as_str()) && !TRANSACTION_PROPERTIES.contains(&k.as_str())
    });
    let delay = dest.delay;
    if item.source == ExportSource::Timer {
        for name in [prop::TIMER_DELAY_SEC, prop::TIMER_DELAY_MS] {
            remove_property(&mut pairs, name);
        }
        match delay {
            Delay::Timer { deliver_timestamp } => set_property(
                &mut pairs,
                prop::TIMER_DELIVER_MS,
                deliver_timestamp.to_string(),
            ),
            _ => remove_property(&mut pairs, prop::TIMER_DELIVER_MS),
        }
    } else {
        pairs.retain(|(k, _)| !TIMER_REQUESTS.contains(&k.as_str()));
        if let Delay::Level { level, .. } = delay {
            set_property(&mut pairs, prop::DELAY, level.to_string());
        }
    }
    let topic = dest.topic;
    let (reconsume_times, max_reconsume_times) = if topic.starts_with(RETRY_PREFIX) {
        let max = pairs
            .iter()
            .find(|(k, _)| k == prop::MAX_RECONSUME_TIMES)
            .and_then(|(_, v)| parse_int(v))
            .or_else(|| {
                let group = topic.strip_prefix(RETRY_PREFIX).unwrap_or_default();
                opts.retry_max_times.get(group).copied()
            })
            .unwrap_or(DEFAULT_MAX_RECONSUME_TIMES);
        // the client moves both into the header (PROTOCOL.md 6.2, `j` and `l`)
        remove_property(&mut pairs, prop::RECONSUME_TIME);
        remove_property(&mut pairs, prop::MAX_RECONSUME_TIMES);
        (reconsume_times, Some(max))
    } else if topic.starts_with(DLQ_PREFIX) {
        (reconsume_times, None)
    } else {
        (0, None)
    };
    for (name, value) in &opts.marks {
        set_property(&mut pairs, name, value.clone());
    }
    let sys_flag = if msg.sys_flag & sysflag::COMPRESSED != 0 {
        msg.sys_flag & (sysflag::COMPRESSED | sysflag::COMPRESSION_TYPE_MASK)
    } else {
        0
    };
    let properties = String::from_utf8(encode_properties(&pairs, true))
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Translation::Send {
        message: Outgoing {
            key,
            topic,
            queue_id: queue,
            flag: msg.flag,
            sys_flag,
            born_timestamp: msg.born_timestamp,
            body: msg.body,
            properties,
            reconsume_times,
            max_reconsume_times,
            delayed: matches!(delay, Delay::Level { .. } | Delay::Timer { .. }),
        },
        delay,
    }
}

/// The properties of an [`Outgoing`] as pairs (tests, the JSON lines).
pub fn outgoing_properties(o: &Outgoing) -> Vec<(String, String)> {
    property_pairs(o.properties.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::send::source::{PassedOver, Source, SourceEntry, SourceMessage, SourceSpec};
    use std::path::{Path, PathBuf};

    fn oracle(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/oracle")
            .join(name)
            .join("store")
    }

    fn open(name: &str) -> Source {
        Source::open(&SourceSpec {
            path: oracle(name),
            ..Default::default()
        })
        .unwrap()
    }

    /// Every message of a source, and what was passed over.
    fn all(s: &Source) -> (Vec<SourceMessage>, Vec<PassedOver>) {
        let mut msgs = Vec::new();
        let mut passed = Vec::new();
        for e in s.entries(true) {
            match e.unwrap() {
                SourceEntry::Message(m) => msgs.push(*m),
                SourceEntry::PassedOver { why, .. } => passed.push(why),
                SourceEntry::Stopped { key, why } => panic!("stopped at {key}: {why}"),
            }
        }
        (msgs, passed)
    }

    fn options(s: &Source) -> TranslateOptions {
        TranslateOptions {
            delay_levels: s.delay_levels(),
            retry_max_times: s.retry_max_times(),
            now: s.now(),
            ..Default::default()
        }
    }

    fn send(m: &SourceMessage, opts: &TranslateOptions) -> (Outgoing, Delay) {
        match translate(m.key, &m.item, m.message.clone(), opts) {
            Translation::Send { message, delay } => (message, delay),
            Translation::Undecided => panic!("{}: undecided", m.key),
        }
    }

    fn props(o: &Outgoing) -> BTreeMap<String, String> {
        let pairs = outgoing_properties(o);
        let map: BTreeMap<String, String> = pairs.iter().cloned().collect();
        assert_eq!(map.len(), pairs.len(), "{}: a name twice", o.key);
        map
    }

    fn stored(m: &SourceMessage) -> BTreeMap<String, String> {
        m.message.properties().to_map()
    }

    fn of(msgs: &[SourceMessage], source: ExportSource) -> Vec<&SourceMessage> {
        msgs.iter().filter(|m| m.item.source == source).collect()
    }

    /// A stored record of a topic goes to its topic and queue with its body, flag, born time and
    /// every property a producer sets; the broker's are gone, a committed transaction is a normal
    /// message, compressed bodies keep their compression bits.
    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn topic_messages_keep_what_the_producer_set() {
        for name in ["basic-4.9", "basic-5.x"] {
            let s = open(name);
            let opts = options(&s);
            let (msgs, passed) = all(&s);
            assert_eq!(
                msgs.len() + passed.len(),
                if name == "basic-4.9" { 4771 } else { 4747 }
            );
            let topics = of(&msgs, ExportSource::Topic);
            assert_eq!(topics.len(), 1468 + 1481 + 1520, "{name}");
            let mut compressions = std::collections::BTreeSet::new();
            let mut committed = 0;
            for m in topics {
                let (o, delay) = send(m, &opts);
                assert_eq!(delay, Delay::None);
                assert!(!o.delayed);
                assert_eq!(o.topic, m.message.topic);
                assert_eq!(o.queue_id, Some(m.message.queue_id));
                assert_eq!(o.body, m.message.body, "{name} {}", m.key);
                assert_eq!(
                    (o.flag, o.born_timestamp),
                    (m.message.flag, m.message.born_timestamp)
                );
                assert_eq!((o.reconsume_times, o.max_reconsume_times), (0, None));
                let mut want = stored(m);
                if want.contains_key(prop::TRAN_MSG) {
                    committed += 1;
                    assert_ne!(m.message.sys_flag & sysflag::TRANSACTION_MASK, 0);
                }
                want.retain(|k, _| {
                    !BROKER_PROPERTIES.contains(&k.as_str())
                        && !TRANSACTION_PROPERTIES.contains(&k.as_str())
                        && !TIMER_REQUESTS.contains(&k.as_str())
                });
                assert_eq!(props(&o), want, "{name} {}", m.key);
                assert!(props(&o).contains_key(prop::UNIQ_KEY));
                assert_eq!(
                    o.sys_flag & !(sysflag::COMPRESSED | sysflag::COMPRESSION_TYPE_MASK),
                    0
                );
                if m.message.sys_flag & sysflag::COMPRESSED != 0 {
                    assert_eq!(o.sys_flag, m.message.sys_flag & 0x701);
                    compressions.insert(o.sys_flag);
                } else {
                    assert_eq!(o.sys_flag, 0);
                }
            }
            assert_eq!(committed, 15, "{name}");
            assert_eq!(
                compressions.into_iter().collect::<Vec<_>>(),
                vec![0x1, 0x101, 0x201, 0x301]
            );
        }
    }

    /// A parked delayed message keeps what remained of its delay, as the smallest level that
    /// covers it; one due goes at once, and so does every one with `deliver_now`.
    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn delayed_messages_keep_their_remaining_delay() {
        let s = open("basic-4.9");
        let (msgs, _) = all(&s);
        let delayed = of(&msgs, ExportSource::Delayed);
        assert_eq!(delayed.len(), 66);
        let mut to_retry = 0;
        for m in delayed {
            let due = m.item.due.unwrap();
            let level: i32 = stored(m)[prop::DELAY].parse().unwrap();
            let at = |now: i64| TranslateOptions { now, ..options(&s) };
            // as it was stored: the whole delay remains, the same level
            let (o, d) = send(m, &at(m.message.store_timestamp));
            assert_eq!(
                d,
                Delay::Level {
                    level,
                    remaining_ms: due - m.message.store_timestamp
                }
            );
            assert_eq!(props(&o)[prop::DELAY], level.to_string());
            assert!(o.delayed);
            for gone in [prop::REAL_TOPIC, prop::REAL_QID, prop::CLUSTER, prop::WAIT] {
                assert!(!props(&o).contains_key(gone), "{gone}");
            }
            let real = stored(m)[prop::REAL_TOPIC].clone();
            if real.starts_with(RETRY_PREFIX) {
                to_retry += 1;
                assert_eq!(o.topic, stored(m)[prop::RETRY_TOPIC]);
                assert_eq!(o.queue_id, None);
                let keep = TranslateOptions {
                    keep_retry_topics: true,
                    ..at(m.message.store_timestamp)
                };
                let (k, _) = send(m, &keep);
                assert_eq!(k.topic, real);
                assert_eq!(k.queue_id, Some(0));
                assert_eq!(k.reconsume_times, m.message.reconsume_times);
                assert_eq!(
                    k.max_reconsume_times,
                    Some(s.retry_max_times().get("GroupA").copied().unwrap_or(16))
                );
                assert!(k.delayed);
            } else {
                assert_eq!(o.topic, real);
                assert_eq!(o.queue_id, Some(stored(m)[prop::REAL_QID].parse().unwrap()));
            }
            // 1 ms left: the first level; 61 s left: 2m (1m is short of it)
            assert_eq!(
                send(m, &at(due - 1)).1,
                Delay::Level {
                    level: 1,
                    remaining_ms: 1
                }
            );
            assert_eq!(props(&send(m, &at(due - 61_000)).0)[prop::DELAY], "6");
            // due, or released
            for opts in [
                at(due),
                at(due + 5_000),
                TranslateOptions {
                    deliver_now: true,
                    ..at(0)
                },
            ] {
                let (o, d) = send(m, &opts);
                assert_eq!(d, Delay::Released);
                assert!(!o.delayed && !props(&o).contains_key(prop::DELAY));
            }
        }
        assert_eq!(to_retry, 6);
    }

    /// `%RETRY%`/`%DLQ%` copies go to their original topic, or stay with `keep_retry_topics`,
    /// with the reconsume times in the header.
    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn retry_and_dlq_copies() {
        let s = open("basic-4.9");
        let opts = options(&s);
        let keep = TranslateOptions {
            keep_retry_topics: true,
            ..options(&s)
        };
        let (msgs, _) = all(&s);
        let copies: Vec<_> = msgs
            .iter()
            .filter(|m| matches!(m.item.source, ExportSource::Retry | ExportSource::Dlq))
            .collect();
        assert_eq!(copies.len(), 35 + 6 + 5);
        for m in copies {
            let (o, _) = send(m, &opts);
            let p = props(&o);
            assert_eq!(o.topic, stored(m)[prop::RETRY_TOPIC]);
            assert_eq!(o.queue_id, None);
            assert_eq!((o.reconsume_times, o.max_reconsume_times), (0, None));
            assert_eq!(
                p[prop::ORIGIN_MESSAGE_ID],
                stored(m)[prop::ORIGIN_MESSAGE_ID]
            );
            assert_eq!(p[prop::UNIQ_KEY], stored(m)[prop::UNIQ_KEY]);
            assert!(!p.contains_key(prop::DELAY) && !o.delayed);
            assert_eq!(p["RMQSTORE_STORED_TOPIC"], m.message.topic);
            let (k, _) = send(m, &keep);
            assert_eq!(k.topic, m.message.topic);
            assert_eq!(k.queue_id, Some(m.message.queue_id));
            assert_eq!(k.reconsume_times, m.message.reconsume_times);
            assert!(!props(&k).contains_key("RMQSTORE_STORED_TOPIC"));
            if m.message.topic.starts_with(RETRY_PREFIX) {
                assert_eq!(
                    k.max_reconsume_times,
                    Some(s.retry_max_times().get("GroupA").copied().unwrap_or(16))
                );
            } else {
                assert_eq!(k.max_reconsume_times, None);
            }
        }
    }

    /// Undecided half messages are listed; sent on request, as normal messages of their real
    /// topic and queue.
    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn undecided_half_messages_are_listed() {
        for name in ["basic-4.9", "basic-5.x"] {
            let s = open(name);
            let (msgs, _) = all(&s);
            let halves = of(&msgs, ExportSource::Transaction);
            assert_eq!(halves.len(), 5);
            for m in halves {
                assert_eq!(
                    translate(m.key, &m.item, m.message.clone(), &options(&s)),
                    Translation::Undecided
                );
                let opts = TranslateOptions {
                    send_undecided: true,
                    ..options(&s)
                };
                let (o, d) = send(m, &opts);
                assert_eq!(d, Delay::None);
                assert_eq!(o.topic, stored(m)[prop::REAL_TOPIC]);
                assert_eq!(o.queue_id, Some(stored(m)[prop::REAL_QID].parse().unwrap()));
                let p = props(&o);
                for gone in [
                    prop::TRAN_MSG,
                    prop::PGROUP,
                    prop::REAL_TOPIC,
                    prop::REAL_QID,
                ] {
                    assert!(!p.contains_key(gone), "{gone}");
                }
                assert_eq!(p[prop::UNIQ_KEY], stored(m)[prop::UNIQ_KEY]);
                assert_eq!(o.sys_flag & sysflag::TRANSACTION_MASK, 0);
            }
        }
    }

    /// A pending 5.x timer message keeps its release time as `TIMER_DELIVER_MS`; released copies
    /// and messages whose time has passed carry no timer request.
    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn timer_messages_keep_their_release_time() {
        let s = open("timer-5.x");
        let (msgs, _) = all(&s);
        let timers = of(&msgs, ExportSource::Timer);
        assert_eq!(timers.len(), 64);
        for m in &timers {
            let due = m.item.due.unwrap();
            let at = |now: i64| TranslateOptions { now, ..options(&s) };
            let (o, d) = send(m, &at(m.message.store_timestamp));
            assert_eq!(
                d,
                Delay::Timer {
                    deliver_timestamp: due
                }
            );
            assert!(o.delayed);
            let p = props(&o);
            assert_eq!(p[prop::TIMER_DELIVER_MS], due.to_string());
            assert_eq!(o.topic, stored(m)[prop::REAL_TOPIC]);
            for gone in [
                prop::TIMER_OUT_MS,
                prop::TIMER_DELAY_SEC,
                prop::TIMER_DELAY_MS,
                prop::REAL_TOPIC,
                prop::REAL_QID,
                prop::WAIT,
            ] {
                assert!(!p.contains_key(gone), "{gone}");
            }
            // measured at another time than the real one: what remained, from the real time
            let clock = 1_900_000_000_000;
            let (o, d) = send(
                m,
                &TranslateOptions {
                    clock: Some(clock),
                    ..at(due - 5000)
                },
            );
            assert_eq!(
                d,
                Delay::Timer {
                    deliver_timestamp: clock + 5000
                }
            );
            assert_eq!(
                props(&o)[prop::TIMER_DELIVER_MS],
                (clock + 5000).to_string()
            );
            for opts in [
                at(due),
                TranslateOptions {
                    deliver_now: true,
                    ..at(0)
                },
            ] {
                let (o, d) = send(m, &opts);
                assert_eq!(d, Delay::Released);
                assert!(!o.delayed && !props(&o).contains_key(prop::TIMER_DELIVER_MS));
            }
        }
        let opts = options(&s);
        let mut released = 0;
        for m in of(&msgs, ExportSource::Topic) {
            let had = stored(m);
            if had.keys().any(|k| k.starts_with("TIMER_")) {
                released += 1;
            }
            let (o, _) = send(m, &opts);
            assert!(
                !props(&o).keys().any(|k| k.starts_with("TIMER_")),
                "{}",
                m.key
            );
            assert!(!o.delayed);
        }
        // 65 delivered copies and 2 messages whose TIMER_DELIVER_MS had passed
        assert_eq!(released, 67);
    }

    /// `topic_map` renames the target, `marks` are set on every message, and 5.x records send
    /// each property once (batch records stored UNIQ_KEY twice) and no WAIT.
    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn renames_marks_and_repeated_names() {
        let s = open("basic-5.x");
        let (msgs, _) = all(&s);
        let opts = TranslateOptions {
            topic_map: [
                ("TopicA".to_string(), "Recovered-A".to_string()),
                ("RMQ_X".into(), "Y".into()),
            ]
            .into(),
            marks: vec![
                ("RECOVERED_FROM".into(), "broker-a".into()),
                (prop::TAGS.into(), "Restored".into()),
            ],
            ..options(&s)
        };
        let mut twice = 0;
        for m in of(&msgs, ExportSource::Topic) {
            let (o, _) = send(m, &opts);
            let p = props(&o);
            let want = if m.message.topic == "TopicA" {
                "Recovered-A"
            } else {
                m.message.topic.as_str()
            };
            assert_eq!(o.topic, want);
            assert_eq!(p["RECOVERED_FROM"], "broker-a");
            assert_eq!(p[prop::TAGS], "Restored");
            assert!(!p.contains_key(prop::WAIT));
            let raw = crate::format::commitlog::Properties(&m.message.properties);
            if raw.iter_raw().filter(|(k, _)| *k == b"UNIQ_KEY").count() > 1 {
                twice += 1;
                assert_eq!(p[prop::UNIQ_KEY], raw.get(prop::UNIQ_KEY).unwrap());
            }
        }
        assert!(twice > 0, "no record of the store names UNIQ_KEY twice");
    }

    /// What a plan reads of a record (`destination`) is what its translation sends, on every
    /// record of the oracle stores, with and without the options that change it.
    #[test]
    #[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
    fn destination_agrees_with_translate() {
        for name in ["basic-4.9", "timer-5.x", "dledger-4.9"] {
            let s = open(name);
            let (msgs, _) = all(&s);
            let base = options(&s);
            let variants = [
                base.clone(),
                TranslateOptions {
                    deliver_now: true,
                    send_undecided: true,
                    keep_retry_topics: true,
                    topic_map: [("TopicA".to_string(), "Renamed".to_string())].into(),
                    ..base.clone()
                },
            ];
            for opts in &variants {
                for m in &msgs {
                    let d = destination(&m.item, &m.message, opts);
                    match translate(m.key, &m.item, m.message.clone(), opts) {
                        Translation::Undecided => assert_eq!(d, None, "{name} {}", m.key),
                        Translation::Send { message, delay } => assert_eq!(
                            d,
                            Some(Destination {
                                topic: message.topic,
                                queue_id: message.queue_id,
                                delay,
                            }),
                            "{name} {}",
                            m.key
                        ),
                    }
                }
            }
        }
    }

    #[test]
    fn delay_levels_cover_what_remains() {
        let levels = crate::format::geometry::Geometry::default()
            .delay_levels
            .value;
        assert_eq!(delay_level(&levels, 1), Some(1));
        assert_eq!(delay_level(&levels, 1_000), Some(1));
        assert_eq!(delay_level(&levels, 1_001), Some(2));
        assert_eq!(delay_level(&levels, 30_000), Some(4));
        assert_eq!(delay_level(&levels, 7_200_000), Some(18));
        // beyond the longest level: the longest
        assert_eq!(delay_level(&levels, 9_000_000), Some(18));
        assert_eq!(delay_level(&[], 5), None);
        assert_eq!(delay_level(&[2_000, 500], 1_000), Some(1));
    }
}
