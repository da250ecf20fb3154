//! The broker's plain ACL (`plain_acl.yml`, PROTOCOL.md 7.2): global white addresses,
//! accounts with a secret key, an optional white address, an admin flag, default topic and
//! group permissions and per-resource permissions. A request passes when its peer is white
//! listed, or it names a known access key, its signature matches, and the account may do what
//! the request does to each topic and group it names. Failures are answered `SYSTEM_ERROR`
//! with the Java exception text, as the broker answers them.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use serde::Deserialize;

use super::Refusal;
use crate::engine::store::dispatch::{retry_topic, RETRY_PREFIX};
use crate::remoting::acl::{self, AclError};
use crate::remoting::body::HeartbeatData;
use crate::remoting::codes;
use crate::remoting::RemotingCommand;

/// `Permission`: bits of what an account may do.
pub const DENY: u8 = 1;
pub const ANY: u8 = 2;
pub const PUB: u8 = 4;
pub const SUB: u8 = 8;

/// Why an ACL file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AclFileError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a plain_acl.yml: {source}")]
    Yaml {
        path: String,
        source: serde_yaml_ng::Error,
    },
    #[error("{path}: account {n}: {what}")]
    Account {
        path: String,
        n: usize,
        what: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AclFile {
    #[serde(default)]
    global_white_remote_addresses: Vec<String>,
    #[serde(default)]
    accounts: Vec<AccountFile>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AccountFile {
    #[serde(deserialize_with = "scalar")]
    access_key: String,
    #[serde(deserialize_with = "scalar")]
    secret_key: String,
    #[serde(default, deserialize_with = "opt_scalar")]
    white_remote_address: Option<String>,
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    default_topic_perm: Option<String>,
    #[serde(default)]
    default_group_perm: Option<String>,
    #[serde(default)]
    topic_perms: Vec<String>,
    #[serde(default)]
    group_perms: Vec<String>,
}

/// A YAML scalar as text: `secretKey: 12345678` is a number to YAML, a string to the broker.
fn scalar<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    opt_scalar(d)?.ok_or_else(|| serde::de::Error::custom("a value is required"))
}

fn opt_scalar<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    use serde_yaml_ng::Value;
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        other => Err(serde::de::Error::custom(format!(
            "expected a scalar, found {other:?}"
        ))),
    }
}

/// One account.
#[derive(Debug, Clone)]
pub struct Account {
    secret_key: String,
    white: Option<AddrPattern>,
    admin: bool,
    default_topic_perm: u8,
    default_group_perm: u8,
    /// Topics by name, groups as `%RETRY%<group>`.
    perms: BTreeMap<String, u8>,
}

/// The loaded ACL.
#[derive(Debug, Clone, Default)]
pub struct PlainAcl {
    global_white: Vec<AddrPattern>,
    accounts: BTreeMap<String, Account>,
}

/// `Permission.parsePermFromString`: unknown text denies.
pub fn parse_perm(text: &str) -> u8 {
    match text.trim().to_ascii_uppercase().as_str() {
        "PUB" => PUB,
        "SUB" => SUB,
        "PUB|SUB" | "SUB|PUB" => PUB | SUB,
        "ANY" => ANY,
        _ => DENY,
    }
}

/// `Permission.checkPermission`.
pub fn permits(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// A remote address pattern: `*`, `a.b.c.*`, `a.b.c.1-200`, `a.b.c.{1,2}`, exact, or a
/// comma-separated list of those. Blank matches nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrPattern(Vec<String>);

impl AddrPattern {
    pub fn parse(text: &str) -> Self {
        if text.contains('{') {
            return AddrPattern(vec![text.trim().to_string()]);
        }
        AddrPattern(
            text.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        )
    }

    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        let text = ip.to_string();
        self.0.iter().any(|p| one_matches(p, &text))
    }
}

fn one_matches(pattern: &str, ip: &str) -> bool {
    if pattern == "*" || pattern == ip {
        return true;
    }
    let pp: Vec<&str> = pattern.split('.').collect();
    let ip: Vec<&str> = ip.split('.').collect();
    if pp.len() != 4 || ip.len() != 4 {
        return false;
    }
    pp.iter().zip(&ip).all(|(p, part)| {
        if *p == "*" || p == part {
            return true;
        }
        let Ok(n) = part.parse::<u32>() else {
            return false;
        };
        if let Some(list) = p.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            return list.split(',').any(|x| x.trim().parse::<u32>() == Ok(n));
        }
        if let Some((lo, hi)) = p.split_once('-') {
            return match (lo.parse::<u32>(), hi.parse::<u32>()) {
                (Ok(lo), Ok(hi)) => (lo..=hi).contains(&n),
                _ => false,
            };
        }
        false
    })
}

/// `Permission.needAdminPerm`.
fn needs_admin(code: i32) -> bool {
    matches!(
        code,
        codes::UPDATE_AND_CREATE_TOPIC
            | codes::UPDATE_BROKER_CONFIG
            | codes::DELETE_TOPIC_IN_BROKER
            | codes::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
            | codes::DELETE_SUBSCRIPTIONGROUP
    )
}

/// The topics and groups (`%RETRY%<group>`) a request touches, with the permission needed
/// (`PlainAccessValidator.parse`).
fn needed(req: &RemotingCommand, body: &[u8]) -> Vec<(String, u8)> {
    let ext = |k: &str| req.ext_fields.get(k).map(str::to_string);
    let mut out = Vec::new();
    let mut add = |r: Option<String>, p: u8| {
        if let Some(r) = r {
            out.push((r, p));
        }
    };
    match req.code {
        codes::SEND_MESSAGE | codes::SEND_MESSAGE_V2 | codes::SEND_BATCH_MESSAGE => {
            let (topic, group) = if req.code == codes::SEND_MESSAGE {
                (ext("topic"), ext("group"))
            } else {
                (ext("b"), ext("a"))
            };
            match topic {
                Some(t) if t.starts_with(RETRY_PREFIX) => add(group.map(|g| retry_topic(&g)), SUB),
                t => add(t, PUB),
            }
        }
        codes::CONSUMER_SEND_MSG_BACK => add(ext("group").map(|g| retry_topic(&g)), SUB),
        codes::PULL_MESSAGE | codes::LITE_PULL_MESSAGE => {
            add(ext("topic"), SUB);
            add(ext("consumerGroup").map(|g| retry_topic(&g)), SUB);
        }
        codes::QUERY_MESSAGE => add(ext("topic"), SUB),
        codes::HEART_BEAT => {
            // a body over the limit is refused by the handler, unread
            let small = body.len() <= super::consumer::MAX_JSON_BODY;
            if let Some(hb) = small.then(|| HeartbeatData::from_json(body).ok()).flatten() {
                for c in hb.consumer_data_set {
                    add(Some(retry_topic(&c.group_name)), SUB);
                    for s in c.subscription_data_set {
                        add(Some(s.topic), SUB);
                    }
                }
            }
        }
        codes::UNREGISTER_CLIENT | codes::GET_CONSUMER_LIST_BY_GROUP => {
            add(ext("consumerGroup").map(|g| retry_topic(&g)), SUB)
        }
        codes::UPDATE_CONSUMER_OFFSET => {
            add(ext("consumerGroup").map(|g| retry_topic(&g)), SUB);
            add(ext("topic"), SUB);
        }
        _ => {}
    }
    out
}

fn refuse(text: String) -> Refusal {
    Refusal::new(codes::SYSTEM_ERROR, text)
}

impl PlainAcl {
    pub fn load(path: &Path) -> Result<Self, AclFileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| AclFileError::Read {
            path: p.clone(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            AclFileError::Yaml { source, .. } => AclFileError::Yaml { path: p, source },
            AclFileError::Account { n, what, .. } => AclFileError::Account { path: p, n, what },
            other => other,
        })
    }

    pub fn parse(text: &str) -> Result<Self, AclFileError> {
        let file: AclFile = serde_yaml_ng::from_str(text).map_err(|source| AclFileError::Yaml {
            path: String::new(),
            source,
        })?;
        let mut acl = PlainAcl {
            global_white: file
                .global_white_remote_addresses
                .iter()
                .map(|s| AddrPattern::parse(s))
                .collect(),
            accounts: BTreeMap::new(),
        };
        for (n, a) in file.accounts.into_iter().enumerate() {
            let bad = |what: String| AclFileError::Account {
                path: String::new(),
                n: n + 1,
                what,
            };
            if a.access_key.len() <= 6 || a.secret_key.len() <= 6 {
                return Err(bad(
                    "accessKey and secretKey must be longer than 6 characters".into(),
                ));
            }
            let mut perms = BTreeMap::new();
            for (list, group) in [(&a.topic_perms, false), (&a.group_perms, true)] {
                for entry in list {
                    let Some((name, perm)) = entry.split_once('=') else {
                        return Err(bad(format!("{entry:?} is not name=PERM")));
                    };
                    let name = name.trim();
                    let key = if group {
                        retry_topic(name)
                    } else {
                        name.to_string()
                    };
                    perms.insert(key, parse_perm(perm));
                }
            }
            let account = Account {
                secret_key: a.secret_key,
                white: a
                    .white_remote_address
                    .as_deref()
                    .map(AddrPattern::parse)
                    .filter(|p| !p.0.is_empty()),
                admin: a.admin,
                default_topic_perm: a.default_topic_perm.as_deref().map_or(DENY, parse_perm),
                default_group_perm: a.default_group_perm.as_deref().map_or(DENY, parse_perm),
                perms,
            };
            if acl.accounts.insert(a.access_key.clone(), account).is_some() {
                return Err(bad(format!("access key {} is listed twice", a.access_key)));
            }
        }
        Ok(acl)
    }

    /// `PlainPermissionManager.validate` for one request from `ip`.
    pub fn check(&self, ip: IpAddr, req: &RemotingCommand, body: &[u8]) -> Result<(), Refusal> {
        if self.global_white.iter().any(|p| p.matches(ip)) {
            return Ok(());
        }
        let Some(key) = acl::access_key(&req.ext_fields) else {
            return Err(refuse(AclError::MissingAccessKey.to_string()));
        };
        let Some(owned) = self.accounts.get(key) else {
            return Err(refuse(format!("No acl config for {key}")));
        };
        if owned.white.as_ref().is_some_and(|w| w.matches(ip)) {
            return Ok(());
        }
        acl::verify(&req.ext_fields, body, &owned.secret_key).map_err(|e| refuse(e.to_string()))?;
        if needs_admin(req.code) && !owned.admin {
            return Err(refuse(format!(
                "Need admin permission for request code={}, but accessKey={key} is not",
                req.code
            )));
        }
        if owned.perms.is_empty() && owned.admin {
            return Ok(());
        }
        for (resource, perm) in needed(req, body) {
            let group = resource.starts_with(RETRY_PREFIX);
            let have = owned.perms.get(&resource).copied().unwrap_or(if group {
                owned.default_group_perm
            } else {
                owned.default_topic_perm
            });
            let trace = !group && perm == PUB && resource == "RMQ_SYS_TRACE_TOPIC";
            if !trace && !permits(perm, have) {
                let what = match resource.strip_prefix(RETRY_PREFIX) {
                    Some(g) => format!("group:{g}"),
                    None => format!("topic:{resource}"),
                };
                return Err(refuse(format!("No default permission for {what}")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicTest=PUB|SUB
      - Secret=DENY
    groupPerms:
      - g2=DENY
"#;

    fn signed(code: i32, fields: &[(&str, &str)], secret: &str) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(code, 1);
        for (k, v) in fields {
            cmd.ext_fields.insert(*k, *v);
        }
        acl::sign(&mut cmd.ext_fields, &[], "RocketMQ", secret, None);
        cmd
    }

    #[test]
    fn patterns_match_as_the_broker_does() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(AddrPattern::parse("*").matches(ip("1.2.3.4")));
        assert!(AddrPattern::parse("10.10.103.*").matches(ip("10.10.103.7")));
        assert!(!AddrPattern::parse("10.10.103.*").matches(ip("10.10.104.7")));
        assert!(AddrPattern::parse("192.168.1.1-200").matches(ip("192.168.1.200")));
        assert!(!AddrPattern::parse("192.168.1.1-200").matches(ip("192.168.1.201")));
        assert!(AddrPattern::parse("192.168.1.{1,2,3}").matches(ip("192.168.1.2")));
        assert!(AddrPattern::parse("1.1.1.1,2.2.2.2").matches(ip("2.2.2.2")));
        assert!(AddrPattern::parse("1.1.1.1").matches(ip("::ffff:1.1.1.1")));
        assert!(!AddrPattern::parse("").matches(ip("1.1.1.1")));
    }

    #[test]
    fn requests_are_checked_by_signature_and_permission() {
        let acl = PlainAcl::parse(FILE).unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let pull = |topic: &str, group: &str, secret: &str| {
            signed(
                codes::PULL_MESSAGE,
                &[("topic", topic), ("consumerGroup", group)],
                secret,
            )
        };
        assert_eq!(
            acl.check(ip, &pull("TopicTest", "g1", "12345678"), &[]),
            Ok(())
        );
        let bad = acl
            .check(ip, &pull("TopicTest", "g1", "wrong-secret"), &[])
            .unwrap_err();
        assert_eq!(bad.remark, "Check signature failed for accessKey=RocketMQ");
        let denied = acl
            .check(ip, &pull("Secret", "g1", "12345678"), &[])
            .unwrap_err();
        assert_eq!(denied.remark, "No default permission for topic:Secret");
        let other = acl
            .check(ip, &pull("Other", "g1", "12345678"), &[])
            .unwrap_err();
        assert_eq!(other.remark, "No default permission for topic:Other");
        let group = acl
            .check(ip, &pull("TopicTest", "g2", "12345678"), &[])
            .unwrap_err();
        assert_eq!(group.remark, "No default permission for group:g2");
        let unsigned = RemotingCommand::request(codes::PULL_MESSAGE, 1);
        assert_eq!(
            acl.check(ip, &unsigned, &[]).unwrap_err().remark,
            "No accessKey is configured"
        );
        // a white-listed peer needs no signature
        assert_eq!(
            acl.check("10.10.103.9".parse().unwrap(), &unsigned, &[]),
            Ok(())
        );
        assert_eq!(
            acl.check(
                ip,
                &signed(codes::UPDATE_AND_CREATE_TOPIC, &[], "12345678"),
                &[]
            )
            .unwrap_err()
            .code,
            codes::SYSTEM_ERROR
        );
    }

    #[test]
    fn perms_parse_and_check_as_java() {
        assert_eq!(parse_perm("PUB|SUB"), PUB | SUB);
        assert_eq!(parse_perm("nonsense"), DENY);
        assert!(permits(SUB, PUB | SUB));
        assert!(!permits(SUB, PUB));
        assert!(permits(ANY, PUB));
        assert!(!permits(SUB, DENY | SUB));
    }

    #[test]
    fn short_keys_and_bad_yaml_are_refused() {
        assert!(
            PlainAcl::parse("accounts:\n  - accessKey: abc\n    secretKey: 1234567\n").is_err()
        );
        assert!(PlainAcl::parse("accounts: [").is_err());
    }
}
