//! Checks of one config file as the broker loads it: not a regular file, too large to read, not
//! parsing (so the `.bak` is loaded, or the table starts empty, or the broker does not start),
//! and a `.bak` that would not parse. What the contents say about the rest of the store is
//! checked by the store-level verify.

use std::path::Path;

use super::{load_file, ConfigFile, ConfigSource};
use crate::format::entry::Kind;
use crate::format::finding::{Code, Finding, Severity};

/// Byte offset of a parse error in a config file, 0 when it parses or cannot be read.
fn parse_error_offset<T: ConfigFile>(path: &Path) -> u64 {
    match super::read_config_bytes(path) {
        Ok(Some(b)) => T::from_bytes(&b).err().map_or(0, |e| e.offset),
        _ => 0,
    }
}

/// A config file (or its `.bak`) that is not a regular file, or too large to read.
fn config_kind_findings(path: &Path, backup: bool, out: &mut Vec<Finding>) {
    let e = crate::format::entry::probe(path);
    match e.kind {
        Kind::File { len } if len > super::MAX_CONFIG_BYTES => {
            let f = Finding::new(
                Code::ConfigTooLarge,
                path,
                0,
                format!(
                    "{len} bytes: larger than any config file the broker writes (not read; the \
                     limit is {} bytes)",
                    super::MAX_CONFIG_BYTES
                ),
            );
            out.push(if backup {
                f.with_severity(Severity::Warning).with_action(
                    "read only when the main file fails; the broker overwrites it on its next persist",
                )
            } else {
                f.with_action("the broker cannot read it whole: loading fails and it uses the .bak")
            })
        }
        Kind::File { .. } | Kind::Missing => {}
        k => out.push(
            Finding::new(
                Code::ConfigNotAFile,
                path,
                0,
                format!(
                    "{}{}, not a regular file (not read)",
                    if e.symlink { "a symlink to " } else { "" },
                    k.describe()
                ),
            )
            .with_action(if k == Kind::Fifo {
                "the broker blocks reading it at start (no writer): it hangs"
            } else {
                "the broker cannot read it: loading fails"
            }),
        ),
    }
}

/// Load config file `T` of `config_dir` as the broker does (falling back to its `.bak`),
/// with a finding for each thing the broker would trip on or silently work around.
pub fn load_checked<T: ConfigFile>(config_dir: &Path, out: &mut Vec<Finding>) -> Option<T> {
    let name = T::FILE_NAME;
    let main = config_dir.join(name);
    let bak = super::with_suffix(&main, ".bak");
    config_kind_findings(&main, false, out);
    config_kind_findings(&bak, true, out);
    match load_file::<T>(&main) {
        Ok(l) => {
            match &l.source {
                ConfigSource::Main => {
                    if let Ok(Some(b)) = super::read_config_bytes(&bak) {
                        if !b.iter().all(|c| c.is_ascii_whitespace()) {
                            if let Err(e) = T::from_bytes(&b) {
                                out.push(
                                    Finding::new(
                                        Code::ConfigBadBackup,
                                        &bak,
                                        e.offset,
                                        format!("{name}.bak does not parse: {}", e.kind),
                                    )
                                    .with_action(format!(
                                        "harmless while {name} parses; the broker writes a new .bak on its next persist"
                                    )),
                                );
                            }
                        }
                    }
                }
                ConfigSource::Backup { reason } => out.push(
                    Finding::new(
                        Code::ConfigFromBackup,
                        &main,
                        parse_error_offset::<T>(&main),
                        format!("{name} is {reason}; its .bak parses"),
                    )
                    .with_action(format!(
                        "the broker silently loads {name}.bak (the previous generation) and \
                         overwrites {name} on its next persist"
                    )),
                ),
                ConfigSource::Missing => {}
                ConfigSource::Empty { reason } => out.push(
                    Finding::new(
                        Code::ConfigUnparsable,
                        &main,
                        parse_error_offset::<T>(&main),
                        format!("no usable content: {reason}"),
                    )
                    .with_action("the broker starts with an empty table (its contents are lost)"),
                ),
            }
            Some(l.value)
        }
        Err(e) => {
            out.push(
                Finding::new(
                    Code::ConfigUnparsable,
                    &main,
                    parse_error_offset::<T>(&main),
                    e.to_string(),
                )
                .with_action("ConfigManager.load fails: the broker does not start"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::config::{DataVersion, TopicConfigs, TOPICS_FILE};

    fn codes(out: &[Finding]) -> Vec<Code> {
        out.iter().map(|f| f.code).collect()
    }

    #[test]
    fn a_config_file_is_loaded_and_judged_as_the_broker_loads_it() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join(TOPICS_FILE);
        let bak = dir.path().join(format!("{TOPICS_FILE}.bak"));
        let good = TopicConfigs::new(DataVersion::new(3, 1_700_000_000_000)).to_pretty();
        let load = || {
            let mut out = Vec::new();
            let t = load_checked::<TopicConfigs>(dir.path(), &mut out);
            (t, out)
        };
        // missing: nothing to say, an empty table
        let (t, out) = load();
        assert!(t.is_some() && out.is_empty(), "{out:?}");
        // the main file parses, its .bak does not
        std::fs::write(&main, &good).unwrap();
        std::fs::write(&bak, "{ \"topicConfigTable\": [").unwrap();
        let (t, out) = load();
        assert!(t.is_some());
        assert_eq!(codes(&out), [Code::ConfigBadBackup]);
        assert_eq!(out[0].file, bak);
        // the main file does not parse, its .bak does: the broker loads the .bak
        std::fs::write(&main, "{ \"dataVersion\": 12x }").unwrap();
        std::fs::write(&bak, &good).unwrap();
        let (t, out) = load();
        assert_eq!(
            t.unwrap().data_version,
            Some(DataVersion::new(3, 1_700_000_000_000))
        );
        assert_eq!(codes(&out), [Code::ConfigFromBackup]);
        assert!(
            out[0].offset > 0,
            "the offset of the parse error: {:?}",
            out[0]
        );
        // neither parses
        std::fs::write(&bak, "not json").unwrap();
        let (_, out) = load();
        assert!(codes(&out).contains(&Code::ConfigUnparsable), "{out:?}");
        // a folder where the file belongs
        std::fs::remove_file(&main).unwrap();
        std::fs::create_dir(&main).unwrap();
        let (_, out) = load();
        assert!(codes(&out).contains(&Code::ConfigNotAFile), "{out:?}");
    }
}
