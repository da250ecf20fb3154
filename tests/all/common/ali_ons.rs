//! ali-ons, the Node.js RocketMQ 4.x client from the npm registry (`tests/clients/ali-ons`,
//! installed by `.ci/run`): [`consume`] drains a topic with its push consumer and [`produce`]
//! sends messages with its producer, each through a name server address (`rmqstore serve` or a
//! live cluster). Both speak JSON lines; the fields are described at the top of the scripts.
//!
//! rocketmq-rust's servers close a connection whose JSON headers lack `serializeTypeCurrentRPC`
//! or carry numbers among the `extFields` values, as ali-ons writes them (Java writes the field
//! and strings only); `header_field.js` writes them as Java does when asked: always for
//! [`produce`], with [`Consume::serialize_type_field`] for [`consume`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

pub fn client_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/ali-ons")
}

/// The client is installed and node runs; under CI its absence fails the test.
pub fn ready() -> bool {
    let installed = client_dir()
        .join("node_modules/ali-ons/package.json")
        .is_file();
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if installed && node {
        return true;
    }
    let why = format!(
        "ali-ons is not installed (run `npm ci --prefix {}`) or node is missing",
        client_dir().display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    false
}

/// What `consume.js` is told.
#[derive(Debug, Clone)]
pub struct Consume<'a> {
    pub namesrv: &'a str,
    pub group: &'a str,
    pub topic: &'a str,
    /// Fail the first delivery of messages at queue offsets ≡ 3 (mod this), and every
    /// redelivery; 0 fails nothing.
    pub fail_mod: u32,
    pub max_reconsume: u32,
    /// Stop after this long without a delivery, once one arrived.
    pub idle_ms: u64,
    /// Give up after this long without any delivery.
    pub start_ms: u64,
    /// Stop once this many deliveries arrived; 0: no limit.
    pub max: usize,
    /// Plain-ACL access and secret key.
    pub acl: Option<(&'a str, &'a str)>,
    /// Write the headers as Java does, with `serializeTypeCurrentRPC` and string values
    /// (needed by a live rocketmq-rust cluster; `serve` takes both forms).
    pub serialize_type_field: bool,
}

impl<'a> Consume<'a> {
    /// Everything of `topic` as group `group`, from the first offset, stopping 3 s after the
    /// last delivery (or 30 s without any).
    pub fn all(namesrv: &'a str, group: &'a str, topic: &'a str) -> Self {
        Consume {
            namesrv,
            group,
            topic,
            fail_mod: 0,
            max_reconsume: 16,
            idle_ms: 3000,
            start_ms: 30_000,
            max: 0,
            acl: None,
            serialize_type_field: false,
        }
    }
}

/// Runs `consume.js`; its deliveries, in the order they arrived.
pub fn consume(c: &Consume<'_>) -> Vec<Value> {
    let mut cmd = Command::new("node");
    cmd.arg(client_dir().join("consume.js"))
        .env("NAMESRV", c.namesrv)
        .env("GROUP", c.group)
        .env("TOPIC", c.topic)
        .env("FAIL_MOD", c.fail_mod.to_string())
        .env("MAX_RECONSUME", c.max_reconsume.to_string())
        .env("IDLE_MS", c.idle_ms.to_string())
        .env("START_MS", c.start_ms.to_string())
        .env("MAX", c.max.to_string())
        .stderr(Stdio::inherit());
    if let Some((ak, sk)) = c.acl {
        cmd.env("ACCESS_KEY", ak).env("SECRET_KEY", sk);
    }
    if c.serialize_type_field {
        cmd.env("SERIALIZE_TYPE_FIELD", "1");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "consume.js failed");
    json_lines(&out.stdout)
}

/// Runs `produce.js` with `messages` (the objects it reads: topic, body in base64, tags, keys,
/// properties, delayLevel, shardingKey) through producer group `group`; one answer per message
/// (sendStatus, msgId, queueId, queueOffset, or error).
pub fn produce(
    namesrv: &str,
    group: &str,
    acl: Option<(&str, &str)>,
    messages: &[Value],
) -> Vec<Value> {
    let mut cmd = Command::new("node");
    cmd.arg(client_dir().join("produce.js"))
        .env("NAMESRV", namesrv)
        .env("GROUP", group)
        .env("SERIALIZE_TYPE_FIELD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some((ak, sk)) = acl {
        cmd.env("ACCESS_KEY", ak).env("SECRET_KEY", sk);
    }
    let mut child = cmd.spawn().unwrap();
    let mut input = String::new();
    for m in messages {
        input.push_str(&m.to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "produce.js failed");
    let answers = json_lines(&out.stdout);
    assert_eq!(
        answers.len(),
        messages.len(),
        "produce.js answered {answers:?}"
    );
    answers
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
