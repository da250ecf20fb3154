//! The engine's argument group, shared by the pull-side commands (`pull`, `pending`, `export`,
//! `replay`, `offsets`): which broker's rules (`--broker`), and opening the engine over a store
//! with an overlay, a role and a clock.

use std::sync::Arc;

use clap::ValueEnum;

use super::client_dir::ClientDirArgs;
use crate::engine::broker::clock::{Clock, FakeClock, SystemClock};
use crate::engine::broker::pull::BrokerRole;
use crate::engine::broker::{Engine, EngineOptions, ReplayMode};
use crate::engine::store::version::BrokerVersion;
use crate::engine::Store;

/// `--broker`: the release whose rules apply where 4.9 and 5.x differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BrokerArg {
    #[value(name = "4.9")]
    V4_9,
    #[value(name = "5")]
    V5,
}

/// Build the engine the pull-side commands share: options guessed from the store, then the
/// role, broker rules and clock asked for.
pub(crate) struct EngineArgs<'a> {
    pub overlay: Option<&'a std::path::Path>,
    pub now: Option<i64>,
    pub role: BrokerRole,
    pub broker: Option<BrokerArg>,
    pub full_replay: bool,
    pub writable: bool,
    /// `--broker-name`: the engine's brokerName.
    pub broker_name: Option<String>,
}

pub(crate) fn open_engine(store: Store, a: EngineArgs<'_>) -> anyhow::Result<Engine> {
    let EngineArgs {
        overlay,
        now,
        role,
        broker,
        full_replay,
        writable,
        broker_name,
    } = a;
    let mut opts = EngineOptions::for_store(&store);
    opts.role = role;
    if let Some(b) = broker_name {
        opts.broker_name = b;
    }
    if full_replay {
        opts.replay = ReplayMode::Full;
    }
    if let Some(b) = broker {
        opts.version = match b {
            BrokerArg::V4_9 => BrokerVersion::V4_9,
            BrokerArg::V5 => BrokerVersion::V5,
        };
    }
    let clock: Arc<dyn Clock> = match now {
        Some(t) => Arc::new(FakeClock::new(t)),
        None => Arc::new(SystemClock),
    };
    let engine = if writable {
        Engine::open(store, overlay, clock, opts)?
    } else {
        Engine::open_read_only(store, overlay, clock, opts)?
    };
    Ok(engine)
}

/// With `--client-dir`: read the client's offsets and have the engine use them for its group.
pub(crate) fn use_client_dir(engine: &mut Engine, client: &ClientDirArgs) -> anyhow::Result<()> {
    if let Some(c) = client.load(&engine.options().broker_name.clone())? {
        engine.use_client_offsets(c);
    }
    Ok(())
}
