//! `GET /api/terminals/{t}/attach`: the WebSocket. Every refusal happens
//! after the upgrade, as a close code a browser can read (4403 origin, 4401
//! token, 4400 query, 4404 terminal), then one [`Viewer`] is pumped both
//! ways: its events as text and binary frames, the client's binary frames
//! as input and its text frames as resizes (coalesced: a burst applies only
//! its last size, one tmux command at a time). The client is pinged every
//! `ping_interval` and dropped (1001) when it stops answering
//! ([`keepalive`]); a protocol violation closes 1002, a text frame that is
//! not UTF-8 1007, both with a close frame. The credential is judged
//! again for as long as the session lives: revoking or expiring its link,
//! or signing its session out, closes it 4401 at once.

mod burst;
mod errors;
mod keepalive;
pub(super) mod typing;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::time::{Duration, Instant};
use tracing::{debug, warn};

use self::burst::Burst;
use self::errors::{client_error, send_error};
use self::keepalive::{Keepalive, Tick};
use self::typing::Typist;
use super::api::ApiError;
use super::auth::{self, Principal};
use super::frames::{self, AttachQuery, ClientFrame, close};
use super::{AppState, Identified};
use crate::attach::{AttachOptions, Hello, Viewer, ViewerEvent};
use crate::registry::{OutputCursor, WriteAnswer};
use crate::vocab::Size;
use crate::{Error, ErrorCode};

/// The largest client message: input is typed or pasted text, and a
/// larger frame is refused with 1009 before it is buffered whole.
pub(crate) const MAX_CLIENT_MESSAGE: usize = 1 << 20;

/// Bytes the socket gathers before it writes them out.
const WRITE_BUFFER: usize = 128 << 10;

/// Bytes read from the socket per call at most. tungstenite zero-fills
/// this much of its read buffer on every read (128 KiB by default: a
/// viewer's largest cost); a client sends keystrokes and resizes, and a
/// large paste only takes more reads (a frame's whole length is reserved
/// as its header arrives).
const READ_BUFFER: usize = 4 << 10;

/// The write budget of one connection: bytes queued for a client that is
/// not reading (its output, or the pongs of a ping flood). Past it a
/// send fails, the pongs wait in tungstenite's one slot (each replaces
/// the last), and the session closes 1008: memory per client is bounded
/// by this, not by how long the client keeps sending. Above the largest
/// single frame: the repaint of the largest allowed screen
/// ([`MAX_CELLS`](crate::vocab::MAX_CELLS) cells, each with its colours).
const MAX_WRITE_BUFFER: usize = 16 << 20;

/// Pongs owed to a client that has not read since, at most (its pings'
/// payloads): past them it is closed 1008.
const MAX_OWED: usize = 1 << 20;

/// How long a close frame (and the client's answer) may take before the
/// connection is dropped anyway: a peer that reads nothing must not hold
/// its session open.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Bytes of frames read and dropped while waiting for the client's close
/// frame, at most: an honest client answers within a few frames, and a
/// flood is cut here rather than read for all of [`CLOSE_GRACE`].
const CLOSE_DISCARD: usize = 1 << 20;

/// What a client frame costs beyond its payload (header and mask), as
/// counted against [`CLOSE_DISCARD`], so empty frames are not free.
const FRAME_OVERHEAD: usize = 6;

/// Client frames applied in one turn of the pump before it looks at its
/// other duties (output, pings) again; resizes among them are coalesced.
const DRAIN_BATCH: usize = 256;

/// The close reason for a peer that stopped answering pings.
/// At most this many queued frames go out behind one event, in one flush.
const SEND_BATCH: usize = 64;
const NO_ANSWER: &str = "no answer to pings";
/// The close reason for a client whose write budget is spent.
const BUDGET_SPENT: &str = "write budget spent: the client does not read";

/// Why a session is refused before it attaches.
struct Refusal {
    code: u16,
    reason: String,
}

/// The upgrade handler: judges origin, token and query, then hands the
/// socket to [`session`].
pub async fn attach(
    State(state): State<AppState>,
    Path(target): Path<String>,
    RawQuery(query): RawQuery,
    peer: Option<axum::Extension<super::identity::Peer>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let query = query.unwrap_or_default();
    let peer = peer.map(|axum::Extension(peer)| peer);
    let presented = auth::ws_bearer(&headers);
    let identified = state.identify(&headers, peer, presented.as_deref());
    let proxy = matches!(identified, Identified::Known(_, _, super::Via("proxy")));
    // How the other viewers' badge names this one while it types.
    let name = match &identified {
        Identified::Known(principal, Some(_), _) => format!("{} (share link)", principal.owner),
        Identified::Known(principal, None, _) => principal.owner.to_string(),
        Identified::Nobody | Identified::Refused(_) => String::new(),
    };
    let principal = match identified {
        // A share link's holder attaches only its terminal; another one is
        // refused like a missing one, after the upgrade (4404).
        Identified::Known(principal, Some(scope), _) => {
            let mine = super::scope::is_scope(&state, &principal, &scope, &target).await;
            Some((principal, mine))
        }
        Identified::Known(principal, None, _) => Some((principal, true)),
        // A forged user header is refused like no credential (4401).
        Identified::Nobody | Identified::Refused(_) => None,
    };
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        // A plain GET: no socket to close, so answer like any route.
        Err(rejection) => {
            return match principal {
                None => ApiError::unauthorized().into_response(),
                Some(_) => (rejection.status(), rejection.body_text()).into_response(),
            };
        }
    };
    let verdict = if !state.guard.origin_allowed(&headers) {
        Err(Refusal {
            code: close::FORBIDDEN_ORIGIN,
            reason: "origin not allowed".to_owned(),
        })
    } else if let Some((_, false)) = principal {
        Err(Refusal {
            code: close::GONE,
            reason: "no such terminal".to_owned(),
        })
    } else if let Some((principal, true)) = principal {
        frames::attach_query(&query)
            .map(|parsed| (principal, parsed))
            .map_err(|e| Refusal {
                code: close::BAD_REQUEST,
                reason: e.to_string(),
            })
    } else {
        Err(Refusal {
            code: close::UNAUTHORIZED,
            reason: "a valid token is required".to_owned(),
        })
    };
    // Counted, so shutdown waits for every session to say goodbye.
    let tracked = state.sessions.token();
    upgrade
        .protocols([auth::WS_PROTOCOL])
        .max_message_size(MAX_CLIENT_MESSAGE)
        .max_frame_size(MAX_CLIENT_MESSAGE)
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .max_write_buffer_size(MAX_WRITE_BUFFER)
        .on_upgrade(move |mut socket| async move {
            match verdict {
                Ok((principal, parsed)) => {
                    let credential = Credential {
                        presented,
                        proxy,
                        name,
                    };
                    session(socket, state, principal, credential, target, parsed).await;
                }
                Err(refusal) => {
                    close_with(&state, &mut socket, refusal.code, &refusal.reason).await;
                }
            }
            drop(tracked);
        })
}

/// Sends a close frame (the reason cut to the protocol's 123 bytes) and
/// waits for the client's answer, all within [`CLOSE_GRACE`].
async fn close_with(state: &AppState, socket: &mut WebSocket, code: u16, reason: &str) {
    state.metrics.closed(code);
    let mut cut = reason.len().min(123);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    let frame = CloseFrame {
        code,
        reason: Utf8Bytes::from(&reason[..cut]),
    };
    let close = async {
        if socket.send(Message::Close(Some(frame))).await.is_ok() {
            // Read until the client's close arrives: closing the TCP
            // connection first could reset it before the frame is read.
            // What comes before it is discarded, up to a budget: a flood
            // must not keep serve reading for the whole grace.
            let mut discarded = 0usize;
            while let Some(Ok(message)) = socket.recv().await {
                if matches!(message, Message::Close(_)) {
                    break;
                }
                discarded += FRAME_OVERHEAD + message.into_data().len();
                if discarded > CLOSE_DISCARD {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_GRACE, close).await;
}

/// The close code for a failed attach.
fn refusal_code(error: &Error) -> u16 {
    match error.code() {
        ErrorCode::NoTerminal
        | ErrorCode::ForeignTerminal
        | ErrorCode::TerminalDead
        | ErrorCode::TerminalClosing => close::GONE,
        ErrorCode::InvalidInput => close::BAD_REQUEST,
        // Refused because serve drains: the next serve takes the viewer.
        ErrorCode::Cancelled | ErrorCode::RegistryDisposing => close::SERVICE_RESTART,
        _ => close::INTERNAL,
    }
}

/// The credential a session was opened with, judged again while it
/// lives.
struct Credential {
    presented: Option<String>,
    /// A trusted proxy named the user: nothing here can end that.
    proxy: bool,
    /// Its name on the typing badge of the terminal's other viewers: the
    /// owner, a share link's holder marked so.
    name: String,
}

/// The close reason of a session whose credential ended.
const ACCESS_ENDED: &str =
    "access ended: the link was revoked or expired, or the session signed out";

impl Credential {
    /// Returns once the credential no longer signs anyone in: woken by
    /// every revoke and sign-out, and at its session's own end (a share
    /// link's expiry). A token lasts as long as `serve`.
    async fn ended(&self, state: &AppState) {
        if self.proxy {
            return std::future::pending().await;
        }
        let mut changes = state.signins.watch_ended();
        let presented = self.presented.as_deref();
        loop {
            changes.mark_unchanged();
            if state.principal(presented).is_none() {
                return;
            }
            let ends = presented
                .and_then(|presented| state.signins.session_ends(presented.as_bytes()))
                .map(Instant::from_std);
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        // The sign-ins are gone with the bridge: shutdown
                        // ends the session, not this.
                        std::future::pending::<()>().await;
                    }
                }
                () = sleep_until(ends) => {}
            }
        }
    }
}

/// How a session ended, and so its close code.
enum End {
    /// The client closed: let tungstenite's queued reply out.
    ClientClosed,
    /// The connection broke: nothing to send.
    ClientGone,
    /// Close with this code and reason.
    Close(u16, String),
}

/// One attached client, until it leaves, the terminal goes, or the
/// bridge shuts down.
async fn session(
    mut socket: WebSocket,
    state: AppState,
    principal: Principal,
    credential: Credential,
    target: String,
    query: AttachQuery,
) {
    let read_only = query.read_only || principal.read_only;
    let opts = AttachOptions::default()
        .transport(query.transport)
        .read_only(read_only)
        .since(query.since)
        .size(query.size);
    let attached = tokio::select! {
        attached = state.attacher.attach(&principal.owner, &target, opts) => attached,
        () = state.shutdown.cancelled() => Err(Error::Cancelled("shutting down".to_owned())),
    };
    let mut viewer = match attached {
        Ok(viewer) => viewer,
        Err(error) => {
            let code = refusal_code(&error);
            // Another owner's terminal is refused exactly like a missing one;
            // the caller's own dead one says so, and a read-only viewer
            // learns why it was not started again.
            let reason = match error.code() {
                ErrorCode::TerminalDead if read_only => {
                    format!("{error}; a read-only viewer never starts it again")
                }
                ErrorCode::TerminalDead => error.to_string(),
                _ if code == close::GONE => "no such terminal".to_owned(),
                _ if code == close::SERVICE_RESTART => close::RESTARTING.to_owned(),
                _ => error.to_string(),
            };
            return close_with(&state, &mut socket, code, &reason).await;
        }
    };
    let (hello, first) = tokio::select! {
        resumed = resumed_hello(&mut viewer, query.since.as_ref()) => resumed,
        () = state.shutdown.cancelled() => {
            return close_with(&state, &mut socket, close::SERVICE_RESTART, close::RESTARTING).await;
        }
    };
    let _viewing = state.metrics.viewing();
    let mut hello = frames::hello(&hello);
    if let Some(node) = &state.config.node {
        super::node::qualify_value(node, &mut hello);
    }
    let mut keepalive = Keepalive::new(state.config.ping_interval, Instant::now());
    let hello = Message::Text(hello.to_string().into());
    let end = match send(&mut socket, &state, &keepalive, hello).await {
        Err(end) => end,
        Ok(()) => {
            let mut pump = Pump {
                socket: &mut socket,
                state: &state,
                keepalive: &mut keepalive,
                read_only,
                owed: 0,
                credential: &credential,
                who: principal.owner.as_str(),
                typed: Burst::default(),
                typist: state
                    .typists
                    .join(viewer.hello().id.as_str(), credential.name.clone()),
                last_input: None,
                told: Vec::new(),
                answer: None,
            };
            let end = pump.run(&mut viewer, first).await;
            if let Some(bytes) = pump.typed.finish() {
                pump.typed_burst(&viewer, bytes);
            }
            end
        }
    };
    debug!(terminal = %viewer.hello().id, "websocket session ended");
    match end {
        End::Close(code, reason) => close_with(&state, &mut socket, code, &reason).await,
        // tungstenite answered the client's close frame; flushing sends it.
        End::ClientClosed => {
            let flush = futures_util::SinkExt::flush(&mut socket);
            let _ = tokio::time::timeout(CLOSE_GRACE, flush).await;
        }
        End::ClientGone => {}
    }
}

/// The hello to send, and the first event when it had to be read to
/// decide it. A resume that the stream's ring honoured says so by its offset:
/// the hello's `offset` is then the `since` offset (the replayed bytes
/// follow from there); otherwise it is the stream's end and a snapshot
/// follows. The attacher queues the replay before it returns, so reading
/// the first event never waits for new output.
async fn resumed_hello(
    viewer: &mut Viewer,
    since: Option<&OutputCursor>,
) -> (Hello, Option<ViewerEvent>) {
    let mut hello = viewer.hello().clone();
    let (Some(since), Some(now)) = (since, hello.cursor.as_mut()) else {
        return (hello, None);
    };
    let end = now.offset;
    if since.epoch != now.epoch || since.offset > end {
        return (hello, None);
    }
    let first = if since.offset < end {
        viewer.recv().await
    } else {
        None
    };
    let replayed = matches!(
        first,
        Some(ViewerEvent::Output { offset: Some(offset), .. }) if offset == since.offset
    );
    if since.offset == end || replayed {
        now.offset = since.offset;
    }
    (hello, first)
}

/// Sends one frame unless the bridge shuts down first, or the peer, not
/// reading, runs past its keepalive's grace: a client that never reads
/// must hold neither the shutdown nor its session.
async fn send(
    socket: &mut WebSocket,
    state: &AppState,
    keepalive: &Keepalive,
    message: Message,
) -> Result<(), End> {
    tokio::select! {
        biased;
        sent = socket.send(message) => sent.map_err(send_error),
        () = state.shutdown.cancelled() => Err(End::Close(close::SERVICE_RESTART, close::RESTARTING.to_owned())),
        () = sleep_until(keepalive.give_up_at()) => Err(End::Close(close::GOING_AWAY, NO_ANSWER.to_owned())),
    }
}

/// Sleeps until `at`; forever when there is none.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One session's pump: the socket, its keepalive and what the viewer may do.
struct Pump<'a> {
    socket: &'a mut WebSocket,
    state: &'a AppState,
    keepalive: &'a mut Keepalive,
    read_only: bool,
    /// Bytes of pongs owed to a client that has not read since.
    owed: usize,
    /// What it signed in with, watched until it ends.
    credential: &'a Credential,
    /// Who types, for the audit log.
    who: &'a str,
    /// The burst of input under way, for the audit log.
    typed: Burst,
    /// This viewer on its terminal's typing board.
    typist: Typist,
    /// When it last typed.
    last_input: Option<Instant>,
    /// The others typing, as the client was last told.
    told: Vec<String>,
    /// tmux's answer to the last input, looked at with the next one.
    answer: Option<WriteAnswer>,
}

impl Pump<'_> {
    /// Records one burst of input: who, which terminal, how many bytes.
    fn typed_burst(&self, viewer: &Viewer, bytes: u64) {
        self.state.audit(
            crate::audit::Act::new("input", self.who)
                .terminal(viewer.hello().id.as_str())
                .bytes(bytes),
        );
    }

    /// Moves events out and input in until the session ends.
    async fn run(&mut self, viewer: &mut Viewer, mut first: Option<ViewerEvent>) -> End {
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
                debug!(terminal = %viewer.hello().id, %error, "no history page");
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
