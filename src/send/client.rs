//! A remoting connection to one peer (name server or broker): requests matched to responses by
//! opaque, several in flight, each signed when ACL keys are given.
//!
//! A [`Connection`] writes requests as a 4.9.8 Java client does (JSON header, language JAVA,
//! version 409), through one lock on the socket's write half: a frame goes out whole, header
//! and body in one vectored write, the body never copied. A reader task decodes the answers
//! with the remoting codec (each frame bounded by [`FrameCodec`]'s limits before its bytes are
//! read) and hands each one to the request waiting for its opaque. So many requests are in
//! flight at once (up to [`ClientOptions::max_in_flight`]), and answers may come in any order.
//!
//! Every request has a timeout covering its wait for a slot, its write and its answer. When the
//! connection ends (the peer closes it, a read fails, a frame cannot be decoded, or a request is
//! abandoned half-written), every request still waiting fails at once with the reason, and so
//! does every later one: a [`Pool`] then opens a new connection for the address.
//!
//! Requests the peer starts itself (`CHECK_TRANSACTION_STATE`, `NOTIFY_CONSUMER_IDS_CHANGED`)
//! are read and dropped: a producer that never registers with a heartbeat is not asked.

use std::collections::HashMap;
use std::io::IoSlice;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Semaphore};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::producer::{AclKeys, SendError};
use crate::remoting::frame::OutFrame;
use crate::remoting::{self, acl, codes, FrameCodec, RemotingCommand, FLAG_RESPONSE};

/// Bytes a read asks for when no frame length is known yet.
const READ_SIZE: usize = 16 * 1024;

/// A receive buffer larger than this is shrunk back once its frame is handed on.
const KEEP_BUFFER: usize = 256 * 1024;

/// How connections are opened and what they accept.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Longest wait for the TCP connect (Java: `connectTimeoutMillis`, 3 s).
    pub connect_timeout: Duration,
    /// Limits on frames read, and on frames written.
    pub codec: FrameCodec,
    /// Sign every request (`AclClientRPCHook`).
    pub acl: Option<AclKeys>,
    /// Requests in flight on one connection; more wait for a slot.
    pub max_in_flight: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(3),
            codec: FrameCodec::default(),
            acl: None,
            max_in_flight: 16,
        }
    }
}

/// An answer: its command (code, remark, extFields) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub command: RemotingCommand,
    pub body: Vec<u8>,
}

impl Response {
    pub fn code(&self) -> i32 {
        self.command.code
    }

    pub fn remark(&self) -> &str {
        self.command.remark.as_deref().unwrap_or("")
    }

    /// The answer as [`SendError::Refused`], for codes the caller does not accept.
    pub fn refused(&self, addr: &str) -> SendError {
        SendError::Refused {
            addr: addr.to_string(),
            code: self.code(),
            name: codes::response_name(self.code())
                .unwrap_or("UNKNOWN")
                .to_string(),
            remark: self.remark().to_string(),
        }
    }
}

type Waiter = oneshot::Sender<Result<Response, SendError>>;

/// The requests waiting for an answer, and why the connection ended, once it has.
#[derive(Default)]
struct Pending {
    waiters: HashMap<i32, Waiter>,
    closed: Option<SendError>,
}

/// What the reader task and the requests share.
struct Shared {
    addr: String,
    pending: Mutex<Pending>,
    reader: Mutex<Option<AbortHandle>>,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn transport(&self, what: impl Into<String>) -> SendError {
        SendError::Transport {
            addr: self.addr.clone(),
            what: what.into(),
        }
    }

    /// Ends the connection: every waiting request, and every later one, fails with `why`.
    fn close(&self, why: SendError) {
        let waiters = {
            let mut p = self.pending();
            if p.closed.is_none() {
                tracing::debug!(addr = %self.addr, "connection closed: {why}");
                p.closed = Some(why.clone());
            }
            std::mem::take(&mut p.waiters)
        };
        for (_, w) in waiters {
            let _ = w.send(Err(why.clone()));
        }
        if let Some(reader) = self.reader.lock().unwrap_or_else(|p| p.into_inner()).take() {
            reader.abort();
        }
    }

    fn closed(&self) -> Option<SendError> {
        self.pending().closed.clone()
    }

    /// Files a waiter for `opaque`; it leaves the table when the returned guard drops.
    fn register(
        self: &Arc<Self>,
        opaque: i32,
    ) -> Result<(oneshot::Receiver<Result<Response, SendError>>, Registered), SendError> {
        let (tx, rx) = oneshot::channel();
        let mut p = self.pending();
        if let Some(why) = &p.closed {
            return Err(why.clone());
        }
        p.waiters.insert(opaque, tx);
        Ok((
            rx,
            Registered {
                shared: self.clone(),
                opaque,
            },
        ))
    }

    /// Hands an answer to its request; an answer nobody waits for (it timed out) is dropped.
    fn deliver(&self, response: Response) {
        let opaque = response.command.opaque;
        match self.pending().waiters.remove(&opaque) {
            Some(w) => {
                let _ = w.send(Ok(response));
            }
            None => tracing::debug!(addr = %self.addr, opaque, "answer to no waiting request"),
        }
    }
}

/// Removes a request's waiter when the request ends, answered or not.
struct Registered {
    shared: Arc<Shared>,
    opaque: i32,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.shared.pending().waiters.remove(&self.opaque);
    }
}

/// Closes the connection if a frame's write is abandoned half-way (the request's future was
/// dropped): the stream is then out of step and nothing more can be written to it.
struct WriteInProgress<'a> {
    shared: &'a Shared,
    done: bool,
}

impl Drop for WriteInProgress<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.shared.close(
                self.shared
                    .transport("a request was abandoned half-written"),
            );
        }
    }
}

/// One connection to one peer.
pub struct Connection {
    shared: Arc<Shared>,
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    next_opaque: AtomicI32,
    slots: Semaphore,
    options: ClientOptions,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared
            .close(self.shared.transport("connection dropped"));
    }
}

impl Connection {
    /// Connects to `addr` (`host:port`) within the connect timeout and starts its reader.
    pub async fn connect(addr: &str, options: &ClientOptions) -> Result<Connection, SendError> {
        let transport = |what: String| SendError::Transport {
            addr: addr.to_string(),
            what,
        };
        let stream = tokio::time::timeout(options.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| {
                transport(format!(
                    "connect timed out after {} ms",
                    options.connect_timeout.as_millis()
                ))
            })?
            .map_err(|e| transport(format!("connect: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        let shared = Arc::new(Shared {
            addr: addr.to_string(),
            pending: Mutex::new(Pending::default()),
            reader: Mutex::new(None),
        });
        let task = tokio::spawn(read_loop(rd, shared.clone(), options.codec));
        *shared.reader.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
        Ok(Connection {
            shared,
            writer: tokio::sync::Mutex::new(wr),
            next_opaque: AtomicI32::new(0),
            slots: Semaphore::new(options.max_in_flight.max(1)),
            options: options.clone(),
        })
    }

    /// The peer's address as given.
    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    /// Whether the connection has ended (a new one is needed).
    pub fn is_closed(&self) -> bool {
        self.shared.closed().is_some()
    }

    /// Sends `cmd` with `body` and waits for its answer, all within `timeout`. The command gets
    /// this connection's next opaque and, with ACL keys, its signature. Any answer is returned,
    /// whatever its code; errors are the transport's (or a frame the codec cannot write).
    pub async fn request(
        &self,
        cmd: RemotingCommand,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Response, SendError> {
        let code = cmd.code;
        match tokio::time::timeout(timeout, self.exchange(cmd, body)).await {
            Ok(result) => result,
            Err(_) => Err(self.shared.transport(format!(
                "no answer to request {} ({}) within {} ms",
                code,
                codes::request_name(code).unwrap_or("UNKNOWN"),
                timeout.as_millis()
            ))),
        }
    }

    async fn exchange(&self, mut cmd: RemotingCommand, body: &[u8]) -> Result<Response, SendError> {
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| self.shared.transport("connection closed"))?;
        if let Some(why) = self.shared.closed() {
            return Err(why);
        }
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        cmd.opaque = opaque;
        cmd.flag &= !FLAG_RESPONSE;
        if let Some(keys) = &self.options.acl {
            acl::sign(
                &mut cmd.ext_fields,
                body,
                &keys.access_key,
                &keys.secret_key,
                None,
            );
        }
        let invalid =
            |e: &dyn std::fmt::Display| SendError::Invalid(format!("request {}: {e}", cmd.code));
        let header = cmd.encode_header().map_err(|e| invalid(&e))?;
        let frame = self
            .options
            .codec
            .encode_split(cmd.serialize_type, &header, body)
            .map_err(|e| invalid(&e))?;
        // filed before the write, so an answer arriving at once finds its request
        let (answer, _registered) = self.shared.register(opaque)?;
        {
            let mut wr = self.writer.lock().await;
            if let Some(why) = self.shared.closed() {
                return Err(why);
            }
            let mut writing = WriteInProgress {
                shared: &self.shared,
                done: false,
            };
            let written = write_frame(&mut wr, &frame).await;
            writing.done = true;
            if let Err(e) = written {
                let why = self.shared.transport(format!("write: {e}"));
                self.shared.close(why.clone());
                return Err(why);
            }
        }
        match answer.await {
            Ok(result) => result,
            Err(_) => Err(self
                .shared
                .closed()
                .unwrap_or_else(|| self.shared.transport("connection closed"))),
        }
    }

    /// Ends the connection: waiting requests fail, the socket is shut down.
    pub async fn close(&self) {
        self.shared
            .close(self.shared.transport("connection closed"));
        let _ = self.writer.lock().await.shutdown().await;
    }
}

/// Writes the whole frame: head and body in vectored writes, the body from where it is.
async fn write_frame(wr: &mut OwnedWriteHalf, frame: &OutFrame<'_>) -> std::io::Result<()> {
    let mut head: &[u8] = &frame.head;
    let mut body = frame.body;
    while !head.is_empty() || !body.is_empty() {
        let n = if head.is_empty() {
            wr.write(body).await?
        } else {
            wr.write_vectored(&[IoSlice::new(head), IoSlice::new(body)])
                .await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_head = n.min(head.len());
        head = &head[from_head..];
        body = &body[n - from_head..];
    }
    Ok(())
}

async fn read_loop(mut rd: OwnedReadHalf, shared: Arc<Shared>, codec: FrameCodec) {
    let why = read_frames(&mut rd, &shared, &codec).await;
    shared.close(why);
}

/// Reads frames until the stream ends or breaks; returns why. The buffer holds at most the
/// frame being read (bounded by the codec) plus one read's worth of the next.
async fn read_frames(rd: &mut OwnedReadHalf, shared: &Shared, codec: &FrameCodec) -> SendError {
    let protocol = |what: String| SendError::Protocol {
        addr: shared.addr.clone(),
        what,
    };
    let mut buf: Vec<u8> = Vec::with_capacity(READ_SIZE);
    let mut read_total: u64 = 0;
    loop {
        let mut start = 0;
        loop {
            match remoting::decode(codec, &buf[start..]) {
                Ok(None) => break,
                Ok(Some((packet, used))) => {
                    if packet.command.is_response() {
                        shared.deliver(Response {
                            body: packet.body.to_vec(),
                            command: packet.command,
                        });
                    } else {
                        tracing::debug!(
                            addr = %shared.addr,
                            code = packet.command.code,
                            "request from the peer ignored"
                        );
                    }
                    start += used;
                }
                Err(e) => {
                    let at = read_total - (buf.len() - start) as u64;
                    return protocol(format!("bad frame at byte {at} of the stream: {e}"));
                }
            }
        }
        if start > 0 {
            buf.drain(..start);
            if buf.capacity() > KEEP_BUFFER && buf.len() < KEEP_BUFFER {
                buf.shrink_to(READ_SIZE.max(buf.len()));
            }
        }
        // `decode` has checked the announced length against the codec's limit
        let want = match codec.frame_len(&buf) {
            Ok(Some(total)) => total.saturating_sub(buf.len()).max(1),
            Ok(None) => READ_SIZE,
            Err(e) => {
                let at = read_total - buf.len() as u64;
                return protocol(format!("bad frame at byte {at} of the stream: {e}"));
            }
        };
        buf.reserve_exact(want);
        match rd.read_buf(&mut buf).await {
            Ok(0) => return shared.transport("connection closed by the peer"),
            Ok(n) => read_total += n as u64,
            Err(e) => return shared.transport(format!("read: {e}")),
        }
    }
}

/// The connection to one address, once opened; locked while it is being opened.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<Connection>>>>;

/// One connection per address, opened on first use and again after it ends.
pub struct Pool {
    options: ClientOptions,
    slots: Mutex<HashMap<String, Slot>>,
}

impl Pool {
    pub fn new(options: ClientOptions) -> Self {
        Pool {
            options,
            slots: Mutex::new(HashMap::new()),
        }
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// The open connection to `addr`, or a new one. Connecting to one address does not hold up
    /// requests to others.
    pub async fn get(&self, addr: &str) -> Result<Arc<Connection>, SendError> {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(addr.to_string())
            .or_default()
            .clone();
        let mut slot = slot.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(conn.clone());
        }
        let conn = Arc::new(Connection::connect(addr, &self.options).await?);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// [`Connection::request`] on the connection to `addr`, within `timeout` (connect included).
    pub async fn request(
        &self,
        addr: &str,
        cmd: RemotingCommand,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Response, SendError> {
        let started = Instant::now();
        let conn = match tokio::time::timeout(timeout, self.get(addr)).await {
            Ok(conn) => conn?,
            Err(_) => {
                return Err(SendError::Transport {
                    addr: addr.to_string(),
                    what: format!("connect timed out after {} ms", timeout.as_millis()),
                })
            }
        };
        let left = timeout.saturating_sub(started.elapsed());
        conn.request(cmd, body, left).await
    }

    /// Closes every connection.
    pub async fn close_all(&self) {
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for slot in slots {
            if let Some(conn) = slot.lock().await.take() {
                conn.close().await;
            }
        }
    }
}
