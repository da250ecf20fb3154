//! Queue allocation among the consumers of a group (ENGINE.md 5): the six strategies of the Java
//! client as pure functions over sorted queues and client ids, giving the same assignments.
//!
//! Inputs are taken in the order given, as the Java strategies take them; [`sort_queues`] and
//! [`sort_client_ids`] give the order `RebalanceImpl` sorts them into (Java string order), and
//! [`allocate`] sorts and then dispatches on an [`AllocateStrategy`].

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A queue of a topic on one broker (`MessageQueue`), the wire protocol's type.
pub use crate::remoting::body::MessageQueue;

/// Java `String.compareTo`: UTF-16 code unit order.
pub fn java_string_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// `MessageQueue.compareTo`: topic, then broker name, then queue id.
impl Ord for MessageQueue {
    fn cmp(&self, other: &Self) -> Ordering {
        java_string_cmp(&self.topic, &other.topic)
            .then_with(|| java_string_cmp(&self.broker_name, &other.broker_name))
            .then_with(|| self.queue_id.cmp(&other.queue_id))
    }
}

impl PartialOrd for MessageQueue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `MessageQueue.toString()`, the key the consistent-hash strategy hashes.
impl fmt::Display for MessageQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MessageQueue [topic={}, brokerName={}, queueId={}]",
            self.topic, self.broker_name, self.queue_id
        )
    }
}

/// Why a strategy refused to run (`AbstractAllocateMessageQueueStrategy.check` and the
/// machine-room strategies).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    #[error("currentCID is empty")]
    EmptyCurrentId,
    #[error("mqAll is null or mqAll empty")]
    NoQueues,
    #[error("cidAll is null or cidAll empty")]
    NoConsumers,
    #[error("machine room is empty for {0}")]
    NoMachineRoom(String),
    #[error("virtual node count must not be negative")]
    NegativeVirtualNodes,
}

/// The common check: errors for empty inputs; `Ok(None)` when the current id is not a member
/// (the strategies then return nothing); else the current id's index.
fn check(
    current: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Result<Option<usize>, AllocateError> {
    if current.is_empty() {
        return Err(AllocateError::EmptyCurrentId);
    }
    if mq_all.is_empty() {
        return Err(AllocateError::NoQueues);
    }
    if cid_all.is_empty() {
        return Err(AllocateError::NoConsumers);
    }
    Ok(cid_all.iter().position(|c| c == current))
}

/// `AllocateMessageQueueAveragely` ("AVG"): contiguous blocks, the first `n % c` consumers get
/// one queue more.
pub fn allocate_averagely(
    current: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Result<Vec<MessageQueue>, AllocateError> {
    let Some(i) = check(current, mq_all, cid_all)? else {
        return Ok(Vec::new());
    };
    let (n, c) = (mq_all.len(), cid_all.len());
    let m = n % c;
    let size = if n <= c {
        1
    } else if m > 0 && i < m {
        n / c + 1
    } else {
        n / c
    };
    let start = if m > 0 && i < m {
        i * size
    } else {
        i * size + m
    };
    let take = size.min(n.saturating_sub(start));
    Ok(mq_all.iter().skip(start).take(take).cloned().collect())
}

/// `AllocateMessageQueueAveragelyByCircle` ("AVG_BY_CIRCLE"): queue `j` goes to consumer
/// `j % c`.
pub fn allocate_averagely_by_circle(
    current: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Result<Vec<MessageQueue>, AllocateError> {
    let Some(i) = check(current, mq_all, cid_all)? else {
        return Ok(Vec::new());
    };
    let c = cid_all.len();
    Ok(mq_all
        .iter()
        .enumerate()
        .filter(|(j, _)| *j >= i && j % c == i)
        .map(|(_, q)| q.clone())
        .collect())
}

/// The ring hash of `ConsistentHashRouter`'s default MD5 function: the first four digest bytes
/// as an unsigned big-endian number.
pub fn consistent_hash_key(key: &str) -> u32 {
    let d = md5(key.as_bytes());
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// `AllocateMessageQueueConsistentHash` ("CONSISTENT_HASH") with the MD5 router: every client
/// gets `virtual_nodes` ring points `"<clientId>-<r>"` (a later client wins a colliding point);
/// a queue goes to the first point at or after the hash of its `toString()`, wrapping around.
pub fn allocate_consistent_hash(
    current: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
    virtual_nodes: i32,
) -> Result<Vec<MessageQueue>, AllocateError> {
    if virtual_nodes < 0 {
        return Err(AllocateError::NegativeVirtualNodes);
    }
    if check(current, mq_all, cid_all)?.is_none() {
        return Ok(Vec::new());
    }
    let mut ring: BTreeMap<u32, &str> = BTreeMap::new();
    for cid in cid_all {
        for r in 0..virtual_nodes {
            ring.insert(consistent_hash_key(&format!("{cid}-{r}")), cid);
        }
    }
    Ok(mq_all
        .iter()
        .filter(|mq| {
            let h = consistent_hash_key(&mq.to_string());
            let owner = ring
                .range(h..)
                .next()
                .or_else(|| ring.iter().next())
                .map(|(_, c)| *c);
            owner == Some(current)
        })
        .cloned()
        .collect())
}

/// Java `String.split` on one character: trailing empty pieces dropped.
fn java_split(s: &str, sep: char) -> Vec<&str> {
    let mut v: Vec<&str> = s.split(sep).collect();
    while v.len() > 1 && v.last().is_some_and(|p| p.is_empty()) {
        v.pop();
    }
    if v.len() == 1 && v[0].is_empty() && s.contains(sep) {
        v.clear();
    }
    v
}

/// `AllocateMessageQueueByMachineRoom` ("MACHINE_ROOM"): only queues whose broker name is
/// `<room>@<name>` with the room in `consumer_idcs`, shared in blocks with the remainder dealt
/// one by one.
pub fn allocate_by_machine_room(
    current: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
    consumer_idcs: &BTreeSet<String>,
) -> Result<Vec<MessageQueue>, AllocateError> {
    let Some(i) = check(current, mq_all, cid_all)? else {
        return Ok(Vec::new());
    };
    let pre: Vec<&MessageQueue> = mq_all
        .iter()
        .filter(|mq| {
            let parts = java_split(&mq.broker_name, '@');
            parts.len() == 2 && consumer_idcs.contains(parts[0])
        })
        .collect();
    let c = cid_all.len();
    let (m, rem) = (pre.len() / c, pre.len() % c);
    let mut out: Vec<MessageQueue> = pre
        .iter()
        .skip(i * m)
        .take(m)
        .map(|q| (*q).clone())
        .collect();
    if rem > i {
        if let Some(q) = pre.get(i + m * c) {
            out.push((*q).clone());
        }
    }
    Ok(out)
}

/// Where queues and consumers are deployed (`MachineRoomResolver`).
pub trait MachineRoomResolver {
    fn broker_room(&self, mq: &MessageQueue) -> String;
    fn consumer_room(&self, client_id: &str) -> String;
}

/// A resolver by naming convention: a broker's room is the part of its name before the first
/// `@`, a client's room the part of its id after the last `@` (ENGINE.md 5.3's example).
#[derive(Debug, Clone, Copy, Default)]
pub struct RoomByName;

impl MachineRoomResolver for RoomByName {
    fn broker_room(&self, mq: &MessageQueue) -> String {
        mq.broker_name
            .split_once('@')
            .map(|(r, _)| r.to_string())
            .unwrap_or_default()
    }
    fn consumer_room(&self, client_id: &str) -> String {
        client_id
            .rsplit_once('@')
            .map(|(_, r)| r.to_string())
            .unwrap_or_default()
    }
}

/// `AllocateMachineRoomNearby` ("MACHINE_ROOM_NEARBY-<inner>"): the current consumer first gets
/// `inner` over its own room's queues and consumers, then `inner` over all consumers for every
/// room (in name order) that has queues but no consumer.
pub fn allocate_machine_room_nearby(
    current: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
    inner: &AllocateStrategy,
    resolver: &dyn MachineRoomResolver,
) -> Result<Vec<MessageQueue>, AllocateError> {
    if check(current, mq_all, cid_all)?.is_none() {
        return Ok(Vec::new());
    }
    let mut room_queues: BTreeMap<RoomKey, Vec<MessageQueue>> = BTreeMap::new();
    for mq in mq_all {
        let room = resolver.broker_room(mq);
        if room.is_empty() {
            return Err(AllocateError::NoMachineRoom(mq.to_string()));
        }
        room_queues
            .entry(RoomKey(room))
            .or_default()
            .push(mq.clone());
    }
    let mut room_consumers: BTreeMap<RoomKey, Vec<String>> = BTreeMap::new();
    for cid in cid_all {
        let room = resolver.consumer_room(cid);
        if room.is_empty() {
            return Err(AllocateError::NoMachineRoom(cid.clone()));
        }
        room_consumers
            .entry(RoomKey(room))
            .or_default()
            .push(cid.clone());
    }
    let mut out = Vec::new();
    let mine = RoomKey(resolver.consumer_room(current));
    if let Some(queues) = room_queues.remove(&mine) {
        let consumers = room_consumers.get(&mine).cloned().unwrap_or_default();
        if !queues.is_empty() {
            out.extend(run_strategy(inner, current, &queues, &consumers)?);
        }
    }
    for (room, queues) in &room_queues {
        if !room_consumers.contains_key(room) {
            out.extend(run_strategy(inner, current, queues, cid_all)?);
        }
    }
    Ok(out)
}

/// A room name ordered as Java's `TreeMap<String, _>` orders it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RoomKey(String);

impl Ord for RoomKey {
    fn cmp(&self, other: &Self) -> Ordering {
        java_string_cmp(&self.0, &other.0)
    }
}

impl PartialOrd for RoomKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A queue allocation strategy and its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocateStrategy {
    Averagely,
    AveragelyByCircle,
    /// `virtual_nodes` defaults to 10 in Java.
    ConsistentHash {
        virtual_nodes: i32,
    },
    /// Every consumer gets this list, unchecked.
    ByConfig(Vec<MessageQueue>),
    ByMachineRoom {
        consumer_idcs: BTreeSet<String>,
    },
    /// With [`RoomByName`] as the resolver.
    MachineRoomNearby(Box<AllocateStrategy>),
}

impl AllocateStrategy {
    /// The strategy's `getName()`.
    pub fn name(&self) -> String {
        match self {
            AllocateStrategy::Averagely => "AVG".into(),
            AllocateStrategy::AveragelyByCircle => "AVG_BY_CIRCLE".into(),
            AllocateStrategy::ConsistentHash { .. } => "CONSISTENT_HASH".into(),
            AllocateStrategy::ByConfig(_) => "CONFIG".into(),
            AllocateStrategy::ByMachineRoom { .. } => "MACHINE_ROOM".into(),
            AllocateStrategy::MachineRoomNearby(inner) => {
                format!("MACHINE_ROOM_NEARBY-{}", inner.name())
            }
        }
    }
}

fn run_strategy(
    s: &AllocateStrategy,
    current: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Result<Vec<MessageQueue>, AllocateError> {
    match s {
        AllocateStrategy::Averagely => allocate_averagely(current, mq_all, cid_all),
        AllocateStrategy::AveragelyByCircle => {
            allocate_averagely_by_circle(current, mq_all, cid_all)
        }
        AllocateStrategy::ConsistentHash { virtual_nodes } => {
            allocate_consistent_hash(current, mq_all, cid_all, *virtual_nodes)
        }
        AllocateStrategy::ByConfig(list) => Ok(list.clone()),
        AllocateStrategy::ByMachineRoom { consumer_idcs } => {
            allocate_by_machine_room(current, mq_all, cid_all, consumer_idcs)
        }
        AllocateStrategy::MachineRoomNearby(inner) => {
            allocate_machine_room_nearby(current, mq_all, cid_all, inner, &RoomByName)
        }
    }
}

/// Queues in `MessageQueue.compareTo` order.
pub fn sort_queues(mqs: &mut [MessageQueue]) {
    mqs.sort();
}

/// Client ids in Java string order.
pub fn sort_client_ids(cids: &mut [String]) {
    cids.sort_by(|a, b| java_string_cmp(a, b));
}

/// `RebalanceImpl.rebalanceByTopic` for a clustering group: sort both lists, then run the
/// strategy for `current`.
pub fn allocate(
    strategy: &AllocateStrategy,
    current: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Result<Vec<MessageQueue>, AllocateError> {
    let mut mqs = mq_all.to_vec();
    sort_queues(&mut mqs);
    let mut cids = cid_all.to_vec();
    sort_client_ids(&mut cids);
    run_strategy(strategy, current, &mqs, &cids)
}

// ---------------------------------------------------------------------------------------------
// MD5 (RFC 1321), for the consistent-hash ring.

const MD5_SHIFTS: [u32; 64] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9,
    14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15,
    21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];

/// The MD5 digest of `data`.
pub fn md5(data: &[u8]) -> [u8; 16] {
    // K[i] = floor(|sin(i + 1)| * 2^32)
    let k: Vec<u32> = (0..64)
        .map(|i| (((i + 1) as f64).sin().abs() * 4_294_967_296.0) as u32)
        .collect();
    let mut state: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_le_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 16];
        for (j, c) in block.chunks_exact(4).enumerate() {
            w[j] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        let [mut a, mut b, mut c, mut d] = state;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(w[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(MD5_SHIFTS[i]));
        }
        state[0] = state[0].wrapping_add(a);
        state[1] = state[1].wrapping_add(b);
        state[2] = state[2].wrapping_add(c);
        state[3] = state[3].wrapping_add(d);
    }
    let mut out = [0u8; 16];
    for (j, s) in state.iter().enumerate() {
        out[j * 4..j * 4 + 4].copy_from_slice(&s.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(topic: &str, brokers: &[(&str, i32)]) -> Vec<MessageQueue> {
        brokers
            .iter()
            .flat_map(|(b, n)| (0..*n).map(move |q| MessageQueue::new(topic, *b, q)))
            .collect()
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn short(v: &[MessageQueue]) -> Vec<String> {
        v.iter()
            .map(|q| {
                let b = q.broker_name.rsplit('-').next().unwrap_or("");
                let room = q.broker_name.split('@').next().unwrap_or("");
                if q.broker_name.contains('@') {
                    format!("{room}/{}", q.queue_id)
                } else {
                    format!("{b}/{}", q.queue_id)
                }
            })
            .collect()
    }

    #[test]
    fn md5_vectors() {
        let hex = |d: [u8; 16]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex(md5(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            hex(md5(
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
            )),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    #[test]
    fn seed_examples_four_queues_two_consumers() {
        let mqs = queues("T", &[("broker-a", 4)]);
        let cids = ids(&["consumer1", "consumer2"]);
        let avg = |c| short(&allocate(&AllocateStrategy::Averagely, c, &mqs, &cids).unwrap());
        assert_eq!(avg("consumer1"), ["a/0", "a/1"]);
        assert_eq!(avg("consumer2"), ["a/2", "a/3"]);
        let circle =
            |c| short(&allocate(&AllocateStrategy::AveragelyByCircle, c, &mqs, &cids).unwrap());
        assert_eq!(circle("consumer1"), ["a/0", "a/2"]);
        assert_eq!(circle("consumer2"), ["a/1", "a/3"]);
    }

    #[test]
    fn engine_md_eight_queues_three_consumers() {
        let mqs = queues("TopicTest", &[("broker-a", 4), ("broker-b", 4)]);
        let cids = ids(&["10.0.0.1@1001", "10.0.0.2@1002", "10.0.0.3@1003"]);
        let run = |s: &AllocateStrategy| -> Vec<Vec<String>> {
            cids.iter()
                .map(|c| short(&allocate(s, c, &mqs, &cids).unwrap()))
                .collect()
        };
        assert_eq!(
            run(&AllocateStrategy::Averagely),
            [
                vec!["a/0", "a/1", "a/2"],
                vec!["a/3", "b/0", "b/1"],
                vec!["b/2", "b/3"]
            ]
        );
        assert_eq!(
            run(&AllocateStrategy::AveragelyByCircle),
            [
                vec!["a/0", "a/3", "b/2"],
                vec!["a/1", "b/0", "b/3"],
                vec!["a/2", "b/1"]
            ]
        );
        assert_eq!(
            run(&AllocateStrategy::ConsistentHash { virtual_nodes: 10 }),
            [
                vec!["a/0", "b/2"],
                vec!["a/2", "b/0", "b/1"],
                vec!["a/1", "a/3", "b/3"]
            ]
        );
        let cfg = AllocateStrategy::ByConfig(vec![mqs[0].clone(), mqs[4].clone()]);
        assert_eq!(run(&cfg), vec![vec!["a/0", "b/0"]; 3]);
        // the hashes of ENGINE.md 5.3
        let want = [
            1987926524u32,
            4291349817,
            853506239,
            3652785994,
            2152192320,
            672344976,
            3597050942,
            4140580766,
        ];
        for (mq, h) in mqs.iter().zip(want) {
            assert_eq!(consistent_hash_key(&mq.to_string()), h, "{mq}");
        }
    }

    #[test]
    fn machine_room_strategies() {
        let mqs = queues("TopicTest", &[("hz@broker-a", 4), ("sh@broker-b", 4)]);
        let cids = ids(&["10.0.0.1@1001", "10.0.0.2@1002", "10.0.0.3@1003"]);
        let run = |idcs: &[&str]| -> Vec<Vec<String>> {
            let s = AllocateStrategy::ByMachineRoom {
                consumer_idcs: idcs.iter().map(|s| s.to_string()).collect(),
            };
            cids.iter()
                .map(|c| short(&allocate(&s, c, &mqs, &cids).unwrap()))
                .collect()
        };
        assert_eq!(
            run(&["hz", "sh"]),
            [
                vec!["hz/0", "hz/1", "sh/2"],
                vec!["hz/2", "hz/3", "sh/3"],
                vec!["sh/0", "sh/1"]
            ]
        );
        assert_eq!(
            run(&["hz"]),
            [vec!["hz/0", "hz/3"], vec!["hz/1"], vec!["hz/2"]]
        );
        // "hz@" splits into one part: ignored
        let odd = vec![MessageQueue::new("T", "hz@", 0)];
        let s = AllocateStrategy::ByMachineRoom {
            consumer_idcs: ["hz".to_string()].into_iter().collect(),
        };
        assert!(allocate(&s, "c", &odd, &ids(&["c"])).unwrap().is_empty());

        let mqs = queues(
            "TopicTest",
            &[("bj@broker-c", 2), ("hz@broker-a", 4), ("sh@broker-b", 2)],
        );
        let cids = ids(&["10.0.0.1@hz", "10.0.0.2@hz", "10.0.0.3@sh"]);
        let nearby = AllocateStrategy::MachineRoomNearby(Box::new(AllocateStrategy::Averagely));
        assert_eq!(nearby.name(), "MACHINE_ROOM_NEARBY-AVG");
        let got: Vec<Vec<String>> = cids
            .iter()
            .map(|c| short(&allocate(&nearby, c, &mqs, &cids).unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                vec!["hz/0", "hz/1", "bj/0"],
                vec!["hz/2", "hz/3", "bj/1"],
                vec!["sh/0", "sh/1"]
            ]
        );
    }

    #[test]
    fn checks_and_edges() {
        let mqs = queues("T", &[("b", 2)]);
        assert_eq!(
            allocate_averagely("", &mqs, &ids(&["a"])),
            Err(AllocateError::EmptyCurrentId)
        );
        assert_eq!(
            allocate_averagely("a", &[], &ids(&["a"])),
            Err(AllocateError::NoQueues)
        );
        assert_eq!(
            allocate_averagely("a", &mqs, &[]),
            Err(AllocateError::NoConsumers)
        );
        assert!(allocate_averagely("x", &mqs, &ids(&["a"]))
            .unwrap()
            .is_empty());
        // more consumers than queues: the last ones get nothing
        let cids = ids(&["a", "b", "c"]);
        assert_eq!(allocate_averagely("c", &mqs, &cids).unwrap(), vec![]);
        assert_eq!(
            allocate_averagely("b", &mqs, &cids).unwrap(),
            vec![mqs[1].clone()]
        );
        // sorting: topic, broker name, queue id; client ids in Java order
        let mut v = vec![
            MessageQueue::new("T", "b", 1),
            MessageQueue::new("T", "a", 2),
            MessageQueue::new("S", "z", 0),
        ];
        sort_queues(&mut v);
        assert_eq!(short(&v), ["z/0", "a/2", "b/1"]);
        assert_eq!(java_split("a@b@", '@'), ["a", "b"]);
        assert_eq!(java_split("@@", '@').len(), 0);
        assert_eq!(
            allocate_consistent_hash("a", &mqs, &ids(&["a"]), -1),
            Err(AllocateError::NegativeVirtualNodes)
        );
    }
}
