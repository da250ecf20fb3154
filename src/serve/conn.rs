//! One client connection: a read loop that decodes frames (bounded by the codec's maximum
//! frame), dispatches each command under the server's lock and writes its answer, and a writer
//! task that drains the connection's outbox: responses to parked pulls and requests the server
//! starts (`NOTIFY_CONSUMER_IDS_CHANGED`). Both write through one lock on the socket's write
//! half, frame by frame. A frame that cannot be decoded
//! closes the connection, as the Java server does; so does a connection silent for the idle
//! time.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::Shared;
use crate::remoting;

/// Frames waiting to be written to one connection.
pub type Outbox = mpsc::Sender<Vec<u8>>;

/// Frames an outbox holds before the server stops reading that connection's requests (and
/// drops notifications to it).
pub const OUTBOX_FRAMES: usize = 256;

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;

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

/// Serve one connection until the peer closes it, it idles out, or it sends a bad frame.
pub async fn serve(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>, id: u64) {
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
    let why = read_loop(&mut rd, &wr, &shared, &ctx).await;
    tracing::debug!(conn = id, %peer, "closed: {why}");
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
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let n = match tokio::time::timeout(shared.idle, rd.read(&mut chunk)).await {
            Err(_) => return format!("idle for {} s", shared.idle.as_secs()),
            Ok(Err(e)) => return format!("read error: {e}"),
            Ok(Ok(0)) => return "peer closed".into(),
            Ok(Ok(n)) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
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
            // the answer is written here, in turn with the outbox's frames
            if let Some(bytes) = reply {
                if let Err(e) = wr.lock().await.write_all(&bytes).await {
                    return format!("write error: {e}");
                }
            }
        }
        buf.drain(..start);
    }
}
