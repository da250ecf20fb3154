//! Topic routes from the name server (`GET_ROUTEINFO_BY_TOPIC`): the writable queues of master
//! brokers, refreshed on failure; topic creation on the brokers (`UPDATE_AND_CREATE_TOPIC`).
//!
//! The queues a producer may send to are the 4.9 client's `topicRouteData2TopicPublishInfo`
//! (PROTOCOL.md 3.1, 6.1): with an `orderTopicConf` (`brokerA:4;brokerB:4`), queues
//! `0..n-1` of each named broker in the order given; otherwise, brokers sorted by name, each
//! whose queue data has the WRITE bit and whose addresses include the master (id 0), with queues
//! `0..writeQueueNums-1`. A broker without a master address gets nothing to send.
//!
//! With `--broker` (no name server) the route is built from that broker's own topic table
//! (`GET_ALL_TOPIC_CONFIG`), under the name it gives in its config (`GET_BROKER_CONFIG`,
//! `brokerName`); a broker that does not answer that request is named by its address.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::client::{Pool, Response};
use super::producer::SendError;
use crate::format::config::files::PERM_WRITE;
use crate::format::config::{TopicConfig, TopicConfigs};
use crate::remoting::body::{ClusterInfo, TopicRouteData};
use crate::remoting::header::{
    CreateTopicRequestHeader, GetRouteInfoRequestHeader, PutKvConfigRequestHeader,
};
use crate::remoting::{codes, RemotingCommand};

/// `TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`: the template topic a producer names in every
/// send (`defaultTopic`) and admin tools name in `UPDATE_AND_CREATE_TOPIC`.
pub const AUTO_CREATE_TOPIC: &str = "TBW102";

/// `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`: the name server's KV namespace of orderly topics.
pub const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// A route older than this is fetched again before use (the Java client refreshes every 30 s).
pub const ROUTE_TTL: Duration = Duration::from_secs(30);

/// One writable queue of a topic on a master broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishQueue {
    pub broker_name: String,
    pub broker_addr: String,
    pub queue_id: i32,
}

/// What a producer needs of a topic's route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRoute {
    pub topic: String,
    /// Writable queues of master brokers, brokers sorted by name, queue ids ascending.
    pub queues: Vec<PublishQueue>,
    /// The topic's write queue count on each broker (the largest, when brokers differ).
    pub write_queue_nums: i32,
    /// `orderTopicConf` (from the name server's KV config) or the topic config's order flag.
    pub order: bool,
}

impl TopicRoute {
    /// The publishable queues of a name server's route (see the module docs).
    pub fn from_route_data(topic: &str, data: &TopicRouteData) -> TopicRoute {
        let master = |name: &str| {
            data.broker_datas
                .iter()
                .find(|b| b.broker_name == name)
                .and_then(|b| b.broker_addrs.get(&0))
                .cloned()
        };
        let mut queues = Vec::new();
        let mut write_queue_nums = 0;
        let conf = data
            .order_topic_conf
            .as_deref()
            .filter(|c| !c.trim().is_empty());
        if let Some(conf) = conf {
            for item in conf.split(';') {
                let Some((name, nums)) = item.split_once(':') else {
                    continue;
                };
                let Some(nums) = crate::format::java::parse_int(nums.trim()) else {
                    continue;
                };
                let Some(addr) = master(name) else {
                    continue;
                };
                write_queue_nums = write_queue_nums.max(nums);
                queues.extend((0..nums).map(|queue_id| PublishQueue {
                    broker_name: name.to_string(),
                    broker_addr: addr.clone(),
                    queue_id,
                }));
            }
        } else {
            let mut datas: Vec<_> = data.queue_datas.iter().collect();
            datas.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
            for q in datas {
                if q.perm & PERM_WRITE == 0 {
                    continue;
                }
                let Some(addr) = master(&q.broker_name) else {
                    continue;
                };
                write_queue_nums = write_queue_nums.max(q.write_queue_nums);
                queues.extend((0..q.write_queue_nums).map(|queue_id| PublishQueue {
                    broker_name: q.broker_name.clone(),
                    broker_addr: addr.clone(),
                    queue_id,
                }));
            }
        }
        TopicRoute {
            topic: topic.to_string(),
            queues,
            write_queue_nums,
            order: conf.is_some(),
        }
    }

    /// The route of a topic on one broker, from the broker's own topic config.
    pub fn from_topic_config(
        config: &TopicConfig,
        broker_name: &str,
        broker_addr: &str,
    ) -> TopicRoute {
        let queues = if config.perm & PERM_WRITE == 0 {
            Vec::new()
        } else {
            (0..config.write_queue_nums)
                .map(|queue_id| PublishQueue {
                    broker_name: broker_name.to_string(),
                    broker_addr: broker_addr.to_string(),
                    queue_id,
                })
                .collect()
        };
        TopicRoute {
            topic: config.topic_name.clone(),
            queues,
            write_queue_nums: config.write_queue_nums,
            order: config.order,
        }
    }

    /// The queue a message pinned to `queue_id` goes to: that queue of the first broker, in
    /// the route's order (by name), that has it.
    pub fn pinned(&self, queue_id: i32) -> Option<&PublishQueue> {
        self.queues.iter().find(|q| q.queue_id == queue_id)
    }

    /// The brokers holding the route's queues, in order, each once.
    pub fn brokers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for q in &self.queues {
            if out.last() != Some(&q.broker_name.as_str()) {
                out.push(&q.broker_name);
            }
        }
        out
    }
}

/// Routes by topic, with when each was fetched.
#[derive(Default)]
pub struct RouteCache {
    routes: Mutex<HashMap<String, (TopicRoute, Instant)>>,
}

impl RouteCache {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, (TopicRoute, Instant)>> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached route if it is younger than [`ROUTE_TTL`].
    pub fn fresh(&self, topic: &str) -> Option<TopicRoute> {
        self.table()
            .get(topic)
            .filter(|(_, at)| at.elapsed() < ROUTE_TTL)
            .map(|(r, _)| r.clone())
    }

    /// The cached route, however old.
    pub fn any(&self, topic: &str) -> Option<TopicRoute> {
        self.table().get(topic).map(|(r, _)| r.clone())
    }

    pub fn put(&self, route: TopicRoute) {
        self.table()
            .insert(route.topic.clone(), (route, Instant::now()));
    }

    pub fn forget(&self, topic: &str) {
        self.table().remove(topic);
    }
}

/// A request with `header`.
fn request_with<H: crate::remoting::header::CustomHeader>(
    code: i32,
    header: &H,
) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(code, 0);
    cmd.write_header(header);
    cmd
}

fn protocol(addr: &str, what: impl std::fmt::Display) -> SendError {
    SendError::Protocol {
        addr: addr.to_string(),
        what: what.to_string(),
    }
}

/// Asks the name servers in turn, from `first`, until one answers; returns the answer and the
/// index of the one that did. Only transport failures move on to the next.
pub async fn ask_namesrv(
    pool: &Pool,
    namesrv: &[String],
    first: usize,
    cmd: &RemotingCommand,
    timeout: Duration,
) -> Result<(Response, usize), SendError> {
    let mut last = SendError::Invalid("no name server address given".into());
    for k in 0..namesrv.len() {
        let i = (first + k) % namesrv.len();
        match pool.request(&namesrv[i], cmd.clone(), &[], timeout).await {
            Ok(resp) => return Ok((resp, i)),
            Err(e @ (SendError::Transport { .. } | SendError::Protocol { .. })) => {
                tracing::debug!("name server {}: {e}", namesrv[i]);
                last = e;
            }
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// `GET_ROUTEINFO_BY_TOPIC` (105) from the name servers; `TOPIC_NOT_EXIST` (17) becomes
/// [`SendError::TopicNotExist`].
pub async fn query_route(
    pool: &Pool,
    namesrv: &[String],
    first: usize,
    topic: &str,
    timeout: Duration,
) -> Result<(TopicRoute, usize), SendError> {
    let cmd = request_with(
        codes::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.to_string(),
            accept_standard_json_only: None,
        },
    );
    let (resp, at) = ask_namesrv(pool, namesrv, first, &cmd, timeout).await?;
    let addr = &namesrv[at];
    match resp.code() {
        codes::SUCCESS if !resp.body.is_empty() => {
            let data = TopicRouteData::from_json(&resp.body)
                .map_err(|e| protocol(addr, format!("route of {topic}: {e}")))?;
            Ok((TopicRoute::from_route_data(topic, &data), at))
        }
        codes::SUCCESS => Err(protocol(addr, format!("route of {topic}: empty body"))),
        codes::TOPIC_NOT_EXIST => Err(SendError::TopicNotExist(topic.to_string())),
        _ => Err(resp.refused(addr)),
    }
}

/// `GET_BROKER_CLUSTER_INFO` (106) from the name servers.
pub async fn cluster_info(
    pool: &Pool,
    namesrv: &[String],
    first: usize,
    timeout: Duration,
) -> Result<ClusterInfo, SendError> {
    let cmd = RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 0);
    let (resp, at) = ask_namesrv(pool, namesrv, first, &cmd, timeout).await?;
    let addr = &namesrv[at];
    if resp.code() != codes::SUCCESS {
        return Err(resp.refused(addr));
    }
    ClusterInfo::from_json(&resp.body).map_err(|e| protocol(addr, format!("cluster info: {e}")))
}

/// The master address of every broker of `cluster` (or of the only cluster), by broker name.
pub fn cluster_masters(
    info: &ClusterInfo,
    cluster: Option<&str>,
) -> Result<Vec<(String, String)>, SendError> {
    let cluster = match cluster {
        Some(c) => c.to_string(),
        None => {
            let names: Vec<&String> = info.cluster_addr_table.keys().collect();
            match names.as_slice() {
                [one] => one.to_string(),
                [] => {
                    return Err(SendError::Invalid(
                        "the name server knows no cluster".into(),
                    ))
                }
                many => {
                    let list: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
                    return Err(SendError::Invalid(format!(
                        "the name server knows several clusters ({}): name the one to create topics on",
                        list.join(", ")
                    )));
                }
            }
        }
    };
    let Some(names) = info.cluster_addr_table.get(&cluster) else {
        return Err(SendError::Invalid(format!(
            "the name server knows no cluster {cluster}"
        )));
    };
    let mut names = names.clone();
    names.sort();
    names.dedup();
    let masters: Vec<(String, String)> = names
        .into_iter()
        .filter_map(|name| {
            let addr = info
                .broker_addr_table
                .get(&name)?
                .broker_addrs
                .get(&0)?
                .clone();
            Some((name, addr))
        })
        .collect();
    if masters.is_empty() {
        return Err(SendError::Invalid(format!(
            "cluster {cluster} has no master broker"
        )));
    }
    Ok(masters)
}

/// `UPDATE_AND_CREATE_TOPIC` (17) on one broker, as `mqadmin updateTopic` sends it.
pub async fn create_on_broker(
    pool: &Pool,
    addr: &str,
    topic: &str,
    queues: i32,
    perm: i32,
    order: bool,
    timeout: Duration,
) -> Result<(), SendError> {
    let header = CreateTopicRequestHeader {
        topic: topic.to_string(),
        default_topic: AUTO_CREATE_TOPIC.to_string(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm,
        topic_filter_type: "SINGLE_TAG".to_string(),
        topic_sys_flag: Some(0),
        order,
    };
    let cmd = request_with(codes::UPDATE_AND_CREATE_TOPIC, &header);
    let resp = pool.request(addr, cmd, &[], timeout).await?;
    if resp.code() != codes::SUCCESS {
        return Err(resp.refused(addr));
    }
    Ok(())
}

/// `MQVersion.Version.V5_0_0`'s number: a broker answering with a lower version has no timer
/// wheel (`TIMER_DELIVER_MS` is a plain property there, the message delivered at once).
pub const FIRST_TIMER_VERSION: i32 = 413;

/// The version a broker answers with (the `version` of every response it writes:
/// `MQVersion.CURRENT_VERSION`, 407 for 4.9.7, 513 for 5.5.0), asked with
/// GET_BROKER_RUNTIME_INFO (28); whatever the answer's code, its version is the broker's.
pub async fn broker_version(pool: &Pool, addr: &str, timeout: Duration) -> Result<i32, SendError> {
    let cmd = RemotingCommand::request(codes::GET_BROKER_RUNTIME_INFO, 0);
    let resp = pool.request(addr, cmd, &[], timeout).await?;
    Ok(resp.command.version)
}

/// `PUT_KV_CONFIG` (100) of an orderly topic's queues (`brokerA:8;brokerB:8`) on every name
/// server, as `mqadmin updateTopic -c CLUSTER -o true` does.
pub async fn put_order_conf(
    pool: &Pool,
    namesrv: &[String],
    topic: &str,
    conf: &str,
    timeout: Duration,
) -> Result<(), SendError> {
    let cmd = request_with(
        codes::PUT_KV_CONFIG,
        &PutKvConfigRequestHeader {
            namespace: ORDER_TOPIC_CONFIG.to_string(),
            key: topic.to_string(),
            value: conf.to_string(),
        },
    );
    for addr in namesrv {
        let resp = pool.request(addr, cmd.clone(), &[], timeout).await?;
        if resp.code() != codes::SUCCESS {
            return Err(resp.refused(addr));
        }
    }
    Ok(())
}

/// What a broker says of itself (`GET_BROKER_CONFIG`, 26): `brokerName`, `brokerClusterName`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerIdentity {
    pub name: String,
    pub cluster: Option<String>,
}

/// The broker's name from its config; its address when it does not answer with one.
pub async fn broker_identity(
    pool: &Pool,
    addr: &str,
    timeout: Duration,
) -> Result<BrokerIdentity, SendError> {
    let cmd = RemotingCommand::request(codes::GET_BROKER_CONFIG, 0);
    let resp = pool.request(addr, cmd, &[], timeout).await?;
    let text = if resp.code() == codes::SUCCESS {
        String::from_utf8_lossy(&resp.body).into_owned()
    } else {
        String::new()
    };
    let value = |key: &str| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    Ok(BrokerIdentity {
        name: value("brokerName").unwrap_or_else(|| addr.to_string()),
        cluster: value("brokerClusterName"),
    })
}

/// `GET_ALL_TOPIC_CONFIG` (21): the broker's `topics.json` as it has it.
pub async fn broker_topics(
    pool: &Pool,
    addr: &str,
    timeout: Duration,
) -> Result<TopicConfigs, SendError> {
    let cmd = RemotingCommand::request(codes::GET_ALL_TOPIC_CONFIG, 0);
    let resp = pool.request(addr, cmd, &[], timeout).await?;
    if resp.code() != codes::SUCCESS {
        return Err(resp.refused(addr));
    }
    TopicConfigs::from_bytes(&resp.body).map_err(|e| protocol(addr, format!("topic configs: {e}")))
}
