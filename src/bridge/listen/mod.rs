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
//!
//! | file         | job                                                  |
//! |--------------|------------------------------------------------------|
//! | `mod.rs`     | the accept loop: the cap, accept errors, shutdown    |
//! | `conn.rs`    | one connection: TLS, HTTP, its watchdog, refusals    |
//! | `heads.rs`   | what unfinished request heads may cost, together     |
//! | `options.rs` | limits, TLS files, the Unix socket, the base path    |
//! | `activation.rs` | systemd: LISTEN_FDS, NOTIFY_SOCKET, the watchdog  |

mod activation;
mod conn;
mod heads;
mod serve_options;

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use self::activation::{Notifier, inherited};
use self::conn::{ListenShared, REFUSAL_SLOTS, Stream, connection, refuse};
pub use self::serve_options::{Listener, ServeOptions, Tls, bind_unix, validate_base_path};

/// The pause after an accept error that is not the peer's (EMFILE,
/// ENFILE, ENOBUFS): retrying at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

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
    let shared = Arc::new(ListenShared {
        app,
        base_path,
        tls: options
            .tls
            .as_ref()
            .map(|tls| TlsAcceptor::from(tls.0.clone())),
        options,
        shutdown: shutdown.clone(),
        heads: Arc::default(),
    });
    let connections = TaskTracker::new();
    let mut stop = pin!(stop);
    // Accept errors and a full house are logged once per burst, not per
    // socket: a flood must not become a flood of log lines.
    let (mut accept_failing, mut full) = (Throttle::default(), Throttle::default());
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = accept(&listener) => accepted,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            // The peer gave up before we took it: nothing to back off from.
            Err(e) if is_peer_error(&e) => continue,
            Err(e) => {
                if accept_failing.ready() {
                    tracing::warn!("accepting connections failed, backing off: {e}");
                }
                tokio::select! {
                    biased;
                    () = &mut stop => break,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                }
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            if full.ready() {
                tracing::warn!(
                    "{} connections open (--max-connections): refusing new ones",
                    shared.options.max_connections
                );
            }
            // Under TLS a plain-text 503 would be noise: just close.
            if shared.tls.is_none() {
                // All slots busy: accepting waits for one (the backlog
                // holds the next clients meanwhile, briefly).
                let slot = tokio::select! {
                    biased;
                    () = &mut stop => break,
                    slot = refusals.clone().acquire_owned() => slot,
                };
                if let Ok(slot) = slot {
                    connections.spawn(refuse(stream, slot));
                }
            }
            continue;
        };
        connections.spawn(connection(stream, permit, shared.clone()));
    }
    drop(listener);
    shutdown.cancel();
    connections.close();
    let _ = tokio::time::timeout(grace, connections.wait()).await;
}

/// How often one kind of warning may be logged.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Lets a warning through at most once per [`WARN_EVERY`].
#[derive(Default)]
struct Throttle(Option<tokio::time::Instant>);

impl Throttle {
    fn ready(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        let ready = self.0.is_none_or(|last| now - last >= WARN_EVERY);
        if ready {
            self.0 = Some(now);
        }
        ready
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
