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
//!
//! This file is the door and the session around the pump: the upgrade,
//! refusals, the credential's watch and the close; the frames both ways
//! are `pump.rs`.

mod burst;
mod errors;
mod keepalive;
mod pump;
pub(super) mod typing;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use tokio::time::{Duration, Instant};
use tracing::debug;

use self::burst::Burst;
use self::errors::send_error;
use self::keepalive::Keepalive;
use self::pump::Pump;
use super::api::ApiError;
use super::auth::{self, Principal};
use super::frames::{self, AttachQuery, close};
use super::{AppState, Identified};
use crate::attach::{AttachOptions, Hello, Viewer, ViewerEvent};
use crate::registry::OutputCursor;
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

/// The close reason for a peer that stopped answering pings.
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
                    // Read no more, but keep the connection for the rest
                    // of the grace: dropped with input unread, the kernel
                    // answers with a RST and throws away what it has not
                    // sent yet, this close frame included (queued behind
                    // output or pongs the client has not read).
                    std::future::pending::<()>().await;
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
