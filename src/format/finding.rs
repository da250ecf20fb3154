//! `Finding`: one thing wrong (or worth knowing) about a store, as data. `verify` produces them,
//! `repair` plans from them, the TUI lists them, `--json` prints them.
//!
//! Codes are stable strings, `<part>.<what>`; every code in use is listed in [`CODES`] with its
//! default severity and a sentence, and nowhere else.

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
    /// A stable code from [`CODES`].
    pub code: &'static str,
    #[serde(serialize_with = "path_str")]
    pub file: PathBuf,
    /// Byte offset inside `file` (`file_offset` in JSON, as every byte position in a named file).
    #[serde(rename = "file_offset")]
    pub offset: u64,
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
    pub fn new(code: &'static str, file: &Path, offset: u64, message: impl Into<String>) -> Self {
        Finding {
            severity: default_severity(code),
            code,
            file: file.to_path_buf(),
            offset,
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

    pub fn with_severity(mut self, s: Severity) -> Self {
        self.severity = s;
        self
    }

    pub fn with_action(mut self, action: impl Into<String>) -> Self {
        self.broker_action = Some(action.into());
        self
    }
}

/// Every finding code: (code, default severity, what it means).
pub const CODES: &[(&str, Severity, &str)] = &[
    (
        "store.unreadable",
        Severity::Error,
        "a file or folder of the store cannot be read",
    ),
    (
        "store.abort_present",
        Severity::Warning,
        "the abort file exists: the last shutdown was unclean",
    ),
    (
        "store.live",
        Severity::Warning,
        "a broker seems to hold the store; the tail may move while it is read",
    ),
    (
        "commitlog.foreign_file",
        Severity::Error,
        "a file in commitlog/ whose name is not a 20-digit offset",
    ),
    (
        "commitlog.file_size",
        Severity::Error,
        "a commitlog file whose size differs from the configured one",
    ),
    (
        "commitlog.gap",
        Severity::Error,
        "no commitlog file covers a range between two files",
    ),
    (
        "commitlog.overlap",
        Severity::Error,
        "two commitlog files overlap",
    ),
    (
        "commitlog.misnamed",
        Severity::Error,
        "a commitlog file name that is not a multiple of the file size",
    ),
    (
        "commitlog.bad_record",
        Severity::Error,
        "a record that does not parse (magic, sizes, lengths)",
    ),
    (
        "commitlog.crc_mismatch",
        Severity::Error,
        "a body whose CRC differs from BODYCRC",
    ),
    (
        "commitlog.prop_crc_mismatch",
        Severity::Error,
        "the __CRC32# property does not match the record",
    ),
    (
        "commitlog.bad_header",
        Severity::Error,
        "a record whose TOPIC, QUEUEID, QUEUEOFFSET or PHYSICALOFFSET contradicts the store (the broker does not check them)",
    ),
    (
        "commitlog.not_a_file",
        Severity::Error,
        "an entry of commitlog/ that is not a regular file (a folder, FIFO, device, symlink loop)",
    ),
    (
        "commitlog.no_blank",
        Severity::Error,
        "a file that is not the last one ends without a blank record",
    ),
    (
        "commitlog.blank_size",
        Severity::Warning,
        "a blank record whose size is not the bytes left in the file",
    ),
    (
        "commitlog.dirty_tail",
        Severity::Warning,
        "non-zero bytes after the end of data",
    ),
    (
        "commitlog.queue_offset_gap",
        Severity::Error,
        "queue offsets of a queue are not contiguous in the commitlog",
    ),
    (
        "commitlog.queue_offset_repeat",
        Severity::Error,
        "a queue offset appears twice in the commitlog",
    ),
    (
        "commitlog.duplicate_uniq_key",
        Severity::Info,
        "the same UNIQ_KEY is stored at several offsets",
    ),
    (
        "commitlog.bad_delay",
        Severity::Error,
        "a SCHEDULE_TOPIC_XXXX record whose DELAY is not a number",
    ),
    (
        "consumequeue.file_size",
        Severity::Error,
        "a consume queue file whose size differs from the configured one",
    ),
    (
        "consumequeue.foreign_file",
        Severity::Error,
        "a file in a queue folder whose name is not a 20-digit offset (the queue does not load)",
    ),
    (
        "consumequeue.not_a_file",
        Severity::Error,
        "an entry of a queue folder that is not a regular file",
    ),
    (
        "consumequeue.foreign_entry",
        Severity::Warning,
        "an entry under consumequeue/ that is not a queue folder (the broker skips it)",
    ),
    (
        "consumequeue.bad_topic_dir",
        Severity::Warning,
        "a topic folder whose name breaks the broker's topic rule",
    ),
    (
        "consumequeue.gap",
        Severity::Error,
        "a consume queue file is missing between two others",
    ),
    (
        "consumequeue.torn",
        Severity::Error,
        "non-zero bytes after the first invalid unit, or a partial unit",
    ),
    (
        "consumequeue.unit_mismatch",
        Severity::Error,
        "a unit that does not point at the record it should",
    ),
    (
        "consumequeue.past_end",
        Severity::Error,
        "a unit pointing past the commitlog's end of data",
    ),
    (
        "consumequeue.missing_unit",
        Severity::Error,
        "a queued record with no consume queue unit",
    ),
    (
        "consumequeue.stale_unit",
        Severity::Info,
        "a unit pointing below the commitlog's first offset",
    ),
    (
        "index.bad_file",
        Severity::Error,
        "an index file that does not open (size, header)",
    ),
    (
        "index.not_a_file",
        Severity::Error,
        "an entry of index/ that is not a regular file (IndexService.load fails)",
    ),
    (
        "index.header_mismatch",
        Severity::Warning,
        "an index header that disagrees with its entries",
    ),
    (
        "index.bad_chain",
        Severity::Error,
        "a slot or previous-entry pointer out of range",
    ),
    (
        "index.dangling_entry",
        Severity::Error,
        "an entry whose record does not exist or does not hash to it",
    ),
    (
        "index.missing_key",
        Severity::Warning,
        "a record key that no index entry covers",
    ),
    (
        "index.geometry",
        Severity::Warning,
        "the index slot and entry counts could not be determined",
    ),
    (
        "checkpoint.missing",
        Severity::Warning,
        "no checkpoint file",
    ),
    (
        "checkpoint.bad_file",
        Severity::Error,
        "the checkpoint file is too short",
    ),
    (
        "checkpoint.ahead",
        Severity::Warning,
        "checkpoint times are later than the data",
    ),
    (
        "config.not_a_file",
        Severity::Error,
        "a config file that is not a regular file (a FIFO, a folder): the broker cannot read it",
    ),
    (
        "config.too_large",
        Severity::Error,
        "a config file too large to be read (the broker fails to load it and uses the .bak)",
    ),
    (
        "store.not_a_file",
        Severity::Error,
        "checkpoint, abort or lock is not a regular file",
    ),
    (
        "config.unparsable",
        Severity::Error,
        "a config file and its .bak do not parse",
    ),
    (
        "config.from_backup",
        Severity::Warning,
        "a config file does not parse or is missing; its .bak does",
    ),
    (
        "config.bad_offset_key",
        Severity::Warning,
        "a consumerOffset.json key that is not topic@group (no consumer reads it)",
    ),
    (
        "config.offset_above_max",
        Severity::Error,
        "a consumer offset above its queue's max offset",
    ),
    (
        "config.offset_below_min",
        Severity::Info,
        "a consumer offset below its queue's min offset (expired data)",
    ),
    (
        "config.delay_offset",
        Severity::Warning,
        "a delay offset outside its schedule queue",
    ),
    (
        "config.unknown_topic",
        Severity::Info,
        "a consume queue whose topic is not in topics.json",
    ),
    (
        "commitlog.hole",
        Severity::Error,
        "zeros where a record should start, with records after them",
    ),
    (
        "commitlog.stale_records",
        Severity::Warning,
        "records left behind an earlier truncation after the end of the data",
    ),
    (
        "commitlog.odd_field",
        Severity::Warning,
        "a record field the broker would not write (sysflag bits, topic name, version, time)",
    ),
    (
        "consumequeue.lag",
        Severity::Warning,
        "queued records past the consume queue's end that the broker dispatches on its next start",
    ),
    (
        "index.lag",
        Severity::Warning,
        "record keys after the index's last entry, indexed on the broker's next start",
    ),
    (
        "index.time_mismatch",
        Severity::Warning,
        "an index entry whose time diff disagrees with its record's store time",
    ),
    (
        "index.stale_entry",
        Severity::Info,
        "index entries pointing below the commitlog's first offset (expired data)",
    ),
    (
        "index.dropped_on_restart",
        Severity::Warning,
        "an index file an unclean start deletes (endTimestamp after indexMsgTimestamp)",
    ),
    (
        "checkpoint.confirm_offset",
        Severity::Warning,
        "the 5.x confirmPhyOffset is not on a record boundary",
    ),
    (
        "config.bad_backup",
        Severity::Warning,
        "a config .bak file that does not parse while the main file does",
    ),
    (
        "timer.not_a_file",
        Severity::Error,
        "a timer file or an entry of timerlog/ that is not a regular file",
    ),
    (
        "timer.foreign_file",
        Severity::Error,
        "a file in timerlog/ whose name is not a 20-digit offset",
    ),
    (
        "timer.log_file_size",
        Severity::Error,
        "timer log files of different sizes, or a name that is not a multiple of the size",
    ),
    (
        "timer.log_bad_entry",
        Severity::Error,
        "bytes in the timer log that are not a 52-byte unit, a blank or the zero end",
    ),
    (
        "timer.log_end_early",
        Severity::Error,
        "the timer log's data ends before its last file",
    ),
    (
        "timer.bad_unit",
        Severity::Error,
        "a timer log unit with unknown magic bits, a negative offset or a bad record size",
    ),
    (
        "timer.wheel_size",
        Severity::Error,
        "a timerwheel whose size is not 38707200 bytes (the broker refuses to start)",
    ),
    (
        "timer.slot_chain",
        Severity::Error,
        "a wheel slot whose chain does not lead through timer log units of its second",
    ),
    (
        "timer.unit_unlinked",
        Severity::Error,
        "a pending timer log unit that no wheel slot links: the broker never delivers it",
    ),
    (
        "timer.unit_record",
        Severity::Error,
        "a timer log unit that does not point at a rmq_sys_wheel_timer record of its size",
    ),
    (
        "timer.checkpoint_bad",
        Severity::Error,
        "config/timercheck is missing, short or unreadable while the timer log exists",
    ),
    (
        "timer.checkpoint_ahead",
        Severity::Error,
        "config/timercheck is ahead of the timer log's data or of the timer topic's queue",
    ),
    (
        "timer.metrics_mismatch",
        Severity::Info,
        "config/timermetrics counts differ from the pending timer messages found",
    ),
];

/// The default severity of a code (Error for an unknown code, so a typo is loud).
pub fn default_severity(code: &str) -> Severity {
    CODES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, s, _)| *s)
        .unwrap_or(Severity::Error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for (c, _, what) in CODES {
            assert!(seen.insert(*c), "duplicate {c}");
            assert!(
                c.contains('.')
                    && c.chars()
                        .all(|x| x.is_ascii_lowercase() || x == '.' || x == '_')
            );
            assert!(!what.is_empty());
        }
        let f = Finding::new(
            "commitlog.crc_mismatch",
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
        assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Error);
    }
}
