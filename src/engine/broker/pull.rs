//! The broker-side pull, `DefaultMessageStore.getMessage` (ENGINE.md 1), and what a consumer
//! sees of it (2.3): statuses, `nextBeginOffset`, min and max offsets, the one-consume-queue-file
//! scan, the 800-unit filter window, the batch limits, tag and SQL92 filters at consume-queue and
//! commitlog level.
//!
//! [`get_message`] runs over any [`PullSource`]: the engine implements it over its source store,
//! replayed units and overlay, and tests can implement it over a few units in memory.
//!
//! The engine answers as a master by default. Where a master corrects the consumer
//! (`OFFSET_TOO_SMALL` to the min offset, `OFFSET_OVERFLOW_BADLY` to the max offset,
//! `NO_MESSAGE_IN_QUEUE` to 0, `OFFSET_FOUND_NULL` to the next file), a slave without
//! `offsetCheckInSlave` keeps the request offset. The oracle answers were taken on a slave: of
//! the 34 `getMessage` cases of each oracle store, the 7 `OFFSET_OVERFLOW_BADLY` ones differ in
//! `nextBeginOffset` only; [`BrokerRole::Slave`] reproduces all 34. Long polling is not
//! simulated: a pull that finds nothing answers at once.

use std::borrow::Cow;

use serde::Serialize;

use crate::engine::filter::sql::SqlFilter;
use crate::engine::filter::TagFilter;
use crate::engine::store::version::BrokerVersion;
use crate::format::commitlog::message_in;
use crate::format::commitlog::MessageRef;
use crate::format::consumequeue::CqUnit;

/// `maxTransferCountOnMessageInMemory` / `maxTransferBytesOnMessageInMemory`.
pub const MAX_COUNT_IN_MEMORY: usize = 32;
pub const MAX_BYTES_IN_MEMORY: usize = 262_144;
/// `maxTransferCountOnMessageInDisk` / `maxTransferBytesOnMessageInDisk`.
pub const MAX_COUNT_ON_DISK: usize = 8;
pub const MAX_BYTES_ON_DISK: usize = 65_536;
/// `maxFilterMessageSize` (5.x) and the 4.9 constant: the scan window in bytes of units.
pub const FILTER_WINDOW_BYTES: i64 = 16_000;
/// `MAX_PULL_MSG_SIZE`: the 5.x byte cap of one pull.
pub const MAX_PULL_MSG_SIZE: usize = 134_217_728;
/// `PullMessageService` / `DefaultMQPushConsumer.pullBatchSize`.
pub const DEFAULT_PULL_BATCH: i32 = 32;

/// The broker's role: a slave without `offsetCheckInSlave` never moves a consumer's offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BrokerRole {
    #[default]
    Master,
    Slave,
}

/// `GetMessageStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GetMessageStatus {
    Found,
    NoMatchedMessage,
    MessageWasRemoving,
    OffsetFoundNull,
    OffsetOverflowBadly,
    OffsetOverflowOne,
    OffsetTooSmall,
    NoMatchedLogicQueue,
    NoMessageInQueue,
}

impl GetMessageStatus {
    /// The Java name (`FOUND`, `OFFSET_OVERFLOW_ONE`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            GetMessageStatus::Found => "FOUND",
            GetMessageStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetMessageStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetMessageStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetMessageStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetMessageStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetMessageStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetMessageStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetMessageStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

impl std::fmt::Display for GetMessageStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The client's `PullStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PullStatus {
    Found,
    NoNewMsg,
    NoMatchedMsg,
    OffsetIllegal,
}

impl PullStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PullStatus::Found => "FOUND",
            PullStatus::NoNewMsg => "NO_NEW_MSG",
            PullStatus::NoMatchedMsg => "NO_MATCHED_MSG",
            PullStatus::OffsetIllegal => "OFFSET_ILLEGAL",
        }
    }

    /// The status mapping of `PullMessageProcessor` and `processPullResponse` (ENGINE.md 2.3):
    /// `PULL_OFFSET_MOVED` becomes `PULL_RETRY_IMMEDIATELY` on a slave.
    pub fn of(status: GetMessageStatus, request_offset: i64, role: BrokerRole) -> Self {
        use GetMessageStatus::*;
        let moved = match status {
            Found => return PullStatus::Found,
            NoMatchedMessage | MessageWasRemoving => return PullStatus::NoMatchedMsg,
            OffsetOverflowOne | OffsetFoundNull => return PullStatus::NoNewMsg,
            NoMessageInQueue | NoMatchedLogicQueue if request_offset == 0 => {
                return PullStatus::NoNewMsg
            }
            _ => PullStatus::OffsetIllegal,
        };
        if role == BrokerRole::Slave {
            PullStatus::NoMatchedMsg
        } else {
            moved
        }
    }
}

/// A subscription's filter.
#[derive(Debug, Clone)]
pub enum MessageFilter {
    Tag(TagFilter),
    Sql(SqlFilter),
}

impl MessageFilter {
    /// `isMatchedByConsumeQueue`: tags by hash code; SQL92 passes (no bloom filter offline).
    pub fn matches_unit(&self, tags_code: Option<i64>) -> bool {
        match self {
            MessageFilter::Tag(t) => t.matches_tags_code(tags_code),
            MessageFilter::Sql(_) => true,
        }
    }

    /// `isMatchedByCommitLog`: tags always pass; SQL92 evaluates on the record's properties.
    pub fn matches_record(&self, m: &MessageRef<'_>) -> bool {
        match self {
            MessageFilter::Tag(_) => true,
            MessageFilter::Sql(f) => {
                let props = m.properties;
                f.matches(&|k| props.get(k).map(Cow::into_owned))
            }
        }
    }

    /// The client's own check (`PullAPIWrapper.processPullResult`): tags by string; SQL92 none.
    pub fn client_keeps(&self, m: &MessageRef<'_>) -> bool {
        match self {
            MessageFilter::Tag(t) => t.matches_tags(m.tags().as_deref()),
            MessageFilter::Sql(_) => true,
        }
    }
}

/// What the pull needs from a store.
pub trait PullSource {
    /// `(minOffset, maxOffset)` of a queue; an unknown queue is empty: `(0, 0)`.
    fn queue_bounds(&self, topic: &str, queue_id: i32) -> (i64, i64);
    /// The units from `offset` to the written end of the consume queue file holding it, at most
    /// `limit`; `None` when no file maps `offset` (`getIndexBuffer` returned null).
    fn units_from(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        limit: usize,
    ) -> Option<Vec<CqUnit>>;
    /// The record bytes `[phy, phy+size)`, or `None` when no commitlog file holds them inside its
    /// written data (`CommitLog.getMessage`).
    fn read(&self, phy: i64, size: i32) -> Option<Cow<'_, [u8]>>;
    /// `getMaxPhyOffset`.
    fn commitlog_max(&self) -> i64;
    /// `mappedFileSizeCommitLog`.
    fn commitlog_file_size(&self) -> u64;
    /// Units per consume queue file (`mappedFileSizeConsumeQueue / 20`).
    fn cq_file_units(&self) -> u64;
}

/// How the broker is set up for pulls.
#[derive(Debug, Clone, Copy)]
pub struct PullOptions {
    pub version: BrokerVersion,
    pub role: BrokerRole,
    /// `offsetCheckInSlave` (false by default).
    pub offset_check_in_slave: bool,
    /// `TOTAL_PHYSICAL_MEMORY_SIZE * accessMessageInMemoryMaxRatio / 100`: records further than
    /// this behind the commitlog's end count as on disk. `u64::MAX` keeps everything in memory.
    pub memory_bytes: u64,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            version: BrokerVersion::V4_9,
            role: BrokerRole::Master,
            offset_check_in_slave: false,
            memory_bytes: u64::MAX,
        }
    }
}

/// One pull request.
#[derive(Debug, Clone)]
pub struct PullRequest<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub offset: i64,
    pub max_msgs: i32,
    pub filter: Option<&'a MessageFilter>,
}

/// One record returned by a pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledMessage {
    pub queue_offset: i64,
    pub commitlog_offset: i64,
    pub size: i32,
    pub tags_code: i64,
    /// The whole record.
    pub raw: Vec<u8>,
}

impl PulledMessage {
    /// The record decoded in place, its position set to its commitlog offset.
    pub fn message(&self) -> Option<MessageRef<'_>> {
        message_in(&self.raw, self.commitlog_offset)
    }
}

/// `GetMessageResult`.
#[derive(Debug, Clone)]
pub struct PullResult {
    pub status: GetMessageStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub messages: Vec<PulledMessage>,
    pub buffer_total_size: usize,
    pub suggest_pulling_from_slave: bool,
}

impl PullResult {
    /// What the client sees (`PullStatus`).
    pub fn pull_status(&self, request_offset: i64, role: BrokerRole) -> PullStatus {
        PullStatus::of(self.status, request_offset, role)
    }
}

fn in_disk(commitlog_max: i64, phy: i64, memory: u64) -> bool {
    let behind = commitlog_max.saturating_sub(phy);
    behind > 0 && behind as u64 > memory
}

/// `isTheBatchFull` (ENGINE.md 1.4).
fn batch_full(
    size: i32,
    max_msgs: i32,
    buffer_total: usize,
    count: usize,
    on_disk: bool,
    version: BrokerVersion,
) -> bool {
    if buffer_total == 0 || count == 0 {
        return false;
    }
    if i64::from(max_msgs) <= count as i64 {
        return true;
    }
    let size = size.max(0) as usize;
    if version == BrokerVersion::V5 && buffer_total.saturating_add(size) > MAX_PULL_MSG_SIZE {
        return true;
    }
    if on_disk {
        buffer_total.saturating_add(size) > MAX_BYTES_ON_DISK || count >= MAX_COUNT_ON_DISK
    } else {
        buffer_total.saturating_add(size) > MAX_BYTES_IN_MEMORY || count >= MAX_COUNT_IN_MEMORY
    }
}

/// `DefaultMessageStore.getMessage`.
pub fn get_message<S: PullSource + ?Sized>(
    src: &S,
    req: &PullRequest<'_>,
    opts: &PullOptions,
) -> PullResult {
    get_message_with(src, req, opts, true)
}

/// [`get_message`]; without `copy_records` each [`PulledMessage::raw`] is left empty, for a
/// caller that reads the records from `src` itself (a server writing them straight from the
/// map into its response).
pub fn get_message_with<S: PullSource + ?Sized>(
    src: &S,
    req: &PullRequest<'_>,
    opts: &PullOptions,
    copy_records: bool,
) -> PullResult {
    let (min, max) = src.queue_bounds(req.topic, req.queue_id);
    let offset = req.offset;
    let corr = |new: i64| {
        if opts.role == BrokerRole::Slave && !opts.offset_check_in_slave {
            offset
        } else {
            new
        }
    };
    let mut result = PullResult {
        status: GetMessageStatus::NoMessageInQueue,
        next_begin_offset: offset,
        min_offset: min,
        max_offset: max,
        messages: Vec::new(),
        buffer_total_size: 0,
        suggest_pulling_from_slave: false,
    };
    let units_per_file = src.cq_file_units().max(1) as i64;
    let roll_next_file = |q: i64| q.saturating_add(units_per_file - q.rem_euclid(units_per_file));
    if max == 0 {
        result.status = GetMessageStatus::NoMessageInQueue;
        result.next_begin_offset = corr(0);
    } else if offset < min {
        result.status = GetMessageStatus::OffsetTooSmall;
        result.next_begin_offset = corr(min);
    } else if offset == max {
        result.status = GetMessageStatus::OffsetOverflowOne;
        result.next_begin_offset = offset;
    } else if offset > max {
        result.status = GetMessageStatus::OffsetOverflowBadly;
        result.next_begin_offset = corr(max);
    } else {
        let window = FILTER_WINDOW_BYTES.max(i64::from(req.max_msgs).saturating_mul(20));
        let limit = (window / 20).max(1) as usize;
        match src.units_from(req.topic, req.queue_id, offset, limit) {
            None => {
                result.status = GetMessageStatus::OffsetFoundNull;
                result.next_begin_offset = corr(roll_next_file(offset));
            }
            Some(units) => scan(src, req, opts, &units, limit, copy_records, &mut result),
        }
    }
    result
}

fn scan<S: PullSource + ?Sized>(
    src: &S,
    req: &PullRequest<'_>,
    opts: &PullOptions,
    units: &[CqUnit],
    limit: usize,
    copy_records: bool,
    result: &mut PullResult,
) {
    let cl_max = src.commitlog_max();
    let cl_file = src.commitlog_file_size().max(1) as i64;
    let mut status = GetMessageStatus::NoMatchedMessage;
    let mut skip_below: Option<i64> = None;
    let mut max_phy = 0i64;
    let mut k = 0usize;
    while k < units.len() && k < limit {
        let u = units[k];
        let phy = u.offset;
        if opts.version == BrokerVersion::V4_9 {
            max_phy = phy;
        }
        if opts.version == BrokerVersion::V4_9 && skip_below.is_some_and(|s| phy < s) {
            k += 1;
            continue;
        }
        let on_disk = in_disk(cl_max, phy, opts.memory_bytes);
        let count = result.messages.len();
        if batch_full(
            u.size,
            req.max_msgs,
            result.buffer_total_size,
            count,
            on_disk,
            opts.version,
        ) {
            break;
        }
        if opts.version == BrokerVersion::V5 {
            if result.buffer_total_size >= MAX_PULL_MSG_SIZE {
                break;
            }
            max_phy = phy;
            if skip_below.is_some_and(|s| phy < s) {
                k += 1;
                continue;
            }
        }
        k += 1;
        let found_any = !result.messages.is_empty();
        let tags_code = (!u.has_ext_addr()).then_some(u.tags_code);
        if let Some(f) = req.filter {
            if !f.matches_unit(tags_code) {
                if !found_any {
                    status = GetMessageStatus::NoMatchedMessage;
                }
                continue;
            }
        }
        let Some(raw) = src.read(phy, u.size) else {
            if !found_any {
                status = GetMessageStatus::MessageWasRemoving;
            }
            skip_below = Some(phy.saturating_add(cl_file - phy.rem_euclid(cl_file)));
            continue;
        };
        if let Some(f) = req.filter {
            let keep = match message_in(&raw, phy) {
                Some(m) => f.matches_record(&m),
                // Java decodes the properties from the bytes read; unreadable ones match nothing.
                _ => matches!(f, MessageFilter::Tag(_)),
            };
            if !keep {
                if !found_any {
                    status = GetMessageStatus::NoMatchedMessage;
                }
                continue;
            }
        }
        result.buffer_total_size += raw.len();
        result.messages.push(PulledMessage {
            queue_offset: req.offset.saturating_add(k as i64 - 1),
            commitlog_offset: phy,
            size: u.size,
            tags_code: u.tags_code,
            raw: if copy_records {
                raw.into_owned()
            } else {
                Vec::new()
            },
        });
        status = GetMessageStatus::Found;
        skip_below = None;
    }
    result.status = status;
    result.next_begin_offset = req.offset.saturating_add(k as i64);
    result.suggest_pulling_from_slave = in_disk(cl_max, max_phy, opts.memory_bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::commitlog::{encode_properties, Host, Message, MessageVersion};
    use crate::format::java::tags_code;

    /// A queue in memory: units point into one commitlog buffer.
    struct Mem {
        units: Vec<CqUnit>,
        min: i64,
        log: Vec<u8>,
        file_units: u64,
    }

    impl Mem {
        fn new(tags: &[Option<&str>]) -> Self {
            let mut log = Vec::new();
            let mut units = Vec::new();
            for (i, t) in tags.iter().enumerate() {
                let props: Vec<(&str, String)> = match t {
                    Some(t) => vec![("TAGS", t.to_string()), ("n", i.to_string())],
                    None => vec![("n", i.to_string())],
                };
                let m = Message {
                    topic: "T".into(),
                    queue_id: 0,
                    flag: 0,
                    queue_offset: i as i64,
                    physical_offset: log.len() as i64,
                    sys_flag: 0,
                    born_timestamp: 1,
                    born_host: Host::v4([1, 1, 1, 1], 1),
                    store_timestamp: 2,
                    store_host: Host::v4([2, 2, 2, 2], 2),
                    reconsume_times: 0,
                    prepared_transaction_offset: 0,
                    body: vec![b'x'; 10],
                    properties: encode_properties(&props, false),
                    version: MessageVersion::V1,
                };
                let b = m.encode().unwrap();
                units.push(CqUnit {
                    offset: log.len() as i64,
                    size: b.len() as i32,
                    tags_code: t.map(tags_code).unwrap_or(0),
                });
                log.extend_from_slice(&b);
            }
            Mem {
                units,
                min: 0,
                log,
                file_units: 1000,
            }
        }
    }

    /// The pull that leaves records in place names the same records, which read back to the
    /// bytes the copying pull returns.
    #[test]
    fn in_place_pull_names_the_records_the_copying_pull_returns() {
        let tags: Vec<Option<&str>> = (0..90)
            .map(|i| [Some("TagA"), Some("TagB"), None][i % 3])
            .collect();
        let src = Mem::new(&tags);
        let tag = MessageFilter::Tag(crate::engine::filter::TagFilter::parse("TagA").unwrap());
        for filter in [None, Some(&tag)] {
            for offset in [0, 5, 31, 89, 90, 95] {
                let req = PullRequest {
                    topic: "T",
                    queue_id: 0,
                    offset,
                    max_msgs: 32,
                    filter,
                };
                let copied = get_message(&src, &req, &PullOptions::default());
                let placed = get_message_with(&src, &req, &PullOptions::default(), false);
                assert_eq!(copied.status, placed.status);
                assert_eq!(copied.next_begin_offset, placed.next_begin_offset);
                assert_eq!(copied.messages.len(), placed.messages.len());
                for (c, p) in copied.messages.iter().zip(&placed.messages) {
                    assert!(p.raw.is_empty());
                    let read = src.read(p.commitlog_offset, p.size).unwrap();
                    assert_eq!(read.as_ref(), c.raw.as_slice());
                }
            }
        }
    }

    impl PullSource for Mem {
        fn queue_bounds(&self, topic: &str, _: i32) -> (i64, i64) {
            if topic == "T" {
                (self.min, self.units.len() as i64)
            } else {
                (0, 0)
            }
        }
        fn units_from(&self, _: &str, _: i32, offset: i64, limit: usize) -> Option<Vec<CqUnit>> {
            let fu = self.file_units as i64;
            let end = (offset - offset % fu + fu).min(self.units.len() as i64);
            Some(
                self.units
                    .get(offset as usize..end as usize)?
                    .iter()
                    .take(limit)
                    .copied()
                    .collect(),
            )
        }
        fn read(&self, phy: i64, size: i32) -> Option<Cow<'_, [u8]>> {
            self.log
                .get(phy as usize..(phy + size as i64) as usize)
                .map(Cow::Borrowed)
        }
        fn commitlog_max(&self) -> i64 {
            self.log.len() as i64
        }
        fn commitlog_file_size(&self) -> u64 {
            1 << 20
        }
        fn cq_file_units(&self) -> u64 {
            self.file_units
        }
    }

    fn pull(src: &Mem, offset: i64, max: i32, filter: Option<&MessageFilter>) -> PullResult {
        get_message(
            src,
            &PullRequest {
                topic: "T",
                queue_id: 0,
                offset,
                max_msgs: max,
                filter,
            },
            &PullOptions::default(),
        )
    }

    #[test]
    fn engine_md_worked_example() {
        // units 3..7 carry B, A, B, A, A; subscription TagA; offset 3, max 2
        let mem = Mem::new(&[
            Some("A"),
            Some("A"),
            Some("A"),
            Some("TagB"),
            Some("TagA"),
            Some("TagB"),
            Some("TagA"),
            Some("TagA"),
        ]);
        let f = MessageFilter::Tag(TagFilter::parse("TagA").unwrap());
        let r = pull(&mem, 3, 2, Some(&f));
        assert_eq!(r.status, GetMessageStatus::Found);
        assert_eq!(
            r.messages
                .iter()
                .map(|m| m.queue_offset)
                .collect::<Vec<_>>(),
            [4, 6]
        );
        assert_eq!(r.next_begin_offset, 7);
        // nothing matches: NO_MATCHED_MESSAGE, and the window moves past the scanned units
        let f = MessageFilter::Tag(TagFilter::parse("TagZ").unwrap());
        let r = pull(&mem, 0, 32, Some(&f));
        assert_eq!(r.status, GetMessageStatus::NoMatchedMessage);
        assert_eq!(r.next_begin_offset, 8);
        assert_eq!(
            r.pull_status(0, BrokerRole::Master),
            PullStatus::NoMatchedMsg
        );
    }

    #[test]
    fn statuses_before_the_scan() {
        let mut mem = Mem::new(&[None; 10]);
        mem.min = 2;
        let r = pull(&mem, 1, 8, None);
        assert_eq!(
            (r.status, r.next_begin_offset),
            (GetMessageStatus::OffsetTooSmall, 2)
        );
        let r = pull(&mem, 10, 8, None);
        assert_eq!(
            (r.status, r.next_begin_offset),
            (GetMessageStatus::OffsetOverflowOne, 10)
        );
        let r = pull(&mem, 12, 8, None);
        assert_eq!(
            (r.status, r.next_begin_offset),
            (GetMessageStatus::OffsetOverflowBadly, 10)
        );
        assert_eq!(
            r.pull_status(12, BrokerRole::Master),
            PullStatus::OffsetIllegal
        );
        assert_eq!(
            r.pull_status(12, BrokerRole::Slave),
            PullStatus::NoMatchedMsg
        );
        let slave = PullOptions {
            role: BrokerRole::Slave,
            ..Default::default()
        };
        let req = PullRequest {
            topic: "T",
            queue_id: 0,
            offset: 12,
            max_msgs: 8,
            filter: None,
        };
        assert_eq!(get_message(&mem, &req, &slave).next_begin_offset, 12);
        let empty = PullRequest {
            topic: "U",
            offset: 3,
            ..req.clone()
        };
        let r = get_message(&mem, &empty, &PullOptions::default());
        assert_eq!(
            (r.status, r.next_begin_offset),
            (GetMessageStatus::NoMessageInQueue, 0)
        );
        assert_eq!((r.min_offset, r.max_offset), (0, 0));
        assert_eq!(
            r.pull_status(3, BrokerRole::Master),
            PullStatus::OffsetIllegal
        );
        assert_eq!(r.pull_status(0, BrokerRole::Master), PullStatus::NoNewMsg);
    }

    #[test]
    fn limits_and_files() {
        let mut mem = Mem::new(&[None; 100]);
        // the first record is always taken, even with max 0
        let r = pull(&mem, 0, 0, None);
        assert_eq!(r.messages.len(), 1);
        // 32 in memory at most
        let r = pull(&mem, 0, 64, None);
        assert_eq!((r.messages.len(), r.next_begin_offset), (32, 32));
        // 8 on disk
        let opts = PullOptions {
            memory_bytes: 0,
            ..Default::default()
        };
        let req = PullRequest {
            topic: "T",
            queue_id: 0,
            offset: 0,
            max_msgs: 64,
            filter: None,
        };
        let r = get_message(&mem, &req, &opts);
        assert_eq!(r.messages.len(), 8);
        assert!(r.suggest_pulling_from_slave);
        // one consume queue file per pull: 5 units before a file end give at most 5
        mem.file_units = 20;
        let r = pull(&mem, 15, 32, None);
        assert_eq!((r.messages.len(), r.next_begin_offset), (5, 20));
        // a record that cannot be read: MESSAGE_WAS_REMOVING
        mem.log.truncate(10);
        let r = pull(&mem, 40, 8, None);
        assert_eq!(r.status, GetMessageStatus::MessageWasRemoving);
        assert_eq!(
            r.pull_status(40, BrokerRole::Master),
            PullStatus::NoMatchedMsg
        );
    }

    #[test]
    fn sql_filter_at_commitlog_level() {
        let mem = Mem::new(&[Some("a"), Some("b"), Some("c"), None]);
        let f = MessageFilter::Sql(SqlFilter::parse("n >= 2 OR TAGS = 'a'").unwrap());
        let r = pull(&mem, 0, 32, Some(&f));
        assert_eq!(
            r.messages
                .iter()
                .map(|m| m.queue_offset)
                .collect::<Vec<_>>(),
            [0, 2, 3]
        );
        let m = r.messages[1].message().unwrap();
        assert_eq!(m.tags().as_deref(), Some("c"));
        assert!(f.client_keeps(&m));
    }
}
