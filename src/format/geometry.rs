//! `Geometry`: the sizes a store was written with, which its files do not all record.
//!
//! Resolved once per run in this order: command-line flags, a broker config file
//! (`--broker-conf`), inference from the files themselves, the broker's defaults. Each value
//! remembers where it came from so commands can say so.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Serialize;

use super::error::{BrokerConfError, Result};

/// Default `mappedFileSizeCommitLog` (1 GiB).
pub const DEFAULT_COMMITLOG_FILE_SIZE: u64 = 1 << 30;
/// Default consume queue file size in units (`mappedFileSizeConsumeQueue` = 300000 x 20).
pub const DEFAULT_CQ_FILE_UNITS: u64 = 300_000;
/// Default `maxHashSlotNum`.
pub const DEFAULT_INDEX_SLOTS: u32 = 5_000_000;
/// Default `maxIndexNum`.
pub const DEFAULT_INDEX_ENTRIES: u32 = 20_000_000;
/// Default `messageDelayLevel`.
pub const DEFAULT_DELAY_LEVELS: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/// Where a geometry value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Flag,
    BrokerConf,
    Inferred,
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Flag => "command-line flag",
            Source::BrokerConf => "broker config file",
            Source::Inferred => "inferred from the files",
            Source::Default => "broker default",
        })
    }
}

/// A value with its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Sourced<T> {
    pub fn new(value: T, source: Source) -> Self {
        Sourced { value, source }
    }
}

/// The sizes of a store's files and its delay levels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Geometry {
    /// `mappedFileSizeCommitLog` in bytes.
    pub commitlog_file_size: Sourced<u64>,
    /// Consume queue file size in 20-byte units.
    pub cq_file_units: Sourced<u64>,
    /// `maxHashSlotNum`.
    pub index_slots: Sourced<u32>,
    /// `maxIndexNum`.
    pub index_entries: Sourced<u32>,
    /// `messageDelayLevel`: delay of level `i+1` in ms at index `i`.
    pub delay_levels: Sourced<Vec<i64>>,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            commitlog_file_size: Sourced::new(DEFAULT_COMMITLOG_FILE_SIZE, Source::Default),
            cq_file_units: Sourced::new(DEFAULT_CQ_FILE_UNITS, Source::Default),
            index_slots: Sourced::new(DEFAULT_INDEX_SLOTS, Source::Default),
            index_entries: Sourced::new(DEFAULT_INDEX_ENTRIES, Source::Default),
            delay_levels: Sourced::new(
                parse_delay_levels(DEFAULT_DELAY_LEVELS).unwrap_or_default(),
                Source::Default,
            ),
        }
    }
}

impl Geometry {
    /// Consume queue file size in bytes.
    pub fn cq_file_size(&self) -> u64 {
        self.cq_file_units.value * 20
    }

    /// Index file size: `40 + 4*slots + 20*entries`.
    pub fn index_file_size(&self) -> u64 {
        40 + 4 * self.index_slots.value as u64 + 20 * self.index_entries.value as u64
    }

    /// `maxDelayLevel`.
    pub fn max_delay_level(&self) -> i32 {
        self.delay_levels.value.len() as i32
    }

    /// Delay of `level` in ms (1-based), `None` when out of range.
    pub fn delay_millis(&self, level: i32) -> Option<i64> {
        let i = usize::try_from(level).ok()?.checked_sub(1)?;
        self.delay_levels.value.get(i).copied()
    }

    /// Lines saying where each value came from, for commands to print.
    pub fn describe(&self) -> Vec<String> {
        vec![
            format!(
                "commitlog file size {} ({})",
                self.commitlog_file_size.value, self.commitlog_file_size.source
            ),
            format!(
                "consume queue file {} units ({})",
                self.cq_file_units.value, self.cq_file_units.source
            ),
            format!(
                "index {} slots ({}), {} entries ({})",
                self.index_slots.value,
                self.index_slots.source,
                self.index_entries.value,
                self.index_entries.source
            ),
            format!(
                "{} delay levels ({})",
                self.delay_levels.value.len(),
                self.delay_levels.source
            ),
        ]
    }
}

/// Values given explicitly (flags or a broker config); `None` means not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GeometryOverrides {
    pub commitlog_file_size: Option<u64>,
    pub cq_file_units: Option<u64>,
    pub index_slots: Option<u32>,
    pub index_entries: Option<u32>,
    pub delay_levels: Option<Vec<i64>>,
    /// `dLegerPeers` (`n0-host:port;n1-host:port;...`): the members of a DLedger group.
    pub dledger_peers: Option<String>,
    /// DLedger index file size in bytes (`mappedFileSizeForEntryIndex`; the broker never sets
    /// it from its config, so only a flag gives it).
    pub dledger_index_file_size: Option<u64>,
}

impl GeometryOverrides {
    /// Read the keys that matter from a broker config file (Java properties: `key=value`,
    /// `key: value` or `key value`; `#` and `!` comments).
    pub fn from_broker_conf(path: &Path) -> Result<Self> {
        let bytes = super::entry::read_bounded(path, 16 << 20)?;
        let text = String::from_utf8_lossy(&bytes);
        let props = parse_java_properties(&text);
        let mut o = GeometryOverrides::default();
        let num = |key: &'static str| -> Result<Option<u64>> {
            match props.get(key) {
                None => Ok(None),
                Some(v) => v.trim().parse::<u64>().map(Some).map_err(|_| {
                    BrokerConfError::NotANumber {
                        path: path.to_path_buf(),
                        key,
                        value: v.to_string(),
                    }
                    .into()
                }),
            }
        };
        o.commitlog_file_size = num("mappedFileSizeCommitLog")?;
        // `getMappedFileSizeConsumeQueue` rounds up to a multiple of 20.
        o.cq_file_units = num("mappedFileSizeConsumeQueue")?.map(|b| b.div_ceil(20));
        o.index_slots = num("maxHashSlotNum")?.map(|v| v.min(u32::MAX as u64) as u32);
        o.index_entries = num("maxIndexNum")?.map(|v| v.min(u32::MAX as u64) as u32);
        o.dledger_peers = props.get("dLegerPeers").map(|v| v.trim().to_string());
        if let Some(v) = props.get("messageDelayLevel") {
            o.delay_levels =
                Some(
                    parse_delay_levels(v).ok_or_else(|| BrokerConfError::BadDelayLevels {
                        path: path.to_path_buf(),
                        value: v.to_string(),
                    })?,
                );
        }
        Ok(o)
    }
}

/// Inputs to [`resolve`], in priority order.
#[derive(Debug, Clone, Default)]
pub struct GeometryInputs {
    pub flags: GeometryOverrides,
    pub broker_conf: GeometryOverrides,
    pub inferred: GeometryOverrides,
}

/// Pick each value from flags, then broker config, then inference, then the default.
pub fn resolve(i: &GeometryInputs) -> Geometry {
    fn pick<T: Clone>(
        get: impl Fn(&GeometryOverrides) -> Option<T>,
        i: &GeometryInputs,
        default: Sourced<T>,
    ) -> Sourced<T> {
        [
            (&i.flags, Source::Flag),
            (&i.broker_conf, Source::BrokerConf),
            (&i.inferred, Source::Inferred),
        ]
        .into_iter()
        .find_map(|(o, s)| get(o).map(|v| Sourced::new(v, s)))
        .unwrap_or(default)
    }
    let d = Geometry::default();
    Geometry {
        commitlog_file_size: pick(|o| o.commitlog_file_size, i, d.commitlog_file_size),
        cq_file_units: pick(|o| o.cq_file_units, i, d.cq_file_units),
        index_slots: pick(|o| o.index_slots, i, d.index_slots),
        index_entries: pick(|o| o.index_entries, i, d.index_entries),
        delay_levels: pick(|o| o.delay_levels.clone(), i, d.delay_levels),
    }
}

/// `parseDelayLevel`: tokens split on single spaces, each a long and a unit `s`, `m`, `h`, `d`.
pub fn parse_delay_levels(s: &str) -> Option<Vec<i64>> {
    s.trim()
        .split(' ')
        .filter(|t| !t.is_empty())
        .map(|t| {
            let (num, unit) = t.split_at(t.len().checked_sub(1)?);
            let n: i64 = super::java::parse_long(num)?;
            let ms = match unit {
                "s" => 1000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return None,
            };
            n.checked_mul(ms)
        })
        .collect()
}

/// A minimal Java `.properties` reader: enough for broker.conf files.
pub fn parse_java_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let split = line
            .find(['=', ':'])
            .into_iter()
            .chain(line.find(char::is_whitespace))
            .min();
        let (k, v) = match split {
            Some(i) => {
                let v = line[i..].trim_start();
                let v = v.strip_prefix(['=', ':']).map(str::trim_start).unwrap_or(v);
                (&line[..i], v)
            }
            None => (line, ""),
        };
        out.insert(k.trim().to_string(), v.trim_end().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_levels_default() {
        let v = parse_delay_levels(DEFAULT_DELAY_LEVELS).unwrap();
        assert_eq!(v.len(), 18);
        assert_eq!(v[0], 1000);
        assert_eq!(v[2], 10_000);
        assert_eq!(v[17], 7_200_000);
        assert_eq!(parse_delay_levels("1x"), None);
        assert_eq!(parse_delay_levels("2d"), Some(vec![172_800_000]));
    }

    #[test]
    fn resolve_order_and_broker_conf() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("broker.conf");
        std::fs::write(
            &p,
            "# comment\nmappedFileSizeCommitLog = 1048576\nmappedFileSizeConsumeQueue=10001\nmaxHashSlotNum: 1000\nmaxIndexNum 4000\nmessageDelayLevel=1s 2s\n",
        )
        .unwrap();
        let conf = GeometryOverrides::from_broker_conf(&p).unwrap();
        assert_eq!(conf.cq_file_units, Some(501));
        let g = resolve(&GeometryInputs {
            flags: GeometryOverrides {
                index_slots: Some(7),
                ..Default::default()
            },
            broker_conf: conf,
            inferred: GeometryOverrides {
                commitlog_file_size: Some(99),
                ..Default::default()
            },
        });
        assert_eq!(g.index_slots, Sourced::new(7, Source::Flag));
        assert_eq!(g.index_entries, Sourced::new(4000, Source::BrokerConf));
        assert_eq!(
            g.commitlog_file_size,
            Sourced::new(1048576, Source::BrokerConf)
        );
        assert_eq!(g.delay_levels.value, vec![1000, 2000]);
        assert_eq!(g.delay_millis(2), Some(2000));
        assert_eq!(g.delay_millis(0), None);
        assert_eq!(g.index_file_size(), 40 + 28 + 80_000);
        std::fs::write(&p, "maxIndexNum=abc\n").unwrap();
        assert!(GeometryOverrides::from_broker_conf(&p).is_err());
    }

    #[test]
    fn a_bad_broker_conf_value_names_the_key_and_the_value() {
        use crate::format::error::{BrokerConfError, Error};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("broker.conf");
        std::fs::write(&p, "maxHashSlotNum=5000000\nmaxIndexNum = 4e6 \n").unwrap();
        let e = GeometryOverrides::from_broker_conf(&p).unwrap_err();
        match &e {
            Error::BrokerConf(BrokerConfError::NotANumber { path, key, value }) => {
                assert_eq!(path, &p);
                assert_eq!(*key, "maxIndexNum");
                assert_eq!(value.trim(), "4e6");
            }
            other => panic!("{other}"),
        }
        assert_eq!(e.path(), p);
        assert!(e.to_string().ends_with("is not a number"), "{e}");
        std::fs::write(&p, "messageDelayLevel=1s 2x\n").unwrap();
        let e = GeometryOverrides::from_broker_conf(&p).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::BrokerConf(BrokerConfError::BadDelayLevels { value, .. }) if value == "1s 2x"
            ),
            "{e}"
        );
    }
}
