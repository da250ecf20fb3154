//! The NameServer's answers (PROTOCOL.md 3): every route names this server as the master of
//! one broker, so clients connect back here for everything else.

use std::collections::{BTreeMap, BTreeSet};

use super::pull::topic_queues;
use super::{success, Handled, Outcome, Refusal, State};
use crate::remoting::body::{
    BrokerData, ClusterInfo, JsonForm, QueueData, TopicList, TopicRouteData,
};
use crate::remoting::codes;
use crate::remoting::header::{
    GetKvConfigRequestHeader, GetRouteInfoRequestHeader, GetTopicsByClusterRequestHeader,
};
use crate::remoting::RemotingCommand;

/// Every topic the broker has: configured ones and those with consume queues.
pub fn topics(st: &State) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = st
        .engine
        .topic_configs()
        .iter()
        .map(|t| t.topic_name.clone())
        .collect();
    set.extend(st.engine.queue_keys().into_iter().map(|(t, _)| t));
    set
}

fn broker_data(st: &State) -> BrokerData {
    BrokerData {
        cluster: st.cluster.clone(),
        broker_name: st.broker_name(),
        broker_addrs: BTreeMap::from([(0, st.broker_addr.clone())]),
    }
}

/// `GET_ROUTEINFO_BY_TOPIC` (105), in the JSON form the client's version gets.
pub fn route_info(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: GetRouteInfoRequestHeader = req.read_header()?;
    let Some((read, perm)) = topic_queues(st, &h.topic) else {
        return Err(Refusal::new(
            codes::TOPIC_NOT_EXIST,
            format!(
                "No topic route info in name server for the topic: {}\nSee http://rocketmq.apache.org/docs/faq/ for further details.",
                h.topic
            ),
        ));
    };
    let tc = st.engine.topic_configs().get(&h.topic);
    let route = TopicRouteData {
        order_topic_conf: None,
        queue_datas: vec![QueueData {
            broker_name: st.broker_name(),
            read_queue_nums: read,
            write_queue_nums: tc.map_or(read, |t| t.write_queue_nums),
            perm,
            topic_syn_flag: tc.map_or(0, |t| t.topic_sys_flag),
        }],
        broker_datas: vec![broker_data(st)],
        filter_server_table: BTreeMap::new(),
    };
    let form = JsonForm::for_route_request(req.version, h.accept_standard_json_only);
    success(req, route.to_json(form).into_bytes())
}

/// `GET_BROKER_CLUSTER_INFO` (106).
pub fn cluster_info(st: &mut State, req: &RemotingCommand) -> Handled {
    let name = st.broker_name();
    let info = ClusterInfo {
        broker_addr_table: BTreeMap::from([(name.clone(), broker_data(st))]),
        cluster_addr_table: BTreeMap::from([(st.cluster.clone(), vec![name])]),
    };
    success(req, info.to_json().into_bytes())
}

fn topic_list(topics: Vec<String>, broker_addr: Option<String>) -> Vec<u8> {
    TopicList {
        topic_list: topics,
        broker_addr,
    }
    .to_json()
    .into_bytes()
}

/// `GET_ALL_TOPIC_LIST_FROM_NAMESERVER` (206): retry topics included.
pub fn all_topics(st: &mut State, req: &RemotingCommand) -> Handled {
    success(req, topic_list(topics(st).into_iter().collect(), None))
}

/// `GET_TOPICS_BY_CLUSTER` (224).
pub fn topics_by_cluster(st: &mut State, req: &RemotingCommand) -> Handled {
    let h: GetTopicsByClusterRequestHeader = req.read_header()?;
    let list = if h.cluster == st.cluster {
        topics(st).into_iter().collect()
    } else {
        Vec::new()
    };
    success(req, topic_list(list, None))
}

/// `GET_SYSTEM_TOPIC_LIST_FROM_NS` (304): the cluster and broker names, and where to ask for
/// the rest.
pub fn system_topics_ns(st: &mut State, req: &RemotingCommand) -> Handled {
    let list = vec![st.cluster.clone(), st.broker_name()];
    success(req, topic_list(list, Some(st.broker_addr.clone())))
}

/// `GET_KV_CONFIG` (101): this name server keeps no KV config.
pub fn kv_config(req: &RemotingCommand) -> Handled {
    let h: GetKvConfigRequestHeader = req.read_header()?;
    let cmd = RemotingCommand::response_to(
        req,
        codes::QUERY_NOT_FOUND,
        Some(format!(
            "No config item, Namespace: {} Key: {}",
            h.namespace, h.key
        )),
    );
    Ok(Outcome::Reply(cmd, Vec::new()))
}
