//! The web bridge behind `tmux-engine serve`: HTTP routes over a
//! [`Registry`], a WebSocket per viewer over an [`Attacher`], and the page
//! that puts both in a browser.
//!
//! | file        | job                                                    |
//! |-------------|--------------------------------------------------------|
//! | `mod.rs`    | [`Bridge`], the router, serving, shutdown              |
//! | `config.rs` | [`BridgeConfig`]: its builder and the transport rule  |
//! | `guard.rs`  | the front door: allowed hosts, origins, body types     |
//! | `auth.rs`   | tokens, the Bearer carriers, constant-time compare     |
//! | `files.rs`  | files in and out of a terminal's working directory     |
//! | `signin/`   | one-time sign-in codes, sessions, links; their routes  |
//! | `scope.rs`  | a share link's holder: one terminal only              |
//! | `api.rs`    | the JSON routes and the error-to-status mapping        |
//! | `openapi/`  | the one route table: the router and its OpenAPI 3.1    |
//! | `ws/`       | the WebSocket: refusals as close codes, the pump       |
//! | `frames.rs` | the WebSocket grammar (query, frames), sans IO         |
//! | `page/`     | the embedded page and assets                           |
//! | `identity.rs`| the user a trusted proxy names (`--user-header`)     |
//! | `handoff.rs`| sessions carried from a draining serve to the next     |
//! | `probes.rs` | `/healthz`, `/readyz`, `/metrics` for schedulers       |
//! | `prove.rs`  | proof that a serve is the one `serve.json` records     |
//! | `metrics.rs`| the counters and their Prometheus text                 |
//! | `listen/`   | the accept loop: timeouts, connection cap, TLS, unix   |
//! | `node.rs`   | `--node`: the node on every terminal id, the peers     |
//!
//! The protocol (routes, frames, close codes) is in docs/serve.md. The bridge
//! never writes HTTP or WebSocket framing itself (axum does), and never
//! owns the terminals: shutting it down leaves them running.

mod api;
mod auth;
mod config;
mod files;
mod frames;
mod guard;
mod handoff;
mod identity;
mod listen;
mod metrics;
mod node;
mod openapi;
mod page;
mod probes;
mod prove;
mod scope;
mod signin;
mod ws;

use std::ffi::OsString;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) use self::api::ApiError;
pub use self::auth::{Auth, Principal, Tokens, generate_token};
pub use self::config::BridgeConfig;
pub use self::files::TRANSFER_LOG;
pub use self::guard::{check_allow_host, check_allow_origin};
pub use self::handoff::HANDOFF;
pub use self::identity::{Peer, TrustedProxy};
pub use self::listen::{
    Listener, Notifier, ServeOptions, Tls, bind_unix, inherited, validate_base_path,
};
pub use self::node::{PeerNode, check_node_name};
pub use self::page::PageOptions;
pub use self::prove::{ProofKey, nonce as proof_nonce};
use crate::attach::Attacher;
use crate::registry::Registry;
use crate::{Error, Result};

/// The largest JSON request body (a `send`'s text is the big one).
pub(crate) const MAX_BODY: usize = 1 << 20;

/// How long shutdown waits for in-flight requests (a `send` may wait 30 s)
/// and for viewers to take their close frame, together.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long a drain may take, from `stop` to [`Bridge::serve_with`]
/// returning: `SHUTDOWN_GRACE` (5 s) for requests and viewers, one more second
/// for WebSocket sessions still saying goodbye, and the attacher's own
/// bounded shutdown. `serve` adds at most 5 s to detach from the
/// terminals' servers.
pub const DRAIN_BOUND: Duration = Duration::from_secs(10);

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    registry: Registry,
    attacher: Attacher,
    auth: Arc<Auth>,
    /// The host, origin and body-type policy from the config.
    guard: Arc<guard::Guard>,
    /// The whole configuration (hosts, scheme, base path, pings).
    config: Arc<BridgeConfig>,
    /// Cancelled when the bridge shuts down: sessions close with 1001.
    shutdown: CancellationToken,
    /// The WebSocket sessions, awaited at shutdown.
    sessions: TaskTracker,
    /// Sign-in codes and the sessions they became.
    signins: Arc<signin::SignIns>,
    /// What `/metrics` reports.
    metrics: Arc<metrics::Metrics>,
    /// Who types into which terminal now (the page's badge).
    typists: Arc<ws::typing::Typists>,
}

/// How a request's principal was known (a request extension, for the
/// audit log): `token`, `session` or `proxy`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Via(pub(crate) &'static str);

/// Who a request is, as [`AppState::identify`] judges it.
pub(crate) enum Identified {
    /// A trusted proxy's user, a token or a session.
    Known(Principal, Option<scope::Scope>, Via),
    /// No credential that works.
    Nobody,
    /// A user header from a peer that is not a trusted proxy.
    Refused(String),
}

impl AppState {
    /// Who a request is: the user a trusted proxy names (which wins over
    /// a credential the browser also sent), else its credential
    /// ([`principal`](AppState::principal)).
    pub(crate) fn identify(
        &self,
        headers: &axum::http::HeaderMap,
        peer: Option<identity::Peer>,
        presented: Option<&str>,
    ) -> Identified {
        if let Some(proxy) = &self.config.trusted_proxy {
            match proxy.vouch(headers, peer) {
                identity::Vouched::User(principal) => {
                    return Identified::Known(principal, None, Via("proxy"));
                }
                identity::Vouched::Refused(why) => return Identified::Refused(why),
                identity::Vouched::Absent => {}
            }
        }
        match self.principal(presented) {
            Some((principal, scope)) => {
                let via = if self.auth.token_principal(presented).is_some() {
                    "token"
                } else {
                    "session"
                };
                Identified::Known(principal, scope, Via(via))
            }
            None => Identified::Nobody,
        }
    }

    /// Appends `act` to the audit log, when there is one. A failed write
    /// is logged, never the request's failure.
    pub(crate) fn audit(&self, act: crate::audit::Act) {
        if let Some(log) = &self.config.audit
            && let Err(error) = log.record(&act)
        {
            tracing::error!(%error, act = %act.act, "writing the audit log");
        }
    }

    /// The principal a credential acts as: a token, else a session (with
    /// its one terminal for a share link's holder); under `--no-auth`
    /// everyone is the open principal.
    pub(crate) fn principal(
        &self,
        presented: Option<&str>,
    ) -> Option<(Principal, Option<scope::Scope>)> {
        if let Some(principal) = self.auth.token_principal(presented) {
            return Some((principal, None));
        }
        let (principal, terminal) = self.signins.session(presented?.as_bytes())?;
        let scope = terminal.map(|(terminal, files)| scope::Scope { terminal, files });
        Some((principal, scope))
    }
}

/// Removes the partial uploads a killed `serve` left in the working
/// directories of its owners' terminals ([`files::sweep`]).
async fn sweep_partial_uploads(state: AppState) {
    let mut dirs = Vec::new();
    for owner in state.auth.owners() {
        let owned = || state.registry.owner(&owner);
        let Ok(terminals) = owned().list().await else {
            continue;
        };
        for terminal in terminals {
            if let Ok(Some(dir)) = owned().working_directory(terminal.id.as_str()).await {
                dirs.push(dir);
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    let swept = tokio::task::spawn_blocking(move || {
        dirs.iter().map(|dir| files::sweep_path(dir)).sum::<usize>()
    })
    .await
    .unwrap_or(0);
    if swept > 0 {
        tracing::info!(target: files::TRANSFER_LOG, swept, "removed partial uploads at start");
    }
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
        let attacher = Attacher::new(registry.clone());
        Bridge {
            state: AppState {
                registry,
                attacher,
                auth: Arc::new(config.auth.clone()),
                guard: Arc::new(guard::Guard::new(&config)),
                config: Arc::new(config),
                shutdown: CancellationToken::new(),
                sessions: TaskTracker::new(),
                signins: Arc::new(signin::SignIns::default()),
                metrics: Arc::default(),
                typists: Arc::default(),
            },
        }
    }

    /// A one-time sign-in code for `principal` (what `serve` prints):
    /// the path to open under the base path, `/#code=CODE`.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a lifetime past `MAX_CODE_LIFETIME` (7 days) or too
    /// many live links; `IO` without randomness.
    pub fn sign_in_path(&self, principal: Principal, lifetime: Duration) -> Result<String> {
        let path = self.state.signins.mint(principal, lifetime)?.path;
        Ok(match &self.state.config.node {
            Some(node) => node::qualify_link(node, &path),
            None => path,
        })
    }

    /// The routes: the page, the JSON API and unknown paths (all behind
    /// authentication, so an unknown path without a token is 401 like any
    /// other) and the WebSocket (which authenticates itself, to answer
    /// with close codes); every one of them behind the front door
    /// (`guard.rs`: allowed hosts, origins and body types), which comes
    /// first, with `--no-auth` too.
    pub fn router(&self) -> Router {
        let authenticated = openapi::router(false)
            .route("/metrics", axum::routing::get(probes::metrics))
            .fallback(not_found)
            .layer(middleware::from_fn_with_state(
                self.state.clone(),
                authenticate,
            ));
        let routed = authenticated
            .merge(openapi::router(true))
            .layer(middleware::map_response(no_store))
            .merge(page::routes())
            .layer(middleware::from_fn_with_state(
                self.state.clone(),
                guard::front_door,
            ))
            .merge(probes::routes())
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(self.state.clone());
        if self.state.config.node.is_none() {
            return routed;
        }
        // Around the whole router, so its routing sees the registry's ids
        // (a layer on a router runs after its routing).
        Router::new()
            .fallback_service(routed)
            .layer(middleware::from_fn_with_state(
                self.state.clone(),
                node::qualify_ids,
            ))
    }

    /// Serves on `listener` with the default [`ServeOptions`]; see
    /// [`serve_with`](Bridge::serve_with).
    ///
    /// # Errors
    /// As [`serve_with`](Bridge::serve_with).
    pub async fn serve(
        &self,
        listener: impl Into<Listener>,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        self.serve_with(listener, ServeOptions::default(), stop)
            .await
    }

    /// Serves on `listener` under `options` (timeouts, connection cap,
    /// TLS) until `stop` resolves, then drains: stops accepting, answers
    /// `/readyz` 503 on connections still open, closes every WebSocket
    /// with 1012 (service restart) and the reason the page shows, gives
    /// in-flight requests `SHUTDOWN_GRACE`, and shuts the attacher down,
    /// all within [`DRAIN_BOUND`]. Terminals keep running.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a TCP listener the transport rule refuses
    /// ([`BridgeConfig::check_transport`]), before anything is served;
    /// then none: accept errors back off and are logged, never fatal.
    pub async fn serve_with(
        &self,
        listener: impl Into<Listener>,
        options: ServeOptions,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let listener = listener.into();
        if let Listener::Tcp(tcp) = &listener {
            let addr = tcp
                .local_addr()
                .map_err(|e| Error::io("reading the listening address", e))?;
            self.state
                .config
                .check_transport(addr, options.tls.is_some())?;
        }
        // Partial uploads a killed serve left behind, swept off the
        // serving path.
        tokio::spawn(sweep_partial_uploads(self.state.clone()));
        listen::serve(
            listener,
            self.router(),
            self.state.config.base_path.clone(),
            options,
            self.state.shutdown.clone(),
            SHUTDOWN_GRACE,
            stop,
        )
        .await;
        self.shutdown().await;
        Ok(())
    }

    /// Closes every WebSocket with 1012 (waiting up to
    /// `SHUTDOWN_GRACE`, less what [`serve`](Bridge::serve) already waited
    /// for them) and shuts the attacher down. Also what
    /// [`serve`](Bridge::serve) does on its way out.
    pub async fn shutdown(&self) {
        let waited = self.state.shutdown.is_cancelled();
        self.state.shutdown.cancel();
        self.state.sessions.close();
        // After serve's grace the sessions were connections it waited
        // for: one more second, not a second grace.
        let grace = if waited {
            Duration::from_secs(1)
        } else {
            SHUTDOWN_GRACE
        };
        let _ = tokio::time::timeout(grace, self.state.sessions.wait()).await;
        let left = DRAIN_BOUND.saturating_sub(SHUTDOWN_GRACE + grace);
        let _ = tokio::time::timeout(left, self.state.attacher.shutdown()).await;
    }

    /// Writes this bridge's sign-in links and sessions for the next serve
    /// on the state directory `dir` (see [`take_over`](Bridge::take_over)):
    /// a page open across a restart stays signed in.
    ///
    /// # Errors
    /// `IO` when the file cannot be written.
    pub fn hand_off(&self, dir: &std::path::Path) -> Result<()> {
        handoff::hand_off(&self.state.signins, dir)
    }

    /// Takes over the links and sessions a previous serve on `dir` handed
    /// off within the last 10 minutes, and removes its file: how many
    /// sessions came over.
    pub fn take_over(&self, dir: &std::path::Path) -> usize {
        handoff::take_over(&self.state.signins, dir)
    }
}

/// The middleware of every API route but the WebSocket and the sign-in
/// itself: a [`Principal`] for the handlers, or 401; a body announced
/// larger than [`MAX_BODY`] is refused (413) before a byte of it is read,
/// except an upload's (bounded by its own limit, `files.rs`).
/// The only carrier is `Authorization: Bearer`, which a browser never
/// adds by itself: no other page can ride it (`auth.rs`).
async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let announced = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_BODY as u64)
        && !files::is_upload(request.method(), request.uri().path())
    {
        return ApiError::from(Error::InvalidInput(format!(
            "request body of {} bytes is larger than {MAX_BODY}",
            announced.unwrap_or(0)
        )))
        .with_status(axum::http::StatusCode::PAYLOAD_TOO_LARGE)
        .into_response();
    }
    let peer = request.extensions().get::<identity::Peer>().copied();
    let presented = auth::bearer(request.headers());
    match state.identify(request.headers(), peer, presented.as_deref()) {
        Identified::Known(principal, None, via) => {
            request.extensions_mut().insert(principal);
            request.extensions_mut().insert(via);
            next.run(request).await
        }
        // A share link's holder: that terminal's routes only.
        Identified::Known(principal, Some(scope), via) => {
            let path = request.uri().path().to_owned();
            let judged = scope::judge(&state, &principal, &scope, request.method(), &path).await;
            let filter = match judged {
                Ok(filter) => filter,
                Err(refusal) => return refusal.into_response(),
            };
            request.extensions_mut().insert(principal);
            request.extensions_mut().insert(via);
            request.extensions_mut().insert(scope.clone());
            let response = next.run(request).await;
            scope::filter(filter, &scope, response).await
        }
        Identified::Refused(why) => {
            ApiError::new(axum::http::StatusCode::FORBIDDEN, "UNTRUSTED_PROXY", why).into_response()
        }
        Identified::Nobody => ApiError::unauthorized().into_response(),
    }
}

/// Every API answer (errors included) is `Cache-Control: no-store`: a
/// terminal list or a screen must not stay in a browser's disk cache.
async fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}

async fn not_found() -> Response {
    ApiError::from(Error::InvalidInput("no such route".to_owned()))
        .with_status(axum::http::StatusCode::NOT_FOUND)
        .into_response()
}

/// The environment of the terminals `serve` spawns: `PATH`, `HOME`,
/// `USER`, `LANG`, `LC_*`, `SHELL` and `TERM` from this process, nothing
/// else (the bridge's own secrets must not reach a browser's shell). Pass
/// it to [`TmuxConfig::environment`](crate::backend::TmuxConfig::environment).
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
