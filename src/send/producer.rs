//! Sending messages as the 4.9 `DefaultMQProducer` does: single messages with
//! `SEND_MESSAGE_V2`, batches with `SEND_BATCH_MESSAGE`, retried on another broker by the
//! producer's rules, backed off on `SYSTEM_BUSY`.

use std::time::Duration;

use super::outgoing::{Acked, Outgoing};
use super::route::TopicRoute;

/// The producer group the requests name.
pub const DEFAULT_PRODUCER_GROUP: &str = "RMQSTORE_SEND";

/// ACL keys: every request is signed as `AclClientRPCHook` signs it (PROTOCOL.md 7.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclKeys {
    pub access_key: String,
    pub secret_key: String,
}

/// Where to send and how.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Name server addresses (`host:port`); routes come from them.
    pub namesrv: Vec<String>,
    /// One broker address to send to directly instead (no name server); its topics must exist.
    pub broker: Option<String>,
    pub group: String,
    pub acl: Option<AclKeys>,
    /// Budget of one send, retries included (`sendMsgTimeout`).
    pub timeout: Duration,
    /// `retryTimesWhenSendFailed`.
    pub retries: u32,
    /// Requests in flight on one broker connection.
    pub max_in_flight: usize,
}

impl ProducerConfig {
    pub fn new(namesrv: Vec<String>, broker: Option<String>) -> Self {
        ProducerConfig {
            namesrv,
            broker,
            group: DEFAULT_PRODUCER_GROUP.to_string(),
            acl: None,
            timeout: Duration::from_secs(3),
            retries: 2,
            max_in_flight: 16,
        }
    }
}

/// Why a send, a route lookup or a topic creation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The peer could not be reached, or closed the connection, or did not answer in time.
    #[error("{addr}: {what}")]
    Transport { addr: String, what: String },
    /// The broker (or name server) answered with an error code.
    #[error("{addr} answered {code} ({name}): {remark}")]
    Refused {
        addr: String,
        code: i32,
        name: String,
        remark: String,
    },
    /// The topic has no route (name server) or is not on the broker (`--broker`).
    #[error("topic {0} does not exist on the target cluster")]
    TopicNotExist(String),
    /// The answer could not be read.
    #[error("{addr}: {what}")]
    Protocol { addr: String, what: String },
    #[error("not implemented yet")]
    NotImplemented,
}

impl SendError {
    /// Whether the whole send may be tried again later (the peer may take it then).
    pub fn is_retriable(&self) -> bool {
        matches!(self, SendError::Transport { .. })
    }
}

/// A producer: connections, routes and the send rules. Cheap to share (`&self` everywhere).
pub struct Producer {
    config: ProducerConfig,
}

impl Producer {
    /// Checks the config and reaches the first name server (or the broker).
    pub async fn connect(config: ProducerConfig) -> Result<Producer, SendError> {
        Ok(Producer { config })
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// The topic's route; [`SendError::TopicNotExist`] when there is none.
    pub async fn route(&self, topic: &str) -> Result<TopicRoute, SendError> {
        let _ = topic;
        Err(SendError::NotImplemented)
    }

    /// Creates `topic` on every master broker of the cluster (or on the `--broker`), with
    /// `queues` read and write queues, `perm` and the order flag.
    pub async fn create_topic(
        &self,
        topic: &str,
        queues: i32,
        perm: i32,
        order: bool,
    ) -> Result<(), SendError> {
        let _ = (topic, queues, perm, order);
        Err(SendError::NotImplemented)
    }

    /// Sends `messages`, all of one topic: one alone with `SEND_MESSAGE_V2`, several as one
    /// `SEND_BATCH_MESSAGE` (none delayed; the caller keeps a batch within the broker's size
    /// limit). With a queue id (all the same) it goes to that queue of the route's broker that
    /// holds it, else the producer picks a queue. Retried by the 4.9 producer's rules; the
    /// answer has one [`Acked`] per message, in order.
    pub async fn send(&self, messages: &[Outgoing]) -> Result<Vec<Acked>, SendError> {
        let _ = messages;
        Err(SendError::NotImplemented)
    }

    /// Closes every connection (UNREGISTER_CLIENT where a client registered).
    pub async fn shutdown(self) {}
}
