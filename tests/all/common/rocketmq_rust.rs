//! rocketmq-rust 1.0.0's name server and broker (crates.io `rocketmq-namesrv` and
//! `rocketmq-broker`), a second, independent broker for the `send` tests. Opt-in: its build
//! takes 25-45 minutes on 2 cores, more than CI's budget, so `scripts/test-rocketmq-rust.sh`
//! installs it into `$RMQSTORE_PEERS/bin` and runs its tests (`RMQSTORE_ROCKETMQ_RUST=1`);
//! the build script sets `rmqstore_rocketmq_rust` when both programs are there.
//!
//! [`RustCluster::start`] runs both on free loopback ports with TOML configs (TLS off, the
//! broker's HA port of its own), store, logs and `HOME` in a temporary directory.
//!
//! # What this broker does (pinned by tests/all/cluster.rs), where the Java broker differs
//! Wire:
//! - JSON headers must carry `serializeTypeCurrentRPC` and only string `extFields` values;
//!   otherwise the connection is closed without an answer (ali-ons writes neither; see
//!   common/ali_ons.rs). Heartbeat subscriptions need `expressionType`. Answers are JSON with
//!   language RUST, version 474, `"extFields":null` when empty.
//! - A malformed SEND_BATCH_MESSAGE body gets no answer at all (seen once: the request timed
//!   out after 10 s); a batch must be well formed, a timeout proves nothing.
//!
//! Sends (SEND_MESSAGE_V2 310, SEND_BATCH_MESSAGE 320):
//! - Every answer, errors included, carries ext `MSG_REGION=DefaultRegion` and `TRACE_ON=true`;
//!   a stored message answers `msgId` (offset id: 127.0.0.1 and the listen port, then the
//!   commitlog offset), `queueId`, `queueOffset`, and `transactionId` = its UNIQ_KEY.
//! - Body, FLAG, BORNTIMESTAMP, sysflag (a zlib body sent with the COMPRESSED bit is stored as
//!   it came) and reconsume times (`j`) are stored as sent; BORNHOST is the connection's peer.
//! - Properties come back byte for byte as name/value pairs (UTF-8 included), plus `CLUSTER`,
//!   `MSG_REGION` and `TRACE_ON`; `WAIT` is kept. Their order is not: a single message's
//!   properties are rewritten in the broker's hash order, so compare them as a map.
//! - A single message without UNIQ_KEY gets one from the broker (32 hex digits); a batch
//!   message without one stays without.
//! - An explicit queue id is kept; one at or beyond the topic's queue count is SYSTEM_ERROR (1)
//!   `request queueId[..] is illegal`; a negative one lets the broker pick.
//! - Limits: body (a batch's whole body too) at most 4 MiB (4,194,304 bytes: one more is
//!   MESSAGE_ILLEGAL (13) `message body size 4194305 exceeds the configured maximum 4194304
//!   bytes`); properties at most about 32 KiB (32,000 bytes taken, 40,000 refused with 13);
//!   an empty body is 13. 2,000 messages in one batch are taken.
//! - A batch is stored one record per message, in order, at consecutive offsets of one queue;
//!   the answer's `msgId` lists the offset ids comma-joined, `queueOffset` is the first's.
//!   Each record's properties are the message's own string as sent (a missing final separator
//!   added), then the header's (`i`, e.g. WAIT) and the broker's three; the FLAG is the
//!   message's own, reconsume times the header's. A `DELAY` inside a batch is not applied (the
//!   message is stored at once, DELAY kept); batches to `%RETRY%` topics are 13.
//!
//! Topics:
//! - With `autoCreateTopicEnable` (the default) TBW102 has 8 queues, perm 7; a send to a
//!   missing topic creates it with min(`d`, 8) read and write queues, perm 6. Without it,
//!   TBW102 is not routed and such a send is TOPIC_NOT_EXIST (17) `topic[T] not exist, apply
//!   first please!`.
//! - UPDATE_AND_CREATE_TOPIC (17) with `topic`, `readQueueNums`, `writeQueueNums`, `perm`, ...
//!   answers SUCCESS and the name server routes the topic within milliseconds;
//!   GET_ALL_TOPIC_CONFIG (21) answers `{topicConfigTable: {name: {topicName, readQueueNums,
//!   writeQueueNums, perm, topicFilterType, topicSysFlag, order, attributes}}, dataVersion,
//!   ...}` with the system topics among them.
//! - ali-ons (like a 4.x producer that finds no route) does not fall back to TBW102 when the
//!   name server says TOPIC_NOT_EXIST: create a topic before ali-ons sends to it.
//!
//! Delays:
//! - `DELAY` n in 1..18 waits in queue n-1 of `SCHEDULE_TOPIC_XXXX` (REAL_TOPIC, REAL_QID and
//!   DELAY added or kept) and lands in its topic after the level's time (levels `1s 5s 10s
//!   30s 1m 2m ...`, so level 3 is 10 s) with DELAY removed, `WAIT=false`, REAL_TOPIC and
//!   REAL_QID kept, the born time unchanged. Levels over 18 become 18; `0` or no number is
//!   stored at once, DELAY kept as sent. The answer's queue and offset are the schedule
//!   queue's.
//! - `TIMER_DELIVER_MS` (or `TIMER_DELAY_SEC`) in the future waits in `rmq_sys_wheel_timer`
//!   and lands at its time (the wheel ticks each second) with the timer properties removed,
//!   `TIMER_DELIVERY_TOKEN` and `WAIT=false` added; the answer has ext `recallHandle`. A time
//!   not in the future, or not a number, is MESSAGE_ILLEGAL (13), so a remaining delay that has
//!   run out must be dropped, not sent. At most 3 days ahead.
//!
//! Faults and ACL:
//! - A killed (SIGKILL) or stopped (SIGTERM) broker keeps every message it acknowledged and
//!   comes back on the same address; the name server drops it the moment its connection
//!   closes, so topics have no route until it is back.
//! - ACL (`authenticationEnabled`/`authorizationEnabled` with a 4.x `plain_acl.yml` as
//!   `aclFile`) checks the 4.x `AclClientRPCHook` signature; an unsigned request, an unknown key
//!   or a wrong secret is NO_PERMISSION (16) `Authentication credentials are invalid`, a
//!   missing PUB permission 16 `Permission was denied` (not SYSTEM_ERROR as in 4.9.8), with
//!   no ext fields. The name server does not check. ali-ons' signatures pass.
//!
//! Cost: the pair starts and registers in about 0.3 s; the name server holds 18 MB resident,
//! the broker 75 MB idle (111 MB at its peak while starting).

use std::path::{Path, PathBuf};

use super::cluster::{
    free_ports, plain_acl_yml, wait_registered, Cluster, Flavour, Options, Peer, BROKER_NAME,
    CLUSTER,
};

/// The two programs, in `$RMQSTORE_PEERS/bin` (build.rs names the same two).
const NAMESRV_BIN: &str = "rocketmq-namesrv-rust";
const BROKER_BIN: &str = "rocketmq-broker-rust";

/// Where the build looked for the programs.
pub fn peers_bin() -> PathBuf {
    PathBuf::from(env!("RMQSTORE_PEERS_BIN"))
}

/// Both programs are installed. Under CI their absence fails the test when they were asked
/// for (`RMQSTORE_ROCKETMQ_RUST=1`, as `scripts/test-rocketmq-rust.sh` sets).
pub fn ready() -> bool {
    let bin = peers_bin();
    if [NAMESRV_BIN, BROKER_BIN]
        .iter()
        .all(|b| bin.join(b).is_file())
    {
        return true;
    }
    let why = format!(
        "rocketmq-rust's name server and broker are not in {} (scripts/test-rocketmq-rust.sh \
         installs them)",
        bin.display()
    );
    if std::env::var_os("CI").is_some() && std::env::var_os("RMQSTORE_ROCKETMQ_RUST").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    false
}

/// A name server and one broker (`DefaultCluster`, `broker-a`, master) on loopback ports.
pub struct RustCluster {
    dir: tempfile::TempDir,
    options: Options,
    namesrv: Peer,
    broker: Option<Peer>,
    namesrv_port: u16,
    broker_port: u16,
    ha_port: u16,
}

impl RustCluster {
    pub fn start(options: Options) -> RustCluster {
        assert!(
            options.store.is_none() && options.broker_conf.is_empty(),
            "rocketmq-rust takes no store or broker.conf lines of a test"
        );
        let dir = tempfile::tempdir().unwrap();
        let ports = free_ports(0);
        let namesrv_home = dir.path().join("namesrv");
        std::fs::create_dir_all(&namesrv_home).unwrap();
        let config = namesrv_home.join("namesrv.toml");
        std::fs::write(&config, namesrv_toml(&namesrv_home)).unwrap();
        let namesrv = Peer::spawn(
            &peers_bin().join(NAMESRV_BIN),
            &[
                "-c".into(),
                config.display().to_string(),
                "--listenPort".into(),
                ports.namesrv.to_string(),
                "--bindAddress".into(),
                "127.0.0.1".into(),
            ],
            &home_env(&namesrv_home),
            dir.path().join("namesrv.log"),
        );
        let mut cluster = RustCluster {
            dir,
            options,
            namesrv,
            broker: None,
            namesrv_port: ports.namesrv,
            broker_port: ports.broker,
            ha_port: ports.ha,
        };
        cluster.write_broker_config();
        cluster.start_broker();
        cluster
    }
    fn write_broker_config(&self) {
        let home = self.dir.path().join("broker");
        std::fs::create_dir_all(home.join("auth")).unwrap();
        let acl_file = home.join("plain_acl.yml");
        if let Some(accounts) = &self.options.acl {
            std::fs::write(&acl_file, plain_acl_yml(accounts)).unwrap();
        }
        let acl = self.options.acl.is_some();
        let config = format!(
            r#"[broker]
listenPort = {port}
brokerIp1 = "127.0.0.1"
storePathRootDir = "{store}"
namesrvAddr = "{namesrv}"
autoCreateTopicEnable = {auto_create}
authenticationEnabled = {acl}
authorizationEnabled = {acl}
authConfigPath = "{auth}"
aclFile = "{acl_file}"

[broker.brokerIdentity]
brokerName = "{BROKER_NAME}"
brokerClusterName = "{CLUSTER}"
brokerId = 0

[broker.brokerServerConfig]
bindAddress = "127.0.0.1"

[broker.brokerServerConfig.tlsConfig.server]
mode = "disabled"

[store]
storePathRootDir = "{store}"
haListenAddress = "127.0.0.1"
haListenPort = {ha}
mappedFileSizeCommitLog = 134217728
"#,
            port = self.broker_port,
            store = home.join("store").display(),
            namesrv = self.namesrv_addr(),
            auto_create = self.options.auto_create_topics,
            auth = home.join("auth").display(),
            acl_file = if acl {
                acl_file.display().to_string()
            } else {
                String::new()
            },
            ha = self.ha_port,
        );
        std::fs::write(home.join("broker.toml"), config).unwrap();
    }

    fn start_broker(&mut self) {
        let home = self.dir.path().join("broker");
        let config = home.join("broker.toml");
        let log = self.dir.path().join("broker.log");
        let broker = Peer::spawn(
            &peers_bin().join(BROKER_BIN),
            &[
                "-c".into(),
                config.display().to_string(),
                "-n".into(),
                self.namesrv_addr(),
            ],
            &home_env(&home),
            log,
        );
        wait_registered(self, &[("name server", &self.namesrv), ("broker", &broker)]);
        self.broker = Some(broker);
    }
}

fn home_env(home: &Path) -> [(&'static str, &Path); 3] {
    [
        ("HOME", home),
        ("ROCKETMQ_HOME", home),
        ("RUST_LOG", Path::new("warn")),
    ]
}

impl Cluster for RustCluster {
    fn flavour(&self) -> Flavour {
        Flavour::RocketmqRust
    }

    fn options(&self) -> &Options {
        &self.options
    }

    fn namesrv_addr(&self) -> String {
        format!("127.0.0.1:{}", self.namesrv_port)
    }

    fn broker_addr(&self) -> String {
        format!("127.0.0.1:{}", self.broker_port)
    }

    fn store_dir(&self) -> PathBuf {
        self.dir.path().join("broker/store")
    }

    fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    fn kill_broker(&mut self) {
        if let Some(mut b) = self.broker.take() {
            b.stop(None, std::time::Duration::from_secs(30));
        }
    }

    fn stop_broker(&mut self) {
        if let Some(mut b) = self.broker.take() {
            b.stop(Some("TERM"), std::time::Duration::from_secs(30));
        }
    }

    fn restart_broker(&mut self) {
        self.kill_broker();
        self.start_broker();
    }

    fn logs(&self) -> String {
        format!(
            "name server:\n{}\nbroker:\n{}",
            self.namesrv.log_tail(),
            self.broker.as_ref().map(Peer::log_tail).unwrap_or_default()
        )
    }
}

impl Drop for RustCluster {
    fn drop(&mut self) {
        // the broker first, so it does not log the name server's absence
        drop(self.broker.take());
    }
}

fn namesrv_toml(home: &Path) -> String {
    format!(
        r#"rocketmqHome = "{home}"
kvConfigPath = "{home}/kvConfig.json"
configStorePath = "{home}/namesrv.properties"
tls.server.mode = "disabled"
"#,
        home = home.display()
    )
}
