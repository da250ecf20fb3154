//! Writing to the overlay: records put as the broker's `putMessage` does, and the topic, group
//! and delay offset entries the broker creates on the way.

use super::{Engine, EngineError, EngineResult, PutResult, QueueView};
use crate::engine::store::version::BrokerVersion;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::{Message, MessageVersion, END_FILE_MIN_BLANK_LENGTH};
use crate::format::config::{DataVersion, SubscriptionGroupConfig, TopicConfig};

impl Engine {
    /// The group's config; an unknown group is created with the defaults
    /// (`autoCreateSubscriptionGroup`).
    pub fn group_config(&mut self, group: &str) -> SubscriptionGroupConfig {
        if let Some(c) = self.groups.get(group) {
            return c.clone();
        }
        let c = SubscriptionGroupConfig::new(group);
        self.groups.insert(c.clone());
        let now = self.now();
        self.groups
            .data_version
            .get_or_insert_with(|| DataVersion::new(0, now))
            .next_version(now);
        self.dirty.groups = true;
        c
    }

    /// Create `topic` in `topics.json` if missing (`createTopicInSendMessageBackMethod`).
    pub fn ensure_topic(&mut self, topic: &str, queues: i32, perm: i32) {
        if self.topics.get(topic).is_some() {
            return;
        }
        let mut tc = TopicConfig::new(topic);
        tc.read_queue_nums = queues;
        tc.write_queue_nums = queues;
        tc.perm = perm;
        self.topics.insert(tc);
        let now = self.now();
        self.topics
            .data_version
            .get_or_insert_with(|| DataVersion::new(0, now))
            .next_version(now);
        self.dirty.topics = true;
    }

    /// Set the next offset to deliver of a delay level (persisted to `delayOffset.json`).
    pub fn set_delay_offset(&mut self, level: i32, offset: i64) {
        self.delay_progress.insert(level, offset);
        self.dirty.delay = true;
    }

    /// Put a message as a producer's send would: a NOT or COMMIT message with `DELAY > 0` is
    /// parked in `SCHEDULE_TOPIC_XXXX`; the store time is the clock's now.
    pub fn put_message(&mut self, msg: Message) -> EngineResult<PutResult> {
        let level = msg
            .property(crate::format::commitlog::prop::DELAY)
            .and_then(|d| crate::format::java::parse_int(&d))
            .unwrap_or(0);
        self.put_with_delay(msg, level)
    }

    /// Put with an explicit delay level, whatever the DELAY property says (the schedule
    /// service's deliveries keep DELAY in their bytes but are not delayed again).
    pub(crate) fn put_with_delay(
        &mut self,
        mut msg: Message,
        delay_level: i32,
    ) -> EngineResult<PutResult> {
        msg.store_timestamp = self.now();
        if self.options.version == BrokerVersion::V5 && msg.transaction_type().is_queued() {
            let (trailing, now) = (self.options.trailing_separator(), msg.store_timestamp);
            crate::engine::broker::timer::park_if_timer(&mut msg, delay_level, now, trailing)
                .map_err(EngineError::TimerRefused)?;
        }
        if delay_level > 0 && msg.transaction_type().is_queued() {
            let level = delay_level.min(self.source.geometry.max_delay_level());
            crate::engine::broker::schedule::park(
                &mut msg,
                level,
                self.options.trailing_separator(),
            );
        }
        if msg.version == MessageVersion::V1 && msg.topic.len() > i8::MAX as usize {
            msg.version = MessageVersion::V2;
        }
        let key = (msg.topic.clone(), msg.queue_id);
        let queued = msg.transaction_type().is_queued();
        let queue_offset = if queued {
            self.queues.get(&key).map(QueueView::max).unwrap_or(0) as i64
        } else {
            0
        };
        msg.queue_offset = queue_offset;
        let len = msg.encoded_len();
        let file_size = self.source.geometry.commitlog_file_size.value;
        if (len + END_FILE_MIN_BLANK_LENGTH) as u64 > file_size {
            return Err(EngineError::TooLarge { len, file_size });
        }
        let mut phy = self.overlay.next;
        let pos = phy % file_size;
        if (len + END_FILE_MIN_BLANK_LENGTH) as u64 > file_size - pos {
            phy = (phy - pos).saturating_add(file_size);
        }
        msg.physical_offset = phy as i64;
        let raw = msg.encode()?;
        if let Some(w) = self.overlay.writer.as_mut() {
            if queued {
                w.set_next_queue_offset(&msg.topic, msg.queue_id, queue_offset);
            }
            let a = w.append(msg.clone())?;
            if a.wrote_offset != phy || (queued && a.queue_offset != queue_offset) {
                return Err(EngineError::WriterOutOfStep {
                    expected: phy,
                    written: a.wrote_offset,
                    expected_queue: queue_offset,
                    written_queue: a.queue_offset,
                });
            }
        }
        self.overlay.next = phy.saturating_add(raw.len() as u64);
        if let Ok(Record::Message(m)) = parse_record(&raw, 0, phy, false) {
            let g = self.source.geometry.clone();
            self.dispatch_in_memory(&m, &g);
        }
        let result = PutResult {
            commitlog_offset: phy,
            size: raw.len(),
            topic: msg.topic.clone(),
            queue_id: msg.queue_id,
            queue_offset,
            msg_id: crate::format::msgid::offset_msg_id(&msg.store_host, phy as i64),
            store_timestamp: msg.store_timestamp,
        };
        self.overlay.records.insert(phy, raw);
        Ok(result)
    }
}
