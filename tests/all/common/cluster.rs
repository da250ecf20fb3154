//! A live cluster for the tests: one name server and one master broker (`DefaultCluster`,
//! `broker-a`) on free loopback ports, of one of three kinds ([`Flavour`]):
//! - the real Apache RocketMQ 4.9 and 5.x from Maven Central (common/java.rs: the Java peer kit
//!   `tests/peers/java/install` puts in `$RMQSTORE_PEERS/java`; 5.x with its proxy in LOCAL
//!   mode);
//! - rocketmq-rust 1.0.0 (common/rocketmq_rust.rs), an independent implementation, opt-in
//!   (`scripts/test-rocketmq-rust.sh`): its build takes 25-45 minutes on 2 cores.
//!
//! [`Flavour::start`] returns once the broker is registered with the name server; dropping the
//! cluster kills every program it started, also when the test panics. Each program runs under a
//! small `sh` supervisor reading a pipe from the test process ([`Peer`]): when that pipe closes
//! (drop, or the test process dying however it dies) the program is killed, so none outlives
//! the tests. A program that exits while starting, or a broker that does not register, fails
//! the test with the tail of its log.
//!
//! The [`Cluster`] trait is what the tests see of any flavour: the addresses, stop, kill and
//! restart of the broker, and requests in our own codec over a plain socket ([`rpc`]):
//! topic creation, routes, and [`Cluster::pull_all`], which reads a topic back as stored records,
//! properties byte for byte. What each flavour does with the requests `send` relies on is pinned
//! by tests/all/cluster.rs; where the flavours differ, [`Flavour`]'s methods say how, and the
//! module docs of common/java.rs and common/rocketmq_rust.rs list the differences.
//!
//! [`on_every_broker!`] stamps one test per flavour out of one body, each ignored (a cfg from
//! `build.rs`) when its peer is not installed.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmqstore::format::commitlog::{parse_record, Message, Record};
use rmqstore::remoting::body::route::{ClusterInfo, TopicRouteData};
use rmqstore::remoting::header::{
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, GetRouteInfoRequestHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, PULL_FLAG_SUBSCRIPTION,
};
use rmqstore::remoting::{codes, FrameCodec, RemotingCommand};

use super::java::{self, JavaVersion};
use super::rocketmq_rust;

/// The cluster and the broker every flavour starts.
pub const CLUSTER: &str = "DefaultCluster";
pub const BROKER_NAME: &str = "broker-a";

/// How long a start (or a restart) may take before the test fails.
pub const START_TIMEOUT: Duration = Duration::from_secs(90);

/// Which broker a cluster runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// Apache RocketMQ 4.9: name server and broker 4.9.7 (the newest 4.9 broker Maven Central
    /// serves; its store is 4.9.8's), clients and mqadmin 4.9.8.
    Java4_9,
    /// Apache RocketMQ 5.5.0: name server, and the proxy in LOCAL mode with the broker inside.
    Java5,
    /// rocketmq-rust 1.0.0's name server and broker.
    RocketmqRust,
}

impl Flavour {
    /// A name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Java4_9 => "Apache RocketMQ 4.9",
            Flavour::Java5 => "Apache RocketMQ 5.x",
            Flavour::RocketmqRust => "rocketmq-rust",
        }
    }

    /// The Java release, for the real brokers.
    pub fn java(self) -> Option<JavaVersion> {
        match self {
            Flavour::Java4_9 => Some(JavaVersion::V4_9),
            Flavour::Java5 => Some(JavaVersion::V5),
            Flavour::RocketmqRust => None,
        }
    }

    /// Its programs are installed. Under CI their absence fails the test (for rocketmq-rust
    /// only when it was asked for: `RMQSTORE_ROCKETMQ_RUST=1`).
    pub fn ready(self) -> bool {
        match self.java() {
            Some(v) => java::ready(v),
            None => rocketmq_rust::ready(),
        }
    }

    /// Starts a name server and a broker with `options`, and waits until it is registered.
    pub fn start(self, options: Options) -> Box<dyn Cluster> {
        match self.java() {
            Some(v) => Box::new(java::JavaCluster::start(v, options)),
            None => Box::new(rocketmq_rust::RustCluster::start(options)),
        }
    }

    /// The properties the broker adds to a message it stores from a single send
    /// (SEND_MESSAGE_V2); the producer's `WAIT=true` is kept too unless
    /// [`Flavour::drops_wait`].
    pub fn added_properties(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Flavour::RocketmqRust | Flavour::Java5 => &[
                ("CLUSTER", CLUSTER),
                ("MSG_REGION", "DefaultRegion"),
                ("TRACE_ON", "true"),
            ],
            Flavour::Java4_9 => &[("CLUSTER", CLUSTER)],
        }
    }

    /// A single message's `WAIT=true` is not stored (4.9's SendMessageProcessor removes it to
    /// save 9 bytes a message).
    pub fn drops_wait(self) -> bool {
        self == Flavour::Java4_9
    }

    /// What each record of a batch (SEND_BATCH_MESSAGE) carries after the message's own
    /// properties: the header's (`WAIT`) and the broker's, or nothing (5.x stores a batch
    /// message's own properties alone).
    pub fn batch_adds_properties(self) -> bool {
        self != Flavour::Java5
    }
}

/// One test per flavour from one body: `on_every_broker!(fn name(flavour: Flavour) { ... })`,
/// or with more data the test needs, `on_every_broker!(#[needs(rmqstore_oracle)] fn ...)`.
/// Each is a `#[test]` in a module named after the test (`name::java_4_9`, `name::java_5`,
/// `name::rocketmq_rust`), ignored when the build found no such peer, skipped at run time (or
/// failed under CI) when it is gone.
#[macro_export]
macro_rules! on_every_broker {
    (
        $(#[doc = $doc:literal])*
        $(#[needs($($need:ident),*)])?
        fn $name:ident($flavour:ident: Flavour $(,)?) $body:block
    ) => {
        $(#[doc = $doc])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            use $crate::common::cluster::Flavour;

            fn run($flavour: Flavour) $body

            #[test]
            #[cfg_attr(
                not(all(rmqstore_java_4_9 $($(, $need)*)?)),
                ignore = "needs the Java 4.9 peer kit (tests/peers/java/install) and the test's data"
            )]
            fn java_4_9() {
                if Flavour::Java4_9.ready() {
                    run(Flavour::Java4_9)
                }
            }

            #[test]
            #[cfg_attr(
                not(all(rmqstore_java_5 $($(, $need)*)?)),
                ignore = "needs the Java 5.x peer kit (tests/peers/java/install) and the test's data"
            )]
            fn java_5() {
                if Flavour::Java5.ready() {
                    run(Flavour::Java5)
                }
            }

            #[test]
            #[cfg_attr(
                not(all(rmqstore_rocketmq_rust $($(, $need)*)?)),
                ignore = "needs rocketmq-rust (scripts/test-rocketmq-rust.sh) and the test's data"
            )]
            fn rocketmq_rust() {
                if Flavour::RocketmqRust.ready() {
                    run(Flavour::RocketmqRust)
                }
            }
        }
    };
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

/// `plain_acl.yml` with `accounts` (the 4.x plain ACL file both brokers read).
pub fn plain_acl_yml(accounts: &[Account]) -> String {
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

/// How the cluster is set up.
#[derive(Debug, Clone)]
pub struct Options {
    /// `autoCreateTopicEnable`: a send to a missing topic creates it from `TBW102`.
    pub auto_create_topics: bool,
    /// Authentication and authorization on, with these accounts in the ACL file.
    pub acl: Option<Vec<Account>>,
    /// The broker starts on this store (a copy the test made; the broker writes into it)
    /// instead of a new one in the cluster's directory. Real brokers only.
    pub store: Option<PathBuf>,
    /// More `broker.conf` lines (`key=value`): geometry, flush settings, ... Real brokers only.
    pub broker_conf: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            auto_create_topics: true,
            acl: None,
            store: None,
            broker_conf: Vec::new(),
        }
    }
}

/// What the tests see of a live cluster, whatever runs it.
pub trait Cluster {
    fn flavour(&self) -> Flavour;
    fn options(&self) -> &Options;
    fn namesrv_addr(&self) -> String;
    /// The broker's remoting address, as the name server routes it.
    fn broker_addr(&self) -> String;
    /// The broker's store root (commitlog, consume queues, config/).
    fn store_dir(&self) -> PathBuf;
    /// The cluster's own temporary directory: homes, configs, logs (every program it starts
    /// names it on its command line).
    fn dir(&self) -> PathBuf;
    /// SIGKILL the broker, as a crash or an operator's `kill -9`: its connections drop at once.
    fn kill_broker(&mut self);
    /// SIGTERM the broker and wait for it to exit (its shutdown hooks run).
    fn stop_broker(&mut self);
    /// Starts the broker again (after a stop or a kill; killing it first if it runs) on the
    /// same ports and store, and waits until it answers and is registered again.
    fn restart_broker(&mut self);
    /// The programs' logs, for a failure message.
    fn logs(&self) -> String;

    /// [`rpc`] to the broker, signed with the first admin account when ACL is on.
    fn call_broker(&self, mut request: RemotingCommand, body: &[u8]) -> std::io::Result<Reply> {
        let admin = self.options().acl.iter().flatten().find(|a| a.admin);
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
    fn create_topic(&self, topic: &str, queues: i32) {
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
        // a real broker registers a new topic with the name server at once (in its own
        // thread), rocketmq-rust within milliseconds
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.route(topic).is_none() {
            assert!(Instant::now() < deadline, "{topic} was not routed in 15 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// GET_BROKER_CLUSTER_INFO from the name server.
    fn cluster_info(&self) -> std::io::Result<ClusterInfo> {
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

    /// The broker answers on its port and the name server lists it at that address.
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

    /// GET_ROUTEINFO_BY_TOPIC from the name server; `None` when it answers TOPIC_NOT_EXIST (or
    /// routes the topic to no broker).
    fn route(&self, topic: &str) -> Option<TopicRouteData> {
        let mut req = command(codes::GET_ROUTEINFO_BY_TOPIC, &[]);
        req.write_header(&GetRouteInfoRequestHeader {
            topic: topic.into(),
            ..Default::default()
        });
        let r = rpc(&self.namesrv_addr(), &req, &[]).ok()?;
        if r.command.code != codes::SUCCESS {
            return None;
        }
        let route = TopicRouteData::from_json(&r.body).unwrap();
        (!route.broker_datas.is_empty()).then_some(route)
    }

    /// Every message of `topic` on the broker, queue by queue in offset order, as stored
    /// (PULL_MESSAGE with our codec; bodies as stored, properties byte for byte).
    fn pull_all(&self, topic: &str) -> Vec<Message> {
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
    fn all_topic_config(&self) -> serde_json::Value {
        let r = self
            .call_broker(command(codes::GET_ALL_TOPIC_CONFIG, &[]), &[])
            .unwrap();
        assert_eq!(r.command.code, codes::SUCCESS, "{:?}", r.command);
        serde_json::from_slice(&r.body).unwrap()
    }

    /// One topic's config on the broker (`topicName`, `readQueueNums`, `writeQueueNums`,
    /// `perm`, ...), if it has the topic.
    fn topic_config(&self, topic: &str) -> Option<serde_json::Value> {
        let all = self.all_topic_config();
        all["topicConfigTable"].get(topic).cloned()
    }

    /// GET_MAX_OFFSET of one queue.
    fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
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
        let next = r
            .command
            .read_header::<PullMessageResponseHeader>()
            .unwrap_or_else(|e| panic!("pull {topic}:{queue_id} at {offset}: {e}: {r:?}"))
            .next_begin_offset;
        // a real broker answers PULL_OFFSET_MOVED (22) for units it skips, with the next offset
        if r.command.code != codes::SUCCESS {
            assert!(
                next > offset,
                "pull {topic}:{queue_id} at {offset}: {:?}",
                r.command
            );
            return (next, Vec::new());
        }
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

    /// Polls `topic` until it holds `n` messages (at most `within`): a broker acknowledges a
    /// send once the commitlog has it, and dispatches it into the consume queue a moment later.
    fn wait_for(&self, topic: &str, n: usize, within: Duration) -> Vec<Message> {
        let deadline = Instant::now() + within;
        loop {
            let got = self.pull_all(topic);
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A boxed cluster is a cluster (what [`Flavour::start`] returns goes where `&dyn Cluster` is
/// asked for).
impl<T: Cluster + ?Sized> Cluster for Box<T> {
    fn flavour(&self) -> Flavour {
        (**self).flavour()
    }
    fn options(&self) -> &Options {
        (**self).options()
    }
    fn namesrv_addr(&self) -> String {
        (**self).namesrv_addr()
    }
    fn broker_addr(&self) -> String {
        (**self).broker_addr()
    }
    fn store_dir(&self) -> PathBuf {
        (**self).store_dir()
    }
    fn dir(&self) -> PathBuf {
        (**self).dir()
    }
    fn kill_broker(&mut self) {
        (**self).kill_broker()
    }
    fn stop_broker(&mut self) {
        (**self).stop_broker()
    }
    fn restart_broker(&mut self) {
        (**self).restart_broker()
    }
    fn logs(&self) -> String {
        (**self).logs()
    }
}

/// Waits until `cluster` is registered, failing the test with the logs when one of `peers`
/// exits or the time runs out.
pub fn wait_registered(cluster: &dyn Cluster, peers: &[(&str, &Peer)]) {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if cluster.registered() {
            return;
        }
        for (name, peer) in peers {
            if !peer.running() {
                panic!(
                    "{}: the {name} exited while starting:\n{}",
                    cluster.flavour().name(),
                    peer.log_tail()
                );
            }
        }
        if Instant::now() > deadline {
            panic!(
                "{}: the broker did not register within {START_TIMEOUT:?}\n{}",
                cluster.flavour().name(),
                cluster.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One program under its supervisor: the supervisor's stdin is the pipe that keeps the program
/// alive; a line written to it is a signal name to send the program.
pub struct Peer {
    supervisor: Mutex<Child>,
    control: Option<ChildStdin>,
    log: PathBuf,
    /// More log files, quoted after `log` when the program fails.
    pub more_logs: Vec<PathBuf>,
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
    /// Starts `program` with `args` and `env`, its output appended to `log`.
    pub fn spawn(program: &Path, args: &[String], env: &[(&str, &Path)], log: PathBuf) -> Peer {
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let err = out.try_clone().unwrap();
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(SUPERVISE)
            .arg("sh")
            .arg(program)
            .args(args)
            .env_remove("NAMESRV_ADDR")
            .env_remove("JAVA_TOOL_OPTIONS")
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut supervisor = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let control = supervisor.stdin.take();
        Peer {
            supervisor: Mutex::new(supervisor),
            control,
            log,
            more_logs: Vec::new(),
        }
    }

    /// Still running?
    pub fn running(&self) -> bool {
        let mut child = self.supervisor.lock().unwrap_or_else(|e| e.into_inner());
        matches!(child.try_wait(), Ok(None))
    }

    /// Sends `signal` (SIGTERM: `TERM`), or SIGKILL when `None`, and waits for the exit (a
    /// program that ignores the signal for `patience` is killed).
    pub fn stop(&mut self, signal: Option<&str>, patience: Duration) {
        match (signal, self.control.as_mut()) {
            (Some(s), Some(c)) => {
                let _ = writeln!(c, "{s}");
                let _ = c.flush();
            }
            _ => drop(self.control.take()),
        }
        let deadline = Instant::now() + patience;
        while self.running() {
            if Instant::now() > deadline {
                drop(self.control.take());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(self.control.take());
    }

    /// The last 40 lines of the log (and of each of `more_logs`), without colour codes.
    pub fn log_tail(&self) -> String {
        let mut out = String::new();
        for log in std::iter::once(&self.log).chain(&self.more_logs) {
            let text = strip_colours(&std::fs::read_to_string(log).unwrap_or_default());
            let lines: Vec<&str> = text.lines().collect();
            if self.log != *log {
                out.push_str(&format!("--- {}\n", log.display()));
            }
            out.push_str(&lines[lines.len().saturating_sub(40)..].join("\n"));
            out.push('\n');
        }
        out
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.control.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let child = self.supervisor.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
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

/// Free loopback ports for a cluster: the name server's, the broker's listen port (with the
/// one two below it free too: a broker's second, "fast" listener binds port - 2, and the one
/// above it, 4.9's default HA port) and its HA port, and `more` others (a proxy's). All are
/// held while they are chosen, so they differ; a program started right after binds them (a
/// race with other programs is possible, rare). The broker's port is taken below the kernel's
/// ephemeral range: there the ports around it are not taken by outgoing connections, which
/// under load (a producer reconnecting to a killed broker) hold most ephemeral ports.
pub struct Ports {
    pub namesrv: u16,
    pub broker: u16,
    pub ha: u16,
    pub more: Vec<u16>,
}

pub fn free_ports(more: usize) -> Ports {
    static NEXT: AtomicI32 = AtomicI32::new(0);
    let bind = |port: u16| TcpListener::bind(("127.0.0.1", port));
    let namesrv = bind(0).unwrap();
    let ha = bind(0).unwrap();
    let others: Vec<TcpListener> = (0..more).map(|_| bind(0).unwrap()).collect();
    let port_of = |l: &TcpListener| l.local_addr().unwrap().port();
    // test processes running side by side start at different places of 12000..32000
    let seed = std::process::id() as i32 % 4000 * 5;
    for _ in 0..4000 {
        let port = (12_000 + (seed + NEXT.fetch_add(5, Ordering::Relaxed)) % 20_000) as u16;
        let Ok(listen) = bind(port) else { continue };
        if bind(port - 2).is_ok() && bind(port + 1).is_ok() {
            return Ports {
                namesrv: port_of(&namesrv),
                broker: port_of(&listen),
                ha: port_of(&ha),
                more: others.iter().map(port_of).collect(),
            };
        }
    }
    panic!("no free ports two apart");
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
