//! One client connection: a read loop that decodes frames (bounded by the codec's maximum
//! frame and header), dispatches each command under the server's lock and writes its answer, and
//! a writer task that drains the connection's outbox: responses to parked pulls and requests the
//! server starts (`NOTIFY_CONSUMER_IDS_CHANGED`). Both write through one lock on the socket's
//! write half, frame by frame. A frame that cannot be decoded closes the connection, as the Java
//! server does.
//!
//! What a connection may hold is bounded:
//! - time: the first frame must be complete within [`Limits::first_frame`] of the connect, any
//!   later frame within [`Limits::frame`] of its first byte, and a connection silent between
//!   frames for the idle time is closed;
//! - memory: the receive buffer grows to the frame being read, no further, and shrinks back once
//!   it is answered; a frame larger than [`SMALL_FRAME`] first reserves its bytes from a budget
//!   all connections share ([`Limits::buffered`]), and is refused (the connection closed) when
//!   the budget is spent;
//! - number: [`ConnTable`] holds every open connection; when it is full a new connection closes
//!   the one that matters least (never completed a request, else the longest idle).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

use super::Shared;
use crate::remoting;

/// Frames waiting to be written to one connection.
pub type Outbox = mpsc::Sender<Vec<u8>>;

/// Frames an outbox holds before the server stops reading that connection's requests (and
/// drops notifications to it).
pub const OUTBOX_FRAMES: usize = 256;

/// Bytes a read asks for when no frame length is known yet; also what an idle connection's
/// buffer shrinks back to.
const READ_SIZE: usize = 4 * 1024;

/// Frames up to this size are read without asking the shared budget; a buffer larger than this
/// is shrunk once its frame is answered.
pub const SMALL_FRAME: usize = 64 * 1024;

/// Time and memory limits of connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From the connect to the end of the first frame.
    pub first_frame: Duration,
    /// From a frame's first byte to its last.
    pub frame: Duration,
    /// Bytes of frames over [`SMALL_FRAME`] being received at once, over all connections.
    pub buffered: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            first_frame: Duration::from_secs(10),
            frame: Duration::from_secs(30),
            buffered: 64 * 1024 * 1024,
        }
    }
}

pub fn outbox() -> (Outbox, mpsc::Receiver<Vec<u8>>) {
    mpsc::channel(OUTBOX_FRAMES)
}

/// Who is on the other end of a connection.
#[derive(Debug, Clone)]
pub struct ConnCtx {
    pub id: u64,
    pub peer: SocketAddr,
    pub outbox: Outbox,
}

/// One open connection as the table sees it.
struct Slot {
    /// When it last completed a request (its connect time before the first).
    last_active: Instant,
    served: bool,
    close: Arc<Notify>,
}

/// The open connections, at most `max`.
pub struct ConnTable {
    max: usize,
    slots: Mutex<HashMap<u64, Slot>>,
}

impl ConnTable {
    pub fn new(max: usize) -> Self {
        ConnTable {
            max: max.max(1),
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admit connection `id`; when the table is full, the connection that never completed a
    /// request, else the one idle the longest, is told to close and leaves the table. Returns
    /// what closes `id` and the id of the connection closed for it, if any.
    pub fn admit(&self, id: u64, now: Instant) -> (Arc<Notify>, Option<u64>) {
        let mut slots = self.slots();
        let mut evicted = None;
        if slots.len() >= self.max {
            let victim = slots
                .iter()
                .min_by_key(|(_, s)| (s.served, s.last_active))
                .map(|(id, _)| *id);
            if let Some(v) = victim {
                if let Some(s) = slots.remove(&v) {
                    s.close.notify_one();
                }
                evicted = victim;
            }
        }
        let close = Arc::new(Notify::new());
        slots.insert(
            id,
            Slot {
                last_active: now,
                served: false,
                close: close.clone(),
            },
        );
        (close, evicted)
    }

    /// Connection `id` completed a request.
    pub fn touch(&self, id: u64, now: Instant) {
        if let Some(s) = self.slots().get_mut(&id) {
            s.last_active = now;
            s.served = true;
        }
    }

    pub fn remove(&self, id: u64) {
        self.slots().remove(&id);
    }

    pub fn len(&self) -> usize {
        self.slots().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Bytes reserved from the shared budget for one frame; returned on drop.
struct Reserved<'a> {
    budget: &'a AtomicUsize,
    bytes: usize,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.budget.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Reserve `bytes` of the budget `used` (out of `max`), or `None` when they are not there.
fn reserve<'a>(used: &'a AtomicUsize, max: usize, bytes: usize) -> Option<Reserved<'a>> {
    used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
        u.checked_add(bytes).filter(|&n| n <= max)
    })
    .ok()?;
    Some(Reserved {
        budget: used,
        bytes,
    })
}

/// Serve one connection until the peer closes it, it breaks a limit, sends a bad frame, or is
/// told to close.
pub async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    id: u64,
    close: Arc<Notify>,
) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let wr = Arc::new(tokio::sync::Mutex::new(wr));
    let (tx, mut rx) = outbox();
    let writer = {
        let wr = wr.clone();
        tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if wr.lock().await.write_all(&frame).await.is_err() {
                    break;
                }
            }
            let _ = wr.lock().await.shutdown().await;
        })
    };
    let ctx = ConnCtx {
        id,
        peer,
        outbox: tx,
    };
    tracing::debug!(conn = id, %peer, "connected");
    let why = tokio::select! {
        why = read_loop(&mut rd, &wr, &shared, &ctx) => why,
        _ = close.notified() => "closed to make room for a new connection".to_string(),
    };
    tracing::debug!(conn = id, %peer, "closed: {why}");
    shared.conns.remove(id);
    shared.connection_closed(id);
    drop(ctx);
    let _ = writer.await;
}

async fn read_loop(
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    wr: &tokio::sync::Mutex<tokio::net::tcp::OwnedWriteHalf>,
    shared: &Shared,
    ctx: &ConnCtx,
) -> String {
    let limits = shared.limits;
    let connected = Instant::now();
    let mut served = false;
    // when the frame in the buffer started to arrive
    let mut frame_started: Option<Instant> = None;
    let mut reserved: Option<Reserved<'_>> = None;
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let want = match shared.codec.frame_len(&buf) {
            Err(e) => return format!("bad frame: {e}"),
            Ok(Some(total)) => {
                if total > SMALL_FRAME && reserved.is_none() {
                    reserved = reserve(&shared.buffered, limits.buffered, total);
                    if reserved.is_none() {
                        tracing::warn!(conn = ctx.id, peer = %ctx.peer, "refused a frame of {total} bytes: {} bytes of large frames are being received", limits.buffered);
                        return format!("no room for a frame of {total} bytes");
                    }
                }
                total.saturating_sub(buf.len()).max(1)
            }
            Ok(None) => READ_SIZE,
        };
        buf.reserve(want);
        let now = Instant::now();
        let deadline = match (served, frame_started) {
            (false, _) => connected + limits.first_frame,
            (true, Some(t)) => t + limits.frame,
            (true, None) => now + shared.idle,
        };
        let n = match tokio::time::timeout_at(deadline.into(), rd.read_buf(&mut buf)).await {
            Err(_) if !served => return "no request in time".into(),
            Err(_) if frame_started.is_some() => return "a frame took too long".into(),
            Err(_) => return format!("idle for {} s", shared.idle.as_secs()),
            Ok(Err(e)) => return format!("read error: {e}"),
            Ok(Ok(0)) => return "peer closed".into(),
            Ok(Ok(n)) => n,
        };
        if frame_started.is_none() && n > 0 {
            frame_started = Some(Instant::now());
        }
        let mut start = 0;
        while start < buf.len() {
            let (frame, used) = match remoting::decode(&shared.codec, &buf[start..]) {
                Ok(None) => break,
                Ok(Some(p)) => p,
                Err(e) => {
                    tracing::warn!(conn = ctx.id, peer = %ctx.peer, "bad frame at byte {start} of the receive buffer: {e}");
                    return format!("bad frame: {e}");
                }
            };
            let reply = shared.dispatch(ctx, &frame.command, frame.body);
            start += used;
            served = true;
            shared.conns.touch(ctx.id, Instant::now());
            // the answer is written here, in turn with the outbox's frames
            if let Some(bytes) = reply {
                if let Err(e) = wr.lock().await.write_all(&bytes).await {
                    return format!("write error: {e}");
                }
            }
        }
        if start > 0 {
            buf.drain(..start);
            reserved = None;
            frame_started = (!buf.is_empty()).then(Instant::now);
            if buf.capacity() > SMALL_FRAME {
                buf.shrink_to(READ_SIZE.max(buf.len()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_closes_a_connection_that_never_asked_then_the_longest_idle() {
        let t = ConnTable::new(3);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let (_, none) = t.admit(1, at(0));
        assert_eq!(none, None);
        t.admit(2, at(1));
        t.admit(3, at(2));
        t.touch(1, at(10));
        t.touch(2, at(5));
        // 3 never completed a request: it goes first, though 2 is older
        assert_eq!(t.admit(4, at(20)).1, Some(3));
        t.touch(4, at(30));
        // then the one idle the longest
        assert_eq!(t.admit(5, at(40)).1, Some(2));
        assert_eq!(t.len(), 3);
        t.remove(1);
        assert_eq!(t.admit(6, at(50)).1, None);
    }

    #[test]
    fn the_large_frame_budget_is_shared_and_returned() {
        let used = AtomicUsize::new(0);
        let a = reserve(&used, 100, 60).unwrap();
        assert!(reserve(&used, 100, 50).is_none());
        let b = reserve(&used, 100, 40).unwrap();
        drop(a);
        drop(b);
        assert_eq!(used.load(Ordering::Acquire), 0);
    }
}
