//! The engine's argument group, shared by the pull-side commands (`pull`, `pending`, `export`,
//! `replay`, `offsets`): which broker's rules (`--broker`), and opening the engine over a store
//! with an overlay, a role and a clock.

use std::sync::Arc;

use clap::{Args, ValueEnum};

use super::client_dir::ClientDirArgs;
use super::output::parse_time_arg;
use crate::engine::broker::clock::{Clock, FakeClock, ScaledClock, SystemClock};
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

/// The engine's options for `store`: guessed from its files, then `--broker`, `--full-replay`
/// and `--broker-name`.
pub(crate) fn engine_options(
    store: &Store,
    broker: Option<BrokerArg>,
    full_replay: bool,
    broker_name: Option<&str>,
) -> EngineOptions {
    let mut opts = EngineOptions::for_store(store);
    if let Some(b) = broker_name {
        opts.broker_name = b.to_string();
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
    opts
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
    let mut opts = engine_options(&store, broker, full_replay, broker_name.as_deref());
    opts.role = role;
    let clock: Arc<dyn Clock> = match now {
        Some(t) => Arc::new(FakeClock::new(t)),
        None => Arc::new(SystemClock),
    };
    let engine = if writable {
        Engine::open(store, overlay, clock, opts)?
    } else {
        Engine::open_read_only(store, overlay, clock, opts)?
    };
    say_notes(&engine);
    Ok(engine)
}

/// What opening the engine did that the user should hear of, on stderr.
pub(crate) fn say_notes(engine: &Engine) {
    for n in &engine.notes {
        super::output::note(n);
    }
}

/// With `--client-dir`: read the client's offsets and have the engine use them for its group.
pub(crate) fn use_client_dir(engine: &mut Engine, client: &ClientDirArgs) -> anyhow::Result<()> {
    if let Some(c) = client.load(&engine.options().broker_name.clone())? {
        engine.use_client_offsets(c);
    }
    Ok(())
}

/// `--now` and `--time-scale`: the clock of the commands that run over time (`replay`,
/// `serve`).
#[derive(Debug, Clone, Args)]
pub struct ClockArgs {
    /// The engine's clock starts at TIME (epoch ms or ISO 8601; default: now).
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    pub now: Option<i64>,
    /// Run the engine's clock this many times faster than real time (retry and delay levels
    /// fall due sooner).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub time_scale: f64,
}

impl ClockArgs {
    /// The clock asked for; a scale that is not a positive number is refused.
    pub fn clock(&self) -> anyhow::Result<Arc<ScaledClock>> {
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            anyhow::bail!(
                "--time-scale must be a positive number, not {}",
                self.time_scale
            );
        }
        let origin = self.now.unwrap_or_else(|| SystemClock.now_ms());
        Ok(Arc::new(ScaledClock::new(origin, self.time_scale)))
    }
}
