//! One connection: the TLS handshake, hyper's HTTP/1.1 with upgrades, the
//! watchdog that cuts it when no request is in flight past a timeout, the
//! base path, and the quick `503` of a connection over the cap.

use std::convert::Infallible;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Request, Response, StatusCode, Uri, header};
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::super::identity::Peer;
use super::heads::{HeadBytes, MAX_HEAD};
use super::serve_options::ServeOptions;

/// Refusals (`503`s) lingering at once at most; beyond them the accept
/// loop waits for one to end, so a flood cannot spend fds on refusals.
pub(super) const REFUSAL_SLOTS: usize = 64;

/// How long a refused connection stays open for its client to send its
/// request and read the `503`: closing with the request unread would reset
/// the connection under the client's read.
const REFUSAL_LINGER: Duration = Duration::from_millis(500);

/// A path no route has: where requests outside the base path are sent,
/// so the router's own layers (host check, authentication) still answer
/// them, and its fallback says 404.
const OUTSIDE: &str = "/.outside-base-path";

/// What the accept loop shares with its connections.
pub(super) struct ListenShared {
    pub(super) app: Router,
    pub(super) base_path: String,
    pub(super) options: ServeOptions,
    pub(super) tls: Option<TlsAcceptor>,
    /// Cancelled at shutdown: connections finish their request and close.
    pub(super) shutdown: CancellationToken,
    /// The bytes of every unfinished request head (`heads.rs`).
    pub(super) heads: Arc<std::sync::atomic::AtomicUsize>,
}

/// An accepted socket of either kind.
pub(super) enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

/// The canned answer to a connection over the cap.
fn refusal() -> Vec<u8> {
    let body = serde_json::json!({"error": {
        "code": "TOO_MANY_CONNECTIONS",
        "message": "the server has --max-connections connections open; retry later",
    }})
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers `503` once the request head is in (an HTTP client takes an
/// answer before its request as an error), or after [`REFUSAL_LINGER`] of
/// silence; then drains briefly so closing does not reset the connection
/// under the client's read.
pub(super) async fn refuse(stream: Stream, _slot: OwnedSemaphorePermit) {
    async fn answer(mut stream: impl AsyncRead + AsyncWrite + Unpin) {
        let mut head = Vec::new();
        let mut chunk = [0u8; 4096];
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await;
        // A client that sent nothing has nothing unread to reset on close:
        // only one that did is waited for to read the answer and leave.
        let sent = !head.is_empty();
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            stream.write_all(&refusal()).await?;
            stream.shutdown().await?;
            while sent && stream.read(&mut chunk).await? > 0 {}
            io::Result::Ok(())
        })
        .await;
    }
    match stream {
        Stream::Tcp(stream) => answer(stream).await,
        Stream::Unix(stream) => answer(stream).await,
    }
}

pub(super) async fn connection(
    stream: Stream,
    permit: OwnedSemaphorePermit,
    shared: Arc<ListenShared>,
) {
    match stream {
        Stream::Tcp(stream) => {
            // A keystroke's echo is one small frame: Nagle would hold it
            // back for the client's delayed ACK (up to 40 ms on Linux).
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(%error, "setting TCP_NODELAY");
            }
            let peer = stream.peer_addr().ok().map(Peer::Tcp);
            secure(stream, permit, shared, peer).await
        }
        Stream::Unix(stream) => secure(stream, permit, shared, Some(Peer::Unix)).await,
    }
}

/// The TLS handshake, within the header timeout, then HTTP.
async fn secure<S>(
    stream: S,
    permit: OwnedSemaphorePermit,
    shared: Arc<ListenShared>,
    peer: Option<Peer>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Some(acceptor) = shared.tls.clone() else {
        return http(stream, permit, shared, peer).await;
    };
    let handshake = tokio::time::timeout(shared.options.header_timeout, acceptor.accept(stream));
    let stream = tokio::select! {
        () = shared.shutdown.cancelled() => return,
        done = handshake => match done {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return tracing::debug!("TLS handshake failed: {e}"),
            Err(_) => return tracing::debug!("TLS handshake timed out"),
        },
    };
    http(stream, permit, shared, peer).await;
}

/// Where a connection is between requests; the watchdog's input.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No request in flight since `since`; `head` is when the first byte of
    /// the next request arrived; `first`: no request yet.
    Waiting {
        since: Instant,
        head: Option<Instant>,
        first: bool,
    },
    /// This many requests are in flight (their responses not yet sent).
    Busy(usize),
}

impl Phase {
    /// When the connection is to be cut, if nothing changes.
    fn deadline(self, options: &ServeOptions) -> Option<Instant> {
        match self {
            Phase::Waiting { head: Some(at), .. } => Some(at + options.header_timeout),
            Phase::Waiting { since, first, .. } => Some(
                since
                    + if first {
                        options.header_timeout
                    } else {
                        options.idle_timeout
                    },
            ),
            Phase::Busy(_) => None,
        }
    }
}

/// Records the phase changes of one connection.
#[derive(Clone)]
struct Activity(Arc<watch::Sender<Phase>>);

impl Activity {
    fn new() -> Activity {
        Activity(Arc::new(watch::Sender::new(Phase::Waiting {
            since: Instant::now(),
            head: None,
            first: true,
        })))
    }

    /// Bytes arrived: the first of a request head starts its clock.
    fn read(&self) {
        self.0.send_if_modified(|phase| match phase {
            Phase::Waiting {
                head: head @ None, ..
            } => {
                *head = Some(Instant::now());
                true
            }
            _ => false,
        });
    }

    fn begin(&self) {
        self.0.send_modify(|phase| {
            *phase = match *phase {
                Phase::Busy(n) => Phase::Busy(n + 1),
                Phase::Waiting { .. } => Phase::Busy(1),
            };
        });
    }

    fn end(&self) {
        self.0.send_modify(|phase| {
            *phase = match *phase {
                Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
                _ => Phase::Waiting {
                    since: Instant::now(),
                    head: None,
                    first: false,
                },
            };
        });
    }

    /// Resolves when the connection has been waiting past its deadline.
    async fn expired(&self, options: &ServeOptions) {
        let mut changes = self.0.subscribe();
        loop {
            let deadline = changes.borrow_and_update().deadline(options);
            match deadline {
                Some(deadline) => tokio::select! {
                    _ = changes.changed() => {}
                    () = tokio::time::sleep_until(deadline) => {
                        if self.0.borrow().deadline(options).is_some_and(|d| d <= Instant::now()) {
                            return;
                        }
                    }
                },
                None => {
                    let _ = changes.changed().await;
                }
            }
        }
    }
}

/// Ends a request when its response body is done (or dropped).
struct InFlight(Activity);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A response body that keeps its request in flight until sent.
struct Tracked<B> {
    inner: B,
    _request: InFlight,
}

impl<B: HttpBody + Unpin> HttpBody for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The socket as hyper (and, after an upgrade, the WebSocket) sees it:
/// reads feed the watchdog, and the connection's permit lives as long as
/// the socket.
struct Watched<S> {
    inner: S,
    activity: Activity,
    /// Its share of the head budget while a head comes in.
    head: Arc<HeadBytes>,
    _permit: OwnedSemaphorePermit,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            self.activity.read();
            let waiting = matches!(*self.activity.0.borrow(), Phase::Waiting { .. });
            if waiting && !self.head.add(read) {
                return Poll::Ready(Err(io::Error::other(
                    "the unfinished request heads of all connections are over their budget",
                )));
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Serves HTTP/1.1 (with upgrades) on one connection until it closes, its
/// watchdog cuts it (no request in flight past a timeout) or shutdown
/// lets its last request finish.
async fn http<S>(
    stream: S,
    permit: OwnedSemaphorePermit,
    shared: Arc<ListenShared>,
    peer: Option<Peer>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Activity::new();
    let head = Arc::new(HeadBytes::new(shared.heads.clone()));
    let io = Watched {
        inner: stream,
        activity: activity.clone(),
        head: head.clone(),
        _permit: permit,
    };
    let service = {
        let (shared, activity) = (shared.clone(), activity.clone());
        hyper::service::service_fn(move |mut request: Request<Incoming>| {
            // Who is at the other end: a trusted proxy's header counts
            // only from its address (`identity.rs`).
            if let Some(peer) = peer {
                request.extensions_mut().insert(peer);
            }
            if request.headers().contains_key(header::UPGRADE) {
                head.stop();
            } else {
                head.release();
            }
            activity.begin();
            let guard = InFlight(activity.clone());
            let shared = shared.clone();
            async move {
                let response = route(&shared, request).await;
                Ok::<_, Infallible>(response.map(|inner| Tracked {
                    inner,
                    _request: guard,
                }))
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog times heads and idle waits itself (hyper's own timer
    // would cut idle keep-alives at the header timeout).
    builder.header_read_timeout(None);
    // A head past this is answered 431 before more of it is buffered.
    builder.max_buf_size(MAX_HEAD);
    let connection = builder
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    let mut connection = pin!(connection);
    let mut closing = false;
    loop {
        tokio::select! {
            done = connection.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!("connection ended: {e}");
                }
                return;
            }
            () = shared.shutdown.cancelled(), if !closing => {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            // Nothing in flight past a deadline: nothing is lost by closing.
            () = activity.expired(&shared.options) => return,
        }
    }
}

/// Strips the base path and calls the router.
async fn route(
    shared: &ListenShared,
    mut request: Request<Incoming>,
) -> Response<axum::body::Body> {
    let prefix = shared.base_path.as_str();
    if !prefix.is_empty() {
        let path = request.uri().path();
        let query = request
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let inner = match path.strip_prefix(prefix) {
            // The page builds URLs relative to itself: it must end in `/`.
            Some("") => return redirect(&format!("{prefix}/{query}")),
            Some(rest) if rest.starts_with('/') => rest.to_owned(),
            // A scheduler probes the same paths whatever the mount.
            _ if super::super::probes::PROBE_PATHS.contains(&path) => path.to_owned(),
            _ => OUTSIDE.to_owned(),
        };
        let mut parts = request.uri().clone().into_parts();
        parts.path_and_query = format!("{inner}{query}").parse().ok();
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    let whole = body_deadline(&request, shared.options.body_timeout);
    match shared
        .app
        .clone()
        .oneshot(request.map(|inner| {
            axum::body::Body::new(Trickle {
                inner,
                gap: shared.options.header_timeout,
                stall: None,
                deadline: Box::pin(tokio::time::sleep(whole)),
                whole,
            })
        }))
        .await
    {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// How long a request's whole body may take: the body timeout, or for an
/// upload (`files.rs`, bounded by `--max-file-size`, not by the JSON body
/// limit) as long as its announced length takes at 32 KiB/s, if longer: a
/// phone's upload of a large file is not a trickle. It still may not pause
/// longer than the header timeout.
fn body_deadline(request: &Request<Incoming>, timeout: Duration) -> Duration {
    if !super::super::files::is_upload(request.method(), request.uri().path()) {
        return timeout;
    }
    let length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    timeout.max(Duration::from_secs(length / (32 << 10)))
}

/// A request body whose client may pause at most `gap` (the header
/// timeout) between frames: a request is in flight while its body comes,
/// so a trickled body would otherwise hold its connection and slot forever.
struct Trickle {
    inner: Incoming,
    gap: Duration,
    /// Started when the body first had nothing to give; reset by a frame.
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The whole body's deadline, from the request's start.
    deadline: Pin<Box<tokio::time::Sleep>>,
    whole: Duration,
}

impl HttpBody for Trickle {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.deadline.as_mut().poll(cx).is_ready() && !this.inner.is_end_stream() {
            let whole = this.whole;
            return Poll::Ready(Some(Err(format!(
                "the request body took longer than {whole:?}"
            )
            .into())));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.stall = None;
                Poll::Ready(frame.map(|frame| frame.map_err(Into::into)))
            }
            Poll::Pending => {
                let gap = this.gap;
                let stall = this
                    .stall
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(gap)));
                if stall.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Err(
                        format!("the request body stalled for {gap:?}").into()
                    )));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn redirect(location: &str) -> Response<axum::body::Body> {
    let mut response = Response::new(axum::body::Body::from(Bytes::new()));
    *response.status_mut() = StatusCode::PERMANENT_REDIRECT;
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn refusal_is_a_complete_503() {
        let text = String::from_utf8(refusal()).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let value: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(value["error"]["code"], "TOO_MANY_CONNECTIONS");
    }

    #[test]
    fn deadlines_follow_the_phase() {
        let options = ServeOptions::default()
            .header_timeout(Duration::from_secs(1))
            .idle_timeout(Duration::from_secs(7));
        let now = Instant::now();
        let phase = |head, first| Phase::Waiting {
            since: now,
            head,
            first,
        };
        assert_eq!(
            phase(None, true).deadline(&options),
            Some(now + Duration::from_secs(1))
        );
        assert_eq!(
            phase(None, false).deadline(&options),
            Some(now + Duration::from_secs(7))
        );
        let head = now + Duration::from_secs(3);
        assert_eq!(
            phase(Some(head), false).deadline(&options),
            Some(head + Duration::from_secs(1))
        );
        assert_eq!(Phase::Busy(1).deadline(&options), None);
    }
}
