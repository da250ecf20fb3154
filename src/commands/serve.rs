//! `rmqstore serve`: answer RocketMQ clients and admin tools for a store, as its NameServer and
//! its Broker on one port. The store is read-only; offsets, retries, dead letters and delayed
//! deliveries go to the overlay (`--overlay`), which a later `serve`, `pull` or `replay`
//! continues. The address to give clients (`-n` / `namesrvAddr`) is printed on stdout once the
//! socket listens; logs go to stderr (`RUST_LOG`, default `info`).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::engine_args::{engine_options, BrokerArg, ClockArgs};
use super::{ExitStatus, GeometryArgs};
use crate::engine::broker::clock::Clock;
use crate::engine::broker::Engine;
use crate::engine::Store;
use crate::serve::acl::PlainAcl;
use crate::serve::{ServeOptions, DEFAULT_CLUSTER};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The store root (read-only).
    pub store: PathBuf,
    /// Address to listen on; a port of 0 picks a free one. A non-loopback address needs --acl.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9876")]
    pub listen: SocketAddr,
    /// The `host:port` routes point clients at (default: the listening address).
    #[arg(long, value_name = "HOST:PORT")]
    pub advertise: Option<String>,
    /// Overlay store directory: consumer offsets, retries, dead letters and delayed deliveries
    /// go there; an earlier run's overlay is continued. Without it nothing is saved.
    #[arg(long, value_name = "DIR")]
    pub overlay: Option<PathBuf>,
    /// brokerName in routes and message queues (default: broker-a).
    #[arg(long, value_name = "NAME")]
    pub broker_name: Option<String>,
    /// brokerClusterName in routes and cluster info.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_CLUSTER)]
    pub cluster: String,
    /// The broker's plain_acl.yml: every request must be signed by one of its accounts and be
    /// allowed by its permissions.
    #[arg(long, value_name = "FILE")]
    pub acl: Option<PathBuf>,
    /// Connections open at once; a new one past this closes the one that never completed a
    /// request, else the one idle the longest.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
    /// Close a connection that sends nothing for this long.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub idle_secs: u64,
    #[command(flatten)]
    pub clock: ClockArgs,
    /// Broker rules (default: guessed from the store).
    #[arg(long, value_enum)]
    pub broker: Option<BrokerArg>,
    /// Dispatch every commitlog record again at start (rebuilds missing consume queues).
    #[arg(long)]
    pub full_replay: bool,
    #[command(flatten)]
    pub geometry: GeometryArgs,
}

fn open(a: &ServeArgs) -> anyhow::Result<Engine> {
    let store = Store::open(&a.store, &a.geometry.inputs()?)?;
    let opts = engine_options(&store, a.broker, a.full_replay, a.broker_name.as_deref());
    let clock: Arc<dyn Clock> = a.clock.clock()?;
    let engine = Engine::open(store, a.overlay.as_deref(), clock, opts)?;
    super::engine_args::say_notes(&engine);
    Ok(engine)
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

pub fn run(a: &ServeArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let acl = match &a.acl {
        Some(p) => Some(PlainAcl::load(p)?),
        None if !a.listen.ip().is_loopback() => anyhow::bail!(
            "--listen {}: a non-loopback address needs --acl FILE (plain_acl.yml), or anyone \
             who can reach it could read the store",
            a.listen
        ),
        None => None,
    };
    init_logging();
    let engine = open(a)?;
    let mut opts = ServeOptions::new(a.listen);
    opts.advertise.clone_from(&a.advertise);
    opts.cluster.clone_from(&a.cluster);
    opts.acl = acl;
    opts.max_connections = a.max_connections;
    opts.idle = Duration::from_secs(a.idle_secs.max(1));
    if a.overlay.is_none() {
        tracing::warn!("no --overlay: offsets and retries are kept in memory and lost on stop");
    }
    let mut printed = Ok(());
    crate::serve::run(engine, opts, |_, advertise| {
        printed = writeln!(out, "listening on {advertise}").and_then(|()| out.flush());
    })?;
    printed?;
    Ok(ExitStatus::Success)
}
