//! `rmqstore config <STORE> topics|groups show|set|delete`: the topic and subscription-group
//! config (`topics.json`, `subscriptionGroup.json`), shown and edited offline. An edit prints
//! its changes and writes nothing unless `--apply` ([`crate::engine::admin::config`]).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::names;
use super::output::{self, summary_line, typed_line};
use super::{ExitStatus, GeometryArgs};
use crate::engine::admin::{self, config::ConfigChange};
use crate::engine::store::safedir::StoreLock;
use crate::engine::Store;
use crate::format::config::{load, ConfigFile, SubscriptionGroups, TopicConfigs};

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// The store root.
    pub store: PathBuf,
    #[command(subcommand)]
    pub which: ConfigWhich,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

#[derive(Debug, Subcommand)]
pub enum ConfigWhich {
    /// Topics (`topics.json`): readQueueNums, writeQueueNums, perm, order, topicFilterType,
    /// topicSysFlag.
    #[command(after_help = super::help::CONFIG_TOPICS)]
    Topics {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Subscription groups (`subscriptionGroup.json`): consumeEnable, consumeFromMinEnable,
    /// consumeBroadcastEnable, retryQueueNums, retryMaxTimes, brokerId,
    /// whichBrokerWhenConsumeSlowly, notifyConsumerIdsChangedEnable.
    #[command(after_help = super::help::CONFIG_GROUPS)]
    Groups {
        #[command(subcommand)]
        action: ConfigAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Every entry and its properties.
    #[command(after_help = super::help::CONFIG_SHOW)]
    Show {
        /// JSON Lines: one `config_entry` per entry, then a summary.
        #[arg(long, short = 'J')]
        json: bool,
    },
    /// Set properties (`key=value`, Java names) of one entry; a new name is created with the
    /// broker's defaults.
    #[command(after_help = super::help::CONFIG_SET)]
    Set {
        name: String,
        #[arg(value_name = "KEY=VALUE", required = true, value_parser = key_value)]
        pairs: Vec<(String, String)>,
        /// Allow a topic's readQueueNums below the consume queues it has.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        apply: ApplyFlags,
    },
    /// Delete one entry.
    #[command(after_help = super::help::CONFIG_DELETE)]
    Delete {
        name: String,
        #[command(flatten)]
        apply: ApplyFlags,
    },
}

#[derive(Debug, Args)]
pub struct ApplyFlags {
    /// Write the change (without it, only the changes are printed).
    #[arg(long)]
    pub apply: bool,
    /// JSON Lines: one `config_change` per property, then a summary.
    #[arg(long, short = 'J')]
    pub json: bool,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?}: expected KEY=VALUE")),
    }
}

/// The closing line of `--json`.
#[derive(Debug, serde::Serialize)]
struct ConfigSummary {
    file: &'static str,
    action: &'static str,
    entries: usize,
    changes: usize,
    applied: bool,
}

/// One entry of `show`.
#[derive(Debug, serde::Serialize)]
struct ConfigEntry<'a> {
    file: &'static str,
    name: &'a str,
    properties: serde_json::Map<String, serde_json::Value>,
}

pub fn run(a: &ConfigArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let action = match &a.which {
        ConfigWhich::Topics { action } | ConfigWhich::Groups { action } => action,
    };
    let apply = match action {
        ConfigAction::Show { .. } => None,
        ConfigAction::Set { apply, .. } | ConfigAction::Delete { apply, .. } => Some(apply),
    };
    // held from before the file is read until it is written: no broker runs meanwhile
    let lock = apply
        .is_some_and(|f| f.apply)
        .then(|| StoreLock::acquire(&a.store))
        .transpose()?;
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    match &a.which {
        ConfigWhich::Topics { action } => {
            edit::<TopicConfigs>(&store, action, lock, out, &TopicEdits { store: &store })
        }
        ConfigWhich::Groups { action } => {
            edit::<SubscriptionGroups>(&store, action, lock, out, &GroupEdits)
        }
    }
}

/// What differs between editing topics and editing subscription groups.
trait Edits<T> {
    fn names(&self, v: &T) -> Vec<String>;
    /// Every entry with its properties, in file order, in one pass over the table.
    fn shown<'v>(&self, v: &'v T) -> Vec<(&'v str, Vec<(&'static str, String)>)>;
    fn set(
        &self,
        v: &mut T,
        name: &str,
        pairs: &[(String, String)],
        force: bool,
        now: i64,
    ) -> anyhow::Result<Vec<ConfigChange>>;
    fn delete(&self, v: &mut T, name: &str, now: i64) -> Vec<ConfigChange>;
}

struct TopicEdits<'a> {
    store: &'a Store,
}

impl Edits<TopicConfigs> for TopicEdits<'_> {
    fn names(&self, v: &TopicConfigs) -> Vec<String> {
        v.table.iter().map(|(k, _)| k.clone()).collect()
    }
    fn shown<'v>(&self, v: &'v TopicConfigs) -> Vec<(&'v str, Vec<(&'static str, String)>)> {
        v.table
            .iter()
            .map(|(k, c)| (k.as_str(), admin::config::topic_properties(c)))
            .collect()
    }
    fn set(
        &self,
        v: &mut TopicConfigs,
        name: &str,
        pairs: &[(String, String)],
        force: bool,
        now: i64,
    ) -> anyhow::Result<Vec<ConfigChange>> {
        Ok(admin::config::set_topic(
            v, self.store, name, pairs, force, now,
        )?)
    }
    fn delete(&self, v: &mut TopicConfigs, name: &str, now: i64) -> Vec<ConfigChange> {
        admin::config::delete_topic(v, name, now)
    }
}

struct GroupEdits;

impl Edits<SubscriptionGroups> for GroupEdits {
    fn names(&self, v: &SubscriptionGroups) -> Vec<String> {
        v.table.iter().map(|(k, _)| k.clone()).collect()
    }
    fn shown<'v>(&self, v: &'v SubscriptionGroups) -> Vec<(&'v str, Vec<(&'static str, String)>)> {
        v.table
            .iter()
            .map(|(k, c)| (k.as_str(), admin::config::group_properties(c)))
            .collect()
    }
    fn set(
        &self,
        v: &mut SubscriptionGroups,
        name: &str,
        pairs: &[(String, String)],
        _force: bool,
        now: i64,
    ) -> anyhow::Result<Vec<ConfigChange>> {
        Ok(admin::config::set_group(v, name, pairs, now)?)
    }
    fn delete(&self, v: &mut SubscriptionGroups, name: &str, now: i64) -> Vec<ConfigChange> {
        admin::config::delete_group(v, name, now)
    }
}

fn edit<T: ConfigFile + Clone>(
    store: &Store,
    action: &ConfigAction,
    lock: Option<StoreLock>,
    out: &mut dyn Write,
    e: &dyn Edits<T>,
) -> anyhow::Result<ExitStatus> {
    let mut value: T = match load::<T>(&store.config_dir()) {
        Ok(l) => l.value,
        Err(_) if !store.config_dir().join(T::FILE_NAME).exists() => T::empty(),
        Err(err) => return Err(err.into()),
    };
    let now = chrono::Utc::now().timestamp_millis();
    let (what, changes, flags) = match action {
        ConfigAction::Show { json } => {
            // One pass over the table (a lookup per name would be quadratic).
            let entries = e.shown(&value);
            for (n, props) in &entries {
                if *json {
                    let properties = props
                        .iter()
                        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
                        .collect();
                    typed_line(
                        out,
                        "config_entry",
                        &ConfigEntry {
                            file: T::FILE_NAME,
                            name: n,
                            properties,
                        },
                    )?;
                } else {
                    let text: Vec<String> = props.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    writeln!(out, "{n:<40} {}", text.join(" "))?;
                }
            }
            if *json {
                summary_line(
                    out,
                    "config",
                    &ConfigSummary {
                        file: T::FILE_NAME,
                        action: "show",
                        entries: entries.len(),
                        changes: 0,
                        applied: false,
                    },
                )?;
            }
            return Ok(ExitStatus::Success);
        }
        ConfigAction::Set {
            name,
            pairs,
            force,
            apply,
        } => ("set", e.set(&mut value, name, pairs, *force, now)?, apply),
        ConfigAction::Delete { name, apply } => {
            let known = e.names(&value);
            names::ensure_known(
                "entry",
                name,
                known.iter().map(String::as_str),
                T::FILE_NAME,
            )?;
            ("delete", e.delete(&mut value, name, now), apply)
        }
    };
    let applied = flags.apply && !changes.is_empty();
    if flags.json {
        for c in &changes {
            typed_line(out, "config_change", c)?;
        }
        summary_line(
            out,
            "config",
            &ConfigSummary {
                file: T::FILE_NAME,
                action: what,
                entries: e.names(&value).len(),
                changes: changes.len(),
                applied,
            },
        )?;
    } else {
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        for c in &changes {
            writeln!(
                out,
                "{:<40} {:<32} {:>12} -> {}",
                c.name,
                c.key,
                shown(&c.old_value),
                shown(&c.new_value)
            )?;
        }
        writeln!(
            out,
            "{} change(s) to {}; {}",
            changes.len(),
            T::FILE_NAME,
            if changes.is_empty() {
                "nothing changes"
            } else if flags.apply {
                "written"
            } else {
                "nothing was written (add --apply)"
            }
        )?;
    }
    if let (true, Some(lock)) = (applied, lock) {
        let backup = admin::config::save_under_lock(&lock, &value, "config")?;
        output::note_written(&store.config_dir().join(T::FILE_NAME), backup);
    }
    Ok(ExitStatus::Success)
}
