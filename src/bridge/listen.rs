//! The bridge's accept loop: hyper's HTTP/1.1 connections (with upgrades,
//! for the WebSocket) over TCP or a Unix socket, optionally under TLS,
//! with the limits `axum::serve` lacks: a header-read timeout (also for a
//! connection that never sends a byte, and for a TLS handshake), an idle
//! keep-alive timeout, and a connection cap beyond which a new client gets
//! a quick `503` instead of a hang. Accept errors (EMFILE) back off and
//! never stop the loop.
//!
//! Every connection, WebSocket included, holds one permit of the cap until
//! its socket closes. The base path is applied here too: requests are
//! handed to the router with the prefix stripped.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::path::Path;
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
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::{Error, Result};

/// How long a client may take to send a request's head (and to finish a
/// TLS handshake) unless configured otherwise.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a kept-alive connection may sit with no request in flight
/// unless configured otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Refusals (`503`s) lingering at once at most; beyond them an over-limit
/// connection gets its `503` only if the socket takes it at once, and is
/// closed, so a flood cannot spend fds on refusals.
const REFUSAL_SLOTS: usize = 64;

/// How long a refused connection stays open for its client to send its
/// request and read the `503`: closing with the request unread would reset
/// the connection under the client's read.
const REFUSAL_LINGER: Duration = Duration::from_millis(250);

/// The pause after an accept error that is not the peer's (EMFILE,
/// ENFILE, ENOBUFS): retrying at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The default connection cap: half the soft `RLIMIT_NOFILE`, so the
/// other half stays for the terminals' control clients (pipes), PTY
/// viewers, the registry's files and tmux sockets; at least 16.
pub fn default_max_connections() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let half = limit.map_or(1 << 16, |limit| limit / 2);
    usize::try_from(half).unwrap_or(usize::MAX).max(16)
}

/// Where the bridge listens.
#[derive(Debug)]
pub enum Listener {
    /// A bound TCP socket.
    Tcp(TcpListener),
    /// A bound Unix socket (behind a reverse proxy).
    Unix(UnixListener),
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Listener {
        Listener::Tcp(listener)
    }
}

impl From<UnixListener> for Listener {
    fn from(listener: UnixListener) -> Listener {
        Listener::Unix(listener)
    }
}

/// Binds a Unix socket at `path`, created `0600` (bound in a private
/// directory beside it, then renamed into place, so it is never reachable
/// with wider modes). A stale socket of ours nobody listens on is
/// replaced; anything else at `path` is refused.
///
/// # Errors
/// `INVALID_INPUT` when `path` is not a socket, is another user's, or a
/// live server listens on it; `IO` when binding fails.
pub fn bind_unix(path: &Path) -> Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            if !meta.file_type().is_socket() {
                return Err(Error::InvalidInput(format!("{shown} exists and is not a socket")));
            }
            if meta.uid() != rustix::process::geteuid().as_raw() {
                return Err(Error::InvalidInput(format!("socket {shown} belongs to another user")));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(Error::InvalidInput(format!(
                    "another server is listening on {shown}"
                )));
            }
            std::fs::remove_file(path)
                .map_err(|e| Error::io(format!("removing stale socket {shown}"), e))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(format!("inspecting {shown}"), e)),
    }
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staging = tempfile::Builder::new()
        .prefix(".te")
        .tempdir_in(parent)
        .map_err(|e| Error::io(format!("creating a directory beside {shown}"), e))?;
    let bound = staging.path().join("s");
    let listener = std::os::unix::net::UnixListener::bind(&bound)
        .map_err(|e| Error::io(format!("listening on {shown}"), e))?;
    std::fs::set_permissions(&bound, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&bound, path))
        .and_then(|()| listener.set_nonblocking(true))
        .map_err(|e| Error::io(format!("placing socket {shown}"), e))?;
    UnixListener::from_std(listener).map_err(|e| Error::io(format!("listening on {shown}"), e))
}

/// A TLS server configuration (rustls, `ring` provider, HTTP/1.1 only).
#[derive(Clone)]
pub struct Tls(Arc<rustls::ServerConfig>);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// Loads a PEM certificate chain and a PEM private key.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming the file that cannot be read, holds no
    /// certificate or key, or does not match the other.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Tls> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
            Error::InvalidInput(format!("{what} {}: {e}", path.display()))
        };
        let certs = CertificateDer::pem_file_iter(cert)
            .and_then(Iterator::collect::<std::result::Result<Vec<_>, _>>)
            .map_err(|e| bad("TLS certificate file", cert, &e))?;
        if certs.is_empty() {
            return Err(bad("TLS certificate file", cert, &"no certificate in it"));
        }
        let private = PrivateKeyDer::from_pem_file(key).map_err(|e| bad("TLS key file", key, &e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::InvalidInput(format!("TLS: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, private)
            .map_err(|e| {
                Error::InvalidInput(format!(
                    "TLS certificate file {} with key file {}: {e}",
                    cert.display(),
                    key.display()
                ))
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls(Arc::new(config)))
    }
}

/// The connection limits and TLS of [`Bridge::serve_with`](super::Bridge::serve_with).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Time to receive a request's head, counted from the connection's
    /// start (or the first byte after an idle keep-alive pause); also the
    /// TLS handshake's limit.
    pub header_timeout: Duration,
    /// Time a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Connections (WebSockets included) served at once.
    pub max_connections: usize,
    /// TLS, or plain HTTP.
    pub tls: Option<Tls>,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: default_max_connections(),
            tls: None,
        }
    }
}

impl ServeOptions {
    /// Sets the header-read (and TLS handshake) timeout.
    #[must_use]
    pub fn header_timeout(mut self, timeout: Duration) -> ServeOptions {
        self.header_timeout = timeout;
        self
    }

    /// Sets the idle keep-alive timeout.
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Duration) -> ServeOptions {
        self.idle_timeout = timeout;
        self
    }

    /// Sets the connection cap (at least 1).
    #[must_use]
    pub fn max_connections(mut self, max: usize) -> ServeOptions {
        self.max_connections = max.max(1);
        self
    }

    /// Serves TLS.
    #[must_use]
    pub fn tls(mut self, tls: Tls) -> ServeOptions {
        self.tls = Some(tls);
        self
    }
}

/// Checks a `--base-path`: empty (or `/`) for none, else `/a/b` with
/// segments of `A-Z a-z 0-9 - . _ ~` that are not `.` or `..`, no
/// trailing slash. Returns the normalised prefix.
///
/// # Errors
/// `INVALID_INPUT` naming the prefix and what is wrong with it.
pub fn validate_base_path(prefix: &str) -> Result<String> {
    if prefix.is_empty() || prefix == "/" {
        return Ok(String::new());
    }
    let bad = |why: &str| Error::InvalidInput(format!("base path {prefix:?}: {why}"));
    let Some(rest) = prefix.strip_prefix('/') else {
        return Err(bad("must start with /"));
    };
    if rest.ends_with('/') {
        return Err(bad("must not end with /"));
    }
    for segment in rest.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(bad("empty, . or .. segment"));
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        {
            return Err(bad("only A-Z a-z 0-9 - . _ ~ and / are allowed"));
        }
    }
    Ok(prefix.to_owned())
}

/// A path no route has: where requests outside the base path are sent,
/// so the router's own layers (host check, authentication) still answer
/// them, and its fallback says 404.
const OUTSIDE: &str = "/.outside-base-path";

/// What the accept loop shares with its connections.
struct Shared {
    app: Router,
    base_path: String,
    options: ServeOptions,
    tls: Option<TlsAcceptor>,
    /// Cancelled at shutdown: connections finish their request and close.
    shutdown: CancellationToken,
}

/// Serves `app` on `listener` until `stop` resolves; then stops accepting,
/// cancels `shutdown` and gives open connections `grace` to finish.
pub(crate) async fn serve(
    listener: Listener,
    app: Router,
    base_path: String,
    options: ServeOptions,
    shutdown: CancellationToken,
    grace: Duration,
    stop: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(options.max_connections));
    let refusals = Arc::new(Semaphore::new(REFUSAL_SLOTS));
    let shared = Arc::new(Shared {
        app,
        base_path,
        tls: options.tls.as_ref().map(|tls| TlsAcceptor::from(tls.0.clone())),
        options,
        shutdown: shutdown.clone(),
    });
    let connections = TaskTracker::new();
    let mut stop = pin!(stop);
    // Log an accept error or a full house once per burst, not per socket.
    let (mut accept_failing, mut full) = (false, false);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = accept(&listener) => accepted,
        };
        let stream = match accepted {
            Ok(stream) => {
                accept_failing = false;
                stream
            }
            // The peer gave up before we took it: nothing to back off from.
            Err(e) if is_peer_error(&e) => continue,
            Err(e) => {
                if !accept_failing {
                    tracing::warn!("accepting connections failed, backing off: {e}");
                    accept_failing = true;
                }
                tokio::select! {
                    biased;
                    () = &mut stop => break,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                }
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            if !full {
                tracing::warn!(
                    "{} connections open (--max-connections): refusing new ones",
                    shared.options.max_connections
                );
                full = true;
            }
            // Under TLS a plain-text 503 would be noise: just close.
            if shared.tls.is_none() {
                match refusals.clone().try_acquire_owned() {
                    Ok(slot) => drop(connections.spawn(refuse(stream, slot))),
                    Err(_) => stream.try_refuse(),
                }
            }
            continue;
        };
        full = false;
        connections.spawn(connection(stream, permit, shared.clone()));
    }
    drop(listener);
    shutdown.cancel();
    connections.close();
    let _ = tokio::time::timeout(grace, connections.wait()).await;
}

/// An accepted socket of either kind.
enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Stream {
    /// Writes the `503` if the socket takes it without waiting (a fresh
    /// socket's buffer does), then closes.
    fn try_refuse(self) {
        let refusal = refusal();
        let _ = match self {
            Stream::Tcp(stream) => stream.try_write(&refusal),
            Stream::Unix(stream) => stream.try_write(&refusal),
        };
    }
}

async fn accept(listener: &Listener) -> io::Result<Stream> {
    match listener {
        Listener::Tcp(listener) => {
            let (stream, _) = listener.accept().await?;
            // Keystrokes and their echo are tiny writes: never delay them.
            let _ = stream.set_nodelay(true);
            Ok(Stream::Tcp(stream))
        }
        Listener::Unix(listener) => Ok(Stream::Unix(listener.accept().await?.0)),
    }
}

/// Errors of one half-open connection, not of the listener.
fn is_peer_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
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
async fn refuse(stream: Stream, _slot: OwnedSemaphorePermit) {
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
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            stream.write_all(&refusal()).await?;
            stream.shutdown().await?;
            while stream.read(&mut chunk).await? > 0 {}
            io::Result::Ok(())
        })
        .await;
    }
    match stream {
        Stream::Tcp(stream) => answer(stream).await,
        Stream::Unix(stream) => answer(stream).await,
    }
}

async fn connection(stream: Stream, permit: OwnedSemaphorePermit, shared: Arc<Shared>) {
    match stream {
        Stream::Tcp(stream) => secure(stream, permit, shared).await,
        Stream::Unix(stream) => secure(stream, permit, shared).await,
    }
}

/// The TLS handshake, within the header timeout, then HTTP.
async fn secure<S>(stream: S, permit: OwnedSemaphorePermit, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Some(acceptor) = shared.tls.clone() else {
        return http(stream, permit, shared).await;
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
    http(stream, permit, shared).await;
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
            Phase::Waiting { head: head @ None, .. } => {
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
        if buf.filled().len() > before {
            self.activity.read();
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
async fn http<S>(stream: S, permit: OwnedSemaphorePermit, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Activity::new();
    let io = Watched {
        inner: stream,
        activity: activity.clone(),
        _permit: permit,
    };
    let service = {
        let (shared, activity) = (shared.clone(), activity.clone());
        hyper::service::service_fn(move |request: Request<Incoming>| {
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
async fn route(shared: &Shared, mut request: Request<Incoming>) -> Response<axum::body::Body> {
    let prefix = shared.base_path.as_str();
    if !prefix.is_empty() {
        let path = request.uri().path();
        let query = request.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
        let inner = match path.strip_prefix(prefix) {
            // The page builds URLs relative to itself: it must end in `/`.
            Some("") => return redirect(&format!("{prefix}/{query}")),
            Some(rest) if rest.starts_with('/') => rest.to_owned(),
            _ => OUTSIDE.to_owned(),
        };
        let mut parts = request.uri().clone().into_parts();
        parts.path_and_query = format!("{inner}{query}").parse().ok();
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    match shared.app.clone().oneshot(request.map(axum::body::Body::new)).await {
        Ok(response) => response,
        Err(never) => match never {},
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
mod tests {
    use super::*;

    #[test]
    fn base_paths() {
        for (given, want) in [("", ""), ("/", ""), ("/a", "/a"), ("/a-b/c_d.e~", "/a-b/c_d.e~")] {
            assert_eq!(validate_base_path(given).unwrap(), want, "{given}");
        }
        for bad in ["a", "/a/", "//a", "/a//b", "/./a", "/a/..", "/a b", "/a?b", "/a%2f", "/é"] {
            let error = validate_base_path(bad).unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT", "{bad}");
        }
    }

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
        let phase = |head, first| Phase::Waiting { since: now, head, first };
        assert_eq!(phase(None, true).deadline(&options), Some(now + Duration::from_secs(1)));
        assert_eq!(phase(None, false).deadline(&options), Some(now + Duration::from_secs(7)));
        let head = now + Duration::from_secs(3);
        assert_eq!(phase(Some(head), false).deadline(&options), Some(head + Duration::from_secs(1)));
        assert_eq!(Phase::Busy(1).deadline(&options), None);
    }
}
