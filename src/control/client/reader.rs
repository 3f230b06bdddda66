//! The reading side of a control client: the task that owns what tmux
//! writes control mode to (a `tmux -C` child's stdout, or a direct link's
//! socket) and its peer (the child, or the link task).
//!
//! It never waits on anyone but [`Delivery::Lossless`] subscribers (who
//! asked for it): a lone control client that stops reading makes tmux stop
//! reading the pane, which would block the program. It completes replies in
//! FIFO order, routes output through `subscribe`'s flow control, answers
//! tmux's own pauses with resyncs, and on EOF fails everything that waits.
//!
//! [`Delivery::Lossless`]: super::Delivery::Lossless

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::process::ChildStderr;
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tracing::{debug, trace, warn};

use super::transport::{Peer, Source};
use super::{ClientShared, Internal, Pending, State};

/// How long a detaching client waits for the handshake lock: a connect
/// holds it for milliseconds, and the reader reads nothing meanwhile.
const DETACH_PATIENCE: Duration = Duration::from_secs(2);
use crate::control::parse::parse_guard;
use crate::control::subscribe::{Effects, PaneInfo, Snapshot, SubState};
use crate::control::{
    ControlCodec, Event, Notification, PaneId, ParseError, ParseErrorKind, Reply,
};

/// The read buffer made when tmux has written something: a pipe's or a
/// socket's worth of output in one read (a flood's throughput), and the
/// capacity a buffer split into frames grows back to.
const READ_CAPACITY: usize = 64 * 1024;

/// The next event tmux wrote, holding a read buffer only while there is
/// something to read: with nothing left undecoded, the buffer is let go
/// and the reader waits for the source to be readable before it makes a
/// new one. An idle client (most terminals, most of the time) then holds
/// none (nor the codec's unescaping chunk); 64 KiB each were most of
/// serve's memory per idle terminal. The frames already split off keep
/// their own part of the old buffers.
async fn next_event(
    framed: &mut FramedRead<Source, ControlCodec>,
) -> Option<std::io::Result<Event>> {
    if framed.read_buffer().is_empty() {
        if framed.read_buffer().capacity() > 0 {
            *framed.read_buffer_mut() = BytesMut::new();
            framed.decoder_mut().release_scratch();
        }
        // An error here is the read's error too: `next` reports it.
        let _ = framed.get_ref().readable().await;
        *framed.read_buffer_mut() = BytesMut::with_capacity(READ_CAPACITY);
    }
    framed.next().await
}

/// The reading side of a client; owns the child or the link.
pub(super) struct Reader {
    pub(super) shared: Arc<ClientShared>,
    /// Cancelled when the client detaches (explicitly or on its last drop).
    pub(super) cancel: CancellationToken,
    /// Cancelled when the linger task lets go of this connection while
    /// the client lives on (`linger.rs`): the reader detaches as for
    /// `cancel`, but closes nothing.
    pub(super) release: CancellationToken,
    pub(super) ready: Option<oneshot::Sender<std::result::Result<(), String>>>,
    pub(super) exit_reason: Option<String>,
    pub(super) stderr_tail: LastWords,
}

/// Where tmux's stderr goes, read for the close reason.
pub(super) enum LastWords {
    /// A pipe [`drain_stderr`] keeps the tail of.
    Drained(Arc<Mutex<Vec<u8>>>),
    /// A file in the server's directory, removed with the client.
    File(tempfile::TempPath),
    /// A direct link: no process, no stderr.
    None,
}

impl LastWords {
    /// The last [`LAST_WORDS`] bytes written.
    fn tail(&self) -> Vec<u8> {
        match self {
            LastWords::Drained(tail) => tail.lock().map(|t| t.clone()).unwrap_or_default(),
            // Gone with its directory (a killed server) is no last word.
            LastWords::File(path) => {
                let mut all = std::fs::read(path).unwrap_or_default();
                all.drain(..all.len().saturating_sub(LAST_WORDS));
                all
            }
            LastWords::None => Vec::new(),
        }
    }
}

/// How much of tmux's stderr the close reason keeps.
const LAST_WORDS: usize = 4096;

impl Reader {
    pub(super) async fn run(
        mut self,
        mut framed: FramedRead<Source, ControlCodec>,
        mut peer: Peer,
        hangup: CancellationToken,
    ) {
        // Made once: one made each turn registered and dropped a waiter on
        // the token for every event read, a cost on every keystroke's echo.
        let cancelled = self.cancel.clone().cancelled_owned();
        tokio::pin!(cancelled);
        let released = self.release.clone().cancelled_owned();
        tokio::pin!(released);
        let mut io_error = None;
        let mut detaching = false;
        // Let go while idle: the client lives on, unlinked.
        let mut releasing = false;
        // Held from the hangup until `tmux -C` has exited (see `handshake`).
        let mut handshake = None;
        loop {
            let next = if detaching {
                // Detaching: tmux answers stdin EOF with `%exit`; don't wait forever.
                match tokio::time::timeout(Duration::from_secs(2), next_event(&mut framed)).await {
                    Ok(next) => next,
                    Err(_) => break,
                }
            } else {
                let leave = tokio::select! {
                    next = next_event(&mut framed) => Err(next),
                    () = &mut cancelled => Ok(false),
                    () = &mut released => Ok(true),
                };
                match leave {
                    Err(next) => next,
                    Ok(release) => {
                        if let Some(path) = &self.shared.opts.handshake_lock {
                            handshake = super::handshake::acquire(
                                path,
                                super::handshake::Create::Never,
                                DETACH_PATIENCE,
                            )
                            .await;
                        }
                        // A connection let go has its stdin put aside
                        // (`linger.rs`): dropped here, under the lock, so
                        // its EOF comes now.
                        drop(self.shared.lock().leaving.take());
                        hangup.cancel();
                        detaching = true;
                        releasing = release;
                        continue;
                    }
                }
            };
            match next {
                Some(Ok(event)) => self.handle(event).await,
                Some(Err(e)) => {
                    io_error = Some(e);
                    break;
                }
                None => break,
            }
        }
        let status = peer.finish(Duration::from_secs(2)).await;
        // Gone: no `%client-detached` can follow from this client now.
        drop(handshake);
        hangup.cancel();
        if releasing && !self.cancel.is_cancelled() {
            // Let go on purpose: the client lives on. A server that died
            // meanwhile is found by the next connection.
            debug!("control connection let go while idle");
            return;
        }
        let reason = self.close_reason(io_error, status);
        debug!(reason = %reason, "control connection closed");
        // Fails what waits, ends the streams, stops the stderr drain and
        // the lag watchers.
        self.close(reason);
    }

    fn close_reason(&mut self, io_error: Option<std::io::Error>, status: String) -> String {
        if let Some(e) = io_error {
            return format!("reading tmux -C: {e}");
        }
        if let Some(reason) = self.exit_reason.take() {
            return reason;
        }
        let tail = self.stderr_tail.tail();
        let tail = String::from_utf8_lossy(&tail).trim().to_owned();
        if !tail.is_empty() {
            return tail;
        }
        status
    }

    fn close(&mut self, reason: String) {
        self.shared.close(reason.clone());
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Err(reason));
        }
    }

    async fn handle(&mut self, event: Event) {
        match event {
            Event::Reply(reply) if reply.flags == 0 => {
                // tmux's own blocks: the attach command first, hooks later.
                if let Some(ready) = self.ready.take() {
                    let _ = ready.send(if reply.ok { Ok(()) } else { Err(reply.text()) });
                } else {
                    trace!(number = reply.number, "skipping a flags-0 block");
                }
            }
            Event::Reply(reply) => self.complete(reply).await,
            Event::Notification(n) => self.notify(n).await,
            Event::Text(line) => debug!(line = ?line, "text outside a reply block"),
            Event::Malformed(e) => match too_large_reply(&e) {
                // The block answered a command: fail that command, so the
                // replies after it still meet their own commands.
                Some(reply) if reply.flags != 0 => {
                    warn!(error = %e, "reply over the size limit");
                    self.complete(reply).await;
                }
                _ => warn!(error = %e, "malformed control-mode line"),
            },
        }
    }

    async fn complete(&mut self, reply: Reply) {
        let mut fx = Effects::default();
        {
            let mut state = self.shared.lock();
            let mut front = state.pending.pop_front();
            loop {
                match front {
                    // A guard (`if-shell -F`) that succeeded is followed by
                    // its branch's own block, which answers the guarded
                    // command; one that failed ran no branch, so its own
                    // block is the answer.
                    Some(Pending::Guard(then)) if reply.ok => {
                        state.pending.push_front(*then);
                    }
                    Some(Pending::Guard(then)) => {
                        front = Some(*then);
                        continue;
                    }
                    None => warn!(number = reply.number, "reply with no command pending"),
                    Some(Pending::Caller { tx, .. }) => {
                        crate::hops::mark(crate::hops::Hop::Replied);
                        let number = reply.number;
                        if tx.is_none_or(|tx| tx.send(Ok(reply)).is_err()) {
                            // The caller has the command in its error.
                            debug!(number, "reply after its caller gave up");
                        }
                    }
                    Some(Pending::Internal(what)) => {
                        self.internal(&mut state, what, reply, &mut fx);
                        self.shared.apply_locked(&mut state, &mut fx);
                    }
                }
                break;
            }
            self.shared.unwatch_locked(&mut state);
        }
        self.deliver_blocking(fx).await;
    }

    fn internal(&self, state: &mut State, what: Internal, reply: Reply, fx: &mut Effects) {
        match what {
            Internal::Ignore(what) => {
                if !reply.ok {
                    warn!(what, error = %reply.text(), "tmux refused an engine command");
                }
            }
            Internal::ResyncInfo { pane, sub } => {
                let info = reply.lines.first().and_then(|l| PaneInfo::parse(l));
                if let Some(s) = state.routes.sub_mut(pane, sub) {
                    s.info = info;
                }
            }
            Internal::ResyncCapture { pane, sub, resync } => {
                let Some(s) = state.routes.sub_mut(pane, sub) else {
                    return;
                };
                // Info and capture are queued back to back: this info is
                // this capture's, stale or not.
                let info = s.info.take().unwrap_or_default();
                if s.resync != resync {
                    // tmux paused the pane while this capture was under way;
                    // a newer one follows and covers what tmux dropped.
                    debug!(%pane, sub, "dropping a capture overtaken by a newer resync");
                    return;
                }
                if !reply.ok {
                    // The pane is gone; its stream ends with the connection.
                    warn!(%pane, error = %reply.text(), "resync capture failed");
                    s.state = SubState::Live;
                    return;
                }
                let snapshot = Snapshot::from_capture(pane, info, reply.lines);
                state
                    .routes
                    .deliver_snapshot(pane, sub, resync, snapshot, fx);
            }
        }
    }

    async fn notify(&mut self, n: Notification) {
        match &n {
            Notification::Output { pane, data }
            | Notification::ExtendedOutput { pane, data, .. } => {
                let mut fx = Effects::default();
                {
                    let mut state = self.shared.lock();
                    if state.raw.contains_key(pane) {
                        // Its relay carries it (this client's `%output` of
                        // it was on when the relay was put in): once.
                        return;
                    }
                    state.output(*pane, data, &mut fx);
                    self.shared.apply_locked(&mut state, &mut fx);
                }
                self.deliver_blocking(fx).await;
            }
            // A raw pane's bytes never wait on this client: a pause of its
            // `%output` loses nothing.
            Notification::Pause { pane } if self.shared.lock().raw.contains_key(pane) => return,
            Notification::Pause { pane } => self.paused_by_tmux(*pane),
            Notification::Exit { reason } => {
                self.exit_reason = Some(
                    reason
                        .clone()
                        .unwrap_or_else(|| "tmux -C exited (%exit)".to_owned()),
                );
            }
            _ => {}
        }
        // Nobody listening is fine: the broadcast is for optional observers.
        if let Some(events) = self
            .shared
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = events.send(n);
        }
    }

    /// tmux paused a pane on its own (`pause-after`: the engine fell behind)
    /// or confirmed our pause. Output was dropped, so everyone who was
    /// following it live needs a resync.
    fn paused_by_tmux(&self, pane: PaneId) {
        let mut state = self.shared.lock();
        let Some(route) = state.routes.panes.get_mut(&pane) else {
            // Nobody follows the pane: let its output flow for the broadcast.
            self.shared.pane_switch_locked(&mut state, pane, "continue");
            return;
        };
        if route.paused {
            return; // our own pause, confirmed inside its reply block
        }
        route.paused = true;
        // Lagging subscribers resync once they drain. Resyncing ones start
        // over: their capture may predate what tmux has just dropped.
        let ids: Vec<u64> = route
            .subs
            .iter()
            .filter(|s| s.state != SubState::Lagging)
            .map(|s| s.id)
            .collect();
        debug!(%pane, subscribers = ids.len(), "tmux paused the pane: resyncing");
        for id in ids {
            self.shared.resync_locked(&mut state, pane, id);
        }
    }

    async fn deliver_blocking(&self, fx: Effects) {
        deliver_blocking(fx, &self.cancel).await;
    }
}

/// Waits for [`Delivery::Lossless`] subscribers to take their events,
/// unless the client is detaching (`cancel`): a subscriber that stopped
/// reading must not keep a detach (and everyone awaiting it) waiting
/// forever.
///
/// [`Delivery::Lossless`]: super::Delivery::Lossless
pub(super) async fn deliver_blocking(fx: Effects, cancel: &CancellationToken) {
    for (tx, event) in fx.blocking {
        // A dropped receiver just means nobody wants it any more.
        tokio::select! {
            _ = tx.send(event) => {}
            () = cancel.cancelled() => {
                debug!("detaching: dropping output a lossless subscriber did not take");
            }
        }
    }
}

/// Keeps the last few KiB of tmux's stderr for the close reason, until EOF
/// or until the connection has ended (`ended`; a process that inherited the
/// pipe must not keep the task alive).
pub(super) async fn drain_stderr(
    mut stderr: ChildStderr,
    tail: Arc<Mutex<Vec<u8>>>,
    ended: CancellationToken,
) {
    let mut buf = [0u8; LAST_WORDS];
    loop {
        let n = tokio::select! {
            read = stderr.read(&mut buf) => match read {
                Ok(n) => n,
                Err(_) => break,
            },
            () = ended.cancelled() => break,
        };
        if n == 0 {
            break;
        }
        if let Ok(mut tail) = tail.lock() {
            tail.extend_from_slice(&buf[..n]);
            let excess = tail.len().saturating_sub(LAST_WORDS);
            tail.drain(..excess);
        }
    }
}

/// The failed reply that stands for a block the codec dropped as too large
/// ([`ParseErrorKind::BlockTooLarge`]), built from its `%begin` line; its
/// one line is the error's message.
fn too_large_reply(error: &ParseError) -> Option<Reply> {
    if !matches!(error.kind, ParseErrorKind::BlockTooLarge { .. }) {
        return None;
    }
    let begin = parse_guard(&error.line)?;
    Some(Reply {
        time: begin.time,
        number: begin.number,
        flags: begin.flags,
        ok: false,
        lines: vec![bytes::Bytes::from(error.to_string())],
    })
}
