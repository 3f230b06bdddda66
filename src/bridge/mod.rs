//! The web bridge behind `tmux-engine serve`: HTTP routes over a
//! [`Registry`], a WebSocket per viewer over an [`Attacher`], and the page
//! that puts both in a browser.
//!
//! | file        | job                                                    |
//! |-------------|--------------------------------------------------------|
//! | `mod.rs`    | [`Bridge`], its config, the router, serving, shutdown  |
//! | `auth.rs`   | tokens, carriers, constant-time compare, origin check  |
//! | `api.rs`    | the JSON routes and the error-to-status mapping        |
//! | `ws.rs`     | the WebSocket: refusals as close codes, the pump       |
//! | `frames.rs` | the WebSocket grammar (query, frames), sans IO         |
//! | `page.rs`   | the embedded page and assets                           |
//!
//! The protocol (routes, frames, close codes) is in the README. The bridge
//! never writes HTTP or WebSocket framing itself (axum does), and never
//! owns the terminals: shutting it down leaves them running.

mod api;
pub mod auth;
pub mod frames;
mod page;
mod ws;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use self::api::ApiError;
pub use self::auth::{Auth, Principal, Tokens};
pub use self::ws::MAX_CLIENT_MESSAGE;
use crate::attach::{Attacher, AttacherConfig};
use crate::registry::Registry;
use crate::{Error, Result};

/// The largest JSON request body (a `send`'s text is the big one).
pub const MAX_BODY: usize = 1 << 20;

/// How long shutdown waits for in-flight requests (a `send` may wait 30 s)
/// and for viewers to take their close frame.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How often WebSocket viewers are pinged unless configured otherwise.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(20);

/// How a [`Bridge`] authenticates and what it keeps for resumes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BridgeConfig {
    /// Tokens, or open access.
    pub auth: Auth,
    /// Origins besides the page's own that may open a WebSocket.
    pub allow_origins: Vec<String>,
    /// Bytes of output each terminal keeps for resuming viewers.
    pub replay_bytes: usize,
    /// Host names (`NAME` or `NAME:PORT`) a request's `Host` may name
    /// besides the listen address and, on loopback, the loopback names.
    pub allow_hosts: Vec<String>,
    /// The TCP address the bridge listens on: its port and whether it is
    /// loopback decide which `Host` values are the bridge's own. `None` on
    /// a Unix socket (only [`allow_hosts`](BridgeConfig::allow_hosts)).
    pub listen: Option<SocketAddr>,
    /// The page is served over `https` (TLS here or at a proxy): its own
    /// origin has that scheme and the cookie is `Secure`.
    pub https: bool,
    /// The path prefix the bridge is mounted under: empty, or `/prefix`
    /// without a trailing slash.
    pub base_path: String,
    /// How often a WebSocket viewer is pinged; one that stops answering is
    /// closed.
    pub ping_interval: Duration,
}

impl BridgeConfig {
    /// A config with `auth`, no extra origins and a 1 MiB replay ring.
    pub fn new(auth: Auth) -> BridgeConfig {
        BridgeConfig {
            auth,
            allow_origins: Vec::new(),
            replay_bytes: AttacherConfig::default().ring_bytes,
            allow_hosts: Vec::new(),
            listen: None,
            https: false,
            base_path: String::new(),
            ping_interval: DEFAULT_PING_INTERVAL,
        }
    }

    /// Lets requests name `host` (`NAME` or `NAME:PORT`) in `Host`.
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> BridgeConfig {
        self.allow_hosts.push(host.into());
        self
    }

    /// Records the TCP address the bridge listens on.
    #[must_use]
    pub fn listening_on(mut self, addr: SocketAddr) -> BridgeConfig {
        self.listen = Some(addr);
        self
    }

    /// Marks the page as served over `https`.
    #[must_use]
    pub fn https(mut self, https: bool) -> BridgeConfig {
        self.https = https;
        self
    }

    /// Mounts the bridge under `prefix` (`/prefix`).
    #[must_use]
    pub fn base_path(mut self, prefix: impl Into<String>) -> BridgeConfig {
        self.base_path = prefix.into();
        self
    }

    /// Sets the WebSocket ping interval.
    #[must_use]
    pub fn ping_interval(mut self, interval: Duration) -> BridgeConfig {
        self.ping_interval = interval;
        self
    }

    /// Allows WebSocket upgrades from `origin` too.
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> BridgeConfig {
        self.allow_origins.push(origin.into());
        self
    }

    /// Sets the replay ring's size.
    #[must_use]
    pub fn replay_bytes(mut self, bytes: usize) -> BridgeConfig {
        self.replay_bytes = bytes;
        self
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    registry: Registry,
    attacher: Attacher,
    auth: Arc<Auth>,
    allow_origins: Arc<Vec<String>>,
    /// The whole configuration (hosts, scheme, base path, pings).
    config: Arc<BridgeConfig>,
    /// Cancelled when the bridge shuts down: sessions close with 1001.
    shutdown: CancellationToken,
    /// The WebSocket sessions, awaited at shutdown.
    sessions: TaskTracker,
}

/// The web bridge over one registry.
#[derive(Clone)]
pub struct Bridge {
    state: AppState,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge").finish_non_exhaustive()
    }
}

impl Bridge {
    /// A bridge over `registry`; the registry stays the caller's (shut it
    /// down after [`serve`](Bridge::serve) returns).
    pub fn new(registry: Registry, config: BridgeConfig) -> Bridge {
        let attacher = Attacher::with_config(
            registry.clone(),
            AttacherConfig::default().ring_bytes(config.replay_bytes),
        );
        Bridge {
            state: AppState {
                registry,
                attacher,
                auth: Arc::new(config.auth.clone()),
                allow_origins: Arc::new(config.allow_origins.clone()),
                config: Arc::new(config),
                shutdown: CancellationToken::new(),
                sessions: TaskTracker::new(),
            },
        }
    }

    /// The routes: the page, the JSON API (both behind authentication) and
    /// the WebSocket (which authenticates itself, to answer with close
    /// codes).
    pub fn router(&self) -> Router {
        let guarded = page::routes()
            .merge(api::routes())
            .layer(middleware::from_fn_with_state(
                self.state.clone(),
                authenticate,
            ));
        guarded
            .route("/api/terminals/{t}/attach", routing::get(ws::attach))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(self.state.clone())
    }

    /// Serves on `listener` until `stop` resolves, then: stops accepting,
    /// closes every WebSocket with 1001, gives in-flight requests
    /// [`SHUTDOWN_GRACE`], and shuts the attacher down. Terminals keep
    /// running.
    ///
    /// # Errors
    /// `IO` when serving fails.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let shutdown = self.state.shutdown.clone();
        let server = axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown.clone().cancelled_owned())
            .into_future();
        let served = tokio::select! {
            served = server => served.map_err(|e| Error::io("serving http", e)),
            () = async {
                stop.await;
                shutdown.cancel();
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => Ok(()),
        };
        self.shutdown().await;
        served
    }

    /// Closes every WebSocket with 1001 (waiting up to
    /// [`SHUTDOWN_GRACE`]) and shuts the attacher down. Also what
    /// [`serve`](Bridge::serve) does on its way out.
    pub async fn shutdown(&self) {
        self.state.shutdown.cancel();
        self.state.sessions.close();
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.state.sessions.wait()).await;
        self.state.attacher.shutdown().await;
    }
}

/// The middleware of every route but the WebSocket: a [`Principal`] for
/// the handlers, or 401; a body announced larger than [`MAX_BODY`] is
/// refused (413) before a byte of it is read.
async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let announced = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_BODY as u64) {
        return ApiError::from(Error::InvalidInput(format!(
            "request body of {} bytes is larger than {MAX_BODY}",
            announced.unwrap_or(0)
        )))
        .with_status(axum::http::StatusCode::PAYLOAD_TOO_LARGE)
        .into_response();
    }
    let query = request.uri().query().unwrap_or("");
    match state.auth.authenticate(request.headers(), query) {
        Some(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        None => ApiError::unauthorized().into_response(),
    }
}

async fn not_found() -> Response {
    ApiError::from(Error::InvalidInput("no such route".to_owned()))
        .with_status(axum::http::StatusCode::NOT_FOUND)
        .into_response()
}

/// The environment of the terminals `serve` spawns: `PATH`, `HOME`,
/// `USER`, `LANG`, `LC_*`, `SHELL` and `TERM` from this process, nothing
/// else (the bridge's own secrets must not reach a browser's shell). Pass
/// it to [`TmuxConfig::environment`](crate::registry::tmux::TmuxConfig::environment).
pub fn clean_environment() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(key, _)| {
            let key = key.to_string_lossy();
            matches!(
                key.as_ref(),
                "PATH" | "HOME" | "USER" | "LANG" | "SHELL" | "TERM"
            ) || key.starts_with("LC_")
        })
        .collect()
}
