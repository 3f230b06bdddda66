//! A pane's raw output: the task that reads the pane's stream from its
//! resident relay (see [`crate::tmux::relay`]) and routes its bytes
//! exactly as the reader routes `%output`.
//!
//! It always drains: a subscriber that falls behind is skipped and
//! resynced by `subscribe`'s flow control, never waited for (except a
//! [`Delivery::Lossless`] one, who asked for it), so the relay never holds
//! bytes for this process longer than it must. Pausing the pane in tmux
//! would quiet nothing here (it only stops `%output`), so raw panes are
//! never paused. A process that falls behind the relay's window anyway
//! (stopped, swapped out) gets a gap, routed as [`SinkEvent::Skip`].
//!
//! Ordering with the control stream: the pane's exit is known through
//! control mode, and tmux calls a piped pane dead only once its pipe is
//! written to the relay. So whoever learns the pane died asks
//! [`drain`](super::ControlClient::drain_raw) for everything the relay
//! read, which this task asks the relay for ([`Request::Sync`]) and routes
//! before it answers.
//!
//! The link also carries the program's end, so an idle terminal costs this
//! process one descriptor (the link), not a pidfd beside it: a watcher asks
//! ([`watch_raw_exit`](super::ControlClient::watch_raw_exit)) and this task
//! has the relay watch the pane's process ([`Request::Watch`]), then resolves
//! the watcher's receiver when [`Frame::Ended`] comes; the link's end drops
//! it unresolved, so the watcher asks tmux instead of missing a death.
//!
//! [`Delivery::Lossless`]: super::Delivery::Lossless
//! [`SinkEvent::Skip`]: crate::control::subscribe::SinkEvent::Skip

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::ClientShared;
use super::reader::deliver_blocking;
use super::shared::{RawAsk, RawLink};
use crate::control::subscribe::Effects;
use crate::control::{Notification, PaneId};
use crate::tmux::relay::Linked;
use crate::tmux::relay::wire::{self, Frame, Request};

/// Bytes read per call at most: a data frame and its head.
const CHUNK: usize = wire::MAX_DATA + wire::HEAD_LEN;
/// Room an idle pane's reader keeps: a terminal that prints little costs
/// little; the room doubles up to [`CHUNK`] while reads fill it.
const FIRST_CHUNK: usize = 4 * 1024;

/// Starts the reader of `linked`, a link to `pane`'s relay.
pub(super) fn start(
    shared: &Arc<ClientShared>,
    cancel: CancellationToken,
    pane: PaneId,
    linked: Linked,
) -> RawLink {
    // One flush at a time is enough: each drains everything there is.
    let (asks, asked) = mpsc::channel(16);
    shared.tasks.spawn(read_raw(
        shared.clone(),
        cancel,
        pane,
        linked.socket,
        linked.buf,
        asked,
    ));
    RawLink { asks }
}

/// How a link to the relay ended.
enum Ended {
    /// This process let go.
    Done,
    /// The link broke while the pane may live on, with why.
    Lost(String),
}

async fn read_raw(
    shared: Arc<ClientShared>,
    cancel: CancellationToken,
    pane: PaneId,
    mut socket: UnixStream,
    mut buf: BytesMut,
    mut asks: mpsc::Receiver<RawAsk>,
) {
    let mut answers = Answers::default();
    let mut room = FIRST_CHUNK;
    // Made once: one made each turn registered and dropped a waiter on
    // the token for every read, a cost on every keystroke's echo.
    let ended = shared.ended.clone().cancelled_owned();
    tokio::pin!(ended);
    // Frames read with the hello.
    let mut end = route_frames(&shared, &cancel, pane, &mut buf, &mut answers).await;
    while end.is_none() {
        let offered = make_room(&mut buf, room);
        end = tokio::select! {
            biased;
            () = &mut ended => Some(Ended::Done),
            Some(ask) = asks.recv() => {
                let link = Link { shared: &shared, cancel: &cancel, pane, socket: &mut socket };
                ask_relay(link, &mut buf, &mut answers, ask).await
            }
            // `read_buf`, not `readable` and `try_read_buf`: a read that
            // leaves room clears the socket's readiness (tokio knows the
            // buffer is drained), so an echo costs one read, not a second
            // that fails `EAGAIN` on the way to its viewer.
            read = socket.read_buf(&mut buf) => match read {
                Ok(0) => Some(Ended::Lost("the output relay closed the link".to_owned())),
                Ok(n) => {
                    crate::hops::mark(crate::hops::Hop::RawRead);
                    room = next_room(room, n, offered);
                    route_frames(&shared, &cancel, pane, &mut buf, &mut answers).await
                }
                Err(e) => Some(Ended::Lost(format!("reading from the output relay: {e}"))),
            },
        };
    }
    if let Some(Ended::Lost(why)) = end {
        debug!(%pane, why, "the pane's raw stream is lost");
        shared.lock().routes.lost(pane, &why);
    }
    // Nothing more can come, so later flushes have nothing to wait for.
    shared.lock().raw.remove(&pane);
    shared
        .raw_changes
        .fetch_add(1, std::sync::atomic::Ordering::Release);
    asks.close();
    while let Ok(ask) = asks.try_recv() {
        match ask {
            RawAsk::Flush(ack) => {
                let _ = ack.send(());
            }
            RawAsk::Watch { answer, .. } => {
                let _ = answer.send(None);
            }
        }
    }
    // Those waiting for an end are dropped with `answers`: they ask tmux.
}

/// What the relay answered on the link, and who waits for an end.
#[derive(Default)]
struct Answers {
    /// A [`Frame::Synced`] came since the last ask.
    synced: bool,
    /// The pid a [`Frame::Watching`] named since the last ask.
    watching: Option<u32>,
    /// Those waiting for a watched process's end, by its pid.
    ends: Vec<(u32, oneshot::Sender<()>)>,
}

/// The link as an ask uses it.
struct Link<'a> {
    shared: &'a Arc<ClientShared>,
    cancel: &'a CancellationToken,
    pane: PaneId,
    socket: &'a mut UnixStream,
}

/// Does what `ask` asks of the relay and answers it; `Some` once the link
/// ended on the way.
async fn ask_relay(
    link: Link<'_>,
    buf: &mut BytesMut,
    answers: &mut Answers,
    ask: RawAsk,
) -> Option<Ended> {
    match ask {
        RawAsk::Flush(ack) => {
            let end = sync(link, buf, answers, Request::Sync, CHUNK).await;
            let _ = ack.send(());
            end
        }
        RawAsk::Watch { pid, answer } => {
            // Waiting before it asks: the end may come with the answer.
            let (told, end_of) = oneshot::channel();
            answers.ends.push((pid, told));
            // Its answer is a few bytes: a flush's room would stay with
            // every idle terminal's reader (the pages its reads touch).
            let end = sync(link, buf, answers, Request::Watch { pid }, FIRST_CHUNK).await;
            if answers.watching == Some(pid) {
                let _ = answer.send(Some(end_of));
            } else {
                // A plain `Synced`: the relay does not watch (it predates
                // watches, or has no pidfd to spare).
                answers.ends.retain(|(watched, _)| *watched != pid);
                let _ = answer.send(None);
            }
            end
        }
    }
}

/// Routes the whole frames `buf` holds, noting the relay's answers in
/// `answers` and telling its ends. `Some` once the link ended.
async fn route_frames(
    shared: &Arc<ClientShared>,
    cancel: &CancellationToken,
    pane: PaneId,
    buf: &mut BytesMut,
    answers: &mut Answers,
) -> Option<Ended> {
    loop {
        match wire::decode(buf) {
            Ok(None) => return None,
            Ok(Some(Frame::Data(data))) => route(shared, cancel, pane, data).await,
            Ok(Some(Frame::Gap { to })) => {
                let mut fx = Effects::default();
                {
                    let mut state = shared.lock();
                    state.routes.skip(pane, to, &mut fx);
                    shared.apply_locked(&mut state, &mut fx);
                }
                deliver_blocking(fx, cancel).await;
            }
            Ok(Some(Frame::Synced { .. })) => answers.synced = true,
            Ok(Some(Frame::Watching { pid })) => answers.watching = Some(pid),
            Ok(Some(Frame::Ended { pid })) => {
                for (_, told) in answers.ends.extract_if(.., |(watched, _)| *watched == pid) {
                    let _ = told.send(());
                }
            }
            // The pipe closed: the pane or its server is gone (the
            // watcher learns that from control mode and lets it be), or the
            // pipe was replaced under a live pane (the watcher links again).
            Ok(Some(Frame::End { .. })) => {
                return Some(Ended::Lost("the pane's pipe closed".to_owned()));
            }
            Ok(Some(Frame::Hello { .. } | Frame::Kept { .. })) => {
                return Some(Ended::Lost(
                    "the output relay answered what a data link never asks".to_owned(),
                ));
            }
            Err(bad) => return Some(Ended::Lost(format!("the output relay sent {}", bad.0))),
        }
    }
}

/// Sends `request` (a sync, or a watch, which the relay answers as one)
/// and routes everything the relay read until its `Synced`, reading
/// about `room` bytes at once; `Some` once the link ended on the way.
async fn sync(
    link: Link<'_>,
    buf: &mut BytesMut,
    answers: &mut Answers,
    request: Request,
    room: usize,
) -> Option<Ended> {
    let Link {
        shared,
        cancel,
        pane,
        socket,
    } = link;
    if let Err(e) = socket.write_all(&wire::encode_request(request)).await {
        return Some(Ended::Lost(format!("asking the output relay: {e}")));
    }
    answers.synced = false;
    answers.watching = None;
    loop {
        if let Some(end) = route_frames(shared, cancel, pane, buf, answers).await {
            return Some(end);
        }
        if answers.synced {
            return None;
        }
        make_room(buf, room);
        match socket.read_buf(buf).await {
            Ok(0) => return Some(Ended::Lost("the output relay closed the link".to_owned())),
            Ok(_) => {}
            Err(e) => return Some(Ended::Lost(format!("reading from the output relay: {e}"))),
        }
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
