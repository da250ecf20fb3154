//! Resident memory of `rmqstore serve` before, during and after hostile clients: it starts the
//! given binary on a store with a fresh overlay, reads the server's `VmRSS` from
//! `/proc/<pid>/status`, then opens at once
//! - 2,000 idle connections,
//! - 4 connections each sending a frame with a 16 MiB body,
//! - a heartbeat naming 20,000 groups and one naming 1,000 groups of a store topic,
//! - a LOCK_BATCH_MQ of 200,000 queues,
//! - a frame whose header holds 600,000 extFields,
//!
//! reads `VmRSS` again while they are all connected, closes them, waits for the server to see
//! them go, and reads it a third time. Linux only.
//!
//! Usage: cargo run --release --example serve_memory -- RMQSTORE_BINARY STORE [TOPIC]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use rmqstore::remoting::body::SubscriptionData;
use rmqstore::remoting::body::{ConsumerData, HeartbeatData, LockBatchRequestBody, MessageQueue};
use rmqstore::remoting::{codes, ExtFields, RemotingCommand};

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

fn frame(cmd: &RemotingCommand, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    cmd.encode(body, &mut out).unwrap();
    out
}

fn groups(prefix: &str, n: usize, topic: &str) -> Vec<u8> {
    let hb = HeartbeatData {
        client_id: "hostile".into(),
        producer_data_set: vec![],
        consumer_data_set: (0..n)
            .map(|i| ConsumerData {
                group_name: format!("{prefix}{i}"),
                consume_type: "CONSUME_PASSIVELY".into(),
                message_model: "CLUSTERING".into(),
                consume_from_where: "CONSUME_FROM_FIRST_OFFSET".into(),
                subscription_data_set: vec![SubscriptionData {
                    topic: topic.into(),
                    sub_string: "*".into(),
                    sub_version: 1,
                    expression_type: "TAG".into(),
                    ..Default::default()
                }],
                unit_mode: false,
            })
            .collect(),
    };
    frame(
        &RemotingCommand::request(codes::HEART_BEAT, 1),
        hb.to_json().as_bytes(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bin, store) = match args.as_slice() {
        [bin, store, ..] => (bin, store),
        _ => {
            eprintln!("usage: serve_memory RMQSTORE_BINARY STORE [TOPIC]");
            std::process::exit(2);
        }
    };
    let topic = args.get(2).map_or("TopicTest", String::as_str);
    let overlay = std::env::temp_dir().join(format!("serve-memory-{}", std::process::id()));
    let mut child = Command::new(bin)
        .args(["serve", store, "--listen", "127.0.0.1:0", "--overlay"])
        .arg(&overlay)
        .args(["--max-connections", "4096"])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().trim_start_matches("listening on ").to_string();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(500));
    let before = vm_rss_kib(pid);

    let mut hostile: Vec<TcpStream> = (0..2000)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let mut frames = Vec::new();
    let big_body = vec![b'x'; 16 * 1024 * 1024 - 1024];
    for _ in 0..4 {
        frames.push(frame(
            &RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 1),
            &big_body,
        ));
    }
    frames.push(groups("Hostile", 20_000, topic));
    frames.push(groups("Many", 1_000, topic));
    let lock = LockBatchRequestBody {
        consumer_group: "Many0".into(),
        client_id: "hostile".into(),
        mq_set: (0..200_000)
            .map(|q| MessageQueue::new(topic, "broker-a", q))
            .collect(),
    };
    frames.push(frame(
        &RemotingCommand::request(codes::LOCK_BATCH_MQ, 1),
        lock.to_json().as_bytes(),
    ));
    let mut wide = RemotingCommand::request(codes::GET_BROKER_CLUSTER_INFO, 1);
    wide.ext_fields = ExtFields::from_entries(
        (0..600_000)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .collect(),
    );
    frames.push(frame(&wide, &[]));
    let senders: Vec<_> = frames
        .into_iter()
        .map(|f| {
            let mut s = TcpStream::connect(&addr).unwrap();
            hostile.push(s.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = s.write_all(&f);
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut answer = [0u8; 4096];
                let _ = s.read(&mut answer);
            })
        })
        .collect();
    for s in senders {
        let _ = s.join();
    }
    let during = vm_rss_kib(pid);
    drop(hostile);
    std::thread::sleep(Duration::from_secs(3));
    let after = vm_rss_kib(pid);
    println!("VmRSS before: {before} kB");
    println!("VmRSS during: {during} kB");
    println!("VmRSS after:  {after} kB");
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&overlay);
}
