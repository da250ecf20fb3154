//! The real Apache RocketMQ beside the tests, from the Java peer kit (`tests/peers/java`):
//! `tests/peers/java/install` (run by `.ci/run`) resolves the name servers, brokers, proxy,
//! mqadmin and Java clients from Maven Central into `$RMQSTORE_PEERS/java` (default
//! `~/.cache/rmqstore-peers/java`) and compiles our driver (`rmqstore.peer.Driver`) against
//! each release's clients. The build script sets `rmqstore_java_4_9` and `rmqstore_java_5`
//! when a release's kits are complete (their `ok` stamps) and `java` runs.
//!
//! Releases ([`JavaVersion`]): 4.9 is the name server and broker **4.9.7** (Maven Central
//! serves no `rocketmq-namesrv` or `rocketmq-broker` 4.9.8; the `store` module's sources are the
//! same in both tags, the broker differs only in the validation of config updates and one
//! removed ACL request) with clients, mqadmin and the store at **4.9.8**; 5.x is **5.5.0**
//! throughout (5.5.1 has no name server, proxy, tools or client on Maven Central) with the
//! gRPC client `rocketmq-client-java` 5.2.0.
//!
//! - [`JavaCluster::start`]: a name server and a broker (for 5.x the proxy in LOCAL mode, the
//!   broker inside it, with its remoting and gRPC ports) on free loopback ports, `ROCKETMQ_HOME`,
//!   `user.home`, store and logs in a temporary directory (or the store a test gives it);
//!   returns when the broker is registered; everything is killed on drop and when the test
//!   process dies (common/cluster.rs's supervisor).
//! - [`JavaStore::load`]: a store copy opened by the real `DefaultMessageStore` as a broker
//!   opens it (`load()`, the normal or abnormal recovery, `start()`, the dispatch of what the
//!   consume queues lack), and what it answers: queue bounds, every consume queue unit's
//!   message (`getMessage`), index lookups, exceptions.
//! - [`consume`], [`produce`], [`mqadmin`]: the real Java clients and admin tool.
//!
//! # What the Java brokers do differently from rocketmq-rust (pinned by tests/all/cluster.rs)
//! The list of what rocketmq-rust does is in common/rocketmq_rust.rs; these are the facts the
//! real brokers answer otherwise. `send` relies on the properties, the UNIQ_KEY, the limits,
//! delays, timers and ACL answers; none of them changes what `serve` answers.
//! - Properties of a single send (SEND_MESSAGE_V2): 4.9 adds `CLUSTER` alone and removes the
//!   producer's `WAIT=true`; 5.x adds `CLUSTER`, `MSG_REGION` and `TRACE_ON` and keeps `WAIT`, as
//!   rocketmq-rust does.
//! - A batch (SEND_BATCH_MESSAGE): 4.9 appends the header's properties (`WAIT`) and `CLUSTER`
//!   to each message's own (a missing final separator added), as rocketmq-rust does; 5.x stores
//!   each message's properties exactly as sent, nothing added.
//! - UNIQ_KEY: 4.9 stores a single message without one as it came and answers no
//!   `transactionId` for a plain message; 5.x gives it one and answers it as the transaction id.
//! - An empty body: 4.9 stores it, 5.x answers SYSTEM_ERROR (a NullPointerException: the frame
//!   has no body); rocketmq-rust MESSAGE_ILLEGAL.
//! - A body over 4 MiB is MESSAGE_ILLEGAL with the words `the message is illegal, maybe msg
//!   body or properties length not matched. msg body length limit 4194304B, msg properties
//!   length limit 32KB.`; a batch whose body is over 4 MiB is MESSAGE_ILLEGAL on 4.9 and a
//!   SYSTEM_ERROR on 5.x (`java.lang.RuntimeException: message body size exceeded`), which a
//!   producer retries.
//! - A batch to a `%RETRY%` topic: 4.9 takes it; 5.x refuses it (MESSAGE_ILLEGAL, `batch request
//!   does not support retry group ...`), as rocketmq-rust does.
//! - A queue id beyond the topic's: 5.x answers INVALID_PARAMETER (29), 4.9 SYSTEM_ERROR.
//! - TOPIC_NOT_EXIST's words go on with where to read more (`\nSee
//!   http://rocketmq.apache.org/docs/faq/ for further details.`, 5.x another address).
//! - `DELAY` that is no number is a SYSTEM_ERROR (`java.lang.NumberFormatException`), not
//!   stored at once; a delayed message delivered to its topic keeps `DELAY` and gets no
//!   `WAIT=false`.
//! - Timers: 4.9 has none: `TIMER_DELIVER_MS` is a property like any other and the message is
//!   stored at once, so a 5.x timer sent to a 4.9 broker is delivered at once. 5.x stores a
//!   past `TIMER_DELIVER_MS` at once in its topic (rocketmq-rust refuses it) and refuses one
//!   that is no number; a delivered copy keeps what it asked (`TIMER_DELIVER_MS` or
//!   `TIMER_DELAY_SEC`) and gains `TIMER_OUT_MS`, `TIMER_ENQUEUE_MS` and `TIMER_DEQUEUE_MS`,
//!   no `TIMER_DELIVERY_TOKEN`, no `WAIT`.
//! - ACL: 4.9 (plain ACL, `aclEnable`) refuses with SYSTEM_ERROR and the AclException's words
//!   (`No default permission for topic:T`, `Check signature failed for accessKey=K`, `No acl
//!   config for K`, `No accessKey is configured`); 5.x (ACL 2.0, the 4.x accounts migrated) with
//!   NO_PERMISSION (`User:K has no permission to access Topic:T from ADDR, no matched
//!   policies.`, `check signature failed.`, `User:K is not found.`, `username cannot be
//!   null.`). Neither name server checks.
//! - Both keep every acknowledged message over SIGKILL and SIGTERM and come back on the same
//!   address; the name server drops a broker as soon as its connection closes, as with
//!   rocketmq-rust. A SIGTERM takes about 6 s (4.9) and 19 s (5.x proxy) to finish.
//!
//! Costs on 2 cores: see README ("Tests").

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rmqstore::format::commitlog::MessageRef;
use serde_json::Value;

use super::cluster::{
    free_ports, plain_acl_yml, wait_registered, Cluster, Flavour, Options, Peer, Ports,
    BROKER_NAME, CLUSTER,
};

/// A release of Apache RocketMQ the kit has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JavaVersion {
    V4_9,
    V5,
}

impl JavaVersion {
    pub const ALL: [JavaVersion; 2] = [JavaVersion::V4_9, JavaVersion::V5];

    /// The kit holding the name server and broker (and the proxy).
    fn server_kit(self) -> &'static str {
        match self {
            JavaVersion::V4_9 => "broker-4.9",
            JavaVersion::V5 => "5.x",
        }
    }

    /// The kit holding the clients, mqadmin, the store and our driver.
    fn client_kit(self) -> &'static str {
        match self {
            JavaVersion::V4_9 => "client-4.9",
            JavaVersion::V5 => "5.x",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            JavaVersion::V4_9 => "4.9",
            JavaVersion::V5 => "5.x",
        }
    }

    pub fn flavour(self) -> Flavour {
        match self {
            JavaVersion::V4_9 => Flavour::Java4_9,
            JavaVersion::V5 => Flavour::Java5,
        }
    }
}

/// `$RMQSTORE_PEERS/java`, where the build looked for the kits.
pub fn java_root() -> PathBuf {
    PathBuf::from(env!("RMQSTORE_PEERS_JAVA"))
}

fn kit(name: &str) -> PathBuf {
    java_root().join(name)
}

/// A kit is complete when the install wrote its stamp.
fn kit_ready(name: &str) -> bool {
    kit(name).join("ok").is_file()
}

/// The release's kits are installed and `java` runs. Under CI their absence fails the test.
pub fn ready(v: JavaVersion) -> bool {
    let kits = kit_ready(v.server_kit()) && kit_ready(v.client_kit());
    let java = Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if kits && java {
        return true;
    }
    let why = format!(
        "the Java {} peer kit is not in {} or java does not run (tests/peers/java/install)",
        v.label(),
        java_root().display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    false
}

/// What JDK 17 needs for the store (mapped buffers, their cleaner) and netty.
const JDK17_OPENS: [&str; 10] = [
    "--add-exports",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
];

/// The `java` arguments of a server of `kit`: JDK 17's opens, its home, a serial collector, a
/// heap of `heap_mb`, a quick start, the classpath.
fn server_jvm(kit_name: &str, home: &Path, heap_mb: u32) -> Vec<String> {
    let mut a: Vec<String> = JDK17_OPENS.iter().map(|s| s.to_string()).collect();
    a.extend([
        format!("-Drocketmq.home.dir={}", home.display()),
        format!("-Duser.home={}", home.display()),
        "-XX:+UseSerialGC".into(),
        "-Xms64m".into(),
        format!("-Xmx{heap_mb}m"),
        "-XX:MaxDirectMemorySize=512m".into(),
        "-Djava.net.preferIPv4Stack=true".into(),
        // TLS's default "permissive" mode makes a self-signed certificate at every start,
        // seconds on 2 cores; C1 alone starts a server in a third of the time
        "-Dtls.server.mode=disabled".into(),
        "-XX:TieredStopAtLevel=1".into(),
        "-cp".into(),
        format!("{}/*", kit(kit_name).join("lib").display()),
    ]);
    a
}

/// `java` with the client kit's arguments (`driver/jvm.args`, which the install writes: JDK 17's
/// opens, flags for a quick start, the class-data archive made for our driver and the
/// classpath, our driver first); logs and the clients' local files go under `home`.
fn client_java(v: JavaVersion, home: &Path) -> Command {
    let k = kit(v.client_kit());
    let mut c = Command::new("java");
    c.arg(format!("@{}", k.join("driver/jvm.args").display()))
        .arg(format!("-Duser.home={}", home.display()))
        .arg(format!("-Drocketmq.home.dir={}", home.display()))
        .arg(format!(
            "-Drocketmq.client.logRoot={}",
            home.join("logs").display()
        ))
        .args(["-Xss512k", "-Xmx512m", "-Djava.net.preferIPv4Stack=true"])
        .env_remove("NAMESRV_ADDR")
        .env_remove("JAVA_TOOL_OPTIONS")
        .env("ROCKETMQ_HOME", home);
    std::fs::create_dir_all(home.join("conf")).unwrap();
    // 4.9's mqadmin reads its log configuration from the home, as the servers do
    std::fs::write(
        home.join("conf/logback_tools.xml"),
        logback_xml(&home.join("logs/tools.log")),
    )
    .unwrap();
    c
}

/// A file appender under `logs`, for the 4.9 name server and broker (they read
/// `$ROCKETMQ_HOME/conf/logback_<name>.xml` and stop without it).
fn logback_xml(log: &Path) -> String {
    format!(
        r#"<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{24}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"#,
        log.display()
    )
}

/// A name server and one broker of a Java release (`DefaultCluster`, `broker-a`, master).
pub struct JavaCluster {
    version: JavaVersion,
    dir: tempfile::TempDir,
    options: Options,
    ports: Ports,
    store: PathBuf,
    namesrv: Peer,
    /// The broker (for 5.x the proxy in LOCAL mode, the broker inside it).
    broker: Option<Peer>,
}

impl JavaCluster {
    pub fn start(version: JavaVersion, options: Options) -> JavaCluster {
        let dir = tempfile::tempdir().unwrap();
        let ports = free_ports(2);
        let store = options
            .store
            .clone()
            .unwrap_or_else(|| dir.path().join("store"));
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("conf")).unwrap();
        std::fs::create_dir_all(home.join("logs")).unwrap();
        for name in ["namesrv", "broker"] {
            let log = home.join("logs").join(format!("{name}.log"));
            std::fs::write(
                home.join(format!("conf/logback_{name}.xml")),
                logback_xml(&log),
            )
            .unwrap();
        }
        let ns_conf = home.join("conf/namesrv.properties");
        std::fs::write(&ns_conf, format!("listenPort={}\n", ports.namesrv)).unwrap();
        let mut args = server_jvm(version.server_kit(), &home, 256);
        args.extend([
            "org.apache.rocketmq.namesrv.NamesrvStartup".into(),
            "-c".into(),
            ns_conf.display().to_string(),
        ]);
        let mut namesrv = Peer::spawn(
            Path::new("java"),
            &args,
            &[],
            dir.path().join("namesrv.out"),
        );
        namesrv.more_logs = vec![home.join("logs/namesrv.log")];
        let mut cluster = JavaCluster {
            version,
            dir,
            options,
            ports,
            store,
            namesrv,
            broker: None,
        };
        cluster.write_configs();
        cluster.start_broker();
        cluster
    }

    pub fn version(&self) -> JavaVersion {
        self.version
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The 5.x proxy's remoting port (4.x clients through the proxy).
    pub fn proxy_remoting_addr(&self) -> Option<String> {
        (self.version == JavaVersion::V5).then(|| format!("127.0.0.1:{}", self.ports.more[0]))
    }

    /// The 5.x proxy's gRPC port (the 5.x SDKs).
    pub fn proxy_grpc_addr(&self) -> Option<String> {
        (self.version == JavaVersion::V5).then(|| format!("127.0.0.1:{}", self.ports.more[1]))
    }

    /// `broker.conf` (and for 5.x `rmq-proxy.json`), the ACL file when asked for.
    fn write_configs(&self) {
        let home = self.home();
        let o = &self.options;
        let mut conf: Vec<(String, String)> = [
            ("brokerClusterName", CLUSTER.to_string()),
            ("brokerName", BROKER_NAME.to_string()),
            ("brokerId", "0".into()),
            ("brokerRole", "ASYNC_MASTER".into()),
            ("listenPort", self.ports.broker.to_string()),
            ("haListenPort", self.ports.ha.to_string()),
            ("namesrvAddr", self.namesrv_addr()),
            ("brokerIP1", "127.0.0.1".into()),
            ("storePathRootDir", self.store.display().to_string()),
            (
                "storePathCommitLog",
                self.store.join("commitlog").display().to_string(),
            ),
            ("autoCreateTopicEnable", o.auto_create_topics.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if o.acl.is_some() {
            conf.extend(acl_conf(self.version));
        }
        conf.extend(o.broker_conf.iter().cloned());
        let text: String = conf.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        std::fs::write(home.join("conf/broker.conf"), text).unwrap();
        if let Some(accounts) = &o.acl {
            std::fs::write(home.join("conf/plain_acl.yml"), plain_acl_yml(accounts)).unwrap();
        }
        if self.version == JavaVersion::V5 {
            let proxy = serde_json::json!({
                "rocketMQClusterName": CLUSTER,
                "namesrvAddr": self.namesrv_addr(),
                "remotingListenPort": self.ports.more[0],
                "grpcServerPort": self.ports.more[1],
            });
            std::fs::write(home.join("conf/rmq-proxy.json"), proxy.to_string()).unwrap();
        }
    }

    fn start_broker(&mut self) {
        let home = self.home();
        let conf = home.join("conf/broker.conf").display().to_string();
        let mut args = server_jvm(self.version.server_kit(), &home, 768);
        match self.version {
            JavaVersion::V4_9 => args.extend([
                "org.apache.rocketmq.broker.BrokerStartup".into(),
                "-c".into(),
                conf,
            ]),
            JavaVersion::V5 => args.extend([
                "org.apache.rocketmq.proxy.ProxyStartup".into(),
                "-pm".into(),
                "local".into(),
                "-pc".into(),
                home.join("conf/rmq-proxy.json").display().to_string(),
                "-bc".into(),
                conf,
            ]),
        }
        let out = self.dir.path().join("broker.out");
        let mut broker = Peer::spawn(Path::new("java"), &args, &[], out.clone());
        broker.more_logs = match self.version {
            JavaVersion::V4_9 => vec![home.join("logs/broker.log")],
            JavaVersion::V5 => vec![
                home.join("logs/rocketmqlogs/broker.log"),
                home.join("logs/rocketmqlogs/proxy.log"),
            ],
        };
        wait_registered(self, &[("name server", &self.namesrv), ("broker", &broker)]);
        if self.version == JavaVersion::V5 {
            // the proxy opens its ports after the broker inside it has registered
            wait_for_line(&broker, &out, "rocketmq-proxy startup successfully");
        }
        self.broker = Some(broker);
    }
}

/// The `broker.conf` lines that turn on ACL with the accounts of `conf/plain_acl.yml`: 4.9's
/// plain ACL; 5.x's ACL 2.0 (RIP-68: users and policies in RocksDB under the store's
/// `config/`), which takes the 4.x file's accounts when it starts (`migrateAuthFromV1Enabled`)
/// and checks the 4.x clients' signatures.
fn acl_conf(v: JavaVersion) -> Vec<(String, String)> {
    let lines: &[(&str, &str)] = match v {
        JavaVersion::V4_9 => &[("aclEnable", "true")],
        JavaVersion::V5 => &[
            ("authenticationEnabled", "true"),
            ("authorizationEnabled", "true"),
            (
                "authenticationMetadataProvider",
                "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
            ),
            (
                "authorizationMetadataProvider",
                "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
            ),
            ("migrateAuthFromV1Enabled", "true"),
        ],
    };
    lines
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Waits until `log` has a line containing `text`, failing with the log when `peer` exits or
/// the start takes too long.
fn wait_for_line(peer: &Peer, log: &Path, text: &str) {
    let deadline = Instant::now() + super::cluster::START_TIMEOUT;
    while !std::fs::read_to_string(log).is_ok_and(|s| s.contains(text)) {
        assert!(
            peer.running() && Instant::now() < deadline,
            "no \"{text}\" in {}:\n{}",
            log.display(),
            peer.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Cluster for JavaCluster {
    fn flavour(&self) -> Flavour {
        self.version.flavour()
    }

    fn options(&self) -> &Options {
        &self.options
    }

    fn namesrv_addr(&self) -> String {
        format!("127.0.0.1:{}", self.ports.namesrv)
    }

    fn broker_addr(&self) -> String {
        format!("127.0.0.1:{}", self.ports.broker)
    }

    fn store_dir(&self) -> PathBuf {
        self.store.clone()
    }

    fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    fn kill_broker(&mut self) {
        if let Some(mut b) = self.broker.take() {
            b.stop(None, Duration::from_secs(30));
        }
    }

    fn stop_broker(&mut self) {
        if let Some(mut b) = self.broker.take() {
            // the shutdown hooks flush and persist for a few seconds
            b.stop(Some("TERM"), Duration::from_secs(60));
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

impl Drop for JavaCluster {
    fn drop(&mut self) {
        drop(self.broker.take());
    }
}

// ---------------------------------------------------------------------------------------------
// the driver

/// The store geometry a Java store is opened with (MessageStoreConfig): the broker's defaults
/// unless a test's store was written with others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub commitlog_file_size: u64,
    pub cq_file_units: u64,
    pub index_slots: u64,
    pub index_entries: u64,
}

impl Geometry {
    /// `mappedFileSizeCommitLog` 1 GiB, 300,000 units a consume queue file, 5,000,000 index
    /// slots and 20,000,000 entries.
    pub const BROKER_DEFAULT: Geometry = Geometry {
        commitlog_file_size: 1 << 30,
        cq_file_units: 300_000,
        index_slots: 5_000_000,
        index_entries: 20_000_000,
    };

    /// The small files most tests write (common/bin.rs's `SMALL_GEOMETRY`).
    pub const SMALL: Geometry = Geometry {
        commitlog_file_size: 262_144,
        cq_file_units: 100,
        index_slots: 64,
        index_entries: 256,
    };

    /// An oracle store's `geometry.json`.
    pub fn of_oracle(dir: &Path) -> Geometry {
        let g: Value =
            serde_json::from_slice(&std::fs::read(dir.join("geometry.json")).unwrap()).unwrap();
        let n = |k: &str| g[k].as_u64().unwrap_or_else(|| panic!("{k} in {g}"));
        Geometry {
            commitlog_file_size: n("commitlog_file_size"),
            cq_file_units: n("cq_file_units"),
            index_slots: n("index_slots"),
            index_entries: n("index_entries"),
        }
    }

    /// The same as `broker.conf` lines.
    pub fn broker_conf(&self) -> Vec<(String, String)> {
        vec![
            (
                "mappedFileSizeCommitLog".into(),
                self.commitlog_file_size.to_string(),
            ),
            (
                "mappedFileSizeConsumeQueue".into(),
                (self.cq_file_units * 20).to_string(),
            ),
            ("maxHashSlotNum".into(), self.index_slots.to_string()),
            ("maxIndexNum".into(), self.index_entries.to_string()),
        ]
    }

    /// The same as rmqstore's flags.
    pub fn rmqstore_args(&self) -> Vec<String> {
        vec![
            "--commitlog-file-size".into(),
            self.commitlog_file_size.to_string(),
            "--cq-file-units".into(),
            self.cq_file_units.to_string(),
            "--index-slots".into(),
            self.index_slots.to_string(),
            "--index-entries".into(),
            self.index_entries.to_string(),
        ]
    }

    fn driver_args(&self) -> Vec<String> {
        self.rmqstore_args()
    }

    /// The `recovery` line of `verify --explain-recovery --json` on `store` read at this
    /// geometry: what rmqstore says the broker's next start does.
    pub fn explained_recovery(&self, store: &Path) -> Value {
        let mut args = vec![
            "verify".to_string(),
            store.display().to_string(),
            "--explain-recovery".into(),
            "--json".into(),
        ];
        args.extend(self.rmqstore_args());
        let out = super::bin().args(&args).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["type"] == "recovery")
            .unwrap_or_else(|| panic!("no recovery line: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// Runs the driver's `command` with `args`, and returns its JSON lines, failing the test with
/// its stderr when it exits with another status than 0 (or `allowed`).
fn run_driver(v: JavaVersion, command: &str, args: &[String], stdin: Option<&[u8]>) -> Vec<Value> {
    let home = tempfile::tempdir().unwrap();
    let mut c = client_java(v, home.path());
    c.arg("rmqstore.peer.Driver").arg(command).args(args);
    let out = output_of(c, stdin);
    let lines = json_lines(&out.stdout);
    if !out.status.success() {
        panic!(
            "driver {} {command} {args:?}: {}\nstdout:\n{}\nstderr:\n{}",
            v.label(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    lines
}

fn output_of(mut c: Command, stdin: Option<&[u8]>) -> Output {
    c.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().expect("java runs");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// What the Java store answers about a store copy, after its own recovery.
#[derive(Debug, Default)]
pub struct JavaStore {
    /// `{ok, abortBefore, millis}`: `load()`'s result and whether an `abort` file made the
    /// recovery abnormal.
    pub load: Value,
    /// `{minPhyOffset, maxPhyOffset, confirmOffset, dispatchBehindBytes, caughtUp}` once
    /// `start()`'s dispatch caught up.
    pub store: Value,
    /// (topic, queue) → (`getMinOffsetInQueue`, `getMaxOffsetInQueue`).
    pub queues: BTreeMap<(String, i32), (i64, i64)>,
    /// (topic, queue, queue offset) → the message `getMessage` returns there, in the oracle
    /// files' field names (`physicalOffset`, `properties`, `body` base64, ...).
    pub messages: BTreeMap<(String, i32, i64), Value>,
    /// `getMessage` answers other than FOUND: `{topic, queueId, offset, status, ...}`.
    pub not_found: Vec<Value>,
    /// `queryMessage` answers: `{topic, key, physicalOffsets}`.
    pub queries: Vec<Value>,
    /// Exceptions the store threw: `{step, exception}`.
    pub errors: Vec<Value>,
}

/// What [`JavaStore::open`] asks.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// The geometry; the broker's defaults when `None`.
    pub geometry: Option<Geometry>,
    /// Every consume queue unit's message too.
    pub messages: bool,
    /// `(topic, key)` index lookups.
    pub keys: Vec<(String, String)>,
    /// DLedger mode: `(group, self id)`; a free port is given to the member.
    pub dledger: Option<(String, String)>,
    /// At most this many offsets a lookup (`queryMessage`'s `maxNum`; the driver's default 64).
    pub query_max: Option<u32>,
    /// `shutdown()` at the end (it writes the checkpoint and removes `abort`); otherwise the
    /// driver halts and leaves the files as the recovery made them.
    pub shutdown: bool,
}

impl JavaStore {
    /// `copy` (which the store changes: its recovery truncates, dispatches, deletes) opened by
    /// the release's `DefaultMessageStore`, every message read back.
    pub fn load(copy: &Path, v: JavaVersion, geometry: Geometry) -> JavaStore {
        Self::open(
            copy,
            v,
            &LoadOptions {
                geometry: Some(geometry),
                messages: true,
                ..LoadOptions::default()
            },
        )
    }

    pub fn open(copy: &Path, v: JavaVersion, o: &LoadOptions) -> JavaStore {
        let mut args = vec!["--dir".to_string(), copy.display().to_string()];
        args.extend(o.geometry.unwrap_or(Geometry::BROKER_DEFAULT).driver_args());
        if o.messages {
            args.push("--messages".into());
        }
        for (topic, key) in &o.keys {
            args.push("--key".into());
            args.push(format!("{topic}={key}"));
        }
        if let Some((group, id)) = &o.dledger {
            let port = free_ports(0).namesrv;
            args.extend([
                "--dledger-group".into(),
                group.clone(),
                "--dledger-self-id".into(),
                id.clone(),
                "--dledger-peers".into(),
                format!("{id}-127.0.0.1:{port}"),
            ]);
        }
        if o.shutdown {
            args.push("--shutdown".into());
        }
        if let Some(n) = o.query_max {
            args.extend(["--query-max".into(), n.to_string()]);
        }
        args.extend(["--ha-port".into(), free_ports(0).ha.to_string()]);
        let mut s = JavaStore::default();
        for line in run_driver(v, "store", &args, None) {
            let at = |l: &Value| {
                (
                    l["topic"].as_str().unwrap().to_string(),
                    l["queueId"].as_i64().unwrap() as i32,
                )
            };
            match line["type"].as_str() {
                Some("load") => s.load = line,
                Some("store") => s.store = line,
                Some("queue") => {
                    let bounds = (
                        line["minOffsetInQueue"].as_i64().unwrap(),
                        line["maxOffsetInQueue"].as_i64().unwrap(),
                    );
                    s.queues.insert(at(&line), bounds);
                }
                Some("message") => {
                    let (topic, queue) = at(&line);
                    let offset = line["cqOffset"].as_i64().unwrap();
                    s.messages.insert((topic, queue, offset), line);
                }
                Some("get") => s.not_found.push(line),
                Some("query") => s.queries.push(line),
                Some("error") => s.errors.push(line),
                _ => {}
            }
        }
        s
    }

    /// The recovery was abnormal (an `abort` file was there).
    pub fn abnormal(&self) -> bool {
        self.load["abortBefore"] == true
    }
}

/// How [`consume`] consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeMode {
    /// `DefaultMQPushConsumer` with a concurrent listener.
    Push,
    /// `DefaultMQPushConsumer` with an orderly listener (queue locks).
    Orderly,
    /// `DefaultLitePullConsumer`, subscribed.
    LitePull,
    /// 5.x: the push consumer in POP mode.
    Pop,
}

impl ConsumeMode {
    fn arg(self) -> &'static str {
        match self {
            ConsumeMode::Push => "push",
            ConsumeMode::Orderly => "orderly",
            ConsumeMode::LitePull => "litepull",
            ConsumeMode::Pop => "pop",
        }
    }
}

/// What [`consume`] is told.
#[derive(Debug, Clone)]
pub struct Consume<'a> {
    pub namesrv: &'a str,
    pub group: &'a str,
    pub topic: &'a str,
    pub mode: ConsumeMode,
    /// A tag expression (`A || B`).
    pub tags: Option<&'a str>,
    /// An SQL92 expression.
    pub sql: Option<&'a str>,
    /// Stop once this many distinct messages arrived (0: no limit).
    pub expect: usize,
    /// Stop after this long without a delivery, once one arrived.
    pub idle_ms: u64,
    /// Give up after this long without any delivery.
    pub start_ms: u64,
    /// Fail the first delivery of messages at queue offsets ≡ 3 (mod this), and every
    /// redelivery; 0 fails nothing.
    pub fail_mod: u32,
    pub max_reconsume: u32,
}

impl<'a> Consume<'a> {
    /// Everything of `topic` as `group`, pushed, no failures.
    pub fn all(namesrv: &'a str, group: &'a str, topic: &'a str) -> Consume<'a> {
        Consume {
            namesrv,
            group,
            topic,
            mode: ConsumeMode::Push,
            tags: None,
            sql: None,
            expect: 0,
            idle_ms: 3000,
            start_ms: 30_000,
            fail_mod: 0,
            max_reconsume: 16,
        }
    }
}

/// Drains `c.topic` with the release's Java consumer: every delivery, in the order they came
/// (`{topic, queueId, queueOffset, msgId, offsetMsgId, keys, tags, properties, body, ...,
/// delivery}`).
pub fn consume(v: JavaVersion, c: &Consume) -> Vec<Value> {
    let mut args: Vec<String> = [
        "--namesrv",
        c.namesrv,
        "--group",
        c.group,
        "--topic",
        c.topic,
        "--mode",
        c.mode.arg(),
    ]
    .map(String::from)
    .to_vec();
    if let Some(t) = c.tags {
        args.extend(["--sub".into(), t.into()]);
    }
    if let Some(s) = c.sql {
        args.extend(["--sql".into(), s.into()]);
    }
    for (flag, n) in [
        ("--expect", c.expect as u64),
        ("--idle-ms", c.idle_ms),
        ("--start-ms", c.start_ms),
        ("--fail-mod", c.fail_mod as u64),
        ("--max-reconsume", c.max_reconsume as u64),
    ] {
        args.extend([flag.to_string(), n.to_string()]);
    }
    run_driver(v, "consume", &args, None)
        .into_iter()
        .filter(|l| l["type"] == "message")
        .collect()
}

/// What [`produce`] sends: `count` messages `start..start+count` of `size` bytes, tags taken
/// in turn, KEYS `k-<i>`, property `seq=<i>`.
#[derive(Debug, Clone)]
pub struct Produce<'a> {
    pub namesrv: &'a str,
    pub topic: &'a str,
    pub count: usize,
    pub start: usize,
    pub size: usize,
    /// Messages a `send(Collection)` (1: one at a time).
    pub batch: usize,
    pub threads: usize,
    pub tags: &'a [&'a str],
    /// Go on after a failure (while a test kills the broker).
    pub keep_going: bool,
}

impl<'a> Produce<'a> {
    pub fn new(namesrv: &'a str, topic: &'a str, count: usize) -> Produce<'a> {
        Produce {
            namesrv,
            topic,
            count,
            start: 0,
            size: 128,
            batch: 1,
            threads: 1,
            tags: &[],
            keep_going: false,
        }
    }

    fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "--namesrv".into(),
            self.namesrv.into(),
            "--topic".into(),
            self.topic.into(),
        ];
        for (flag, n) in [
            ("--count", self.count),
            ("--start", self.start),
            ("--size", self.size),
            ("--batch", self.batch),
            ("--threads", self.threads),
        ] {
            a.extend([flag.to_string(), n.to_string()]);
        }
        if !self.tags.is_empty() {
            a.extend(["--tags".into(), self.tags.join(",")]);
        }
        if self.keep_going {
            a.push("--keep-going".into());
        }
        a
    }
}

/// Sends with the release's `DefaultMQProducer`: one line per message (`{type: "sent", i,
/// msgId, offsetMsgId, queueId, queueOffset, status}` or `{type: "failed", i, error}`).
pub fn produce(v: JavaVersion, p: &Produce) -> Vec<Value> {
    run_driver(v, "produce", &p.args(), None)
        .into_iter()
        .filter(|l| l["type"] == "sent" || l["type"] == "failed")
        .collect()
}

/// 5.x: sends `count` messages with the gRPC `Producer` of rocketmq-client-java to the
/// proxy's gRPC `endpoint`: one `{type: "sent", i, messageId}` line per message.
pub fn grpc_produce(endpoint: &str, topic: &str, count: usize, tag: &str) -> Vec<Value> {
    let args = [
        "--endpoint",
        endpoint,
        "--topic",
        topic,
        "--count",
        &count.to_string(),
        "--tag",
        tag,
    ]
    .map(String::from);
    run_driver(JavaVersion::V5, "grpc-produce", &args, None)
        .into_iter()
        .filter(|l| l["type"] == "sent" || l["type"] == "failed")
        .collect()
}

/// 5.x: receives and acknowledges with the gRPC `SimpleConsumer` until `expect` messages
/// arrived or nothing came for `idle_ms`: the `message` lines (`messageId`, `topic`, `tag`,
/// `keys`, `properties`, `bodySha256`, `deliveryAttempt`, ...).
pub fn grpc_consume(endpoint: &str, group: &str, topic: &str, expect: usize) -> Vec<Value> {
    let args = [
        "--endpoint",
        endpoint,
        "--group",
        group,
        "--topic",
        topic,
        "--expect",
        &expect.to_string(),
        "--idle-ms",
        "5000",
    ]
    .map(String::from);
    run_driver(JavaVersion::V5, "grpc-consume", &args, None)
        .into_iter()
        .filter(|l| l["type"] == "message")
        .collect()
}

/// A producer running in the background, for a test that kills the broker under it.
pub struct Producing {
    child: std::process::Child,
    _home: tempfile::TempDir,
}

impl Producing {
    pub fn start(v: JavaVersion, p: &Produce) -> Producing {
        let home = tempfile::tempdir().unwrap();
        let mut c = client_java(v, home.path());
        c.arg("rmqstore.peer.Driver")
            .arg("produce")
            .args(p.args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Producing {
            child: c.spawn().expect("java runs"),
            _home: home,
        }
    }

    /// Stops it at once (SIGKILL) and returns the lines it wrote until then.
    pub fn kill(mut self) -> Vec<Value> {
        let _ = self.child.kill();
        self.finish()
    }

    /// Its lines once it ended (`sent` and `failed`).
    pub fn finish(self) -> Vec<Value> {
        let out = self.child.wait_with_output().unwrap();
        json_lines(&out.stdout)
            .into_iter()
            .filter(|l| l["type"] == "sent" || l["type"] == "failed")
            .collect()
    }
}

/// `mqadmin ARGS` (the release's `MQAdminStartup`): its stdout, failing the test when it
/// exits with another status than 0.
pub fn mqadmin(v: JavaVersion, args: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let mut c = client_java(v, home.path());
    c.arg("org.apache.rocketmq.tools.command.MQAdminStartup")
        .args(args);
    let out = output_of(c, None);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "mqadmin {args:?}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

// ---------------------------------------------------------------------------------------------
// comparing

/// `java` (a message in the Java store's words: the driver's `message` lines, the oracle
/// files' `messages.jsonl`) is `ours`, field by field: offsets, size, topic, queue, flags,
/// times, hosts, reconsume times, body (length, SHA-256, CRC), ids and every property.
pub fn assert_same_message(java: &Value, ours: &MessageRef<'_>, ctx: &str) {
    let n = |k: &str| {
        java[k]
            .as_i64()
            .unwrap_or_else(|| panic!("{ctx}: no {k} in {java}"))
    };
    let s = |k: &str| java[k].as_str().map(str::to_string);
    assert_eq!(ours.position as i64, n("physicalOffset"), "{ctx}: position");
    assert_eq!(
        ours.physical_offset,
        n("physicalOffset"),
        "{ctx}: PHYSICALOFFSET"
    );
    assert_eq!(ours.raw.len() as i64, n("size"), "{ctx}: size");
    assert_eq!(Some(ours.topic.to_string()), s("topic"), "{ctx}: topic");
    assert_eq!(ours.queue_id as i64, n("queueId"), "{ctx}: queue");
    assert_eq!(ours.queue_offset, n("queueOffset"), "{ctx}: queue offset");
    assert_eq!(ours.sys_flag as i64, n("sysFlag"), "{ctx}: sysflag");
    assert_eq!(
        ours.store_timestamp,
        n("storeTimestamp"),
        "{ctx}: store time"
    );
    assert_eq!(ours.born_timestamp, n("bornTimestamp"), "{ctx}: born time");
    assert_eq!(
        Some(super::java_host(&ours.born_host)),
        s("bornHost"),
        "{ctx}: born host"
    );
    assert_eq!(
        Some(super::java_host(&ours.store_host)),
        s("storeHost"),
        "{ctx}: store host"
    );
    assert_eq!(
        ours.prepared_transaction_offset,
        n("preparedTransactionOffset"),
        "{ctx}: prepared offset"
    );
    assert_eq!(
        ours.reconsume_times as i64,
        n("reconsumeTimes"),
        "{ctx}: reconsume times"
    );
    assert_eq!(ours.flag as i64, n("flag"), "{ctx}: flag");
    assert_eq!(ours.body.len() as i64, n("bodyLen"), "{ctx}: body length");
    assert_eq!(
        Some(super::sha256_hex(ours.body)),
        s("bodySha256"),
        "{ctx}: body"
    );
    assert_eq!(ours.body_crc as i64, n("bodyCRC"), "{ctx}: body CRC");
    assert_eq!(
        Some(ours.offset_msg_id()),
        s("offsetMsgId"),
        "{ctx}: offset id"
    );
    assert_eq!(
        ours.property("KEYS").map(|k| k.to_string()),
        s("keys"),
        "{ctx}: keys"
    );
    assert_eq!(
        ours.uniq_key().map(|k| k.to_string()),
        s("uniqKey"),
        "{ctx}: UNIQ_KEY"
    );
    let theirs: BTreeMap<String, String> = java["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{ctx}: no properties in {java}"))
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    assert_eq!(ours.properties.to_map(), theirs, "{ctx}: properties");
}
