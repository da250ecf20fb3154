//! Topic routes from the name server (`GET_ROUTEINFO_BY_TOPIC`): the writable queues of master
//! brokers, refreshed on failure; topic creation on the brokers (`UPDATE_AND_CREATE_TOPIC`).

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
