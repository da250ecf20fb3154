//! Load on `serve`: N consumers drain every queue of a store over loopback through the wire
//! protocol (PULL_MESSAGE, maxMsgNums 32, no suspend), while the server runs in this process.
//! Each consumer is one connection owning its share of the queues, with one pull in flight
//! per queue, as a push consumer runs them.
//! Prints the aggregate rate in bytes of records and in messages, pull latency percentiles
//! (non-suspended pulls), and, for scale, the time `cat` takes over the same commitlog files.
//!
//! Usage: cargo run --release --example serve_load -- STORE [CONSUMERS...]   (default 1 4 16)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmqstore::engine::broker::clock::SystemClock;
use rmqstore::engine::broker::{Engine, EngineOptions};
use rmqstore::engine::Store;
use rmqstore::format::geometry::GeometryInputs;
use rmqstore::remoting::header::{PullMessageRequestHeader, PULL_FLAG_SUBSCRIPTION};
use rmqstore::remoting::{codes, decode, FrameCodec, RemotingCommand};
use rmqstore::serve::ServeOptions;

/// One consumer's connection.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    chunk: Vec<u8>,
    codec: FrameCodec,
    opaque: i32,
}

impl Conn {
    /// Send a pull of `topic:q` from `offset`; its opaque.
    fn send(&mut self, topic: &str, q: i32, offset: i64) -> i32 {
        self.opaque += 1;
        let mut cmd = RemotingCommand::request(codes::PULL_MESSAGE, self.opaque);
        cmd.write_header(&PullMessageRequestHeader {
            consumer_group: "LoadGroup".into(),
            topic: topic.into(),
            queue_id: q,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: PULL_FLAG_SUBSCRIPTION,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: None,
            bname: None,
        });
        let mut out = Vec::new();
        cmd.encode(&[], &mut out).unwrap();
        self.s.write_all(&out).unwrap();
        self.opaque
    }

    /// The next response: opaque, code, nextBeginOffset, body length.
    fn recv(&mut self) -> (i32, i32, i64, usize) {
        loop {
            if let Some((p, used)) = decode(&self.codec, &self.buf).unwrap() {
                let next = p
                    .command
                    .ext_fields
                    .get("nextBeginOffset")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(-1);
                let r = (p.command.opaque, p.command.code, next, p.body.len());
                self.buf.drain(..used);
                return r;
            }
            let n = self.s.read(&mut self.chunk).unwrap();
            assert!(n > 0, "server closed");
            self.buf.extend_from_slice(&self.chunk[..n]);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let store_dir = Path::new(
        args.first()
            .expect("usage: serve_load STORE [CONSUMERS...]"),
    );
    let counts: Vec<usize> = if args.len() > 1 {
        args[1..].iter().map(|a| a.parse().unwrap()).collect()
    } else {
        vec![1, 4, 16]
    };
    let store = Store::open(store_dir, &GeometryInputs::default()).unwrap();
    let files: Vec<_> = store
        .commitlog
        .segments
        .iter()
        .map(|s| s.path.clone())
        .collect();
    let opts = EngineOptions::for_store(&store);
    let engine = Engine::open_read_only(store, None, Arc::new(SystemClock), opts).unwrap();
    let queues: Vec<(String, i32, i64, i64)> = engine
        .queue_keys()
        .into_iter()
        .filter(|(t, _)| !t.starts_with("SCHEDULE_TOPIC") && !t.starts_with("RMQ_SYS"))
        .map(|(t, q)| {
            let (min, max) = engine.queue_bounds(&t, q);
            (t, q, min, max)
        })
        .collect();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut o = ServeOptions::new("127.0.0.1:0".parse().unwrap());
        o.idle = Duration::from_secs(600);
        rmqstore::serve::run(engine, o, |_, a| tx.send(a.to_string()).unwrap()).unwrap();
    });
    let addr = rx.recv().unwrap();

    let started = Instant::now();
    for f in &files {
        let mut r = std::fs::File::open(f).unwrap();
        std::io::copy(&mut r, &mut std::io::sink()).unwrap();
    }
    let cat = started.elapsed();
    println!(
        "cat of {} commitlog files: {:.2} s",
        files.len(),
        cat.as_secs_f64()
    );

    for &n in &counts {
        let started = Instant::now();
        let mut handles = Vec::new();
        for c in 0..n {
            let mine: Vec<_> = queues.iter().skip(c).step_by(n).cloned().collect();
            let addr = addr.clone();
            handles.push(std::thread::spawn(move || {
                let mut conn = Conn {
                    s: TcpStream::connect(&addr).unwrap(),
                    buf: Vec::new(),
                    chunk: vec![0u8; 1 << 20],
                    codec: FrameCodec::default(),
                    opaque: 0,
                };
                conn.s.set_nodelay(true).unwrap();
                // as a push consumer does: one pull in flight per queue it owns
                let (mut bytes, mut lat) = (0usize, Vec::new());
                let mut in_flight = std::collections::HashMap::new();
                for (i, (t, q, min, max)) in mine.iter().enumerate() {
                    if min < max {
                        let o = conn.send(t, *q, *min);
                        in_flight.insert(o, (i, Instant::now()));
                    }
                }
                while !in_flight.is_empty() {
                    let (opaque, code, next, len) = conn.recv();
                    let (i, at) = in_flight.remove(&opaque).expect("an answer to a pull sent");
                    lat.push(at.elapsed());
                    let (t, q, _, max) = &mine[i];
                    assert!(
                        code == codes::SUCCESS || code == codes::PULL_RETRY_IMMEDIATELY,
                        "{t}:{q}: {code}"
                    );
                    bytes += len;
                    if next < *max {
                        let o = conn.send(t, *q, next);
                        in_flight.insert(o, (i, Instant::now()));
                    }
                }
                (bytes, lat)
            }));
        }
        let (mut bytes, mut lat) = (0usize, Vec::new());
        for h in handles {
            let (b, l) = h.join().unwrap();
            bytes += b;
            lat.extend(l);
        }
        let secs = started.elapsed().as_secs_f64();
        lat.sort();
        let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
        println!(
            "{n:>2} consumers: {:.0} MB in {:.2} s = {:.0} MB/s ({:.1}x cat), {} pulls, latency p50 {:?} p99 {:?} max {:?}",
            bytes as f64 / 1e6,
            secs,
            bytes as f64 / 1e6 / secs,
            secs / cat.as_secs_f64(),
            lat.len(),
            pct(0.5),
            pct(0.99),
            lat.last().unwrap(),
        );
    }
    std::process::exit(0);
}
