//! `GET /api/terminals/{t}/attach`: the WebSocket. Every refusal happens
//! after the upgrade, as a close code a browser can read (4403 origin, 4401
//! token, 4400 query, 4404 terminal), then one [`Viewer`] is pumped both
//! ways: its events as text and binary frames, the client's binary frames
//! as input and its text frames as resizes.

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use tracing::{debug, warn};

use super::AppState;
use super::api::ApiError;
use super::auth::Principal;
use super::frames::{self, AttachQuery, close};
use crate::Error;
use crate::attach::{AttachOptions, Hello, Resume, Viewer, ViewerEvent};

/// The largest client message: input is typed or pasted text, and a
/// larger frame is refused with 1009 before it is buffered whole.
pub const MAX_CLIENT_MESSAGE: usize = 1 << 20;

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
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let query = query.unwrap_or_default();
    let principal = state.auth.authenticate(&headers, &query);
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
    } else if let Some(principal) = principal {
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
        .max_message_size(MAX_CLIENT_MESSAGE)
        .max_frame_size(MAX_CLIENT_MESSAGE)
        .on_upgrade(move |mut socket| async move {
            match verdict {
                Ok((principal, parsed)) => session(socket, state, principal, target, parsed).await,
                Err(refusal) => close_with(&mut socket, refusal.code, &refusal.reason).await,
            }
            drop(tracked);
        })
}

/// Sends a close frame (the reason cut to the protocol's 123 bytes) and
/// waits for the client's answer.
async fn close_with(socket: &mut WebSocket, code: u16, reason: &str) {
    let mut cut = reason.len().min(123);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    let frame = CloseFrame {
        code,
        reason: Utf8Bytes::from(&reason[..cut]),
    };
    if socket.send(Message::Close(Some(frame))).await.is_ok() {
        // Read until the client's close arrives (or a bound): closing the
        // TCP connection first could reset it before the frame is read.
        let drain = async { while let Some(Ok(_)) = socket.recv().await {} };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), drain).await;
    }
}

/// The close code for a failed attach.
fn refusal_code(error: &Error) -> u16 {
    match error.code() {
        "NO_TERMINAL" | "FOREIGN_TERMINAL" | "TERMINAL_DEAD" | "TERMINAL_CLOSING" => close::GONE,
        "INVALID_INPUT" => close::BAD_REQUEST,
        "CANCELLED" | "REGISTRY_DISPOSING" => close::GOING_AWAY,
        _ => close::INTERNAL,
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
    target: String,
    query: AttachQuery,
) {
    let read_only = query.read_only || principal.read_only;
    let opts = AttachOptions::default()
        .transport(query.transport)
        .read_only(read_only)
        .since(query.since.clone());
    let attached = tokio::select! {
        attached = state.attacher.attach(&principal.owner, &target, opts) => attached,
        () = state.shutdown.cancelled() => Err(Error::Cancelled("shutting down".to_owned())),
    };
    let mut viewer = match attached {
        Ok(viewer) => viewer,
        Err(error) => {
            let code = refusal_code(&error);
            // Another owner's terminal is refused exactly like a missing one.
            let reason = if code == close::GONE {
                "no such terminal".to_owned()
            } else {
                error.to_string()
            };
            return close_with(&mut socket, code, &reason).await;
        }
    };
    let (hello, first) = tokio::select! {
        resumed = resumed_hello(&mut viewer, query.since.as_ref()) => resumed,
        () = state.shutdown.cancelled() => {
            return close_with(&mut socket, close::GOING_AWAY, "server shutting down").await;
        }
    };
    let hello = frames::hello(&hello);
    let end = match send(&mut socket, &state, Message::Text(hello.to_string().into())).await {
        Err(end) => end,
        Ok(()) => pump(&mut socket, &state, &mut viewer, first, read_only).await,
    };
    debug!(terminal = %viewer.hello().id, "websocket session ended");
    match end {
        End::Close(code, reason) => close_with(&mut socket, code, &reason).await,
        // tungstenite answered the client's close frame; flushing sends it.
        End::ClientClosed => {
            let _ = futures_util::SinkExt::flush(&mut socket).await;
        }
        End::ClientGone => {}
    }
}

/// The hello to send, and the first event when it had to be read to
/// decide it. A resume that the replay ring honoured says so by its offset:
/// the hello's `offset` is then the `since` offset (the replayed bytes
/// follow from there); otherwise it is the stream's end and a snapshot
/// follows. The attacher queues the replay before it returns, so reading
/// the first event never waits for new output.
async fn resumed_hello(
    viewer: &mut Viewer,
    since: Option<&Resume>,
) -> (Hello, Option<ViewerEvent>) {
    let mut hello = viewer.hello().clone();
    let (Some(since), Some(stream), Some(end)) = (since, hello.stream.as_ref(), hello.offset)
    else {
        return (hello, None);
    };
    if since.stream != *stream || since.offset > end {
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
        hello.offset = Some(since.offset);
    }
    (hello, first)
}

/// Sends one frame unless the bridge shuts down first: a client that
/// never reads must not hold the shutdown.
async fn send(socket: &mut WebSocket, state: &AppState, message: Message) -> Result<(), End> {
    tokio::select! {
        sent = socket.send(message) => sent.map_err(|_| End::ClientGone),
        () = state.shutdown.cancelled() => Err(End::Close(close::GOING_AWAY, "server shutting down".to_owned())),
    }
}

/// Moves events out and input in until the session ends.
async fn pump(
    socket: &mut WebSocket,
    state: &AppState,
    viewer: &mut Viewer,
    mut first: Option<ViewerEvent>,
    read_only: bool,
) -> End {
    let mut exited = false;
    loop {
        if let Some(event) = first.take() {
            for message in messages(event, &mut exited) {
                if let Err(end) = send(socket, state, message).await {
                    return end;
                }
            }
        }
        tokio::select! {
            biased;
            () = state.shutdown.cancelled() => {
                return End::Close(close::GOING_AWAY, "server shutting down".to_owned());
            }
            event = viewer.recv() => {
                let Some(event) = event else {
                    let reason = if exited { "the program ended" } else { "the terminal is gone" };
                    return End::Close(close::GONE, reason.to_owned());
                };
                for message in messages(event, &mut exited) {
                    if let Err(end) = send(socket, state, message).await {
                        return end;
                    }
                }
            }
            message = socket.recv() => {
                let message = match message {
                    None => return End::ClientGone,
                    Some(Ok(Message::Close(_))) => return End::ClientClosed,
                    Some(Err(error)) => return client_error(&error),
                    Some(Ok(message)) => message,
                };
                if let Some(end) = from_client(viewer, message, read_only).await {
                    return end;
                }
            }
        }
    }
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

/// A broken read: a too-large frame gets 1009; anything else means the
/// client is gone.
fn client_error(error: &axum::Error) -> End {
    let text = error.to_string();
    // tungstenite's capacity errors reach us only as text through axum.
    if text.contains("too long") || text.contains("Space limit") || text.contains("too big") {
        End::Close(
            close::TOO_BIG,
            format!("message larger than {MAX_CLIENT_MESSAGE} bytes"),
        )
    } else {
        debug!(%error, "websocket read failed");
        End::ClientGone
    }
}

/// Applies one client message: binary is input, text a resize. Read-only
/// viewers' input and resizes are dropped here, never reaching the pane.
async fn from_client(viewer: &Viewer, message: Message, read_only: bool) -> Option<End> {
    match message {
        Message::Binary(bytes) => {
            if !read_only && let Err(error) = viewer.input(bytes).await {
                warn!(terminal = %viewer.hello().id, %error, "input not delivered");
            }
        }
        Message::Text(text) => match frames::client_frame(&text) {
            Err(error) => return Some(End::Close(close::BAD_REQUEST, error.to_string())),
            Ok(frame) => {
                if !read_only && let Err(error) = viewer.resize(frame.size()).await {
                    if error.code() == "INVALID_INPUT" {
                        return Some(End::Close(close::BAD_REQUEST, error.to_string()));
                    }
                    warn!(terminal = %viewer.hello().id, %error, "resize failed");
                }
            }
        },
        Message::Ping(_) | Message::Pong(_) | Message::Close(_) => {}
    }
    None
}
