//! The commitlog: every message of the broker, appended in order to equal-size files named by
//! their start offset (`CommitLog`, `MessageExtEncoder`, `MessageDecoder`; FORMAT.md section 2).
//!
//! [`MessageRef`] is a zero-copy view of one record inside a mapped file; [`Message`] is the
//! owned form that [`write`] encodes. [`read`] walks the records of one file.

pub mod read;
pub mod walk;
pub mod write;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

pub use read::{message_in, parse_record, Commitlog, Record, Segment, SegmentKind};
pub use walk::{walk_map, RecordIter, SegmentEnd, WalkEnd};
pub use write::{encode_properties, record_len};

/// `MessageDecoder.MESSAGE_MAGIC_CODE`: a version 1 record (1-byte topic length).
pub const MAGIC_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// `MessageDecoder.MESSAGE_MAGIC_CODE_V2` (5.1.0+): a version 2 record (2-byte topic length).
pub const MAGIC_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// `CommitLog.BLANK_MAGIC_CODE`: the end-of-file blank record.
pub const BLANK_MAGIC: i32 = 0xCBD4_3194_u32 as i32;
/// `CommitLog.END_FILE_MIN_BLANK_LENGTH`: room every file keeps for the blank record.
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;
/// Largest properties block (`Short.MAX_VALUE`).
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;

/// `MessageSysFlag` bits (FORMAT.md 3.1).
pub mod sysflag {
    /// `COMPRESSED_FLAG`: the body is compressed.
    pub const COMPRESSED: i32 = 0x1;
    /// `MULTI_TAGS_FLAG`.
    pub const MULTI_TAGS: i32 = 0x2;
    /// Mask of the two transaction-type bits (`getTransactionValue`).
    pub const TRANSACTION_MASK: i32 = 0xC;
    /// `TRANSACTION_NOT_TYPE`.
    pub const TRANSACTION_NOT: i32 = 0x0;
    /// `TRANSACTION_PREPARED_TYPE`.
    pub const TRANSACTION_PREPARED: i32 = 0x4;
    /// `TRANSACTION_COMMIT_TYPE`.
    pub const TRANSACTION_COMMIT: i32 = 0x8;
    /// `TRANSACTION_ROLLBACK_TYPE`.
    pub const TRANSACTION_ROLLBACK: i32 = 0xC;
    /// `BORNHOST_V6_FLAG`: BORNHOST is 16 address bytes + port.
    pub const BORNHOST_V6: i32 = 0x10;
    /// `STOREHOSTADDRESS_V6_FLAG`: STOREHOSTADDRESS is 16 address bytes + port.
    pub const STOREHOST_V6: i32 = 0x20;
    /// `NEED_UNWRAP_FLAG` (5.x inner batch).
    pub const NEED_UNWRAP: i32 = 0x40;
    /// `INNER_BATCH_FLAG` (5.x inner batch).
    pub const INNER_BATCH: i32 = 0x80;
    /// `COMPRESSION_TYPE_COMPARATOR`: `(flag & 0x700) >> 8` is 1 LZ4, 2 ZSTD, 3 or 0 ZLIB.
    pub const COMPRESSION_TYPE_MASK: i32 = 0x700;
}

/// Property names (`MessageConst`) the store's own logic reads.
pub mod prop {
    pub const KEYS: &str = "KEYS";
    pub const TAGS: &str = "TAGS";
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const DELAY: &str = "DELAY";
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    pub const REAL_QID: &str = "REAL_QID";
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    pub const TRAN_MSG: &str = "TRAN_MSG";
    pub const PGROUP: &str = "PGROUP";
    pub const WAIT: &str = "WAIT";
    pub const CLUSTER: &str = "CLUSTER";
    pub const INNER_NUM: &str = "INNER_NUM";
    pub const INNER_BASE: &str = "INNER_BASE";
    pub const CRC32: &str = "__CRC32#";
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    pub const TRAN_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    /// 5.x timer: absolute delivery time (ms), set by the producer.
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    /// 5.x timer: delay in seconds, set by the producer.
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    /// 5.x timer: delay in ms, set by the producer.
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    /// 5.x timer: the normalized delivery time the broker parked the message for.
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
    pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
    pub const TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
    pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
}

/// `NAME_VALUE_SEPARATOR` (char 1) between a property name and its value.
pub const NAME_VALUE_SEPARATOR: u8 = 1;
/// `PROPERTY_SEPARATOR` (char 2) after a property value.
pub const PROPERTY_SEPARATOR: u8 = 2;

/// Record format version, chosen by the magic code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MessageVersion {
    /// Magic 0xDAA320A7, i8 topic length.
    V1,
    /// Magic 0xDAA320AB, i16 topic length (5.1.0+, topics over 127 bytes).
    V2,
}

impl MessageVersion {
    pub fn magic(self) -> i32 {
        match self {
            MessageVersion::V1 => MAGIC_V1,
            MessageVersion::V2 => MAGIC_V2,
        }
    }
    pub fn from_magic(magic: i32) -> Option<Self> {
        match magic {
            MAGIC_V1 => Some(MessageVersion::V1),
            MAGIC_V2 => Some(MessageVersion::V2),
            _ => None,
        }
    }
    /// Width of the topic length field.
    pub fn topic_len_size(self) -> usize {
        match self {
            MessageVersion::V1 => 1,
            MessageVersion::V2 => 2,
        }
    }
    /// The version the broker picks for a topic (`autoMessageVersionOnTopicLen`).
    pub fn for_topic(topic: &str) -> Self {
        if topic.len() > i8::MAX as usize {
            MessageVersion::V2
        } else {
            MessageVersion::V1
        }
    }
    pub fn number(self) -> u8 {
        match self {
            MessageVersion::V1 => 1,
            MessageVersion::V2 => 2,
        }
    }
}

/// A born or store host: 4 or 16 address bytes and the port as a Java int.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Host {
    pub ip: IpAddr,
    pub port: i32,
}

impl Host {
    pub fn new(ip: IpAddr, port: i32) -> Self {
        Host { ip, port }
    }
    pub fn v4(a: [u8; 4], port: i32) -> Self {
        Host::new(IpAddr::V4(Ipv4Addr::from(a)), port)
    }
    pub fn is_v6(&self) -> bool {
        self.ip.is_ipv6()
    }
    /// Bytes on disk: 8 (IPv4) or 20 (IPv6).
    pub fn encoded_len(&self) -> usize {
        if self.is_v6() {
            20
        } else {
            8
        }
    }
    /// The address bytes in network order (4 or 16).
    pub fn addr_bytes(&self) -> Vec<u8> {
        match self.ip {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        }
    }
    pub fn from_v6_bytes(a: [u8; 16], port: i32) -> Self {
        Host::new(IpAddr::V6(Ipv6Addr::from(a)), port)
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            IpAddr::V4(a) => write!(f, "{a}:{}", self.port),
            IpAddr::V6(a) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

impl Serialize for Host {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Transaction type of a record (`sysFlag & 0xC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TransactionType {
    Not,
    Prepared,
    Commit,
    Rollback,
}

impl TransactionType {
    pub fn of(sys_flag: i32) -> Self {
        match sys_flag & sysflag::TRANSACTION_MASK {
            sysflag::TRANSACTION_PREPARED => TransactionType::Prepared,
            sysflag::TRANSACTION_COMMIT => TransactionType::Commit,
            sysflag::TRANSACTION_ROLLBACK => TransactionType::Rollback,
            _ => TransactionType::Not,
        }
    }
    /// NOT and COMMIT records get a consume-queue unit and a queue offset.
    pub fn is_queued(self) -> bool {
        matches!(self, TransactionType::Not | TransactionType::Commit)
    }
}

/// Record bytes as text the way Java decodes them: UTF-8, bytes that are not UTF-8 shown as
/// U+FFFD. Valid text (nearly always) is borrowed after one fast check.
#[inline(always)]
pub fn text(b: &[u8]) -> Cow<'_, str> {
    match simdutf8::basic::from_utf8(b) {
        Ok(t) => Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(b),
    }
}

/// The properties block of a record: `name 0x01 value 0x02 ...`, kept as raw bytes in file order.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Properties<'a>(pub &'a [u8]);

impl<'a> Properties<'a> {
    /// The pairs in file order as raw bytes, parsed as `MessageDecoder.string2messageProperties`
    /// does: a segment counts only when its first 0x01 leaves a non-empty name and value.
    pub fn iter_raw(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let block = self.0;
        // the segments between 0x02 bytes, as `split` gives them (a trailing empty one too),
        // found with memchr
        let mut start = Some(0);
        std::iter::from_fn(move || loop {
            let from = start?;
            let rest = block.get(from..).unwrap_or_default();
            let seg = match memchr::memchr(PROPERTY_SEPARATOR, rest) {
                Some(i) => {
                    start = Some(from + i + 1);
                    &rest[..i]
                }
                None => {
                    start = None;
                    rest
                }
            };
            if let Some(i) = memchr::memchr(NAME_VALUE_SEPARATOR, seg) {
                if i > 0 && i + 1 < seg.len() {
                    return Some((&seg[..i], &seg[i + 1..]));
                }
            }
        })
    }

    /// The pairs in file order, decoded as UTF-8 the way Java does (U+FFFD for bad bytes).
    pub fn iter(&self) -> impl Iterator<Item = (Cow<'a, str>, Cow<'a, str>)> + 'a {
        self.iter_raw().map(|(k, v)| (text(k), text(v)))
    }

    /// The value of `name`; a repeated name keeps the last value, as Java's map does.
    pub fn get(&self, name: &str) -> Option<Cow<'a, str>> {
        self.iter_raw()
            .filter(|(k, _)| *k == name.as_bytes())
            .last()
            .map(|(_, v)| text(v))
    }

    /// Name/value pairs as a map, last value winning.
    pub fn to_map(&self) -> std::collections::BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when the block ends with the 0x02 separator (4.9.0 and 5.2.0+ write one).
    pub fn has_trailing_separator(&self) -> bool {
        self.0.last() == Some(&PROPERTY_SEPARATOR)
    }
}

impl fmt::Debug for Properties<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// One message record viewed in place: fixed fields decoded, variable parts borrowed.
#[derive(Debug, Clone)]
pub struct MessageRef<'a> {
    /// The whole record, TOTALSIZE bytes.
    pub raw: &'a [u8],
    /// Where the record was found: file start offset + position in the file.
    pub position: u64,
    pub version: MessageVersion,
    pub total_size: i32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    /// The PHYSICALOFFSET field as stored (normally equal to `position`).
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: Host,
    pub store_timestamp: i64,
    pub store_host: Host,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: Cow<'a, str>,
    pub properties: Properties<'a>,
    /// Offset of the BODY length field inside the record (after the hosts).
    pub body_len_pos: usize,
}

impl<'a> MessageRef<'a> {
    pub fn transaction_type(&self) -> TransactionType {
        TransactionType::of(self.sys_flag)
    }
    pub fn property(&self, name: &str) -> Option<Cow<'a, str>> {
        self.properties.get(name)
    }
    pub fn tags(&self) -> Option<Cow<'a, str>> {
        self.property(prop::TAGS)
    }
    /// KEYS split on the space separator, empty elements dropped.
    pub fn keys(&self) -> Vec<String> {
        split_keys(self.property(prop::KEYS).as_deref())
    }
    pub fn uniq_key(&self) -> Option<Cow<'a, str>> {
        self.property(prop::UNIQ_KEY)
    }
    /// BODYCRC recomputed from the stored body.
    pub fn computed_body_crc(&self) -> u32 {
        crate::format::java::masked_crc32(self.body)
    }
    pub fn body_crc_ok(&self) -> bool {
        self.computed_body_crc() as i64 == self.body_crc as i64
    }
    /// The broker's offset message id (store host + PHYSICALOFFSET).
    pub fn offset_msg_id(&self) -> String {
        crate::format::msgid::offset_msg_id(&self.store_host, self.physical_offset)
    }
    pub fn is_compressed(&self) -> bool {
        self.sys_flag & sysflag::COMPRESSED != 0
    }
    /// The body, decompressed by the sysflag compression type when COMPRESSED is set.
    pub fn decompressed_body(
        &self,
    ) -> Result<Cow<'a, [u8]>, crate::format::compression::DecompressError> {
        if self.is_compressed() {
            crate::format::compression::decompress(self.sys_flag, self.body).map(Cow::Owned)
        } else {
            Ok(Cow::Borrowed(self.body))
        }
    }
    /// An owned copy, with the properties bytes kept verbatim.
    pub fn to_owned_message(&self) -> Message {
        Message {
            topic: self.topic.to_string(),
            queue_id: self.queue_id,
            flag: self.flag,
            queue_offset: self.queue_offset,
            physical_offset: self.physical_offset,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            born_host: self.born_host,
            store_timestamp: self.store_timestamp,
            store_host: self.store_host,
            reconsume_times: self.reconsume_times,
            prepared_transaction_offset: self.prepared_transaction_offset,
            body: self.body.to_vec(),
            properties: self.properties.0.to_vec(),
            version: self.version,
        }
    }
}

/// KEYS value split on `MessageConst.KEY_SEPARATOR` (a space), empty elements dropped.
pub fn split_keys(keys: Option<&str>) -> Vec<String> {
    keys.map(|k| {
        k.split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// An owned message, as the writer and the engine build them. `properties` is the raw
/// properties block (see [`encode_properties`]); BODYCRC and TOTALSIZE are computed on encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub topic: String,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: Host,
    pub store_timestamp: i64,
    pub store_host: Host,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: Vec<u8>,
    pub properties: Vec<u8>,
    pub version: MessageVersion,
}

impl Message {
    pub fn properties(&self) -> Properties<'_> {
        Properties(&self.properties)
    }
    pub fn property(&self, name: &str) -> Option<Cow<'_, str>> {
        self.properties().get(name)
    }
    pub fn transaction_type(&self) -> TransactionType {
        TransactionType::of(self.sys_flag)
    }
}
