//! A pane's raw output: the task that reads tmux's `pipe-pane` socket
//! (handed over by the relay, see [`crate::tmux::relay`]) and routes its
//! bytes exactly as the reader routes `%output`.
//!
//! It always drains: a subscriber that falls behind is skipped and
//! resynced by `subscribe`'s flow control, never waited for (except a
//! [`Delivery::Lossless`] one, who asked for it), so a stalled viewer never
//! leaves bytes in tmux, whose pipe buffer has no bound. Pausing the pane in
//! tmux would quiet nothing here (it only stops `%output`), so raw panes are
//! never paused.
//!
//! Ordering with the control stream: the pane's exit is known through
//! control mode, and tmux calls a piped pane dead only once its pipe buffer
//! is written to the socket. So whoever learns the pane died asks
//! [`drain`](super::ControlClient::drain_raw) for everything the socket
//! holds and gets it routed before the exit is reported.
//!
//! [`Delivery::Lossless`]: super::Delivery::Lossless

use std::os::fd::OwnedFd;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::ClientShared;
use super::reader::deliver_blocking;
use crate::control::subscribe::Effects;
use crate::control::{Notification, PaneId};

/// Bytes read per call at most: as much as a `%output` line carries.
const CHUNK: usize = 64 * 1024;
/// Room an idle pane's reader keeps: a terminal that prints little costs
/// little; the room doubles up to [`CHUNK`] while reads fill it.
const FIRST_CHUNK: usize = 4 * 1024;

/// A request to route everything the socket holds now; answered once done.
pub(super) type Flush = oneshot::Sender<()>;

/// The routing state's link to a raw pane's reader task.
#[derive(Debug)]
pub(super) struct RawLink {
    pub(super) flush: mpsc::Sender<Flush>,
}

/// Starts the reader of `source`, a stream socket carrying `pane`'s bytes.
pub(super) fn start(
    shared: &Arc<ClientShared>,
    cancel: CancellationToken,
    pane: PaneId,
    source: OwnedFd,
) -> std::io::Result<RawLink> {
    let std = std::os::unix::net::UnixStream::from(source);
    std.set_nonblocking(true)?;
    let stream = UnixStream::from_std(std)?;
    // One flush at a time is enough: each drains everything there is.
    let (flush, flushes) = mpsc::channel(16);
    shared
        .tasks
        .spawn(read_raw(shared.clone(), cancel, pane, stream, flushes));
    Ok(RawLink { flush })
}

async fn read_raw(
    shared: Arc<ClientShared>,
    cancel: CancellationToken,
    pane: PaneId,
    mut stream: UnixStream,
    mut flushes: mpsc::Receiver<Flush>,
) {
    let mut buf = BytesMut::new();
    let mut room = FIRST_CHUNK;
    // Made once: one made each turn registered and dropped a waiter on
    // the token for every read (issue 27).
    let ended = shared.ended.clone().cancelled_owned();
    tokio::pin!(ended);
    loop {
        let offered = make_room(&mut buf, room);
        tokio::select! {
            biased;
            () = &mut ended => break,
            Some(ack) = flushes.recv() => {
                let open = drain_now(&shared, &cancel, pane, &stream, &mut buf).await;
                let _ = ack.send(());
                if !open {
                    break;
                }
            }
            // `read_buf`, not `readable` and `try_read_buf`: a read that
            // leaves room clears the socket's readiness (tokio knows the
            // buffer is drained), so an echo costs one read, not a second
            // that fails `EAGAIN` on the way to its viewer (issue 27).
            read = stream.read_buf(&mut buf) => {
                match read {
                    Ok(0) => break,
                    Ok(n) => {
                        crate::hops::mark(crate::hops::Hop::RawRead);
                        room = next_room(room, n, offered);
                        route(&shared, &cancel, pane, buf.split().freeze()).await;
                    }
                    Err(e) => {
                        debug!(%pane, error = %e, "reading the raw output pipe");
                        break;
                    }
                }
            }
        }
    }
    // The pipe is closed (the pane is gone, or the connection is): nothing
    // more can come, so later flushes have nothing to wait for.
    shared.lock().raw.remove(&pane);
    flushes.close();
    while let Ok(ack) = flushes.try_recv() {
        let _ = ack.send(());
    }
}

/// The room for the next read after one of `n` bytes into `offered`:
/// doubled while reads fill what they were offered, halved back towards
/// [`FIRST_CHUNK`] while they leave most of it empty, so a terminal that
/// printed a flood once does not keep a flood's buffer while it idles.
fn next_room(room: usize, n: usize, offered: usize) -> usize {
    if n >= offered.min(room) {
        (room * 2).min(CHUNK)
    } else if n < room / 8 {
        (room / 2).max(FIRST_CHUNK)
    } else {
        room
    }
}

/// Makes room for a read of about `room` bytes and returns the space
/// offered. What earlier reads left of the block is used while it holds
/// half of `room`: a new block per read would leave each chunk the stream
/// holds pinning a mostly empty block (short chunks the stream copies, so
/// their block is freed at once; see [`crate::stream`]'s ring).
fn make_room(buf: &mut BytesMut, room: usize) -> usize {
    if buf.capacity() - buf.len() < room / 2 {
        buf.reserve(room);
    }
    buf.capacity() - buf.len()
}

/// Routes everything the socket holds, without waiting for more; false
/// once the pipe is closed.
async fn drain_now(
    shared: &Arc<ClientShared>,
    cancel: &CancellationToken,
    pane: PaneId,
    stream: &UnixStream,
    buf: &mut BytesMut,
) -> bool {
    loop {
        make_room(buf, CHUNK);
        match stream.try_read_buf(buf) {
            Ok(0) => return false,
            Ok(_) => route(shared, cancel, pane, buf.split().freeze()).await,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

/// Routes one chunk as the reader routes a `%output` line, and shows it to
/// the notification broadcast, where event printers expect output.
async fn route(shared: &Arc<ClientShared>, cancel: &CancellationToken, pane: PaneId, data: Bytes) {
    let mut fx = Effects::default();
    {
        let mut state = shared.lock();
        if state.closed.is_some() {
            return;
        }
        state.output(pane, &data, &mut fx);
        shared.apply_locked(&mut state, &mut fx);
    }
    deliver_blocking(fx, cancel).await;
    if let Some(events) = shared
        .events
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        && events.receiver_count() > 0
    {
        let _ = events.send(Notification::Output { pane, data });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_grows_with_full_reads_and_shrinks_back_when_idle() {
        let mut room = FIRST_CHUNK;
        while room < CHUNK {
            room = next_room(room, room, room);
        }
        assert_eq!(next_room(room, room, room), CHUNK);
        // Echoes of keystrokes: back to the idle size, never below it.
        for _ in 0..16 {
            room = next_room(room, 3, room);
        }
        assert_eq!(room, FIRST_CHUNK);
        // A read that fills more than an eighth keeps the size.
        assert_eq!(next_room(CHUNK, CHUNK / 4, CHUNK), CHUNK);
        // A read that fills the rest of a block it was offered counts as
        // full: the room still grows while reads reuse blocks.
        assert_eq!(next_room(FIRST_CHUNK, 3000, 3000), 2 * FIRST_CHUNK);
    }
}
