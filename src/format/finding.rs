//! `Finding`: one thing wrong (or worth knowing) about a store, as data. `verify` produces them,
//! `repair` plans from them, the TUI lists them, `--json` prints them.
//!
//! A finding's [`Code`] prints as a stable string, `<part>.<what>`; every code is in one table
//! with its default severity and a sentence, and nowhere else. Its [`Location`] says where it is
//! in the store's own terms (a commitlog offset, a queue unit, an index slot or entry), so a
//! reader goes there without matching file names.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// How bad a finding is. Ordered: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One finding: what, where (file and byte offset), and what the broker would do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub code: Code,
    #[serde(serialize_with = "path_str")]
    pub file: PathBuf,
    /// Byte offset inside `file` (`file_offset` in JSON, as every byte position in a named file).
    #[serde(rename = "file_offset")]
    pub offset: u64,
    /// Where `file` and `offset` are in the store (`File` when they are only a file and a byte).
    pub location: Location,
    /// A sentence for humans.
    pub message: String,
    /// What the broker would do about it on its next start, when that is known (null if not).
    pub broker_action: Option<String>,
    /// The commitlog offset of the record this finding is about, when it is about one (so
    /// findings that one damaged record causes elsewhere can be told apart).
    #[serde(skip)]
    pub record: Option<u64>,
}

fn path_str<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&p.display())
}

impl Finding {
    /// A finding with the default severity of `code`.
    pub fn new(code: Code, file: &Path, offset: u64, message: impl Into<String>) -> Self {
        Finding {
            severity: code.severity(),
            code,
            file: file.to_path_buf(),
            offset,
            location: Location::File,
            message: message.into(),
            broker_action: None,
            record: None,
        }
    }

    /// Note the commitlog offset of the record the finding is about.
    pub fn about_record(mut self, offset: u64) -> Self {
        self.record = Some(offset);
        self
    }

    /// [`Finding::about_record`] for an offset as a file stores it (a Java long): a negative one
    /// names no record.
    pub fn about_stored_record(self, offset: i64) -> Self {
        match u64::try_from(offset) {
            Ok(o) => self.about_record(o),
            Err(_) => self,
        }
    }

    pub fn with_severity(mut self, s: Severity) -> Self {
        self.severity = s;
        self
    }

    pub fn with_action(mut self, action: impl Into<String>) -> Self {
        self.broker_action = Some(action.into());
        self
    }
}

/// Where a finding is, in the store's own terms. Serialised with a `kind` tag and the JSON
/// names of offsets: `{"kind": "commitlog", "commitlog_offset": 139}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Location {
    /// A byte of the commitlog, by commitlog offset.
    Commitlog {
        #[serde(rename = "commitlog_offset")]
        offset: u64,
    },
    /// A unit of a consume queue, by its queue offset (the unit's number in the queue).
    QueueUnit {
        topic: String,
        queue_id: i32,
        #[serde(rename = "queue_offset")]
        unit: u64,
    },
    /// A hash slot of an index file (the file is the finding's).
    IndexSlot { slot: u64 },
    /// An entry of an index file, by the broker's index count (the first entry written is 1).
    IndexEntry { entry: u64 },
    /// A byte of a file and nothing more specific (headers, config files, checkpoint, timer).
    File,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Commitlog { offset } => write!(f, "commitlog offset {offset}"),
            Location::QueueUnit {
                topic,
                queue_id,
                unit,
            } => write!(f, "queue {topic}/{queue_id} unit {unit}"),
            Location::IndexSlot { slot } => write!(f, "index slot {slot}"),
            Location::IndexEntry { entry } => write!(f, "index entry {entry}"),
            Location::File => f.write_str("the file"),
        }
    }
}

/// Every finding code, in one table: variant, the stable string, default severity, meaning.
macro_rules! codes {
    ($($variant:ident = $code:literal, $severity:ident, $meaning:literal;)*) => {
        /// What a finding is about. Printed and serialised as its stable string
        /// (`commitlog.crc_mismatch`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $(#[doc = $meaning] $variant,)*
        }

        impl Code {
            /// Every code, in the table's order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable string, `<part>.<what>`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $code,)*
                }
            }

            /// How bad a finding of this code is unless the check says otherwise.
            pub fn severity(self) -> Severity {
                match self {
                    $(Code::$variant => Severity::$severity,)*
                }
            }

            /// What the code means, in a sentence.
            pub fn meaning(self) -> &'static str {
                match self {
                    $(Code::$variant => $meaning,)*
                }
            }
        }
    };
}

codes! {
    // store
    StoreUnreadable = "store.unreadable", Error, "a file or folder of the store cannot be read";
    StoreAbortPresent = "store.abort_present", Warning, "the abort file exists: the last shutdown was unclean";
    StoreLive = "store.live", Warning, "a broker seems to hold the store; the tail may move while it is read";
    StoreNotAFile = "store.not_a_file", Error, "checkpoint, abort or lock is not a regular file";
    // commitlog
    CommitlogForeignFile = "commitlog.foreign_file", Error, "a file in commitlog/ whose name is not a 20-digit offset";
    CommitlogFileSize = "commitlog.file_size", Error, "a commitlog file whose size differs from the configured one";
    CommitlogGap = "commitlog.gap", Error, "no commitlog file covers a range between two files";
    CommitlogOverlap = "commitlog.overlap", Error, "two commitlog files overlap";
    CommitlogMisnamed = "commitlog.misnamed", Error, "a commitlog file name that is not a multiple of the file size";
    CommitlogBadRecord = "commitlog.bad_record", Error, "a record that does not parse (magic, sizes, lengths)";
    CommitlogCrcMismatch = "commitlog.crc_mismatch", Error, "a body whose CRC differs from BODYCRC";
    CommitlogPropCrcMismatch = "commitlog.prop_crc_mismatch", Error, "the __CRC32# property does not match the record";
    CommitlogBadHeader = "commitlog.bad_header", Error, "a record whose TOPIC, QUEUEID, QUEUEOFFSET or PHYSICALOFFSET contradicts the store (the broker does not check them)";
    CommitlogNotAFile = "commitlog.not_a_file", Error, "an entry of commitlog/ that is not a regular file (a folder, FIFO, device, symlink loop)";
    CommitlogNoBlank = "commitlog.no_blank", Error, "a file that is not the last one ends without a blank record";
    CommitlogBlankSize = "commitlog.blank_size", Warning, "a blank record whose size is not the bytes left in the file";
    CommitlogDirtyTail = "commitlog.dirty_tail", Warning, "non-zero bytes after the end of data";
    CommitlogQueueOffsetGap = "commitlog.queue_offset_gap", Error, "queue offsets of a queue are not contiguous in the commitlog";
    CommitlogQueueOffsetRepeat = "commitlog.queue_offset_repeat", Error, "a queue offset appears twice in the commitlog";
    CommitlogDuplicateUniqKey = "commitlog.duplicate_uniq_key", Info, "the same UNIQ_KEY is stored at several offsets";
    CommitlogBadDelay = "commitlog.bad_delay", Error, "a SCHEDULE_TOPIC_XXXX record whose DELAY is not a number";
    CommitlogRepairTombstone = "commitlog.repair_tombstone", Info, "a tombstone a repair wrote in place of a destroyed message (same offsets; its body says where the original bytes are kept)";
    CommitlogRepairFiller = "commitlog.repair_filler", Info, "a filler record a repair wrote over damaged bytes (ROLLBACK: no unit, no index key, no consumer sees it)";
    CommitlogHole = "commitlog.hole", Error, "zeros where a record should start, with records after them";
    CommitlogStaleRecords = "commitlog.stale_records", Warning, "records left behind an earlier truncation after the end of the data";
    CommitlogOddField = "commitlog.odd_field", Warning, "a record field the broker would not write (sysflag bits, topic name, version, time)";
    // consumequeue
    ConsumequeueFileSize = "consumequeue.file_size", Error, "a consume queue file whose size differs from the configured one";
    ConsumequeueForeignFile = "consumequeue.foreign_file", Error, "a file in a queue folder whose name is not a 20-digit offset (the queue does not load)";
    ConsumequeueNotAFile = "consumequeue.not_a_file", Error, "an entry of a queue folder that is not a regular file";
    ConsumequeueForeignEntry = "consumequeue.foreign_entry", Warning, "an entry under consumequeue/ that is not a queue folder (the broker skips it)";
    ConsumequeueBadTopicDir = "consumequeue.bad_topic_dir", Warning, "a topic folder whose name breaks the broker's topic rule";
    ConsumequeueGap = "consumequeue.gap", Error, "a consume queue file is missing between two others";
    ConsumequeueMissingFile = "consumequeue.missing_file", Error, "a consume queue file that would hold the units of records the commitlog has is missing (before the queue's first file, or the queue folder is empty)";
    ConsumequeueTorn = "consumequeue.torn", Error, "non-zero bytes after the first invalid unit, or a partial unit";
    ConsumequeueUnitMismatch = "consumequeue.unit_mismatch", Error, "a unit that does not point at the record it should";
    ConsumequeuePastEnd = "consumequeue.past_end", Error, "a unit pointing past the commitlog's end of data";
    ConsumequeueMissingUnit = "consumequeue.missing_unit", Error, "a queued record with no consume queue unit";
    ConsumequeueStaleUnit = "consumequeue.stale_unit", Info, "a unit pointing below the commitlog's first offset";
    ConsumequeueLag = "consumequeue.lag", Warning, "queued records past the consume queue's end that the broker dispatches on its next start";
    // index
    IndexBadFile = "index.bad_file", Error, "an index file that does not open (size, header)";
    IndexNotAFile = "index.not_a_file", Error, "an entry of index/ that is not a regular file (IndexService.load fails)";
    IndexHeaderMismatch = "index.header_mismatch", Warning, "an index header that disagrees with its entries";
    IndexBadChain = "index.bad_chain", Error, "a slot or previous-entry pointer out of range";
    IndexDanglingEntry = "index.dangling_entry", Error, "an entry whose record does not exist or does not hash to it";
    IndexMissingKey = "index.missing_key", Warning, "a record key that no index entry covers";
    IndexGeometry = "index.geometry", Warning, "the index slot and entry counts could not be determined";
    IndexLag = "index.lag", Warning, "record keys after the index's last entry, indexed on the broker's next start";
    IndexTimeMismatch = "index.time_mismatch", Warning, "an index entry whose time diff disagrees with its record's store time";
    IndexStaleEntry = "index.stale_entry", Info, "index entries pointing below the commitlog's first offset (expired data)";
    IndexDroppedOnRestart = "index.dropped_on_restart", Warning, "an index file an unclean start deletes (endTimestamp after indexMsgTimestamp)";
    // checkpoint
    CheckpointMissing = "checkpoint.missing", Warning, "no checkpoint file";
    CheckpointBadFile = "checkpoint.bad_file", Error, "the checkpoint file is too short";
    CheckpointAhead = "checkpoint.ahead", Warning, "checkpoint times are later than the data";
    CheckpointConfirmOffset = "checkpoint.confirm_offset", Warning, "the 5.x confirmPhyOffset is not on a record boundary";
    // config
    ConfigNotAFile = "config.not_a_file", Error, "a config file that is not a regular file (a FIFO, a folder): the broker cannot read it";
    ConfigTooLarge = "config.too_large", Error, "a config file too large to be read (the broker fails to load it and uses the .bak)";
    ConfigUnparsable = "config.unparsable", Error, "a config file and its .bak do not parse";
    ConfigFromBackup = "config.from_backup", Warning, "a config file does not parse or is missing; its .bak does";
    ConfigBadOffsetKey = "config.bad_offset_key", Warning, "a consumerOffset.json key that is not topic@group (no consumer reads it)";
    ConfigOffsetAboveMax = "config.offset_above_max", Error, "a consumer offset above its queue's max offset";
    ConfigOffsetBelowMin = "config.offset_below_min", Info, "a consumer offset below its queue's min offset (expired data)";
    ConfigDelayOffset = "config.delay_offset", Warning, "a delay offset outside its schedule queue";
    ConfigUnknownTopic = "config.unknown_topic", Info, "a consume queue whose topic is not in topics.json";
    ConfigBadBackup = "config.bad_backup", Warning, "a config .bak file that does not parse while the main file does";
    ConfigDuplicateKey = "config.duplicate_key", Warning, "a consumerOffset.json key (topic@group, or a queue id in one) written twice: fastjson keeps the last";
    ConfigNegativeOffset = "config.negative_offset", Warning, "a negative committed consumer offset";
    // dledger
    DledgerEntryMagic = "dledger.entry_magic", Error, "a DLedger entry whose magic is neither 1 (entry) nor -1 (file end): recovery cuts the data there";
    DledgerEntrySize = "dledger.entry_size", Error, "a DLedger entry whose size is below the header, past the file's end, or not the body size + 48: recovery cuts the data there";
    DledgerPosMismatch = "dledger.pos_mismatch", Error, "a DLedger entry whose pos is not its own position in the data files: recovery cuts the data there";
    DledgerIndexGap = "dledger.index_gap", Error, "a DLedger entry whose index is not the previous entry's + 1: recovery cuts the data there";
    DledgerTermDecrease = "dledger.term_decrease", Error, "a DLedger entry whose term is lower than the previous entry's: recovery cuts the data there";
    DledgerIndexMismatch = "dledger.index_mismatch", Error, "a DLedger index unit missing or disagreeing with its entry (magic, pos, size, index, term): recovery rebuilds the index from there";
    DledgerCheckpointBeyond = "dledger.checkpoint_beyond", Error, "the DLedger checkpoint names a committed or end index past the last entry of the data: committed entries are missing";
    DledgerCheckpointUnreadable = "dledger.checkpoint_unreadable", Error, "the DLedger checkpoint file does not parse";
    // A warning as `commitlog.dirty_tail` is, for the same reason: recovery ends the data at the
    // last entry and the next append overwrites the bytes; nothing served is lost. A data file
    // after the end that holds bytes is an error (recovery deletes the file and what it holds).
    DledgerBlankTail = "dledger.blank_tail", Warning, "non-zero bytes after the last DLedger entry (recovery ends the data before them, the next append overwrites them); an error when a data file after the end of the data holds bytes (recovery deletes it)";
    DledgerFileName = "dledger.file_name", Error, "a DLedger data or index file whose name is not a 20-digit offset, not a multiple of the file size, or not where the previous file ends";
    DledgerFileSize = "dledger.file_size", Error, "a DLedger data or index file whose size differs from the others (or the configured size), or an index file not a multiple of 32 bytes";
    DledgerCurrtermUnreadable = "dledger.currterm_unreadable", Error, "currterm is missing, does not parse or has no currTerm while the log holds entries: the member would vote again in old terms";
    // timer
    TimerNotAFile = "timer.not_a_file", Error, "a timer file or an entry of timerlog/ that is not a regular file";
    TimerForeignFile = "timer.foreign_file", Error, "a file in timerlog/ whose name is not a 20-digit offset";
    TimerLogFileSize = "timer.log_file_size", Error, "timer log files of different sizes, or a name that is not a multiple of the size";
    TimerLogBadEntry = "timer.log_bad_entry", Error, "bytes in the timer log that are not a 52-byte unit, a blank or the zero end";
    TimerLogEndEarly = "timer.log_end_early", Error, "the timer log's data ends before its last file";
    TimerBadUnit = "timer.bad_unit", Error, "a timer log unit with unknown magic bits, a negative offset or a bad record size";
    TimerWheelSize = "timer.wheel_size", Error, "a timerwheel whose size is not 38707200 bytes (the broker refuses to start)";
    TimerSlotChain = "timer.slot_chain", Error, "a wheel slot whose chain does not lead through timer log units of its second";
    TimerUnitUnlinked = "timer.unit_unlinked", Error, "a pending timer log unit that no wheel slot links: the broker never delivers it";
    TimerUnitRecord = "timer.unit_record", Error, "a timer log unit that does not point at a rmq_sys_wheel_timer record of its size";
    TimerCheckpointBad = "timer.checkpoint_bad", Error, "config/timercheck is missing, short or unreadable while the timer log exists";
    TimerCheckpointAhead = "timer.checkpoint_ahead", Error, "config/timercheck is ahead of the timer log's data or of the timer topic's queue";
    TimerMetricsMismatch = "timer.metrics_mismatch", Info, "config/timermetrics counts differ from the pending timer messages found";
}

impl Code {
    /// The code whose stable string is `s`.
    pub fn from_name(s: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == s)
    }

    /// The part of the store the code is about (`commitlog` for `commitlog.crc_mismatch`).
    pub fn part(self) -> &'static str {
        self.as_str().split_once('.').map_or("", |(p, _)| p)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_stored_offset_names_no_record() {
        let f = || Finding::new(Code::IndexDanglingEntry, Path::new("index/x"), 60, "entry");
        assert_eq!(f().about_stored_record(4096).record, Some(4096));
        assert_eq!(f().about_stored_record(-1).record, None);
        assert_eq!(f().about_stored_record(i64::MIN).record, None);
    }

    #[test]
    fn codes_are_unique_and_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for &code in Code::ALL {
            let c = code.as_str();
            assert!(seen.insert(c), "duplicate {c}");
            assert!(
                c.contains('.')
                    && c.chars()
                        .all(|x| x.is_ascii_lowercase() || x == '.' || x == '_')
            );
            assert!(!code.meaning().is_empty());
            assert_eq!(Code::from_name(c), Some(code));
            assert!(c.starts_with(code.part()) && !code.part().is_empty());
        }
        assert_eq!(Code::from_name("commitlog.no_such_code"), None);
        assert_eq!(Code::CommitlogDirtyTail.severity(), Severity::Warning);
        assert_eq!(Code::DledgerBlankTail.severity(), Severity::Warning);
        let f = Finding::new(
            Code::CommitlogCrcMismatch,
            Path::new("commitlog/0"),
            139,
            "body CRC",
        );
        assert_eq!(f.severity, Severity::Error);
        let j = serde_json::to_value(&f).unwrap();
        assert_eq!(j["code"], "commitlog.crc_mismatch");
        assert_eq!(j["file"], "commitlog/0");
        assert_eq!(j["severity"], "error");
        assert_eq!(j["file_offset"], 139);
        assert!(j["broker_action"].is_null());
        assert_eq!(j["location"]["kind"], "file");
        let unit = Location::QueueUnit {
            topic: "T".into(),
            queue_id: 3,
            unit: 7,
        };
        let j = serde_json::to_value(&unit).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"kind": "queue_unit", "topic": "T", "queue_id": 3, "queue_offset": 7})
        );
        assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Error);
    }
}
