//! A live RocketMQ cluster for the `send` tests: rocketmq-rust 1.0.0's name server and one
//! broker (crates.io `rocketmq-namesrv` and `rocketmq-broker`, which `.ci/run` installs into
//! `$RMQSTORE_PEERS`; the build script sets `rmqstore_cluster` when both are there). An
//! independent implementation that serves the Java 4.9 clients, so what `send` writes is read
//! back by code that is not ours.
//!
//! [`LiveCluster::start`] runs both on free loopback ports with TOML configs (TLS off, the
//! broker's HA port of its own), store, logs and `HOME` in a temporary directory, and returns
//! once the broker is registered with the name server; dropping it kills both, also when the
//! test panics. Each program runs under a small `sh` supervisor reading a pipe from the test
//! process: when that pipe closes (drop, or the test process dying however it dies) the program
//! is killed, so none outlives the tests. [`rpc`] sends one request with our own codec over a
//! plain socket, and [`LiveCluster::pull_all`] reads a topic back as stored records, properties
//! byte for byte.
//!
//! # What this broker does (pinned by tests/all/cluster.rs)
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

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use rmqstore::format::commitlog::{parse_record, Message, Record};
use rmqstore::remoting::body::route::{ClusterInfo, TopicRouteData};
use rmqstore::remoting::header::{
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, GetRouteInfoRequestHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, PULL_FLAG_SUBSCRIPTION,
};
use rmqstore::remoting::{codes, FrameCodec, RemotingCommand};

/// The cluster and the broker the harness starts.
pub const CLUSTER: &str = "DefaultCluster";
pub const BROKER_NAME: &str = "broker-a";

/// The two programs, in `$RMQSTORE_PEERS/bin` (build.rs names the same two).
const NAMESRV_BIN: &str = "rocketmq-namesrv-rust";
const BROKER_BIN: &str = "rocketmq-broker-rust";

/// How long a start (or a restart) may take before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the build found the programs.
pub fn peers_bin() -> PathBuf {
    PathBuf::from(env!("RMQSTORE_PEERS_BIN"))
}

/// Both programs are installed; under CI their absence fails the test.
pub fn ready() -> bool {
    let bin = peers_bin();
    if [NAMESRV_BIN, BROKER_BIN]
        .iter()
        .all(|b| bin.join(b).is_file())
    {
        return true;
    }
    let why = format!(
        "rocketmq-rust's name server and broker are not in {} (`.ci/run` installs them)",
        bin.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    false
}

/// An account of the broker's plain-ACL file, as `plain_acl.yml` writes one.
#[derive(Debug, Clone)]
pub struct Account {
    pub access_key: &'static str,
    pub secret_key: &'static str,
    /// Every request allowed (admin requests too).
    pub admin: bool,
    /// `defaultTopicPerm`, e.g. `PUB|SUB` or `DENY`.
    pub default_topic_perm: &'static str,
}

/// An admin account and one allowed to subscribe only, for the ACL tests.
pub const ADMIN: Account = Account {
    access_key: "rmqstore-admin",
    secret_key: "admin-secret-123",
    admin: true,
    default_topic_perm: "PUB|SUB",
};
pub const READER: Account = Account {
    access_key: "rmqstore-reader",
    secret_key: "reader-secret-123",
    admin: false,
    default_topic_perm: "SUB",
};

/// How the cluster is set up.
#[derive(Debug, Clone)]
pub struct Options {
    /// `autoCreateTopicEnable`: a send to a missing topic creates it from `TBW102`.
    pub auto_create_topics: bool,
    /// Authentication and authorization on, with these accounts in the ACL file.
    pub acl: Option<Vec<Account>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            auto_create_topics: true,
            acl: None,
        }
    }
}

/// One program under its supervisor: the supervisor's stdin is the pipe that keeps the program
/// alive; a line written to it is a signal name to send the program.
struct Peer {
    supervisor: Child,
    control: Option<ChildStdin>,
    log: PathBuf,
}

/// Runs "$@" until the control pipe on stdin closes (then SIGKILL), passing on each signal name
/// read from it; exits with the program's status.
const SUPERVISE: &str = r#"exec 3<&0
"$@" </dev/null 3<&- & c=$!
(while read -r s <&3; do kill -"$s" "$c"; done; kill -9 "$c") 2>/dev/null & w=$!
wait "$c"; s=$?
kill "$w" 2>/dev/null
exit "$s""#;

impl Peer {
    /// Starts `program` with `args`, `HOME` and `ROCKETMQ_HOME` set to `home`, its output
    /// appended to `log`.
    fn spawn(program: &Path, args: &[String], home: &Path, log: PathBuf) -> Peer {
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let err = out.try_clone().unwrap();
        let mut supervisor = Command::new("sh")
            .arg("-c")
            .arg(SUPERVISE)
            .arg("sh")
            .arg(program)
            .args(args)
            .env("HOME", home)
            .env("ROCKETMQ_HOME", home)
            .env("RUST_LOG", "warn")
            .env_remove("NAMESRV_ADDR")
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let control = supervisor.stdin.take();
        Peer {
            supervisor,
            control,
            log,
        }
    }

    /// Still running?
    fn running(&mut self) -> bool {
        matches!(self.supervisor.try_wait(), Ok(None))
    }

    /// Sends `signal` (SIGTERM: `TERM`), or SIGKILL when `None`, and waits for the exit.
    fn stop(&mut self, signal: Option<&str>) {
        match (signal, self.control.as_mut()) {
            (Some(s), Some(c)) => {
                let _ = writeln!(c, "{s}");
                let _ = c.flush();
            }
            _ => drop(self.control.take()),
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.running() {
            if Instant::now() > deadline {
                // the program ignored the signal: close the pipe
                drop(self.control.take());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(self.control.take());
    }

    /// The last 40 lines of the log, without colour codes.
    fn log_tail(&self) -> String {
        let text = strip_colours(&std::fs::read_to_string(&self.log).unwrap_or_default());
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.control.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.supervisor.kill();
        let _ = self.supervisor.wait();
    }
}

/// A name server and one broker (`DefaultCluster`, `broker-a`, master) on loopback ports.
pub struct LiveCluster {
    dir: tempfile::TempDir,
    options: Options,
    namesrv: Peer,
    broker: Option<Peer>,
    namesrv_port: u16,
    broker_port: u16,
    ha_port: u16,
}

impl LiveCluster {
    /// Name server and broker with topic auto-creation on and no ACL.
    pub fn start() -> LiveCluster {
        Self::start_with(Options::default())
    }

    pub fn start_with(options: Options) -> LiveCluster {
        let dir = tempfile::tempdir().unwrap();
        let (namesrv_port, broker_port, ha_port) = free_ports();
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
                namesrv_port.to_string(),
                "--bindAddress".into(),
                "127.0.0.1".into(),
            ],
            &namesrv_home,
            dir.path().join("namesrv.log"),
        );
        let mut cluster = LiveCluster {
            dir,
            options,
            namesrv,
            broker: None,
            namesrv_port,
            broker_port,
            ha_port,
        };
        cluster.write_broker_config();
        cluster.start_broker();
        cluster
    }

    pub fn namesrv_addr(&self) -> String {
        format!("127.0.0.1:{}", self.namesrv_port)
    }

    pub fn broker_addr(&self) -> String {
        format!("127.0.0.1:{}", self.broker_port)
    }

    /// The broker's store root (commitlog, consume queues, config/).
    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("broker/store")
    }

    /// SIGKILL the broker, as a crash or an operator's `kill -9`: its connections drop at once.
    pub fn kill_broker(&mut self) {
        if let Some(mut b) = self.broker.take() {
            b.stop(None);
        }
    }

    /// SIGTERM the broker and wait for it to exit.
    pub fn stop_broker(&mut self) {
        if let Some(mut b) = self.broker.take() {
            b.stop(Some("TERM"));
        }
    }

    /// Starts the broker again (after a stop or a kill) on the same ports and store, and waits
    /// until it answers and is registered again.
    pub fn restart_broker(&mut self) {
        self.kill_broker();
        self.start_broker();
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
            &home,
            log.clone(),
        );
        self.broker = Some(broker);
        self.wait_registered();
    }

    /// Waits until the broker answers on its port and the name server lists it at that address.
    fn wait_registered(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if self.registered() {
                return;
            }
            for (name, peer) in [
                ("name server", Some(&mut self.namesrv)),
                ("broker", self.broker.as_mut()),
            ] {
                if let Some(p) = peer {
                    if !p.running() {
                        panic!("the {name} exited while starting:\n{}", p.log_tail());
                    }
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "the broker did not register within {START_TIMEOUT:?}\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn registered(&self) -> bool {
        let broker_answers = self
            .call_broker(command(codes::GET_BROKER_RUNTIME_INFO, &[]), &[])
            .is_ok_and(|r| r.command.code == codes::SUCCESS);
        broker_answers
            && self.cluster_info().is_ok_and(|info| {
                info.broker_addr_table
                    .get(BROKER_NAME)
                    .and_then(|b| b.broker_addrs.get(&0))
                    == Some(&self.broker_addr())
            })
    }

    /// [`rpc`] to the broker, signed with the first admin account when ACL is on.
    pub fn call_broker(&self, mut request: RemotingCommand, body: &[u8]) -> std::io::Result<Reply> {
        let admin = self.options.acl.iter().flatten().find(|a| a.admin);
        if let Some(a) = admin {
            rmqstore::remoting::acl::sign(
                &mut request.ext_fields,
                body,
                a.access_key,
                a.secret_key,
                None,
            );
        }
        rpc(&self.broker_addr(), &request, body)
    }

    /// Creates `topic` on the broker (UPDATE_AND_CREATE_TOPIC, read and write queues `queues`,
    /// perm READ|WRITE) and waits until the name server routes it.
    pub fn create_topic(&self, topic: &str, queues: i32) {
        let queues = queues.to_string();
        let req = command(
            codes::UPDATE_AND_CREATE_TOPIC,
            &[
                ("topic", topic),
                ("defaultTopic", "TBW102"),
                ("readQueueNums", &queues),
                ("writeQueueNums", &queues),
                ("perm", "6"),
                ("topicFilterType", "SINGLE_TAG"),
                ("topicSysFlag", "0"),
                ("order", "false"),
            ],
        );
        let r = self.call_broker(req, &[]).unwrap();
        assert_eq!(
            r.command.code,
            codes::SUCCESS,
            "create {topic}: {:?}",
            r.command
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.route(topic).is_none() {
            assert!(Instant::now() < deadline, "{topic} was not routed in 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// GET_BROKER_CLUSTER_INFO from the name server.
    pub fn cluster_info(&self) -> std::io::Result<ClusterInfo> {
        let r = rpc(
            &self.namesrv_addr(),
            &command(codes::GET_BROKER_CLUSTER_INFO, &[]),
            &[],
        )?;
        if r.command.code != codes::SUCCESS {
            return Err(std::io::Error::other(format!("answered {:?}", r.command)));
        }
        ClusterInfo::from_json(&r.body).map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// GET_ROUTEINFO_BY_TOPIC from the name server; `None` when it answers TOPIC_NOT_EXIST.
    pub fn route(&self, topic: &str) -> Option<TopicRouteData> {
        let mut req = command(codes::GET_ROUTEINFO_BY_TOPIC, &[]);
        req.write_header(&GetRouteInfoRequestHeader {
            topic: topic.into(),
            ..Default::default()
        });
        let r = rpc(&self.namesrv_addr(), &req, &[]).unwrap();
        if r.command.code != codes::SUCCESS {
            return None;
        }
        Some(TopicRouteData::from_json(&r.body).unwrap())
    }

    /// Every message of `topic` on the broker, queue by queue in offset order, as stored
    /// (PULL_MESSAGE with our codec; bodies as stored, properties byte for byte).
    pub fn pull_all(&self, topic: &str) -> Vec<Message> {
        let queues = self.topic_config(topic).map_or(0, |t| {
            t["readQueueNums"]
                .as_i64()
                .unwrap_or_else(|| panic!("{topic}: {t}")) as i32
        });
        let mut out = Vec::new();
        for queue_id in 0..queues {
            let max = self.max_offset(topic, queue_id);
            let mut offset = 0;
            while offset < max {
                let (next, mut got) = self.pull(topic, queue_id, offset);
                assert!(
                    next > offset,
                    "{topic}:{queue_id} pull at {offset} did not advance"
                );
                out.append(&mut got);
                offset = next;
            }
        }
        out
    }

    /// The broker's topic configs (GET_ALL_TOPIC_CONFIG): `topicConfigTable`, `dataVersion`.
    pub fn all_topic_config(&self) -> serde_json::Value {
        let r = self
            .call_broker(command(codes::GET_ALL_TOPIC_CONFIG, &[]), &[])
            .unwrap();
        assert_eq!(r.command.code, codes::SUCCESS, "{:?}", r.command);
        serde_json::from_slice(&r.body).unwrap()
    }

    /// One topic's config on the broker (`topicName`, `readQueueNums`, `writeQueueNums`,
    /// `perm`, ...), if it has the topic.
    pub fn topic_config(&self, topic: &str) -> Option<serde_json::Value> {
        let all = self.all_topic_config();
        all["topicConfigTable"].get(topic).cloned()
    }

    /// GET_MAX_OFFSET of one queue.
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        let mut req = command(codes::GET_MAX_OFFSET, &[]);
        req.write_header(&GetMaxOffsetRequestHeader {
            topic: topic.into(),
            queue_id,
            bname: None,
        });
        let r = self.call_broker(req, &[]).unwrap();
        assert_eq!(r.command.code, codes::SUCCESS, "{:?}", r.command);
        r.command
            .read_header::<GetMaxOffsetResponseHeader>()
            .unwrap()
            .offset
    }

    /// One PULL_MESSAGE of up to 32 messages from `offset`: the next offset and the messages.
    fn pull(&self, topic: &str, queue_id: i32, offset: i64) -> (i64, Vec<Message>) {
        let mut req = command(codes::PULL_MESSAGE, &[]);
        req.write_header(&PullMessageRequestHeader {
            consumer_group: "rmqstore-test-pull".into(),
            topic: topic.into(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: PULL_FLAG_SUBSCRIPTION,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            ..Default::default()
        });
        let r = self.call_broker(req, &[]).unwrap();
        assert_eq!(
            r.command.code,
            codes::SUCCESS,
            "pull {topic}:{queue_id} at {offset}: {:?}",
            r.command
        );
        let next = r
            .command
            .read_header::<PullMessageResponseHeader>()
            .unwrap()
            .next_begin_offset;
        let mut messages = Vec::new();
        let mut pos = 0;
        loop {
            match parse_record(&r.body, pos, 0, true) {
                Ok(Record::Message(m)) => {
                    pos += m.total_size as usize;
                    messages.push(m.to_owned_message());
                }
                Ok(Record::EndOfData) => break,
                other => panic!("pull {topic}:{queue_id} at {offset}, byte {pos}: {other:?}"),
            }
        }
        (next, messages)
    }

    /// The name server's and the broker's logs, for a failure message.
    pub fn logs(&self) -> String {
        format!(
            "name server:\n{}\nbroker:\n{}",
            self.namesrv.log_tail(),
            self.broker.as_ref().map(Peer::log_tail).unwrap_or_default()
        )
    }
}

impl Drop for LiveCluster {
    fn drop(&mut self) {
        // the broker first, so it does not log the name server's absence
        drop(self.broker.take());
    }
}

/// `text` without ANSI colour sequences (`ESC [ ... m`), which the programs write to files too.
fn strip_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match rest.find('m') {
            Some(end) => rest = &rest[end + 1..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
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

fn plain_acl_yml(accounts: &[Account]) -> String {
    let mut s = String::from("globalWhiteRemoteAddresses: []\naccounts:\n");
    for a in accounts {
        s.push_str(&format!("  - accessKey: {}\n", a.access_key));
        s.push_str(&format!("    secretKey: {}\n", a.secret_key));
        s.push_str("    whiteRemoteAddress: \"\"\n");
        s.push_str(&format!("    admin: {}\n", a.admin));
        s.push_str(&format!("    defaultTopicPerm: {}\n", a.default_topic_perm));
        s.push_str("    defaultGroupPerm: SUB\n");
    }
    s
}

/// A free port for the name server, and for the broker its listen port (with the port two
/// below it free too: the broker's second, "fast" listener) and its HA port. All are held
/// while they are chosen, so they differ.
fn free_ports() -> (u16, u16, u16) {
    let bind = |port: u16| TcpListener::bind(("127.0.0.1", port));
    let namesrv = bind(0).unwrap();
    let ha = bind(0).unwrap();
    for _ in 0..100 {
        let listen = bind(0).unwrap();
        let port = listen.local_addr().unwrap().port();
        if port > 1026 && bind(port - 2).is_ok() {
            return (
                namesrv.local_addr().unwrap().port(),
                port,
                ha.local_addr().unwrap().port(),
            );
        }
    }
    panic!("no free pair of ports two apart");
}

/// A request with language JAVA, version 4.9.8, JSON header, a fresh opaque and `ext` fields.
pub fn command(code: i32, ext: &[(&str, &str)]) -> RemotingCommand {
    static OPAQUE: AtomicI32 = AtomicI32::new(1);
    let mut c = RemotingCommand::request(code, OPAQUE.fetch_add(1, Ordering::Relaxed));
    for (k, v) in ext {
        c.ext_fields.insert(*k, *v);
    }
    c
}

/// A response and its body.
#[derive(Debug)]
pub struct Reply {
    pub command: RemotingCommand,
    pub body: Vec<u8>,
}

/// Sends `request` with `body` over a new connection to `addr` and reads its response (10 s at
/// most).
pub fn rpc(addr: &str, request: &RemotingCommand, body: &[u8]) -> std::io::Result<Reply> {
    let sock = addr
        .parse()
        .map_err(|e| std::io::Error::other(format!("{addr}: {e}")))?;
    let mut stream = TcpStream::connect_timeout(&sock, Duration::from_secs(3))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut frame = Vec::new();
    request
        .encode(body, &mut frame)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    stream.write_all(&frame)?;
    let codec = FrameCodec::default();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match rmqstore::remoting::decode(&codec, &buf) {
            Ok(Some((packet, used))) => {
                if packet.command.is_response() && packet.command.opaque == request.opaque {
                    return Ok(Reply {
                        command: packet.command,
                        body: packet.body.to_vec(),
                    });
                }
                buf.drain(..used);
                continue;
            }
            Ok(None) => {}
            Err(e) => return Err(std::io::Error::other(format!("{addr}: {e}"))),
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
