//! One attached session's pump, once its viewer is attached and its hello
//! sent: viewer events out as frames (batched, one flush), client frames in
//! as input, resizes (coalesced) and history requests, with the keepalive,
//! the credential's end and shutdown watched in the same loop. Apart from
//! the door (`mod.rs`: the upgrade, refusals, close codes) because this is
//! the per-frame path every echo takes, with its own limits.

use axum::extract::ws::{Message, WebSocket};
use bytes::Bytes;
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::time::Instant;
use tracing::warn;

use super::burst::{self, Burst};
use super::errors::{client_error, send_error};
use super::keepalive::{Keepalive, Tick};
use super::typing::Typist;
use super::{ACCESS_ENDED, AppState, BUDGET_SPENT, Credential, End, NO_ANSWER, send, sleep_until};
use crate::ErrorCode;
use crate::attach::{Viewer, ViewerEvent};
use crate::bridge::frames::{self, ClientFrame, close};
use crate::registry::WriteAnswer;
use crate::vocab::Size;

/// Pongs owed to a client that has not read since, at most (its pings'
/// payloads): past them it is closed 1008.
const MAX_OWED: usize = 1 << 20;

/// Client frames applied in one turn of the pump before it looks at its
/// other duties (output, pings) again; resizes among them are coalesced.
const DRAIN_BATCH: usize = 256;

/// At most this many queued frames go out behind one event, in one flush.
const SEND_BATCH: usize = 64;

/// One session's pump: the socket, its keepalive and what the viewer may do.
pub(super) struct Pump<'a> {
    pub(super) socket: &'a mut WebSocket,
    pub(super) state: &'a AppState,
    pub(super) keepalive: &'a mut Keepalive,
    pub(super) read_only: bool,
    /// Bytes of pongs owed to a client that has not read since.
    pub(super) owed: usize,
    /// What it signed in with, watched until it ends.
    pub(super) credential: &'a Credential,
    /// Who types, for the audit log.
    pub(super) who: &'a str,
    /// The burst of input under way, for the audit log.
    pub(super) typed: Burst,
    /// This viewer on its terminal's typing board.
    pub(super) typist: Typist,
    /// When it last typed.
    pub(super) last_input: Option<Instant>,
    /// The others typing, as the client was last told.
    pub(super) told: Vec<String>,
    /// tmux's answer to the last input, looked at with the next one.
    pub(super) answer: Option<WriteAnswer>,
}

impl Pump<'_> {
    /// Records one burst of input: who, which terminal, how many bytes.
    pub(super) fn typed_burst(&self, viewer: &Viewer, bytes: u64) {
        self.state.audit(
            crate::audit::Act::new("input", self.who)
                .terminal(viewer.hello().id.as_str())
                .bytes(bytes),
        );
    }

    /// Moves events out and input in until the session ends.
    pub(super) async fn run(&mut self, viewer: &mut Viewer, mut first: Option<ViewerEvent>) -> End {
        let mut exited = false;
        // Both made once for the session: made anew each turn of the loop
        // (two turns per echo: the frame in and the output; the input's
        // answer wakes it no more),
        // they registered and dropped a timer and a cancellation waiter
        // every turn, on every echo's way. With pings off the sleep is never polled.
        let state = self.state;
        let shutdown = state.shutdown.cancelled();
        tokio::pin!(shutdown);
        let credential = self.credential;
        let ended = credential.ended(state);
        tokio::pin!(ended);
        let wake = tokio::time::sleep_until(self.keepalive.wake_at().unwrap_or_else(Instant::now));
        tokio::pin!(wake);
        // Who else types: the board's changes as one stream for the whole
        // session (its waiter stays registered across turns), the first
        // one at once (someone may be typing as this viewer joins).
        let mut board = self.typist.watch();
        board.mark_changed();
        let boards = futures_util::stream::unfold(board, |mut board| async move {
            board.changed().await.ok()?;
            let now = board.borrow_and_update().clone();
            Some((now, board))
        });
        tokio::pin!(boards);
        // This viewer's own typing ends QUIET after its last input.
        let quiet = tokio::time::sleep_until(Instant::now());
        tokio::pin!(quiet);
        loop {
            if let Some(event) = first.take() {
                for message in messages(event, &mut exited) {
                    if let Err(end) = self.send(message).await {
                        return end;
                    }
                }
            }
            tokio::select! {
                biased;
                () = &mut shutdown => {
                    return End::Close(close::SERVICE_RESTART, close::RESTARTING.to_owned());
                }
                () = &mut ended => {
                    return End::Close(close::UNAUTHORIZED, ACCESS_ENDED.to_owned());
                }
                () = &mut wake, if self.keepalive.wake_at().is_some() => {
                    match self.keepalive.tick(Instant::now()) {
                        Tick::Dead => return End::Close(close::GOING_AWAY, NO_ANSWER.to_owned()),
                        Tick::Ping => {
                            if let Some(at) = self.keepalive.wake_at() {
                                wake.as_mut().reset(at);
                            }
                            if let Err(end) = self.send(Message::Ping(Bytes::new())).await {
                                return end;
                            }
                        }
                    }
                }
                event = viewer.recv() => {
                    crate::hops::mark(crate::hops::Hop::WsEvent);
                    let Some(event) = event else {
                        let reason = if exited { "the program ended" } else { "the terminal is gone" };
                        return End::Close(close::GONE, reason.to_owned());
                    };
                    // What else is queued goes out behind it, in one flush.
                    let mut batch = messages(event, &mut exited);
                    while batch.len() < SEND_BATCH {
                        match viewer.try_recv() {
                            Some(event) => batch.extend(messages(event, &mut exited)),
                            None => break,
                        }
                    }
                    if let Err(end) = self.send_all(batch).await {
                        return end;
                    }
                    crate::hops::finish();
                }
                message = self.socket.recv() => {
                    if let Some(end) = self.take_client_frames(viewer, message).await {
                        return end;
                    }
                }
                () = &mut quiet, if self.typist.is_typing() => {
                    let due = self.last_input.map_or_else(Instant::now, |at| at + burst::QUIET);
                    if Instant::now() >= due {
                        self.typist.quiet();
                    } else {
                        quiet.as_mut().reset(due);
                    }
                }
                Some(board) = boards.next() => {
                    let others = self.typist.others(&board);
                    if others != self.told {
                        let frame = frames::typing(&others).to_string();
                        self.told = others;
                        if let Err(end) = self.send(Message::Text(frame.into())).await {
                            return end;
                        }
                    }
                }
            }
        }
    }

    async fn send(&mut self, message: Message) -> Result<(), End> {
        send(self.socket, self.state, self.keepalive, message).await
    }

    /// Answers a history request: the page's frame and its bytes, or an
    /// empty page at `before` when it cannot be read (the client learns
    /// there is nothing more rather than waiting).
    async fn send_history(
        &mut self,
        viewer: &Viewer,
        before: u64,
        max: Option<u64>,
    ) -> Result<(), End> {
        let max = max.unwrap_or(crate::attach::MAX_HISTORY_PAGE);
        let page = match viewer.history(before, max).await {
            Ok(page) => page,
            Err(error) => {
                warn!(terminal = %viewer.hello().id, %error, "no history page");
                crate::attach::HistoryPage {
                    epoch: viewer.hello().cursor.map_or(0, |at| at.epoch),
                    from: before,
                    to: before,
                    first: before,
                    ..crate::attach::HistoryPage::default()
                }
            }
        };
        let frame = Message::Text(frames::history(&page).to_string().into());
        self.send_all(vec![frame, Message::Binary(page.bytes)])
            .await
    }

    /// Sends `batch` with one flush at its end, under [`send`]'s limits.
    async fn send_all(&mut self, batch: Vec<Message>) -> Result<(), End> {
        let sink = async {
            for message in batch {
                self.socket.feed(message).await?;
            }
            self.socket.flush().await
        };
        // The sink first: a socket with room takes the batch at once, and
        // then the other two are never polled (registered).
        tokio::select! {
            biased;
            sent = sink => sent.map_err(send_error),
            () = self.state.shutdown.cancelled() => Err(End::Close(close::SERVICE_RESTART, close::RESTARTING.to_owned())),
            () = sleep_until(self.keepalive.give_up_at()) => Err(End::Close(close::GOING_AWAY, NO_ANSWER.to_owned())),
        }
    }

    /// Applies `first` and every client frame already buffered behind it
    /// (up to [`DRAIN_BATCH`]), in order, except that resizes wait: only
    /// the last size of the run is applied, before the next input and at
    /// the end. So a flood of resizes costs a few tmux commands, never one
    /// per frame, and settles as soon as it stops.
    async fn take_client_frames(
        &mut self,
        viewer: &Viewer,
        first: Option<Result<Message, axum::Error>>,
    ) -> Option<End> {
        let mut pending = None;
        let mut next = first;
        for _ in 0..DRAIN_BATCH {
            let message = match next {
                None => return Some(End::ClientGone),
                Some(Err(error)) => return Some(client_error(error)),
                Some(Ok(message)) => message,
            };
            self.keepalive.heard();
            match &message {
                // Each ping is a pong owed; only a client that reads (and
                // so answers our pings) pays the debt back.
                Message::Ping(payload) => {
                    self.owed += payload.len() + 2;
                    if self.owed > MAX_OWED {
                        return Some(End::Close(close::POLICY, BUDGET_SPENT.to_owned()));
                    }
                }
                Message::Pong(_) => self.owed = 0,
                _ => {}
            }
            if let Message::Binary(bytes) = &message
                && !self.read_only
            {
                let now = Instant::now();
                self.last_input = Some(now);
                self.typist.typed();
                if let Some(ended) = self.typed.add(bytes.len(), now) {
                    self.typed_burst(viewer, ended);
                }
            }
            // A page of history is sent at once, before the next frame is
            // read: a client asking for many holds one page at a time.
            if let Message::Text(text) = &message
                && let Ok(ClientFrame::History { before, max }) = frames::client_frame(text)
            {
                if let Err(end) = self.send_history(viewer, before, max).await {
                    return Some(end);
                }
            } else if let Some(end) = apply(
                viewer,
                message,
                self.read_only,
                &mut pending,
                &mut self.answer,
            )
            .await
            {
                return Some(end);
            }
            match self.socket.recv().now_or_never() {
                Some(message) => next = message,
                None => break,
            }
        }
        match pending {
            Some(size) => resize(viewer, size).await,
            None => None,
        }
    }
}

/// One client frame: binary is input, text a resize (kept in
/// `pending`). Read-only viewers' input and resizes are dropped here,
/// never reaching the pane. Input is queued, its answer kept in `answer`
/// and looked at once the next input is queued: two inputs in flight per
/// viewer at most (one when each was waited for), and tmux's answer, which
/// comes while the program still echoes, wakes no one (it was a turn of
/// this task on every echo's way).
async fn apply(
    viewer: &Viewer,
    message: Message,
    read_only: bool,
    pending: &mut Option<Size>,
    answer: &mut Option<WriteAnswer>,
) -> Option<End> {
    match message {
        Message::Binary(bytes) => {
            if read_only {
                return None;
            }
            // The size the client asked for before typing comes first.
            if let Some(size) = pending.take()
                && let Some(end) = resize(viewer, size).await
            {
                return Some(end);
            }
            crate::hops::mark(crate::hops::Hop::WsIn);
            let last = match viewer.input_queued(bytes).await {
                Ok(queued) => answer.replace(queued),
                Err(error) => {
                    warn!(terminal = %viewer.hello().id, %error, "input not delivered");
                    answer.take()
                }
            };
            // After the new input is on its way, not before: what is left of
            // the last one (in long since, on a keystroke) is off its path.
            if let Some(last) = last
                && let Err(error) = last.await
            {
                warn!(terminal = %viewer.hello().id, %error, "input not delivered");
            }
        }
        Message::Text(text) => {
            let size = frames::client_frame(&text).and_then(|frame| match frame.size() {
                // Checked on arrival: a bad size is refused even when a
                // later one replaces it.
                Some(size) => size.check().map(|()| Some(size)),
                None => Ok(None),
            });
            match size {
                Err(error) => return Some(End::Close(close::BAD_REQUEST, error.to_string())),
                Ok(Some(size)) if !read_only => *pending = Some(size),
                Ok(_) => {}
            }
        }
        Message::Close(_) => return Some(End::ClientClosed),
        Message::Ping(_) | Message::Pong(_) => {}
    }
    None
}

/// Resizes the terminal; an out-of-range size closes 4400.
async fn resize(viewer: &Viewer, size: Size) -> Option<End> {
    if let Err(error) = viewer.resize(size).await {
        if error.code() == ErrorCode::InvalidInput {
            return Some(End::Close(close::BAD_REQUEST, error.to_string()));
        }
        warn!(terminal = %viewer.hello().id, %error, "resize failed");
    }
    None
}

/// The frames of one viewer event; notes an exit in `exited`.
fn messages(event: ViewerEvent, exited: &mut bool) -> Vec<Message> {
    match event {
        ViewerEvent::Output { bytes, .. } => vec![Message::Binary(bytes)],
        ViewerEvent::Snapshot {
            offset, repaint, ..
        } => vec![
            Message::Text(frames::snapshot(offset).to_string().into()),
            Message::Binary(repaint),
        ],
        ViewerEvent::Resize(size) => vec![Message::Text(frames::resize(size).to_string().into())],
        ViewerEvent::Exit(status) => {
            *exited = true;
            vec![Message::Text(frames::exit(status).to_string().into())]
        }
    }
}
