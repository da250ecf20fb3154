//! `--client-dir DIR`: a broadcasting consumer's progress, kept by the client in
//! `<localOffsetStoreDir>/<clientId>/<group>/offsets.json`, used in place of the broker's
//! `consumerOffset.json` for that group (`offsets`, `pull`, `pending`, `replay`, `export`).
//! The group is DIR's last name, the client id the one before; a `--group` that names another
//! group is refused. Offsets a command commits go to that file (merged as the client merges,
//! written atomically, the old file kept as `.bak` and in a dated copy); the store is only read.

use std::path::PathBuf;

use clap::Args;

use super::output;
use crate::engine::broker::client_offsets::{ClientDir, ClientOffsets};
use crate::engine::broker::EngineOptions;
use crate::engine::Store;

#[derive(Debug, Clone, Default, Args)]
pub struct ClientDirArgs {
    /// A broadcasting consumer's offsets: DIR is <localOffsetStoreDir>/<clientId>/<group>
    /// (e.g. ~/.rocketmq_offsets/10.0.0.5@DEFAULT/MyGroup; the group is DIR's last name, the
    /// client id the one before). Its offsets.json (or .bak) is used in place of
    /// consumerOffset.json for that group.
    #[arg(long, value_name = "DIR")]
    pub client_dir: Option<PathBuf>,
    /// The brokerName of this store's queues in offsets.json (default: broker-a, the name the
    /// engine gives the store).
    #[arg(long, value_name = "NAME", requires = "client_dir")]
    pub broker_name: Option<String>,
}

impl ClientDirArgs {
    /// The checked folder, when `--client-dir` is given.
    pub fn dir(&self) -> anyhow::Result<Option<ClientDir>> {
        Ok(self
            .client_dir
            .as_deref()
            .map(ClientDir::open)
            .transpose()?)
    }

    /// The group a command works on: `--group`, or DIR's; both given and different is refused.
    pub fn group(&self, given: Option<&str>) -> anyhow::Result<Option<String>> {
        let Some(dir) = self.dir()? else {
            return Ok(given.map(str::to_string));
        };
        if let Some(g) = given.filter(|g| *g != dir.group) {
            anyhow::bail!(
                "--group {g:?} is not the group of --client-dir {} (the folder is group {:?} of \
                 client {:?}): leave --group out, or name that group's folder",
                dir.dir.display(),
                dir.group,
                dir.client_id
            );
        }
        Ok(Some(dir.group))
    }

    /// The broker name used for the store's queues: `--broker-name`, else the engine's.
    pub fn broker_name(&self, store: &Store) -> String {
        self.broker_name
            .clone()
            .unwrap_or_else(|| EngineOptions::for_store(store).broker_name)
    }

    /// Read the client's offsets (saying on stderr when they came from the `.bak` or hold other
    /// brokers' queues).
    pub fn load(&self, broker_name: &str) -> anyhow::Result<Option<ClientOffsets>> {
        let Some(dir) = self.dir()? else {
            return Ok(None);
        };
        let c = ClientOffsets::load(dir, broker_name)?;
        for n in c.notes() {
            output::note(&n.to_string());
        }
        Ok(Some(c))
    }
}

/// Write what was committed into the client's `offsets.json` (nothing when nothing changed).
pub fn persist(c: &mut ClientOffsets, what: &str) -> anyhow::Result<()> {
    if !c.is_dirty() {
        return Ok(());
    }
    crate::format::layout::ensure_outside_stores(&c.dir.dir, "--client-dir", false)?;
    let backup = c.persist(what)?;
    output::note_written(&c.dir.file(), backup);
    Ok(())
}
